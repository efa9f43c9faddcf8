"""Where chapter 06's baseline stands, from the engine benchmark's committed tables (`make bench`,
`specdec.cli.bench`): our plain decoding against Hugging Face's, per execution mode, and what
speculation gains over plain decoding of the same mode.  Verdicts are re-read from each interval
by `specdec.measure.protocol.level_verdict`, so the page words the bench's rows as it words its own.

Example: comp, summ = bench_tables("data/results/bench"); vs_fastest(comp, "lean") -> one row per
(temperature, batch): our lean plain decoding over Hugging Face's compiled `generate`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from specdec.chapters.ch06.summary import HF_PLAIN, OURS_PLAIN
from specdec.io.results import read_table, records
from specdec.measure.protocol import level_verdict
from specdec.report.formatting import interval_column, temperature_text

__all__ = ["bench_tables", "vs_fastest", "baseline_values", "modes_table", "long_drafts", "hf_runs", "MODES"]

MODES = ("eager", "lean", "compiled")


def bench_tables(folder) -> tuple:
    """The engine benchmark's comparisons and summary tables, read from ``folder``."""
    return read_table(Path(folder) / "bench_comparisons.csv"), read_table(Path(folder) / "bench_summary.csv")


def _mode(rows, mode: str) -> list[dict]:
    """The rows of one execution mode (a table from before the modes has no mode column: all eager)."""
    return [r for r in records(rows) if r.get("mode", "eager") == mode]


def _verdict(r: dict, lo: str = "lo", hi: str = "hi", n: str = "runs") -> str:
    return level_verdict(float(r[lo]), float(r[hi]), int(r[n]))


def vs_fastest(comp, mode: str) -> pd.DataFrame:
    """Our plain decoding in ``mode`` over Hugging Face's compiled plain `generate` (its fastest plain
    decoding measured: comparison vs_hf_compiled_ar, k = 0), one row per (temperature, batch) with the
    ratio of time per token, its 95% interval and verdict."""
    rows = sorted((r for r in _mode(comp, mode) if r["comparison"] == "vs_hf_compiled_ar" and r["k"] == 0),
                  key=lambda r: (r["batch"], -r["temperature"]))
    return pd.DataFrame({"temperature": [temperature_text(r["temperature"], "") for r in rows],
                         "batch": [r["batch"] for r in rows], "ratio": [r["median"] for r in rows],
                         "95% interval": interval_column(pd.DataFrame(rows, columns=["lo", "hi"]), "lo", "hi"),
                         "verdict": [_verdict(r) for r in rows]})


def baseline_values(comp, mode: str) -> dict:
    """The bench's largest batch, our ``mode`` plain decoding's verdict against Hugging Face's compiled
    `generate` greedy at batch 1 (``fast_b1``) and at that batch (``fast_bn``), and the range of the
    engine's own work outside the model forwards as a share of step time in ``mode`` (overhead)."""
    fast = {r["batch"]: r for r in _mode(comp, mode) if r["comparison"] == "vs_hf_compiled_ar" and r["k"] == 0
            and r["temperature"] == 0.0}
    over = [r["median"] for r in _mode(comp, mode) if r["comparison"] == "overhead"]
    bn = max(fast)
    return {"bench_batch": int(bn), "fast_b1": _verdict(fast[1]), "fast_bn": _verdict(fast[bn]),
            "overhead_min": float(min(over, default=np.nan)), "overhead_max": float(max(over, default=np.nan))}


def modes_table(comp, bench_summary) -> pd.DataFrame:
    """One row per execution mode the bench ran, greedy at batch 1: our plain decoding over Hugging
    Face's plain `generate` of the same mode (the lean mode against its eager one) with interval and
    verdict, and the best median speculative speedup over plain decoding of the same mode (over
    temperatures and k at batch 1) with its interval and verdict."""
    out = []
    for mode in MODES:
        base = [r for r in _mode(comp, mode) if r["comparison"] == "baseline" and r["batch"] == 1
                and r["temperature"] == 0.0]
        spec = [r for r in _mode(bench_summary, mode) if r["impl"] == "ours_spec" and r["batch"] == 1]
        if not base or not spec:
            continue
        b, s = base[0], max(spec, key=lambda r: r["speedup_median"])
        out.append({"mode": mode, "plain over HF": b["median"], "lo": b["lo"], "hi": b["hi"], "verdict": _verdict(b),
                    "best speculative": s["speedup_median"], "s_lo": s["speedup_lo"], "s_hi": s["speedup_hi"],
                    "its verdict": _verdict(s, "speedup_lo", "speedup_hi")})
    t = pd.DataFrame(out)
    t = t.assign(**{"95% interval": interval_column(t, "lo", "hi"), "its interval": interval_column(t, "s_lo", "s_hi")})
    return t[["mode", "plain over HF", "95% interval", "verdict", "best speculative", "its interval", "its verdict"]]


def long_drafts(bench_summary, k_from: int) -> dict:
    """What the bench measured for our speculative decoding at k >= k_from (the draft lengths the
    chapter's sweep cuts): how many (temperature, k) settings, how many faster than plain decoding of
    the same mode, and the largest median; in the eager mode unless the lean mode ran k it skipped
    (``long_mode``)."""
    def spec(mode):
        return [r for r in _mode(bench_summary, mode) if r["impl"] == "ours_spec" and r["k"] >= k_from]

    mode = "lean" if {r["k"] for r in spec("lean")} - {r["k"] for r in spec("eager")} else "eager"
    rows = spec(mode)
    return {"long_n": len(rows), "long_faster": sum(_verdict(r, "speedup_lo", "speedup_hi") == "faster" for r in rows),
            "long_max": float(max((r["speedup_median"] for r in rows), default=float("nan"))),
            "long_k_from": k_from, "long_k_to": int(max((r["k"] for r in rows), default=k_from)), "long_mode": mode}


def hf_runs(bench_runs, k: int, temperature: float = 1.0) -> list[dict]:
    """The bench's runs that hold Hugging Face against our plain decoding (`summary.hf_summary` reads
    them): HF's plain `generate`, its assisted generation at ``k``, our plain decoding in the lean and
    the eager mode, at ``temperature`` and batch 1, renamed to the summary's configurations, each
    prompt its own pairing group.  The bench ran them interleaved in the same rounds, so they pair.
    Example: a bench row {"config": "hf_ar", "prompt": 2, ...} -> {"config": "HF generate", "group": 2, ...}"""
    names = {"hf_ar": HF_PLAIN, f"hf_assisted k={k}": f"HF assisted k={k}", "ours_ar lean": OURS_PLAIN["lean"],
             "ours_ar": OURS_PLAIN["eager"]}
    return [{**r, "config": names[r["config"]], "group": r["prompt"]} for r in records(bench_runs)
            if r["config"] in names and r["batch"] == 1 and r["temperature"] == temperature]
