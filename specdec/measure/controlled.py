"""Controlled acceptance: an INSTRUMENTATION verifier, not a decoding algorithm.

`ControlledAcceptance(alpha)` has the signature of `specdec.core.verify.verify` and is handed to
`generate(..., verifier=...)`: each draft is accepted with probability alpha regardless of p and q
(so the accepted length is exactly truncated-geometric with that alpha), and the step's last token
is drawn from the target's processed distribution at the stopping position.  It measures the speed
that a machine gives at a set acceptance rate -- the hardware's side of the cost model -- with
real-size random-weight models whose own acceptance would mean nothing.  Its outputs are not
samples of the target and must never back a quality or exactness claim (``lossless = False``).
The stopping token is always drawn by inverse CDF with one uniform per row: at temperature 0 (a
one-hot p) that is the argmax, but the generator advances by one uniform more per step than the
greedy engine path does, so runs at temperature 0 are not seed-for-seed those of plain greedy code.

Seeded (``ControlledAcceptance(alpha, seed=s)``): the acceptance draws come from a generator of its
own, seeded with ``s``, not from the run's; the steps a run then takes are a function of (alpha, k,
batch, budget, s) alone, which `controlled_steps` computes without a model -- so a cost model can be
given a run's exact steps before the run (chapter 06's pilot-priced predictions).  A seeded
instrument serves one run (its generator advances); the stopping token still comes from the run's.

Example: generate(target, ids, drafter=draft, k=4, max_new_tokens=64, generator=g,
                  verifier=ControlledAcceptance(0.8))   # E[accepted drafts] = sum_{i=1..4} 0.8^i
"""

from __future__ import annotations

import torch

from specdec.core.sampling import sample, uniforms
from specdec.core.verify import VerifyResult
from specdec.engine.inputs import K_UNCAPPED, clip_k, next_k_cap

__all__ = ["ControlledAcceptance", "controlled_steps"]


class ControlledAcceptance:
    """Accept each draft with probability ``alpha`` (module docstring); verify's signature."""

    lossless = False  # not the target's law: instrumentation only

    def __init__(self, alpha: float, seed: int | None = None):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"controlled acceptance alpha must be a number in [0, 1], got {alpha!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"a controlled acceptance seed is an integer >= 0 or None, got {seed!r}")
        self.alpha, self.seed = float(alpha), seed
        self.own = None if seed is None else torch.Generator().manual_seed(seed)

    def __repr__(self) -> str:
        return f"ControlledAcceptance({self.alpha})" if self.seed is None else \
            f"ControlledAcceptance({self.alpha}, seed={self.seed})"

    def accepted(self, rows: int, k: int, generator, device) -> torch.Tensor:
        """(rows,) drafts kept of k: each kept with probability alpha, up to the first rejection."""
        return (uniforms((rows, k), generator, device) < self.alpha).long().cumprod(1).sum(1)

    def __call__(self, drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *, method: str = "token",
                 generator: torch.Generator | None = None) -> VerifyResult:
        """drafts (A, k), q (A, k, V), p (A, k+1, V) -> the accepted drafts, then one token from p_n."""
        A, k = drafts.shape
        dev = p.device
        n = self.accepted(A, k, generator if self.own is None else self.own, dev)  # (A,)
        y = sample(p[torch.arange(A, device=dev), n], generator, check=False, float64=False)  # (A,)
        j = torch.arange(k + 1, device=dev)
        ext = torch.cat([drafts, y[:, None]], 1)
        toks = torch.where(j[None] < n[:, None], ext, torch.where(j[None] == n[:, None], y[:, None], -1))
        return VerifyResult(num_accepted=n, tokens=toks)


def controlled_steps(alpha: float, k: int, batch: int, new_tokens: int, seed: int) -> list[tuple[int, int, int]]:
    """(draft length, rows, tokens emitted) of every step of a run of `generate` with
    ``ControlledAcceptance(alpha, seed=seed)``, ``batch`` rows of budget ``new_tokens`` each, a fixed k
    and no stop token, computed without a model: the engine's draft length (`clip_k` to the largest
    remaining budget minus one, `next_k_cap` after a drafting step; 0 = a plain step, which draws
    nothing), the instrument's own draws in the same order, each row emitting its accepted drafts and
    one token cut at its budget, finished rows leaving the batch.  Tested equal to the engine's steps."""
    if k < 1 or batch < 1 or new_tokens < 1:
        raise ValueError(f"controlled_steps needs k, batch and new_tokens >= 1, got {k}, {batch}, {new_tokens}")
    inst, left, cap, out = ControlledAcceptance(alpha, seed), [new_tokens] * batch, K_UNCAPPED, []
    while left:
        ks = clip_k(k, max(left), cap)
        if ks > 0:
            n = inst.accepted(len(left), ks, inst.own, "cpu").tolist()
            cap = next_k_cap(max(n))
        else:
            n = [0] * len(left)
        emitted = [min(a + 1, r) for a, r in zip(n, left)]
        out.append((ks, len(left), sum(emitted)))
        left = [r - e for r, e in zip(left, emitted) if r > e]
    return out
