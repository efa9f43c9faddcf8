"""Chapter 06's measurement and summaries (specdec.chapters.ch06.runs / summary / page, and
measure.curves / prediction / draft_choice) on the tiny random-weight pair: the rows' shape, labels and
pairing, seeding that does not depend on run order, hand-worked predictions and summaries, the draft
rule, the page's counts and small tables, and the figures drawn from the tables.  Timings are never
asserted."""

import math

import pandas as pd
import pytest
import torch

from specdec.engine.history import PromptLookupDrafter
from specdec.chapters.ch06 import runs as dr
from specdec.chapters.ch06 import summary as ds
from specdec.chapters.ch06 import baseline, page
from specdec.measure import prediction as pr
from specdec.measure.curves import cost_curves, curve_at
from specdec.measure.draft_choice import best_of, chosen, draft_rule
from specdec.report import plotting

KS, LENS, BATCHES, PROMPT = [1, 2], [10], [1, 2], 8


@pytest.fixture(scope="module")
def measured(tiny_pair):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (4, PROMPT), generator=torch.Generator().manual_seed(3))  # (4, T) random ids
    ctxs = sorted({dr.mid_context(PROMPT, L) for L in LENS})
    curve = cost_curves(target, {"draft": draft}, BATCHES, [1, 2, 3], ctxs, repeats=2,
                        generator=torch.Generator().manual_seed(0), interleaved=True)
    cells = dr.decoding_cells(prompts[:2], [1.0, 0.0], LENS, BATCHES, [1], prompt_len=PROMPT, curve=curve,
                              draft="draft")
    runs = dr.decoding_runs(target, draft, cells, KS, draft_name="draft", warmup_steps=2, k_start=2, repeats=2,
                            warmup=1, seed=5, min_share=0.0)
    return dict(curve=curve, cells=cells, runs=runs, prompts=prompts)


def test_cost_curves_per_batch_and_context(measured):
    curve = measured["curve"]
    ctx = dr.mid_context(PROMPT, LENS[0])
    assert [(r["model"], r["n"], r["batch"], r["context"]) for r in curve] == [
        (m, n, B, ctx) for B in BATCHES for m, n in [
            ("target", 1), ("target", 2), ("target", 3), ("draft", 1), ("draft", 2), ("target after draft", 1),
            ("target after draft", 2), ("target after draft", 3), ("draft after target", 1), ("draft after target", 2)]]
    t, c = curve_at(curve, 2, ctx, "draft")
    d1 = next(r["median_s"] for r in curve if r["model"] == "draft" and r["batch"] == 2 and r["n"] == 1)
    assert set(t) == {1, 2, 3} and c == pytest.approx(d1 / t[1])


def test_cells_and_rows(measured):
    cells, runs = measured["cells"], measured["runs"]
    # the same 2 prompts at every batch size: 2 groups of 1, 1 group of 2; greedy at batch 1 only
    assert [(c.labels["temperature"], c.labels["batch"], c.labels["group"]) for c in cells] == [
        (1.0, 1, 0), (1.0, 1, 1), (1.0, 2, 0), (0.0, 1, 0), (0.0, 1, 1)]
    assert torch.equal(cells[1].inputs["ids"], measured["prompts"][1:2])  # group 1 of batch 1: prompt 1
    assert torch.equal(cells[2].inputs["ids"], measured["prompts"][0:2])  # the one group of batch 2: prompts 0, 1
    with pytest.raises(ValueError, match="do not split into groups of batch 2"):
        dr.decoding_cells(measured["prompts"][:3], [1.0], LENS, BATCHES, [1], prompt_len=PROMPT,
                          curve=measured["curve"], draft="draft")
    configs = ["baseline", "k=1", "k=2", "dynamic"]
    assert len(runs) == len(cells) * len(configs) * 2
    assert all(tuple(r) == dr.RUN_COLUMNS for r in runs)
    first_round = runs[:len(configs)]
    assert sorted(r["config"] for r in first_round) == sorted(configs)  # every configuration once per (round, cell)
    assert [r["position"] for r in first_round] == [0, 1, 2, 3]
    assert any([r["config"] for r in runs[i:i + 4]] != configs for i in range(0, len(runs), 4))  # shuffled
    assert all(r["tokens"] == r["output_len"] * r["batch"] for r in runs)  # no stop token: exactly L per row
    for r in runs:
        assert r["draft"] == ("" if r["config"] == "baseline" else "draft") and r["reruns"] == 0
        if r["config"].startswith("k="):
            assert r["k_chosen"] == r["k"] and 0 <= r["alpha_mle"] <= 1 and r["alpha_steps"] > 0
        elif r["config"] == "baseline":
            assert r["k_chosen"] == 0 and math.isnan(r["alpha_mle"]) and r["step_profile"].startswith("0,")
            assert r["kv_slots"] == PROMPT + r["output_len"] - 1  # the prompt and every token but the last fed
            assert dr.run_context(r, PROMPT) == PROMPT + (r["output_len"] - 1) / 2


def test_runs_are_seeded_by_round_and_cell_not_by_order(tiny_pair, measured):
    """A configuration's tokens depend on its seed (round, cell), not on what ran before it."""
    target, draft = tiny_pair
    cells = measured["cells"][:2]
    alone = dr.decoding_runs(target, draft, cells, [2], draft_name="draft", warmup_steps=2, k_start=2, repeats=2,
                             warmup=0, seed=5, min_share=0.0)
    key = lambda r: (r["config"], r["temperature"], r["batch"], r["group"], r["repeat"])  # noqa: E731
    full = {key(r): r for r in measured["runs"]}
    for r in alone:
        if r["config"] == "k=2":
            f = full[key(r)]
            assert (r["steps"], r["alpha_steps"], r["step_profile"]) == (f["steps"], f["alpha_steps"], f["step_profile"])


def test_draft_runs(tiny_pair, measured):
    target, draft = tiny_pair
    drafts = {"draft": draft, "prompt-lookup": PromptLookupDrafter(64)}
    rows = dr.draft_runs(target, drafts, measured["prompts"], k=2, output_len=6, groups=2, temperature=1.0, repeats=1,
                         seed=0, min_share=0.0)
    assert sorted({r["config"] for r in rows}) == ["baseline", "draft", "prompt-lookup"] and len(rows) == 6
    s = ds.draft_summary(rows, draft_rule({"draft": 0.5}, {"draft": 0.2}, {1: 1.0, 2: 1.1, 3: 1.2}, k_max=2))
    assert [r["draft"] for r in s] == sorted(["draft", "prompt-lookup"], key=[r["config"] for r in rows].index)
    assert all(r["runs"] == 2 and r["speedup_lo"] <= r["speedup"] <= r["speedup_hi"] for r in s)
    assert [r["chosen"] for r in s if r["draft"] == "draft"] == [True]


def test_summaries_predictions_and_figures_of_a_real_run(measured):
    runs = measured["runs"]
    summary = ds.summary_table(runs)
    assert len(summary) == 3 * 4  # (T, L, B) cells x configurations
    for r in summary:
        assert r["runs"] == (4 if r["batch"] == 1 else 2)  # groups x 2 repeats
        if r["config"] == "baseline":
            assert r["speedup"] == 1.0 and r["steady_speedup"] == 1.0
        else:  # 4 (or 2) pairs: no interval for a median reaches 95% (1 - 2/16), so no verdict is given
            assert r["speedup_lo"] <= r["speedup"] <= r["speedup_hi"] and r["pairs_sim"] == 9  # 1 - 2/2^9 >= 1 - .05/9
            assert r["verdict"] == r["verdict_sim"] == "too few pairs for this level"
            assert math.isnan(r["speedup_lo_sim"]) and math.isnan(r["speedup_hi_sim"])
    T = pr.lookup(measured["curve"])
    preds = pr.paired_predictions(runs, T, "draft", keys=ds.PAIR,
                                  context_of=lambda r: dr.run_context(r, PROMPT))
    assert len(preds) == len(runs) * 3 // 4 and all(p["predicted"] > 0 for p in preds)
    ps = ds.prediction_summary(preds)
    assert len(ps) == 3 * 3 and all((p["reason"] == "") == p["within"] for p in ps)
    assert {p["reason"] for p in ps} <= {"", *ds.REASONS}
    h = page.sweep_values(summary)
    # every speculative configuration has 4 or 2 pairs: too few for a 95% interval, none worded undecided
    assert (h["n_spec"], h["n_short"], h["n_faster"], h["n_slower"], h["n_undecided"]) == (9, 9, 0, 0, 0)
    assert (h["pairs_had"], h["pairs_had_max"]) == (2, 4) and h["best_lo"] <= h["best_speedup"] <= h["best_hi"]
    p = page.prediction_values(ps, 0.10)
    assert p["n_pred"] == 9 and p["n_pred_within"] + p["n_miss"] == 9 and p["n_over"] + p["n_under"] == 9
    assert p["n_miss_forwards"] + p["n_miss_spread"] <= p["n_miss"] and p["fwd_min"] <= p["fwd_max"]
    dyn = ds.dynamic_vs_fixed(runs)
    assert len(dyn) == 3 and all(d["best_fixed"] in ("k=1", "k=2") and d["lo"] <= d["dynamic_over_best"] <= d["hi"]
                                 for d in dyn)
    bd = ds.time_breakdown(runs, 1.0, LENS[0], 1)
    assert len(bd) == 4 * len(ds.BREAKDOWN_PARTS)
    v = page.breakdown_values(bd, "k=2")
    assert 0 < v["target_share_kref"] < 1 and 0 <= v["overhead_share_kref"] < 1
    ctx = dr.mid_context(PROMPT, LENS[0])
    cv = page.curve_values(measured["curve"], 1, ctx, 3, "draft")
    assert cv["tk_n"] == 3 and cv["c_b1"] > 0
    after = [{**r, "when": "after", "median_s": 1.1 * r["median_s"]} for r in measured["curve"]]
    assert page.curve_drift(measured["curve"], after)["drift_max"] == pytest.approx(0.1)
    assert math.isnan(page.curve_drift(measured["curve"])["drift_median"])  # nothing after: no drift measured

    from specdec.report.plotting import visible_series

    real_curve = [{"target": "gpt2-small", "n": n, "batch": 1, "median_s": t, "c": 0.05}
                  for n, t in ((1, 1.0), (2, 1.5), (3, 1.8))] + [
        {"target": "gpt2-small", "n": 1, "batch": 4, "median_s": 9.0, "c": 0.05}]  # batch 4: not on the figure
    real_vs_alpha = [{"target": "gpt2-small", "batch": b, "k": 1, "alpha_set": 0.7, "speedup_median": 1.1,
                      "speedup_lo": 1.0, "speedup_hi": 1.2} for b in (1, 4)]
    inputs = pr.regime_inputs(measured["curve"], real_curve, "draft", batch=1, context=ctx)
    assert list(inputs) == ["embedded + draft", "gpt2-small shape + draft-3m"]
    loop = next(r["median_s"] for r in measured["curve"] if r["model"] == "target after draft" and r["n"] == 2
                and r["batch"] == 1)
    assert inputs["embedded + draft"][0][2] == loop and inputs["gpt2-small shape + draft-3m"] == (
        {1: 1.0, 2: 1.5, 3: 1.8}, 0.05)
    regimes = pd.DataFrame(pr.regime_rows(inputs, [0.0, 0.5, 1.0], 2))
    points = pd.DataFrame(pr.regime_points(summary, real_vs_alpha, "draft", batch=1))
    assert len(points) == 2 * 2 + 1  # (T = 1, greedy) x (k=1, k=2) at batch 1, and the real-size point
    figs = [plotting.cost_curve(pd.DataFrame(measured["curve"])), plotting.regimes(regimes, points),
            plotting.speedup_vs_k(pd.DataFrame(summary), pd.DataFrame(ps)),
            plotting.predicted_vs_measured(pd.DataFrame(ps)), plotting.time_breakdown(pd.DataFrame(bd))]
    for fig in figs:
        assert visible_series(fig) and all(seen for _, _, seen in visible_series(fig))


def _run(config, k, *, steps, profile, tokens, t_target, t_draft=0.0, t_step, tps, first=1):
    return dict(temperature=1.0, output_len=tokens, batch=1, group=0, repeat=0, config=config, k=k, steps=steps,
                step_profile=profile, tokens=tokens, first_step_tokens=first, t_target_steady=t_target,
                t_draft_forward_steady=t_draft, t_step_steady=t_step, tokens_per_s=tps)


def test_prediction_hand_worked():
    """T(1) = 10 ms, T(3) = 15 ms, T_d(1) = 2 ms, T_d(2) = 3 ms, measured back to back.  Baseline: 9
    steps after the first, 1 ms overhead each -> 99 ms for 9 tokens.  k=2: 3 steps after the first
    (one after a fully accepted step), 2 ms overhead each: 3 x (15 + 4 + 2) + 1 = 64 ms for 6
    tokens.  Predicted steady speedup (99/9) / (64/6) = 1.03125.  Interleaved, with the target's
    T(3) 18 ms after a draft and the first draft forward 2.5 / 3.5 ms after a target forward:
    3 x (18 + 2.5 + 2 + 2) + 1 = 74.5 ms."""
    curve = [{"model": "target", "n": 1, "batch": 1, "context": 8, "median_s": 0.010},
             {"model": "target", "n": 3, "batch": 1, "context": 8, "median_s": 0.015},
             {"model": "d", "n": 1, "batch": 1, "context": 8, "median_s": 0.002},
             {"model": "d", "n": 2, "batch": 1, "context": 8, "median_s": 0.003}]
    T = pr.lookup(curve + [{"model": "target after d", "n": 3, "batch": 1, "context": 8, "median_s": 0.018},
                           {"model": "d after target", "n": 1, "batch": 1, "context": 8, "median_s": 0.0025},
                           {"model": "d after target", "n": 2, "batch": 1, "context": 8, "median_s": 0.0035}])
    base = _run("baseline", 0, steps=10, profile="0,1,0:9", tokens=10, t_target=0.090, t_step=0.099, tps=9 / 0.099)
    spec = _run("k=2", 2, steps=4, profile="2,1,0:2;2,1,1:1", tokens=7, t_target=0.045, t_draft=0.013,
                t_step=0.064, tps=6 / 0.064)
    assert pr.predicted_steady_s(base, T, "d", context=8) == pytest.approx(0.099)
    assert pr.predicted_steady_s(spec, T, "d", context=8, interleaved=False) == pytest.approx(0.064)
    assert pr.predicted_steady_s(spec, T, "d", context=8) == pytest.approx(0.0745)
    (p,) = pr.paired_predictions([base, spec], T, "d", keys=("group", "repeat"), context_of=lambda r: 8,
                                 interleaved=False)
    assert p["predicted"] == pytest.approx((0.099 / 9) / (0.064 / 6)) and p["measured_over_predicted"] == pytest.approx(1)
    assert p["target_inloop_over_isolated"] == pytest.approx(1.0) and p["tokens_per_step"] == 2.0
    assert p["calibration"] == pytest.approx(1.0) and p["predicted_isolated"] == pytest.approx(p["predicted"])
    # calibration: the baseline's forwards took 12 ms in the loop where the curve says 10 -> s = 1.2;
    # the speculative run is predicted at 3 x (1.2 x 15 + 4 + 2) + 1 = 73 ms, the baseline is its own 117 ms
    slow = {**base, "t_target_steady": 0.108, "t_step_steady": 0.117, "tokens_per_s": 9 / 0.117}
    (p,) = pr.paired_predictions([slow, spec], T, "d", keys=("group", "repeat"), context_of=lambda r: 8,
                                 interleaved=False)
    assert p["calibration"] == pytest.approx(1.2) and p["predicted"] == pytest.approx((0.117 / 9) / (0.073 / 6))
    assert p["predicted_isolated"] == pytest.approx((0.099 / 9) / (0.064 / 6))
    assert p["target_inloop_over_isolated"] == pytest.approx(0.045 / (1.2 * 0.045))
    # re-priced at what the loop paid for its target forwards (45 ms, not 1.2 x 45): 73 - 54 + 45 = 64 ms,
    # which is the run's measured time: the whole miss sits on that one term
    assert p["predicted_inloop"] == pytest.approx((0.117 / 9) / (0.064 / 6))
    assert p["measured"] / p["predicted_inloop"] == pytest.approx(1.0)
    with pytest.raises(KeyError, match="batch 3 outside"):
        T("target", 1, 3, 8)
    with pytest.raises(ValueError, match="not paired"):
        pr.paired_predictions([spec], T, "d", keys=("group", "repeat"), context_of=lambda r: 8)


def test_lookup_interpolates_in_batch_and_context():
    curve = [{"model": "target", "n": 1, "batch": b, "context": 4, "median_s": s} for b, s in ((1, 1.0), (8, 8.0))]
    assert pr.lookup(curve)("target", 1, 4, 4) == pytest.approx(4.0)
    assert pr.lookup(curve)("target", 1, 1, 100) == 1.0  # one measured context: constant in context
    curve = [{"model": "target", "n": 1, "batch": 1, "context": c, "median_s": s} for c, s in ((100, 1.0), (200, 1.5))]
    T = pr.lookup(curve)
    assert T("target", 1, 1, 150) == pytest.approx(1.25) and T("target", 1, 1, 300) == pytest.approx(2.0)  # extended
    assert T("target", 1, 1, 50) == pytest.approx(0.75)
    with pytest.raises(KeyError, match="no cost-curve point"):
        T("target", 2, 1, 100)


def test_step_profile_counts_the_catch_up_steps():
    class S:
        steps = [{"k": 2, "active": 1}, {"k": 2, "active": 1}, {"k": 2, "active": 1}, {"k": 2, "active": 1}]
        accepted = [([0], [2]), ([0], [0]), ([0], [2]), ([0], [1])]
    # steps 1..3 are counted; steps 0 and 2 accepted all drafts, so steps 1 and 3 catch up
    assert pr.step_profile(S) == "2,1,0:1;2,1,1:2"


def test_draft_rule_picks_the_best_predicted_and_refuses_a_partial_candidate_list():
    curve = {1: 1.0, 2: 1.9, 3: 2.5}
    rows = draft_rule({"small": 0.48, "distilled": 0.59}, {"small": 0.13, "distilled": 0.13}, curve, k_max=2)
    assert chosen(rows) == "distilled" and sum(r["chosen"] for r in rows) == 1
    # hand-worked: beta 0.9, c 0.05, k=1: 1.9 / 1.95 < 1 ... k=2: 2.71 / 2.6 = 1.0423 -> k 2
    (r,) = draft_rule({"x": 0.9}, {"x": 0.05}, curve, k_max=2)
    assert r["k_best"] == 2 and r["predicted"] == pytest.approx(2.71 / 2.6)
    (r,) = draft_rule({"x": 0.1}, {"x": 0.05}, curve, k_max=2)
    assert r["k_best"] == 0 and r["predicted"] == 1.0  # speculation does not pay
    with pytest.raises(ValueError, match="missing"):
        draft_rule({"x": 0.5}, {"y": 0.1}, curve, k_max=2)
    # no drafter pays (a slow verification curve): the one that loses least when drafting is chosen, never
    # the cheapest one that cannot help (beta 0) -- the tie at S = 1 broken by cost alone picked that one
    flat = {1: 1.0, 2: 2.0, 3: 3.0}
    rows = draft_rule({"model": 0.59, "lookup": 0.0}, {"model": 0.11, "lookup": 0.02}, flat, k_max=2)
    assert all(r["k_best"] == 0 and r["predicted"] == 1.0 for r in rows)
    assert chosen(rows) == "model"
    assert best_of(rows, ["model", "lookup"]) == "model"  # the comparison that takes one drafter ranks alike
    # a table made before the column ranks by predicted S, ties to the smaller c (what it chose then)
    old_rows = [{k: v for k, v in r.items() if k != "best_speculative"} for r in rows]
    assert best_of(old_rows, ["model", "lookup"]) == "lookup"
    by = {r["draft"]: r for r in rows}  # hand-worked: k = 1: 1.59 / 2.11 for the model, 1 / 2.02 for lookup
    assert by["model"]["best_speculative"] == pytest.approx(1.59 / 2.11)
    assert by["lookup"]["best_speculative"] == pytest.approx(1 / 2.02)


def test_summary_hand_worked():
    """Two pairs: baseline 1.0 and 1.2 s per token (10 tokens), k=1 at 0.5 and 0.5: speedups 2.0 and
    2.4, median 2.2; steady speedups from the rates; Spec-Bench over one repeat has no sd."""
    rows = []
    for g, b in ((0, 10.0), (1, 12.0)):
        base = dict(temperature=1.0, output_len=10, batch=1, group=g, repeat=0, config="baseline", k=0, tokens=10,
                    wall_s=b, first_step_tokens=1, steps=10, tokens_per_s=10 / b, alpha_mle=float("nan"), k_chosen=0,
                    ttft_s=0.1, lat_p50_s=0.1, lat_p95_s=0.1, lat_p99_s=0.1, peak_memory_bytes=2**20, cpu_share=1.0,
                    load_1m=0.5, reruns=0)
        rows += [base, {**base, "config": "k=1", "k": 1, "wall_s": 5.0, "steps": 4, "tokens_per_s": 2 * 10 / 5.0,
                        "alpha_mle": 0.5, "k_chosen": 1, "reruns": 1}]
    base, spec = ds.summary_table(rows)
    assert base["speedup"] == 1.0 and spec["speedup"] == pytest.approx(2.2) and spec["runs"] == 2
    assert spec["steady_speedup"] == pytest.approx(4.4)  # rates 4 / 1.0 and 4 / (10 / 12): median 4.4
    assert spec["tokens_per_step"] == 3.0 and math.isnan(spec["sb_sd"]) and spec["sb_mean"] == pytest.approx(2.2)
    assert spec["reruns"] == 2 and spec["peak_rss_mib"] == 1.0


def test_break_even_and_regimes_hand_worked():
    """Unit verification cost: at k = 1 the break-even alpha equals c (Leviathan et al.'s corollary:
    some k pays exactly when alpha > c, and k = 1 is the first to); a curve where a second token costs
    a whole forward (T(2) = 2 T(1)) never pays at k = 1, since E[L] <= 2 < 2 + c."""
    from specdec.core.cost import best_k, break_even_alpha_best_k

    flat = {1: 1.0, 2: 1.0, 3: 1.0}
    assert break_even_alpha_best_k(0.1, 2, flat) == pytest.approx(0.1, abs=1e-5)
    assert best_k(0.05, 0.1, 2, flat) == (0, 1.0)
    k, s = best_k(0.8, 0.1, 2, flat)
    assert k == 2 and s == pytest.approx((1 + 0.8 + 0.64) / 1.2)
    steep = {1: 1.0, 2: 2.0}
    assert break_even_alpha_best_k(0.1, 1, steep) == float("inf")
    rows = pr.regime_rows({"flat": (flat, 0.1), "steep": (steep, 0.1)}, [0.5, 1.0], 2)
    assert [(r["pair"], r["k_best"]) for r in rows] == [("flat", 2), ("flat", 2), ("steep", 0), ("steep", 0)]
    assert rows[2]["t2_ratio"] == 2.0 and rows[0]["break_even"] == pytest.approx(0.1, abs=1e-5)


def test_long_drafts_counts_what_the_bench_measured_beyond_the_cut():
    """Faster is re-read from each interval (`protocol.level_verdict`): k = 8's interval lies above 1 but
    from one pair, so it is not counted faster."""
    ci = lambda m, n=12: {"speedup_median": m, "speedup_lo": m - 0.04, "speedup_hi": m + 0.04, "runs": n}  # noqa: E731
    rows = [{"impl": "ours_spec", "k": 4, **ci(1.2)}, {"impl": "ours_spec", "k": 5, **ci(0.9)},
            {"impl": "ours_spec", "k": 6, **ci(1.1)}, {"impl": "ours_spec", "k": 8, **ci(1.05, 1)},
            {"impl": "ours_ar", "k": 0, **ci(1.0)}]
    v = baseline.long_drafts(rows, 5)
    assert (v["long_n"], v["long_faster"], v["long_max"], v["long_k_to"], v["long_mode"]) == (3, 1, 1.1, 8, "eager")
    gappy = [{**r, "mode": "eager"} for r in rows if r["k"] not in (5, 6)] + [  # eager skips k = 5..7: lean ran them
        {"mode": "lean", "impl": "ours_spec", "k": k, **ci(1.1 + k / 100)} for k in range(1, 9)]
    v = baseline.long_drafts(gappy, 5)
    assert (v["long_n"], v["long_faster"], v["long_mode"]) == (4, 4, "lean") and v["long_max"] == pytest.approx(1.18)


def test_pairs_needed_follows_the_spread(measured):
    v = page.pairs_needed(measured["runs"])
    assert 2 <= v["pairs_needed_median"] <= v["pairs_needed_max"]


def test_the_pages_tables_and_counts_hand_worked():
    """The draft decision (rule or forced), the dynamic-rule counts, the chosen draft, and the small
    tables the page shows: the drafts fastest first, the configurations below 1 slowest first, one
    row per regime pair."""
    from specdec.measure.draft_choice import decide

    rule = draft_rule({"a": 0.6, "b": 0.5}, {"a": 0.1, "b": 0.1}, {1: 1.0, 2: 1.2, 3: 1.4}, k_max=2)
    assert decide(rule) == ("a", {"rule_draft": "a", "draft_name": "a", "forced": "(the rule's choice)"})
    assert decide(rule, "b")[1]["forced"] == "(forced by DRAFT; the rule chose a)"
    assert decide(rule, "nope")[0] == "a"  # not a candidate: the rule's choice stands
    out = "too few pairs for this level"
    assert page.dynamic_values([{"verdict": "faster"}, {"verdict": "slower"}, {"verdict": out},
                                {"verdict": "undecided"}]) == {
        "dyn_n": 4, "dyn_faster": 1, "dyn_slower": 1, "dyn_undecided": 1, "dyn_short": 1}
    drafts = [{"draft": "x", "speedup": 1.1, "speedup_lo": 1.0, "speedup_hi": 1.2, "verdict": "undecided",
               "chosen": False, "rule_predicted": 1.0, "beta": 0.5, "c": 0.1},
              {"draft": "a", "speedup": 0.9, "speedup_lo": 0.8, "speedup_hi": 0.95, "verdict": "slower",
               "chosen": True, "rule_predicted": 1.2, "beta": 0.6, "c": 0.1}]
    v = page.draft_values(drafts, rule)
    # a's best k: 1.6 / 1.3 = 1.231 at k = 1 against 1.96 / 1.6 = 1.225 at k = 2
    assert (v["rule_predicted"], v["rule_k"], v["chosen_speedup"], v["chosen_verdict"]) == (1.2, 1, 0.9, "slower")
    t = page.draft_table(drafts)
    assert t["draft"].tolist() == ["x", "a"] and t[page.INTERVAL].tolist() == ["[1.000, 1.200]", "[0.800, 0.950]"]
    assert t.shape[1] <= 7
    base = {"temperature": 0.0, "output_len": 32, "batch": 1, "speedup_lo": 0.8, "speedup_hi": 1.1,
            "verdict": "undecided"}
    summ = pd.DataFrame([{**base, "config": "baseline", "speedup": 1.0}, {**base, "config": "k=1", "speedup": 1.05},
                         {**base, "config": "k=2", "speedup": 0.97}, {**base, "config": "k=4", "speedup": 0.9}])
    low = page.unfavourable(summ)
    assert low["config"].tolist() == ["k=4", "k=2"] and low["temperature"].tolist() == ["greedy", "greedy"]
    assert low.shape[1] <= 7
    regimes = pr.regime_rows({"flat": ({1: 1.0, 2: 1.0}, 0.1), "steep": ({1: 1.0, 2: 2.0}, 0.1)}, [0.5, 1.0], 1)
    r = page.regime_table(regimes)
    assert r["pair"].tolist() == ["flat", "steep"] and r.iloc[:, 4].tolist() == ["0.100", "none"]
    assert r["$T(2)/T(1)$"].tolist() == ["1.000", "2.000"]  # fixed decimals: "1.000", never "1"
    assert r["costs timed"].tolist() == ["cost curve", "cost curve"]


def test_tokens_per_step_is_per_row_at_every_batch():
    """One definition at every batch size: a batch of 8 emitting 8 x 40 tokens after its first step
    over 20 later steps gives 2.0 tokens per step (per row, at most k + 1), not the batch's 16."""
    run = dict(tokens=8 * 40 + 8, first_step_tokens=8, steps=21, batch=8)
    assert ds.per_row_tokens_per_step(run) == 2.0
    assert ds.per_row_tokens_per_step({**run, "batch": 1}) == 16.0


def test_the_pilot_prices_history_drafters_in_the_loop_and_writes_them_as_curve_rows(tiny_pair, measured):
    from specdec.chapters.ch06 import pilot

    target, _ = tiny_pair
    lookup = PromptLookupDrafter(64)
    rows = pilot.pilot_runs(target, {"prompt-lookup": lookup}, {1: measured["prompts"][:1], 2: measured["prompts"][:2]},
                            k=2, tokens=6, repeats=2, seed=0)
    assert [(r["drafter"], r["batch"], r["repeat"]) for r in rows] == [
        ("prompt-lookup", B, rep) for rep in range(2) for B in (1, 2)]
    for r in rows:  # at most k = 2 per row per step (fewer where the token budget ends)
        assert 0 < r["drafted"] <= 2 * 6 * r["batch"] and r["s_per_drafted"] == pytest.approx(r["t_draft_s"] / r["drafted"])
    prices = pilot.pilot_prices(rows)
    curve = measured["curve"]
    extra = pilot.curve_rows(rows, curve)
    targets = [r for r in curve if r["model"] == "target"]
    for B in BATCHES:
        mine = [r for r in extra if r["model"] == "prompt-lookup" and r["batch"] == B]
        assert {r["n"] for r in mine} == {1, 2} and all(r["median_s"] == prices[("prompt-lookup", B)][0] for r in mine)
    assert [r["median_s"] for r in extra if r["model"] == "target after prompt-lookup"] == [r["median_s"] for r in targets]
    T = pr.lookup(pd.concat([pd.DataFrame(curve), pd.DataFrame(extra)]))
    assert T("prompt-lookup after target", 1, 2, 9) == prices[("prompt-lookup", 2)][0]
    t, c = curve_at(pd.concat([pd.DataFrame(curve), pd.DataFrame(extra)]), 1, targets[0]["context"], "prompt-lookup")
    assert c == pytest.approx(prices[("prompt-lookup", 1)][0] / t[1])
    with pytest.raises(ValueError, match="has no batch 2"):
        pilot.curve_rows([r for r in rows if r["batch"] == 1], curve)
    with pytest.raises(ValueError, match="k >= 1"):
        pilot.pilot_runs(target, {"prompt-lookup": lookup}, {1: measured["prompts"][:1]}, k=0, tokens=6, repeats=1, seed=0)


def test_the_rule_can_choose_a_history_drafter_and_names_the_best_model_beside_it():
    from specdec.measure.draft_choice import best_of

    curve = {1: 1.0, 2: 1.1, 3: 1.2}
    rows = draft_rule({"model": 0.6, "ngram": 0.5}, {"model": 0.3, "ngram": 0.01}, curve, k_max=2)
    assert chosen(rows) == "ngram" and best_of(rows, ["model"]) == "model"
    control = draft_rule({"model": 0.6, "ngram": 0.5}, {"model": 0.01, "ngram": 0.01}, curve, k_max=2)
    assert chosen(control) == "model"  # at equal cost the better acceptance wins
    with pytest.raises(ValueError, match="none of"):
        best_of(rows, ["absent"])


def _pred_row(measured, predicted, inloop, fwd):
    return dict(temperature=1.0, output_len=32, batch=1, group=0, repeat=0, config="k=2", k=2, measured=measured,
                predicted=predicted, predicted_isolated=predicted, predicted_inloop=inloop, calibration=1.0,
                target_inloop_over_isolated=fwd, context_ratio=1.0, tokens_per_step=2.0, overhead_share=0.1)


def test_a_miss_is_explained_only_when_its_measured_term_closes_it():
    # measured 1.2x the prediction; verification forwards 0.8x the curve in the loop
    closed = [_pred_row(1.2 + 0.01 * i, 1.0, 1.2 + 0.01 * i, 0.8) for i in range(6)]  # re-priced: exact
    (r,) = ds.prediction_summary(closed)
    assert not r["within"] and r["explained"] and r["ratio_inloop"] == pytest.approx(1.0)
    assert r["reason"] == "verification forwards"
    # control: the same miss, but re-pricing the target leaves it outside (the draft's forwards miss too)
    open_ = [_pred_row(1.2 + 0.01 * i, 1.0, 1.0, 0.8) for i in range(6)]
    (r,) = ds.prediction_summary(open_)
    assert not r["within"] and not r["explained"] and r["reason"] == "verification forwards"
    # a miss whose verification forwards cost what the curve says is not the forwards' doing: even where the
    # reconstruction happens to land within the tolerance, it is not counted as explained by that term
    other = [_pred_row(1.2 + 0.01 * i, 1.0, 1.07, 0.97) for i in range(6)]
    (r,) = ds.prediction_summary(other)
    assert not r["within"] and not r["explained"] and r["reason"] == "unexplained"
    # rows made before the column: no re-pricing, and nothing claimed explained beyond the tolerance
    old = [{k: v for k, v in row.items() if k != "predicted_inloop"} for row in closed]
    (r,) = ds.prediction_summary(old)
    assert math.isnan(r["ratio_inloop"]) and not r["explained"] and r["reason"] == "verification forwards"
    # the page counts the misses by reason and those the in-loop term closes, never for a table without it
    both = ds.prediction_summary(closed) + ds.prediction_summary([{**x, "config": "k=4"} for x in open_])
    v = page.prediction_values(both, 0.10)
    assert (v["n_miss"], v["n_miss_forwards"], v["n_miss_spread"], v["n_closed"]) == (2, 2, 0, 1)
    row = page.miss_table(both, 0.10).iloc[0]  # the page's table of the same counts, one row
    assert (row["misses"], row["on the forwards"], row["on the spread"], row["closed re-priced"]) == (2, 2, 0, 1)
    assert {r["reason"] for r in both} == {"verification forwards"}
    assert page.prediction_values(ds.prediction_summary(old), 0.10)["n_closed"] == 0


def _bench_run(config, prompt, repeat, wall_s, batch=1, temperature=1.0):
    return {"config": config, "prompt": prompt, "repeat": repeat, "batch": batch, "temperature": temperature,
            "tokens": 64, "wall_s": wall_s, "impl": config.split()[0], "mode": "eager"}


def test_hf_comparison_from_the_bench_runs():
    # HF's plain generate 1.0 s, its assisted generation 0.8 s, ours lean 0.5 s, eager 0.7 s per run;
    # rows of another k, batch or temperature must not enter the pairs
    times = {"hf_ar": 1.0, "hf_assisted k=2": 0.8, "ours_ar lean": 0.5, "ours_ar": 0.7}
    rows = [_bench_run(c, p, r, t * (1 + 0.01 * p)) for c, t in times.items() for p in range(3) for r in range(2)]
    rows += [_bench_run("hf_assisted k=4", 0, 0, 0.1), _bench_run("hf_ar", 0, 0, 9.0, batch=8),
             _bench_run("ours_ar lean", 0, 0, 9.0, temperature=0.0)]
    h = ds.hf_summary(baseline.hf_runs(pd.DataFrame(rows), k=2))
    assert [r["comparison"] for r in h] == ["HF assisted k=2 over HF generate", "ours plain (lean) over HF generate",
                                            "ours plain (lean) over ours plain (eager)"]
    assert [r["median"] for r in h] == pytest.approx([1.0 / 0.8, 1.0 / 0.5, 0.7 / 0.5])
    assert all(r["pairs"] == 6 and r["lo"] <= r["median"] <= r["hi"] for r in h)
    shown = page.hf_table(h)
    assert list(shown.columns) == ["comparison", "ratio", page.INTERVAL, "verdict", "pairs"]
    assert shown[page.INTERVAL].tolist() == [f"[{r['lo']:.3f}, {r['hi']:.3f}]" for r in h]
    # each comparison pairs named configurations: one missing is an error, not a silent other pairing
    with pytest.raises(ValueError, match="HF assisted"):
        ds.hf_summary(baseline.hf_runs(pd.DataFrame(rows), k=3))
    with pytest.raises(ValueError, match="ours plain"):
        ds.hf_summary(baseline.hf_runs(pd.DataFrame([r for r in rows if r["config"] != "ours_ar"]), k=2))


def test_the_committed_bench_holds_chapter_06s_hf_comparison():
    # chapter 06 renders its Hugging Face comparison from `make bench`'s committed runs at its K_REF
    from specdec.io.paths import RESULTS_DIR
    from specdec.io.results import read_tables

    import json

    from specdec.io.paths import ROOT

    nb = json.loads((ROOT / "notebooks" / "06_measured_decoding.ipynb").read_text())
    P: dict = {}
    exec("".join(nb["cells"][1]["source"]), P)  # the parameters cell: assignments only
    runs = read_tables(RESULTS_DIR / "bench", ["bench_runs"])["bench_runs"]
    params = runs.attrs["meta"]["provenance"]["parameters"]
    h = ds.hf_summary(baseline.hf_runs(runs, k=P["K_REF"]))
    assert all(r["pairs"] == params["prompts"] * params["repeats"] for r in h)
