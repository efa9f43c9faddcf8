"""Acceptance held to its exact expectation, and the metric conventions engines report it in.

The rule decides the expectation.  At a context with processed target and draft laws p, q the
probability that the draft at that position is kept is exactly (`expected_acceptance`)
    "sampled"  sum_x min(p(x), q(x))   drafts drawn from q, token verification
                                       (`specdec.core.acceptance.context_beta`)
    "argmax"   p(x*), x* = argmax q     argmax drafts verified as one-hot (exact; vLLM's default
                                       draft_sample_method "greedy" when verified strictly)
    "match"    sum_x p(x) q(x)          drafts from q kept iff a token from p equals them
                                       (`specdec.core.rules.alternatives.MATCH`)

Position 1 of the first verification step is computed exactly (`first_step_expectation`): where
the prompt is fed with the first step (ours) its context is the prompt; where the first token
comes from prefill (vLLM, Hugging Face) it is prompt + x1 with x1 ~ p1, so the expectation is
sum_x1 p1(x1) alpha(prompt + x1) over the enumerated support of `specdec.peers.laws`, and the cut
mass, whose alpha is unknown but in [0, 1], widens it into an interval of that width.

Later positions and steps (`conditional_acceptance`): the context of position i of a step is the
observed prefix (the i - 1 drafts before it were kept, so they are the emitted tokens).  Given the
past, the indicator "kept at i" is Bernoulli(alpha(context)) exactly, so over the steps that
reached position i the kept count A_i has E[A_i | contexts] = sum alpha and variance sum alpha
(1 - alpha) (a martingale: z = (A_i - sum alpha) / sd is asymptotically normal).  This needs the
engine's step boundaries (ours: `steps_of_ours`); an engine that reports only totals per position
is held to position 1 of its first step, or to `first_step_expectation` with max_tokens = 2.

Metric conventions (`metrics_from_counters`, `CONVENTIONS`): vLLM's counters are num_drafts
(verification steps of a request that drafted), num_draft_tokens (drafts proposed), num_accepted
_tokens (drafts kept) and num_accepted_tokens_per_pos[i] (steps whose draft i + 1 was kept, all
earlier ones kept).  Acceptance rate = accepted / proposed; mean accepted length = 1 + accepted /
num_drafts (tokens per step, the bonus or replacement token included: the book's E[L]); the
book's alpha_i = per_pos[i] / per_pos[i - 1] (per_pos[-1] = num_drafts) is the conditional
acceptance of position i, and its constant alpha is the truncated-geometric maximum likelihood
S / (S + F).  Why acceptance rate misranks draft lengths: with one alpha per position, E[accepted]
= alpha + ... + alpha^k grows with k while the rate E[accepted] / k falls (`specdec.core.cost.expected_tokens`), so a
longer draft that emits more tokens per step shows a lower rate.

Example: expected_acceptance(p, q, "argmax") == p.gather(-1, q.argmax(-1, keepdim=True)).squeeze(-1)
"""

from __future__ import annotations

import math

import torch

from specdec.core.acceptance import context_beta
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import wilson_interval

__all__ = ["RULES", "expected_acceptance", "first_step_expectation", "steps_of_ours", "conditional_acceptance",
           "CONVENTIONS", "metrics_from_counters"]

F64 = torch.float64
RULES = ("sampled", "argmax", "match")


def expected_acceptance(p: torch.Tensor, q: torch.Tensor, rule: str) -> torch.Tensor:
    """The probability (...) that a draft is kept under ``rule`` (module docstring) from processed
    p, q (..., V)."""
    if rule == "sampled":
        return context_beta(p.to(F64), q.to(F64))
    if rule == "argmax":
        return p.to(F64).gather(-1, q.argmax(-1, keepdim=True)).squeeze(-1)
    if rule == "match":
        return (p.to(F64) * q.to(F64)).sum(-1)
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def first_step_expectation(ctx, sampling: SamplingConfig, rule: str, first_from_prefill: bool,
                           draft_sampling: SamplingConfig | None = None) -> tuple[float, float]:
    """(low, high) of the exact expected acceptance at position 1 of the first verification step of
    one prompt (``ctx``: `specdec.peers.laws.PromptContexts` with the draft's logits); low == high
    when the first token is verified (ours), an interval of the cut mass's width after prefill.
    ``draft_sampling``: the rules q is processed by when an engine processes its drafts otherwise
    than its target (vLLM's proposer applies the temperature only); default ``sampling``."""
    if ctx.draft1 is None:
        raise ValueError("the contexts carry no draft logits: enumerate_prompt(target, draft, ...) with a draft")
    qs = draft_sampling or sampling
    if not first_from_prefill:
        a = float(expected_acceptance(sampling(ctx.target1), qs(ctx.draft1), rule))
        return a, a
    p1 = sampling(ctx.target1).to(F64)[ctx.support]
    a = expected_acceptance(sampling(ctx.target2), qs(ctx.draft2), rule)  # (S,)
    low = float((p1 * a).sum())
    return low, low + max(0.0, 1.0 - float(p1.sum()))


def steps_of_ours(result, prompt_len: int) -> list[list[tuple[int, int, int]]]:
    """Per row of one `specdec.engine.generate` call: its drafting steps as (start, k, kept), start
    being the length of the context of the step's first draft (prompt included)."""
    out = [[] for _ in result.tokens]
    done = [prompt_len] * len(result.tokens)
    for s, (rows, kept), (_, rows_e, emitted) in zip(result.stats.steps, result.stats.accepted, result.stats.emitted):
        if list(rows) != list(rows_e):
            raise ValueError("the stats' accepted and emitted rows disagree")
        for r, a, e in zip(rows, kept, emitted):
            if s["k"] > 0:
                out[r].append((done[r], int(s["k"]), int(a)))
            done[r] += int(e)
    return out


@torch.inference_mode()
def _logits(model, seqs: list[list[int]], chunk: int) -> list[torch.Tensor]:
    out = []
    for i in range(0, len(seqs), chunk):
        batch = seqs[i:i + chunk]
        L = max(map(len, batch))
        if any(len(s) != L for s in batch):
            for s in batch:  # ragged: one by one
                out.append(model(input_ids=torch.tensor([s])).logits[0].double())
            continue
        out.extend(model(input_ids=torch.tensor(batch)).logits.double().unbind(0))
    return out


def conditional_acceptance(target, draft, sequences, steps, sampling: SamplingConfig, rule: str = "sampled",
                           chunk: int = 64, level: float = 0.95) -> list[dict]:
    """One row per draft position i: steps that reached i with a known context (the i - 1 earlier
    drafts among the sequence's tokens), drafts kept there, their exact conditional expectation
    (module docstring), z and two-sided normal p-value, and the kept rate with its Wilson interval
    beside the expected rate.  sequences: prompt + generated ids per row; steps: `steps_of_ours`."""
    if sampling.greedy:
        raise ValueError("at T = 0 acceptance is deterministic: compare tokens (conformance.greedy_divergences)")
    if len(sequences) != len(steps):
        raise ValueError(f"{len(sequences)} sequences against {len(steps)} step lists")
    zt, zq = _logits(target, sequences, chunk), _logits(draft, sequences, chunk)
    acc = {}
    for seq, st, lt, lq in zip(sequences, steps, zt, zq):
        alpha = expected_acceptance(sampling(lt), sampling(lq), rule).numpy()  # (L,): context seq[:t + 1]
        for start, k, kept in st:
            for i in range(1, min(k, kept + 1) + 1):  # reached iff kept >= i - 1
                c = start + i - 1  # context length
                if c > len(seq):
                    break
                row = acc.setdefault(i, [0, 0, 0.0, 0.0])
                a = float(alpha[c - 1])
                row[0] += 1
                row[1] += int(kept >= i)
                row[2] += a
                row[3] += a * (1 - a)
    rows = []
    for i in sorted(acc):
        n, k, e, v = acc[i]
        z = (k - e) / math.sqrt(v) if v > 0 else (0.0 if k == e else math.inf)
        lo, hi = wilson_interval(k, n, level)
        rows.append({"position": i, "reached": n, "kept": k, "expected": e, "z": z,
                     "p_value": math.erfc(abs(z) / math.sqrt(2)), "rate": k / n, "rate_low": lo, "rate_high": hi,
                     "expected_rate": e / n})
    return rows


CONVENTIONS = [
    {"metric": "num_drafts", "book": "drafting steps", "formula": "verification steps that drafted (per request)"},
    {"metric": "num_draft_tokens", "book": "drafts proposed", "formula": "sum of k over drafting steps"},
    {"metric": "num_accepted_tokens", "book": "drafts kept", "formula": "sum of N (kept drafts) over steps"},
    {"metric": "num_accepted_tokens_per_pos[i]", "book": "steps keeping draft i + 1",
     "formula": "#steps with N >= i + 1"},
    {"metric": "acceptance_rate", "book": "acceptance rate (not alpha)", "formula": "num_accepted / num_draft_tokens"},
    {"metric": "mean_accepted_length", "book": "E[L], tokens per step",
     "formula": "1 + num_accepted / num_drafts (the bonus or replacement token included)"},
    {"metric": "position_rate[i]", "book": "P(N >= i + 1)", "formula": "per_pos[i] / num_drafts"},
    {"metric": "alpha[i]", "book": "alpha_i, conditional acceptance at position i + 1",
     "formula": "per_pos[i] / per_pos[i - 1], per_pos[-1] = num_drafts"},
    {"metric": "alpha_mle", "book": "constant alpha (truncated geometric MLE)",
     "formula": "S / (S + F), S = num_accepted, F = num_drafts - per_pos[k - 1]"},
]


def metrics_from_counters(counters: dict) -> dict:
    """The metrics of `CONVENTIONS` from counters named as vLLM names them (a "vllm:spec_decode_"
    prefix is accepted); the maximum-likelihood alpha assumes every step drafted the full k."""
    c = {key.removeprefix("vllm:spec_decode_"): v for key, v in counters.items()}
    missing = [key for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens") if key not in c]
    if missing:
        raise ValueError(f"counters lack {missing}")
    d, t, a = int(c["num_drafts"]), int(c["num_draft_tokens"]), int(c["num_accepted_tokens"])
    if d < 1 or t < d or not 0 <= a <= t:
        raise ValueError(f"inconsistent counters: num_drafts {d}, num_draft_tokens {t}, num_accepted {a}")
    per = [int(x) for x in c.get("num_accepted_tokens_per_pos", [])]
    if per and (sum(per) != a or any(x < y for x, y in zip(per, per[1:]))):
        raise ValueError(f"num_accepted_tokens_per_pos {per} must be non-increasing and sum to {a}")
    out = {"acceptance_rate": a / t, "mean_accepted_length": 1 + a / d, "mean_k": t / d,
           "position_rate": [x / d for x in per],
           "alpha": [x / y if y else math.nan for x, y in zip(per, [d] + per[:-1])]}
    if per:
        s, f = a, d - per[-1]
        out["alpha_mle"] = s / (s + f) if s + f else math.nan
        out["position_rate_interval"] = [wilson_interval(x, d) for x in per]
    return out
