"""Exact output laws by enumeration (no sampling): the proof by computation that speculative
decoding reproduces the target's law.

One step (seed, equations 1-2; Leviathan et al. 2022, Theorem 3.5):

    pi(x) = q(x) a(x) + (1 - sum_y min{p(y), q(y)}) r(x)  =  min{p, q} + [p - q]_+  =  p(x).

Whole generations: for `TableModel` target and draft (see `specdec.core.toy`) `spec_law` enumerates
every draft block x_1..x_k (V^k of them) from every reachable prefix, the exact probability of
each verification outcome (j accepted drafts, then token y), and pushes the mass forward until n
tokens exist; `target_law` is the target's own autoregressive law of the first n tokens.  Both are
dense float64 tensors of shape (V,)*n.  Outcome probabilities given a draft block:

    token:  P(j, y) = prod_{i<j} a_i * (1 - a_j) * r_j(y)   (j < k),   prod_{i<k} a_i * p_k(y)   (j = k)
    block:  P(tau = j) = h_j prod_{i>j} (1 - h_i)  (h_0 = 1),  y ~ [w_j p_j - q_j]_+ or p_k

with a, r, w, h exactly as `specdec.core.verify` defines them (the equations live there only).

Example (Sun et al. 2025's toy pair, k = 2): expected_accepted(target [1/3, 2/3], draft
[2/3, 1/3]) is 10/9 token-wise and 11/9 with block verification.
"""

from __future__ import annotations

import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.toy import TableModel
from specdec.core.verify import accept_prob, block_stop_probs, block_weights, residual

__all__ = ["one_step_law", "target_law", "step_outcomes", "as_rule", "spec_law", "expected_accepted",
           "expected_accepted_rule", "accepted_law", "marginal",
           "all_sequences", "chunks_from_table", "STANDARD_RULES"]

F64 = torch.float64


def one_step_law(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """pi = q a + (1 - sum min{p, q}) r over the last axis: the law of one verified token (= p).

    Example: one_step_law(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> [1/3, 2/3]
    """
    beta = torch.minimum(p, q).sum(-1, keepdim=True)  # accepted mass
    return q * accept_prob(p, q) + (1 - beta) * residual(p, q)


def all_sequences(V: int, n: int) -> torch.Tensor:
    """All V^n sequences in lexicographic order (row i is i written in base V): (V^n, n)."""
    if n == 0:
        return torch.zeros(1, 0, dtype=torch.long)
    return torch.cartesian_prod(*[torch.arange(V)] * n).reshape(-1, n)


def _encode(tokens: torch.Tensor, V: int) -> torch.Tensor:
    """(M, L) tokens -> (M,) base-V codes (first token most significant)."""
    code = torch.zeros(tokens.shape[0], dtype=torch.long)
    for i in range(tokens.shape[1]):
        code = code * V + tokens[:, i]
    return code


def _seq_probs(model: TableModel, cfg: SamplingConfig, seqs: torch.Tensor, start: int) -> torch.Tensor:
    """Processed next-token distributions at positions start..T of seqs (M, T): (M, T-start+1, V)."""
    return torch.stack([model.probs_for(seqs[:, :t], cfg) for t in range(start, seqs.shape[1] + 1)], dim=1)


def target_law(target: TableModel, n: int, cfg: SamplingConfig = SamplingConfig()) -> torch.Tensor:
    """The target's own autoregressive law of its first n tokens: (V,)*n float64."""
    seqs = all_sequences(target.V, n)  # (V^n, n)
    probs = _seq_probs(target, cfg, seqs, 0)[:, :n]  # (V^n, n, V)
    law = probs.gather(-1, seqs.unsqueeze(-1)).squeeze(-1).prod(-1)
    return law.reshape((target.V,) * n)


def marginal(law: torch.Tensor, n: int) -> torch.Tensor:
    """Law of the first n tokens from a law of more tokens (sum out the trailing axes)."""
    return law.sum(dim=tuple(range(n, law.dim()))) if law.dim() > n else law


def chunks_from_table(drafts: torch.Tensor, out: torch.Tensor):
    """Outcome table out (D, k+1, V) = P(j accepted, then y | draft) -> chunk groups
    [(draft index (M,), tokens (M, j+1), prob (M,))] with tokens = drafts[:j] + [y]."""
    D, k = drafts.shape
    V = out.shape[-1]
    idx = torch.arange(D).repeat_interleave(V)  # (D*V,)
    y = torch.arange(V).repeat(D).unsqueeze(1)  # (D*V, 1)
    return [(idx, torch.cat([drafts[idx, :j], y], dim=1), out[:, j].reshape(-1)) for j in range(k + 1)]


def step_outcomes(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, method: str = "token") -> torch.Tensor:
    """Exact P(j accepted drafts, then token y | draft block): drafts (D, k), q (D, k, V),
    p (D, k+1, V) -> (D, k+1, V) float64; each row sums to 1."""
    D, k = drafts.shape
    p, q = p.to(F64), q.to(F64)
    px = p[:, :k].gather(-1, drafts.unsqueeze(-1)).squeeze(-1)  # (D, k)
    qx = q.gather(-1, drafts.unsqueeze(-1)).squeeze(-1)  # (D, k)
    out = torch.zeros(D, k + 1, p.shape[-1], dtype=F64)
    if method == "token":
        a = accept_prob(px, qx)  # (D, k)
        reach = torch.ones(D, dtype=F64)  # P(first j drafts accepted)
        for j in range(k):
            out[:, j] = (reach * (1 - a[:, j])).unsqueeze(-1) * residual(p[:, j], q[:, j])
            reach = reach * a[:, j]
        out[:, k] = reach.unsqueeze(-1) * p[:, k]
    elif method == "block":
        w = block_weights(px, qx)  # (D, k+1)
        hk = block_stop_probs(w, p, q)  # (D, k): h_1..h_k
        h = [torch.ones(D, dtype=F64)] + [hk[:, i] for i in range(k)]  # h_0 = 1: tau = 0 when none fires
        after = torch.ones(D, dtype=F64)  # prod_{i>j} (1 - h_i)
        for j in range(k, -1, -1):
            pt = h[j] * after  # P(tau = j)
            if j == k:
                dist = p[:, k]
            else:  # rows with w_j = 0 have P(tau = j) = 0; keep them finite
                dist = torch.where(w[:, j, None] > 0, residual(w[:, j, None] * p[:, j], q[:, j]), p[:, j])
            out[:, j] = pt.unsqueeze(-1) * dist
            after = after * (1 - h[j])
    else:
        raise ValueError(f"method must be 'token' or 'block', got {method!r}")
    return out


STANDARD_RULES = ("token", "block")


def as_rule(method):
    """A `spec_law` method as a rule: "token" / "block" become (drafts, q, p) -> chunk groups of
    `step_outcomes`; a rule passes through."""
    if isinstance(method, str):
        return lambda d, q, p: chunks_from_table(d, step_outcomes(d, q, p, method))
    return method


def _draft_rows(target, draft, prefixes, blocks, k: int, drafts: int, target_cfg, draft_cfg, draft_sample_cfg):
    """Every (prefix, draft blocks) row: drafts (R, k), q given to verification (R, k, V), p
    (R, k+1, V) and the probability of drawing the blocks (R,); with drafts > 1 an axis of
    size ``drafts`` after R (blocks (R, drafts k) holds them side by side, each continuing the prefix)."""
    L = prefixes.shape[1]
    parts = []
    for j in range(drafts):
        seqs = torch.cat([prefixes, blocks[:, j * k:(j + 1) * k]], dim=1)  # (R, L+k)
        q_s = _seq_probs(draft, draft_sample_cfg, seqs, L)[:, :k]  # (R, k, V) drafts drawn from
        q_v = _seq_probs(draft, draft_cfg, seqs, L)[:, :k]  # (R, k, V) q given to verification
        p = _seq_probs(target, target_cfg, seqs, L)  # (R, k+1, V)
        d = seqs[:, L:]  # (R, k)
        parts.append((d, q_v, p, q_s.gather(-1, d.unsqueeze(-1)).squeeze(-1).prod(-1)))
    if drafts == 1:
        return parts[0]
    d, q_v, p = (torch.stack([x[i] for x in parts], dim=1) for i in range(3))
    return d, q_v, p, torch.stack([x[3] for x in parts], dim=1).prod(-1)


def spec_law(target: TableModel, draft: TableModel, n: int, k: int, method="token",
             target_cfg: SamplingConfig = SamplingConfig(), draft_cfg: SamplingConfig | None = None,
             draft_sample_cfg: SamplingConfig | None = None, drafts: int = 1) -> torch.Tensor:
    """Exact law of the first n tokens produced by speculative decoding with k drafts: (V,)*n.

    method: "token", "block", or a rule `rule(drafts, q, p) -> chunk groups` (see
    `chunks_from_table`; the wrong variants in `specdec.core.rules.variants` are such rules).
    Drafts are drawn from `draft_sample_cfg` (default `draft_cfg`, default `target_cfg`) and q
    given to the rule is processed with `draft_cfg`; they differ only for negative controls.
    drafts: independent draft blocks per step (multi-draft verification, `specdec.core.rules.multidraft`);
    above 1 the rule receives drafts (R, drafts, k), q (R, drafts, k, V), p (R, drafts, k+1, V) and
    every combination of the drafts' blocks is enumerated (V^(drafts k) per prefix).
    """
    if target.V != draft.V:
        raise ValueError(f"vocabulary mismatch: target V={target.V}, draft V={draft.V}")
    if n < 1 or k < 0 or drafts < 1:
        raise ValueError(f"need n >= 1, k >= 0 and drafts >= 1, got n={n}, k={k}, drafts={drafts}")
    draft_cfg = draft_cfg or target_cfg
    draft_sample_cfg = draft_sample_cfg or draft_cfg
    if isinstance(method, str) and drafts > 1:
        raise ValueError(f"drafts = {drafts} needs a multi-draft rule (specdec.core.rules.multidraft), not {method!r}")
    rule = as_rule(method)
    V = target.V
    blocks = all_sequences(V, k * drafts)  # (D, drafts k): the drafts' blocks side by side
    D = blocks.shape[0]
    final = torch.zeros(V ** n, dtype=F64)
    mass = [torch.zeros(V ** L, dtype=F64) for L in range(n)]  # prefixes of length L < n
    mass[0][0] = 1.0
    for L in range(n):  # every step adds >= 1 token, so lengths are processed in order
        codes = mass[L].nonzero().squeeze(1)  # (S,) reachable prefixes of length L
        S = codes.shape[0]
        if S == 0:
            continue
        prefixes = torch.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], dim=1) if L \
            else torch.zeros(S, 0, dtype=torch.long)  # (S, L)
        state = torch.arange(S).repeat_interleave(D)  # (S*D,) state of each row
        d_all, q_v, p, q_block = _draft_rows(target, draft, prefixes[state], blocks.repeat(S, 1), k, drafts,
                                             target_cfg, draft_cfg, draft_sample_cfg)
        keep = (q_block > 0).nonzero().squeeze(1)  # drafts that cannot be drawn are dropped
        row_mass = mass[L][codes][state[keep]] * q_block[keep]  # (R,)
        row_code = codes[state[keep]]  # (R,)
        for idx, toks, prob in rule(d_all[keep], q_v[keep], p[keep]):
            w = row_mass[idx] * prob  # (M,)
            Lc = toks.shape[1]
            if L + Lc >= n:
                final.index_add_(0, row_code[idx] * V ** (n - L) + _encode(toks[:, : n - L], V), w)
            else:
                mass[L + Lc].index_add_(0, row_code[idx] * V ** Lc + _encode(toks, V), w)
    return final.reshape((V,) * n)


def expected_accepted(target: TableModel, draft: TableModel, k: int, method: str = "token",
                      target_cfg: SamplingConfig = SamplingConfig(),
                      draft_cfg: SamplingConfig | None = None) -> float:
    """Exact expected number of accepted drafts in the first step (empty context).

    Example: the toy pair target [1/3, 2/3], draft [2/3, 1/3] (order-0 tables), k = 2:
    10/9 for "token", 11/9 for "block".
    """
    draft_cfg = draft_cfg or target_cfg
    blocks = all_sequences(target.V, k)  # (D, k)
    _, q, p, q_block = _draft_rows(target, draft, blocks[:, :0], blocks, k, 1, target_cfg, draft_cfg, draft_cfg)
    live = q_block > 0
    out = step_outcomes(blocks[live], q[live], p[live], method).sum(-1)  # (D', k+1)
    return float((q_block[live] * (out * torch.arange(k + 1, dtype=F64)).sum(-1)).sum())


def accepted_law(target: TableModel, draft: TableModel, k: int, rule, target_cfg=SamplingConfig(),
                 draft_cfg=None, draft_sample_cfg=None, drafts: int = 1) -> torch.Tensor:
    """Exact law (k+1,) float64 of the number of drafts kept in the first step (empty context) under
    any `spec_law` rule (chunk groups) with ``drafts`` draft blocks: sum over draft blocks and
    outcomes of P(blocks) P(outcome), by the outcome's tokens emitted - 1."""
    if target.V != draft.V:
        raise ValueError(f"vocabulary mismatch: target V={target.V}, draft V={draft.V}")
    if k < 1 or drafts < 1:
        raise ValueError(f"need k >= 1 and drafts >= 1, got k={k}, drafts={drafts}")
    draft_cfg = draft_cfg or target_cfg
    draft_sample_cfg = draft_sample_cfg or draft_cfg
    blocks = all_sequences(target.V, k * drafts)
    d, q, p, q_block = _draft_rows(target, draft, blocks[:, :0], blocks, k, drafts, target_cfg, draft_cfg,
                                   draft_sample_cfg)
    live = (q_block > 0).nonzero().squeeze(1)
    law = torch.zeros(k + 1, dtype=F64)
    for idx, toks, prob in rule(d[live], q[live], p[live]):
        law[toks.shape[1] - 1] += (q_block[live][idx] * prob).sum()
    return law


def expected_accepted_rule(target: TableModel, draft: TableModel, k: int, rule, target_cfg=SamplingConfig(),
                           draft_cfg=None, draft_sample_cfg=None, drafts: int = 1) -> float:
    """`expected_accepted` for any `spec_law` rule and ``drafts`` draft blocks: the mean of `accepted_law`."""
    law = accepted_law(target, draft, k, rule, target_cfg, draft_cfg, draft_sample_cfg, drafts)
    return float((law * torch.arange(k + 1, dtype=F64)).sum())
