"""What the reproduction page shows of `specdec.report.reproduction.status.compare_all`'s rows: one
row per chapter with its status word, the parameters its run changed, its wall time and the timing
counts, the tables that differ, and the counts the page's sentences quote (the sentences are its own).

Example: chapter_rows(summary) -> columns chapter, verdict, changed, wall_s, intervals, verdicts
"""

from __future__ import annotations

import pandas as pd

from specdec.report.reproduction.status import NOT_RECOMPUTED, REPRODUCED, TIMING
from specdec.report.reproduction.timing import COUNTS

__all__ = ["chapter_verdict", "chapter_rows", "differing", "chapter_counts", "table_counts"]


def chapter_verdict(status: str) -> str:
    """A recorded chapter status as its word: the current words as they are, and the longer form an
    older comparison recorded ("reproduced; timing: 4 of 6 intervals overlap", "differs: laws",
    "timing only") read as the word it begins with.
    Example: chapter_verdict("differs: laws") -> "differs"; chapter_verdict("timing only") -> "timing" """
    head = str(status).split(";")[0].split(":")[0].strip()
    return TIMING if head == "timing only" else head


def _of(a: int, b: int) -> str:
    return f"{int(a)} of {int(b)}" if b else ""


def _changed(summary):
    """The summary's changed parameters per chapter, "" where none (or recorded without the column)."""
    return summary["changed"].fillna("") if "changed" in summary else pd.Series("", index=summary.index)


def chapter_rows(summary):
    """The page's table of `compare_all`'s per-chapter summary (a DataFrame): chapter, verdict
    (`chapter_verdict`), the parameters the run changed (`status.changed_parameters`), wall time, and
    for timing tables that compared an interval "a of b" intervals overlapping and verdicts agreeing
    (blank where none was compared).  A summary recorded without the count columns has blank counts."""
    s = summary.reindex(columns=["chapter", "status", "wall_s", *COUNTS[:4]], fill_value=0)
    return s.assign(verdict=s["status"].map(chapter_verdict), changed=_changed(summary),
                    intervals=[_of(a, b) for a, b in zip(s["intervals_overlap"], s["intervals_compared"])],
                    verdicts=[_of(a, b) for a, b in zip(s["verdicts_agree"], s["verdicts_compared"])]
                    )[["chapter", "verdict", "changed", "wall_s", "intervals", "verdicts"]]


def differing(tables):
    """The rows of `compare_all`'s per-table list (a DataFrame) that differ or are missing."""
    return tables[tables["status"].isin(["differs", "missing"])]


def chapter_counts(summary) -> dict:
    """Counts over the per-chapter summary: chapters (``n_chapters``), reproduced ones, those with changed
    parameters (``n_changed``), those recomputed from a working tree with uncommitted changes (commit
    ending "+dirty"), the machines
    the recomputed ones ran on ("<cpu> (<cores> cores)", "; "-joined; a chapter not recomputed ran
    elsewhere, earlier) and the reference commit's first 12 digits."""
    machines = summary[summary["status"] != NOT_RECOMPUTED][["cpu", "cores"]].drop_duplicates()
    return {"n_chapters": int(len(summary)),
            "n_reproduced": int((summary["status"].map(chapter_verdict) == REPRODUCED).sum()),
            "n_changed": int((_changed(summary) != "").sum()),
            "n_dirty": int(summary["commit"].astype(str).str.endswith("+dirty").sum()),
            "machines": "; ".join(f"{c} ({n} cores)" for c, n in machines.itertuples(index=False)),
            "reference": (str(summary["reference"].iloc[0])[:12] if len(summary) else "") or "none"}


def table_counts(tables) -> dict:
    """Counts over the per-table list by kind, tables of chapters not recomputed left out: tables,
    exact ones and how many reproduced, sampled ones, how many reproduced and how many were not
    compared (no interval stated), timing ones."""
    tables = tables[tables["status"] != NOT_RECOMPUTED]
    kind, ok = tables["kind"], tables["status"] == "reproduced"
    return {"n_tables": int(len(tables)), "n_exact": int((kind == "exact").sum()),
            "n_exact_ok": int(((kind == "exact") & ok).sum()), "n_sampled": int((kind == "sampled").sum()),
            "n_sampled_ok": int(((kind == "sampled") & ok).sum()),
            "n_sampled_nc": int(((kind == "sampled") & (tables["status"] == "not compared")).sum()),
            "n_timing": int((kind == "timing").sum())}
