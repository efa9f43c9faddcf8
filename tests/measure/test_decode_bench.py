"""`make bench` on tiny random models: one tidy row per run with its contention record, paired
speedups, and the four comparisons with intervals and targets.  Timings are reported by the
benchmark, never asserted here."""

import pytest
import torch

from specdec.cli import bench
from specdec.measure.harness import Cell, sweep
from specdec.measure.protocol import paired_speedups, summarize
from specdec.io.results import read_table, write_table


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


PAIR_KEYS = ("mode", "temperature", "batch", "prompt", "repeat")  # how `make bench` pairs its runs


def _run(mode, impl, k, prompt, repeat, wall, T=0.0, batch=1):
    """A synthetic bench row: wall seconds for 10 tokens over 5 steps (the first feeding 2)."""
    return {"mode": mode, "impl": impl, "k": k, "temperature": T, "batch": batch, "prompt": prompt, "repeat": repeat,
            "wall_s": wall, "tokens": 10, "tokens_per_s": 10 / wall, "steps": 5, "first_step_tokens": 2,
            "t_target_steady": 0.5 * wall, "t_draft_forward_steady": 0.1 * wall, "overhead_share": 0.05}


def test_bench_compares_each_mode_with_its_own_kind_and_counts_what_compiling_gains():
    """Hand-made timings: compiled runs take 0.8 of eager ones, HF compiled 1.1 of ours compiled,
    HF eager 1.2 of ours eager.  compile_gain is eager / compiled of ours (1.25), baseline and
    vs_hf pair each engine with the other in the same mode, isolated_forwards is eager only, and the
    chapter's tables read each mode apart (an old table without a mode column reads as eager)."""
    import pandas as pd

    from specdec.chapters.ch06 import baseline

    rows = []
    for p in range(4):
        for rep in range(6):
            w = 1.0 + 0.01 * (p + rep)
            for k, f in ((0, 1.0), (2, 0.7)):
                ours = "ours_ar" if k == 0 else "ours_spec"
                hf = "hf_ar" if k == 0 else "hf_assisted"
                rows += [_run("eager", ours, k, p, rep, w * f), _run("eager", hf, k, p, rep, 1.2 * w * f),
                         _run("compiled", ours, k, p, rep, 0.8 * w * f), _run("compiled", hf, k, p, rep, 0.88 * w * f)]
    comp = bench.comparisons(rows, {1: 1.0, 2: 1.1, 3: 1.2}, 0.1)
    got = {(r["comparison"], r["mode"], r["k"]): r for r in comp}
    assert got["compile_gain", "compiled", 0]["median"] == pytest.approx(1.25)
    assert got["compile_gain", "compiled", 2]["median"] == pytest.approx(1.25)
    assert got["compile_gain", "compiled", 0]["verdict"] == "faster"
    assert got["baseline", "eager", 0]["median"] == pytest.approx(1.2)
    assert got["baseline", "compiled", 0]["median"] == pytest.approx(1.1)
    assert got["vs_hf", "compiled", 2]["median"] == pytest.approx(1.1)
    assert ("isolated_forwards", "eager", 2) in got and ("isolated_forwards", "compiled", 2) not in got
    assert ("efficiency", "compiled", 2) in got
    assert got["vs_hf_compiled_ar", "eager", 0]["median"] == pytest.approx(0.88)  # HF compiled plain / ours eager
    assert got["vs_hf_compiled_ar", "compiled", 0]["median"] == pytest.approx(1.1)
    assert got["vs_hf_compiled_ar", "eager", 2]["median"] == pytest.approx(0.88 / 0.7)
    fast = baseline.vs_fastest(pd.DataFrame(comp), "compiled")  # ours compiled over HF compiled plain generate
    assert fast["ratio"].tolist() == pytest.approx([1.1]) and fast["verdict"].tolist() == ["faster"]
    assert baseline.vs_fastest(pd.DataFrame(comp), "eager")["verdict"].tolist() == ["slower"]  # 0.88
    v = baseline.baseline_values(pd.DataFrame(comp), "compiled")
    assert (v["bench_batch"], v["fast_b1"], v["fast_bn"]) == (1, "faster", "faster")
    summ = summarize(paired_speedups(rows, baseline="ours_ar", keys=PAIR_KEYS), by=PAIR_KEYS[:3] + ("impl", "k"))
    modes = baseline.modes_table(pd.DataFrame(comp), pd.DataFrame(summ))
    assert modes["mode"].tolist() == ["eager", "compiled"] and modes.shape[1] <= 7  # no lean runs: no lean row
    assert modes["plain over HF"].tolist() == pytest.approx([1.2, 1.1])
    assert modes["best speculative"].tolist() == pytest.approx([1 / 0.7, 1 / 0.7])
    old = pd.DataFrame([r for r in comp if r["mode"] == "eager"]).drop(columns="mode")
    assert baseline.vs_fastest(old, "eager")["ratio"].tolist() == pytest.approx([0.88])
    assert baseline.vs_fastest(old, "compiled").empty  # an eager-only bench has no compiled baseline to quote
    with pytest.raises(ValueError, match="mode"):
        bench.configs(None, None, [1], 0.0, 4, mode="graph")
    assert [c.labels["mode"] for c in bench.configs(None, None, [1], 0.0, 4, mode="compiled")] == ["compiled"] * 4


def test_bench_lean_mode_is_ours_only_and_pairs_with_hugging_faces_eager_runs():
    """Hand-made timings: ours lean takes 0.7 of ours eager, HF eager 1.2 of ours eager.  The lean
    mode has no HF configuration of its own; its baseline and vs_hf pair it with HF's eager runs of the
    same (prompt, repeat) -- also at a k that ours eager did not run (3) -- and lean_gain (ours eager /
    ours lean) exists only where both ran."""
    rows = []
    for p in range(4):
        for rep in range(6):
            w = 1.0 + 0.01 * (p + rep)
            for k, f in ((0, 1.0), (2, 0.8), (3, 0.75)):
                ours = "ours_ar" if k == 0 else "ours_spec"
                hf = "hf_ar" if k == 0 else "hf_assisted"
                rows += [_run("eager", hf, k, p, rep, 1.2 * w * f), _run("lean", ours, k, p, rep, 0.7 * w * f)]
                if k != 3:
                    rows.append(_run("eager", ours, k, p, rep, w * f))
    got = {(r["comparison"], r["mode"], r["k"]): r for r in bench.comparisons(rows, {1: 1.0, 3: 1.2, 4: 1.3}, 0.1)}
    assert got["baseline", "lean", 0]["median"] == pytest.approx(1.2 / 0.7)
    assert got["vs_hf", "lean", 3]["median"] == pytest.approx(1.2 / 0.7) and ("vs_hf", "eager", 3) not in got
    assert got["lean_gain", "lean", 2]["median"] == pytest.approx(1 / 0.7) and ("lean_gain", "lean", 3) not in got
    assert ("efficiency", "lean", 3) in got and ("isolated_forwards", "lean", 3) not in got
    assert not any(name == "compile_gain" for name, _, _ in got)
    import pandas as pd

    from specdec.chapters.ch06 import baseline

    comp = pd.DataFrame(list(bench.comparisons(rows, {1: 1.0, 3: 1.2, 4: 1.3}, 0.1)))
    summ = summarize(paired_speedups(rows, baseline="ours_ar", keys=PAIR_KEYS), by=PAIR_KEYS[:3] + ("impl", "k"))
    modes = baseline.modes_table(comp, pd.DataFrame(summ))
    assert modes["mode"].tolist() == ["eager", "lean"]
    assert modes["plain over HF"].tolist() == pytest.approx([1.2, 1.2 / 0.7])  # lean against HF's eager runs
    assert modes["best speculative"].tolist() == pytest.approx([1 / 0.8, 1 / 0.75])  # lean also ran k = 3
    lean_cfgs = bench.configs(None, None, [1, 2], 0.0, 4, mode="lean")
    assert [c.labels["impl"] for c in lean_cfgs] == ["ours_ar", "ours_spec", "ours_spec"]
    eager = bench.configs(None, None, [2], 0.0, 4, hf_ks=[1, 2, 3])
    assert [(c.labels["impl"], c.labels["k"]) for c in eager] == [
        ("ours_ar", 0), ("hf_ar", 0), ("hf_assisted", 1), ("ours_spec", 2), ("hf_assisted", 2), ("hf_assisted", 3)]


def test_bench_per_step_comparison_removes_the_acceptance_luck():
    """vs_hf_per_step divides each engine's time by its own steps: HF 1.1x as long per run but over 6
    steps where ours took 5 is 1.1 per token and 1.1 x 5/6 per step; absent when HF's rows carry no
    step count (tables from before it was counted)."""
    rows = []
    for p in range(4):
        for rep in range(6):
            w = 1.0 + 0.01 * (p + rep)
            rows += [_run("eager", "ours_ar", 0, p, rep, w), _run("eager", "hf_ar", 0, p, rep, w),
                     _run("eager", "ours_spec", 2, p, rep, 0.7 * w),
                     {**_run("eager", "hf_assisted", 2, p, rep, 0.77 * w), "steps": 6}]
    got = {(r["comparison"], r["k"]): r for r in bench.comparisons(rows, {1: 1.0, 3: 1.2}, 0.1)}
    assert got["vs_hf", 2]["median"] == pytest.approx(1.1)
    assert got["vs_hf_per_step", 2]["median"] == pytest.approx(1.1 * 5 / 6)
    assert got["vs_hf_per_step", 2]["target"] == ">= 1.1" and not got["vs_hf_per_step", 2]["target_met_by_median"]
    older = [{**r, "steps": float("nan")} if r["impl"] == "hf_assisted" else r for r in rows]
    assert not any(r["comparison"] == "vs_hf_per_step" for r in bench.comparisons(older, {1: 1.0, 3: 1.2}, 0.1))


def test_bench_families_set_the_simultaneous_intervals():
    """Each kind of comparison is one family (per mode for baseline and vs_hf): its simultaneous
    interval is the order-statistic interval at the Bonferroni level of that family's size, checked
    against `protocol.comparison` on the same pairs; the sizes differ between families."""
    from specdec.measure.protocol import comparison

    rows = []
    for p in range(4):
        for rep in range(6):
            jitter = lambda i: 1 + (((6 * p + rep) * 37 + 11 * i) % 97) / 970  # noqa: E731  (pairs that differ)
            for k in (0, 1, 2, 3, 4):
                ours, hf = ("ours_ar", "hf_ar") if k == 0 else ("ours_spec", "hf_assisted")
                for j, (mode, f) in enumerate((("eager", 1.0), ("compiled", 0.8))):
                    rows += [_run(mode, ours, k, p, rep, f * jitter(k + 5 * j)),
                             _run(mode, hf, k, p, rep, 1.1 * f * jitter(k + 5 * j + 1))]
    curve = {n: 0.9 + 0.1 * n for n in range(1, 6)}
    comp = {(r["comparison"], r["mode"], r["k"]): r for r in bench.comparisons(rows, curve, 0.1)}
    per = {(r["mode"], r["impl"], r["k"], r["prompt"], r["repeat"]): r["wall_s"] / 10 for r in rows}
    keys = [(p, rep) for p in range(4) for rep in range(6)]

    def check(name, mode, k, theirs, mine, m):
        want = comparison([per[(*theirs, *u)] for u in keys], [per[(*mine, *u)] for u in keys], family_size=m)
        row = comp[name, mode, k]
        assert (row["lo_sim"], row["hi_sim"]) == (want["lo_sim"], want["hi_sim"]), (name, mode, k)
        other = comparison([per[(*theirs, *u)] for u in keys], [per[(*mine, *u)] for u in keys],
                           family_size=1 if m > 1 else 5)  # the likely bug: the family forgotten
        assert (other["lo_sim"], other["hi_sim"]) != (want["lo_sim"], want["hi_sim"]), "the size must matter here"

    check("baseline", "eager", 0, ("eager", "hf_ar", 0), ("eager", "ours_ar", 0), 1)  # batch 1 only: 1 per mode
    check("vs_hf", "compiled", 2, ("compiled", "hf_assisted", 2), ("compiled", "ours_spec", 2), 4)  # k = 1..4
    check("compile_gain", "compiled", 1, ("eager", "ours_spec", 1), ("compiled", "ours_spec", 1), 5)  # plain, k = 1..4
    check("vs_hf_compiled_ar", "eager", 2, ("compiled", "hf_ar", 0), ("eager", "ours_spec", 2), 10)  # 2 modes x 5


def test_the_chapter_rewords_each_bench_interval_by_the_protocol():
    """The bench table's own words ("no difference detected at this precision") are not the page's:
    chapter 06 re-reads each interval with `protocol.level_verdict`, so an interval across 1 reads
    "undecided", one from a single pair "one run: no interval", and greedy batch 1 and the largest
    batch are told apart."""
    import pandas as pd

    from specdec.chapters.ch06 import baseline

    row = {"comparison": "vs_hf_compiled_ar", "mode": "lean", "temperature": 0.0, "batch": 1, "k": 0, "median": 1.04,
           "lo": 1.03, "hi": 1.05, "runs": 24, "verdict": "faster"}
    wide = {**row, "batch": 8, "median": 0.95, "lo": 0.89, "hi": 1.08, "runs": 3,
            "verdict": "no difference detected at this precision"}
    single = {**row, "temperature": 1.0, "batch": 8, "lo": float("nan"), "hi": float("nan"), "runs": 1}
    t = baseline.vs_fastest(pd.DataFrame([wide, row, single]), "lean")
    assert list(zip(t["temperature"], t["batch"], t["verdict"])) == [
        ("greedy", 1, "faster"), ("1", 8, "one run: no interval"), ("greedy", 8, "too few pairs for this level")]
    v = baseline.baseline_values(pd.DataFrame([row, {**wide, "runs": 12}]), "lean")
    assert (v["bench_batch"], v["fast_b1"], v["fast_bn"]) == (8, "faster", "undecided")
