"""The idealized cost model: the seed's worked example, closed form vs sum, edges, errors."""

from fractions import Fraction

import numpy as np
import pytest

from specdec.core.cost import (
    accepted_length_variance,
    best_k,
    break_even_alpha,
    break_even_alpha_best_k,
    draft_cost,
    expected_tokens,
    expected_tokens_from_positions,
    extended_speedup,
    optimal_k,
    speedup,
    toy_speedup,
)
from specdec.core.stats import spread


def test_seed_worked_example():
    # Seed: alpha=0.8, k=4, c=0.1 -> 3.3616 tokens, cost 1.4, ratio ~2.401; alpha=0.2 -> ~0.893.
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616, abs=1e-12)
    assert toy_speedup(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4, abs=1e-12)
    assert round(toy_speedup(0.8, 4, 0.1), 3) == 2.401
    assert round(toy_speedup(0.2, 4, 0.1), 3) == 0.893
    assert toy_speedup(0.2, 4, 0.1) < 1.0


def test_closed_form_matches_exact_rational_sum():
    # Independent reference: the sum computed in exact rational arithmetic.
    for num in range(0, 11):
        a = Fraction(num, 10)
        for k in range(0, 13):
            exact = sum(a**i for i in range(k + 1))
            assert expected_tokens(float(a), k) == pytest.approx(float(exact), rel=1e-13, abs=1e-15)


def test_vectorized_broadcasting():
    alpha = np.linspace(0, 1, 11)[:, None]
    k = np.arange(0, 9)[None, :]
    got = expected_tokens(alpha, k)
    assert got.shape == (11, 9)
    ref = np.array([[sum(a**i for i in range(kk + 1)) for kk in range(9)] for a in np.linspace(0, 1, 11)])
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    s = toy_speedup(alpha, k, 0.1)
    np.testing.assert_allclose(s, ref / (1 + 0.1 * np.arange(9)[None, :]), rtol=1e-13)


def test_edges():
    assert expected_tokens(0.0, 4) == 1.0          # every draft rejected: the target's own token
    assert expected_tokens(1.0, 4) == 5.0          # every draft accepted plus the bonus token
    assert expected_tokens(0.7, 0) == 1.0          # k=0 is plain decoding
    assert toy_speedup(0.7, 0, 0.5) == 1.0
    assert toy_speedup(1.0, 4, 0.0) == 5.0
    assert expected_tokens(1.0, np.array([0, 3])).tolist() == [1.0, 4.0]
    assert isinstance(expected_tokens(0.5, 2), float)


def test_extended_speedup_uses_measured_verify_cost():
    assert speedup(0.8, 4, 0.1, verify_cost=1.5) == pytest.approx(3.3616 / 1.9)
    assert speedup(0.8, 4, 0.1) == toy_speedup(0.8, 4, 0.1)


def test_per_position_acceptance():
    assert expected_tokens_from_positions([0.9, 0.5]) == pytest.approx(2.35)
    assert expected_tokens_from_positions([0.8] * 4) == pytest.approx(expected_tokens(0.8, 4))
    assert expected_tokens_from_positions(np.zeros((3, 0))).tolist() == [1.0, 1.0, 1.0]


def test_optimal_k_and_break_even():
    assert optimal_k(0.05, 0.1) == 0               # speculation never pays at alpha=0.05, c=0.1
    assert optimal_k(0.2, 0.1) == 1                # 1.2 / 1.1 > 1: the seed's k=4 loses, k=1 does not
    ks = np.arange(0, 65)
    for a in (0.05, 0.2, 0.5, 0.8, 0.95):
        best = int(np.argmax(toy_speedup(a, ks, 0.1)))
        assert optimal_k(a, 0.1) == best
    a0 = break_even_alpha(4, 0.1)
    assert toy_speedup(a0, 4, 0.1) == pytest.approx(1.0, abs=1e-9)
    assert toy_speedup(a0 - 1e-3, 4, 0.1) < 1.0 < toy_speedup(a0 + 1e-3, 4, 0.1)
    assert break_even_alpha(4, 1.5) == np.inf      # a draft token dearer than the target never pays
    assert break_even_alpha(0, 0.1) == 0.0


def _variance_closed_form(a: float, k: int) -> float:
    """The summed closed form (alpha - (2k+1)(1-alpha) alpha^(k+1) - alpha^(2k+2)) / (1-alpha)^2."""
    return (a - (2 * k + 1) * (1 - a) * a ** (k + 1) - a ** (2 * k + 2)) / (1 - a) ** 2


def test_variance_worked_example_and_textbook_limits():
    # alpha=0.8, k=4: E[N^2] = 0.8 + 3(0.64) + 5(0.512) + 7(0.4096) = 8.1472, E[N] = 2.3616
    assert accepted_length_variance(0.8, 4) == pytest.approx(8.1472 - 2.3616**2, abs=1e-12)
    for a in (0.0, 0.3, 0.5, 1.0):                                      # k = 1: Bernoulli(alpha)
        assert accepted_length_variance(a, 1) == pytest.approx(a * (1 - a), abs=1e-15)
    assert accepted_length_variance(0.6, 400) == pytest.approx(0.6 / 0.4**2, rel=1e-12)  # k -> inf: geometric
    assert accepted_length_variance(0.7, 0) == 0.0 and accepted_length_variance(1.0, 6) == 0.0
    assert accepted_length_variance(0.0, 6) == 0.0
    assert isinstance(accepted_length_variance(0.5, 2), float)


def test_variance_matches_the_exact_law_and_the_summed_closed_form():
    # Independent reference: the variance of L under P(N = n) in exact rational arithmetic.
    for num in range(0, 11):
        a = Fraction(num, 10)
        for k in range(0, 13):
            pmf = [a**n * (1 - a) for n in range(k)] + [a**k]
            mean = sum((n + 1) * p for n, p in enumerate(pmf))
            exact = sum((n + 1 - mean) ** 2 * p for n, p in enumerate(pmf))
            got = accepted_length_variance(float(a), k)
            assert got == pytest.approx(float(exact), rel=1e-12, abs=1e-14)
            if num < 10:
                assert got == pytest.approx(_variance_closed_form(float(a), k), rel=1e-9, abs=1e-12)


def test_variance_is_vectorized_like_expected_tokens():
    alpha = np.linspace(0, 1, 11)[:, None]
    k = np.arange(0, 9)[None, :]
    got = accepted_length_variance(alpha, k)
    assert got.shape == (11, 9)
    ref = np.array([[accepted_length_variance(float(a), int(kk)) for kk in range(9)] for a in np.linspace(0, 1, 11)])
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)
    assert accepted_length_variance(np.array([0.5]), np.array([], dtype=int).reshape(0, 1)).shape == (0, 1)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: accepted_length_variance(1.2, 4), "alpha must lie in"),
        (lambda: accepted_length_variance(float("nan"), 4), "NaN"),
        (lambda: accepted_length_variance(0.5, -1), "non-negative integer"),
        (lambda: accepted_length_variance(0.5, 2.5), "non-negative integer"),
    ],
)
def test_variance_errors_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: expected_tokens(1.2, 4), "alpha must lie in"),
        (lambda: expected_tokens(-0.1, 4), "alpha must lie in"),
        (lambda: expected_tokens(float("nan"), 4), "NaN"),
        (lambda: expected_tokens(0.5, -1), "non-negative integer"),
        (lambda: expected_tokens(0.5, 2.5), "non-negative integer"),
        (lambda: expected_tokens(0.5, "4"), "non-negative integer"),
        (lambda: toy_speedup(0.5, 4, -0.1), "c must be"),
        (lambda: toy_speedup(0.5, 4, float("inf")), "c must be"),
        (lambda: speedup(0.5, 0, 0.1, verify_cost=0.0), "> 0"),
    ],
)
def test_errors_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_spread_and_extended_cost_hand_cases():
    assert spread([1, 2, 3, 4]) == {"median": 2.5, "q1": 1.75, "q3": 3.25, "min": 1.0, "max": 4.0, "n": 4}
    assert draft_cost(0.001, 0.005) == pytest.approx(0.2)
    # unit verification cost: the seed's worked example 3.3616 / 1.4
    assert extended_speedup(0.8, 4, {1: 2.0, 5: 2.0}, 0.1) == pytest.approx(3.3616 / 1.4)
    assert extended_speedup(0.8, 4, {1: 1.0, 5: 1.5}, 0.1) == pytest.approx(3.3616 / 1.9)
    assert extended_speedup(0.3, 2, {1: 1.0, 3: 1.0}, 0.05) == pytest.approx(toy_speedup(0.3, 2, 0.05))
    with pytest.raises(ValueError, match="T\\(5\\)"):
        extended_speedup(0.8, 4, {1: 1.0}, 0.1)
    with pytest.raises(ValueError):
        draft_cost(0.001, 0.0)
    with pytest.raises(ValueError):
        spread([])


def test_optimal_k_with_a_measured_curve_hand_cases():
    flat = {n: 1.0 for n in range(1, 10)}
    assert optimal_k(0.0, 0.1, 8, curve=flat) == 0            # nothing accepted: do not draft
    assert optimal_k(1.0, 0.01, 8, curve=flat) == 8           # everything accepted, verification free
    assert optimal_k(0.8, 0.1, 8, curve=flat) == 6            # cost.optimal_k(0.8, 0.1) of the seed's model
    steep = {n: float(n) for n in range(1, 10)}        # compute bound: verifying n tokens costs n
    assert optimal_k(0.9, 0.0, 8, curve=steep) == 0
    with pytest.raises(ValueError, match="lacks"):
        optimal_k(0.5, 0.1, 2, curve={1: 1.0})


def test_optimal_k_divides_the_measured_curve_by_t1():
    """The extended model uses the verification cost relative to one plain step, T(k+1)/T(1): a
    curve with T(1) != 1 must give the k of its own normalization.  T(n) = 2 + 0.2 n (T(1) = 2.2),
    alpha = 0.8, c = 0.1, k_max = 10:
        k = 4: E[L] = 3.3616, cost 1 + 0.8/2.2 + 0.4 = 1.7636 -> S = 1.9061
        k = 5: E[L] = 3.6893, cost 1 + 1.0/2.2 + 0.5 = 1.9545 -> S = 1.8876
    so k = 4 (checked against every k below); undivided, T(k+1) itself as the cost, k = 5 wins.
    The answer cannot depend on the unit of time: the same curve in milliseconds gives the same k."""
    curve = {n: 2.0 + 0.2 * n for n in range(1, 12)}
    s = [expected_tokens(0.8, k) / ((2.2 + 0.2 * k) / 2.2 + 0.1 * k) for k in range(11)]
    assert max(range(11), key=lambda k: s[k]) == 4 and s[4] == pytest.approx(1.9061, abs=1e-4)
    assert optimal_k(0.8, 0.1, 10, curve=curve) == 4
    assert optimal_k(0.8, 0.1, 10, curve={n: 1000 * t for n, t in curve.items()}) == 4
    assert optimal_k([0.8, 0.9], [0.1, 0.1], 10, curve=curve).tolist() == [4, 7]


def test_best_k_is_optimal_ks_choice_with_its_ratio_and_prices_only_what_a_partial_curve_holds():
    """best_k agrees with optimal_k wherever the curve is whole (one decision rule), returns the
    ratio of that k, and with a partial curve chooses among the k whose T(k+1) it holds.  Hand case:
    T = {1: 1, 2: 1, 5: 1.2}, alpha = 0.8, c = 0.1, k_max = 4: k = 1 gives 1.8 / 1.1 = 1.636, k = 4
    gives 3.3616 / 1.6 = 2.101 (k = 2, 3 unpriced), so (4, 2.101); k_min = 1 where nothing pays gives
    the least bad speculative k."""
    curve = {n: 2.0 + 0.2 * n for n in range(1, 12)}
    for a in (0.0, 0.3, 0.8, 0.95):
        for c in (0.01, 0.1, 0.5):
            k, s = best_k(a, c, 10, curve)
            assert k == optimal_k(a, c, 10, curve=curve)
            assert s == pytest.approx(float(speedup(a, k, c, verify_cost=curve[k + 1] / curve[1])))
            assert best_k(a, c, 10)[0] == optimal_k(a, c, 10)
    k, s = best_k(0.8, 0.1, 4, {1: 1.0, 2: 1.0, 5: 1.2})
    assert k == 4 and s == pytest.approx(3.3616 / 1.6)
    assert best_k(0.0, 0.5, 3) == (0, 1.0)
    k, s = best_k(0.0, 0.5, 3, k_min=1)
    assert k == 1 and s == pytest.approx(1 / 1.5)
    with pytest.raises(ValueError, match="T\\(1\\)"):
        best_k(0.5, 0.1, 2, {2: 1.0})
    with pytest.raises(ValueError, match="k_min"):
        best_k(0.5, 0.1, 1, k_min=2)
    with pytest.raises(ValueError, match="holds no"):
        best_k(0.5, 0.1, 2, {1: 1.0, 9: 1.0}, k_min=1)


def test_the_best_k_break_even_is_c_in_the_idealized_model_and_rises_with_the_verification_cost():
    """Leviathan et al.'s corollary: some k pays exactly when alpha > c, so the break-even of the
    best k is c; a verification that costs more than one step raises it (T(2) = 1.5: k = 1 pays
    when (1 + alpha) / (1.5 + c) > 1, alpha > 0.5 + c); a second token that costs a whole step
    (T(2) = 2) never pays at k = 1."""
    for c in (0.05, 0.1, 0.3):
        assert break_even_alpha_best_k(c, 4) == pytest.approx(c, abs=1e-5)
        assert break_even_alpha_best_k(c, 4) == pytest.approx(float(break_even_alpha(1, c)), abs=1e-5)
    assert break_even_alpha_best_k(0.1, 1, {1: 1.0, 2: 1.5}) == pytest.approx(0.6, abs=1e-5)
    assert break_even_alpha_best_k(0.1, 1, {1: 1.0, 2: 2.0}) == float("inf")
