"""Exact one-step laws on the real pair's logits: what each verification rule and each precision
path does to the first emitted token at held-out contexts, computed, not sampled.

At a context the target's and the draft's next-token laws p, q (V,) come from one float32 forward of
each model over the prompts (`context_logits`).  Then, exactly: the law of the first token a step emits
under a positional rule (`specdec.core.rules.positional.first_token_law`; greedy drafts draw the argmax
of q), its total variation from p and the probability that the first draft is kept, sum_x q(x) a(x)
(for n independent drafts, recursive rejection sampling's acceptance: its law is p exactly); the N a
frequency test of that next-token law needs to see the TV (cells = tokens with p > 0) puts the toy's
distances on the real scale.  Each precision path's law (`specdec.core.rules.precision`) is computed
the same way, and the real code path (`verify` on rows stored in the path's precision) sampled
against it.  Medians and maxima are over contexts.

Example: rows = rule_real_rows(*context_logits(target, draft, prompts, 64),
{"match": (MATCH.parts, "lossless", False)}, SamplingConfig(1.0), n_drafts=(2, 4), alpha=1e-3,
power=0.999) -> match at TV ~1e-16.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.rules.multidraft import rrs_acceptance
from specdec.core.rules.positional import first_token_law
from specdec.core.rules.precision import DTYPES, PATHS, one_step_law, precision_cfg, tv
from specdec.core.sampling import SamplingConfig, sample
from specdec.core.stats import gof_test, sample_size
from specdec.core.verify import verify

__all__ = ["LOGITS_TOLERANCE", "context_logits", "rule_real_rows", "precision_real_rows", "first_token_counts",
           "sampled_precision_rows"]

# How far these exact tables may move on another CPU (the reproduction page's comparison): every row
# comes from float32 forwards whose logits differ between CPUs at their rounding (seen: 4.3e-7 absolute
# on a TV or row total, whose rounding-level values move 100% relative; 1.6e-5 relative on sample counts).
LOGITS_TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}

F64 = torch.float64


@torch.inference_mode()
def context_logits(target, draft, prompts: torch.Tensor, contexts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(target logits, draft logits), each (C, V) float64 on the CPU, at ``contexts`` positions
    spread evenly over the n P positions of prompts (n, P), from one float32 forward per model."""
    n, L = prompts.shape
    if not 1 <= contexts <= n * L:
        raise ValueError(f"contexts must lie in [1, {n * L}] (the prompts' positions), got {contexts}")
    at = torch.linspace(0, n * L - 1, contexts).round().long()  # (C,) distinct positions: spacing >= 1

    def logits(model):
        dev = next(model.parameters()).device
        z = model(input_ids=prompts.to(dev).long()).logits.float()  # (n, P, V)
        return z.reshape(n * L, -1)[at.to(dev)].double().cpu()  # (C, V)

    return logits(target), logits(draft)


def rule_real_rows(lt: torch.Tensor, lq: torch.Tensor, rules: dict, cfg: SamplingConfig, *, n_drafts=(),
                   alpha: float, power: float) -> list[dict]:
    """Per rule ({name: (parts, family, greedy_drafts)}) over the contexts of logits lt, lq (C, V):
    TV of the first token's law from p (median, max), mean P(first draft kept), and the N a
    frequency test at level alpha with the given power needs to see the median TV (0: never), over
    ``cells`` = the median number of tokens with p > 0.
    Then one row per n of ``n_drafts``: multi-draft acceptance (TV 0 by construction, not computed)."""
    p, q = cfg(lt).to(F64), cfg(lq).to(F64)  # (C, V) processed laws
    cells = int(np.median((p > 0).sum(-1).numpy()))
    rows = []
    for name, (parts, family, greedy) in rules.items():
        laws = [first_token_law(parts, p[c], q[c], torch.nn.functional.one_hot(q[c].argmax(), p.shape[1]).to(F64)
                                if greedy else q[c]) for c in range(p.shape[0])]  # (law, P(first draft kept))
        tvs, acc = [float(tv(law, p[c])) for c, (law, _) in enumerate(laws)], [kept for _, kept in laws]
        med = float(np.median(tvs))
        rows.append({"algorithm": name, "family": family, "contexts": p.shape[0], "cells": cells, "tv_median": med,
                     "tv_max": float(np.max(tvs)), "accept_first": float(np.mean(acc)),
                     "detect_N": sample_size(med, max(cells, 2), alpha, power) if med > 1e-12 else 0})
    for n in n_drafts:
        acc = [rrs_acceptance(p[c].numpy() / p[c].sum().item(), q[c].numpy() / q[c].sum().item(), n)
               for c in range(p.shape[0])]
        rows.append({"algorithm": f"multi-draft n={n}", "family": "lossless", "contexts": p.shape[0], "cells": cells,
                     "tv_median": 0.0, "tv_max": 0.0, "accept_first": float(np.mean(acc)), "detect_N": 0})
    return rows


def precision_real_rows(lt: torch.Tensor, lq: torch.Tensor, cfg: SamplingConfig = SamplingConfig(),
                        paths=None) -> list[dict]:
    """The one-step law each precision path realizes from logits lt, lq (C, V) (default: every path
    of PATHS): p~, q~ = precision_cfg(path, cfg)(logits), law = one_step_law(p~, q~, verify dtype);
    TV of the law from the exact target law (float64 throughout) and from the same-precision target
    p~ / sum p~, median and max over contexts, and max |sum p~ - 1| (and of q~).

    Example: the exact path gives tv_exact_max 0; "bf16 softmax" has tv_same near the rows' ~1e-3
    deviation of their totals from 1.
    """
    paths = list((PATHS if paths is None else paths).values())
    exact = precision_cfg(PATHS["exact (float64)"], cfg, normalize=True)(lt)  # (C, V)
    rows = []
    for path in paths:
        pt, qt = precision_cfg(path, cfg)(lt), precision_cfg(path, cfg)(lq)  # (C, V) rounded rows, float64
        law = one_step_law(pt, qt, DTYPES[path.verify])
        te, ts = tv(law, exact).numpy(), tv(law, precision_cfg(path, cfg, normalize=True)(lt)).numpy()
        rows.append({"path": path.name, "logits": path.logits, "probs": path.probs, "verify": path.verify,
                     "contexts": lt.shape[0], "tv_exact_median": float(np.median(te)), "tv_exact_max": float(te.max()),
                     "tv_same_median": float(np.median(ts)), "tv_same_max": float(ts.max()),
                     "row_sum_dev_max": float((pt.sum(-1) - 1).abs().max()),
                     "q_row_sum_dev_max": float((qt.sum(-1) - 1).abs().max())})
    return rows


def first_token_counts(p_row: torch.Tensor, q_row: torch.Tensor, samples: int, seed: int, chunk: int = 10_000):
    """Counts (V,) of the first token `verify` emits for ``samples`` drafts drawn from q_row (inverse
    CDF over its total), verified against p_row; rows used in their own dtype.  Seeded, chunked."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(p_row.shape[0], dtype=torch.long)
    for start in range(0, samples, chunk):
        m = min(chunk, samples - start)
        d = sample(q_row.expand(m, -1), g, check=False).unsqueeze(1)  # (m, 1) drafts from q~ / sum q~
        res = verify(d, q_row.expand(m, 1, -1), p_row.expand(m, 2, -1), generator=g)
        counts += torch.bincount(res.tokens[:, 0], minlength=p_row.shape[0])
    return counts


def sampled_precision_rows(lt: torch.Tensor, lq: torch.Tensor, paths: list, cfg: SamplingConfig, *, samples: int,
                           seed: int, alpha: float, power: float, chunk: int = 10_000) -> list[dict]:
    """Per precision path (names of PATHS whose verification is float64, `verify`'s own arithmetic):
    at the context where the path's law is farthest from the same-precision target, ``samples``
    drafts from q~ (`sample`, inverse CDF over the row's total) verified by `verify` on p~, q~ stored
    in the path's precision (its half-precision tolerance admits them); the first emitted token's
    counts are tested (chi-square, `gof_test`) against the law `one_step_law` computes for the path
    (must pass: the model of the code path is right) and against the same-precision target p~/sum p~
    (caught only when ``samples`` reaches the N its TV needs, given in the row)."""
    rows = []
    for name in paths:
        path = PATHS[name]
        if path.verify != "float64":
            raise ValueError(f"{name!r}: verify's arithmetic is float64; this path verifies in {path.verify}")
        raw, norm = precision_cfg(path, cfg), precision_cfg(path, cfg, normalize=True)
        pt, qt, same = raw(lt), raw(lq), norm(lt)
        law = one_step_law(pt, qt)
        c = int(tv(law, same).argmax())
        counts = first_token_counts(pt[c].to(DTYPES[path.probs]), qt[c].to(DTYPES[path.probs]), samples, seed, chunk)
        own, tgt = law[c].numpy(), same[c].numpy()
        tv_same = float(tv(law[c], same[c]))
        cells = int((tgt > 0).sum())
        rows.append({"path": name, "context": c, "samples": samples, "tv_same": tv_same,
                     "p_vs_computed_law": gof_test(counts.numpy(), own / own.sum()).p_value,
                     "p_vs_same_precision": gof_test(counts.numpy(), tgt).p_value,
                     "detect_N": sample_size(tv_same, max(cells, 2), alpha, power) if tv_same > 1e-12 else 0})
    return rows
