"""Statistics: goodness of fit, TV interval and power, each checked against a law we sample
ourselves (numpy Generator, seeded) and against a deliberately shifted law that must be caught."""

import numpy as np
import pytest
from scipy import stats as st

from specdec.core.stats import counts_of, gof_test, pool_cells, power, sample_size, tv_interval

ALPHA = 1e-3


def _shifted(p, eps):
    """p with eps mass moved from its largest to its smallest cell: TV exactly eps."""
    order = np.argsort(p, kind="stable")  # two different cells even when p is uniform
    q = p.copy()
    q[order[-1]] -= eps
    q[order[0]] += eps
    return q


def test_chi2_statistic_hand_worked():
    # counts [30, 70] against [0.5, 0.5]: X^2 = (20^2 + 20^2) / 50 = 16, df 1
    r = gof_test([30, 70], [0.5, 0.5])
    assert r.statistic == pytest.approx(16.0) and r.df == 1
    assert r.p_value == pytest.approx(st.chi2.sf(16.0, 1))
    assert r.tv == pytest.approx(0.2)


@pytest.mark.parametrize("test", ["chi2", "g"])
def test_exact_law_passes_and_shifted_law_fails(test):
    # power calculation: TV 0.05 over 16 cells, alpha 1e-3, power 0.99 -> N = sample_size(...)
    rng = np.random.default_rng(20261130)
    p = rng.dirichlet(np.ones(16))
    N = sample_size(0.05, 16, ALPHA, 0.99)
    good = np.bincount(rng.choice(16, N, p=p), minlength=16)
    assert gof_test(good, p, test=test).p_value > ALPHA
    bad = np.bincount(rng.choice(16, N, p=_shifted(p, 0.05)), minlength=16)  # negative control
    assert gof_test(bad, p, test=test).p_value < ALPHA


def test_power_function_matches_simulation():
    # 400 seeded repetitions at the computed N: the rejection rate of a TV-eps alternative must be
    # at least the promised power (minus 3 binomial sd), and of the null at most alpha + 3 sd.
    rng = np.random.default_rng(7)
    p = np.full(8, 1 / 8)
    eps, target = 0.06, 0.9
    N = sample_size(eps, 8, 0.01, target)
    assert power(N, eps, 8, 0.01) >= target > power(N - 1, eps, 8, 0.01)
    reps = 400
    alt = _shifted(p, eps)
    rej_alt = np.mean([gof_test(rng.multinomial(N, alt), p).p_value < 0.01 for _ in range(reps)])
    rej_null = np.mean([gof_test(rng.multinomial(N, p), p).p_value < 0.01 for _ in range(reps)])
    assert rej_alt >= target - 3 * np.sqrt(target * (1 - target) / reps)
    assert rej_null <= 0.01 + 3 * np.sqrt(0.01 * 0.99 / reps)


def test_tv_interval_covers_truth():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(10))
    q = _shifted(p, 0.1)
    misses = 0
    for _ in range(200):
        c = rng.multinomial(2000, q)
        tv, lo, hi = tv_interval(c, p, delta=0.05)
        misses += not (lo <= 0.1 <= hi)
    assert misses <= 10  # promised <= 5% (the bound is conservative; we see none)


def test_impossible_outcome_gives_p_value_zero():
    r = gof_test([10, 10, 1], [0.5, 0.5, 0.0])
    assert r.p_value == 0.0 and r.impossible == 1


def test_pooling():
    assert pool_cells([0.5, 0.45, 0.03, 0.02], 100).tolist() == [0, 1, 2, 2]
    assert pool_cells([0.5, 0.47, 0.02, 0.01], 100).tolist() == [0, 1, 1, 1]
    r = gof_test([50, 40, 5, 3, 2], [0.5, 0.4, 0.05, 0.03, 0.02])
    assert r.cells == 4 and r.df == 3  # expected 3 and 2 pooled (5 is enough on its own)


def test_counts_of_orders_like_a_dense_law():
    assert counts_of([[0, 1], [1, 0], [1, 0]], V=2, n=2).tolist() == [0, 1, 2, 0]
    with pytest.raises(ValueError):
        counts_of([[0, 2]], V=2, n=2)


@pytest.mark.parametrize("call", [
    lambda: gof_test([1, 2], [0.5, 0.6]),
    lambda: gof_test([1, -2], [0.5, 0.5]),
    lambda: gof_test([1, 2, 3], [0.5, 0.5]),
    lambda: gof_test([0, 0], [0.5, 0.5]),
    lambda: gof_test([1, 2], [0.5, 0.5], test="ks"),
    lambda: tv_interval([1, 2], [0.5, 0.5], delta=0),
    lambda: power(100, 0.0, 4),
    lambda: sample_size(0.1, 1),
    lambda: sample_size(0.1, 4, power_target=1.0),
])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
