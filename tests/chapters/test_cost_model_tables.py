"""specdec.chapters.ch03.cost_model: the article's worked example, the three-way check of E[L] and Var(L)
(with negative controls), the corollary check (with negative controls), and the grids' shapes."""

import numpy as np
import pytest

from specdec.core.cost import expected_tokens, speedup, toy_speedup
from specdec.chapters.ch03 import cost_model


def test_worked_example_is_the_articles():
    ex = cost_model.worked_example(0.8, 0.2, 4, 0.1, 32)
    assert ex["el_example"] == pytest.approx(3.3616) and ex["cost_example"] == pytest.approx(1.4)
    assert ex["s_example"] == pytest.approx(2.401, abs=5e-4) and ex["s_low"] == pytest.approx(0.893, abs=5e-4)
    assert ex["kopt_example"] == 6 and ex["be_example"] == pytest.approx(0.2871, abs=1e-4)
    assert ex["var_example"] == pytest.approx(8.1472 - 2.3616**2) and ex["sd_example"] == pytest.approx(1.6031, abs=1e-4)


def test_expected_tokens_check_agrees_three_ways_and_catches_a_wrong_law():
    rows = cost_model.expected_tokens_check([0.2, 0.8], 4, 20_000, np.random.default_rng(0))
    for r in rows:
        assert abs(r["closed_form"] - r["from_law"]) < 1e-12
        assert abs(r["simulated"] - r["closed_form"]) < 4.5 * r["sim_std_error"]  # 4.5 se: p ~ 7e-6 per row
    wrong = [r["closed_form"] + 0.1 for r in rows]  # a law off by 0.1 tokens is > 4.5 se away at this size
    assert all(abs(r["simulated"] - w) > 4.5 * r["sim_std_error"] for r, w in zip(rows, wrong))


def test_variance_check_agrees_three_ways_and_catches_a_wrong_variance():
    rows = cost_model.expected_tokens_check([0.2, 0.8], 4, 20_000, np.random.default_rng(0))
    for r in rows:
        assert abs(r["var_closed_form"] - r["var_from_law"]) < 1e-12
        assert abs(r["var_simulated"] - r["var_closed_form"]) < 4.5 * r["var_sim_std_error"]
    # negative control: a binomial count k alpha (1 - alpha) ignores that drafting stops at the first rejection
    for r in rows:
        binomial = r["k"] * r["alpha"] * (1 - r["alpha"])
        assert abs(r["var_simulated"] - binomial) > 4.5 * r["var_sim_std_error"]


def test_sample_variance_standard_error_from_the_fourth_moment():
    s2, se = cost_model.sample_variance_se(np.array([0.0, 0.0, 1.0, 1.0]))
    # s^2 = 1/3; m4 = 1/16; Var(s^2) = (1/16 - (1/9)(1/3)) / 4
    assert s2 == pytest.approx(1 / 3) and se == pytest.approx(np.sqrt((1 / 16 - 1 / 27) / 4))
    # the stated SE matches the spread of s^2 over repeated samples (Bernoulli(0.3), n = 400)
    rng = np.random.default_rng(1)
    draws = [cost_model.sample_variance_se((rng.random(400) < 0.3).astype(float)) for _ in range(2000)]
    spread = np.std([d[0] for d in draws])
    assert np.mean([d[1] for d in draws]) == pytest.approx(spread, rel=0.1)


def test_corollary_holds_on_the_grid_with_exact_ties():
    alphas = np.linspace(0, 1, 201)
    rows = cost_model.corollary_check(alphas, [0.01, 0.1, 0.5, 1.5], 16)
    for r in rows:
        assert r["n_disagree"] == 0 and r["n_alphas"] == 201
        assert r["n_speedup"] == r["n_above_c"]
        assert abs(r["break_even_gap"]) < 1e-9 or r["c"] > 1
    assert [r["n_ties"] for r in rows] == [1, 1, 1, 0]          # alpha = c lies on the grid for c <= 1
    assert [r["n_above_c"] for r in rows] == [198, 180, 100, 0]  # alpha = c itself does not pay
    assert rows[-1]["k1_break_even"] == np.inf                  # a draft dearer than the target never pays


def test_the_optimal_k_table_speculates_where_the_corollary_says():
    import pandas as pd

    alphas = np.linspace(0, 1, 201)
    cs = [0.05, 0.1, 0.5]
    kgrid = pd.DataFrame(cost_model.optimal_k_grid(alphas, cs, 16))
    assert cost_model.speedups_per_cost(kgrid, cs) == [r["n_speedup"] for r in cost_model.corollary_check(alphas, cs, 16)]
    assert cost_model.speedups_per_cost(kgrid, cs) == [190, 180, 100]
    # negative control: a table that speculates at one more alpha is counted differently
    wrong = kgrid.assign(optimal_k=kgrid["optimal_k"].where(kgrid.index != 0, 1))
    assert cost_model.speedups_per_cost(wrong, cs)[0] == 191


def test_corollary_check_flags_wrong_speed_functions():
    alphas = np.linspace(0, 1, 201)
    dear_verify = lambda a, k, c: speedup(a, k, c, verify_cost=1.1)  # threshold moves above c
    half_cost = lambda a, k, c: toy_speedup(a, k, c / 2)             # threshold shifted to c / 2
    no_bonus = lambda a, k, c: (expected_tokens(a, k) - 1 + a) / (1 + k * c)  # one token short on rejection
    for wrong in (dear_verify, half_cost, no_bonus):
        assert sum(r["n_disagree"] for r in cost_model.corollary_check(alphas, [0.1, 0.2], 16, speed=wrong)) > 0


def test_grids_cover_every_cell():
    alphas = np.linspace(0, 1, 5)
    assert len(cost_model.speed_ratio_grid(alphas, [1, 4], 0.1)) == 10
    kg = cost_model.optimal_k_grid(alphas, [0.1, 0.5], 8)
    assert len(kg) == 10 and kg[0]["optimal_k"] == 0 and kg[4]["optimal_k"] == 8  # alpha 0: none; alpha 1, c 0.1: all
    be = cost_model.break_even_grid(3, [0.1])
    assert [r["k"] for r in be] == [1, 2, 3] and be[0]["break_even_alpha"] == pytest.approx(0.1)  # k = 1: alpha = c
