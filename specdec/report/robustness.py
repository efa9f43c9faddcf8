"""How far the measured words hold beyond one interval: the families of comparisons a chapter words
together (multiplicity), and the committed run of chapter 06 against re-runs of it in fresh processes.

  * `multiplicity_words`: per family (chapter 06's sweep, the drafts, ...), its size and what its
    simultaneous intervals (`specdec.measure.protocol.comparison`) decided, or that their level was
    out of reach (no interval: too few pairs);
  * `agreement`: two runs' tables of the same configurations: how many intervals overlap, how many
    verdicts agree, and which configurations' intervals miss each other;
  * `rerun_values`: the committed summary against every re-run folder (a folder holding its own
    ``summary.csv``), for the summary page's limitations.

A within-run interval describes the spread of pairs inside one run; a shift of the whole run (the
machine's other tenants, the heat of the moment) is not in it, which only re-runs can show.

Example: agreement(run_a, run_b)["overlap"] -> 25 (of agreement(...)["n"] -> 30)
"""

from __future__ import annotations

import json
from pathlib import Path

from specdec.report.formatting import config_text
from specdec.io.paths import CHAPTERS, RERUNS_DIR, RESULTS_DIR
from specdec.io.results import read_table

__all__ = ["FAMILIES", "NOT_EXACT", "INSTRUMENT", "multiplicity_words", "agreement", "rerun_agreements", "rerun_values"]

KEYS = ("temperature", "output_len", "batch", "config")
DECIDED = ("faster", "slower", "more tokens per step", "fewer tokens per step")
STATEMENTS = ("faster", "slower", "undecided")  # what a verdict can say
NOT_EXACT = "not the target's law here"  # a speed row of a configuration that failed its exactness test
INSTRUMENT = "an instrument: forced acceptance, not the target's law"  # a speed row that is never a speedup
LEGACY_WORDS = {"no difference detected at this precision": "undecided"}  # the same statement in older tables

FAMILIES = (("acc", "block_vs_token", "block against token verification", "lo_sim", "words_sim"),
            ("dec", "summary", "chapter 06's sweep", "speedup_lo_sim", "verdict_sim"),
            ("dec", "draft_summary", "the drafts", "speedup_lo_sim", "verdict_sim"),
            ("dec", "dynamic_vs_fixed", "the dynamic rule against fixed k", "lo_sim", "verdict_sim"),
            ("dec", "real_size_speedup_vs_alpha", "the real-size surface", "speedup_lo_sim", "verdict_sim"),
            ("alt", "speedup", "the approximate algorithms", "speedup_lo_sim", "verdict_sim"),
            ("serve", "speedup", "the serving policies", "latency_lo_sim", "verdict_sim"))


def multiplicity_words(root: Path = RESULTS_DIR, chapters: dict = CHAPTERS) -> str:
    """Per family of comparisons the measured chapters word together: its size and what its
    simultaneous intervals decided, or that the level was out of reach (no interval: too few pairs).
    Example: "the drafts (5): 1 decided; chapter 06's sweep (30): out of reach" """
    parts = []
    for chapter, table, name, lo, words in FAMILIES:
        t = read_table(Path(root) / chapters[chapter] / f"{table}.csv")
        t = t[t["config"] != "baseline"] if "config" in t.columns else t
        if lo not in t.columns:
            continue
        reach = t[lo].notna()
        decided = int(t.loc[reach, words].isin(DECIDED).sum())
        state = ("out of reach with so few pairs" if not reach.any() else
                 f"{decided} decided" + (f", {int((~reach).sum())} out of reach" if not reach.all() else ""))
        parts.append(f"{name} ({len(t)}): {state}")
    return "; ".join(parts)


def agreement(a, b, keys=KEYS) -> dict:
    """Two summary tables (chapter 06's ``summary``) on their shared speculative configurations:
    n, how many 95% intervals overlap (a lenient test: two 95% intervals of the same quantity
    overlap far more often than 95% of the time), how many verdicts are equal statements (two
    refusals, "too few pairs", do not count as agreeing) out of ``words_n``, the configurations on
    which both runs made a statement (a configuration both refuse can never agree), and the
    configurations whose intervals miss each other ("k=1, batch 1, 32 tokens, greedy: S [lo, hi]
    against S' [lo', hi']", a's first)."""
    m = a[a["config"] != "baseline"].merge(b[b["config"] != "baseline"], on=list(keys), suffixes=("_a", "_b"))
    hit = (m["speedup_lo_a"] <= m["speedup_hi_b"]) & (m["speedup_lo_b"] <= m["speedup_hi_a"])
    miss = [f"{config_text(r)}: {r['speedup_a']:.3f} [{r['speedup_lo_a']:.3f}, {r['speedup_hi_a']:.3f}] against "
            f"{r['speedup_b']:.3f} [{r['speedup_lo_b']:.3f}, {r['speedup_hi_b']:.3f}]"
            for r in m[~hit].to_dict("records")]
    va, vb = m["verdict_a"].replace(LEGACY_WORDS), m["verdict_b"].replace(LEGACY_WORDS)
    same = (va == vb) & va.isin(STATEMENTS)
    return {"n": int(len(m)), "overlap": int(hit.sum()), "words_agree": int(same.sum()),
            "words_n": int((va.isin(STATEMENTS) & vb.isin(STATEMENTS)).sum()), "missed": miss}


def rerun_agreements(summary, reruns: Path = RERUNS_DIR / CHAPTERS["dec"]) -> list[tuple]:
    """(folder, its summary table, `agreement` of ``summary`` with it) for every re-run under
    ``reruns`` (folders holding a ``summary.csv``), in name order; [] when there is none."""
    runs = sorted(d for d in Path(reruns).glob("*") if (d / "summary.csv").exists()) if Path(reruns).exists() else []
    out = []
    for d in runs:
        other = read_table(d / "summary.csv")
        out.append((d, other, agreement(summary, other)))
    return out


def rerun_values(summary, reruns: Path = RERUNS_DIR / CHAPTERS["dec"]) -> dict:
    """The committed summary against each re-run under ``reruns`` (folders with a ``summary.csv``,
    in name order; the commit from their ``run.json`` where there is one): how many re-runs, and in
    words per re-run (numbered in folder-name order) its commit, the overlapping intervals, the agreeing verdicts (`agreement`) and
    its best configuration with its interval; the committed run's best; and, per re-run, the
    configurations whose intervals miss (committed first)."""
    runs = rerun_agreements(summary, reruns)
    words, missed = [], []
    for i, (d, other, ag) in enumerate(runs, 1):
        run = json.loads((d / "run.json").read_text()) if (d / "run.json").exists() else {}
        words.append(f"re-run {i} (commit {str(run.get('commit', 'unknown'))[:7]}): {ag['overlap']} of {ag['n']} "
                     f"intervals overlap, {ag['words_agree']} verdicts agree, its best {_best(other)}")
        missed += [f"re-run {i}: committed {x}" for x in ag["missed"]]
    return {"reruns_n": len(runs), "reruns_words": "; ".join(words) or "no re-run is committed",
            "reruns_missed": "; ".join(missed) or "none", "best_here": _best(summary)}


def _best(summary) -> str:
    """The highest median speculative configuration with its interval, in words ("none" without one)."""
    spec = summary[summary["config"] != "baseline"]
    if not len(spec):
        return "none"
    b = spec.sort_values("speedup").iloc[-1]
    return f"{config_text(b)} at {b['speedup']:.3f} [{b['speedup_lo']:.3f}, {b['speedup_hi']:.3f}]"
