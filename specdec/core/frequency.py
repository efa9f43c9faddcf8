"""The frequency test of a sampled law against a toy's exact law (`specdec.core.stats.gof_test`):
its design and the distance it can see.

Design: on the m sequences of n tokens that the target can produce, if the sampled law is at
TV >= eps from the exact law then Pearson's X^2 is at least noncentral chi-square with
noncentrality 4 N eps^2; `design` takes the smallest N that detects eps with the given power at
level alpha (`specdec.core.stats.sample_size`).  Cells of small expected count are pooled before
the test (`specdec.core.stats.pool_cells`), so what the power guarantee covers is the TV on the
pooled cells (`pooled_tv`).

Example: pooled_tv([0.5, 0.3, 0.2, 0], [0.5, 0.2, 0.3, 0], labels=[0, 1, 1]) -> 0.0
"""

from __future__ import annotations

import numpy as np

from specdec.core.exact import target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import sample_size
from specdec.core.toy import TableModel

__all__ = ["design", "pooled_tv"]


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
