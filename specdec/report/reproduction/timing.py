"""A recomputed timing table against the committed one: never asserted, but reported by what matters
for a measured chapter -- do the speedup intervals of the re-run overlap the committed ones, and do
their verdicts say the same -- and by how far its raw times and rates moved.

`compare_timing(new, old, meta)` returns status "timing" always, a detail in words, and the counts
`COUNTS` (all 0 for a table that declares no interval):

  rows       a table that declares no interval is compared row by row in order (`compare_frames`
             requires its row count to be equal).  A table that declares intervals is matched on its
             labels: the ``keys`` its sidecar declares, else its leading columns (a tidy table lists
             its design first: temperature, output_len, batch, config, k, ...) up to the first column
             an interval names, less sample counts (`SAMPLE_COUNTS`), cut to the shortest prefix that
             names every row once in both tables -- so a column that follows from the design and is
             itself a result (chapter 06's ``best_fixed``) is not a label.  When no such labels
             exist, rows are matched in order if the counts are equal, else none is.  Rows on one
             side only are counted (``rows_unmatched``) and said; the matched rows are compared.
  intervals  per declared [est, lo, hi] and matched row: a side has the interval when est, lo and hi
             are all finite and lo < hi (a point [1, 1] is the baseline against itself, no
             measurement); the row is compared when either side has it; it overlaps when both have it
             and new lo <= old hi and old lo <= new hi (the rule of sampled tables).  An interval on
             one side only (e.g. a level reached by one run's pairs only) does not overlap.
  verdicts   an interval's words are the column ``verdict<s>`` (else ``words<s>``) where its low column
             is ``lo<s>`` or ``..._lo<s>`` (speedup_lo -> verdict, speedup_lo_sim -> verdict_sim,
             lo -> verdict); a column words the first interval declared with its suffix only (chapter
             06's summary: ``verdict`` words the speedup interval, not the steady one declared after).
             Verdicts are compared on the rows where their interval is, and agree when the words are
             equal (an older wording read as its current one, `LEGACY_WORDS`).
  ratios     the median recomputed / committed of every rate and time column (names ending ``_s``,
             holding ``per_s``, or starting ``t_``) over the matched rows, with its range: how far the
             machine moved.

Example: compare_timing(new, old, {"intervals": [["speedup", "speedup_lo", "speedup_hi"]]})
    -> {"status": "timing", "detail": "speedup [speedup_lo, speedup_hi]: 5 of 6 intervals overlap, ...",
        "intervals_overlap": 5, "intervals_compared": 6, "verdicts_agree": 4, "verdicts_compared": 6, ...}
"""

from __future__ import annotations

import re
from itertools import takewhile

import numpy as np

__all__ = ["COUNTS", "SAMPLE_COUNTS", "LEGACY_WORDS", "compare_timing", "labels"]

COUNTS = ("intervals_overlap", "intervals_compared", "verdicts_agree", "verdicts_compared", "rows_unmatched")
SAMPLE_COUNTS = frozenset({"runs", "pairs", "repeats", "resamples", "requests", "rounds"})  # sizes, not design
LEGACY_WORDS = {"no difference detected at this precision": "undecided"}  # a verdict as older tables word it


def labels(new, old, meta) -> list[str] | None:
    """The columns that match a row of ``new`` with one of ``old`` (module docstring), or None."""
    def unique(cols):
        return not new.duplicated(cols).any() and not old.duplicated(cols).any()

    if meta.get("keys"):
        return list(meta["keys"]) if unique(list(meta["keys"])) else None
    named = {c for interval in meta["intervals"] for c in interval}
    lead = [c for c in takewhile(lambda c: c not in named, new.columns) if c not in SAMPLE_COUNTS]
    return next((lead[:n] for n in range(1, len(lead) + 1) if unique(lead[:n])), None)


def _match(new, old, meta):
    """(new rows, old rows) aligned, how many rows have no partner, and the words on the matching."""
    if not meta.get("intervals"):
        return new.reset_index(drop=True), old.reset_index(drop=True), 0, ""
    on = labels(new, old, meta)
    if on is None:
        if len(new) == len(old):
            return new.reset_index(drop=True), old.reset_index(drop=True), 0, "unlabelled rows: matched in order"
        return new.iloc[:0], old.iloc[:0], len(new) + len(old), "unlabelled rows: none matched"
    m = new[on].assign(_i=range(len(new))).merge(old[on].assign(_j=range(len(old))), on=on, how="outer")
    both = m["_i"].notna() & m["_j"].notna()
    only_old, only_new = int(m["_i"].isna().sum()), int(m["_j"].isna().sum())
    words = f"matched on {', '.join(on)}"
    if only_old or only_new:
        words += f"; rows unmatched: {only_old} committed, {only_new} recomputed; {int(both.sum())} compared"
    a = new.iloc[m.loc[both, "_i"].astype(int)].reset_index(drop=True)
    b = old.iloc[m.loc[both, "_j"].astype(int)].reset_index(drop=True)
    return a, b, only_old + only_new, words


def _verdict_columns(intervals, columns) -> list[str | None]:
    """Per interval, the column of its words or None (module docstring: the suffix rule)."""
    out, taken = [], set()
    for _, lo, _ in intervals:
        hit = re.fullmatch(r"(?:.*_)?lo(_.*)?", lo)
        sfx = (hit.group(1) or "") if hit else None
        col = None if sfx is None or sfx in taken else next(
            (c for c in (f"verdict{sfx}", f"words{sfx}") if c in columns), None)
        taken |= {sfx} if col else set()
        out.append(col)
    return out


def _ratios(a, b) -> str:
    cols = [c for c in a.columns if str(a[c].dtype) in ("int64", "Int64", "float64")
            and (c.endswith("_s") or "per_s" in c or c.startswith("t_"))]
    ratios = []
    for c in cols:
        x, y = a[c].to_numpy(float), b[c].to_numpy(float)
        ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
        ratios += list(x[ok] / y[ok])
    if not ratios:
        return "no comparable timing column"
    q = np.percentile(ratios, [0, 50, 100])
    return f"ratio recomputed / committed: median {q[1]:.2f}, range {q[0]:.2f}-{q[2]:.2f}, n = {len(ratios)}"


def compare_timing(new, old, meta) -> dict:
    """The report on a timing table (module docstring); both tables have the same columns."""
    a, b, unmatched, words = _match(new, old, meta)
    counts = dict.fromkeys(COUNTS, 0)
    counts["rows_unmatched"] = unmatched
    parts = []
    intervals = meta.get("intervals") or []
    for (est, lo, hi), verdict in zip(intervals, _verdict_columns(intervals, a.columns)):
        (ea, la, ha), (eb, lb, hb) = (df[[est, lo, hi]].to_numpy(float).T for df in (a, b))
        has_a = np.isfinite(ea) & np.isfinite(la) & np.isfinite(ha) & (la < ha)
        has_b = np.isfinite(eb) & np.isfinite(lb) & np.isfinite(hb) & (lb < hb)
        compared = has_a | has_b
        hit = has_a & has_b & (la <= hb) & (lb <= ha)
        if not compared.any():
            parts.append(f"{est} [{lo}, {hi}]: on no matched row")
            continue
        counts["intervals_overlap"] += int(hit.sum())
        counts["intervals_compared"] += int(compared.sum())
        text = f"{est} [{lo}, {hi}]: {int(hit.sum())} of {int(compared.sum())} intervals overlap"
        if verdict:
            same = a[verdict].astype(str).replace(LEGACY_WORDS).to_numpy() == b[verdict].astype(str).replace(
                LEGACY_WORDS).to_numpy()
            counts["verdicts_agree"] += int((same & compared).sum())
            counts["verdicts_compared"] += int(compared.sum())
            text += f", {int((same & compared).sum())} of {int(compared.sum())} verdicts ({verdict}) agree"
        parts.append(text)
    parts += [words] if words else []
    return {"status": "timing", "detail": "; ".join(parts + [_ratios(a, b)]), **counts}
