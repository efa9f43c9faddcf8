"""Chapter 08's page tables (specdec.chapters.ch08.tables) on small hand-made tables: the verdict of
each row under its stated rule, with a planted disagreement that must be reported; the rows a page
shows; the counts and values the prose glues; and the chapter's figures drawn from the same tables."""

import math

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import pytest

from specdec.chapters.ch08 import tables
from specdec.report import plotting

ALGS = ["token", "match", "typical ε=0.09 δ=0.3", "typical ε=0.2 δ=0.45", "top-1 membership", "top-2 membership"]
FAMILY = ["lossless", "lossless", "approximate", "approximate", "approximate", "approximate"]


@pytest.fixture
def main():
    return pd.DataFrame({"algorithm": ALGS, "family": FAMILY, "max_abs_error": [1e-16, 2e-16, 0.3, 0.2, 0.1, 0.2],
                         "tv": [1e-16, 2e-16, 0.5, 0.4, 0.2, 0.3], "expected_tokens": [2.0, 1.5, 2.6, 2.2, 1.6, 1.9]})


@pytest.fixture
def freq():
    return pd.DataFrame({"algorithm": ["token", "match", "typical ε=0.09 δ=0.3", "typical ε=0.09 δ=0.3",
                                       "typical ε=0.2 δ=0.45", "top-1 membership", "top-1 membership", "top-2 membership"],
                         "family": ["lossless"] * 2 + ["approximate"] * 6,
                         "run": ["design", "design", "design", "detect", "design", "design",
                                 "detect (not run: N too large)", "design"],
                         "samples": [100, 100, 100, 40, 100, 100, 10 ** 9, 100],
                         "verdict": ["passes", "passes", "caught", "caught", "caught", "passes", "not run", "caught"],
                         "detect_samples": [0, 0, 40, 40, 60, 10 ** 9, 10 ** 9, 90]})


@pytest.fixture
def real():
    return pd.DataFrame({"algorithm": ["token", "match", "typical ε=0.09 δ=0.3", "top-2 membership", "multi-draft n=4"],
                         "family": ["lossless", "lossless", "approximate", "approximate", "lossless"],
                         "cells": [50] * 5, "tv_median": [0.0, 0.0, 0.3, 0.05, 0.0],
                         "accept_first": [0.6, 0.1, 0.5, 0.2, 0.8], "detect_N": [0, 0, 900, 20000, 0]})


def test_law_table_gives_each_row_its_verdicts(main, freq, real):
    t = tables.law_table(main, freq, real).set_index("algorithm")
    assert list(t.index) == ALGS
    assert list(t["law"]) == ["exact", "exact", "approximate", "approximate", "approximate", "approximate"]
    assert t.loc["token", "test"] == "passes" and t.loc["typical ε=0.09 δ=0.3", "test"] == "caught"
    assert t.loc["typical ε=0.09 δ=0.3", "detect_N"] == 40 and t.loc["token", "detect_N"] == 0
    assert t.loc["typical ε=0.09 δ=0.3", "tv_real"] == 0.3 and t.loc["match", "accept_real"] == 0.1
    assert math.isnan(t.loc["top-1 membership", "tv_real"])  # not computed on the real pair: blank, not a made-up 0


def test_a_disagreement_between_the_law_and_its_test_is_reported(main, freq, real):
    """top-1 passed its design run and its detecting run could not be run: an approximate law the
    test did not catch is not an agreement, and neither is a lossless claim with a large error."""
    t = tables.law_table(main, freq, real).set_index("algorithm")
    assert t.loc["top-1 membership", "test"] == "passes" and not t.loc["top-1 membership", "agrees"]
    assert t["agrees"].sum() == 5
    wrong = tables.law_table(main.assign(max_abs_error=[1e-16, 0.01, 0.3, 0.2, 0.1, 0.2]), freq, real)
    assert wrong.set_index("algorithm").loc["match", "law"] == "approximate"
    assert tables.exact_values(wrong)["n_agree"] == 4


def test_a_test_verdict_reads_mixed_when_its_runs_disagree(main, freq, real):
    mixed = freq.assign(verdict=["passes", "passes", "caught", "passes", "caught", "passes", "not run", "caught"])
    assert tables.law_table(main, mixed, real).set_index("algorithm").loc["typical ε=0.09 δ=0.3", "test"] == "mixed"


def test_the_page_keeps_lossless_rows_and_one_setting_per_approximate_kind(main, freq, real):
    t = tables.law_table(main, freq, real)
    shown = tables.on_page(t, ["token", "top-2 membership"])["algorithm"].tolist()
    assert shown == ["token", "match", "typical ε=0.09 δ=0.3", "top-2 membership"]  # measured top-2, typical's first
    assert tables.on_page(t, [])["algorithm"].tolist() == ["token", "match", "typical ε=0.09 δ=0.3", "top-1 membership"]


def test_exact_values_and_frequency_counts(main, freq, real):
    v = tables.exact_values(tables.law_table(main, freq, real))
    assert (v["n_exact"], v["n_approximate"], v["lossless_max_err"]) == (2, 4, 2e-16)
    assert (v["lossy_min_tv"], v["lossy_max_tv"]) == (0.2, 0.5)
    assert v["lossless_gain"] == 1.0 and v["lossy_gain"] == pytest.approx(1.3)
    c = tables.frequency_counts(freq)
    assert c == {"design_n": 100, "n_pass": 2, "n_lossless": 2, "n_caught": 3, "n_lossy": 4, "max_detect": 10 ** 9}


def test_real_values(real):
    v = tables.real_values(real, "typical ε=0.09 δ=0.3", 4)
    assert (v["real_tok_acc"], v["real_typ_acc"], v["real_md_acc"], v["real_cells"]) == (0.6, 0.5, 0.8, 50)
    assert (v["real_min_tv"], v["real_max_tv"], v["real_min_n"], v["real_max_n"]) == (0.05, 0.3, 900, 20000)


PATHS = ["float32 engine", "bf16 logits, float32 softmax", "bf16 softmax", "bf16 softmax, verify in bf16"]


@pytest.fixture
def precision():
    prec = pd.DataFrame({"path": PATHS, "tv_exact": [4e-8, 1e-3, 2e-3, 2e-3], "tv_same_precision": [3e-8, 2e-8, 2e-3, 1e-3],
                         "detect_same_precision": [10 ** 16, 10 ** 16, 10 ** 6, 10 ** 6]})
    real = pd.DataFrame({"path": PATHS, "tv_same_median": [3e-8, 3e-8, 1e-4, 4e-4], "tv_same_max": [4e-7, 2e-6, 1e-3, 2e-3],
                         "row_sum_dev_max": [1e-6, 1e-6, 2e-3, 2e-3]})
    sampled = pd.DataFrame({"path": PATHS[:3], "samples": [1000] * 3, "p_vs_computed_law": [0.8, 0.4, 0.2],
                            "p_vs_same_precision": [0.8, 0.4, 0.5], "detect_N": [10 ** 14, 10 ** 14, 10 ** 8]})
    return prec, real, sampled


def test_precision_verdict_needs_both_pairs_within_rounding(precision):
    t = tables.precision_table(*precision[:2]).set_index("path")
    # bf16 logits: within rounding on the toy, not on the real pair -> changed
    assert list(t["verdict"]) == ["kept", "changed", "changed", "changed"]
    assert t.loc["float32 engine", "tv_real"] == 4e-7 and t.loc["bf16 softmax", "detect_N"] == 10 ** 6


def test_precision_values_and_the_sampled_check(precision):
    v = tables.precision_values(*precision, alpha=1e-3)
    assert v["sampled_check"] == "consistent" and v["sampled_min_p"] == 0.2 and v["sampled_n"] == 1000
    assert (v["real_bf16s_median"], v["real_bf16v_median"], v["bf16_logits_exact"]) == (1e-4, 4e-4, 1e-3)
    prec, real, sampled = precision
    bad = sampled.assign(p_vs_computed_law=[0.8, 1e-5, 0.2])
    assert tables.precision_values(prec, real, bad, alpha=1e-3)["sampled_check"] == "rejected"


@pytest.fixture
def speed():
    return pd.DataFrame({"temperature": [1.0, 1.0, 1.0, 0.7], "algorithm": ["token", "match", "typical", "token"],
                         "speedup_median": [1.1, 0.8, 1.4, 1.0], "speedup_lo": [1.05, 0.7, 1.3, 0.9],
                         "speedup_hi": [1.2, 0.9, 1.5, 1.1], "verdict": ["faster", "slower", "faster", "undecided"],
                         "verdict_sim": ["undecided", "slower", "faster", "undecided"],
                         "lossless": [True, True, False, True], "family_size": [4] * 4})


def test_measured_table_orders_rows_and_writes_each_estimate_with_its_interval(speed):
    quality = pd.DataFrame({"temperature": [1.0, 1.0], "algorithm": ["token", "typical"], "nll_diff": [0.0, 0.3],
                            "nll_diff_lo": [-0.1, 0.1], "nll_diff_hi": [0.1, 0.5], "distinct_2_diff": [0.0, -0.02],
                            "distinct_2_diff_lo": [-0.01, -0.03], "distinct_2_diff_hi": [0.01, -0.01]})
    t = tables.measured_table(speed, quality)
    assert list(zip(t["temperature"], t["algorithm"])) == [(1.0, "token"), (1.0, "match"), (1.0, "typical"), (0.7, "token")]
    typ = t.set_index("algorithm").loc["typical"]
    assert typ["family"] == "approximate" and typ["speedup"] == "1.40 [1.30, 1.50]"
    assert typ["nll"] == "+0.30 [+0.10, +0.50]" and typ["distinct_2"] == "-0.020 [-0.030, -0.010]"
    assert t.set_index("algorithm").loc["match", "nll"] == ""  # no quality row: blank, not a made-up 0


def test_speed_values(speed):
    v = tables.speed_values(speed, 1.0)
    assert (v["tok_speed"], v["tok_lo"], v["tok_verdict"], v["tok_verdict_sim"]) == (1.1, 1.05, "faster", "undecided")
    assert (v["best_speed"], v["best_algorithm"], v["best_family"], v["best_verdict"]) == (
        1.4, "typical", "approximate", "faster")
    assert (v["n_faster"], v["n_slower"], v["n_speed"], v["n_family"]) == (2, 1, 3, 4)  # 0.7 is another temperature


def test_quality_calibration_counts_lossless_intervals_that_exclude_zero():
    q = pd.DataFrame({"algorithm": ["autoregressive", "token", "block", "typical"], "lossless": [True, True, True, False],
                      "nll_diff": [0, 0.1, 0.2, -1], "nll_diff_lo": [0, -0.1, 0.05, -1.2], "nll_diff_hi": [0, 0.3, 0.4, -0.8],
                      "distinct_2_diff": [0, 0, 0, -0.1], "distinct_2_diff_lo": [0, -0.1, -0.1, -0.2],
                      "distinct_2_diff_hi": [0, 0.1, 0.1, -0.05]})
    # block's NLL interval excludes 0; typical is approximate and plain sampling the reference: not counted
    assert tables.quality_calibration(q) == {"lossless_false": 1, "lossless_intervals": 4}


def test_figures_draw_every_series(main, speed):
    exact = main.assign(config="c")
    shown = tables.main_setting(exact, "c", 1e-12)
    assert shown.loc["typical ε=0.09 δ=0.3", "gain"] == pytest.approx(1.3) and shown["tv_shown"].min() == 1e-12
    md = pd.DataFrame({"pair": ["a"] * 3, "drafts": [1, 2, 3], "rrs": [0.5, 0.6, 0.7], "optimal": [0.5, 0.7, 0.8]})
    prec = pd.DataFrame({"path": ["x", "y"], "tv_exact": [1e-16, 1e-3], "tv_same_precision": [1e-16, 1e-4]})
    acc = pd.DataFrame({"temperature": [1.0] * 2, "algorithm": ["token"] * 2, "position": [1, 2],
                        "conditional": [0.8, 0.7], "conditional_lo_prompts": [0.7, 0.6], "conditional_hi_prompts": [0.9, 0.8]})
    for fig in (plotting.tv_against_gain(shown, 1e-12), plotting.multidraft_acceptance(md),
                plotting.precision_tv(prec, 1e-12), plotting.measured_alternatives(speed, acc)):
        vis = plotting.visible_series(fig)
        assert vis and all(v for _, _, v in vis)
