"""The controlled-acceptance surface (specdec.measure.surface, `make surface`) on tiny shapes: one row
per (target, batch, alpha, k, round), each speedup against its own round's baseline, the
predictions from the measured curve of its batch size and the one fixed before the runs from the
pilot's in-loop prices and the run's seeded steps, curve-only shapes, and the figure's table with
intervals.  Timings are never asserted."""

import math

import pytest
import torch

from specdec.core.cost import speedup
from specdec.family.architectures import build_model, param_count, real_size_config
from specdec.chapters.ch06 import page
from specdec.measure import surface as rs
from specdec.report import plotting

TINY_T = dict(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=128)
TINY_D = dict(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=128)


@pytest.fixture(scope="module")
def out():
    return rs.controlled_runs(["gpt2-small"], "draft-3m", [0.5, 1.0], [1, 2], new_tokens=6, context=8,
                              n_values=[1, 2, 3], curve_repeats=2, repeats=2, temperature=1.0, batches=[1, 2],
                              curve_only=["gpt2-medium"], generator=torch.Generator().manual_seed(1),
                              target_sizes=TINY_T, draft_sizes=TINY_D)


def test_rows_pairs_and_predictions(out):
    ctrl, curve = out["controlled"], out["cost_curve"]
    # decoded: 1 target x 2 batches x 2 alphas x 2 ks x 2 rounds; curves: small at 2 batches, medium at 1
    assert len(ctrl) == 2 * 2 * 2 * 2 and len(curve) == 3 * 3
    assert sorted({(r["target"], r["batch"]) for r in curve}) == [("gpt2-medium", 1), ("gpt2-small", 1),
                                                                  ("gpt2-small", 2)]
    assert {r["target"] for r in ctrl} == {"gpt2-small"}
    expected = param_count(build_model(real_size_config("gpt2-small", **TINY_T), generator=torch.Generator()))
    assert all(r["params"] == expected for r in curve if r["target"] == "gpt2-small")
    assert out["draft_params"] == param_count(build_model(real_size_config("draft-3m", **TINY_D),
                                                          generator=torch.Generator()))
    for r in ctrl:
        t = {c["n"]: c["median_s"] for c in curve if c["target"] == r["target"] and c["batch"] == r["batch"]}
        assert r["speedup"] == pytest.approx(r["tokens_per_s"] / r["baseline_tokens_per_s"])
        assert r["verify_cost"] == pytest.approx(t[r["k"] + 1] / t[1])
        assert r["predicted_ext"] == pytest.approx(speedup(r["alpha_set"], r["k"], r["c"],
                                                           verify_cost=r["verify_cost"]))
        assert r["predicted_toy"] == pytest.approx(speedup(r["alpha_set"], r["k"], r["c"]))
        assert r["predicted_steps"] == pytest.approx(r["tokens_per_step"] / r["baseline_tokens_per_step"]
                                                     / (r["verify_cost"] + r["k"] * r["c"]))
        assert r["baseline_tokens_per_step"] == r["batch"]  # plain decoding: one token per row per step
        if r["alpha_set"] == 1.0:  # every draft accepted: k + 1 tokens per row per step, as E[L] says
            assert r["tokens_per_step"] == r["batch"] * (r["k"] + 1)
            assert r["predicted_steps"] == pytest.approx(r["predicted_ext"])
        # in-loop pricing: the same steps-based formula with the forward terms the loop paid, all measured
        assert r["verify_inloop"] > 0 and r["c_inloop"] > 0
        assert r["predicted_inloop"] == pytest.approx(r["tokens_per_step"] / r["baseline_tokens_per_step"]
                                                      / (r["verify_inloop"] + r["k"] * r["c_inloop"]))
        # the pilot's prediction, fixed before the sweep: the run's own steps (known from its seed) priced
        # by the pilot's in-loop terms of its (batch, k), the same for every alpha and round
        assert r["steps_as_predicted"] is True
        # and the engine's own work per step, the run's and the baseline's, in units of the baseline's T(1)
        assert r["predicted_pilot"] == pytest.approx(r["tokens_per_step"] / r["baseline_tokens_per_step"]
                                                     * (1 + r["host_base_pilot"])
                                                     / (r["verify_pilot"] + r["k"] * r["c_pilot"] + r["host_pilot"]))
        prices = ("verify_pilot", "c_pilot", "host_pilot", "host_base_pilot")
        assert {tuple(x[p] for p in prices) for x in ctrl if (x["batch"], x["k"]) == (r["batch"], r["k"])} \
            == {tuple(r[p] for p in prices)} and r["verify_pilot"] > 0 and r["c_pilot"] > 0
        assert r["host_pilot"] > 0 and r["host_base_pilot"] > 0, "a step always does some work outside its forwards"
    for B in (1, 2):  # one baseline per (batch, round)
        same = {r["baseline_tokens_per_s"] for r in ctrl if r["batch"] == B and r["repeat"] == 0}
        assert len(same) == 1


def test_figure_table_values_and_figure(out):
    import pandas as pd

    from specdec.report.plotting import visible_series

    table = rs.speedup_vs_alpha(out["controlled"])
    assert len(table) == 2 * 2 * 2  # batches x ks x alphas
    assert [(r["batch"], r["k"], r["alpha_set"]) for r in table[:4]] == [(1, 1, 0.5), (1, 1, 1.0), (1, 2, 0.5),
                                                                         (1, 2, 1.0)]
    r = next(r for r in table if r["batch"] == 2 and r["k"] == 2 and r["alpha_set"] == 1.0)
    rr = sorted(x["speedup"] for x in out["controlled"] if x["batch"] == 2 and x["k"] == 2 and x["alpha_set"] == 1.0)
    assert r["speedup_median"] == pytest.approx(sum(rr) / 2) and r["runs"] == 2
    assert r["speedup_lo"] <= r["speedup_median"] <= r["speedup_hi"]
    h = page.surface_values(pd.DataFrame(out["cost_curve"]), pd.DataFrame(out["controlled"]), pd.DataFrame(table),
                            out["draft_params"], 3)
    assert h["real_points"] == 8 and h["real_target_size"] == page.size_label(out["cost_curve"][0]["params"])
    assert h["real_faster"] + h["real_slower"] <= 8 and h["real_best_lo"] <= h["real_best"] <= h["real_best_hi"]
    best = max(table, key=lambda r: r["speedup_median"])
    assert (h["real_best_alpha"], h["real_best_k"], h["real_best_batch"]) == (best["alpha_set"], best["k"],
                                                                              best["batch"])
    assert h["real_ratio_med"] == pytest.approx(float(pd.Series([r["speedup_median"] / r["predicted_ext"]
                                                                 for r in table]).median()))
    assert math.isfinite(h["real_toy_med"]) and 0 <= h["real_within"] <= 8
    assert math.isfinite(h["real_steps_med"]) and 0 <= h["real_steps_within"] <= 8
    assert h["real_half_width"] >= 0
    # a surface made before the in-loop pricing still has its table: that column is NaN, not invented
    old = pd.DataFrame(out["controlled"]).drop(columns=["predicted_inloop"])
    assert all(math.isnan(r["predicted_inloop"]) for r in rs.speedup_vs_alpha(old))
    fig = plotting.real_size_speedup_vs_alpha(pd.DataFrame(table))
    assert all(seen for _, _, seen in visible_series(fig))


def test_size_label():
    assert page.size_label(124_439_808) == "124M" and page.size_label(354_823_168) == "355M"
    assert page.size_label(3_290_000) == "3.3M"


def test_make_surface_writes_the_tables_chapter_06_reads(tmp_path):
    from specdec.cli import surface as cli

    assert cli.main(["--smoke", "--out", str(tmp_path)]) == 0
    with pytest.raises(ValueError, match="--smoke run"):
        page.surface_tables(tmp_path)  # the chapter never renders a smoke surface
    t = page.surface_tables(tmp_path, allow_smoke=True)
    assert t["params"]["smoke"] is True and t["params"]["ks"] == cli.SMOKE["ks"] and t["draft_params"] > 0
    assert len(t["speedup_vs_alpha"]) == len(cli.SMOKE["batches"]) * len(cli.SMOKE["ks"]) * len(cli.SMOKE["alphas"])
    assert set(t["cost_curve"]["target"]) == {"gpt2-small", "gpt2-medium"}  # the curve-only shape too
    h = page.surface_values(t["cost_curve"], t["controlled"], t["speedup_vs_alpha"], t["draft_params"], 2)
    assert h["real_points"] == len(t["speedup_vs_alpha"])
