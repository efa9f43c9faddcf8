"""Chapter 08's joined table and headline, and its figures, on small synthetic tables."""

import math

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from specdec.report import plotting
from specdec.chapters.ch08 import words as algorithms


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
    prec = pd.DataFrame({"path": ["float32 engine", "bf16 softmax"], "tv_same_precision": [1e-8, 2e-3],
                         "detect_same_precision": [10 ** 16, 10 ** 6]})
    return exact, freq, real, prec, speed, quality


def test_algorithm_table_joins_one_row_per_algorithm(tables):
    t = algorithms.algorithm_table(*tables, 1.0).set_index("algorithm")
    assert list(t.index) == ["token", "match", "typical", "token verification, float32 engine",
                             "token verification, bf16 softmax"]
    assert t.loc["token verification, bf16 softmax", "family"] == "precision"
    assert t.loc["token verification, bf16 softmax", "detect_N"] == 10 ** 6
    assert t.loc["typical", "detect_N"] == 90 and t.loc["token", "detect_N"] == 0
    assert t.loc["typical", "detect_N_real"] == 9000 and t.loc["typical", "tv_real"] == 0.05
    assert t.loc["typical", "speedup_median"] == 1.4 and t.loc["token", "speedup_median"] == 1.1  # not the 0.7 row
    assert math.isnan(t.loc["match", "nll_diff"])  # not measured for quality: NaN, not a made-up 0


def test_speed_headline(tables):
    h = algorithms.speed_headline(tables[4], 1.0)
    assert h["best_alg"] == "typical" and h["best_speed"] == 1.4 and h["tok_lo"] == 1.05
    assert h["n_faster"] == 2 and h["n_speed"] == 3  # the 0.7 row is another temperature


def test_figures_draw_every_series(tables):
    exact = tables[0].assign(gain=[1.0, 0.75, 1.25], tv_shown=[1e-12, 1e-12, 0.3])
    md = pd.DataFrame({"pair": ["a"] * 3, "drafts": [1, 2, 3], "rrs": [0.5, 0.6, 0.7], "optimal": [0.5, 0.7, 0.8]})
    prec = pd.DataFrame({"path": ["x", "y"], "tv_exact": [1e-16, 1e-3], "tv_same_precision": [1e-16, 1e-4]})
    acc = pd.DataFrame({"temperature": [1.0] * 2, "algorithm": ["token"] * 2, "position": [1, 2],
                        "conditional": [0.8, 0.7], "conditional_lo_prompts": [0.7, 0.6], "conditional_hi_prompts": [0.9, 0.8]})
    for fig in (plotting.tv_against_gain(exact, 1e-12), plotting.multidraft_acceptance(md),
                plotting.precision_tv(prec, 1e-12), plotting.measured_alternatives(tables[4], acc)):
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


def test_measured_words_refuse_colliding_keys(tables):
    t = algorithms.algorithm_table(*tables, 1.0)
    t.loc[t["algorithm"] == "match", "algorithm"] = "typical ε=0.2 δ=0.45"
    with pytest.raises(ValueError, match="share the words key"):
        algorithms.measured_words(t)


def test_frequency_words():
    freq = pd.DataFrame({"algorithm": ["token", "match", "typ", "typ", "big"],
                         "family": ["lossless", "lossless", "approximate", "approximate", "approximate"],
                         "run": ["design", "design", "design", "detect", "detect (not run: N too large)"],
                         "samples": [100, 100, 100, 40, 10 ** 9], "verdict": ["passes", "caught", "caught", "caught", "not run"],
                         "detect_samples": [0, 0, 40, 40, 10 ** 9]})
    w = algorithms.frequency_words(freq)
    assert w == {"design_n": 100, "lossless_pass": "1 of 2", "lossy_caught": "1 of 2", "max_detect": 10 ** 9}  # never run: not caught


def test_quality_calibration_counts_lossless_intervals_that_exclude_zero():
    q = pd.DataFrame({"algorithm": ["autoregressive", "token", "block", "typical"], "lossless": [True, True, True, False],
                      "nll_diff": [0, 0.1, 0.2, -1], "nll_diff_lo": [0, -0.1, 0.05, -1.2], "nll_diff_hi": [0, 0.3, 0.4, -0.8],
                      "distinct_2_diff": [0, 0, 0, -0.1], "distinct_2_diff_lo": [0, -0.1, -0.1, -0.2],
                      "distinct_2_diff_hi": [0, 0.1, 0.1, -0.05]})
    assert algorithms.quality_calibration(q) == {"lossless_false": "1 of 4"}  # block's NLL interval; typical not counted


def test_measured_words_refuse_an_algorithm_of_an_undeclared_kind(tables):
    t = algorithms.algorithm_table(*tables, 1.0)
    t.loc[t["algorithm"] == "match", "algorithm"] = "mystery rule"
    with pytest.raises(ValueError, match="WORDS_KEYS"):
        algorithms.measured_words(t)
