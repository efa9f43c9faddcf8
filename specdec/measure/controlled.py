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

Example: generate(target, ids, drafter=draft, k=4, max_new_tokens=64, generator=g,
                  verifier=ControlledAcceptance(0.8))   # E[accepted drafts] = sum_{i=1..4} 0.8^i
"""

from __future__ import annotations

import torch

from specdec.core.sampling import sample, uniforms
from specdec.core.verify import VerifyResult

__all__ = ["ControlledAcceptance"]


class ControlledAcceptance:
    """Accept each draft with probability ``alpha`` (module docstring); verify's signature."""

    lossless = False  # not the target's law: instrumentation only

    def __init__(self, alpha: float):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"controlled acceptance alpha must be a number in [0, 1], got {alpha!r}")
        self.alpha = float(alpha)

    def __repr__(self) -> str:
        return f"ControlledAcceptance({self.alpha})"

    def __call__(self, drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *, method: str = "token",
                 generator: torch.Generator | None = None) -> VerifyResult:
        """drafts (A, k), q (A, k, V), p (A, k+1, V) -> the accepted drafts, then one token from p_n."""
        A, k = drafts.shape
        dev = p.device
        u = uniforms((A, k), generator, dev)
        n = (u < self.alpha).long().cumprod(1).sum(1)  # (A,)
        y = sample(p[torch.arange(A, device=dev), n], generator, check=False, float64=False)  # (A,)
        j = torch.arange(k + 1, device=dev)
        ext = torch.cat([drafts, y[:, None]], 1)
        toks = torch.where(j[None] < n[:, None], ext, torch.where(j[None] == n[:, None], y[:, None], -1))
        return VerifyResult(num_accepted=n, tokens=toks)
