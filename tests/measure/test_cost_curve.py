"""specdec.measure.cost_curve: the measured T(n) rows and their checks."""

import pytest
import torch

from specdec.measure.cost_curve import cost_curve, one_token_forward

def test_cost_curve_rows_and_checks(tiny_pair):
    target, _ = tiny_pair
    rows = cost_curve(target, [1, 3], context=8, repeats=2, warmup=1, generator=torch.Generator().manual_seed(1))
    assert [r["n"] for r in rows] == [1, 3] and rows[0]["ratio"] == 1.0
    assert all(r["repeats"] == 2 and 0 < r["min_s"] <= r["median_s"] <= r["max_s"] for r in rows)
    with pytest.raises(ValueError, match="exceeds"):
        cost_curve(target, [9], context=125, generator=torch.Generator())
    with pytest.raises(ValueError):
        cost_curve(target, [0], context=8, generator=torch.Generator())


def test_between_runs_before_every_timed_forward(tiny_pair):
    """`between` is called once before each timed call (warm-up included) and is not timed into
    T(n); `one_token_forward` can run any number of times (its cache is cropped back each time)."""
    target, draft = tiny_pair
    touch = one_token_forward(draft, context=8, batch=2, generator=torch.Generator().manual_seed(0))
    calls = []
    rows = cost_curve(target, [1, 3], context=8, batch=2, repeats=3, warmup=1,
                      generator=torch.Generator().manual_seed(1), between=lambda: (calls.append(1), touch()))
    assert len(calls) == (1 + 3) * 2 and [r["repeats"] for r in rows] == [3, 3]
    for _ in range(3):
        touch()


def test_cost_curve_times_a_compiled_model_on_its_own_cache(tiny_pair):
    """A compiled model gets its preallocated cache and the mask of every slot (as in the engine):
    the curve is measured, the warm-up compiles each shape and the timed calls compile nothing.
    Traced by dynamo and run by aot_eager: the graphs and guards are inductor's, without its C++
    build per graph (the cost curve's side is what this checks)."""
    from specdec.engine.modes.compiled import compiled, graph_count

    target, draft = tiny_pair
    ct = compiled(target, backend="aot_eager")
    touch = one_token_forward(compiled(draft, backend="aot_eager"), context=8, batch=2, generator=torch.Generator().manual_seed(0))
    cost_curve(ct, [1, 3], context=8, batch=2, repeats=1, warmup=1, generator=torch.Generator().manual_seed(1),
               between=touch)
    before = graph_count()
    rows = cost_curve(ct, [1, 3], context=8, batch=2, repeats=2, warmup=0, generator=torch.Generator().manual_seed(1),
                      between=touch)
    assert graph_count() == before and [r["repeats"] for r in rows] == [2, 2] and rows[1]["median_s"] > 0
