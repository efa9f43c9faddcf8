"""The measurement protocol: paired speedups with bootstrap intervals, and words that follow them.

Stated before any result (`make bench` and the measured chapters use it as written here):
  1. Paired and interleaved: for each cell (prompt, or batch of prompts) and repeat, the baseline
     and every configuration run back to back (`specdec.measure.harness.sweep`, order shuffled
     per round with a seeded RNG when asked), so drift and load hit all alike.
  2. A run's speedup = the baseline's wall time per token / the run's wall time per token, on the
     same (cell, repeat) -- a ratio of paired measurements.
  3. Each configuration is summarized by the median speedup over cells x repeats and a 95%
     bootstrap confidence interval of that median, computed by `scipy.stats.bootstrap` on the
     paired (baseline, configuration) samples (percentile method, seeded).  Cells x repeats are the
     units resampled: steps within a run are never treated as independent.
  4. Contention: each run records the 1-minute load average and its CPU share (process CPU time /
     wall time / torch threads); a run whose share is below 0.9 is contended and is re-run, at most
     `max_reruns` times (the harness counts re-runs); the share of the kept run is reported.
  5. Words: "faster" only when the whole interval lies above 1, "slower" when it lies below 1,
     otherwise "undecided" (the interval contains 1: it says which effects remain possible, not that
     there is no effect).
  6. Many comparisons: a chapter that words m speedups at once also gives each a simultaneous
     interval at level 1 - (1 - LEVEL) / m (Bonferroni) and its words (`summarize(family_size=m)`,
     `comparison(family_size=m)`), and says how many there were.  The simultaneous interval is the
     distribution-free order-statistic interval of the median (`median_interval`: exact coverage
     from the binomial law of the signs, assuming only independent pairs), not a bootstrap: at a
     level such as 99.8% with a handful of pairs a percentile bootstrap sits at the sample's extremes
     and claims more than they give.
  7. Small samples: [min, max] of n pairs covers the median with probability exactly 1 - 2 / 2^n
     (96.9% at n = 6, 93.8% at n = 5), and no interval built from the pairs alone does better.  A
     level above that is out of reach: the words are then "too few pairs for this level"
     (`max_level`, `pairs_for_level` say what is reachable and what would be needed), never a
     verdict.  Below about 8 pairs the 95% percentile bootstrap interval also covers somewhat less
     than 95%; the pages say so.
  8. Precision: the repeats are sized so that the interval's half-width is at most 3% of the
     median where the time budget allows (`repeats_for_half_width`); the achieved half-width is
     reported beside every interval.
  9. The field's convention beside ours (Spec-Bench): per run the mean speedup over prompts, then
     the mean and standard deviation of that over the runs (`spec_bench`).

Example:
    rows = paired_speedups(runs, baseline="ours_ar", keys=("temperature", "prompt", "repeat"))
    summary = summarize(rows, by=("temperature", "k", "impl"))   # median, lo, hi, verdict per group
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEVEL", "HALF_WIDTH", "OUT_OF_REACH", "verdict", "level_verdict", "paired_interval", "paired_speedups", "summarize",
           "bonferroni", "max_level", "pairs_for_level", "median_interval", "comparison",
           "repeats_for_half_width", "spec_bench"]

LEVEL = 0.95  # confidence level of every interval
HALF_WIDTH = 0.03  # the precision aimed at: interval half-width / median
FASTER, SLOWER, UNDECIDED = "faster", "slower", "undecided"
OUT_OF_REACH, ONE_RUN = "too few pairs for this level", "one run: no interval"


def verdict(lo: float, hi: float) -> str:
    """The words an interval [lo, hi] of a speedup allows (item 5): "faster" only when all of it
    lies above 1 (lo > 1: an interval that starts exactly at 1 is "undecided"), "slower" only when
    all of it lies below 1 (hi < 1: one that ends exactly at 1 is "undecided"), else "undecided".

    A NaN end is refused (ValueError), as is lo > hi: that is no interval, and no word follows from
    it.  One pair gives (r, nan, nan) (`paired_interval`); its words are the caller's to choose
    before asking, as `comparison` does (`ONE_RUN`, and `OUT_OF_REACH` for a level the pairs
    cannot reach).  Infinite ends are intervals and are worded.
    Example: verdict(1.02, 1.10) -> "faster";  verdict(1.0, 1.10) -> "undecided";
    verdict(0.9, 1.0) -> "undecided";  verdict(float("nan"), float("nan")) -> ValueError."""
    if np.isnan(lo) or np.isnan(hi) or lo > hi:
        raise ValueError(f"verdict needs an interval lo <= hi without NaN ends, got [{lo!r}, {hi!r}]: a NaN "
                         f"end (one pair) allows no words; the caller says {ONE_RUN!r} or {OUT_OF_REACH!r}")
    if lo > 1:
        return FASTER
    if hi < 1:
        return SLOWER
    return UNDECIDED


def paired_interval(base, other, *, level: float = LEVEL, seed: int = 0, n_resamples: int = 2000):
    """(median, lo, hi) of base/other (elementwise: paired samples), with a bootstrap interval of
    the median (`scipy.stats.bootstrap`, paired, percentile).  One pair gives (r, nan, nan).

    Example: paired_interval([2.0, 2.2, 1.9], [1.0, 1.0, 1.0]) -> (2.0, 1.9, 2.2)
    """
    from scipy.stats import bootstrap

    b, o = np.asarray(base, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if b.shape != o.shape or b.size == 0 or not (np.all(np.isfinite(b)) and np.all(np.isfinite(o))) \
            or np.any(o <= 0):
        raise ValueError("need equal-length, finite, positive paired samples")
    med = float(np.median(b / o))
    if b.size < 2 or np.all(b / o == med):
        return med, (med if b.size > 1 else float("nan")), (med if b.size > 1 else float("nan"))
    res = bootstrap((b, o), lambda x, y: np.median(x / y), paired=True, vectorized=False, confidence_level=level,
                    n_resamples=n_resamples, method="percentile", random_state=np.random.default_rng(seed))
    return med, float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_speedups(rows: list[dict], *, baseline: str, keys: tuple, impl: str = "impl",
                    time_per_token=lambda r: r["wall_s"] / r["tokens"]) -> list[dict]:
    """Each row with ``base_s_per_token`` (the baseline's on the same keys) and ``speedup``.  Two
    baseline runs on the same keys are an error: the keys do not identify the pairing unit."""
    base = {}
    for r in (r for r in rows if r[impl] == baseline):
        key = tuple(r[k] for k in keys)
        if key in base:
            raise ValueError(f"two {baseline!r} runs for {dict(zip(keys, key))}: the keys {keys} do not identify a pair")
        base[key] = time_per_token(r)
    out = []
    for r in rows:
        b = base.get(tuple(r[k] for k in keys))
        if b is None:
            raise ValueError(f"no {baseline!r} run for {dict((k, r[k]) for k in keys)}: the design is not paired")
        out.append({**r, "base_s_per_token": b, "speedup": b / time_per_token(r)})
    return out


def bonferroni(level: float, m: int) -> float:
    """The per-comparison level that makes m intervals hold together at ``level``.
    Example: bonferroni(0.95, 10) -> 0.995"""
    if not 0 < level < 1 or int(m) != m or m < 1:
        raise ValueError(f"need 0 < level < 1 and an integer m >= 1, got level={level!r}, m={m!r}")
    return 1 - (1 - level) / m


def max_level(n: int) -> float:
    """The highest confidence any interval for a median can have from n independent pairs alone:
    that of [min, max], 1 - 2 / 2^n.  Example: max_level(6) -> 0.96875"""
    if int(n) != n or n < 0:
        raise ValueError(f"need a count of pairs n >= 0, got {n!r}")
    return 1.0 - 2.0 * 0.5 ** n if n >= 1 else 0.0


def pairs_for_level(level: float) -> int:
    """The fewest pairs whose [min, max] reaches ``level`` (`max_level`).
    Example: pairs_for_level(0.95) -> 6; pairs_for_level(1 - 0.05 / 30) -> 11"""
    if not 0 < level < 1:
        raise ValueError(f"need 0 < level < 1, got {level!r}")
    return max(1, int(np.ceil(np.log2(2.0 / (1.0 - level)) - 1e-12)))


def median_interval(x, level: float = LEVEL) -> tuple[float, float, float]:
    """Distribution-free interval for the median of x (independent draws): the order statistics
    [x_(j), x_(n+1-j)] with the largest j whose exact coverage 1 - 2 P(Bin(n, 1/2) <= j - 1) is at
    least ``level``; returns (lo, hi, coverage).  When even [min, max] falls short of ``level``,
    (nan, nan, max_level(n)): the level is out of reach (module docstring, item 7).
    Example: median_interval([3, 1, 2, 5, 4, 6], 0.95) -> (1.0, 6.0, 0.96875)"""
    from scipy.stats import binom

    a = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if a.size == 0 or not np.all(np.isfinite(a)) or not 0 < level < 1:
        raise ValueError(f"need finite values and 0 < level < 1, got {a.size} values, level {level!r}")
    n = a.size
    j = np.arange(1, n // 2 + 1)
    cover = 1 - 2 * binom.cdf(j - 1, n, 0.5)
    ok = j[cover >= level - 1e-12]
    if ok.size == 0:
        return float("nan"), float("nan"), max_level(n)
    best = int(ok.max())
    return float(a[best - 1]), float(a[n - best]), float(cover[best - 1])


def comparison(base, other, *, level: float = LEVEL, family_size: int = 1, seed: int = 0) -> dict:
    """One paired comparison by the protocol: the median of base/other with its bootstrap interval
    at ``level`` (`paired_interval`), the half-width relative to the median and the words; and the
    simultaneous interval of a family of ``family_size`` comparisons (`median_interval` at
    `bonferroni(level, family_size)`), its words and the pairs that level needs.  Words at a level
    the pairs cannot reach are `OUT_OF_REACH` (one pair: `ONE_RUN`).
    Keys: median, lo, hi, half_width, verdict, lo_sim, hi_sim, level_sim, verdict_sim, pairs_sim."""
    med, lo, hi = paired_interval(base, other, level=level, seed=seed)
    n = len(base)
    sim = bonferroni(level, family_size)
    slo, shi, _ = median_interval(np.asarray(base, dtype=np.float64) / np.asarray(other, dtype=np.float64), sim)
    return {"median": med, "lo": lo, "hi": hi, "half_width": (hi - lo) / 2 / med if np.isfinite(lo) else float("nan"),
            "verdict": level_verdict(lo, hi, n, level), "lo_sim": slo, "hi_sim": shi, "level_sim": sim,
            "verdict_sim": level_verdict(slo, shi, n, sim), "pairs_sim": pairs_for_level(sim)}


def level_verdict(lo: float, hi: float, pairs: int, level: float = LEVEL) -> str:
    """The words an interval from ``pairs`` pairs allows at ``level``: `ONE_RUN` under two pairs,
    `OUT_OF_REACH` where even [min, max] of that many pairs falls short of the level (`max_level`),
    else `verdict`.  Example: level_verdict(1.02, 1.1, 12) -> "faster";
    level_verdict(1.02, 1.1, 4) -> "too few pairs for this level" """
    return ONE_RUN if pairs < 2 else OUT_OF_REACH if max_level(pairs) < level - 1e-12 else verdict(lo, hi)


def repeats_for_half_width(rel_sd: float, *, half_width: float = HALF_WIDTH, level: float = LEVEL) -> int:
    """Paired samples needed for the median speedup's interval to have half-width ``half_width``
    (relative), when one pair's speedup has relative standard deviation ``rel_sd``: the median's
    asymptotic standard error is sqrt(pi/2) sd / sqrt(n) (normal samples), so
    n = ceil((z sqrt(pi/2) rel_sd / half_width)^2).  Example: rel_sd 0.05 -> 14 pairs at 3%."""
    from scipy.stats import norm

    if not (rel_sd >= 0 and np.isfinite(rel_sd)) or not half_width > 0:
        raise ValueError(f"need a finite rel_sd >= 0 and half_width > 0, got {rel_sd!r}, {half_width!r}")
    z = norm.ppf(0.5 + level / 2)
    return max(2, int(np.ceil((z * np.sqrt(np.pi / 2) * rel_sd / half_width) ** 2)))


def spec_bench(rows: list[dict], *, by: tuple, run: str = "repeat", value: str = "speedup") -> list[dict]:
    """The field's convention (Spec-Bench): per group of ``by`` and per run (``run``), the mean of
    ``value`` over the group's units (prompts); then the mean and the standard deviation (ddof 1)
    of those per-run means, and the number of runs.  Example: two runs with prompt speedups
    [1.0, 1.2] and [1.1, 1.3] -> mean 1.15, sd 0.0707, runs 2."""
    out = []
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), {}).setdefault(r[run], []).append(float(r[value]))
    for key, per_run in groups.items():
        means = np.array([np.mean(v) for v in per_run.values()])
        out.append({**dict(zip(by, key)), f"{value}_mean": float(means.mean()),
                    f"{value}_sd": float(means.std(ddof=1)) if means.size > 1 else float("nan"), "runs": means.size})
    return out


def summarize(rows: list[dict], *, by: tuple, level: float = LEVEL, seed: int = 0, family_size: int | None = None,
              time_per_token=lambda r: r["wall_s"] / r["tokens"]) -> list[dict]:
    """Per group of ``by``: runs, median speedup with its paired bootstrap interval, its half-width
    relative to the median, and the verdict (module docstring); and, for a family of
    ``family_size`` m (default: the number of groups), the simultaneous interval
    (``speedup_lo_sim``, ``speedup_hi_sim``, ``level_sim``), its verdict and ``pairs_sim``, the
    pairs that level needs (`comparison`).  Rows need ``base_s_per_token``."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for key, rs in groups.items():
        c = comparison([r["base_s_per_token"] for r in rs], [time_per_token(r) for r in rs], level=level,
                       family_size=family_size or len(groups), seed=seed)
        out.append({**dict(zip(by, key)), "runs": len(rs), "speedup_median": c["median"], "speedup_lo": c["lo"],
                    "speedup_hi": c["hi"], "half_width": c["half_width"], "verdict": c["verdict"],
                    "speedup_lo_sim": c["lo_sim"], "speedup_hi_sim": c["hi_sim"], "level_sim": c["level_sim"],
                    "verdict_sim": c["verdict_sim"], "pairs_sim": c["pairs_sim"]})
    return out
