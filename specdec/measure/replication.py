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

`pooled_runs` and `pooled_table` apply this to chapter 06.  The runs pooled: the committed run and
every re-run folder (under ``data/reruns/06_measured_decoding/``, written by `make replicate`) made
with the same sweep: equal `SWEEP_PARAMETERS`, the same model weights (sha256) and the same draft;
every other folder is listed with a one-label reason, never pooled.  Every run decodes the same
prompts with the same seeds (common random numbers), so what the runs differ in is their timing:
the machine's state and the process, which is what a replication of a timing measures.  The
primary comparisons: at most `MAX_PRIMARY` settings [draft length k (or "dynamic"), temperature,
output length, batch] stated in the chapter's parameters before its lean runs; each gets the
pooled median with its interval at 95% and at the simultaneous level 1 - 0.05 / m over the m
primary comparisons (Bonferroni), its words following the simultaneous interval.  Everything else
is exploratory: pooled at 95% on its own, and says so.

Example:
    units = [{"run": "a", "prompt": 0, "ratio": 1.10}, {"run": "a", "prompt": 1, "ratio": 1.05},
             {"run": "b", "prompt": 0, "ratio": 1.02}, {"run": "b", "prompt": 1, "ratio": 0.98}]
    hierarchical_interval(units, level=0.95, seed=0)  # {"median": 1.035, "lo": ..., "hi": ..., "runs": 2, ...}
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from specdec.io.results import read_table, records
from specdec.measure.protocol import LEVEL, level_verdict, max_level, paired_speedups

__all__ = ["hierarchical_interval", "between_run", "free_level", "SWEEP_PARAMETERS", "MAX_PRIMARY", "SETTING",
           "pooled_runs", "run_label", "setting", "pooled_table"]

# chapter 06's parameters that make two of its runs one sweep
SWEEP_PARAMETERS = ("MODE", "DTYPE", "THREADS", "SEED", "PROMPT_LEN", "TEMPERATURES", "OUTPUT_LENS", "BATCHES",
                    "GREEDY_BATCHES", "KS", "PROMPTS", "REPEATS", "WARMUP", "PILOT_STEPS", "PILOT_K")
MAX_PRIMARY = 5
SETTING = ("temperature", "output_len", "batch", "config")  # one compared setting: a cell and a configuration
PAIR = ("temperature", "output_len", "batch", "group", "repeat")  # a run pairs with the baseline of these keys


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


def _signature(meta: dict) -> tuple:
    prov = meta.get("provenance", {})
    params = prov.get("parameters", {})
    return tuple(repr(params.get(k)) for k in SWEEP_PARAMETERS) + (repr(sorted(prov.get("models_sha256", {}).items())),)


def pooled_runs(committed: Path, reruns: Path) -> tuple[dict, list]:
    """({run name: runs rows}, [(folder, why left out)]): the committed run as "committed" and each
    re-run folder (name order) with the same sweep, models and draft (module docstring); the
    committed folder itself is never a re-run (`make replicate` writes its run among them)."""
    base = read_table(Path(committed) / "runs.csv")
    sig, draft = _signature(base.attrs["meta"]), set(base["draft"]) - {""}
    runs, left = {"committed": base.to_dict("records")}, []
    here = Path(committed).resolve()
    for d in sorted(p for p in Path(reruns).glob("*") if p.is_dir() and p.resolve() != here) \
            if Path(reruns).is_dir() else []:
        if not (d / "runs.csv").exists():
            left.append((run_label(d.name), "no runs table"))
            continue
        t = read_table(d / "runs.csv")
        if _signature(t.attrs["meta"]) != sig:
            left.append((run_label(d.name), "another sweep"))
        elif set(t["draft"]) - {""} != draft:
            left.append((run_label(d.name), "another draft"))
        else:
            runs[d.name] = t.to_dict("records")
    return runs, left


def run_label(name: str) -> str:
    """A run as the page names it: a re-run folder written by `make replicate` by its UTC start time,
    any other name as it is.  Example: "run_20261204T050250Z" -> "re-run of 2026-12-04 05:02 UTC"."""
    m = re.fullmatch(r"run_(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})\d{2}Z", name)
    return f"re-run of {m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]} UTC" if m else name


def _units(runs: dict) -> dict:
    """{setting: [units]} of every speculative configuration: one ratio per (run, prompt group, round)."""
    out: dict = {}
    for name, rows in runs.items():
        for r in paired_speedups(records(rows), baseline="baseline", keys=PAIR, impl="config"):
            if r["config"] != "baseline":
                out.setdefault(tuple(r[k] for k in SETTING), []).append(
                    {"run": name, "prompt": r["group"], "ratio": r["speedup"]})
    return out


def setting(primary) -> tuple:
    """(temperature, output length, batch, configuration name) of a PRIMARY row [k or "dynamic",
    temperature, output length, batch].  Example: [2, 1.0, 128, 1] -> (1.0, 128, 1, "k=2")."""
    k, t, L, B = primary
    config = "dynamic" if k == "dynamic" else f"k={int(k)}"
    return float(t), int(L), int(B), config


def pooled_table(runs: dict, primary, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """One row per speculative setting, primary ones first (in PRIMARY's order): pooled median, 95%
    interval, the simultaneous interval (primary), each with its verdict as `protocol.level_verdict`
    words it from the pooled pairs, the runs, prompts and pairs, the between-run sd of the log
    speedup and its share, each run's median, and the role."""
    if not 1 <= len(primary) <= MAX_PRIMARY or len({repr(p) for p in primary}) != len(primary):
        raise ValueError(f"state 1 to {MAX_PRIMARY} distinct primary comparisons, got {primary}")
    units, keys = _units(runs), [setting(p) for p in primary]
    missing = [p for p, key in zip(primary, keys) if key not in units]
    if missing:
        raise ValueError(f"primary comparisons {missing} are not among the runs' settings")
    primary = keys
    level_sim = 1 - (1 - level) / len(primary)
    out = []
    for key in primary + sorted(k for k in units if k not in primary):
        u = units[key]
        h = hierarchical_interval(u, level=level, seed=seed)
        row = {**dict(zip(SETTING, key)), "role": "primary" if key in primary else "exploratory",
               "runs": h["runs"], "prompts": h["prompts"], "pairs": h["pairs"], "speedup": h["median"],
               "lo": h["lo"], "hi": h["hi"], "verdict": level_verdict(h["lo"], h["hi"], h["pairs"], level),
               "lo_sim": float("nan"), "hi_sim": float("nan"), "verdict_sim": "", "level_sim": float("nan"),
               **{f"between_{k}": v for k, v in between_run(u).items()},
               "run_medians": " ".join(f"{m:.3f}" for m in h["run_medians"])}
        if key in primary:
            s = hierarchical_interval(u, level=level_sim, seed=seed)
            row.update(lo_sim=s["lo"], hi_sim=s["hi"], level_sim=level_sim,
                       verdict_sim=level_verdict(s["lo"], s["hi"], s["pairs"], level_sim))
        out.append(row)
    return out
