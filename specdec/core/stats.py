"""Sampled frequencies against an exact law: goodness of fit, total variation with a
confidence interval, and the power calculation that sizes the samples.

Goodness of fit.  Pearson's chi-square X^2 = sum (O - E)^2 / E or the G-test
G = 2 sum O ln(O / E), on m cells with df = m - 1 (scipy.stats.power_divergence).  Cells with
expected count below `min_expected` are pooled into one cell (joined by the next-smallest cells
while the pool is still too small); see `pool_cells`.  A count in a cell of exact probability 0 is an impossible
outcome: p-value 0.

Total variation.  TV(f, p) = 1/2 sum |f - p| of the empirical law f of N samples.  The sampled
law P differs from f by at most E + t with probability >= 1 - exp(-2 N t^2) (McDiarmid: one
sample moves TV by <= 1/N), and E = E TV(f, P) <= 1/2 sqrt((m - 1)/N) (Cauchy-Schwarz), so

    TV(P, p) in [TV(f, p) - b, TV(f, p) + b],   b = 1/2 sqrt((m-1)/N) + sqrt(ln(2/delta)/(2N)).

Power.  If TV(P, p) >= eps then the chi-square divergence sum (P - p)^2 / p >= (2 eps)^2
(Cauchy-Schwarz), so X^2 is at least noncentral chi-square with df = m - 1 and noncentrality
lambda = 4 N eps^2.  `sample_size` is the smallest N whose worst-case power reaches the target
at level alpha.  It is stated for the cells actually tested (after pooling).

Clustered counts.  When the samples come in clusters (the steps of one prompt share its context),
the G-test's statistic is too large by about the mean design effect.  `rao_scott_deff` is the
first-order correction of Rao and Scott (1981): with V_j the variance of cell j's share between
clusters (a ratio estimator, factor C / (C - 1)) and pi the tested law, delta = sum_j N V_j / pi_j
/ (m - 1), the mean eigenvalue of the design-effect matrix; G / delta is referred to the same
chi-square.  (Under the tested law this is sum_j (1 - pi_j) d_j / (m - 1) with the cells' design
effects d_j.)  With a fitted parameter, averaging over m - 1 cells instead of the test's degrees
of freedom is an approximation.

Intervals and spread of measurements: Wilson's interval for a proportion, a normal interval for a
mean, and `spread` (median, quartiles, extremes) -- the one quantile helper of the project.

Example: sample_size(0.05, 16, alpha=1e-3, power_target=0.99) -> 5517; a fair 16-sided die
sampled that often passes, a die with TV 0.05 from fair fails with probability >= 0.99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import stats as _st

__all__ = ["GofResult", "gof_test", "tv_interval", "power", "sample_size", "counts_of", "pool_cells",
           "rao_scott_deff", "wilson_interval", "mean_interval", "spread"]


@dataclass(frozen=True)
class GofResult:
    statistic: float
    df: int
    p_value: float
    n: int  # samples
    cells: int  # cells after pooling
    impossible: int  # samples that fell in cells of exact probability 0
    tv: float  # TV(empirical, exact) on the original cells
    tv_low: float
    tv_high: float
    test: str


def _check(counts, probs):
    c = np.asarray(counts, dtype=np.float64).ravel()
    p = np.asarray(probs, dtype=np.float64).ravel()
    if c.shape != p.shape or c.size == 0:
        raise ValueError(f"counts ({c.size} cells) and probs ({p.size} cells) must match and be non-empty")
    if np.any(~np.isfinite(c)) or np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("counts must be non-negative integers")
    if np.any(~np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError(f"probs must be a distribution (non-negative, sum 1), sum is {p.sum()!r}")
    if c.sum() == 0:
        raise ValueError("no samples (all counts are zero)")
    return c, p


def counts_of(samples, V: int, n: int) -> np.ndarray:
    """Counts of each length-n sequence over V tokens, flattened in the order of a (V,)*n law."""
    s = np.asarray(samples, dtype=np.int64).reshape(-1, n)
    if s.size and (s.min() < 0 or s.max() >= V):
        raise ValueError(f"sample tokens outside [0, {V})")
    codes = np.zeros(s.shape[0], dtype=np.int64)
    for i in range(n):
        codes = codes * V + s[:, i]
    return np.bincount(codes, minlength=V ** n)


def tv_interval(counts, probs, delta: float = 0.01) -> tuple[float, float, float]:
    """(TV(f, p), lower, upper): a distribution-free 1 - delta interval for TV(P, p)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    c, p = _check(counts, probs)
    N, m = c.sum(), c.size
    tv = 0.5 * float(np.abs(c / N - p).sum())
    b = 0.5 * math.sqrt((m - 1) / N) + math.sqrt(math.log(2 / delta) / (2 * N))
    return tv, max(0.0, tv - b), min(1.0, tv + b)


def pool_cells(probs, N: int, min_expected: float = 5.0) -> np.ndarray:
    """Cell labels after pooling: cells with N * p < min_expected share one label (the last),
    and the smallest other cells join that pool until its expected count reaches min_expected.

    Returns (m,) int labels in 0..cells-1; pooled counts are np.bincount(labels, weights=counts).
    Example: pool_cells([0.5, 0.45, 0.03, 0.02], 100) -> [0, 1, 2, 2]
    """
    e = np.asarray(probs, dtype=np.float64).ravel() * N
    small = e < min_expected
    if not small.any():
        return np.arange(e.size)
    pool_e = e[small].sum()
    big = [i for i in np.argsort(e, kind="stable") if not small[i]]  # ascending expected count
    while pool_e < min_expected and big:
        j = big.pop(0)
        small[j] = True
        pool_e += e[j]
    labels = np.empty(e.size, dtype=np.int64)
    rest = np.flatnonzero(~small)
    labels[rest] = np.arange(rest.size)
    labels[small] = rest.size
    return labels


def gof_test(counts, probs, min_expected: float = 5.0, test: str = "chi2", delta: float = 0.01) -> GofResult:
    """Goodness of fit of `counts` to the exact law `probs` (same cell order; any shape).

    test: "chi2" (Pearson) or "g" (log-likelihood ratio).  Zero-probability cells are removed
    from the test after counting the samples in them (any such sample gives p-value 0).
    """
    if test not in ("chi2", "g"):
        raise ValueError(f"test must be 'chi2' or 'g', got {test!r}")
    if not min_expected > 0:
        raise ValueError(f"min_expected must be > 0, got {min_expected!r}")
    c, p = _check(counts, probs)
    tv, lo, hi = tv_interval(c, p, delta)
    possible = p > 0
    impossible = int(c[~possible].sum())
    cp, pp = c[possible], p[possible]
    labels = pool_cells(pp, int(cp.sum()), min_expected)
    pc, pe = np.bincount(labels, weights=cp), np.bincount(labels, weights=pp) * cp.sum()
    if pc.size < 2 or cp.sum() == 0:
        stat, pval = 0.0, 1.0
    else:
        lam = "pearson" if test == "chi2" else "log-likelihood"
        stat, pval = _st.power_divergence(pc, pe * pc.sum() / pe.sum(), lambda_=lam)
    if impossible:
        pval = 0.0
    return GofResult(float(stat), int(max(pc.size - 1, 0)), float(pval), int(c.sum()), int(pc.size),
                     impossible, tv, lo, hi, test)


def power(N: int, eps: float, cells: int, alpha: float = 1e-3) -> float:
    """Worst-case power of the chi-square test (N samples, `cells` cells, level alpha) against any
    law at total variation >= eps from the null."""
    if cells < 2 or not 0 < eps <= 1 or not 0 < alpha < 1 or N < 1:
        raise ValueError(f"need cells >= 2, eps in (0, 1], alpha in (0, 1), N >= 1; got "
                         f"cells={cells}, eps={eps}, alpha={alpha}, N={N}")
    df = cells - 1
    crit = _st.chi2.ppf(1 - alpha, df)
    return float(_st.ncx2.sf(crit, df, 4.0 * N * eps ** 2))


def sample_size(eps: float, cells: int, alpha: float = 1e-3, power_target: float = 0.99) -> int:
    """Smallest N with power(N, eps, cells, alpha) >= power_target (bisection on N).

    Example: sample_size(0.05, 16, 1e-3, 0.99) -> 5517.
    """
    if not 0 < power_target < 1:
        raise ValueError(f"power_target must lie in (0, 1), got {power_target!r}")
    power(1, eps, cells, alpha)  # validates the rest
    lo, hi = 1, 2
    while power(hi, eps, cells, alpha) < power_target:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power(mid, eps, cells, alpha) >= power_target:
            hi = mid
        else:
            lo = mid
    return hi


def _z(level: float) -> float:
    if not (0 < level < 1):
        raise ValueError(f"confidence level must lie in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson_interval(successes, trials, level: float = 0.95):
    """Wilson score interval for a binomial proportion (Wilson 1927); arrays broadcast.

    Example: wilson_interval(8, 10) -> (0.4902, 0.9433) (rounded)
    """
    s, n = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(s < 0) or np.any(s > n):
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes!r} / {trials!r}")
    z = _z(level)
    ph = s / n
    centre = (ph + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def mean_interval(x, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi): normal-approximation interval mean +- z sd / sqrt(n) (n >= 2).

    Example: mean_interval([1.0, 2.0, 3.0]) -> (2.0, 0.868..., 3.131...)
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size < 2 or not np.all(np.isfinite(a)):
        raise ValueError(f"need at least 2 finite values for an interval, got {a.size}")
    m, se = float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size))
    z = _z(level)
    return m, m - z * se, m + z * se


def cluster_ratio_interval(num, den, level: float = 0.95, seed: int = 0,
                           n_resamples: int = 2000) -> tuple[float, float, float]:
    """sum(num) / sum(den) over clusters (e.g. one prompt's steps: not independent of each other),
    with a percentile bootstrap interval that resamples whole clusters (`scipy.stats.bootstrap`,
    paired, seeded).  num, den: one value per cluster; den > 0 in total.  Fewer than 2 clusters: no
    interval (NaN).  Example: cluster_ratio_interval([3, 1], [4, 4]) -> (0.5, 0.25, 0.75)."""
    n, d = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if n.shape != d.shape or n.ndim != 1 or d.sum() <= 0 or np.any(d < 0) or not np.all(np.isfinite(n)):
        raise ValueError("need one finite numerator and one non-negative denominator per cluster, positive in total")
    est = float(n.sum() / d.sum())
    if n.size < 2:
        return est, float("nan"), float("nan")
    if np.all(n / np.where(d > 0, d, 1) == est):
        return est, est, est
    res = _st.bootstrap((n, d), lambda a, b: a.sum() / b.sum() if b.sum() > 0 else est, paired=True,
                        vectorized=False, confidence_level=level, n_resamples=n_resamples, method="percentile",
                        random_state=np.random.default_rng(seed))
    return est, float(res.confidence_interval.low), float(res.confidence_interval.high)


def rao_scott_deff(cluster_counts, probs) -> float:
    """The first-order Rao-Scott mean design effect (module docstring) of counts per cluster
    (C, m) against the tested cell probabilities ``probs`` (m,), all positive; about 1 for
    independent samples and about r when every sample is repeated r times within its cluster (for
    many clusters: the estimate is noisy with few).  Needs C >= 2.
    Example: rao_scott_deff([[2, 0], [0, 2]], [0.5, 0.5]) -> 4.0 (2 clusters: the factor C/(C-1) = 2
    on a between-cluster variance of 1/8 per cell, times N / pi = 8, summed over 2 cells, over 1)"""
    y = np.asarray(cluster_counts, dtype=np.float64)
    pi = np.asarray(probs, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2 or y.shape[1] != pi.size or np.any(y < 0) \
            or not np.all(np.isfinite(y)) or y.sum() <= 0 or not np.all(pi > 0):
        raise ValueError(f"need non-negative counts of shape (clusters >= 2, cells >= 2) matching probs, got "
                         f"{y.shape} and {pi.shape}")
    m_i, total = y.sum(1), y.sum()
    share = y.sum(0) / total
    c = y.shape[0]
    v_clus = c / (c - 1) * ((y - np.outer(m_i, share)) ** 2).sum(0) / total ** 2
    return float((total * v_clus / pi).sum() / (pi.size - 1))


def spread(values) -> dict:
    """median, quartiles, min, max and count of a list of measurements (numpy's linear quantiles).

    Example: spread([1, 2, 3, 4]) -> {'median': 2.5, 'q1': 1.75, 'q3': 3.25, 'min': 1.0, 'max': 4.0, 'n': 4}
    """
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError("need at least one finite value")
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "q1": float(q1), "q3": float(q3), "min": float(a.min()),
            "max": float(a.max()), "n": int(a.size)}
