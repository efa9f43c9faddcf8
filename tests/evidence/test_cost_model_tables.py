"""specdec.evidence.cost_model: the article's worked example, the three-way check of E[L] (with a
negative control), and the grids' shapes."""

import numpy as np
import pytest

from specdec.evidence import cost_model


def test_worked_example_is_the_articles():
    ex = cost_model.worked_example(0.8, 0.2, 4, 0.1, 32)
    assert ex["el_example"] == pytest.approx(3.3616) and ex["cost_example"] == pytest.approx(1.4)
    assert ex["s_example"] == pytest.approx(2.401, abs=5e-4) and ex["s_low"] == pytest.approx(0.893, abs=5e-4)
    assert ex["kopt_example"] == 6 and ex["be_example"] == pytest.approx(0.2871, abs=1e-4)


def test_expected_tokens_check_agrees_three_ways_and_catches_a_wrong_law():
    rows = cost_model.expected_tokens_check([0.2, 0.8], 4, 20_000, np.random.default_rng(0))
    for r in rows:
        assert abs(r["closed_form"] - r["from_law"]) < 1e-12
        assert abs(r["simulated"] - r["closed_form"]) < 4.5 * r["sim_std_error"]  # 4.5 se: p ~ 7e-6 per row
    wrong = [r["closed_form"] + 0.1 for r in rows]  # a law off by 0.1 tokens is > 4.5 se away at this size
    assert all(abs(r["simulated"] - w) > 4.5 * r["sim_std_error"] for r, w in zip(rows, wrong))


def test_grids_cover_every_cell():
    alphas = np.linspace(0, 1, 5)
    assert len(cost_model.speed_ratio_grid(alphas, [1, 4], 0.1)) == 10
    kg = cost_model.optimal_k_grid(alphas, [0.1, 0.5], 8)
    assert len(kg) == 10 and kg[0]["optimal_k"] == 0 and kg[4]["optimal_k"] == 8  # alpha 0: none; alpha 1, c 0.1: all
    be = cost_model.break_even_grid(3, [0.1])
    assert [r["k"] for r in be] == [1, 2, 3] and be[0]["break_even_alpha"] == pytest.approx(0.1)  # k = 1: alpha = c
