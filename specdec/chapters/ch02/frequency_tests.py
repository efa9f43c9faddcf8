"""Chapter 02's frequency tests: the real sampled code path against the exact law, and the wrong
variants as negative controls that must be caught.

Design (`specdec.core.frequency.design`): the smallest N at which the test detects TV eps from the exact
law with the given power at level alpha.  Every algorithm (token, block, then each variant of
`specdec.core.rules.variants`) draws N generations from its own generator, seeded ``seed * 1000 + i``
(i = its row), so the rows are independent.  A row "passes" when the p-value exceeds alpha, else it is
"caught".  Cells of small expected count are pooled before the test, so ``exact_tv_tested_cells``, the
exact TV on the pooled cells (`specdec.core.frequency.pooled_tv`), is what the power guarantee covers:
it must be >= eps for every wrong variant.

Example: frequency_test_rows(target, draft, 3, 2, SamplingConfig(1.2, 3, 0.9), 0.05, 1e-3, 0.999, 7)
    -> 7 rows; token and block pass, the 5 variants are caught.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.exact import spec_law, target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.frequency import design, pooled_tv
from specdec.core.stats import counts_of, gof_test, pool_cells
from specdec.core.toy import TableModel, sample_speculative
from specdec.core.rules.variants import VARIANTS, variant_law, variant_sample

__all__ = ["frequency_test_rows"]


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

