"""specdec.core.acceptance: hand-worked cases, the truncated-geometric law against the cost model, a
seeded goodness-of-fit test with a power calculation and a negative control, and E[L] predicted
from per-step betas against the real `verify` on a context-dependent toy pair."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chi2, ncx2

from specdec.core.cost import expected_tokens
from specdec.core.acceptance import (accepted_length_counts, context_beta, fit_alpha, geometric_gof,
                                     position_acceptance, predicted_length_conditional, predicted_length_independent,
                                     truncated_geometric_pmf)
from specdec.core.stats import mean_interval, wilson_interval
from specdec.core.verify import verify

LEVEL = 1e-3
LADDER = (250, 500, 1000, 2000, 4000, 8000)


def test_context_beta_hand_case_and_checks():
    p, q = torch.tensor([1 / 3, 2 / 3]), torch.tensor([2 / 3, 1 / 3])
    assert context_beta(p, q).item() == pytest.approx(2 / 3)
    assert context_beta(p, p).item() == pytest.approx(1.0)
    assert context_beta(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])).item() == 0.0
    with pytest.raises(ValueError, match="sum to 1"):
        context_beta(torch.tensor([2.0, 1.0]), q)
    with pytest.raises(ValueError, match="same shape"):
        context_beta(p, torch.tensor([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="NaN"):
        context_beta(torch.tensor([float("nan"), 1.0]), q)


def test_wilson_textbook_value_and_checks():
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)  # Wilson (1927); e.g. Newcombe 1998, table I
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(1, 10, level=1.5)
    m, a, b = mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and a == pytest.approx(2 - 1.959964 / np.sqrt(3)) and b == pytest.approx(2 + 1.959964 / np.sqrt(3))
    with pytest.raises(ValueError):
        mean_interval([1.0])


def test_counts_and_position_rates_hand_case():
    assert accepted_length_counts([0, 2, 4, 4], 4).tolist() == [1, 0, 1, 0, 2]
    rows = position_acceptance([0, 2, 4, 1], 4)
    assert [r["accepted"] for r in rows] == [3, 2, 1, 1]
    assert [r["reached"] for r in rows] == [4, 3, 2, 1]
    assert rows[1]["rate"] == 0.5 and rows[1]["conditional"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        accepted_length_counts([0, 5], 4)
    with pytest.raises(ValueError):
        accepted_length_counts([0.5], 4)


def test_truncated_geometric_matches_the_cost_model():
    for alpha, k in [(0.8, 4), (0.2, 4), (0.5, 1), (0.97, 8), (0.0, 3), (1.0, 3)]:
        pmf = truncated_geometric_pmf(alpha, k)
        assert pmf.sum() == pytest.approx(1.0)
        assert float(((np.arange(k + 1) + 1) * pmf).sum()) == pytest.approx(expected_tokens(alpha, k))
    assert truncated_geometric_pmf(0.5, 2).tolist() == [0.5, 0.25, 0.25]
    with pytest.raises(ValueError):
        truncated_geometric_pmf(1.2, 3)


def test_fit_alpha_hand_case_and_recovery():
    assert fit_alpha([1, 0, 1, 0, 2]) == pytest.approx(10 / 12)
    rng = np.random.default_rng(1)
    n = np.cumprod(rng.random((20000, 4)) < 0.7, 1).sum(1)
    assert fit_alpha(accepted_length_counts(n, 4)) == pytest.approx(0.7, abs=0.01)  # sd ~ 0.003
    with pytest.raises(ValueError):
        fit_alpha([0, 0, 0])


def _mixture_pmf(alphas, weights, k):
    return sum(w * truncated_geometric_pmf(a, k) for a, w in zip(alphas, weights))


def _power_sample_size(true_pmf, k):
    """Smallest N of LADDER with power >= 0.99 at LEVEL against the best-fitting geometric law.

    Under the alternative the G statistic is approximately noncentral chi2(df, 2 N KL(true || fit)),
    fit = the geometric law at the limit of the MLE, df = k + 1 bins - 1 - 1 fitted."""
    a_star = fit_alpha(true_pmf)
    fit = truncated_geometric_pmf(a_star, k)
    kl = float((true_pmf * np.log(true_pmf / fit)).sum())
    df = k - 1
    crit = chi2.isf(LEVEL, df)
    for n in LADDER:
        power = ncx2.sf(crit, df, 2 * n * kl)
        if power >= 0.99:
            return n, power
    raise AssertionError("ladder too short for the requested power")


def _sample_counts(pmf, n, rng):
    return np.bincount(rng.choice(pmf.size, size=n, p=pmf), minlength=pmf.size)


def test_gof_accepts_the_geometric_law_and_rejects_heterogeneous_contexts():
    k = 4
    wrong = _mixture_pmf([0.3, 0.9], [0.5, 0.5], k)  # negative control: two kinds of context
    n, power = _power_sample_size(wrong, k)
    assert power >= 0.99
    rng = np.random.default_rng(20261130)
    null = geometric_gof(_sample_counts(truncated_geometric_pmf(0.6, k), n, rng))
    assert null["df"] == k - 1 and null["p_value"] > LEVEL
    alt = geometric_gof(_sample_counts(wrong, n, rng))
    assert alt["p_value"] < LEVEL, (n, alt)


def test_gof_with_given_alpha_and_pooling():
    res = geometric_gof([500, 250, 250], alpha=0.5)
    assert res["G"] == pytest.approx(0.0, abs=1e-12) and res["df"] == 2 and res["p_value"] == pytest.approx(1.0)
    tiny = geometric_gof([3, 1, 0, 0, 1], alpha=0.2)  # expected counts < 5 pooled into one bin
    assert tiny["bins"] == 1 and np.isnan(tiny["p_value"])


def test_rao_scott_design_effect_by_hand():
    """Two clusters of two samples each, all of a cluster in one cell: shares 1/2, between-cluster
    variance 2/1 * (1 + 1) / 4^2 = 1/4 against 1/2 * 1/2 / 4 = 1/16 -> d = 4 per cell, and
    delta = (1/2 * 4 + 1/2 * 4) / (2 - 1) = 4.  A histogram split into clusters in proportion has
    no between-cluster variance beyond it: delta 0 (the test then keeps delta 1).  One cluster with
    steps (the others empty): no variance between clusters can be estimated, so no test."""
    from specdec.core.stats import rao_scott_deff

    assert rao_scott_deff([[2, 0], [0, 2]], [0.5, 0.5]) == pytest.approx(4.0)
    # data away from the tested law: shares 1/2, 1/2 against pi = 1/4, 3/4; V = 2 * 2 / 8^2 = 1/16 per
    # cell, delta = 8 (1/16) / (1/4) + 8 (1/16) / (3/4) = 8/3 (weighting d_j by 1 - pi_j would give 2)
    assert rao_scott_deff([[3, 1], [1, 3]], [0.25, 0.75]) == pytest.approx(8 / 3)
    assert rao_scott_deff([[20, 10], [40, 20]], [2 / 3, 1 / 3]) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        rao_scott_deff([[1, 2]], [0.5, 0.5])  # one cluster: no variance between clusters
    assert np.isnan(geometric_gof([[30, 10, 5, 5], [0, 0, 0, 0]])["p_value"])  # one prompt with steps: no test
    flat = geometric_gof([290, 105, 38, 10, 23])
    split = geometric_gof([[145, 52, 19, 5, 12], [145, 53, 19, 5, 11]])
    assert split["G"] == pytest.approx(flat["G"]) and split["deff"] == 1.0
    assert split["p_value"] == pytest.approx(flat["p_value"]) == pytest.approx(split["p_independent"])


def test_clustered_gof_keeps_its_level_where_the_independent_test_does_not():
    """Seeded simulation, 300 data sets of 12 prompts x 60 steps, k = 4.  Null: each prompt's steps
    are 15 truncated-geometric(0.6) draws, each repeated 4 times (a prompt's steps share their
    context).  The test that treats steps as independent rejects at 5% in far more than 5% (negative
    control: observed ~0.6); the Rao-Scott-corrected test stays within 3.2 binomial standard errors
    of 5% (<= 0.09).  It keeps its level with independent steps too, and its power against a
    non-geometric law (acceptance 0.8 at position 1, 0.45 after; the same clustering) is >= 0.9."""
    rng = np.random.default_rng(20261201)
    k, reps = 4, 300
    acc = np.array([0.8, 0.45, 0.45, 0.45])
    reach = np.concatenate([[1.0], np.cumprod(acc)])
    laws = {"geometric": truncated_geometric_pmf(0.6, k), "two-rate": np.append(reach[:-1] * (1 - acc), reach[-1])}

    def rejections(law, repeat):
        naive = corrected = 0
        for _ in range(reps):
            per = np.stack([np.bincount(np.repeat(rng.choice(k + 1, size=60 // repeat, p=laws[law]), repeat),
                                        minlength=k + 1) for _ in range(12)])
            g = geometric_gof(per)
            naive, corrected = naive + (g["p_independent"] < 0.05), corrected + (g["p_value"] < 0.05)
        return naive / reps, corrected / reps

    naive, corrected = rejections("geometric", 4)
    assert naive > 0.4 and corrected <= 0.09
    assert rejections("geometric", 1)[1] <= 0.09
    assert rejections("two-rate", 4)[1] >= 0.9


def _toy_tables(V, k, seed):
    """Context-dependent toy pair: p_i(. | x_{i-1}), q_i(. | x_{i-1}) for positions 0..k."""
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(2.0 * torch.randn(k + 1, V + 1, V, generator=g, dtype=torch.float64), -1)  # row V = start
    q = torch.softmax(0.6 * torch.log(p) + 1.0 * torch.randn(k + 1, V + 1, V, generator=g, dtype=torch.float64), -1)
    return p, q


def _exact(p, q, k, V):
    """E[L] and the expectation of the stop-ignoring predictor 1 + sum_i beta_i, by enumeration."""
    el, naive = 1.0, 1.0
    for i in range(k):  # position i+1 is reached with prob prod a_j over the drafted prefix
        for prefix in itertools.product(range(V), repeat=i):
            prev, w_q, reach = V, 1.0, 1.0
            for j, x in enumerate(prefix):
                w_q *= float(q[j, prev, x])
                reach *= min(1.0, float(p[j, prev, x] / q[j, prev, x]))
                prev = x
            beta = float(torch.minimum(p[i, prev], q[i, prev]).sum())
            el += w_q * reach * beta
            naive += w_q * beta
    return el, naive


def test_predicted_length_matches_verify_and_rejects_a_stop_ignoring_predictor():
    V, k = 5, 3
    p, q = _toy_tables(V, k, seed=3)
    el, naive = _exact(p, q, k, V)
    bias = naive - el
    # power: |mean(L - pred)| / se > 4 rejects; se <= k / sqrt(S) since |L - pred| <= k.  Under the
    # negative control the mean is `bias`, so power >= 0.99 needs bias / se >= 4 + 2.33.
    S = int(np.ceil((6.33 * k / bias) ** 2))
    assert bias > 0.05 and S <= 200_000
    g = torch.Generator().manual_seed(11)
    prev = torch.full((S,), V)
    drafts, qs, ps = [], [], []
    for i in range(k + 1):
        ps.append(p[i, prev])  # (S, V)
        if i < k:
            qi = q[i, prev]
            x = torch.multinomial(qi, 1, generator=g)[:, 0]
            drafts.append(x)
            qs.append(qi)
            prev = x
    drafts, qs, ps = torch.stack(drafts, 1), torch.stack(qs, 1), torch.stack(ps, 1)  # (S,k), (S,k,V), (S,k+1,V)
    res = verify(drafts, qs, ps, method="token", generator=g)
    L = res.num_accepted.numpy() + 1.0
    beta = torch.minimum(ps[:, :k], qs).sum(-1).numpy()
    a = torch.clamp(ps[:, :k].gather(-1, drafts[..., None])[..., 0] / qs.gather(-1, drafts[..., None])[..., 0], max=1).numpy()
    pred = predicted_length_conditional(a, beta)
    m, lo, hi = mean_interval(L - pred, level=1 - 2 * 3.2e-5)  # +-4 se
    assert lo < 0 < hi, (m, lo, hi)
    assert abs(L.mean() - el) < 4 * L.std() / np.sqrt(S)  # the exact law by enumeration
    wrong = 1.0 + beta.sum(1)  # negative control: ignores that a rejection ends the step
    m2, lo2, hi2 = mean_interval(L - wrong, level=1 - 2 * 3.2e-5)
    assert hi2 < 0, (m2, lo2, hi2)
    # the independent-position predictor is the cost model's formula on these betas
    assert predicted_length_independent(beta[:2]).tolist() == pytest.approx(
        [1 + b[0] + b[0] * b[1] + b[0] * b[1] * b[2] for b in beta[:2]])


def test_predictors_reject_bad_input():
    with pytest.raises(ValueError):
        predicted_length_conditional([[0.5]], [[0.5, 0.5]])
    with pytest.raises(ValueError):
        predicted_length_independent([[1.5]])
    with pytest.raises(ValueError):
        predicted_length_independent([0.5, 0.5])


def test_summarize_steps_hand_case_and_distinct_ngrams():
    from specdec.core.acceptance import distinct_ngram_ratio, summarize_steps

    steps = [{"k": 2, "n": np.array([2, 0]), "beta": np.array([[1.0, 1.0], [0.5, 0.5]]),
              "a": np.array([[1.0, 1.0], [0.0, 1.0]])},
             {"k": 1, "n": np.array([1]), "beta": np.array([[1.0]]), "a": np.array([[1.0]])}]  # k differs: left out
    s = summarize_steps(steps, k=2)
    assert s["steps"] == 2 and s["counts"] == [1, 0, 1]
    assert s["alpha_mle"] == pytest.approx(2 / 3) and s["el_measured"] == 2.0
    assert s["el_pred_conditional"] == pytest.approx((3.0 + 1.5) / 2)  # 1+1+1 and 1+0.5+0*0.5
    assert s["el_pred_independent"] == pytest.approx((3.0 + 1.75) / 2)
    assert s["beta_pos_1"] == 0.75
    with pytest.raises(ValueError, match="k = 3"):
        summarize_steps(steps, k=3)
    assert distinct_ngram_ratio([1, 2, 1, 2, 1, 2], n=2) == pytest.approx(0.4)
    assert distinct_ngram_ratio([1, 2, 3, 4], n=2) == 1.0
    with pytest.raises(ValueError):
        distinct_ngram_ratio([1], n=2)


def test_float32_rounding_of_beta_is_admitted_and_clipped():
    """beta of a float32 distribution with itself can exceed 1 by ~1e-7: admitted and clipped to 1;
    a value beyond rounding is still refused."""
    assert predicted_length_independent([[1 + 5e-7]]).tolist() == [2.0]
    with pytest.raises(ValueError, match="probabilities"):
        predicted_length_independent([[1.001]])


def test_summarize_steps_resamples_prompts_when_it_knows_them():
    """Two prompts, one that accepts everything and one that accepts nothing: steps within a prompt
    are perfectly correlated, so an interval over steps (Wilson) is far too narrow; the bootstrap
    over prompts says how little two prompts tell.  Without rows the old step-level interval stays."""
    from specdec.core.acceptance import summarize_steps
    from specdec.core.stats import cluster_ratio_interval, wilson_interval

    assert cluster_ratio_interval([3, 1], [4, 4]) == (0.5, 0.25, 0.75)
    assert cluster_ratio_interval([2.0], [4.0])[0] == 0.5  # one cluster: no interval
    with pytest.raises(ValueError):
        cluster_ratio_interval([1, 2], [0, 0])
    k = 2
    steps = [{"k": k, "rows": np.array([0, 1]), "n": np.array([2, 0]), "beta": np.full((2, k), 0.5),
              "a": np.full((2, k), 0.5)} for _ in range(50)]
    s = summarize_steps(steps, k)
    assert s["interval_unit"] == "prompts" and s["alpha_mle"] == pytest.approx(2 / 3)  # 100 / (100 + 50)
    w_lo, w_hi = wilson_interval(100, 150, 0.95)
    assert s["alpha_hi"] - s["alpha_lo"] > 5 * (w_hi - w_lo)  # resampling 2 prompts: from 0 to 1
    flat = summarize_steps([{key: v for key, v in st.items() if key != "rows"} for st in steps], k)
    assert flat["interval_unit"] == "steps" and flat["alpha_lo"] == pytest.approx(w_lo)
    # the G-test on the histograms per prompt: prompt 0 always N = 2, prompt 1 always N = 0
    assert s["counts_by_prompt"] == [[0, 0, 50], [50, 0, 0]] and "counts_by_prompt" not in flat
    assert s["gof_deff"] > 1 and s["gof_p"] > s["gof_p_independent"] and flat["gof_deff"] == 1.0
