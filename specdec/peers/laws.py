"""The exact law of the first two generated tokens of a prompt, from the target's own logits, and
the laws the named wrong verification rules would give instead -- by enumeration, not sampling.

What is enumerated.  For a prompt c the target's logits give p1 = P(x1 | c) after the sampling
rules in force (`specdec.core.sampling.SamplingConfig`: temperature, top-k, top-p; p and q are the
processed laws).  Every x1 in the *support* S -- the fewest tokens of largest p1 whose mass
reaches 1 - mass_cut -- is appended to c and the target's logits at c + x1 give p2(. | x1); one
batched forward of |S| rows on the prompt's KV cache (the prompt is fed once).  The joint law of
(x1, x2) is then exact on the cells {(x1, x2): x1 in S} and the remaining mass 1 - p1(S) is one
cell, "x1 outside S", whose probability is known exactly (not estimated, not dropped).

Which token comes from where.  In an engine whose first token comes from prefill (vLLM, Hugging
Face) x1 is plain sampling and x2 is the first position of the first verification step; in ours
the prompt is fed with the first step, so x1 is position 1 of the first verification step and x2 is
position 2 (k >= 2) or the first position of the next step.  Under an exact rule the law is the
target's either way; ``verified`` of `candidate_joint` says which positions a wrong rule touches.

Why the first two tokens, and why the joint.  A wrong rule changes the law of every token it
verifies; x2 is the first token that is verified in every engine, and x1 carries the prefill
sampler (the positive control: if x1 fails, the fault is the sampler, not speculation).  Testing
the joint (x1, x2) rather than x2's marginal keeps the conditional structure: a rule that moves
mass of x2 toward the draft's choices moves it differently after each x1, and the marginal can
average that out; the joint cannot.  Longer prefixes (m > 2) multiply the enumeration by |S| per
token for no new rule position, so they are not tested here.

The wrong rules (`CANDIDATES`), each the law of one verified position from the processed p, q at
its context (drafts drawn from w, verified by token verification a = min(1, p/q)):
    target              p (any exact rule; the one-hot / match rule for drafts without probabilities)
    draft law           w = q, every draft kept (the draft's own law; `variants` "always_accept")
    residual omitted    w a + (1 - sum w a) p: on rejection a token from p, not [p - q]_+
                        (`variants` "resample_from_p")
    argmax drafts       w = onehot(argmax q) verified as if sampled from q (`variants` "greedy_draft")
    q at T'             drafts from q at temperature T', verified with q under the rules in force
                        (`variants` "raw_q" is the same bug with top-k/top-p instead of T)
    p at T'             the target's law at temperature T' (same top-k/top-p): an exact rule run on
                        a target processed at the wrong temperature (a per-token temperature
                        expanded wrongly to the verified positions)
All are closed forms of `specdec.core.rules.positional.first_token_law` (tested equal to it), over all
contexts at once.

Example: ctx = enumerate_prompt(target, draft, [464, 3290], SamplingConfig(1.0));
    target_joint(ctx, SamplingConfig(1.0)).sum() -> 1.0 (the cut cell included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from transformers import DynamicCache

from specdec.core.acceptance import context_beta
from specdec.core.sampling import SamplingConfig
from specdec.core.verify import accept_prob, residual

__all__ = ["PromptContexts", "enumerate_prompt", "support_of", "position_law", "CANDIDATES", "candidate_joint",
           "target_joint", "joint_cells", "ratio_score", "candidate_acceptance"]

F64 = torch.float64


@dataclass(frozen=True)
class PromptContexts:
    """Raw float64 logits of one prompt: at the prompt (V,) and at prompt + x1 for x1 in ``support``
    (S, V); the draft's the same way (None when no draft model: candidates needing q are then absent)."""

    prompt: tuple
    support: torch.Tensor  # (S,) int64, descending p1 under the sampling that chose it
    target1: torch.Tensor  # (V,)
    target2: torch.Tensor  # (S, V)
    draft1: torch.Tensor | None
    draft2: torch.Tensor | None
    mass_cut: float

    @property
    def V(self) -> int:
        return int(self.target1.shape[-1])


def support_of(p1: torch.Tensor, mass_cut: float) -> torch.Tensor:
    """The fewest tokens of largest p1 (V,) whose mass reaches 1 - mass_cut, in descending order
    (ties: lower id first); tokens of probability 0 are never in it."""
    if not 0 <= mass_cut < 1:
        raise ValueError(f"mass_cut must lie in [0, 1), got {mass_cut!r}")
    order = torch.sort(p1.to(F64), descending=True, stable=True).indices
    cum = torch.cumsum(p1.to(F64)[order], 0)
    n = int((cum < 1 - mass_cut - 1e-12).sum()) + 1  # first index where the mass is reached, included
    n = min(n, int((p1 > 0).sum()))
    return order[:n]


@torch.inference_mode()
def _next_logits(model, prompt: torch.Tensor, support: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits at the prompt (V,), logits at prompt + x for x in support (S, V)), float64: the prompt
    fed once, its cache repeated over a chunk of rows, one token per row."""
    dev = next(model.parameters()).device
    ids = prompt.to(dev).view(1, -1)
    L = ids.shape[1]
    cache = DynamicCache()
    z1 = model(input_ids=ids, attention_mask=torch.ones_like(ids), cache=cache, use_cache=True).logits[0, -1]
    rows = []
    for start in range(0, support.numel(), chunk):
        x = support[start:start + chunk].to(dev).view(-1, 1)
        c = DynamicCache()
        for layer in range(len(cache.layers)):  # a copy of the prompt's cache per row of the chunk
            kv = cache.layers[layer]
            c.update(kv.keys.expand(x.shape[0], -1, -1, -1).contiguous(),
                     kv.values.expand(x.shape[0], -1, -1, -1).contiguous(), layer)
        out = model(input_ids=x, attention_mask=torch.ones(x.shape[0], L + 1, dtype=torch.long, device=dev),
                    position_ids=torch.full_like(x, L), cache=c, use_cache=True)
        rows.append(out.logits[:, -1].double().cpu())
    return z1.double().cpu(), torch.cat(rows) if rows else torch.empty(0, z1.shape[-1], dtype=F64)


def enumerate_prompt(target, draft, prompt, sampling: SamplingConfig, mass_cut: float = 1e-3,
                     chunk: int = 512) -> PromptContexts:
    """The contexts of one prompt (token ids): the support S of p1 under ``sampling`` (``mass_cut``:
    the exact mass left out, one cell of the joint) and both models' logits at c and at c + x1."""
    ids = torch.as_tensor(list(prompt), dtype=torch.long)
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError("a prompt is a non-empty list of token ids")
    V = int(target.config.vocab_size)
    if int(ids.min()) < 0 or int(ids.max()) >= V:
        raise ValueError(f"prompt token ids must lie in [0, {V})")
    if draft is not None and int(draft.config.vocab_size) != V:
        raise ValueError("the draft's vocabulary differs from the target's")
    z1, _ = _next_logits(target, ids, torch.empty(0, dtype=torch.long), chunk)
    sup = support_of(sampling(z1.unsqueeze(0))[0], mass_cut)
    z1, z2 = _next_logits(target, ids, sup, chunk)
    d1 = d2 = None
    if draft is not None:
        d1, d2 = _next_logits(draft, ids, sup, chunk)
    return PromptContexts(tuple(int(t) for t in ids), sup, z1, z2, d1, d2, float(mass_cut))


def _token_rule(p, q, w, resample_p: bool = False):
    """Law of one verified token, token verification (a = min(1, p/q)) of drafts drawn from w; the
    stop law is [p - q]_+ (or p when ``resample_p``), the same for every draft: (..., V) float64."""
    a = accept_prob(p, q)  # 1 where q = 0: never drafted (w = 0 there for every candidate)
    kept = w * a
    stop = 1 - kept.sum(-1, keepdim=True)
    r = p if resample_p else residual(p, q)
    return kept + stop.clamp(min=0) * r


def position_law(candidate: str, lt: torch.Tensor, lq: torch.Tensor | None, sampling: SamplingConfig,
                 t_other: float = 1.0) -> torch.Tensor:
    """Law (..., V) float64 of one position under ``candidate`` (module docstring) from raw logits
    lt, lq (..., V) at its contexts, p, q processed by ``sampling`` (``t_other``: the T' of "q at T'",
    with the same top-k/top-p)."""
    p = sampling(lt).to(F64)
    if candidate == "target":
        return p
    if candidate not in CANDIDATES:
        raise ValueError(f"unknown candidate {candidate!r}; known: {list(CANDIDATES)}")
    if candidate == "p at T'":
        return SamplingConfig(t_other, sampling.top_k, sampling.top_p)(lt).to(F64)
    if lq is None:
        raise ValueError(f"candidate {candidate!r} needs the draft's logits")
    q = sampling(lq).to(F64)
    if candidate == "draft law":
        return q
    if candidate == "residual omitted":
        return _token_rule(p, q, q, resample_p=True)
    if candidate == "argmax drafts":
        w = torch.nn.functional.one_hot(q.argmax(-1), q.shape[-1]).to(F64)
        return _token_rule(p, q, w)
    w = SamplingConfig(t_other, sampling.top_k, sampling.top_p)(lq).to(F64)  # "q at T'"
    return _token_rule(p, q, w)


CANDIDATES = ("target", "draft law", "residual omitted", "argmax drafts", "q at T'", "p at T'")


def candidate_acceptance(ctx: PromptContexts, sampling: SamplingConfig, candidate: str, rule: str,
                         t_other: float = 1.0) -> float:
    """The probability that the first draft of the step verifying x2 is kept (x1 from prefill, the
    cut mass counted at its lowest, 0) under ``candidate``, for an engine documented to apply
    ``rule`` ("sampled": drafts from q, "argmax": the argmax of q verified as one-hot): "draft law"
    keeps every draft; "residual omitted" accepts as the rule does; "argmax drafts" accepts the
    argmax with min(1, p / q); "q at T'" draws from q' and accepts with min(1, p / q); "p at T'"
    applies the rule to p'.  The acceptance a named wrong rule implies, against which an engine's
    own counter can exclude it."""
    if ctx.draft2 is None:
        raise ValueError("candidate acceptance needs the draft's logits")
    if rule not in ("sampled", "argmax"):
        raise ValueError(f"rule must be 'sampled' or 'argmax', got {rule!r}")
    p1 = sampling(ctx.target1).to(F64)[ctx.support]  # (S,)
    p, q = sampling(ctx.target2).to(F64), sampling(ctx.draft2).to(F64)  # (S, V)
    star = q.argmax(-1, keepdim=True)
    exact = (lambda pp: context_beta(pp, q)) if rule == "sampled" else \
        (lambda pp: pp.gather(-1, star).squeeze(-1))
    if candidate == "draft law":
        return float(p1.sum())
    if candidate in ("target", "residual omitted"):
        a = exact(p)
    elif candidate == "argmax drafts":
        a = accept_prob(p.gather(-1, star), q.gather(-1, star)).squeeze(-1)
    elif candidate == "q at T'":
        a = (SamplingConfig(t_other, sampling.top_k, sampling.top_p)(ctx.draft2).to(F64) * accept_prob(p, q)).sum(-1)
    elif candidate == "p at T'":
        a = exact(SamplingConfig(t_other, sampling.top_k, sampling.top_p)(ctx.target2).to(F64))
    else:
        raise ValueError(f"unknown candidate {candidate!r}; known: {list(CANDIDATES)}")
    return float((p1 * a).sum())


def candidate_joint(ctx: PromptContexts, sampling: SamplingConfig, candidate: str, verified=(False, True),
                    t_other: float = 1.0) -> np.ndarray:
    """Joint law of (x1, x2) under ``candidate`` on the cells of `joint_cells`: (S * V + 1,) float64,
    cell s * V + x2 for x1 = support[s], the last cell "x1 outside S" (its exact mass).  ``verified``:
    (x1 verified?, x2 verified?) -- (False, True) for an engine whose x1 comes from prefill, (True,
    True) for ours with k >= 2; an unverified position follows the target."""
    if sampling.greedy:
        raise ValueError("the law test is for T > 0; greedy decoding is tested token for token (greedy_divergences)")
    c1, c2 = (candidate if v else "target" for v in verified)
    l1 = position_law(c1, ctx.target1, ctx.draft1, sampling, t_other)  # (V,)
    l2 = position_law(c2, ctx.target2, ctx.draft2, sampling, t_other)  # (S, V)
    joint = (l1[ctx.support].unsqueeze(-1) * l2).reshape(-1)
    return np.append(joint.numpy(), max(0.0, 1.0 - float(joint.sum())))


def target_joint(ctx: PromptContexts, sampling: SamplingConfig) -> np.ndarray:
    """The target's own joint law of (x1, x2) on the cells of `joint_cells` (sums to 1)."""
    return candidate_joint(ctx, sampling, "target")


def joint_cells(ctx: PromptContexts, samples) -> np.ndarray:
    """Cell index of each observed (x1, x2) (N, >= 2 tokens; later tokens ignored) on the cells of
    `candidate_joint`: s * V + x2 for x1 = support[s], S * V when x1 is outside the support."""
    s = np.asarray(samples, dtype=np.int64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise ValueError(f"samples must be (N, >= 2) token ids, got shape {s.shape}")
    V, S = ctx.V, int(ctx.support.numel())
    if s.size and (s.min() < 0 or s.max() >= V):
        raise ValueError(f"sample tokens outside [0, {V})")
    pos = np.full(V, -1, dtype=np.int64)
    pos[ctx.support.numpy()] = np.arange(S)
    r = pos[s[:, 0]]
    return np.where(r >= 0, r * V + s[:, 1], S * V)


def ratio_score(ctx: PromptContexts, sampling: SamplingConfig) -> np.ndarray:
    """log q(x2 | x1) - log p(x2 | x1) on the cells of `candidate_joint` (the cut cell 0): the order
    of x2 within each x1 that `conformance.make_bins` can use instead of p.  Every wrong rule of
    `CANDIDATES` moves mass along this ratio (toward the draft's choices, or away from them on
    rejection), so bins cut along it see the whole move where bins by p see part of it; the order
    uses the draft, never the samples, so the test stays exact under the target law."""
    if ctx.draft2 is None:
        raise ValueError("the ratio order needs the draft's logits")
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lq = (np.log(sampling(z).to(F64).numpy()) for z in (ctx.target2, ctx.draft2))
        r = np.where(np.isfinite(lp), lq - lp, -np.inf)
    return np.append(np.nan_to_num(r, nan=-np.inf, posinf=1e300, neginf=-1e300).reshape(-1), 0.0)
