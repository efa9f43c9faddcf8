"""`make bench` on tiny random models: one tidy row per run, summaries per (T, k, impl),
tables written with provenance.  Timings are reported by the benchmark, never asserted here."""

import pytest
import torch

from specdec.measure import bench
from specdec.measure.harness import Cell, sweep
from specdec.report.results import read_table, write_table


def _gpt2(seed, n_layer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)  # model construction only, in the test
    return GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_embd=32, n_head=2, vocab_size=64, n_positions=64,
                                      bos_token_id=0, eos_token_id=0)).eval()


def test_bench_rows_and_summary(tmp_path):
    target, draft = _gpt2(0, 2), _gpt2(1, 1)
    prompt = torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(0))  # random ids, no tokenizer
    rows = []
    for temperature in (0.0, 1.0):
        rows += sweep(bench.configs(target, draft, [1, 3], temperature, 6),
                      [Cell({"temperature": temperature, "prompt": 0}, prompt)], repeats=1)
    rows = bench.speedups(rows)
    # per temperature: ours_ar, hf_ar, and ours_spec + hf_assisted for each k
    assert len(rows) == 2 * (2 + 2 * 2)
    assert len({tuple(r) for r in rows}) == 1
    assert all(r["tokens"] == 6 for r in rows)  # exact length in both engines, no stop token
    assert all(r["speedup"] == 1.0 for r in rows if r["impl"] == "ours_ar")
    summ = bench.summarize(rows)
    assert {(r["temperature"], r["k"], r["impl"]) for r in summ} == {
        (t, k, i) for t in (0.0, 1.0) for k, i in [(0, "ours_ar"), (0, "hf_ar"), (1, "ours_spec"),
                                                    (1, "hf_assisted"), (3, "ours_spec"), (3, "hf_assisted")]}
    for r in summ:
        assert r["speedup_q25"] <= r["speedup_median"] <= r["speedup_q75"]
        if r["impl"] == "ours_spec":
            assert 0 <= r["overhead_share_median"] <= 1
    path = write_table(summ, tmp_path / "summary.csv", {"test": True}, kind="timing")
    back = read_table(path)
    assert len(back) == len(summ) and back.attrs["meta"]["provenance"] == {"test": True}
    assert back["k"].dtype == "int64" and back["speedup_median"].dtype == "float64"
