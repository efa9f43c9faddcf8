"""specdec.peers.laws and the statistics of specdec.peers.conformance on a tiny model, where the
law of the first two tokens is computed by brute force (a full forward per sequence, no cache)."""

import math

import numpy as np
import pytest
import torch

from specdec.core.rules.positional import first_token_law
from specdec.core.sampling import SamplingConfig
from specdec.core.verify import accept_prob, residual
from specdec.peers.conformance import alternative_power, design_n, law_test, make_bins, verdict
from specdec.peers.diagnosis import diagnose
from specdec.peers.laws import (CANDIDATES, candidate_joint, enumerate_prompt, joint_cells, position_law,
                                ratio_score, support_of, target_joint)

PROMPT = [3, 7, 1, 9]
CONFIGS = [SamplingConfig(1.0), SamplingConfig(0.7, top_p=0.9), SamplingConfig(1.3, top_k=5)]


@torch.inference_mode()
def _brute_joint(model, cfg):
    V = model.config.vocab_size
    x = torch.cat([torch.tensor(PROMPT).expand(V, -1), torch.arange(V).unsqueeze(1)], 1)
    z = model(input_ids=x).logits.double()  # (V, L + 1, V)
    p1, p2 = cfg(z[0, -2]), cfg(z[:, -1])
    return (p1.unsqueeze(1) * p2).reshape(-1).numpy()


@pytest.mark.parametrize("cfg", CONFIGS)
def test_joint_equals_brute_force(tiny_pair, cfg):
    target, draft = tiny_pair
    ctx = enumerate_prompt(target, draft, PROMPT, cfg, mass_cut=0.0)
    V = ctx.V
    brute = _brute_joint(target, cfg)
    law = target_joint(ctx, cfg)
    full = np.zeros(V * V)
    for s, x1 in enumerate(ctx.support.tolist()):
        full[x1 * V:(x1 + 1) * V] = law[s * V:(s + 1) * V]
    assert abs(law.sum() - 1) < 1e-12 and law[-1] < 1e-12
    assert np.abs(full - brute).max() < 1e-6  # float32 forwards, cached against uncached


def test_cut_cell_is_the_exact_mass_left_out(tiny_pair):
    target, draft = tiny_pair
    cfg = SamplingConfig(1.0)
    ctx = enumerate_prompt(target, draft, PROMPT, cfg, mass_cut=0.3)
    p1 = cfg(ctx.target1.unsqueeze(0))[0]
    law = target_joint(ctx, cfg)
    assert ctx.support.numel() < ctx.V
    assert abs(law[-1] - (1 - float(p1[ctx.support].sum()))) < 1e-12 and law[-1] <= 0.3
    assert float(p1[ctx.support].sum()) - float(p1[ctx.support[-1]]) < 0.7  # the fewest tokens reaching 0.7
    cells = joint_cells(ctx, [[int(ctx.support[1]), 5, 0], [int(torch.argmin(p1)), 2, 0]])
    assert cells.tolist() == [1 * ctx.V + 5, ctx.support.numel() * ctx.V]
    with pytest.raises(ValueError, match="mass_cut"):
        support_of(p1, 1.0)
    with pytest.raises(ValueError, match="outside"):
        joint_cells(ctx, [[0, ctx.V]])


def _token_parts(d, q, p):
    k = d.shape[1]
    px, qx = p[:, :k].gather(-1, d.unsqueeze(-1)).squeeze(-1), q.gather(-1, d.unsqueeze(-1)).squeeze(-1)
    return accept_prob(px, qx), residual(p[:, :k], q, normalize=False)


def _resample_parts(d, q, p):
    a, _ = _token_parts(d, q, p)
    return a, p[:, :d.shape[1]].clone()


@pytest.mark.parametrize("cfg", CONFIGS[:2])
def test_candidates_are_first_token_law(tiny_pair, cfg):
    """Each closed form equals core.positional.first_token_law with the rule spelled out."""
    target, draft = tiny_pair
    ctx = enumerate_prompt(target, draft, PROMPT, cfg, mass_cut=0.0)
    lt, lq = ctx.target2[:6], ctx.draft2[:6]
    p, q = cfg(lt), cfg(lq)
    q13 = SamplingConfig(1.3, cfg.top_k, cfg.top_p)(lq)
    for c in range(6):
        onehot = torch.nn.functional.one_hot(q[c].argmax(), ctx.V).double()
        want = {"draft law": q[c], "residual omitted": first_token_law(_resample_parts, p[c], q[c])[0],
                "argmax drafts": first_token_law(_token_parts, p[c], q[c], onehot)[0],
                "q at T'": first_token_law(_token_parts, p[c], q[c], q13[c])[0], "target": p[c],
                "p at T'": SamplingConfig(1.3, cfg.top_k, cfg.top_p)(lt[c])}  # an exact rule run on p at T'
        assert set(want) == set(CANDIDATES)
        for name in CANDIDATES:
            got = position_law(name, lt[c], lq[c], cfg, t_other=1.3)
            assert torch.allclose(got, want[name], atol=1e-12), name
    with pytest.raises(ValueError, match="unknown candidate"):
        position_law("no such rule", lt, lq, cfg)


def test_bins_cover_the_law_in_near_equal_masses(tiny_pair):
    target, draft = tiny_pair
    cfg = SamplingConfig(0.7, top_p=0.9)
    ctx = enumerate_prompt(target, draft, PROMPT, cfg)
    law = target_joint(ctx, cfg)
    labels = make_bins(law, ctx.V, 16)
    assert np.all(labels[law == 0] == -1) and np.all(labels[law > 0] >= 0)
    mass = np.bincount(labels[labels >= 0], weights=law[labels >= 0])
    assert 2 <= mass.size <= 17 and mass.min() >= 0.5 / 16 - 1e-12 and abs(mass.sum() - 1) < 1e-12
    with pytest.raises(ValueError, match="x1_bins"):
        make_bins(law, ctx.V, 4, x1_bins=4)
    score = ratio_score(ctx, cfg)  # another order: the same bins' total, the same impossible cells
    l2 = make_bins(law, ctx.V, 16, score)
    assert np.all((l2 == -1) == (law == 0)) and not np.array_equal(l2, labels)


def test_law_test_on_exact_samples_and_a_shifted_law(tiny_pair):
    """Samples drawn from the exact law pass; samples from the draft's law fail; the power and the
    words follow; n from design_n.  At T = 0.1 the random-weight models' laws are far apart (TV ~0.5;
    at T = 1 both are near uniform)."""
    target, draft = tiny_pair
    cfg = SamplingConfig(0.1)
    ctx = enumerate_prompt(target, draft, PROMPT, cfg)
    law = target_joint(ctx, cfg)
    alt = candidate_joint(ctx, cfg, "draft law")
    n = design_n(1, eps=0.1, n_bins=16)
    rng = np.random.default_rng(0)
    good = np.bincount(rng.choice(law.size, n, p=law), minlength=law.size)
    bad = np.bincount(rng.choice(law.size, n, p=alt), minlength=law.size)
    r = law_test([law], [good], ctx.V, eps=0.1, n_bins=16)
    assert r.p_value > 0.01 and r.power >= 0.8 and r.n_needed <= n and r.tv_low == 0.0
    assert verdict(r) == "consistent"
    assert alternative_power([law], [alt], ctx.V, n, n_bins=16)["power"] > 0.99
    rb = law_test([law], [bad], ctx.V, eps=0.1, n_bins=16)
    assert rb.p_value < 1e-6 and verdict(rb) == "inconsistent"
    rows = diagnose({name: [candidate_joint(ctx, cfg, name)] for name in CANDIDATES[:3]}, [bad])
    assert rows[0]["candidate"] == "draft law" and rows[1]["deficit"] > 10
    with pytest.raises(ValueError, match="samples"):
        law_test([law], [np.eye(1, law.size, 0)[0] * 5], ctx.V)


def test_impossible_tokens_fail():
    law = np.array([0.5, 0.5, 0.0, 0.0, 0.0])  # V = 2, S = 2: x1 = support[0] then support[1], the cut
    c = np.array([40, 40, 0, 1, 0])
    r = law_test([law], [c], 2)
    assert r.impossible == 1 and r.p_value == 0.0 and verdict(r) == "inconsistent"


def test_power_statement_is_the_stats_one():
    from specdec.core.stats import power
    n = design_n(4, eps=0.03, n_bins=64)
    assert power(4 * n, 0.03, 4 * 63 + 1, 0.01) >= 0.8 > power(4 * n - 40, 0.03, 4 * 63 + 1, 0.01)
    assert math.isfinite(n)
