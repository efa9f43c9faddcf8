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
     otherwise "no difference detected at this precision".
  6. Many comparisons: a chapter that words m speedups at once also gives each a simultaneous
     interval at level 1 - (1 - LEVEL) / m (Bonferroni) and its words (`summarize(family_size=m)`),
     and says how many there were.
  7. Precision: the repeats are sized so that the interval's half-width is at most 3% of the
     median where the time budget allows (`repeats_for_half_width`); the achieved half-width is
     reported beside every interval.  Small samples: with n pairs a percentile bootstrap interval
     of the median stays inside the data's range, whose exact coverage as an interval for the
     median is 1 - 2 / 2^n (96.9% at n = 6); with fewer than about 8 pairs the 95% interval covers
     somewhat less than 95%, and a simultaneous level above 1 - 2 / 2^n is out of reach.
  8. The field's convention beside ours (Spec-Bench): per run the mean speedup over prompts, then
     the mean and standard deviation of that over the runs (`spec_bench`).

Example:
    rows = paired_speedups(runs, baseline="ours_ar", keys=("temperature", "prompt", "repeat"))
    summary = summarize(rows, by=("temperature", "k", "impl"))   # median, lo, hi, verdict per group
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEVEL", "HALF_WIDTH", "verdict", "paired_interval", "paired_speedups", "summarize", "bonferroni",
           "repeats_for_half_width", "spec_bench"]

LEVEL = 0.95  # confidence level of every interval
HALF_WIDTH = 0.03  # the precision aimed at: interval half-width / median
FASTER, SLOWER, UNDECIDED = "faster", "slower", "no difference detected at this precision"


def verdict(lo: float, hi: float) -> str:
    """The words an interval of a speedup allows.  Example: verdict(1.02, 1.10) -> "faster"."""
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
    """Each row with ``base_s_per_token`` (the baseline's on the same keys) and ``speedup``."""
    base = {tuple(r[k] for k in keys): time_per_token(r) for r in rows if r[impl] == baseline}
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
    relative to the median, and the verdict (module docstring).  Rows need ``base_s_per_token``.
    ``family_size`` m (default: the number of groups): also the simultaneous interval at
    `bonferroni(level, m)` (``speedup_lo_sim``, ``speedup_hi_sim``) and its verdict."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    sim = bonferroni(level, family_size or len(groups)) if groups else level
    out = []
    for key, rs in groups.items():
        base, other = [r["base_s_per_token"] for r in rs], [time_per_token(r) for r in rs]
        med, lo, hi = paired_interval(base, other, level=level, seed=seed)
        _, slo, shi = paired_interval(base, other, level=sim, seed=seed)
        one = "one run: no interval"
        out.append({**dict(zip(by, key)), "runs": len(rs), "speedup_median": med, "speedup_lo": lo,
                    "speedup_hi": hi, "half_width": (hi - lo) / 2 / med if np.isfinite(lo) else float("nan"),
                    "verdict": verdict(lo, hi) if np.isfinite(lo) else one, "speedup_lo_sim": slo,
                    "speedup_hi_sim": shi, "verdict_sim": verdict(slo, shi) if np.isfinite(slo) else one})
    return out
