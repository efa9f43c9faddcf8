"""Chapter 02's frequency tests: the real sampled code path against the exact law, and the wrong
variants as negative controls that must be caught.

Design (`specdec.core.stats`): on the m sequences of n tokens that the target can produce, if the
sampled law is at TV >= eps from the exact law then Pearson's X^2 is at least noncentral chi-square
with noncentrality 4 N eps^2; `design` takes the smallest N that detects eps with the given power
at level alpha.  Every algorithm (token, block, then each variant of `specdec.core.rules.variants`)
draws N generations from its own generator, seeded ``seed * 1000 + i`` (i = its row), so the rows
do not depend on each other.  A row "passes" when the p-value exceeds alpha, else it is "caught".

Because cells of small expected count are pooled before the test, ``exact_tv_tested_cells`` is the
algorithm's exact TV on the pooled cells (plus its mass on impossible sequences): what the power
guarantee covers.  It must be >= eps for every wrong variant.

Example: frequency_test_rows(target, draft, 3, 2, SamplingConfig(1.2, 3, 0.9), 0.05, 1e-3, 0.999, 7)
    -> 7 rows; token and block pass, the 5 variants are caught.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.exact import spec_law, target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import counts_of, gof_test, pool_cells, sample_size
from specdec.core.toy import TableModel, sample_speculative
from specdec.core.rules.variants import VARIANTS, variant_law, variant_sample

__all__ = ["design", "pooled_tv", "frequency_test_rows"]


def design(target: TableModel, n: int, cfg: SamplingConfig, eps: float, alpha: float, power: float) -> dict:
    """{"cells": sequences of n tokens with positive target law, "samples": N from the power calculation}."""
    ref = target_law(target, n, cfg).reshape(-1).numpy()
    cells = int((ref > 0).sum())
    return {"cells": cells, "samples": sample_size(eps, cells, alpha, power)}


def pooled_tv(law: np.ndarray, ref: np.ndarray, labels: np.ndarray) -> float:
    """TV between ``law`` and ``ref`` (flat, same cells) after pooling the cells where ref > 0 by
    ``labels`` (`specdec.core.stats.pool_cells`); the mass of ``law`` where ref = 0 counts in full.

    Example: pooled_tv([0.5, 0.3, 0.2, 0], [0.5, 0.2, 0.3, 0], labels=[0, 1, 1]) -> 0.0
    """
    law, ref = np.asarray(law, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    pos = ref > 0
    return float(0.5 * (np.abs(np.bincount(labels, weights=law[pos]) - np.bincount(labels, weights=ref[pos])).sum()
                        + law[~pos].sum()))


def frequency_test_rows(target: TableModel, draft: TableModel, n: int, k: int, cfg: SamplingConfig,
                        eps: float, alpha: float, power: float, seed: int, delta: float = 0.01) -> list[dict]:
    """One row per algorithm (token, block, every variant): N sampled generations of n tokens with k
    drafts tested against the target law (chi2, df, p-value), the empirical TV with its 1 - delta
    interval, the algorithm's exact TV (all cells and tested cells), the verdict and the bug."""
    ref = target_law(target, n, cfg).reshape(-1).numpy()  # (V^n,)
    N = design(target, n, cfg, eps, alpha, power)["samples"]
    labels = pool_cells(ref[ref > 0] / ref[ref > 0].sum(), N)
    rows = []
    for i, name in enumerate(["token", "block", *VARIANTS]):
        gen = torch.Generator().manual_seed(seed * 1000 + i)
        if name in ("token", "block"):
            samples = sample_speculative(target, draft, n, k, N, gen, name, cfg)
            law = spec_law(target, draft, n, k, name, cfg).reshape(-1).numpy()
            bug = "(correct)"
        else:
            samples = variant_sample(name, target, draft, n, k, N, gen, cfg)
            law = variant_law(name, target, draft, n, k, cfg).reshape(-1).numpy()
            bug = VARIANTS[name].bug
        r = gof_test(counts_of(samples.numpy(), target.V, n), ref, delta=delta)
        rows.append(dict(algorithm=name, samples=r.n, chi2=r.statistic, df=r.df, p_value=r.p_value,
                         tv=r.tv, tv_low=r.tv_low, tv_high=r.tv_high, exact_tv=0.5 * float(np.abs(law - ref).sum()),
                         exact_tv_tested_cells=pooled_tv(law, ref, labels),
                         verdict="passes" if r.p_value > alpha else "caught", bug=bug))
    return rows

