"""Named WRONG variants of speculative sampling, kept only as negative controls.

Nothing in decoding imports this module.  Each variant is a plausible bug; the tests and
notebook 02 show that the exact law (`specdec.core.exact.spec_law`) and the frequency tests
(`specdec.core.stats`) catch every one of them.

  resample_from_p      on rejection draw from p instead of the residual [p - q]_+ (seed, section 2)
  independent          verify every position on its own (keep x_i or replace it by a residual
                       sample) and concatenate all k, ignoring that p_{i+1} was conditioned on x_i
                       (seed, section 1)
  raw_q                drafts sampled after top-k/top-p, but q given to verification from the raw
                       logits (temperature only) -- the Hugging Face bug class
  greedy_draft         drafts taken greedily (argmax of q) while verification assumes they were
                       sampled from q and the target samples
  always_accept        accept every draft, then a bonus token from p_k

Sampled forms have verify's signature `(drafts, q, p, *, method, generator) -> VerifyResult`
(method is ignored); exact forms are `spec_law` rules `(drafts, q, p) -> chunk groups`.

Example: spec_law(T, D, 3, 2, method=EXACT_RULES["always_accept"]) differs from target_law(T, 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from specdec.core.exact import all_sequences, chunks_from_table, spec_law
from specdec.core.sampling import SamplingConfig, sample_inverse_cdf
from specdec.core.toy import TableModel, sample_speculative
from specdec.core.verify import VerifyResult, accept_prob, residual, verify

__all__ = ["Variant", "VARIANTS", "variant_law", "variant_sample"]

F64 = torch.float64


def _gather(d, q, p):
    k = d.shape[1]
    px = p[:, :k].gather(-1, d.unsqueeze(-1)).squeeze(-1).to(F64)  # (B, k)
    qx = q.gather(-1, d.unsqueeze(-1)).squeeze(-1).to(F64)  # (B, k)
    return accept_prob(px, qx)


def _assemble(d, n, y):
    B, k = d.shape
    col = torch.arange(k + 1)
    drafts = torch.cat([d, torch.zeros(B, 1, dtype=torch.long)], dim=1)
    tokens = torch.where(col < n[:, None], drafts, torch.where(col == n[:, None], y[:, None], -1))
    return VerifyResult(num_accepted=n, tokens=tokens)


def resample_from_p_sampled(d, q, p, *, method="token", generator=None) -> VerifyResult:
    B, k = d.shape
    u = torch.rand(B, k + 1, generator=generator, dtype=F64)
    n = (u[:, :k] < _gather(d, q, p)).long().cumprod(-1).sum(-1)  # (B,)
    y = sample_inverse_cdf(p[torch.arange(B), n].to(F64), u[:, k])  # WRONG: p_n, not the residual
    return _assemble(d, n, y)


def always_accept_sampled(d, q, p, *, method="token", generator=None) -> VerifyResult:
    B, k = d.shape
    u = torch.rand(B, generator=generator, dtype=F64)
    n = torch.full((B,), k, dtype=torch.long)  # WRONG: no acceptance test
    return _assemble(d, n, sample_inverse_cdf(p[:, k].to(F64), u))


def independent_sampled(d, q, p, *, method="token", generator=None) -> VerifyResult:
    B, k = d.shape
    u = torch.rand(B, 2 * k, generator=generator, dtype=F64)
    keep = u[:, :k] < _gather(d, q, p)  # (B, k), every position judged on its own
    r = residual(p[:, :k].to(F64), q.to(F64), normalize=False)  # (B, k, V)
    y = sample_inverse_cdf(r, u[:, k:])  # (B, k)
    out = torch.where(keep, d, y)  # WRONG: later positions keep drafts conditioned on the replaced x_i
    tokens = torch.cat([out, torch.full((B, 1), -1, dtype=torch.long)], dim=1)
    return VerifyResult(num_accepted=torch.full((B,), k - 1, dtype=torch.long), tokens=tokens)


def _resample_from_p_rule(d, q, p):
    D, k = d.shape
    a = _gather(d, q, p)
    out = torch.zeros(D, k + 1, p.shape[-1], dtype=F64)
    reach = torch.ones(D, dtype=F64)
    for j in range(k):
        out[:, j] = (reach * (1 - a[:, j])).unsqueeze(-1) * p[:, j].to(F64)
        reach = reach * a[:, j]
    out[:, k] = reach.unsqueeze(-1) * p[:, k].to(F64)
    return chunks_from_table(d, out)


def _always_accept_rule(d, q, p):
    D, k = d.shape
    out = torch.zeros(D, k + 1, p.shape[-1], dtype=F64)
    out[:, k] = p[:, k].to(F64)
    return chunks_from_table(d, out)


def _independent_rule(d, q, p):
    D, k = d.shape
    V = p.shape[-1]
    a = _gather(d, q, p)  # (D, k)
    r = residual(p[:, :k].to(F64), q.to(F64))  # (D, k, V)
    f = a.unsqueeze(-1) * torch.nn.functional.one_hot(d, V).to(F64) + (1 - a).unsqueeze(-1) * r
    chunks = all_sequences(V, k)  # (V^k, k)
    prob = torch.ones(D, chunks.shape[0], dtype=F64)
    for i in range(k):
        prob = prob * f[:, i, chunks[:, i]]  # (D, V^k)
    idx = torch.arange(D).repeat_interleave(chunks.shape[0])
    return [(idx, chunks.repeat(D, 1), prob.reshape(-1))]


@dataclass(frozen=True)
class Variant:
    """A wrong algorithm: how it samples, its exact rule, and how it sets the draft's configs."""

    name: str
    bug: str
    sampled: Callable = verify  # verify-like function
    rule: object = "token"  # spec_law method
    configs: Callable = lambda cfg: (cfg, cfg)  # target cfg -> (draft_cfg for q, draft_sample_cfg)


VARIANTS = {v.name: v for v in [
    Variant("resample_from_p", "on rejection, draws from p instead of the residual [p - q]+",
            resample_from_p_sampled, _resample_from_p_rule),
    Variant("independent", "verifies each position on its own and concatenates all k",
            independent_sampled, _independent_rule),
    Variant("raw_q", "drafts sampled after top-k/top-p, q for verification from raw logits",
            configs=lambda cfg: (SamplingConfig(cfg.temperature), cfg)),
    Variant("greedy_draft", "drafts taken greedily while verification treats them as samples from q",
            configs=lambda cfg: (cfg, SamplingConfig(0.0))),
    Variant("always_accept", "accepts every draft, then a bonus token from p_k",
            always_accept_sampled, _always_accept_rule),
]}


def variant_law(name: str, target: TableModel, draft: TableModel, n: int, k: int,
                cfg: SamplingConfig = SamplingConfig()) -> torch.Tensor:
    """Exact law of the first n tokens under wrong variant `name`: (V,)*n."""
    v = VARIANTS[name]
    q_cfg, sample_cfg = v.configs(cfg)
    return spec_law(target, draft, n, k, v.rule, cfg, q_cfg, sample_cfg)


def variant_sample(name: str, target: TableModel, draft: TableModel, n: int, k: int, N: int,
                   generator: torch.Generator, cfg: SamplingConfig = SamplingConfig()) -> torch.Tensor:
    """N sampled generations (N, n) under wrong variant `name`."""
    v = VARIANTS[name]
    q_cfg, sample_cfg = v.configs(cfg)
    return sample_speculative(target, draft, n, k, N, generator, "token", cfg, q_cfg, sample_cfg, v.sampled)
