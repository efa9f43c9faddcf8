"""specdec.chapters.summary.published: the committed table of published results is well formed, cites only keys
of the book's bibliography, and the loader refuses a table missing a column."""

import pandas as pd
import pybtex.database
import pytest

from specdec.io import paths
from specdec.chapters.summary.published import NUMERIC_COLUMNS, PUBLISHED_CSV, REQUIRED_COLUMNS, published_results

BIB = paths.ROOT / "book" / "references.bib"


def test_every_source_is_a_key_of_the_bibliography():
    keys = set(pybtex.database.parse_file(str(BIB)).entries)
    sources = set(published_results()["source"])
    assert sources and sources <= keys, f"not in {BIB.name}: {sorted(sources - keys)}"


def test_columns_types_and_values():
    df = published_results()
    assert PUBLISHED_CSV.is_file() and len(df) > 0
    assert tuple(df.columns) == REQUIRED_COLUMNS
    assert all(df[c].dtype == float for c in NUMERIC_COLUMNS)
    assert (df["where"] != "").all() and (df["method"] != "").all()   # every number says where it is from
    speedup = df["speedup"].dropna()
    assert len(speedup) > 0 and (speedup > 0).all()
    acceptance = df["acceptance"].dropna()
    assert ((acceptance > 0) & (acceptance <= 1)).all()
    assert (df["mean_accepted_tokens"].dropna() >= 1).all()           # the bonus token is included


def test_a_table_missing_a_column_raises(tmp_path):
    table = pd.read_csv(PUBLISHED_CSV, dtype=str, keep_default_na=False).drop(columns=["speedup"])
    table.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="'speedup' is missing"):
        published_results(tmp_path / "t.csv")


def test_a_non_number_in_a_numeric_column_raises(tmp_path):
    table = pd.read_csv(PUBLISHED_CSV, dtype=str, keep_default_na=False)
    table.loc[0, "speedup"] = "3.4x"
    table.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="'speedup' holds non-numbers"):
        published_results(tmp_path / "t.csv")
