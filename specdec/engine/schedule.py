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

__all__ = ["History", "AdaptiveK", "as_schedule"]


@dataclass
class History:
    """What a run has drafted and accepted so far (host integers, updated after each step)."""

    steps: int = 0        # steps taken (with or without drafts)
    drafted: int = 0      # drafts proposed, summed over rows
    accepted: int = 0     # drafts accepted, summed over rows
    stopped: int = 0      # (row, step) pairs that ended at a rejected draft: the MLE's failures
    last_k: int = 0       # the k of the last step

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


def as_schedule(k):
    """An integer k >= 1 becomes a constant schedule; a callable passes through."""
    if callable(k):
        return k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1 or a schedule (callable), got {k!r}")
    return lambda history, k=k: k
