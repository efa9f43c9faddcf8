"""Chapter 02's exact tables: laws of whole generations on a context-dependent toy pair, by enumeration.

For `TableModel` target and draft (`specdec.core.toy`), `specdec.core.exact.spec_law` is the exact law
of the first n tokens of speculative decoding with k drafts (token- or block-wise verification)
and `target_law` the target's own autoregressive law; both are float64 tensors of shape (V,)*n.
Correctness means spec_law == target_law for every n, k and sampling setting (temperature, top-k,
top-p, greedy); the wrong variants of `specdec.core.rules.variants` must differ.  Also here: where the
truncation must be placed, and the expected accepted drafts of block versus token verification
(Sun et al. 2025: the toy pair target [1/3, 2/3], draft [2/3, 1/3], k = 2 gives 10/9 and 11/9).

Example:
    target, draft = toy_pair(4, 3, torch.Generator().manual_seed(7))  # specdec.core.toy
    max(r["max_abs_error"] for r in exact_grid_rows(target, draft, [SamplingConfig()], 2, 3)) < 1e-12
"""

from __future__ import annotations

import torch

from specdec.core.exact import all_sequences, expected_accepted, marginal, spec_law, target_law
from specdec.core.sampling import SamplingConfig, process_logits
from specdec.core.toy import TableModel
from specdec.core.rules.variants import variant_law
from specdec.core.verify import accept_prob, block_weights
from specdec.report.formatting import config_label

__all__ = ["SUN_TOY_EXAMPLE", "sun_toy_pair", "exact_grid_rows", "law_scatter_rows", "largest_deviation",
           "truncation_placement_rows", "keep_at_least", "block_vs_token_rows", "all_kept_check"]

F64 = torch.float64
SUN_TOY_EXAMPLE = {"k": 2, "token_ninths": 10, "block_ninths": 11,  # Sun et al. 2025: E[accepted] = 10/9, 11/9
                   "target": (1 / 3, 2 / 3), "draft": (2 / 3, 1 / 3)}  # ... for this context-free pair


def sun_toy_pair() -> tuple[TableModel, TableModel]:
    """Sun et al. (2025)'s toy pair, context-free: target [1/3, 2/3], draft [2/3, 1/3]."""
    return (TableModel(torch.tensor(SUN_TOY_EXAMPLE["target"], dtype=F64).log()),
            TableModel(torch.tensor(SUN_TOY_EXAMPLE["draft"], dtype=F64).log()))


def exact_grid_rows(target: TableModel, draft: TableModel, configs, k_max: int, n_max: int) -> list[dict]:
    """max |spec_law - target_law| over all V^n outputs, for every config (a SamplingConfig or its
    (temperature, top_k, top_p) values), method (token, block), k = 1..k_max and n = 1..n_max (the
    law of n tokens is a marginal of the law of n_max)."""
    rows = []
    for c in configs:
        c = c if isinstance(c, SamplingConfig) else SamplingConfig(*c)
        ref = {n: target_law(target, n, c) for n in range(1, n_max + 1)}
        for method in ("token", "block"):
            for k in range(1, k_max + 1):
                law = spec_law(target, draft, n_max, k, method, c)  # shorter n are its marginals
                for n in range(1, n_max + 1):
                    err = float((marginal(law, n) - ref[n]).abs().max())
                    rows.append(dict(config=config_label(c), method=method, k=k, n=n, max_abs_error=err))
    return rows


def law_scatter_rows(target: TableModel, draft: TableModel, n: int, k: int, cfg: SamplingConfig,
                     wrong=("resample_from_p", "raw_q")) -> list[dict]:
    """For every output sequence of n tokens (index = the sequence in base V): its target law and
    its law under token and block verification and under the ``wrong`` variants (named
    "<variant> (wrong)")."""
    ref = target_law(target, n, cfg).reshape(-1)  # (V^n,)
    series = [("token", spec_law(target, draft, n, k, "token", cfg)),
              ("block", spec_law(target, draft, n, k, "block", cfg))]
    series += [(f"{w} (wrong)", variant_law(w, target, draft, n, k, cfg)) for w in wrong]
    return [dict(algorithm=name, sequence=i, target_law=float(ref[i]), algorithm_law=float(v))
            for name, law in series for i, v in enumerate(law.reshape(-1))]


def largest_deviation(scatter) -> dict:
    """{algorithm: max |algorithm_law - target_law|} over the rows of `law_scatter_rows` (a DataFrame).
    Example: token and block -> ~1e-16; "resample_from_p (wrong)" -> far from 0."""
    dev = (scatter["algorithm_law"] - scatter["target_law"]).abs().groupby(scatter["algorithm"], sort=False).max()
    return {str(a): float(v) for a, v in dev.items()}


def _probs_text(t: torch.Tensor) -> str:
    """A probability vector as numbers to three decimals.  Example: [0.4, 0.6] -> "[0.400, 0.600]"."""
    return "[" + ", ".join(f"{float(x):.3f}" for x in t) + "]"


def truncation_placement_rows(target: TableModel, draft: TableModel, n: int, k: int, cfg: SamplingConfig,
                              order_probs, order_top_k: int, order_top_p: float) -> list[dict]:
    """TV from the target law (of n tokens, k drafts, setting ``cfg``) when truncation is placed
    (1) right: every distribution as sampled; (2) in the other order, top-p then top-k (shown on
    one distribution, softmax(log order_probs), against Hugging Face's top-k then top-p);
    (3) drafts truncated, q raw in verification; (4) target truncated, p raw in verification."""
    ref = target_law(target, n, cfg)
    logits = torch.tensor(order_probs, dtype=F64).log()
    hf_order = process_logits(logits, 1.0, order_top_k, order_top_p)
    by_p_first = process_logits(logits, 1.0, None, order_top_p)  # the other order: top-p on the full softmax,
    other_order = process_logits(by_p_first.log(), 1.0, order_top_k)  # then top-k on what it kept
    raw = SamplingConfig(cfg.temperature)
    law_tv = lambda law: float(0.5 * (law - ref).abs().sum())  # noqa: E731
    what = f"TV of the {n}-token law"
    return [
        dict(placement="every distribution as sampled (correct)", quantity=what,
             tv=law_tv(spec_law(target, draft, n, k, "token", cfg))),
        dict(placement=f"top-p then top-k: {_probs_text(other_order)} vs {_probs_text(hf_order)}",
             quantity="TV of one token", tv=0.5 * float((hf_order - other_order).abs().sum())),
        dict(placement="drafts truncated, q raw in verification", quantity=what,
             tv=law_tv(variant_law("raw_q", target, draft, n, k, cfg))),
        dict(placement="target truncated when sampling, p raw in verification", quantity=what,
             tv=law_tv(spec_law(target, draft, n, k, "token", raw, cfg))),
    ]


def keep_at_least(target: TableModel, draft: TableModel, k: int, cfg: SamplingConfig) -> tuple[float, float]:
    """Exact probability that all k drafts of the first step are kept, averaged over the drafts:
    (token, block) = (E_q[prod_{i<=k} a_i], E_q[w_k]), with a and w as `specdec.core.verify` defines
    them, by enumerating the V^k draft blocks.  By the invariant of block verification (chapter 02:
    P(N >= i | x_1..x_i), averaged over the drafts after i, is w_i) and the chain rule of token
    verification, these are also the increments E[N | k] - E[N | k-1] of the expected accepted drafts.
    Example: Sun et al.'s toy pair, k = 2 -> (4/9, 5/9)."""
    seqs = all_sequences(target.V, k)  # (D, k)
    q = torch.stack([draft.probs_for(seqs[:, :t], cfg) for t in range(k)], dim=1).to(F64)  # (D, k, V)
    p = torch.stack([target.probs_for(seqs[:, :t], cfg) for t in range(k)], dim=1).to(F64)  # (D, k, V)
    qx = q.gather(-1, seqs.unsqueeze(-1)).squeeze(-1)  # (D, k)
    px = p.gather(-1, seqs.unsqueeze(-1)).squeeze(-1)  # (D, k)
    q_block = qx.prod(-1)  # (D,) law of the draft block
    return (float((q_block * accept_prob(px, qx).prod(-1)).sum()),
            float((q_block * block_weights(px, qx)[:, k]).sum()))


def block_vs_token_rows(target: TableModel, draft: TableModel, ks, cfg: SamplingConfig) -> list[dict]:
    """Exact expected accepted drafts in the first step, token- and block-wise, for every k in ks:
    Sun et al.'s toy pair (no truncation) and the ``target``/``draft`` toy ("trigram toy",
    setting ``cfg``); gain_percent = 100 (block / token - 1); token_all_kept, block_all_kept: the
    probability that all k drafts are kept (`keep_at_least`)."""
    pair_t, pair_d = sun_toy_pair()
    models = {"toy pair": (pair_t, pair_d, SamplingConfig()), "trigram toy": (target, draft, cfg)}
    rows = []
    for k in ks:
        for name, (tm, dm, c) in models.items():
            tok = expected_accepted(tm, dm, k, "token", c)
            blk = expected_accepted(tm, dm, k, "block", c)
            tok_all, blk_all = keep_at_least(tm, dm, k, c)
            rows.append(dict(model=name, k=k, token=tok, block=blk, gain_percent=100 * (blk / tok - 1) if tok else 0.0,
                             token_all_kept=tok_all, block_all_kept=blk_all))
    return rows


def all_kept_check(rows) -> float:
    """max |E[N | k] - E[N | k-1] - P(all k kept)| over the rows of `block_vs_token_rows` (dicts with
    model, k, token, block, token_all_kept, block_all_kept), both methods, every k whose k - 1 is
    also present (E[N | 0] = 0): the proofs' invariant, checked by enumeration.  Float64 rounding if it holds."""
    by = {(r["model"], r["k"]): r for r in rows}
    errs = [abs(r[m] - (by[(r["model"], r["k"] - 1)][m] if r["k"] > 1 else 0.0) - r[f"{m}_all_kept"])
            for r in rows if r["k"] == 1 or (r["model"], r["k"] - 1) in by for m in ("token", "block")]
    return max(errs)
