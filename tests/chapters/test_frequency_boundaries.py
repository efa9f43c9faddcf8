"""Chapter 02's sampled tables (`specdec.chapters.ch02.frequency_tests`, `boundaries`, `verify_speed`):
the correct algorithms pass, every wrong variant far enough away is caught (negative controls),
the boundary cases behave as they must, greedy decoding is token-identical, and the benchmark's
rows are consistent."""

import numpy as np
import pytest
import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.rules.variants import VARIANTS
from specdec.core.toy import toy_pair
from specdec.chapters.ch02 import boundaries
from specdec.chapters.ch02 import frequency_tests
from specdec.chapters.ch02 import sequence_laws
from specdec.chapters.ch02 import verify_speed

CFG = SamplingConfig(1.2, 3, 0.9)


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


def test_frequency_tests_pass_the_correct_and_catch_the_wrong(pair):
    rows = frequency_tests.frequency_test_rows(*pair, 3, 2, CFG, 0.1, 1e-3, 0.99, seed=7)
    assert [r["algorithm"] for r in rows] == ["token", "block", *VARIANTS]
    for r in rows:
        assert r["tv_low"] <= r["tv"] <= r["tv_high"]
        if r["bug"] == "(correct)":
            assert r["verdict"] == "passes" and r["exact_tv"] < 1e-12, r
        elif r["exact_tv_tested_cells"] >= 0.1:  # within the power guarantee: must be caught
            assert r["verdict"] == "caught", r
        assert r["bug"] == ("(correct)" if r["algorithm"] in ("token", "block") else VARIANTS[r["algorithm"]].bug)


def test_boundary_cases_behave_as_they_must(pair):
    rows = boundaries.boundary_case_rows(*pair, 2000, torch.Generator().manual_seed(8), alpha=1e-3)
    by = {(r["case"], r["quantity"]): r for r in rows}
    assert len(by) == len(rows) == 8 and all(r["verdict"] == "holds" for r in rows), rows
    assert by[("zero probability", "rows that output it")]["observed"] == 0
    assert by[("equal distributions", "share all accepted")]["observed"] == 1
    rejected = by[("first-step rejection", "share rejected")]
    assert abs(rejected["observed"] - 0.8) < 4 * np.sqrt(0.16 / 2000) and rejected["must"] == "0.8 ± 0.036"
    assert by[("first-step rejection", "rejections then token 2")]["observed"] == 1
    assert by[("full acceptance", "share all kept, bonus 2")]["observed"] == 1
    stop = {q: r for (c, q), r in by.items() if c == "stop token in the draft"}
    assert stop["exact-law error"]["observed"] < 1e-12 and stop["p-value"]["observed"] > 1e-3
    assert 0 < stop["share stopping early"]["observed"] < 1


def test_a_boundary_check_that_fails_says_so(pair):
    # negative control: a p-value threshold above 1 cannot be met, so the stop case's test must fail
    rows = boundaries.boundary_case_rows(*pair, 500, torch.Generator().manual_seed(8), alpha=1.0)
    verdicts = {r["quantity"]: r["verdict"] for r in rows if r["case"] == "stop token in the draft"}
    assert verdicts["p-value"] == "fails" and verdicts["exact-law error"] == "holds"


def test_greedy_is_token_identical_and_a_shared_seed_is_not(pair):
    run = boundaries.greedy_identity(*pair, 5, 3, 300, seed=9)
    greedy = [r for r in run.rows if r["target"] == "greedy"]
    assert len(greedy) == 4 and all(r["identical_rows"] == r["rows"] == 300 for r in greedy)
    sampled = run.rows[-1]
    assert sampled["identical_rows"] < 300 and run.same_seed_p > 1e-3


def test_verify_speed_rows_are_consistent():
    rows = verify_speed.verify_speed_rows([[200, 2, 5]], reps=2, seed=0)
    assert [r["method"] for r in rows] == ["token", "block"]
    for r in rows:
        assert r["ms_per_call"] > 0 and r["steps_per_second"] == pytest.approx(r["batch"] / (r["ms_per_call"] / 1e3))
        assert r["torch_threads"] == torch.get_num_threads()
