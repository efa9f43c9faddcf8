"""Lossless alternatives to token verification that practitioners ship: match verification and a
proposal treated as one-hot.  Both keep the target's law exactly, with lower acceptance.

Match verification (llama.cpp's speculative example): draw y ~ p_{i-1}; keep the draft x_i iff
y == x_i, otherwise emit y and stop.  As a positional rule (`specdec.core.rules.positional`):

    a_i = p(x_i),      r_i(y) = p(y) [y != x_i],

so position i emits y with probability q(y) p(y) + sum_{x != y} q(x) p(y) = p(y): exact for ANY
draft law, and the acceptance is sum_x q(x) p(x) <= sum_x min{p(x), q(x)} (pointwise
q p <= min{p, q} because both are <= 1).

One-hot proposal: token verification with q replaced by the one-hot vector on the draft, what an
engine does when the draft's probabilities are absent:

    a_i = min{1, p(x_i) / 1} = p(x_i),      r_i = [p - onehot(x_i)]_+ = p(y) [y != x_i],

the same (a, r) as match verification, computed by `verify`'s own `accept_prob` and `residual`:
the two names are one algorithm (the chapter shows the identity numerically).  It is exact whatever
the drafts were drawn from -- greedy drafts included -- because the acceptance never uses q.

Example: MATCH.parts(d=[[0]], q, p=[[[0.25, 0.75], [0.5, 0.5]]]) -> a [[0.25]], r [[[0, 0.75]]].
"""

from __future__ import annotations

import torch

from specdec.core.rules.positional import Rule, drafted_probs
from specdec.core.verify import accept_prob, residual

__all__ = ["MATCH", "ONE_HOT", "LOSSLESS_ALTERNATIVES"]


def _match_parts(d, q, p):
    k = d.shape[1]
    px, _ = drafted_probs(d, q, p)  # (B, k)
    r = p[:, :k].to(torch.float64).scatter(-1, d.long().unsqueeze(-1), 0.0)  # p with the draft removed
    return px, r


def _one_hot_parts(d, q, p):
    k = d.shape[1]
    one = torch.nn.functional.one_hot(d.long(), p.shape[-1]).to(torch.float64)  # (B, k, V)
    px, _ = drafted_probs(d, q, p)
    return accept_prob(px, torch.ones_like(px)), residual(p[:, :k].to(torch.float64), one, normalize=False)


MATCH = Rule("match", True, _match_parts,
             "keep the draft iff a token sampled from p equals it (llama.cpp); else emit that token")
ONE_HOT = Rule("one-hot q", True, _one_hot_parts,
               "token verification with q replaced by the one-hot draft (draft probabilities absent)")
LOSSLESS_ALTERNATIVES = {r.name: r for r in (MATCH, ONE_HOT)}
