"""The arithmetic of `specdec.peers.conformance` pinned by hand-worked cases, its refusals, and a
property test that nothing it accepts is worded "consistent" without a finite p-value and power.

Hand-worked tables (V = 3; every expected number computed here by reasoning or by scipy / numpy
directly, never by conformance's private helpers):

    L1 (S = 2, x1 outside the support 0.10)      L2 (S = 3, nothing outside)
    x1 = a: .30 .10 .15   (p1 .55, group 0)     x1 = a: .20 .10 .05   (p1 .35, group 0)
    x1 = b: .05 .20 .10   (p1 .35, group 1)     x1 = b: .04 .16 .10   (p1 .30, group 0)
                                                x1 = c: .10 .05 .20   (p1 .35, group 1)

With n_bins = 4, x1_bins = 2 (G = 2 groups of x1 by the cumulative p1 before the row: L1's rows start at
0 and .55, L2's at 0, .35, .65; H = 2 windows of x2's conditional cumulative mass, cut at 1/2) and the
light limit 0.5 / (G H) = 0.125:
  p order: L1 row a by descending p is x2 = 0 (starts at 0), 2 (at .30/.55 = .55), 1 (at .82) -> x2 = 0, 1, 2 in windows
  0, 1, 1; row b: x2 = 1 (0), 2 (.57), 0 (.86) -> 1, 0, 1 of group 1; the cut cell (.10 < .125) joins the
  bin before it: labels [0 1 1 3 2 3 3], masses .30 .25 .20 .25.  L2 the same way: [0 1 1 1 0 1 3 3 2 -1],
  masses .36 .29 .20 .15 (cut cell of mass 0: no bin).
  score order (scores 0, 1, 2 per row, so x2 = 2, 1, 0): L1 row a starts at 0, .27, .45 -> all window 0;
  row b at 0, .29, .86 -> 0, 0, 1; the light bins (.05 and the cut cell .10) join the bin before:
  labels [0 0 0 1 1 1 1] (.55 .45).  L2: [0 0 0 0 0 0 2 2 1 -1] (.65 .20 .15; row b's .04 joins bin 0).

Which planted one-line bug each test catches (each was applied alone to a copy of conformance.py and this
file run against the copy; the tests named failed, the rest passed):
  - G-test df off by one (``df + e.size`` for ``df + e.size - 1``): test_g_statistic_df_p_by_hand,
    test_power_n_needed_mdtv_are_the_stats_ones.
  - the two orders' p-value without its Bonferroni factor (``min(r[2] ...)``):
    test_bonferroni_p_over_two_orders.
  - p exactly at the level worded "consistent" (``<`` for ``<=`` in ``status``):
    test_p_exactly_at_alpha_rejects.
  - bins allowed down to an expected count of about 2 (``n // 4`` for ``n // 10``, the light limit
    ``0.2 / (G * H)`` for ``0.5 / (G * H)``, or a light first bin left alone):
    test_every_bin_expects_at_least_five (and test_bins_by_hand for the last two).
  - the TV interval not corrected over prompts (``delta`` for ``delta / len(laws)``):
    test_tv_interval_is_bonferroni_over_prompts.
  - the noncentrality on the alternative's bin masses (``/ pa`` for ``/ e``):
    test_alternative_power_noncentrality_on_target_masses.
  - the stated power at the level instead of the level over the orders (``alpha`` for ``level``):
    test_power_n_needed_mdtv_are_the_stats_ones.
Also caught, by the same procedure: the mdtv, n_needed or alternative power at alpha instead of alpha /
orders, the power's cells df instead of df + 1, min_detectable_tv returning the bisection's low end, the
mean TV interval replaced by the first prompt's, a sample impossible under the target not forcing p = 0,
the check that p is finite removed, ``_counts`` without its finiteness check, ``verdict`` without its
p-value or power check (test_law_test_refuses_*, test_verdict_refuses_*, and the two property tests).
"""

import math

import numpy as np
import pytest
from scipy import stats as st

from specdec.core import stats
from specdec.peers.conformance import (CONSISTENT, INCONSISTENT, LawTest, alternative_power, design_n, law_test,
                                       make_bins, min_detectable_tv, verdict)
from specdec.peers.diagnosis import diagnose, greedy_divergences

V = 3
L1 = np.array([.30, .10, .15, .05, .20, .10, .10])
L2 = np.array([.20, .10, .05, .04, .16, .10, .10, .05, .20, 0.0])
SC1 = np.array([0, 1, 2, 0, 1, 2, 0.0])
SC2 = np.array([0, 1, 2] * 3 + [0.0])
# n = 200 each; binned (p order) L1: O = 72 45 30 53 against E = 60 50 40 50, L2: O = 80 50 45 25 against 72 58 40 30
C1 = np.array([72, 20, 25, 10, 30, 23, 20])
C2 = np.array([50, 15, 10, 5, 30, 20, 15, 10, 45, 0])
LAB_P = (np.array([0, 1, 1, 3, 2, 3, 3]), np.array([0, 1, 1, 1, 0, 1, 3, 3, 2, -1]))
LAB_S = (np.array([0, 0, 0, 1, 1, 1, 1]), np.array([0, 0, 0, 0, 0, 0, 2, 2, 1, -1]))
KW = dict(n_bins=4, x1_bins=2)
LIGHT_FIRST, LIGHT_FIRST_SCORE = np.array([.005, .006, .089, .9]), np.array([3, 2, 1, 0.0])


def _binned(labels, law, counts):
    keep = labels >= 0
    return np.bincount(labels[keep], weights=counts[keep]), np.bincount(labels[keep], weights=law[keep])


def _g(labelling):
    """(G, df) summed over the two prompts, by scipy on the hand-binned counts."""
    G = df = 0
    for labels, law, c in zip(labelling, (L1, L2), (C1, C2)):
        o, e = _binned(labels, law, c)
        G += st.power_divergence(o, e * o.sum(), lambda_="log-likelihood")[0]
        df += e.size - 1
    return float(G), df


def test_bins_by_hand():
    for lab, law, score in zip(LAB_P + LAB_S, (L1, L2) * 2, (None, None, SC1, SC2)):
        assert make_bins(law, V, 4, score, x1_bins=2).tolist() == lab.tolist()
    masses = [_binned(lab, law, law)[1] for lab, law in zip(LAB_P, (L1, L2))]
    assert np.allclose(masses[0], [.30, .25, .20, .25]) and np.allclose(masses[1], [.36, .29, .20, .15])
    # one group, two windows: V = 2, S = 2; row a by p: x2 = 0 at 0, x2 = 1 at .6; row b: x2 = 1 at 0, x2 = 0 at .8
    assert make_bins([.3, .2, .1, .4, 0.0], 2, 2, x1_bins=1).tolist() == [0, 1, 1, 0, -1]
    # the first bin light: H = 10 windows of a row of mass .1 (the cut cell holds .9), light limit .05; by the
    # score the row is .005 (starts at 0), .006 (at .05), .089 (at .11) -> windows 0, 0, 1 of masses .011 and
    # .089: the first joins the next, leaving .1 and the cut cell .9
    assert make_bins(LIGHT_FIRST, 3, 10, LIGHT_FIRST_SCORE, x1_bins=1).tolist() == [0, 0, 0, 1]


def test_g_statistic_df_p_by_hand():
    G, df = _g(LAB_P)
    assert df == 6  # (4 - 1) + (4 - 1)
    r = law_test([L1, L2], [C1, C2], V, eps=0.1, **KW)
    assert (r.df, r.bins, r.n, r.prompts, r.impossible, r.orders) == (6, 8, 400, 2, 0, 1)
    assert r.statistic == pytest.approx(G, rel=1e-12)
    assert r.p_value == pytest.approx(st.chi2.sf(G, 6), rel=1e-12)
    assert 0.1 < r.p_value < 0.2  # 0.163: a p-value that the level and its neighbours can tell apart
    # one prompt alone: df = 3, G by the textbook formula 2 sum O ln(O / E)
    o, e = _binned(LAB_P[0], L1, C1)
    G1 = 2 * float((o * np.log(o / (e * 200))).sum())
    r1 = law_test([L1], [C1], V, **KW)
    assert (r1.df, r1.statistic) == (3, pytest.approx(G1, rel=1e-12))
    assert r1.p_value == pytest.approx(st.chi2.sf(G1, 3), rel=1e-12)
    # boundary: one sample where the target puts no mass (L2's cut cell) gives p = 0, whatever G says
    c2 = C2.copy()
    c2[-1] = 1
    r0 = law_test([L1, L2], [C1, c2], V, alpha=1e-12, **KW)
    assert (r0.impossible, r0.p_value, verdict(r0)) == (1, 0.0, INCONSISTENT)


def test_bonferroni_p_over_two_orders():
    p_p = st.chi2.sf(*_g(LAB_P))
    p_s = st.chi2.sf(*_g(LAB_S))
    assert _g(LAB_S)[1] == 3 and 0.1 < p_p < p_s < 1  # 0.163 and 0.479
    r = law_test([L1, L2], [C1, C2], V, scores=[SC1, SC2], eps=0.1, **KW)
    assert r.orders == 2 and r.df == 6 and r.statistic == pytest.approx(_g(LAB_P)[0])  # the p order's G
    assert r.p_value == pytest.approx(min(1.0, 2 * min(p_p, p_s)), rel=1e-12)
    # boundary: 2 min(p) above 1 is capped at 1
    r_ok = law_test([L1], [np.round(L1 * 400)], V, scores=[SC1], **KW)
    assert r_ok.p_value == 1.0


def test_p_exactly_at_alpha_rejects():
    p = law_test([L1, L2], [C1, C2], V, **KW).p_value
    at = law_test([L1, L2], [C1, C2], V, alpha=p, **KW)
    assert at.p_value == at.alpha and at.status == "reject" and verdict(at) == INCONSISTENT
    above = law_test([L1, L2], [C1, C2], V, alpha=float(np.nextafter(p, 0)), **KW)
    assert above.status == "pass" and verdict(above) == CONSISTENT
    below = law_test([L1, L2], [C1, C2], V, alpha=float(np.nextafter(p, 1)), **KW)
    assert verdict(below) == INCONSISTENT
    fields = dict(statistic=1.0, df=3, n=100, prompts=1, bins=4, impossible=0, tv=0.1, tv_low=0.0, tv_high=0.3,
                  eps=0.03, power=0.5, n_needed=1000)
    assert verdict(LawTest(p_value=0.01, alpha=0.01, **fields)) == INCONSISTENT
    assert verdict(LawTest(p_value=0.0100001, alpha=0.01, **fields)) == CONSISTENT


def test_tv_interval_is_bonferroni_over_prompts():
    delta = 0.05
    r = law_test([L1, L2], [C1, C2], V, delta=delta, **KW)
    per = []
    for labels, law, c in zip(LAB_P, (L1, L2), (C1, C2)):
        o, e = _binned(labels, law, c)
        # the bins and the cell "impossible under the target" (0 samples, mass 0 here): m = B + 1 cells
        o, e = np.append(o, 0.0), np.append(e, 0.0)
        tv = 0.5 * float(np.abs(o / o.sum() - e).sum())
        b = 0.5 * math.sqrt((e.size - 1) / o.sum()) + math.sqrt(math.log(2 / (delta / 2)) / (2 * o.sum()))
        assert stats.tv_interval(o, e, delta / 2) == pytest.approx((tv, max(0, tv - b), min(1, tv + b)))
        per.append(stats.tv_interval(o, e, delta / 2))
    assert [r.tv, r.tv_low, r.tv_high] == pytest.approx(np.mean(per, axis=0).tolist(), rel=1e-12)
    assert r.tv == pytest.approx((0.075 + 0.065) / 2)  # L1: (12 + 5 + 10 + 3) / 400, L2: (8 + 8 + 5 + 5) / 400
    # a prompt's own interval at delta (uncorrected) is visibly narrower
    uncorrected = np.mean([stats.tv_interval(*(np.append(x, 0.0) for x in _binned(lab, law, c)), delta)
                           for lab, law, c in zip(LAB_P, (L1, L2), (C1, C2))], axis=0)
    assert r.tv_high - uncorrected[2] > 0.005
    # boundary: one prompt is not corrected (delta / 1)
    r1 = law_test([L1], [C1], V, delta=delta, **KW)
    one = stats.tv_interval(*(np.append(x, 0.0) for x in _binned(LAB_P[0], L1, C1)), delta)
    assert (r1.tv, r1.tv_low, r1.tv_high) == pytest.approx(one, rel=1e-12)


def test_power_n_needed_mdtv_are_the_stats_ones():
    N, eps, alpha = 400, 0.1, 0.01
    r = law_test([L1, L2], [C1, C2], V, eps=eps, alpha=alpha, **KW)
    assert r.power == pytest.approx(stats.power(N, eps, 6 + 1, alpha), rel=1e-12)
    assert r.n_needed == stats.sample_size(eps, 7, alpha, 0.8)
    assert r.mdtv == min_detectable_tv(N, 7, alpha)
    # two orders (df 6 and 3): each at alpha / 2, the larger power, the smaller n and TV
    r2 = law_test([L1, L2], [C1, C2], V, eps=eps, alpha=alpha, scores=[SC1, SC2], **KW)
    pw = [stats.power(N, eps, df + 1, alpha / 2) for df in (6, 3)]
    assert r2.power == pytest.approx(max(pw), rel=1e-12)
    assert r2.power < stats.power(N, eps, 3 + 1, alpha) - 0.03  # at the level alpha it would be visibly higher
    assert 0.5 < r2.power < 0.9
    assert r2.n_needed == min(stats.sample_size(eps, df + 1, alpha / 2, 0.8) for df in (6, 3))
    assert r2.mdtv == min(min_detectable_tv(N, df + 1, alpha / 2) for df in (6, 3))
    # design_n: per prompt, at alpha / orders, at least 10 n_bins
    assert design_n(2, eps=eps, alpha=alpha, n_bins=4, orders=2) == max(
        math.ceil(stats.sample_size(eps, 2 * 3 + 1, alpha / 2, 0.8) / 2), 40)
    assert design_n(1, eps=0.5, n_bins=64) == 640  # boundary: the 10-per-bin floor binds


def test_alternative_power_noncentrality_on_target_masses():
    # alternative on L1's cells: binned .45 .15 .10 .30 against the target's .30 .25 .20 .25
    A1 = np.array([.45, .05, .10, .05, .10, .05, .20])
    P, p = _binned(LAB_P[0], A1, A1)[1], _binned(LAB_P[0], L1, L1)[1]
    assert np.allclose(P, [.45, .15, .10, .30])
    n = 100
    lam = n * float(((P - p) ** 2 / p).sum())  # 100 * 0.175
    assert lam == pytest.approx(17.5) and abs(n * float(((P - p) ** 2 / P).sum()) - lam) > 4  # 22.5 with P below
    a = alternative_power([L1], [A1], V, n, alpha=0.01, **KW)
    assert a["df"] == 3 and a["noncentrality"] == pytest.approx(lam, rel=1e-12)
    assert a["power"] == pytest.approx(st.ncx2.sf(st.chi2.ppf(0.99, 3), 3, lam), rel=1e-10)
    assert a["binned_tv"] == pytest.approx(0.5 * float(np.abs(P - p).sum())) == pytest.approx(0.20)
    # with scores both orders at alpha / 2; the p order (lam 17.5) beats the score order (.60/.40 vs .55/.45)
    a2 = alternative_power([L1], [A1], V, n, alpha=0.01, scores=[SC1], **KW)
    assert a2["power"] == pytest.approx(st.ncx2.sf(st.chi2.ppf(0.995, 3), 3, lam), rel=1e-10)
    assert a2["binned_tv_orders"] == pytest.approx([0.20, 0.05])
    # mass on a cell the target forbids (L2's cut cell): rejected whenever one such sample appears
    A2 = L2.copy()
    A2[-1], A2[8] = 0.05, 0.15
    e2, P2 = _binned(LAB_P[1], L2, L2)[1], _binned(LAB_P[1], A2, A2)[1]
    lam2 = n * float(((P2 - e2) ** 2 / e2).sum())
    pw2 = st.ncx2.sf(st.chi2.ppf(0.99, 3), 3, lam2)
    b = alternative_power([L2], [A2], V, n, alpha=0.01, **KW)
    assert b["noncentrality"] == pytest.approx(lam2) and b["power"] == pytest.approx(1 - 0.95 ** n * (1 - pw2))
    # boundary: the target itself has noncentrality 0 and power alpha
    z = alternative_power([L1], [L1], V, n, alpha=0.01, **KW)
    assert z["noncentrality"] == 0 and z["power"] == pytest.approx(0.01)


@pytest.mark.parametrize("n,cells,level", [(400, 7, 0.01), (400, 4, 0.005), (5000, 64, 0.001), (41, 3, 0.05)])
def test_min_detectable_tv_is_where_the_power_crosses(n, cells, level):
    eps = min_detectable_tv(n, cells, level)
    assert 0 < eps <= 1
    assert stats.power(n, eps, cells, level) >= 0.8 > stats.power(n, eps - 2e-4, cells, level)
    assert min_detectable_tv(1, 64, 0.01) == math.inf  # boundary: even eps = 1 cannot reach the power


def _peaked_law(rng, S, Vv, out):
    rows = rng.dirichlet(np.full(Vv, 0.5), size=S) * rng.dirichlet(np.ones(S))[:, None] * (1 - out)
    law = np.append(rows.reshape(-1), out)
    return law / law.sum()


def test_every_bin_expects_at_least_five():
    """The bins law_test uses (read back from its ``cache``) expect >= 5 samples each, at n where the cap
    n / 10 and the light limit bind; the hand laws and peaked random ones."""
    rng = np.random.default_rng(49)
    laws = [(L1, V), (L2, V)] + [(_peaked_law(rng, int(rng.integers(2, 7)), 6, out), 6)
                                 for out in (0.0, 0.01, 0.04, 0.7) for _ in range(5)]
    smallest = math.inf
    for law, Vv in laws:
        for n in (100, 57, 41, 250):
            for x1_bins in (1, 2):
                counts = rng.multinomial(n, law)
                cache = {}
                r = law_test([law], [counts], Vv, n_bins=64, x1_bins=x1_bins, cache=cache)
                (labels,) = cache.values()
                mass = np.bincount(labels[labels >= 0], weights=law[labels >= 0])
                assert r.bins == mass.size and r.df == mass.size - 1
                assert mass.size <= max(2 * x1_bins, n // 10)
                smallest = min(smallest, float(n * mass.min()))
                assert n * mass.min() >= 5 - 1e-9, (n, x1_bins, mass)
    assert smallest < 6.5  # the cases reach near the bound, so a looser rule would show
    # boundary: the first bin light (test_bins_by_hand), in the score order; n = 100 allows 10 bins
    cache = {}
    r = law_test([LIGHT_FIRST], [np.array([1, 1, 9, 89])], 3, n_bins=64, x1_bins=1, scores=[LIGHT_FIRST_SCORE],
                 cache=cache)
    assert r.df == 1 and [lab.tolist() for lab in cache.values()] == [[0, 0, 0, 1]] * 2


# ---- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[72, 20, np.nan, 10, 30, 23, 20], [72, 20, np.inf, 10, 30, 23, 20],
                                 [72, 20, -25, 10, 30, 23, 20], [72, 20, 25.5, 10, 30, 23, 20]])
def test_law_test_refuses_bad_counts(bad):
    with pytest.raises(ValueError, match="counts must be"):
        law_test([L1], [np.array(bad)], V, **KW)


@pytest.mark.parametrize("law", [np.where(np.arange(7) == 2, np.nan, L1), L1 * np.array([1, 1, -1, 1, 1, 1, 1]),
                                 L1 * 0.9, np.where(np.arange(7) == 1, np.inf, L1)])
def test_law_test_refuses_bad_laws(law):
    with pytest.raises(ValueError, match="finite, non-negative array of cells summing to 1"):
        law_test([law], [C1], V, **KW)
    with pytest.raises(ValueError, match="finite, non-negative array of cells summing to 1"):
        make_bins(law, V, 4, x1_bins=2)


def test_refuses_nan_scores_and_bad_shapes():
    with pytest.raises(ValueError, match="score must not contain NaN"):
        law_test([L1], [C1], V, scores=[np.where(SC1 > 1, np.nan, SC1)], **KW)
    with pytest.raises(ValueError, match="score has 6 cells"):
        law_test([L1], [C1], V, scores=[SC1[:6]], **KW)
    with pytest.raises(ValueError, match="counts .* must match the law"):
        law_test([L1], [C2], V, **KW)
    with pytest.raises(ValueError, match="S \\* V \\+ 1 cells"):
        law_test([L1], [C1], 4, **KW)
    for laws, counts, scores in [([L1, L2], [C1], None), ([L1], [C1, C2], None), ([], [], None),
                                 ([L1, L2], [C1, C2], [SC1])]:
        with pytest.raises(ValueError, match="one law, one count array"):
            law_test(laws, counts, V, scores=scores, **KW)
    with pytest.raises(ValueError, match="one law and one alternative"):
        alternative_power([L1, L2], [L1], V, 100, **KW)
    with pytest.raises(ValueError, match="one law and one alternative"):
        alternative_power([L1], [L1], V, 100, scores=[SC1, SC2], **KW)
    with pytest.raises(ValueError, match="an alternative must have its law's cells"):
        alternative_power([L1], [L2], V, 100, **KW)
    with pytest.raises(ValueError, match="finite, non-negative"):
        alternative_power([L1], [L1 * 2], V, 100, **KW)


@pytest.mark.parametrize("name,kw", [("V", dict(V=0)), ("V", dict(V=True)), ("V", dict(V=1.0)),
                                     ("n_bins", dict(n_bins=0)), ("n_bins", dict(n_bins=1)),
                                     ("n_bins", dict(n_bins=-3)), ("n_bins", dict(n_bins=2.5)),
                                     ("x1_bins", dict(x1_bins=0))])
def test_refuses_bad_sizes(name, kw):
    args = dict(V=V, n_bins=4, x1_bins=2) | kw
    with pytest.raises(ValueError, match=f"{name} must be an int >= "):
        law_test([L1], [C1], args.pop("V"), **args)
    args = dict(V=V, n_bins=4, x1_bins=2) | kw
    with pytest.raises(ValueError, match=f"{name} must be an int >= "):
        alternative_power([L1], [L1], args.pop("V"), 100, **args)
    args = dict(V=V, n_bins=4, x1_bins=2) | kw
    with pytest.raises(ValueError, match=f"{name} must be an int >= "):
        make_bins(L1, args.pop("V"), args.pop("n_bins"), **args)


@pytest.mark.parametrize("kw", [dict(alpha=0), dict(alpha=1), dict(alpha=-0.1), dict(alpha=math.nan),
                                dict(eps=0), dict(eps=1.5), dict(eps=math.nan), dict(eps=math.inf),
                                dict(delta=0), dict(delta=math.nan), dict(power_target=1.0)])
def test_law_test_refuses_levels_outside_their_ranges(kw):
    with pytest.raises(ValueError, match="must lie in"):
        law_test([L1], [C1], V, **KW, **kw)


def test_other_public_functions_refuse():
    with pytest.raises(ValueError, match="single bin"):  # one bin at this n: nothing to test
        law_test([[1.0, 0, 0, 0, 0]], [[100, 0, 0, 0, 0]], 2, x1_bins=1)
    with pytest.raises(ValueError, match="single bin"):  # even with an impossible sample: refused, not worded
        law_test([[.99, .01, 0, 0, 0]], [[99, 0, 1, 0, 0]], 2, x1_bins=1)
    with pytest.raises(ValueError, match="single bin"):  # a NaN power is never returned
        alternative_power([[1., 0, 0, 0, 0]], [[.9, .1, 0, 0, 0]], 2, 100, x1_bins=1)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        alternative_power([L1], [L1], V, 0, **KW)
    for alpha in (0, 1, math.nan):
        with pytest.raises(ValueError, match="alpha must lie in"):
            alternative_power([L1], [L1], V, 100, alpha=alpha, **KW)
    with pytest.raises(ValueError, match="a prompt has 39 samples"):
        law_test([L1], [np.array([10, 5, 5, 5, 5, 5, 4])], V, **KW)  # boundary: 20 x1_bins = 40 needed
    assert law_test([L1], [np.array([10, 5, 5, 5, 5, 5, 5])], V, **KW).n == 40
    with pytest.raises(ValueError, match="need 1 <= x1_bins <= n_bins / 2"):
        make_bins(L1, V, 4, x1_bins=3)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        min_detectable_tv(0, 4, 0.01)
    with pytest.raises(ValueError, match="cells must be an int >= 2"):
        min_detectable_tv(100, 1, 0.01)
    with pytest.raises(ValueError, match="level and power_target"):
        min_detectable_tv(100, 4, math.nan)
    with pytest.raises(ValueError, match="prompts must be an int >= 1"):
        design_n(0)
    with pytest.raises(ValueError, match="need cells >= 2, eps in"):
        design_n(1, eps=math.nan)


def test_diagnose_and_greedy_refuse():
    with pytest.raises(ValueError, match="at least one candidate"):
        diagnose({}, [C1])
    with pytest.raises(ValueError, match="has 1 laws for 2 prompts"):
        diagnose({"target": [L1]}, [C1, C1])
    with pytest.raises(ValueError, match="a law must be finite"):
        diagnose({"target": [np.where(np.arange(7) == 0, np.nan, L1)]}, [C1])
    with pytest.raises(ValueError, match="a law must be finite, with the counts' 7 cells"):
        diagnose({"target": [L2]}, [C1])
    with pytest.raises(ValueError, match="counts must be one finite"):
        diagnose({"target": [L1]}, [np.where(np.arange(7) == 0, np.nan, C1)])
    with pytest.raises(ValueError, match="counts must be one finite"):
        diagnose({"target": []}, [])
    with pytest.raises(ValueError, match="2 speculative sequences against 1 plain"):
        greedy_divergences([[1], [2]], [[1]], lambda prefix: 0)


def _row(p_value, power, alpha=0.01):
    return LawTest(statistic=1.0, df=3, p_value=p_value, n=100, prompts=1, bins=4, impossible=0, tv=0.1,
                   tv_low=0.0, tv_high=0.3, alpha=alpha, eps=0.03, power=power, n_needed=1000)


@pytest.mark.parametrize("p", [math.nan, math.inf, -0.1, 1.5, None, "0.5"])
def test_verdict_refuses_non_finite_p(p):
    with pytest.raises(ValueError, match="no verdict without a finite p-value"):
        verdict(_row(p, 0.8))


@pytest.mark.parametrize("power", [math.nan, math.inf, None])
def test_verdict_refuses_non_finite_power(power):
    with pytest.raises(ValueError, match="no verdict without a stated power"):
        verdict(_row(0.5, power))


# ---- property: nothing reads "consistent" without a finite p-value and power -------------------


def _random_case(rng):
    Vv = int(rng.integers(1, 5))
    P = int(rng.integers(1, 4))
    laws, counts, scores = [], [], []
    for _ in range(P):
        S = int(rng.integers(1, 4))
        law = rng.dirichlet(np.full(S * Vv + 1, 0.7))
        law[rng.random(law.size) < 0.2] = 0.0
        law = law / law.sum() if law.sum() > 0 else np.eye(1, law.size, 0)[0]
        n = int(rng.choice([0, 30, 80, 120, 300, 300]))
        c = rng.multinomial(n, law).astype(np.float64)
        if rng.random() < 0.1:
            c[int(rng.integers(c.size))] += 1  # sometimes an impossible sample
        laws.append(law), counts.append(c), scores.append(np.log(law + 1e-3) - rng.random(law.size))
    kw = dict(alpha=float(rng.choice([0.01, 0.05, 0.5, 0.999])), eps=float(rng.choice([0.03, 0.3, 1.0])),
              n_bins=int(rng.choice([2, 4, 8, 64])), x1_bins=int(rng.choice([1, 2])))
    kind = rng.integers(16)
    i = int(rng.integers(P))
    if kind == 0:
        counts[i][int(rng.integers(counts[i].size))] = rng.choice([np.nan, np.inf, -np.inf, -1.0, 2.5])
    elif kind == 1:
        laws[i] = laws[i].copy()
        laws[i][int(rng.integers(laws[i].size))] = rng.choice([np.nan, np.inf, -0.1, 0.3])
    elif kind == 2:
        counts[i] = counts[i][:-1]
    elif kind == 3:
        counts = counts[:-1] if rng.random() < 0.5 else counts + [counts[0]]
    elif kind == 4:
        scores[i][int(rng.integers(scores[i].size))] = np.nan
    elif kind == 5:
        kw[str(rng.choice(["alpha", "eps"]))] = float(rng.choice([0.0, -1.0, 1.0, 2.0, np.nan, np.inf]))
    elif kind == 6:
        kw[str(rng.choice(["n_bins", "x1_bins"]))] = rng.choice([0, 1, -3, 2.5, True])
    elif kind == 7:
        Vv = rng.choice([0, True, Vv + 1, 1.0])
    return laws, counts, Vv, (scores if rng.random() < 0.5 else None), kw


def test_no_consistent_without_finite_p_and_power():
    rng = np.random.default_rng(2024)
    returned = refused = consistent = inconsistent = 0
    for _ in range(400):
        laws, counts, Vv, scores, kw = _random_case(rng)
        try:
            r = law_test(laws, counts, Vv, scores=scores, **kw)
        except (ValueError, TypeError):
            refused += 1
            continue
        returned += 1
        assert isinstance(r.p_value, float) and math.isfinite(r.p_value) and 0 <= r.p_value <= 1
        assert isinstance(r.power, float) and math.isfinite(r.power) and 0 <= r.power <= 1
        assert math.isfinite(r.statistic) and r.statistic >= -1e-9 and r.df >= 1
        assert 0 <= r.tv_low <= r.tv <= r.tv_high <= 1
        word = verdict(r)
        assert word in (CONSISTENT, INCONSISTENT)
        if word == CONSISTENT:
            consistent += 1
            assert r.p_value > r.alpha and r.impossible == 0
        else:
            inconsistent += 1
            assert r.p_value <= r.alpha
    assert returned > 60 and refused > 80 and consistent > 20 and inconsistent > 10, \
        (returned, refused, consistent, inconsistent)


def test_verdict_only_words_finite_p_and_power():
    rng = np.random.default_rng(7)
    values = [math.nan, math.inf, -math.inf, -0.5, 0.0, 1e-300, 0.01, 0.3, 1.0, 1.5, None]
    words = 0
    for _ in range(300):
        p, pw = rng.choice(len(values), 2)
        p, pw = values[p], values[pw]
        alpha = float(rng.choice([0.01, 0.3, 1e-300]))
        try:
            word = verdict(_row(p, pw, alpha))
        except ValueError:
            assert not (isinstance(p, float) and math.isfinite(p) and 0 <= p <= 1
                        and isinstance(pw, float) and math.isfinite(pw))
            continue
        words += 1
        assert isinstance(p, float) and math.isfinite(p) and 0 <= p <= 1 and isinstance(pw, float) and \
            math.isfinite(pw)
        assert (word == CONSISTENT) == (p > alpha)
    assert words > 50
