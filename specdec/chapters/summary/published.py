"""Published speculative-decoding results (theirs, not ours), to show beside this report's numbers.

The table ``data/published/speculative_results.csv`` is transcribed by hand from the papers (and the
Spec-Bench leaderboard); its sidecar ``speculative_results.json`` says where each source was checked.
Every row names its source by the bib key in ``book/references.bib`` and the table or section the
numbers come from.  Blank cells are numbers the paper does not report or that could not be
confirmed; they load as NaN (numbers) or "" (text).  Nothing here is measured by this project.

Example:
    >>> df = published_results()
    >>> df.loc[df["source"] == "xia2024unlocking", ["method", "speedup"]].head(1)
      method  speedup
    8  EAGLE     2.29
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specdec.io.paths import ROOT

__all__ = ["PUBLISHED_CSV", "REQUIRED_COLUMNS", "NUMERIC_COLUMNS", "published_results"]

PUBLISHED_CSV = ROOT / "data" / "published" / "speculative_results.csv"
REQUIRED_COLUMNS = ("source", "method", "target", "target_params", "draft", "draft_params", "hardware",
                    "task", "temperature", "k", "acceptance", "mean_accepted_tokens", "speedup", "where",
                    "note")
NUMERIC_COLUMNS = ("target_params", "draft_params", "temperature", "k", "acceptance", "mean_accepted_tokens",
                   "speedup")


def published_results(path: str | Path | None = None) -> pd.DataFrame:
    """The published-results table: text columns as str ("" when blank), numeric ones as float.

    ``path`` defaults to `PUBLISHED_CSV`.  Raises ValueError naming the first missing column, or a
    numeric column holding something that is not a number.
    """
    path = Path(path) if path is not None else PUBLISHED_CSV
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column in REQUIRED_COLUMNS:
        if column not in df.columns:
            raise ValueError(f"{path}: required column {column!r} is missing "
                             f"(expected columns: {', '.join(REQUIRED_COLUMNS)})")
    df = df[list(REQUIRED_COLUMNS)].copy()
    for column in NUMERIC_COLUMNS:
        values = pd.to_numeric(df[column].str.strip().replace("", None), errors="coerce")
        bad = df[column].str.strip().ne("") & values.isna()
        if bad.any():
            raise ValueError(f"{path}: column {column!r} holds non-numbers: {sorted(set(df.loc[bad, column]))}")
        df[column] = values.astype(float)
    df.attrs["path"] = str(path)
    return df
