"""Sampling evidence: the law of the first two generated tokens is the target's exact law.

Reference: the target's own processed probabilities, P(a, b) = p(a | prompt) p(b | prompt, a),
enumerated over all V^2 pairs (V = 16).  Sample: N rows of the same prompt decoded in ONE ragged
batch (rows accept different counts), first two tokens of each row.  Test: G-test (log-likelihood
ratio), cells with expected count < 5 pooled, level 1e-3.

Power: the negative control "resample from p" (on rejection draw from p instead of the residual)
has, at k = 1, the exact two-token law
    W(a, b) = min(p1, q1)(a) p2(b|a) + (1 - beta1) p1(a) [min(p2, q2)(b|a) + (1 - beta2(a)) p2(b|a)],
and the G statistic under it is approximately noncentral chi2(df, 2 N KL(W || P)).  N is the
smallest of a fixed ladder with power >= 0.99 at level 1e-3; the test asserts that power and that
the wrong variant is rejected.
"""

import numpy as np
import pytest
import torch
from scipy.stats import chi2, ncx2, power_divergence

from specdec.engine.decode import generate
from specdec.core.sampling import process_logits
from specdec.core.rules.variants import resample_from_p_sampled

V = 16
PROMPT = torch.tensor([1, 2, 3])
LEVEL = 1e-3
LADDER = (1000, 2000, 4000, 8000, 16000)
SETTINGS = [dict(temperature=1.0), dict(temperature=1.0, top_k=3), dict(temperature=0.8, top_p=0.7)]


def _gpt2(seed, noise=0.0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)  # model construction only, in the test
    m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V, n_positions=64,
                                   bos_token_id=0, eos_token_id=0, initializer_range=0.5)).eval()
    if noise:
        g = torch.Generator().manual_seed(seed + 100)
        with torch.no_grad():
            for w in m.parameters():
                w.add_(noise * w.std() * torch.randn(w.shape, generator=g))
    return m


@pytest.fixture(scope="module")
def pair():
    # the draft is a perturbed copy of the target: overlap beta ~ 0.4-0.8, like a real pair
    return _gpt2(0), _gpt2(0, noise=0.2)


def _laws(tgt, dr, kw):
    """Exact two-token laws: the target's P (V, V) and the wrong variant's W at k = 1."""
    with torch.no_grad():
        def probs(m, pre):
            return process_logits(m(input_ids=pre).logits[:, -1].double(), **kw)  # (N, V)
        p1, q1 = probs(tgt, PROMPT[None])[0], probs(dr, PROMPT[None])[0]
        pre2 = torch.cat([PROMPT.repeat(V, 1), torch.arange(V)[:, None]], 1)  # (V, 4)
        p2, q2 = probs(tgt, pre2), probs(dr, pre2)  # (V, V): row a is the law of b after a
    true = p1[:, None] * p2
    m2 = torch.minimum(p2, q2)
    w2 = m2 + (1 - m2.sum(-1, keepdim=True)) * p2
    m1 = torch.minimum(p1, q1)
    wrong = m1[:, None] * p2 + (1 - m1.sum()) * p1[:, None] * w2
    return true.flatten().numpy(), wrong.flatten().numpy()


def _pool(true):
    """Cell map: cells expected below 5 at the smallest N pooled into one extra cell; impossible
    cells (probability 0) in a second extra cell, kept out of the test and checked apart."""
    cells = np.where(true * LADDER[0] >= 5, np.arange(true.size), true.size)
    return np.where(true > 0, cells, true.size + 1)


def _pooled(x, cells, n_cells):
    return np.bincount(cells, weights=x, minlength=n_cells)


def _power_n(true, wrong):
    cells = _pool(true)
    keep = np.unique(cells[cells <= true.size])
    pt, pw = _pooled(true, cells, true.size + 2)[keep], _pooled(wrong, cells, true.size + 2)[keep]
    df = keep.size - 1
    kl = float(np.sum(pw[pw > 0] * np.log(pw[pw > 0] / pt[pw > 0])))
    crit = chi2.ppf(1 - LEVEL, df)
    for n in LADDER:
        power = ncx2.sf(crit, df, 2 * n * kl)
        if power >= 0.99:
            return n, power
    return LADDER[-1], power


def _gtest(tokens, true):
    pairs = np.array([t[:2].tolist() for t in tokens])  # (N, 2)
    counts = np.bincount(pairs[:, 0] * V + pairs[:, 1], minlength=V * V).astype(float)
    cells = _pool(true)
    if counts[true == 0].sum() > 0:
        return 0.0  # an outcome the target can never produce
    keep = np.unique(cells[cells <= true.size])
    obs = _pooled(counts, cells, true.size + 2)[keep]
    exp = _pooled(true, cells, true.size + 2)[keep] * len(pairs)
    return power_divergence(obs, exp, lambda_="log-likelihood").pvalue


def _sample(tgt, dr, kw, n, k, method, seed, verifier=None):
    g = torch.Generator().manual_seed(seed)
    out = generate(tgt, PROMPT.repeat(n, 1), drafter=dr, k=k, method=method, max_new_tokens=k + 1,
                   generator=g, verifier=verifier, **kw)
    assert all(len(t) == k + 1 for t in out.tokens)
    return out.tokens


@pytest.mark.parametrize("kw", SETTINGS, ids=["T1", "T1-topk3", "T0.8-topp0.7"])
def test_first_two_tokens_follow_target_law(pair, kw):
    tgt, dr = pair
    true, wrong = _laws(tgt, dr, kw)
    n, power = _power_n(true, wrong)
    assert power >= 0.99, f"no N in {LADDER} gives power 0.99 (got {power:.3f} at {n})"
    for i, (k, method) in enumerate([(1, "token"), (3, "token"), (3, "block")]):
        pval = _gtest(_sample(tgt, dr, kw, n, k, method, seed=10 + i), true)
        assert pval > LEVEL, f"k={k} {method}: G-test p = {pval:.2e} with N = {n}"
    # negative control: the same test, same N, must reject resampling from p (passed in as the verifier)
    pval = _gtest(_sample(tgt, dr, kw, n, 1, "token", seed=99, verifier=resample_from_p_sampled), true)
    assert pval < LEVEL, f"wrong variant not detected: p = {pval:.3f} (N = {n}, power {power:.3f})"


def test_ar_baseline_follows_target_law(pair):
    """The baseline shares the sampling code: its first two tokens follow the same exact law."""
    tgt, dr = pair
    kw = SETTINGS[1]
    true, wrong = _laws(tgt, dr, kw)
    n, _ = _power_n(true, wrong)
    out = generate(tgt, PROMPT.repeat(n, 1), max_new_tokens=2, generator=torch.Generator().manual_seed(3), **kw)
    assert _gtest(out.tokens, true) > LEVEL
