"""APPROXIMATE (lossy) verification rules: each changes the target's law, is named as such, and is
never a default -- `specdec.engine.decode.generate` reaches one only when a caller passes it as
its ``verifier``, and the run's stats then say ``lossless: False``.

Each is a positional rule (`specdec.core.rules.positional`: acceptance a_i and stop law r_i at draft
position i; p = p_{i-1}, q = q_{i-1}, x = x_i):

  typical(eps, delta)   Medusa's typical acceptance (Cai et al. 2024): keep x iff
                        p(x) > thr = min{eps, delta exp(-H(p))}, H = -sum p log(p + 1e-5) (nats, as
                        Medusa's code computes it); at the first rejection emit a token from p cut
                        to its typical set, p 1[p >= thr] renormalized (Medusa's
                        ``get_typical_one_token``).  Published setting eps = 0.09, delta = 0.3.
  relaxed(lam)          a = min{1, p(x) / (lam q(x))}, lam < 1 (lam = 1 is token verification),
                        r = [p - q]_+ (the standard residual);
  relaxed(lam, True)    the same acceptance with the residual of its own ratio, r = [p - lam q]_+
                        (as if lam q were the proposal).  Neither residual can make it exact: the
                        accepted mass q a = min{q, p/lam} exceeds p wherever 0 < p < q, and no
                        residual removes mass.  (The residual [p - q a]_+ is [p - q]_+ itself,
                        since q a = q wherever p > q.)
  top_k_accept(K)       keep x iff it is among the K most probable tokens of p (ties at the K-th
                        value kept); at the first rejection emit a token from p;
The fourth approximate algorithm of chapter 08 changes the drafting, not the rule: drafts taken as
the argmax of q while token verification treats them as samples from q (a shortcut a popular
library shipped and reverted); it is chapter 02's wrong variant ``greedy_draft``
(`specdec.core.rules.variants`), token verification with greedy drafts, and needs no rule here.

Example: typical(0.09, 0.3).parts on p = [0.95, 0.05], x = 1: threshold min{0.09, 0.3 e^-0.199}
= 0.09 > 0.05, so a = 0 and the step emits token 0 (the typical set is {0}).
"""

from __future__ import annotations

import torch

from specdec.core.rules.positional import Rule, drafted_probs
from specdec.core.verify import accept_prob, residual

__all__ = ["typical", "relaxed", "top_k_accept", "MEDUSA_EPS", "MEDUSA_DELTA"]

F64 = torch.float64
MEDUSA_EPS, MEDUSA_DELTA = 0.09, 0.3  # Medusa's posterior_threshold and posterior_alpha defaults


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -(p * torch.log(p + 1e-5)).sum(-1)  # Medusa's entropy (its 1e-5 keeps log(0) finite)


def typical(eps: float = MEDUSA_EPS, delta: float = MEDUSA_DELTA) -> Rule:
    """Medusa's typical acceptance with threshold min{eps, delta exp(-H(p))} (module docstring)."""
    if not (0 < eps <= 1 and delta > 0):
        raise ValueError(f"typical acceptance needs 0 < eps <= 1 and delta > 0, got eps={eps!r}, delta={delta!r}")

    def parts(d, q, p):
        k = d.shape[1]
        pk = p[:, :k].to(F64)
        px, _ = drafted_probs(d, q, p)
        thr = torch.minimum(torch.full_like(px, eps), delta * torch.exp(-_entropy(pk)))  # (B, k)
        typical_set = pk * (pk >= thr.unsqueeze(-1))  # the stop law: p cut to its typical set
        return (px > thr).to(F64), torch.where(typical_set.sum(-1, keepdim=True) > 0, typical_set, pk)

    return Rule(f"typical ε={eps:g} δ={delta:g}", False, parts,
                "keep the draft iff p(x) > min(ε, δ exp(-H(p))); else a token from p cut to that set (Medusa)")


def relaxed(lam: float, matching_residual: bool = False) -> Rule:
    """Relaxed ratio acceptance min{1, p / (lam q)}, with the standard or the matching residual."""
    if not 0 < lam <= 1:
        raise ValueError(f"relaxed acceptance needs 0 < lam <= 1, got {lam!r}")

    def parts(d, q, p):
        k = d.shape[1]
        px, qx = drafted_probs(d, q, p)
        a = accept_prob(px, lam * qx)
        pk, qk = p[:, :k].to(F64), q.to(F64)
        if not matching_residual:
            return a, residual(pk, qk, normalize=False)
        return a, residual(pk, lam * qk, normalize=False)

    tag = "residual [p - λq]+" if matching_residual else "standard residual"
    return Rule(f"relaxed λ={lam:g}, {tag}", lam == 1, parts,  # lam = 1 is token verification
                f"keep the draft with probability min(1, p/(λq)); on rejection the {tag}")


def top_k_accept(K: int) -> Rule:
    """Keep the draft iff it is in the target's top K; else a token from p."""
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"top_k_accept needs an integer K >= 1, got {K!r}")

    def parts(d, q, p):
        k = d.shape[1]
        pk = p[:, :k].to(F64)
        px, _ = drafted_probs(d, q, p)
        kth = torch.topk(pk, min(K, pk.shape[-1]), dim=-1).values[..., -1]  # (B, k)
        return ((px >= kth) & (px > 0)).to(F64), pk

    return Rule(f"top-{K} membership", False, parts, f"keep the draft iff it is in the target's top {K}; "
                "else a token from p")
