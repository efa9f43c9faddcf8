"""Replication in the protocol: speedups pooled over runs of a chapter made in fresh processes, with
an interval that carries the shift of a whole run.

Why: an interval computed inside one run resamples its prompts and rounds, so it describes that run;
a run-level shift (the machine's state, the process's memory layout, what else ran) moves every
pair of the run together and is invisible to it.  Two runs of one chapter whose within-run intervals
do not overlap show that shift.  Pooling several runs and resampling the runs themselves puts it in
the interval.

The units: one paired ratio per (run, prompt, round) -- the baseline's time per token over the
configuration's on the same prompt (or prompt group) and round of the same run.

`hierarchical_interval`: a two-stage bootstrap (resample the runs with replacement; inside each drawn
run, resample its prompts with replacement; take every round of each drawn (run, prompt)); the
statistic is the median of the pooled ratios; the interval is the bootstrap's percentile interval at
``level``.  With R runs the first stage has only C(2R - 1, R) distinct outcomes (10 at R = 3): the
interval is coarse, and widens as it should when runs disagree.  Its level is nominal: what R runs
can carry about the run-to-run median without assuming the runs' distribution is `free_level`.

`between_run`: the run component of the log ratios, from a two-way layout (every run decodes the same
prompts: runs crossed with prompts), on the (run, prompt) means over rounds: sd_run =
sqrt(max(0, (MS_run - MS_residual) / P)) with P prompts, the run-to-run standard deviation of a
run's mean log speedup beyond what the prompt-by-run noise explains; ``share`` = its variance over
the total (run + prompt + residual).  Read exp(sd_run) - 1 as the typical shift of a run.

Example:
    units = [{"run": "a", "prompt": 0, "ratio": 1.10}, {"run": "a", "prompt": 1, "ratio": 1.05},
             {"run": "b", "prompt": 0, "ratio": 1.02}, {"run": "b", "prompt": 1, "ratio": 0.98}]
    hierarchical_interval(units, level=0.95, seed=0)  # {"median": 1.035, "lo": ..., "hi": ..., "runs": 2, ...}
"""

from __future__ import annotations

import numpy as np

from specdec.measure.protocol import max_level

__all__ = ["hierarchical_interval", "between_run", "free_level"]


def _layout(units) -> dict:
    """{run: {prompt: [ratios]}} in order of first appearance; a bad ratio is an error."""
    out: dict = {}
    for u in units:
        r = float(u["ratio"])
        if not (np.isfinite(r) and r > 0):
            raise ValueError(f"a paired ratio must be finite and positive, got {u['ratio']!r} for run {u['run']!r}")
        out.setdefault(u["run"], {}).setdefault(u["prompt"], []).append(r)
    if not out:
        raise ValueError("no units to pool")
    return out


def hierarchical_interval(units, *, level: float, seed: int, n_resamples: int = 2000) -> dict:
    """Pooled median of the units' ratios, its two-stage bootstrap interval at ``level`` (module
    docstring), the counts (runs, prompts per run, pairs) and each run's own median."""
    if not 0 < level < 1 or n_resamples < 100:
        raise ValueError(f"need 0 < level < 1 and n_resamples >= 100, got {level}, {n_resamples}")
    lay = _layout(units)
    runs = [[np.asarray(v) for v in by_p.values()] for by_p in lay.values()]
    pooled = np.concatenate([v for r in runs for v in r])
    rng = np.random.default_rng(seed)
    stats = np.empty(n_resamples)
    for b in range(n_resamples):
        draw = []
        for i in rng.integers(0, len(runs), len(runs)):
            prompts = runs[i]
            draw += [prompts[j] for j in rng.integers(0, len(prompts), len(prompts))]
        stats[b] = np.median(np.concatenate(draw))
    tail = (1 - level) / 2
    lo, hi = np.quantile(stats, [tail, 1 - tail])
    return {"median": float(np.median(pooled)), "lo": float(lo), "hi": float(hi), "runs": len(runs),
            "prompts": int(min(len(r) for r in runs)), "pairs": int(pooled.size),
            "run_medians": [float(np.median(np.concatenate(r))) for r in runs]}


def between_run(units) -> dict:
    """The run component of the log ratios (module docstring): sd_run, its share of the variance,
    and the residual sd; NaN with fewer than 2 runs or 2 prompts shared by every run."""
    lay = _layout(units)
    shared = sorted(set.intersection(*(set(p) for p in lay.values())), key=str)
    nan = {"sd_run": float("nan"), "share": float("nan"), "sd_residual": float("nan")}
    if len(lay) < 2 or len(shared) < 2:
        return nan
    x = np.array([[np.mean(np.log(lay[r][p])) for p in shared] for r in lay])  # (R, P) cell means
    R, P = x.shape
    m_run, m_prompt, m = x.mean(1), x.mean(0), x.mean()
    ms_run = P * np.sum((m_run - m) ** 2) / (R - 1)
    ms_prompt = R * np.sum((m_prompt - m) ** 2) / (P - 1)
    ms_res = np.sum((x - m_run[:, None] - m_prompt[None, :] + m) ** 2) / ((R - 1) * (P - 1))
    v_run, v_prompt = max(0.0, (ms_run - ms_res) / P), max(0.0, (ms_prompt - ms_res) / R)
    total = v_run + v_prompt + ms_res
    return {"sd_run": float(np.sqrt(v_run)), "share": float(v_run / total) if total > 0 else 0.0,
            "sd_residual": float(np.sqrt(ms_res))}


def free_level(runs: int) -> float:
    """The highest confidence a statement about the median of the runs' distribution can carry from
    ``runs`` independent runs without assuming that distribution: `protocol.max_level` with runs as
    the units ([min, max] of R runs misses the median only when all R fall on one side of it: 0.875
    at R = 4, 0 at R = 1).  A bootstrap interval quoted at a higher level over R runs states that
    level nominally.

    Example: free_level(4) -> 0.875
    """
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    return max_level(int(runs))
