"""specdec.measure.cost_curve: the measured T(n) rows and their checks."""

import pytest
import torch

from specdec.measure.cost_curve import cost_curve

def test_cost_curve_rows_and_checks(tiny_pair):
    target, _ = tiny_pair
    rows = cost_curve(target, [1, 3], context=8, repeats=2, warmup=1, generator=torch.Generator().manual_seed(1))
    assert [r["n"] for r in rows] == [1, 3] and rows[0]["ratio"] == 1.0
    assert all(r["repeats"] == 2 and 0 < r["min_s"] <= r["median_s"] <= r["max_s"] for r in rows)
    with pytest.raises(ValueError, match="exceeds"):
        cost_curve(target, [9], context=125, generator=torch.Generator())
    with pytest.raises(ValueError):
        cost_curve(target, [0], context=8, generator=torch.Generator())
