"""Chapter 06 pooled over its runs in fresh processes: the primary comparisons stated before the
lean runs, decided by the pooled analysis (`specdec.measure.replication`), and every other configuration
pooled the same way as exploratory.

The runs pooled: the committed run (``data/results/06_measured_decoding/runs.csv``) and every
re-run folder under ``data/reruns/06_measured_decoding/`` (written by `make replicate`) whose runs
table was made with the same sweep: equal SWEEP_PARAMETERS, the same model weights (sha256) and
the same draft.  Every other folder is listed with a one-label reason, never pooled.  Every
run decodes the same prompts with the same seeds (common random numbers), so what the runs differ
in is their timing: the machine's state and the process, which is what a replication of a timing
measures.

Primary comparisons: PRIMARY, at most five settings [draft length k (or "dynamic"), temperature,
output length, batch], stated in the chapter's parameters before the lean runs (after exploratory
eager ones).  Each gets the pooled median with its
two-stage bootstrap interval at 95% and at the simultaneous level 1 - 0.05 / m over the m primary
comparisons (Bonferroni); its words follow the simultaneous interval.  Everything else is
exploratory: pooled at 95% on its own, and says so.

Beside the pooled analysis, `runs_record` holds each run on its own (its reference interval, its
primary words, its cost-model counts): whether the headline reproduces is read there, run by run.

Example:
    runs = pooled_runs(committed_dir, reruns_dir)        # (included {name: rows}, excluded [(name, why)])
    rows = pooled_table(runs[0], primary=[[2, 1.0, 128, 1]])
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from specdec.chapters.ch06.summary import CELL, paired
from specdec.report.formatting import config_text, estimate_cell, interval_column
from specdec.measure.protocol import LEVEL, level_verdict
from specdec.measure.replication import between_run, free_level, hierarchical_interval
from specdec.io.paths import CHAPTERS, RERUNS_DIR
from specdec.io.results import read_table, records

__all__ = ["SWEEP_PARAMETERS", "MAX_PRIMARY", "RECORD_COLUMNS", "analysis", "pooled_runs", "setting", "pooled_table",
           "primary_values", "primary_shown", "runs_record", "record_values", "record_shown", "run_label"]

SWEEP_PARAMETERS = ("MODE", "DTYPE", "THREADS", "SEED", "PROMPT_LEN", "TEMPERATURES", "OUTPUT_LENS", "BATCHES",
                    "GREEDY_BATCHES", "KS", "PROMPTS", "REPEATS", "WARMUP", "PILOT_STEPS", "PILOT_K")
MAX_PRIMARY = 5
SETTING = CELL + ("config",)
RECORD_COLUMNS = {"run": None, "wall_min": "wall (min)", "reference": "reference (95%)",
                  "within": "cost model within (+ closed)", "forward": "in-loop / curve"}


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


def analysis(committed: Path, primary, *, reruns: Path = RERUNS_DIR / CHAPTERS["dec"],
             seed: int = 0):
    """(`pooled_table` of the committed run and its compatible re-runs, the page's numbers
    (`primary_values`, `record_values`), `runs_record` of the same runs, whose reference setting is
    the first primary comparison)."""
    runs, left = pooled_runs(committed, reruns)
    table = pooled_table(runs, primary, seed=seed)
    folders = {n: Path(committed) if n == "committed" else Path(reruns) / n for n in runs}
    record = runs_record(folders, ref=primary[0], primary=primary)
    return table, {**primary_values(table, left), **record_values(record)}, record


def runs_record(folders: dict, *, ref, primary) -> list[dict]:
    """One row per pooled run ({name: its folder}) with what a replication must reproduce, each from
    that run's own tables: its wall time; the reference setting ``ref`` (a PRIMARY-style row) with
    its 95% interval; the within-run words of each primary comparison; how many configurations the
    cost model predicts within its tolerance, how many are within it or come within it once their
    verification forwards are re-priced at their in-loop time (-1: a table made before that column),
    and the range of the in-loop over calibrated-curve verification time (the measured term of its
    misses).  A run still being computed (its chapter writes ``run.json`` at the end) has no wall
    time yet: NaN."""
    key, prim = setting(ref), [setting(p) for p in primary]
    out = []
    for name, d in folders.items():
        summ = {tuple(r[k] for k in SETTING): r for r in records(read_table(d / "summary.csv"))}
        pred = records(read_table(d / "prediction.csv"))
        r, run = summ[key], d / "run.json"
        wall = json.loads(run.read_text())["wall_s"] / 60 if run.exists() else float("nan")
        out.append({"run": run_label(name), "wall_min": wall,
                    "ref": r["speedup"], "ref_lo": r["speedup_lo"], "ref_hi": r["speedup_hi"],
                    "primary_words": ", ".join(summ[p]["verdict"] for p in prim),
                    "pred_within": sum(bool(x["within"]) for x in pred), "pred_n": len(pred),
                    "pred_explained": sum(bool(x["explained"]) for x in pred) if pred and "explained" in pred[0] else -1,
                    "fwd_min": min(x["forward_vs_curve"] for x in pred), "fwd_max": max(x["forward_vs_curve"] for x in pred)})
    return out


def record_values(record) -> dict:
    """From `runs_record`: how many runs, whether their reference intervals share a point
    ("overlap", else "disjoint"), and how many primary comparisons get the same within-run
    verdict in every run; the fewest and most configurations the cost model predicts within its
    tolerance in one run (every run's own tables)."""
    rows = records(record)
    words = [r["primary_words"].split(", ") for r in rows]
    return {"record_n": len(rows), "pred_within_min": int(min(r["pred_within"] for r in rows)),
            "pred_within_max": int(max(r["pred_within"] for r in rows)),
            "ref_overlap": "overlap" if max(r["ref_lo"] for r in rows) <= min(r["ref_hi"] for r in rows) else "disjoint",
            "primary_agree": sum(len(set(w)) == 1 for w in zip(*words))}


def run_label(name: str) -> str:
    """A run as the page names it: a re-run folder written by `make replicate` by its UTC start time,
    any other name as it is.  Example: "run_20261204T050250Z" -> "re-run of 2026-12-04 05:02 UTC"."""
    m = re.fullmatch(r"run_(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})\d{2}Z", name)
    return f"re-run of {m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]} UTC" if m else name


def _closed(row: dict) -> str:
    """The misses a run's in-loop term closes, "+2", or "n/a" for a table made before that column."""
    n = row.get("pred_explained", -1)
    return "n/a" if n < 0 else f"+{n - row['pred_within']}"


def _count(n: int) -> str:
    return "n/a" if n < 0 else str(n)


def record_shown(record):
    """`runs_record` as the page shows it (`RECORD_COLUMNS`)."""
    t = pd.DataFrame(records(record))
    return t.assign(wall_min=[_count(-1) if w != w else f"{w:.1f}" for w in t["wall_min"]],
                    reference=[estimate_cell(r["ref"], r["ref_lo"], r["ref_hi"], digits=3) for r in records(t)],
                    within=[f"{r['pred_within']} of {r['pred_n']} ({_closed(r)})" for r in records(t)],
                    forward=[f"{r['fwd_min']:.2f}-{r['fwd_max']:.2f}" for r in records(t)])[list(RECORD_COLUMNS)]


def _units(runs: dict) -> dict:
    """{setting: [units]} of every speculative configuration: one ratio per (run, prompt group, round)."""
    out: dict = {}
    for name, rows in runs.items():
        for r in paired(rows):
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
    units = _units(runs)
    primary = [setting(p) for p in primary]
    missing = [config_text(dict(zip(SETTING, p))) for p in primary if p not in units]
    if missing:
        raise ValueError(f"primary comparisons {missing} are not among the runs' settings")
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


def primary_values(table, left: list) -> dict:
    """From `pooled_table`: how many runs were pooled and left out, the primary comparisons' count,
    simultaneous level and verdicts, the level those runs carry without assumptions (`free_level`),
    the largest between-run sd of a run's mean log speedup among the primary comparisons (NaN when
    no run component is estimable: one run), and the exploratory rows faster by their 95% interval."""
    rows = [r for r in table if r["role"] == "primary"]
    said = lambda w: sum(r["verdict_sim"] == w for r in rows)  # noqa: E731
    return {"pooled_runs": int(rows[0]["runs"]), "left_out_n": len(left), "n_primary": len(rows),
            "primary_level": float(rows[0]["level_sim"]), "pooled_free_level": free_level(int(rows[0]["runs"])),
            "primary_faster": said("faster"), "primary_slower": said("slower"), "primary_undecided": said("undecided"),
            "between_sd_max": float(np.nanmax([r["between_sd_run"] for r in rows])
                                    if any(r["between_sd_run"] == r["between_sd_run"] for r in rows) else np.nan),
            "explore_faster": sum(r["verdict"] == "faster" for r in table if r["role"] == "exploratory"),
            "explore_n": sum(r["role"] == "exploratory" for r in table)}


def primary_shown(table, summary) -> pd.DataFrame:
    """The primary comparisons as the page shows them: each setting's speedup in the committed run
    (a `summary.summary_table`) with its 95% interval and verdict, beside its pooled median with the
    simultaneous interval and verdict over the runs (`pooled_table`)."""
    prim = [r for r in records(table) if r["role"] == "primary"]
    summ = {tuple(r[k] for k in SETTING): r for r in records(summary)}
    one = pd.DataFrame([summ[tuple(r[k] for k in SETTING)] for r in prim])
    pooled = pd.DataFrame(prim)
    return pd.DataFrame({"setting": [config_text(r) for r in prim], "this run": [f"{v:.3f}" for v in one["speedup"]],
                         "95% interval": interval_column(one, "speedup_lo", "speedup_hi"),
                         "verdict": one["verdict"].to_numpy(), "pooled": [f"{v:.3f}" for v in pooled["speedup"]],
                         "simultaneous interval": interval_column(pooled, "lo_sim", "hi_sim"),
                         "pooled verdict": pooled["verdict_sim"].to_numpy()})
