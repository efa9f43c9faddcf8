"""The pooled analysis over runs in fresh processes (specdec.measure.replication) and chapter 06's page
of it (specdec.chapters.ch06.replication): a planted run-level shift is carried into the interval and
recovered by the between-run component, the controls without one are not, and the runs pooled are
exactly those with the same sweep."""

import math

import numpy as np
import pytest

from specdec.chapters.ch06 import replication as rep
from specdec.io.results import provenance, write_table
from specdec.measure import replication as pool
from specdec.measure.replication import between_run, hierarchical_interval


def _units(run_shifts, prompts=8, rounds=3, noise=0.01, seed=0, prompt_sd=0.05):
    """Ratios exp(prompt effect + run shift + noise) on a crossed design: every run, the same prompts."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, prompt_sd, prompts)
    return [{"run": f"r{i}", "prompt": p, "ratio": float(np.exp(0.1 + effect[p] + s + rng.normal(0, noise)))}
            for i, s in enumerate(run_shifts) for p in range(prompts) for _ in range(rounds)]


def test_a_run_level_shift_widens_the_pooled_interval_and_is_recovered():
    shifted = _units([-0.05, 0.0, 0.05])
    steady = _units([0.0, 0.0, 0.0])
    hs, h0 = hierarchical_interval(shifted, level=0.95, seed=0), hierarchical_interval(steady, level=0.95, seed=0)
    assert hs["runs"] == 3 and hs["prompts"] == 8 and hs["pairs"] == 72
    assert (hs["hi"] - hs["lo"]) > 2 * (h0["hi"] - h0["lo"])  # the shift is in the interval
    assert hs["lo"] <= hs["median"] <= hs["hi"] and len(hs["run_medians"]) == 3
    assert hs["run_medians"][0] < hs["run_medians"][1] < hs["run_medians"][2]
    b, b0 = between_run(shifted), between_run(steady)
    assert b["sd_run"] == pytest.approx(0.05, rel=0.2) and b["share"] > 0.3
    assert b0["sd_run"] < 0.01 and b0["share"] < 0.1  # the control: no shift planted, none found


def test_the_simultaneous_level_gives_a_wider_interval_and_bad_units_are_refused():
    u = _units([-0.02, 0.0, 0.02])
    a, b = hierarchical_interval(u, level=0.95, seed=1), hierarchical_interval(u, level=0.9875, seed=1)
    assert b["lo"] <= a["lo"] and b["hi"] >= a["hi"] and (b["hi"] - b["lo"]) > (a["hi"] - a["lo"])
    with pytest.raises(ValueError, match="finite and positive"):
        hierarchical_interval(u + [{"run": "r0", "prompt": 0, "ratio": float("nan")}], level=0.95, seed=0)
    with pytest.raises(ValueError, match="no units"):
        hierarchical_interval([], level=0.95, seed=0)
    with pytest.raises(ValueError, match="level"):
        hierarchical_interval(u, level=1.0, seed=0)
    assert np.isnan(between_run(_units([0.0]))["sd_run"])  # one run: no between-run component


def _runs(shift: float, draft: str = "d") -> list[dict]:
    """A chapter-06 runs table: 2 prompts x 2 rounds, baseline and k=2 at one cell (k=2 1.2x, shifted)."""
    rows = []
    for g in range(2):
        for r in range(2):
            for config, rate in (("baseline", 100.0), ("k=2", 120.0 * np.exp(shift))):
                rows.append({"temperature": 1.0, "output_len": 128, "batch": 1, "group": g, "repeat": r,
                             "config": config, "k": 0 if config == "baseline" else 2, "draft": "" if config ==
                             "baseline" else draft, "tokens": 128, "wall_s": 128 / rate, "tokens_per_s": rate})
    return rows


def _write(folder, rows, params):
    write_table(rows, folder / "runs.csv", {**provenance(), "parameters": params, "models_sha256": {"m": "1"}},
                kind="timing")


def test_chapter_06_pools_only_runs_of_the_same_sweep(tmp_path):
    params = {k: 1 for k in pool.SWEEP_PARAMETERS}
    committed, reruns = tmp_path / "committed", tmp_path / "reruns"
    for d in (committed, reruns / "run_a", reruns / "run_b", reruns / "run_c", reruns / "old"):
        d.mkdir(parents=True)
    _write(committed, _runs(0.0), params)
    _write(reruns / "run_a", _runs(0.02), params)
    _write(reruns / "run_b", _runs(0.0), {**params, "KS": [1, 2, 3]})   # another sweep
    _write(reruns / "run_c", _runs(0.0, draft="other"), params)         # another draft
    runs, left = pool.pooled_runs(committed, reruns)
    assert sorted(runs) == ["committed", "run_a"]
    # make replicate computes a run inside the re-runs folder: that folder is not also one of its re-runs
    assert sorted(pool.pooled_runs(reruns / "run_a", reruns)[0]) == ["committed"]
    assert dict(left) == {"old": "no runs table", "run_b": "another sweep", "run_c": "another draft"}
    table = pool.pooled_table(runs, [[2, 1.0, 128, 1]])
    (row,) = table
    assert row["role"] == "primary" and row["runs"] == 2 and row["pairs"] == 8 and row["speedup"] > 1.19
    assert row["lo_sim"] <= row["lo"] and row["verdict_sim"] == "faster" and row["level_sim"] == pytest.approx(0.95)
    v = rep.primary_values(table, left)
    assert (v["pooled_runs"], v["left_out_n"], v["primary_faster"], v["n_primary"]) == (2, 3, 1, 1)
    assert v["pooled_free_level"] == 0.5 and v["between_sd_max"] == row["between_sd_run"]
    one = rep.primary_values([{**row, "runs": 1, "between_sd_run": float("nan")}], left)
    assert math.isnan(one["between_sd_max"]) and one["pooled_free_level"] == 0.0  # one run: no run component
    # a primary setting with no between-run estimate (NaN) listed first does not hide the others'
    mixed = rep.primary_values([{**row, "between_sd_run": float("nan")}, {**row, "between_sd_run": 0.04}], left)
    assert mixed["between_sd_max"] == 0.04
    summary = [{"temperature": 1.0, "output_len": 128, "batch": 1, "config": "k=2", "speedup": 1.2, "speedup_lo": 1.1,
                "speedup_hi": 1.3, "verdict": "faster"}]
    shown = rep.primary_shown(table, summary)
    assert shown.shape == (1, 7) and shown["pooled verdict"].tolist() == ["faster"]
    assert shown["setting"].tolist() == ["k=2, batch 1, 128 tokens, temperature 1"]
    assert shown["95% interval"].tolist() == ["[1.100, 1.300]"] and shown["this run"].tolist() == ["1.200"]
    with pytest.raises(ValueError, match="not among the runs"):
        pool.pooled_table(runs, [[4, 1.0, 128, 1]])
    with pytest.raises(ValueError, match="distinct primary"):
        pool.pooled_table(runs, [[2, 1.0, 128, 1], [2, 1.0, 128, 1]])
    assert pool.setting(["dynamic", 0, 32, 8]) == (0.0, 32, 8, "dynamic")


def _run_folder(d, ref, words, within, fwd, explained=None):
    """A run's own tables as `runs_record` reads them: summary (the reference and one more primary
    setting), prediction (4 configurations, ``within`` of them inside) and run.json."""
    d.mkdir(parents=True)
    meta = {**provenance(), "parameters": {}, "models_sha256": {"m": "1"}}
    summ = [{"temperature": 1.0, "output_len": 128, "batch": b, "config": "k=2", "speedup": m, "speedup_lo": a,
             "speedup_hi": z, "verdict": w} for b, (a, m, z), w in ((1, ref, words[0]), (8, (1.1, 1.2, 1.3), words[1]))]
    write_table(summ, d / "summary.csv", meta, kind="timing")
    pred = [{"within": i < within, "forward_vs_curve": f,
             **({} if explained is None else {"explained": i < explained})} for i, f in enumerate(fwd)]
    write_table(pred, d / "prediction.csv", meta, kind="timing")
    (d / "run.json").write_text('{"wall_s": 600}')


def test_each_run_on_its_own_says_whether_the_headline_reproduced(tmp_path):
    primary = [[2, 1.0, 128, 1], [2, 1.0, 128, 8]]
    _run_folder(tmp_path / "a", (0.95, 1.0, 1.05), ["undecided", "faster"], 3, [0.9, 1.0, 1.1, 1.2], explained=4)
    _run_folder(tmp_path / "b", (1.00, 1.03, 1.08), ["undecided", "undecided"], 2,
                [0.8, 1.0, 1.0, 1.0])  # a run made before the in-loop re-pricing: its explained count is n/a
    _run_folder(tmp_path / "c", (1.10, 1.12, 1.15), ["undecided", "faster"], 4, [1.0, 1.0, 1.0, 1.0])
    rec = rep.runs_record({"a": tmp_path / "a", "b": tmp_path / "b"}, ref=primary[0], primary=primary)
    assert [(r["pred_within"], r["pred_n"]) for r in rec] == [(3, 4), (2, 4)]
    assert rec[0]["fwd_min"] == 0.9 and rec[0]["fwd_max"] == 1.2 and rec[0]["wall_min"] == 10
    v = rep.record_values(rec)
    assert v == {"record_n": 2, "ref_overlap": "overlap", "primary_agree": 1, "pred_within_min": 2,
                 "pred_within_max": 3}
    # the control: a run whose reference interval lies apart from the others' is caught
    far = rep.record_values(rep.runs_record({"a": tmp_path / "a", "c": tmp_path / "c"}, ref=primary[0],
                                            primary=primary))
    assert far["ref_overlap"] == "disjoint" and far["primary_agree"] == 2
    shown = rep.record_shown(rec)
    assert list(shown.columns) == list(rep.RECORD_COLUMNS) and shown["forward"].tolist() == ["0.90-1.20", "0.80-1.00"]
    assert shown["within"].tolist() == ["3 of 4 (+1)", "2 of 4 (n/a)"]
    # a run still being computed (make replicate's own folder) has no run.json yet: n/a
    (tmp_path / "b" / "run.json").unlink()
    running = rep.runs_record({"a": tmp_path / "a", "b": tmp_path / "b"}, ref=primary[0], primary=primary)
    assert running[1]["wall_min"] != running[1]["wall_min"] and rep.record_shown(running)["wall_min"].tolist() == [
        "10.0", "n/a"]


def test_a_rerun_is_named_on_the_page_by_its_start_time_not_its_folder():
    # the rendered-page check refuses folder ids ("run_..."): a make replicate folder reads as its UTC start
    assert pool.run_label("run_20261204T050250Z") == "re-run of 2026-12-04 05:02 UTC"
    assert pool.run_label("committed") == "committed" and pool.run_label("earlier_engine") == "earlier_engine"
    assert pool.run_label("run_F") == "run_F"  # not a make replicate name: left as it is (the page check catches it)


def test_the_level_runs_carry_without_assumptions():
    """[min, max] of R independent runs covers their distribution's median with probability
    1 - 2 (1/2)^R whatever the distribution: 87.5% at R = 4, below the 98.75% a pooled bootstrap
    interval over 4 runs is quoted at.  Checked by simulation on a skewed law (seeded, 20,000
    trials: the standard error of a coverage near 0.875 is 0.0023)."""
    from specdec.measure.replication import free_level

    assert free_level(4) == 0.875 and free_level(1) == 0.0 and free_level(2) == 0.5
    rng = np.random.default_rng(0)
    draws = rng.lognormal(0.0, 1.0, size=(20_000, 4))  # median exactly 1
    covered = ((draws.min(axis=1) <= 1.0) & (draws.max(axis=1) >= 1.0)).mean()
    assert abs(covered - free_level(4)) < 0.01
    for bad in (0, 2.5, True, "4"):
        with pytest.raises(ValueError, match="runs"):
            free_level(bad)
