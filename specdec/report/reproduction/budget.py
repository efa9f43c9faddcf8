"""How long `make reproduce` takes, against its budgets.

Two measures, because they answer different questions:
  * the chapters' recomputes: the sum of the wall times each chapter's ``run.json`` records
    (`notebooks/run.py` writes it after a recompute), against `RECOMPUTE_BUDGET_MIN`;
    `recompute_budget` gives the minutes and the verdict "within" or "over".  A chapter with a make
    target of its own (`specdec.io.paths.OWN_TARGETS`) is not recomputed by `make reproduce`: its
    minutes are summed apart, never into the budget's;
  * the whole command, from the start of `make` to the built book, environment builds included:
    `record` writes it at the end of `make reproduce` (``make_reproduce.csv`` in the reproduction
    chapter's results, with provenance) and `last_run` reads it back.  The book of that same run was
    built before its time was known, so the page shows the last committed record.

Example: recompute_budget(summary with wall_s 600 and 900, and 1200 for 10_engines) ->
         {"recompute_minutes": 25.0, "recompute_budget": 25.0, "recompute_verdict": "within",
          "own_target_minutes": 20.0}

    python -m specdec.report.reproduction.budget --since 1700000000 --fresh-env true
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from specdec.io.paths import OWN_TARGETS, RESULTS_DIR
from specdec.io.results import provenance, read_table, write_table

__all__ = ["RECOMPUTE_BUDGET_MIN", "RECORD", "recompute_budget", "record", "last_run"]

RECOMPUTE_BUDGET_MIN = 25.0  # all chapters recomputed on the 2-core reference machine while a reader waits
RECORD = "make_reproduce.csv"  # the record's name in the reproduction chapter's results folder


def recompute_budget(summary, budget_min: float = RECOMPUTE_BUDGET_MIN) -> dict:
    """`make reproduce`'s recompute time (sum of ``wall_s`` over the per-chapter summary, a DataFrame
    of `status.compare_all`, but the chapters of `OWN_TARGETS`; a chapter without a run.json adds
    nothing) in minutes, the budget, "within" when the sum is at most the budget, else "over", and
    the minutes of the chapters with a target of their own."""
    own = summary["chapter"].isin(list(OWN_TARGETS))
    minutes = float(summary.loc[~own, "wall_s"].fillna(0).sum()) / 60
    return {"recompute_minutes": minutes, "recompute_budget": float(budget_min),
            "recompute_verdict": "within" if minutes <= budget_min else "over",
            "own_target_minutes": float(summary.loc[own, "wall_s"].fillna(0).sum()) / 60}


def record(started: float, fresh_env: bool, folder: Path = RESULTS_DIR / "99_reproduction") -> Path:
    """Write the wall time of a `make reproduce` that started at ``started`` (seconds since the epoch)
    and whether it built its environment (``fresh_env``: the signature of a fresh clone)."""
    path = Path(folder) / RECORD
    wall = time.time() - float(started)
    write_table([{"wall_s": round(wall, 1), "fresh_env": bool(fresh_env)}], path,
                provenance({"started": float(started), "fresh_env": bool(fresh_env)}), kind="timing")
    return path


def last_run(folder) -> dict:
    """The recorded `make reproduce` in ``folder``: its minutes (rounded to 0.1; NaN when none is
    recorded) and whether it built its environment ("yes", "no", or "n/a" without a record)."""
    path = Path(folder) / RECORD
    if not path.exists():
        return {"reproduce_minutes": math.nan, "reproduce_fresh": "n/a"}
    r = read_table(path).iloc[-1]
    return {"reproduce_minutes": round(float(r["wall_s"]) / 60, 1),
            "reproduce_fresh": "yes" if r["fresh_env"] else "no"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="record how long `make reproduce` took (its last step)")
    ap.add_argument("--since", type=float, required=True, help="when make started, seconds since the epoch")
    ap.add_argument("--fresh-env", choices=("true", "false"), required=True, help="did this run build the environment")
    ap.add_argument("--folder", type=Path, default=RESULTS_DIR / "99_reproduction")
    args = ap.parse_args(argv)
    path = record(args.since, args.fresh_env == "true", args.folder)
    print(f"make reproduce: {(time.time() - args.since) / 60:.1f} minutes, recorded in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
