"""Draft-length schedules: the k of each speculative step, chosen from what the run has accepted so far.

`generate(..., k=...)` takes an integer (a fixed k) or a schedule: a callable that receives the run's
`History` before each step and returns the k for that step (the engine then clips it to the
remaining budget).  The history holds only host integers the engine already has after its one
sync per step, so a schedule adds no synchronization.

The adaptive rule (chapter 06's dynamic configuration), stated before any result:
    1. the first `warmup` steps draft `k_start` tokens;
    2. after that, before each step, alpha_hat = the maximum-likelihood constant acceptance rate of
       every step so far, S / (S + F), with S the accepted drafts and F the steps (rows) that
       stopped at a rejection (`specdec.core.acceptance.fit_alpha`, for mixed k);
    3. k = argmax over k in 0..k_max of E[L](alpha_hat, k) / (T(k+1)/T(1) + k c), with the
       measured cost curve T and draft cost c (`specdec.core.cost.optimal_k`); ties to the smaller k;
    4. k = 0 means: stop drafting (plain decoding for the rest of the call: with no drafts the
       history no longer changes).

Example:
    schedule = AdaptiveK(c=0.15, curve={n: 1.0 + 0.1 * n for n in range(1, 10)}, k_max=8)
    generate(target, ids, drafter=draft, k=schedule, max_new_tokens=64)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specdec.core.cost import optimal_k

__all__ = ["History", "AdaptiveK", "LoadAware", "as_schedule"]


@dataclass
class History:
    """What a run has drafted and accepted so far (host integers, updated after each step)."""

    steps: int = 0        # steps taken (with or without drafts)
    drafted: int = 0      # drafts proposed, summed over rows
    accepted: int = 0     # drafts accepted, summed over rows
    stopped: int = 0      # (row, step) pairs that ended at a rejected draft: the MLE's failures
    last_k: int = 0       # the k of the last step
    running: int = 0      # rows in the batch of the coming step (set by the engine before it asks for k)

    def update(self, k: int, rows: int, accepted: int, stopped: int) -> None:
        self.steps += 1
        self.last_k = k
        if k > 0:
            self.drafted += k * rows
            self.accepted += accepted
            self.stopped += stopped

    def alpha_mle(self) -> float:
        """S / (S + F) over the drafting steps so far; NaN before any draft was judged.

        Example: after steps accepting [2 of 4] and [4 of 4] on one row: (2 + 4) / (6 + 1) = 0.857
        """
        judged = self.accepted + self.stopped
        return self.accepted / judged if judged else math.nan


class AdaptiveK:
    """The adaptive rule of the module docstring; call it with the `History` before each step."""

    def __init__(self, c: float, curve: dict, k_max: int, k_start: int = 4, warmup: int = 4):
        if not (isinstance(k_max, int) and k_max >= 1 and isinstance(k_start, int) and 1 <= k_start <= k_max
                and isinstance(warmup, int) and warmup >= 1):
            raise ValueError(f"need integers 1 <= k_start <= k_max and warmup >= 1, got k_start={k_start!r}, "
                             f"k_max={k_max!r}, warmup={warmup!r}")
        optimal_k(0.5, c, k_max, curve=curve)  # validates c and the curve now, not mid-run
        self.c, self.curve, self.k_max, self.k_start, self.warmup = float(c), dict(curve), k_max, k_start, warmup

    def __repr__(self) -> str:
        return f"AdaptiveK(c={self.c:.4g}, k_max={self.k_max}, k_start={self.k_start}, warmup={self.warmup})"

    def __call__(self, history: History) -> int:
        if history.steps < self.warmup:
            return self.k_start
        if history.last_k == 0 and history.steps > 0:
            return 0  # stopped drafting: nothing new to learn from
        alpha = history.alpha_mle()
        return self.k_start if math.isnan(alpha) else optimal_k(alpha, self.c, self.k_max, curve=self.curve)


class LoadAware:
    """A load-aware draft length, stated before any result (the rule production engines adopted:
    turn speculation off as the batch grows or acceptance drops, e.g. vLLM's disable-by-batch-size):

        1. k = 0 (plain decoding for this step) while the running batch exceeds ``max_batch``;
        2. once at least ``min_judged`` draft outcomes were judged (accepted drafts plus rows stopped
           at a rejection), k = 0 while the acceptance estimate alpha_hat (`History.alpha_mle`, all
           steps so far) is below ``min_alpha``;
        3. otherwise k = ``k``, shortened to ``k_small`` when the running batch exceeds ``small_above``.
    Unlike `AdaptiveK` the rule is re-evaluated every step: speculation resumes when the batch
    shrinks below ``max_batch``.  Example: LoadAware(4, max_batch=4)(History(running=8)) -> 0.
    """

    def __init__(self, k: int, max_batch: int, min_alpha: float = 0.0, min_judged: int = 16,
                 k_small: int | None = None, small_above: int | None = None):
        ints = [k, max_batch, min_judged] + [x for x in (k_small, small_above) if x is not None]
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in ints) or k < 1 or max_batch < 1 \
                or min_judged < 1 or (k_small is not None and not 1 <= k_small <= k) or \
                (small_above is not None and small_above < 1) or (k_small is None) != (small_above is None):
            raise ValueError(f"need integers k >= 1, max_batch >= 1, min_judged >= 1, and k_small in [1, k] given "
                             f"together with small_above >= 1; got k={k!r}, max_batch={max_batch!r}, "
                             f"min_judged={min_judged!r}, k_small={k_small!r}, small_above={small_above!r}")
        if not (isinstance(min_alpha, (int, float)) and 0.0 <= min_alpha <= 1.0):
            raise ValueError(f"min_alpha must lie in [0, 1], got {min_alpha!r}")
        self.k, self.max_batch, self.min_alpha, self.min_judged = k, max_batch, float(min_alpha), min_judged
        self.k_small, self.small_above = k_small, small_above

    def __repr__(self) -> str:
        return (f"LoadAware(k={self.k}, max_batch={self.max_batch}, min_alpha={self.min_alpha:g}, min_judged={self.min_judged}, "
                f"k_small={self.k_small}, small_above={self.small_above})")

    def __call__(self, history: History) -> int:
        if history.running > self.max_batch:
            return 0
        if history.accepted + history.stopped >= self.min_judged and history.alpha_mle() < self.min_alpha:
            return 0
        if self.small_above is not None and history.running > self.small_above:
            return self.k_small
        return self.k


def as_schedule(k):
    """An integer k >= 1 becomes a constant schedule; a callable passes through."""
    if callable(k):
        return k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1 or a schedule (callable), got {k!r}")
    return lambda history, k=k: k
