"""Chapter 08's joined table and headline, and its figures, on small synthetic tables."""

import math

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from specdec.report import algorithms, plotting


@pytest.fixture
def tables():
    exact = pd.DataFrame({"algorithm": ["token", "match", "typical"], "family": ["lossless", "lossless", "approximate"],
                          "tv": [0.0, 0.0, 0.3], "kl": [0.0, 0.0, 0.2], "expected_tokens": [2.0, 1.5, 2.5]})
    freq = pd.DataFrame({"algorithm": ["token", "match", "typical", "typical"], "detect_samples": [0, 0, 90, 90]})
    speed = pd.DataFrame({"temperature": [1.0, 1.0, 1.0, 0.7], "algorithm": ["token", "match", "typical", "token"],
                          "speedup_median": [1.1, 0.8, 1.4, 1.0], "speedup_lo": [1.05, 0.7, 1.3, 0.9],
                          "speedup_hi": [1.2, 0.9, 1.5, 1.1], "verdict": ["faster", "slower", "faster", "undecided"]})
    quality = pd.DataFrame({"temperature": [1.0, 1.0], "algorithm": ["token", "typical"], "nll_diff": [0.0, 0.3],
                            "nll_diff_lo": [-0.1, 0.1], "nll_diff_hi": [0.1, 0.5]})
    real = pd.DataFrame({"algorithm": ["token", "typical"], "tv_median": [0.0, 0.05], "accept_first": [0.6, 0.5],
                         "detect_N": [0, 9000]})
    return exact, freq, real, speed, quality


def test_algorithm_table_joins_one_row_per_algorithm(tables):
    t = algorithms.algorithm_table(*tables, 1.0).set_index("algorithm")
    assert list(t.index) == ["token", "match", "typical"]
    assert t.loc["typical", "detect_N"] == 90 and t.loc["token", "detect_N"] == 0
    assert t.loc["typical", "detect_N_real"] == 9000 and t.loc["typical", "tv_real"] == 0.05
    assert t.loc["typical", "speedup_median"] == 1.4 and t.loc["token", "speedup_median"] == 1.1  # not the 0.7 row
    assert math.isnan(t.loc["match", "nll_diff"])  # not measured for quality: NaN, not a made-up 0


def test_speed_headline(tables):
    h = algorithms.speed_headline(tables[3], 1.0)
    assert h["best_alg"] == "typical" and h["best_speed"] == 1.4 and h["tok_lo"] == 1.05
    assert h["n_faster"] == 2 and h["n_speed"] == 4


def test_figures_draw_every_series(tables):
    exact = tables[0].assign(gain=[1.0, 0.75, 1.25], tv_shown=[1e-12, 1e-12, 0.3])
    md = pd.DataFrame({"pair": ["a"] * 3, "drafts": [1, 2, 3], "rrs": [0.5, 0.6, 0.7], "optimal": [0.5, 0.7, 0.8]})
    prec = pd.DataFrame({"path": ["x", "y"], "tv_exact": [1e-16, 1e-3], "tv_same_precision": [1e-16, 1e-4]})
    acc = pd.DataFrame({"temperature": [1.0] * 2, "algorithm": ["token"] * 2, "position": [1, 2],
                        "conditional": [0.8, 0.7], "conditional_lo_prompts": [0.7, 0.6], "conditional_hi_prompts": [0.9, 0.8]})
    for fig in (plotting.tv_against_gain(exact, 1e-12), plotting.multidraft_acceptance(md),
                plotting.precision_tv(prec, 1e-12), plotting.measured_alternatives(tables[3], acc)):
        vis = plotting.visible_series(fig)
        assert vis and all(v for _, _, v in vis)


def test_measured_words(tables):
    w = algorithms.measured_words(algorithms.algorithm_table(*tables, 1.0))
    assert w["words_typical"] == "1.400 [1.300, 1.500], faster; NLL +0.300 [+0.100, +0.500]"
    assert w["words_match"] == "0.800 [0.700, 0.900], slower"  # no quality row: no NLL words
    assert set(w) == {"words_token", "words_match", "words_typical"}


def test_lossy_range(tables):
    real = tables[2].assign(family=["lossless", "approximate"])
    assert algorithms.lossy_range(real) == {"real_min_tv": 0.05, "real_max_tv": 0.05, "real_min_n": 9000, "real_max_n": 9000}
