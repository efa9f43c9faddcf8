"""specdec.tables.Table: what notebooks display inline."""

import pytest

from specdec.tables import Table


def test_html_and_markdown():
    t = Table([{"name": "a<b", "tv": 0.012345, "n": 3}], "{:.3f}")
    h = t._repr_html_()
    assert h.count("<tr>") == 2 and "a&lt;b" in h and "<td>0.012</td>" in h and "<td>3</td>" in h
    assert t._repr_markdown_().splitlines() == ["| name | tv | n |", "|---|---|---|", "| a<b | 0.012 | 3 |"]


def test_bad_rows():
    with pytest.raises(ValueError):
        Table([])
    with pytest.raises(ValueError):
        Table([{"a": 1}, {"b": 2}])
