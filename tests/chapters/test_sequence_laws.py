"""Chapter 02's exact tables (`specdec.chapters.ch02.sequence_laws`): Sun et al.'s toy pair by hand, the
exact grid and scatter series on a small toy pair, and the truncation-order example worked by hand."""

import pytest
import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.toy import toy_pair
from specdec.chapters.ch02 import sequence_laws


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


def test_sun_toy_pair_gives_the_papers_expectations(pair):
    rows = sequence_laws.block_vs_token_rows(*pair, [1, 2, 3], SamplingConfig(1.2, 3, 0.9))
    assert [(r["model"], r["k"]) for r in rows[:4]] == [("toy pair", 1), ("trigram toy", 1), ("toy pair", 2),
                                                        ("trigram toy", 2)]
    ex = sequence_laws.SUN_TOY_EXAMPLE
    toy = next(r for r in rows if r["model"] == "toy pair" and r["k"] == ex["k"])
    assert toy["token"] * 9 == pytest.approx(ex["token_ninths"]) and toy["block"] * 9 == pytest.approx(ex["block_ninths"])
    assert toy["gain_percent"] == pytest.approx(10.0)  # 11/9 over 10/9
    assert all(r["block"] >= r["token"] - 1e-12 for r in rows)  # block verification never accepts fewer


def test_exact_grid_is_float64_rounding(pair):
    configs = [SamplingConfig(), SamplingConfig(0.0), (1.2, 3, 0.8)]  # a config or its values
    rows = sequence_laws.exact_grid_rows(*pair, configs, 2, 3)
    assert len(rows) == len(configs) * 2 * 2 * 3
    assert {r["config"] for r in rows} == {"τ=1", "τ=0", "τ=1.2, top-k 3, top-p 0.8"}
    assert max(r["max_abs_error"] for r in rows) < 1e-12


def test_law_scatter_puts_correct_algorithms_on_the_diagonal_and_wrong_ones_off_it(pair):
    rows = sequence_laws.law_scatter_rows(*pair, 3, 2, SamplingConfig(1.2, 3, 0.9))
    by = {}
    for r in rows:
        by.setdefault(r["algorithm"], []).append(r)
    assert list(by) == ["token", "block", "resample_from_p (wrong)", "raw_q (wrong)"]
    for name, rs in by.items():
        assert len(rs) == 4 ** 3 and sum(r["algorithm_law"] for r in rs) == pytest.approx(1.0)
        gap = max(abs(r["algorithm_law"] - r["target_law"]) for r in rs)
        assert (gap < 1e-12) if name in ("token", "block") else (gap > 1e-2), name


def test_largest_deviation_per_algorithm(pair):
    import pandas as pd

    laws = pd.DataFrame(sequence_laws.law_scatter_rows(*pair, 3, 2, SamplingConfig(1.2, 3, 0.9)))
    dev = sequence_laws.largest_deviation(laws)
    assert list(dev) == ["token", "block", "resample_from_p (wrong)", "raw_q (wrong)"]
    assert dev["token"] < 1e-12 and dev["block"] < 1e-12 and dev["resample_from_p (wrong)"] > 1e-2
    moved = laws.assign(algorithm_law=laws["algorithm_law"] + 0.25 * (laws.index == 0))  # token's first sequence
    assert sequence_laws.largest_deviation(moved)["token"] == pytest.approx(0.25)


def test_truncation_order_example_by_hand(pair):
    # top-k 3 of [.3, .25, .2, .15, .1] -> [.4, .333, .267]; then top-p .6 keeps 2 -> [.545, .455].
    # Top-p .6 first keeps 3 (mass before the 3rd is .55) and top-k 3 keeps them: [.4, .333, .267].
    # TV = 1/2 (|6/11 - 2/5| + |5/11 - 1/3| + 4/15) = 4/15
    rows = sequence_laws.truncation_placement_rows(*pair, 3, 2, SamplingConfig(1.2, 3, 0.9),
                                                   [0.3, 0.25, 0.2, 0.15, 0.1], 3, 0.6)
    assert rows[1]["placement"] == "top-p then top-k: [0.400, 0.333, 0.267, 0.000, 0.000] vs [0.545, 0.455, 0.000, 0.000, 0.000]"
    assert rows[1]["tv"] == pytest.approx(4 / 15)
    assert rows[0]["tv"] < 1e-12 and rows[0]["quantity"] == "TV of the 3-token law"
    assert rows[2]["tv"] > 1e-2 and rows[3]["tv"] > 1e-2  # raw q, raw p: both move the law


def test_keep_at_least_by_hand_on_sun_toy_pair():
    # ratios p/q: a -> 1/2, b -> 2.  Token: E[a1] = 2/3 * 1/2 + 1/3 = 2/3; E[a1 a2] = 4/9 * 1/4 + 2 * 2/9 * 1/2 + 1/9 = 4/9.
    # Block: w2(aa) = 1/4, w2(ab) = min(1, 1/2 * 2) = 1, w2(ba) = 1/2, w2(bb) = 1 -> E[w2] = 1/9 + 2/9 + 1/9 + 1/9 = 5/9
    pair = sequence_laws.sun_toy_pair()
    assert sequence_laws.keep_at_least(*pair, 1, SamplingConfig()) == pytest.approx((2 / 3, 2 / 3))
    assert sequence_laws.keep_at_least(*pair, 2, SamplingConfig()) == pytest.approx((4 / 9, 5 / 9))


def test_all_kept_is_the_increment_of_expected_accepted_drafts(pair):
    # the proofs' invariant: P(N >= k), averaged over the drafts, is E[N | k] - E[N | k-1], both methods
    rows = sequence_laws.block_vs_token_rows(*pair, [1, 2, 3, 4], SamplingConfig(1.2, 3, 0.9))
    assert sequence_laws.all_kept_check(rows) < 1e-12
    assert all(r["block_all_kept"] >= r["token_all_kept"] - 1e-12 for r in rows)  # w_k >= a_1 ... a_k
    bad = [dict(r, block_all_kept=r["block_all_kept"] + 0.01) if r["k"] == 3 else r for r in rows]
    assert sequence_laws.all_kept_check(bad) == pytest.approx(0.01)  # negative control
