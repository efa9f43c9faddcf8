"""specdec.measure.harness and engine.stats: the row builder fills every column (NaN where a source
has none), the sweep interleaves configurations round by round with reproducible seeds, and the
latency summary of a hand-made token timeline."""

import math

import pytest

from specdec.engine.stats import latency_summary
from specdec.measure.harness import RUN_COLUMNS, Cell, Config, run_row, sweep


def test_run_row_fills_every_column_and_derives_engine_time():
    row = run_row({"tokens": 10, "total_s": 2.0, "t_step": 1.5, "t_draft_forward": 0.2, "t_target": 1.0},
                  wall_s=2.5, impl="x")
    assert list(row)[:1] == ["impl"] and set(RUN_COLUMNS) <= set(row)
    assert row["wall_s"] == 2.5 and row["tokens_per_s_total"] == 5.0 and row["t_engine"] == pytest.approx(0.3)
    assert math.isnan(row["lat_p50_s"]) and math.isnan(run_row({"tokens": 1})["t_engine"])


def test_sweep_interleaves_rounds_and_seeds_each_run():
    order = []

    def make(name):
        return lambda x, seed: order.append((name, x, seed)) or {"tokens": 1, "total_s": 1.0}

    cfgs = [Config("a", make("a"), k=0), Config("b", make("b"), k=1)]
    rows = sweep(cfgs, [Cell({"cell": 0}, "x0"), Cell({"cell": 1}, "x1")], repeats=2, warmup=1,
                 seed=lambda rnd, i: 100 * rnd + i)
    assert [o[:2] for o in order[:4]] == [("a", "x0"), ("b", "x0"), ("a", "x1"), ("b", "x1")]  # warm-up round
    assert [o[2] for o in order[:2]] == [-100, -100] and len(order) == 12 and len(rows) == 8  # warm-up not recorded
    assert [(r["config"], r["cell"], r["repeat"]) for r in rows[:4]] == [("a", 0, 0), ("b", 0, 0), ("a", 1, 0), ("b", 1, 0)]
    shuffled = sweep(cfgs, [Cell({}, None)], repeats=20, shuffle=True, shuffle_seed=3)
    assert {r["position"] for r in shuffled if r["config"] == "a"} == {0, 1}  # both orders occur
    with pytest.raises(ValueError):
        sweep(cfgs, [], repeats=1)


def test_latency_summary_hand_case():
    rows = [{"row": 0, "index": 0, "time_s": 0.5, "latency_s": 0.5}, {"row": 0, "index": 1, "time_s": 0.7, "latency_s": 0.2},
            {"row": 0, "index": 2, "time_s": 0.7, "latency_s": 0.0}, {"row": 0, "index": 3, "time_s": 1.1, "latency_s": 0.4}]
    s = latency_summary(rows, ttft=0.5, total=1.1, tokens=4, first=1)
    assert s["ttft_s"] == 0.5 and s["tokens_per_s"] == pytest.approx(3 / 0.6)   # tokens after the first / (total - ttft)
    assert s["lat_p50_s"] == pytest.approx(0.2) and s["lat_p99_s"] <= 0.4


def test_sweep_keeps_the_named_summary_keys_of_each_timed_run():
    cfgs = [Config("a", lambda x, seed: {"tokens": 1, "total_s": 1.0, "out": [x, seed], "other": 9})]
    rows = sweep(cfgs, [Cell({"cell": 0}, "x0"), Cell({"cell": 1}, "x1")], repeats=2, warmup=1, keep=("out",))
    assert [r["out"] for r in rows] == [["x0", 0], ["x1", 1], ["x0", 1000], ["x1", 1001]]  # its own run's output
    assert all("other" not in r for r in rows)
    assert "out" not in sweep(cfgs, [Cell({"cell": 0}, "x0")], repeats=1)[0]  # nothing kept unless asked
