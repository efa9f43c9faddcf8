"""Verification rules that decide position by position: an acceptance probability and a stop law.

Token verification (`specdec.core.verify`) is one member of a family.  A *positional rule* maps a
draft block to, for every position i = 1..k,

    a_i in [0, 1]       the probability that draft x_i is kept, given x_1..x_{i-1} were kept,
    r_i (V,) >= 0       the (unnormalized) law of the one token emitted when x_i is not kept,

and when all k drafts are kept a bonus token comes from p_k.  Token verification is
a_i = min{1, p(x_i)/q(x_i)}, r_i = [p - q]_+; the lossless alternatives
(`specdec.core.rules.alternatives`) and the approximate algorithms (`specdec.core.rules.approximate`) choose
other (a, r).  Whether a rule keeps the target's law is a property of (a, r), checked here once and
for all by the exact law: position i emits y with probability

    q(y) a(y) [y = x_i, summed over x_i] + (sum_x q(x) (1 - a(x)) r_x(y) / |r_x|)

and the rule is lossless iff that equals p_{i-1}(y) for every y at every reachable position and context.

Two consumers, so each rule is written once:
  * `sample_rule` draws an outcome (the sampled code path; same uniforms layout as `verify`:
    column i < k decides draft i+1, column k the inverse-CDF draw of the emitted token);
  * `rule_outcomes` is the exact table P(j kept, then y | draft block), what `specdec.core.exact.
    spec_law` enumerates (pass ``positional_law_rule(parts)`` as its method).

A rule's ``parts(d, q, p) -> (a (B, k) float64, r (B, k, V) float64)``; d (B, k) drafts, q (B, k, V),
p (B, k+1, V).  Every r_i must have positive mass where a_i < 1.

Example: parts = lambda d, q, p: (accept_prob(px, qx), residual(p[:, :k], q, normalize=False))
reproduces `verify(method="token")` outcome for outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from specdec.core.exact import chunks_from_table
from specdec.core.sampling import sample_inverse_cdf
from specdec.core.sampling import uniforms as draw_uniforms  # `uniforms` is sample_rule's argument
from specdec.core.verify import VerifyResult, check_inputs, check_uniforms

__all__ = ["Rule", "drafted_probs", "sample_rule", "rule_outcomes", "positional_law_rule", "first_token_law"]

F64 = torch.float64
Parts = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def drafted_probs(d: torch.Tensor, q: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_{i-1}(x_i), q_{i-1}(x_i)) of the drafted tokens, float64: d (B, k) -> (B, k), (B, k)."""
    k = d.shape[1]
    idx = d.long().unsqueeze(-1)
    return (p[:, :k].gather(-1, idx).squeeze(-1).to(F64), q.gather(-1, idx).squeeze(-1).to(F64))


def _normalized(r: torch.Tensor) -> torch.Tensor:
    """Each stop law r (..., V) divided by its mass; rows of zero mass (never used: a = 1 there) stay 0."""
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, 1.0), 0.0)


def sample_rule(parts: Parts, d: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *,
                generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None) -> VerifyResult:
    """One sampled verification step under rule ``parts``: keep draft i while u_i < a_i, then one
    token from r at the first rejection or from p_k after k kept.  Returns `VerifyResult`.
    ``uniforms`` (tests only) is checked as `verify` checks it, whether or not the rule checks its
    rows: a (B, k+1) float64 tensor in [0, 1), else the same ValueError.

    Example: a = [[1, 0]], r = one-hot on 3 at position 2 -> num_accepted [1], tokens [[d_1, 3, -1]].
    """
    B, k = d.shape
    dev = p.device
    if uniforms is not None:
        check_uniforms(uniforms, B, k)
    u = draw_uniforms((B, k + 1), generator, dev) if uniforms is None else uniforms.to(dev)
    a, r = parts(d, q, p)  # (B, k), (B, k, V)
    n = (u[:, :k] < a).long().cumprod(-1).sum(-1)  # (B,) leading acceptances
    V = p.shape[-1]
    stop = torch.cat([r.to(F64), p[:, k:].to(F64)], dim=1)  # (B, k+1, V): r_1..r_k, then p_k for the bonus
    law = stop.gather(1, n.view(B, 1, 1).expand(B, 1, V)).squeeze(1)  # (B, V)
    y = sample_inverse_cdf(law, u[:, k])  # (B,)
    col = torch.arange(k + 1, device=dev)
    drafts = torch.cat([d.long(), torch.zeros(B, 1, dtype=torch.long, device=dev)], dim=1)
    tokens = torch.where(col < n[:, None], drafts, torch.where(col == n[:, None], y[:, None], -1))
    return VerifyResult(num_accepted=n, tokens=tokens)


def rule_outcomes(parts: Parts, d: torch.Tensor, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Exact P(j drafts kept, then token y | draft block) under rule ``parts``: (D, k+1, V) float64,
    rows summing to 1 (j < k: prod_{i<=j} a_i (1 - a_{j+1}) r_{j+1}(y) / |r_{j+1}|; j = k: bonus p_k)."""
    D, k = d.shape
    a, r = parts(d, q, p)
    r = _normalized(r.to(F64))
    out = torch.zeros(D, k + 1, p.shape[-1], dtype=F64)
    reach = torch.ones(D, dtype=F64)
    for j in range(k):
        out[:, j] = (reach * (1 - a[:, j])).unsqueeze(-1) * r[:, j]
        reach = reach * a[:, j]
    pk = p[:, k].to(F64)
    out[:, k] = reach.unsqueeze(-1) * pk / pk.sum(-1, keepdim=True)  # the sampler renormalizes p_k too
    return out


def first_token_law(parts: Parts, p: torch.Tensor, q: torch.Tensor, draws: torch.Tensor | None = None):
    """(law (V,) float64, P(first draft kept)) of the first token a step emits under rule ``parts``,
    for target and draft laws p, q (V,) at one context, drafts drawn from ``draws`` (default q; e.g.
    a one-hot on argmax q for greedy drafts):

        pi(y) = draws(y) a(y) + sum_x draws(x) (1 - a(x)) r_x(y) / |r_x|,

    the first position of `rule_outcomes` (tested equal to it), over every draft token at once: one
    (V, 1, V) evaluation of ``parts``.  Example: token verification's parts give pi = p to rounding."""
    V = p.shape[-1]
    p64, q64 = p.to(F64), q.to(F64)
    w = q64 if draws is None else draws.to(F64)
    a, r = parts(torch.arange(V).unsqueeze(1), q64.expand(V, 1, V), p64.expand(V, 2, V))  # (V, 1), (V, 1, V)
    a, r = a[:, 0], _normalized(r[:, 0].to(F64))
    return w @ ((1 - a).unsqueeze(-1) * r) + w * a, float(w @ a)


def positional_law_rule(parts: Parts):
    """``parts`` as a `specdec.core.exact.spec_law` rule: (drafts, q, p) -> chunk groups."""
    return lambda d, q, p: chunks_from_table(d, rule_outcomes(parts, d, q, p))


@dataclass(frozen=True)
class Rule:
    """A named positional rule.  ``lossless`` is the claim the exact law checks (`rule_outcomes`);
    ``draws`` says how the drafts are drawn ("q": sampled from q, "argmax": greedily) -- only the
    greedy-draft shortcut differs.  Called like `verify` (drafts, q, p, *, method=, generator=,
    uniforms=), so the engine takes it as its ``verifier``; ``method`` is ignored."""

    name: str
    lossless: bool
    parts: Parts
    description: str
    draws: str = "q"
    check: bool = True  # validate inputs as `verify` does; the engine's own p and q need not be

    def __call__(self, d, q, p, *, method: str = "token", generator=None, uniforms=None) -> VerifyResult:
        if self.check:
            check_inputs(d, q, p)
        return sample_rule(self.parts, d, q, p, generator=generator, uniforms=uniforms)

    @property
    def law_rule(self):
        """This rule as a `spec_law` method."""
        return positional_law_rule(self.parts)
