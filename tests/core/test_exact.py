"""Exact laws by enumeration: speculative decoding's law of the first n tokens equals the
target's own autoregressive law to 1e-12 (float64), for k = 1..4, n = 1..5, token and block
verification, several temperature / top-k / top-p settings, a stop token in the vocabulary."""

import itertools

import pytest
import torch

from specdec.core.exact import expected_accepted, marginal, one_step_law, spec_law, target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.toy import TableModel, random_table_model

F64 = torch.float64
TOL = 1e-12
CONFIGS = [
    SamplingConfig(1.0),
    SamplingConfig(0.6),
    SamplingConfig(1.4, top_k=2),
    SamplingConfig(0.9, top_p=0.7),
    SamplingConfig(1.2, top_k=3, top_p=0.8),
    SamplingConfig(0.0),  # greedy
]


def _pair(seed=0, V=4, stop=3):
    """A trigram target and a bigram draft over V tokens (the last is the stop token), with some
    zero-probability entries."""
    g = torch.Generator().manual_seed(seed)
    return (random_table_model(V, 2, g, stop=stop, zero_frac=0.15),
            random_table_model(V, 1, g, stop=stop, zero_frac=0.1))


def test_one_step_law_is_p():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(200, 7, generator=g, dtype=F64) * 2, -1)
    q = torch.softmax(torch.randn(200, 7, generator=g, dtype=F64) * 2, -1)
    p[:50, 0] = 0  # zero target probability
    p = p / p.sum(-1, keepdim=True)
    q[50:100] = p[50:100]  # equal distributions
    torch.testing.assert_close(one_step_law(p, q), p, atol=1e-15, rtol=0)
    pair = one_step_law(torch.tensor([1 / 3, 2 / 3], dtype=F64), torch.tensor([2 / 3, 1 / 3], dtype=F64))
    torch.testing.assert_close(pair, torch.tensor([1 / 3, 2 / 3], dtype=F64), atol=1e-15, rtol=0)


def test_toy_pair_expected_accepted_is_10_9_and_11_9():
    target = TableModel(torch.tensor([1 / 3, 2 / 3], dtype=F64).log())  # order 0: context-free
    draft = TableModel(torch.tensor([2 / 3, 1 / 3], dtype=F64).log())
    assert abs(expected_accepted(target, draft, 2, "token") - 10 / 9) < TOL
    assert abs(expected_accepted(target, draft, 2, "block") - 11 / 9) < TOL


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("method", ["token", "block"])
def test_spec_law_equals_target_law_all_k_and_n(method, cfg):
    target, draft = _pair()
    for n in range(1, 6):
        ref = target_law(target, n, cfg)
        for k in range(1, 5):
            if n == 5 or k in (1, 4):  # every k at n = 5 (it contains all shorter n as marginals)
                law = spec_law(target, draft, n, k, method, cfg)
                assert law.shape == (4,) * n
                err = (law - ref).abs().max().item()
                assert err <= TOL, f"n={n} k={k}: max |spec - target| = {err:.3g}"
                if n == 5:
                    for m in range(1, 5):
                        assert (marginal(law, m) - target_law(target, m, cfg)).abs().max() <= TOL


@pytest.mark.parametrize("method", ["token", "block"])
def test_larger_vocabulary_and_different_draft_settings(method):
    # V = 8 with stop token 7; the draft samples with its own temperature and top-k: any q works
    # as long as verification sees the q the drafts came from
    target, draft = _pair(seed=3, V=8, stop=7)
    tcfg, dcfg = SamplingConfig(0.8, top_p=0.9), SamplingConfig(1.5, top_k=5)
    law = spec_law(target, draft, 3, 2, method, tcfg, dcfg)
    assert (law - target_law(target, 3, tcfg)).abs().max() <= TOL


def test_stop_token_inside_the_draft():
    # the stop token is likely (its logits raised), so many draft blocks contain it mid-block
    target, draft = _pair(seed=5)
    t = target.table.clone()
    t[..., 3] += 1.5
    target = TableModel(t, stop=3)
    d = draft.table.clone()
    d[..., 3] += 2.0
    draft = TableModel(d, stop=3)
    for method in ("token", "block"):
        law = spec_law(target, draft, 4, 3, method)
        ref = target_law(target, 4)
        assert (law - ref).abs().max() <= TOL
        # after a stop, only stop: every sequence with a non-stop after a stop has law 0
        for seq in itertools.product(range(4), repeat=4):
            if 3 in seq[:-1] and any(x != 3 for x in seq[seq.index(3):]):
                assert law[seq] == 0
        assert ref[(0, 3, 3, 3)] > 0.001  # and stopping early does happen


def test_greedy_spec_law_is_the_target_greedy_point_mass():
    target, draft = _pair(seed=7)
    law = spec_law(target, draft, 5, 3, "token", SamplingConfig(0.0), SamplingConfig(1.0))
    assert law.max().item() == pytest.approx(1.0, abs=TOL)
    assert (law - target_law(target, 5, SamplingConfig(0.0))).abs().max() <= TOL


def test_block_is_never_worse_than_token_in_expected_accepted():
    for seed in range(6):
        target, draft = _pair(seed=seed)
        for k in (1, 2, 3):
            tok = expected_accepted(target, draft, k, "token")
            blk = expected_accepted(target, draft, k, "block")
            assert blk >= tok - TOL
            if k == 1:  # one draft: the two rules coincide
                assert abs(blk - tok) <= TOL


def test_spec_law_bad_input():
    target, draft = _pair()
    other, _ = _pair(V=5, stop=4)
    with pytest.raises(ValueError, match="vocabulary"):
        spec_law(target, other, 2, 1)
    with pytest.raises(ValueError, match="n >= 1"):
        spec_law(target, draft, 0, 1)
    with pytest.raises(ValueError, match="method"):
        spec_law(target, draft, 2, 1, "tree")
