"""`make bench` on tiny random models: one tidy row per run with its contention record, paired
speedups, and the four comparisons with intervals and targets.  Timings are reported by the
benchmark, never asserted here."""

import torch

from specdec.measure import bench
from specdec.measure.harness import Cell, sweep
from specdec.measure.protocol import paired_speedups, summarize
from specdec.report.results import read_table, write_table


def test_bench_rows_summary_and_comparisons(tiny_pair, tmp_path):
    target, draft = tiny_pair
    prompt = torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(0))  # random ids, no tokenizer
    rows = []
    for T in (0.0, 1.0):
        rows += sweep(bench.configs(target, draft, [1, 3], T, 6), [Cell({"temperature": T, "batch": 1, "prompt": 0},
                                                                          prompt)], repeats=2, shuffle=True,
                      min_share=0.9, max_reruns=1)
        rows += sweep(bench.configs(target, draft, [1, 3], T, 6, spec=False),
                      [Cell({"temperature": T, "batch": 2, "prompt": -1}, prompt.repeat(2, 1))], repeats=2)
    # per temperature: batch 1 ours_ar, hf_ar, ours_spec + hf_assisted per k; batch 2 ours_ar, hf_ar; 2 repeats
    assert len(rows) == 2 * 2 * (2 + 2 * 2 + 2) and len({tuple(r) for r in rows}) == 1
    assert all(r["tokens"] == 6 * r["batch"] for r in rows)  # exact length in both engines, no stop token
    assert all(0 <= r["reruns"] <= 1 and r["cpu_share"] > 0 for r in rows)
    rows = paired_speedups(rows, baseline="ours_ar", keys=("temperature", "batch", "prompt", "repeat"))
    assert all(r["speedup"] == 1.0 for r in rows if r["impl"] == "ours_ar")
    summ = summarize(rows, by=("temperature", "batch", "impl", "k"))
    assert all(r["speedup_lo"] <= r["speedup_median"] <= r["speedup_hi"] for r in summ)
    comp = bench.comparisons(rows, {n: 1.0 + 0.1 * n for n in range(1, 5)}, 0.2)
    kinds = {(r["comparison"], r["batch"], r["k"]) for r in comp}
    assert ("baseline", 1, 0) in kinds and ("baseline", 2, 0) in kinds
    assert {("vs_hf", 1, k) for k in (1, 3)} | {("efficiency", 1, k) for k in (1, 3)} <= kinds
    for r in comp:
        assert r["lo"] <= r["median"] <= r["hi"] and r["runs"] == 2
        if r["comparison"] in ("baseline", "vs_hf"):  # 2 pairs reach no 95% interval of a median: said so
            assert r["verdict"] == r["verdict_sim"] == "too few pairs for this level"
        if r["comparison"] == "overhead":
            assert 0 <= r["lo"] <= r["hi"] <= 1
    path = write_table(comp, tmp_path / "c.csv", {"test": True}, kind="timing")
    back = read_table(path)
    assert len(back) == len(comp) and back["target_met_by_interval"].dtype == bool
