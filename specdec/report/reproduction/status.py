"""Reproduction status: every recomputed table held against the committed one, by the kind of result.

`make reproduce` recomputes every chapter into ``data/results/`` and ends with the reproduction
chapter, which calls `compare_all`: each chapter's tables are compared with the same tables in a
git revision (default ``HEAD``, i.e. what is committed), extracted once with ``git archive``.

How a table is compared depends on the kind its sidecar declares (`specdec.io.results`):
  exact    every numeric column equal to rtol 1e-9 (+ atol 1e-12), every other column equal.  Not
           bytes: the last bit of a float division differs between CPUs (seen: 1.336363636363636
           committed on one machine, 1.3363636363636362 recomputed on another).  A table computed
           from float32 model logits states a looser ``tolerance`` in its sidecar (their spread
           across CPUs), which the comparison uses.
  sampled  seeded Monte Carlo is not bit-identical across machines (one flipped comparison changes a
           whole trajectory), so: the ``keys`` columns must be equal, each declared interval
           [est, lo, hi] of the recomputed table must overlap the committed one, each declared
           standard error must bound the difference (|new - old| <= 4 sqrt(se_new^2 + se_old^2)),
           and declared ``counts`` (a column of sample counts, split into separate samples by the
           ``groups`` columns) must pass a G-test of homogeneity against the committed counts at
           level 1e-3 per sample.  A sampled table with none of these is reported, not compared.
  timing   never asserted (`specdec.report.reproduction.timing`): where the table declares
           intervals, its rows are matched on their labels (a differing row set is said, and the
           matched rows compared) and it is counted how many intervals of the re-run overlap the
           committed ones (the rule of sampled tables) and how many of their verdicts say the same;
           always, the median ratio recomputed / committed of its rate and time columns is reported
           with its range, so a reader sees how far the machine moved.
Every table row carries those counts (`timing.COUNTS`, 0 for other kinds) and a chapter's row their
sums.  A chapter's status is one word (`chapter_status`): "differs" when a table differs or a
committed table was not recomputed ("missing"); otherwise "reproduced" when at least one table was
compared and all compared tables agree; else "timing" when it has timing tables (its interval and
verdict counts say what they repeat), "not compared" when none of its tables could be compared, and
"no reference" without committed results to compare with.  A chapter recomputed with other
parameters than the reference's (its ``chapter.json``, run controls apart: `changed_parameters`)
keeps that status, and the changed parameters are named beside it: a difference may be the new
design's, and the reader sees which parameters to look at.  A chapter whose run record (``run.json``)
is the committed one was not recomputed by the run (`was_recomputed`; chapter 10 under `make
reproduce`): "not recomputed", and its tables, which then equal the committed ones trivially, are
listed as such, neither compared nor counted.
What the page shows of these rows is `specdec.report.reproduction.page`'s; its sentences are its own.

Example: compare_frames(new, old) -> {"status": "reproduced", "detail": "12 rows, 5 columns equal"}
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import numpy as np

from specdec.report.reproduction.timing import COUNTS, compare_timing
from specdec.io.paths import BUILD_DIR, ROOT
from specdec.io.results import read_table

__all__ = ["REPRODUCED", "DIFFERS", "TIMING", "NOT_COMPARED", "NO_REFERENCE", "NOT_RECOMPUTED",
           "changed_parameters", "extract_reference", "compare_frames", "compare_chapter", "chapter_status",
           "was_recomputed", "chapter_names", "compare_all"]

RTOL, ATOL, Z, LEVEL = 1e-9, 1e-12, 4.0, 1e-3
REPRODUCED, DIFFERS, TIMING = "reproduced", "differs", "timing"  # a chapter's status words
NOT_COMPARED, NO_REFERENCE, NOT_RECOMPUTED = "not compared", "no reference", "not recomputed"
RUN_CONTROLS = ("RECOMPUTE", "RESULTS_DIR")  # parameters that say how a chapter runs, not what it measures


def extract_reference(revision: str = "HEAD", into: Path | None = None) -> tuple[Path | None, str]:
    """(``data/results`` as committed in ``revision``, extracted under build/reference/<commit>/,
    the commit's hash); (None, "") when this is not a git checkout (or the revision has no results)."""
    try:
        commit = subprocess.run(["git", "rev-parse", revision], cwd=ROOT, capture_output=True, text=True,
                                check=True, timeout=30).stdout.strip()
        dest = Path(into or BUILD_DIR / "reference") / commit
        if not (dest / "data" / "results").is_dir():
            blob = subprocess.run(["git", "archive", commit, "data/results"], cwd=ROOT, capture_output=True,
                                  check=True, timeout=120).stdout
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=BytesIO(blob)) as tar:
                tar.extractall(dest, filter="data")
    except (OSError, subprocess.SubprocessError):
        return None, ""
    return dest / "data" / "results", commit


def _numeric(df, c) -> bool:
    return str(df[c].dtype) in ("int64", "Int64", "float64")


def _exact(new, old) -> dict:
    """Every numeric column within the recomputed table's stated ``tolerance`` (rtol, atol; default
    `RTOL`, `ATOL`): a table computed from float32 model logits states the spread of those logits
    across CPUs, which no rounding of a division explains."""
    tol = new.attrs.get("meta", {}).get("tolerance") or {}
    rtol, atol = float(tol.get("rtol", RTOL)), float(tol.get("atol", ATOL))
    bad = []
    for c in new.columns:
        if _numeric(new, c) and _numeric(old, c):
            a, b = new[c].to_numpy(dtype=float), old[c].to_numpy(dtype=float)
            if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                with np.errstate(invalid="ignore", divide="ignore"):
                    rel = np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), atol))
                bad.append(f"{c} (max relative difference {rel:.1e})")
        elif new[c].astype(str).tolist() != old[c].astype(str).tolist():
            bad.append(f"{c} (values differ)")
    if bad:
        return {"status": "differs", "detail": "; ".join(bad)}
    return {"status": "reproduced",
            "detail": f"{len(new)} rows, {len(new.columns)} columns equal to rtol {rtol:g}, atol {atol:g}"}


def _sampled(new, old, meta) -> dict:
    bad, checked = [], []
    for c in meta.get("keys", []):
        if new[c].astype(str).tolist() != old[c].astype(str).tolist():
            bad.append(f"{c} differs")
    for est, lo, hi in meta.get("intervals", []):
        overlap = (new[lo] <= old[hi]) & (old[lo] <= new[hi])
        overlap |= new[est].isna() & old[est].isna()
        if not overlap.all():
            bad.append(f"{est}: {int((~overlap).sum())} of {len(new)} intervals do not overlap")
        checked.append(est)
    for est, se in meta.get("se", {}).items():
        bound = Z * np.sqrt(new[se].to_numpy(float) ** 2 + old[se].to_numpy(float) ** 2)
        gap = np.abs(new[est].to_numpy(float) - old[est].to_numpy(float))
        if not np.all((gap <= bound) | np.isnan(gap)):
            bad.append(f"{est}: {int((gap > bound).sum())} of {len(new)} rows beyond {Z:g} standard errors")
        checked.append(est)
    for col in meta.get("counts", []):
        p = _homogeneity(new, old, col, meta.get("groups", []))
        if p < LEVEL:
            bad.append(f"{col}: counts differ from the committed ones (G-test p = {p:.1e})")
        checked.append(col)
    if bad:
        return {"status": "differs", "detail": "; ".join(bad)}
    if not checked:
        labels = f"labels equal ({', '.join(meta['keys'])}); " if meta.get("keys") else ""
        return {"status": "not compared", "detail": f"{labels}sampled values not compared: no interval stated"}
    return {"status": "reproduced", "detail": f"{len(new)} rows; within intervals: {', '.join(checked)}"}


def _homogeneity(new, old, col: str, groups: list) -> float:
    """Smallest p-value over the samples (groups) of a G-test that the recomputed and the committed
    counts come from one multinomial (2 x cells contingency table, empty cells dropped)."""
    from scipy.stats import chi2_contingency

    parts = [(new, old)] if not groups else [(new[new[groups].astype(str).agg("|".join, axis=1) == g],
                                              old[old[groups].astype(str).agg("|".join, axis=1) == g])
                                             for g in new[groups].astype(str).agg("|".join, axis=1).unique()]
    pvals = []
    for a, b in parts:
        table = np.array([a[col].to_numpy(float), b[col].to_numpy(float)])
        table = table[:, table.sum(0) > 0]
        if table.shape[1] > 1:
            pvals.append(chi2_contingency(table, lambda_="log-likelihood")[1])
    return float(min(pvals)) if pvals else 1.0


def compare_frames(new, old) -> dict:
    """Compare a recomputed table with the committed one by its kind (module docstring)."""
    meta = new.attrs["meta"]
    if list(new.columns) != list(old.columns):
        return {"status": "differs", "detail": f"columns {list(new.columns)} vs committed {list(old.columns)}"}
    kind = meta.get("kind", "exact")
    if kind == "timing" and meta.get("intervals"):  # matched on its labels: a differing row set is reported
        return compare_timing(new, old, meta)
    if len(new) != len(old):
        return {"status": "differs", "detail": f"{len(new)} rows vs {len(old)} committed"}
    if kind == "timing":
        return compare_timing(new, old, meta)
    if kind == "sampled":
        return _sampled(new, old, meta)
    return _exact(new, old)


def compare_chapter(new_dir: Path, ref_dir: Path | None, recomputed: bool = True) -> list[dict]:
    """One row per table of a chapter's results folder, and one per committed table not recomputed;
    every row has the same columns: chapter, table, kind, status, detail and `timing.COUNTS`.  A
    chapter the run left alone (``recomputed`` False) has each table listed as "not recomputed",
    none compared."""
    rows = []

    def add(table, kind, result):
        rows.append({"chapter": Path(new_dir).name, "table": table, "kind": kind, "status": result["status"],
                     "detail": result["detail"], **{c: int(result.get(c, 0)) for c in COUNTS}})

    for csv in sorted(Path(new_dir).glob("*.csv")):
        new = read_table(csv)
        kind = new.attrs["meta"].get("kind", "exact")
        if not recomputed:
            add(csv.stem, kind, {"status": NOT_RECOMPUTED, "detail": "run.json as committed"})
            continue
        ref = None if ref_dir is None else Path(ref_dir) / csv.name
        if ref is None or not ref.exists():
            add(csv.stem, kind, {"status": "new", "detail": "no committed table to compare with"})
            continue
        try:
            add(csv.stem, kind, compare_frames(new, read_table(ref)))
        except (ValueError, KeyError) as exc:  # e.g. a committed table in an older format
            add(csv.stem, kind, {"status": "differs", "detail": f"cannot compare: {exc}"})
    if recomputed and ref_dir is not None and Path(ref_dir).is_dir():
        done = {r["table"] for r in rows}
        for csv in sorted(Path(ref_dir).glob("*.csv")):
            if csv.stem not in done:
                add(csv.stem, "", {"status": "missing", "detail": "committed, not recomputed"})
    return rows


def chapter_status(rows: list[dict], have_reference: bool) -> str:
    """The chapter's status word from its table rows (module docstring).
    Example: rows reproduced and timing -> "reproduced"; only timing rows -> "timing" """
    if not have_reference:
        return NO_REFERENCE
    if any(r["status"] in ("differs", "missing") for r in rows):
        return DIFFERS
    if any(r["status"] == "reproduced" for r in rows):
        return REPRODUCED
    return TIMING if any(r["kind"] == "timing" for r in rows) else NOT_COMPARED


def _record(d: Path, name: str) -> dict:
    p = Path(d) / name
    return json.loads(p.read_text()) if p.exists() else {}


def was_recomputed(new_dir: Path, ref_dir: Path | None) -> bool:
    """Whether the chapter in ``new_dir`` was recomputed since the reference ``ref_dir``: its run
    record differs from the reference's (or either has none, or there is no reference)."""
    if ref_dir is None:
        return True
    new, old = _record(new_dir, "run.json"), _record(ref_dir, "run.json")
    return not new or not old or new != old


def changed_parameters(new_dir: Path, ref_dir: Path | None) -> list[str]:
    """The chapter's parameters (``chapter.json``) whose values differ between the run in ``new_dir``
    and the reference, the run controls (`RUN_CONTROLS`) apart; none without both records.
    Example: NEW_TOKENS 48 committed, 32 recomputed -> ["NEW_TOKENS"]"""
    if ref_dir is None:
        return []
    new, old = (_record(d, "chapter.json").get("parameters", {}) for d in (new_dir, ref_dir))
    if not new or not old:
        return []
    return sorted(k for k in set(new) | set(old) if k not in RUN_CONTROLS and new.get(k) != old.get(k))


def chapter_names(dirs, exclude: str) -> list[str]:
    """The names of the chapter folders ``dirs`` (`specdec.report.chapter.chapter_dirs`) but ``exclude``
    (the reproduction chapter, which does not compare itself)."""
    return [Path(d).name for d in dirs if Path(d).name != exclude]


def compare_all(results_root: Path, chapters: list[str], revision: str = "HEAD") -> tuple[list[dict], list[dict]]:
    """(per-table rows, per-chapter rows) for the named chapter folders under ``results_root``."""
    with tempfile.TemporaryDirectory() as tmp:
        ref_root, ref_commit = extract_reference(revision, Path(tmp) if revision != "HEAD" else None)
        tables, summary = [], []
        for name in chapters:
            d = Path(results_root) / name
            ref = None if ref_root is None else ref_root / name
            fresh = was_recomputed(d, ref)
            rows = compare_chapter(d, ref, recomputed=fresh)  # tables a run left alone are listed, not compared
            tables += rows
            run, chap = _record(d, "run.json"), _record(d, "chapter.json")
            hw = run.get("hardware", {})
            changed = changed_parameters(d, ref) if fresh else []
            status = chapter_status(rows, ref_root is not None) if fresh else NOT_RECOMPUTED
            summary.append({"chapter": name, "status": status, "changed": " ".join(changed),
                            "reference": ref_commit, "wall_s": run.get("wall_s", float("nan")),
                            "cpu": hw.get("cpu", ""), "cores": hw.get("cpu_count", 0), "commit": run.get("commit", ""),
                            "date": run.get("date", ""), "smoke": bool(run.get("smoke", False)),
                            "models_sha256": " ".join(f"{k}:{v[:12]}" for k, v in sorted(chap.get("models_sha256",
                                                                                                {}).items())),
                            "tables": len(rows), "exact_reproduced": sum(r["kind"] == "exact" and r["status"] ==
                                                                         "reproduced" for r in rows),
                            "sampled_reproduced": sum(r["kind"] == "sampled" and r["status"] == "reproduced"
                                                      for r in rows),
                            "timing": sum(r["kind"] == "timing" for r in rows),
                            **{c: sum(r[c] for r in rows) for c in COUNTS}})
    return tables, summary
