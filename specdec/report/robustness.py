"""How far the measured verdicts hold beyond one interval: the committed run of chapter 06 against
re-runs of it in fresh processes.

  * `agreement`: two runs' tables of the same configurations: how many intervals overlap, and how
    many verdicts agree out of those both runs could give;
  * `rerun_agreements`: the committed summary against every re-run folder (a folder holding its own
    ``summary.csv``), for the front page's limitations.

A within-run interval describes the spread of pairs inside one run; a shift of the whole run (the
machine's other tenants, the heat of the moment) is not in it, which only re-runs can show.

Example: agreement(run_a, run_b)["overlap"] -> 25 (of agreement(...)["n"] -> 30)
"""

from __future__ import annotations

from pathlib import Path

from specdec.io.paths import CHAPTERS, RERUNS_DIR
from specdec.io.results import read_table

__all__ = ["NOT_EXACT", "agreement", "rerun_agreements"]

KEYS = ("temperature", "output_len", "batch", "config")
STATEMENTS = ("faster", "slower", "undecided")  # what a verdict can say
NOT_EXACT = "not the target's law here"  # a speed row of a configuration that failed its exactness test
LEGACY_WORDS = {"no difference detected at this precision": "undecided"}  # the same statement in older tables


def agreement(a, b, keys=KEYS) -> dict:
    """Two summary tables (chapter 06's ``summary``) on their shared speculative configurations:
    n, how many 95% intervals overlap (a lenient test: two 95% intervals of the same quantity
    overlap far more often than 95% of the time), how many verdicts are equal statements (two
    refusals, "too few pairs", do not count as agreeing) out of ``words_n``, the configurations on
    which both runs made a statement (a configuration a run refuses can never agree)."""
    m = a[a["config"] != "baseline"].merge(b[b["config"] != "baseline"], on=list(keys), suffixes=("_a", "_b"))
    hit = (m["speedup_lo_a"] <= m["speedup_hi_b"]) & (m["speedup_lo_b"] <= m["speedup_hi_a"])
    va, vb = m["verdict_a"].replace(LEGACY_WORDS), m["verdict_b"].replace(LEGACY_WORDS)
    same = (va == vb) & va.isin(STATEMENTS)
    return {"n": int(len(m)), "overlap": int(hit.sum()), "words_agree": int(same.sum()),
            "words_n": int((va.isin(STATEMENTS) & vb.isin(STATEMENTS)).sum())}


def rerun_agreements(summary, reruns: Path = RERUNS_DIR / CHAPTERS["dec"]) -> list[tuple]:
    """(folder, its summary table, `agreement` of ``summary`` with it) for every re-run under
    ``reruns`` (folders holding a ``summary.csv``), in name order; [] when there is none."""
    runs = sorted(d for d in Path(reruns).glob("*") if (d / "summary.csv").exists()) if Path(reruns).exists() else []
    out = []
    for d in runs:
        other = read_table(d / "summary.csv")
        out.append((d, other, agreement(summary, other)))
    return out

