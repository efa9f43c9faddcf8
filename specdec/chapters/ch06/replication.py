"""Chapter 06 pooled over its runs in fresh processes, as its page shows it: the primary comparisons
stated before the lean runs, decided by the pooled analysis (`specdec.measure.replication`: which
runs pool, and how), beside the committed run's own intervals, and the numbers the prose quotes.

Beside the pooled analysis, `runs_record` holds each run on its own (its reference interval, its
primary words, its cost-model counts): whether the headline reproduces is read there, run by run.

Example:
    table, values, record = analysis(committed_dir, [[2, 1.0, 128, 1]])
    primary_shown(table, summary)       # one row per primary comparison: this run beside the pooled runs
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from specdec.report.formatting import config_text, estimate_cell, interval_column
from specdec.measure.replication import SETTING, free_level, pooled_runs, pooled_table, run_label, setting
from specdec.io.paths import CHAPTERS, RERUNS_DIR
from specdec.io.results import read_table, records

__all__ = ["RECORD_COLUMNS", "analysis", "primary_values", "primary_shown", "runs_record", "record_values",
           "record_shown"]

RECORD_COLUMNS = {"run": None, "wall_min": "wall (min)", "reference": "reference (95%)",
                  "within": "cost model within (+ closed)", "forward": "in-loop / curve"}


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
    """One row per pooled run ({name: its folder}) with what a replication must reproduce, from that
    run's own tables: its wall time (NaN while it is computed: ``run.json`` is written at the end); the
    reference setting ``ref`` (a PRIMARY-style row) with its 95% interval; the within-run words of each
    primary comparison; the configurations the cost model predicts within its tolerance, and those
    within once their verification forwards are re-priced in the loop (-1: a table without that
    column); the range of the in-loop over calibrated-curve verification time (its misses' term)."""
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


def _closed(row: dict) -> str:
    """The misses a run's in-loop term closes, "+2", or "n/a" for a table made before that column."""
    n = row.get("pred_explained", -1)
    return "n/a" if n < 0 else f"+{n - row['pred_within']}"


def record_shown(record):
    """`runs_record` as the page shows it (`RECORD_COLUMNS`)."""
    t = pd.DataFrame(records(record))
    return t.assign(wall_min=["n/a" if w != w else f"{w:.1f}" for w in t["wall_min"]],
                    reference=[estimate_cell(r["ref"], r["ref_lo"], r["ref_hi"], digits=3) for r in records(t)],
                    within=[f"{r['pred_within']} of {r['pred_n']} ({_closed(r)})" for r in records(t)],
                    forward=[f"{r['fwd_min']:.2f}-{r['fwd_max']:.2f}" for r in records(t)])[list(RECORD_COLUMNS)]


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
            "between_sd_max": float(pd.Series([r["between_sd_run"] for r in rows], dtype=float).max()),  # NaN skipped
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
