"""Multi-draft verification (`specdec.core.rules.multidraft.verify_multi`) on context-dependent tables with
n >= 2 drafts of k >= 3 tokens: outcome for outcome against the documented algorithm read with the
documented order of uniforms, a hand-worked step where a dead draft's later token matches, and the
sampled outcomes against the exact law of `multi_step_chunks`.  The law over whole generations and
the optimal bound are in test_alternatives_rules.py."""

import numpy as np
import pytest
import torch

from specdec.core.rules.multidraft import multi_step_chunks, verify_multi
from specdec.core.sampling import SamplingConfig, sample_inverse_cdf
from specdec.core.stats import gof_test, sample_size
from specdec.core.toy import random_table_model
from specdec.core.verify import accept_prob, residual

F64 = torch.float64
CFG = SamplingConfig(1.0)


def _chains(T, D, n: int, k: int, N: int, g):
    """N rows of n independent draft chains of k tokens from D, with each chain's own q and p rows:
    drafts (N, n, k), q (N, n, k, V), p (N, n, k+1, V) -- row j conditions on chain j's prefix."""
    chains = []
    for _ in range(n):
        ctx = torch.zeros(N, 0, dtype=torch.long)
        for _ in range(k):
            ctx = torch.cat([ctx, torch.multinomial(D.probs_for(ctx, CFG), 1, generator=g)], 1)
        chains.append(ctx)
    q = torch.stack([torch.stack([D.probs_for(c[:, :i], CFG) for i in range(k)], 1) for c in chains], 1)
    p = torch.stack([torch.stack([T.probs_for(c[:, :i], CFG) for i in range(k + 1)], 1) for c in chains], 1)
    return torch.stack(chains, 1), q, p


def _documented(d, q, p, u):
    """The module docstring's recursive rejection sampling for ONE row, read literally: at position i
    the candidates are the drafts whose tokens so far equal the emitted prefix, tried in draft order,
    candidate j with uniform u[i n + j]; each rejection replaces the target row by its residual; the
    final uniform u[k n] draws the residual after the last rejection, or the bonus after k kept.
    Returns (kept, tokens)."""
    n, k = d.shape
    out = []
    for i in range(k):
        alive = [j for j in range(n) if d[j, :i].tolist() == out]
        pc, qc = p[alive[0], i], q[alive[0], i]
        got = None
        for j in alive:
            x = int(d[j, i])
            if float(u[i * n + j]) < float(accept_prob(pc[x], qc[x])):
                got = x
                break
            pc = residual(pc, qc)
        if got is None:
            return i, out + [int(sample_inverse_cdf(pc, u[k * n]))]
        out.append(got)
    alive = [j for j in range(n) if d[j].tolist() == out]
    return k, out + [int(sample_inverse_cdf(p[alive[0], k], u[k * n]))]


@pytest.mark.parametrize("n,k", [(2, 3), (3, 3), (3, 4)])
def test_outcome_for_outcome_as_documented_with_the_documented_uniforms(n, k):
    """Random context-dependent trigram tables over V = 3 (so drafts often die and later share a
    token with the emitted prefix), 1500 rows, uniforms injected: verify_multi equals the documented
    algorithm in every row.  Exact, not statistical: a dead draft revived, or a uniform reused
    across positions, changes some rows' outcomes.  Asserted so the test has teeth: many rows reach
    a position where a draft that died earlier has the same token as the emitted one there."""
    g = torch.Generator().manual_seed(10 * n + k)
    T, D = random_table_model(3, 2, g), random_table_model(3, 2, g)
    N = 1500
    d, q, p = _chains(T, D, n, k, N, g)
    u = torch.rand(N, k * n + 1, generator=g, dtype=F64)
    res = verify_multi(d, q, p, uniforms=u)
    revivable = 0
    for b in range(N):
        kept, toks = _documented(d[b], q[b], p[b], u[b])
        assert res.num_accepted[b].item() == kept and res.tokens[b, :kept + 1].tolist() == toks, f"row {b}"
        assert (res.tokens[b, kept + 1:] == -1).all()
        dead = [j for j in range(n) if d[b, j, 0] != toks[0]]
        revivable += any(d[b, j, i] == toks[i] for j in dead for i in range(1, kept))
    assert revivable > N // 50


def test_a_dead_draft_stays_dead_hand_worked():
    """n = 2, k = 3, V = 3; draft 0 = [0, 1, 2], draft 1 = [1, 1, 0], every row of q uniform.
    Position 0: candidate 0 (token 0) kept (u = 0 < a); draft 1 (token 1) dies.  Position 1: draft 0's
    token 1 kept (u = 0).  Position 2: p_2 = [.5, .5, 0] after [0, 1], so a(2) = 0: draft 0 rejected;
    the residual [p_2 - q]+ = [1/6, 1/6, 0] (normalized [.5, .5, 0]) is drawn at the final uniform .9
    -> token 1, two drafts kept.  Draft 1 has token 1 at position 1 too, but it died at position 0:
    revived, it would be tried at position 2 with token 0 (a = min(1, .5 / (1/3)) = 1, its uniform
    0) and kept, giving [0, 1, 0] and a bonus.  Uniform columns i n + j: [0, 0, | 0, 0, | .5, 0, | .9]."""
    third = torch.full((3,), 1 / 3, dtype=F64)
    d = torch.tensor([[[0, 1, 2], [1, 1, 0]]])
    q = third.expand(1, 2, 3, 3)
    p = torch.stack([third, third, torch.tensor([0.5, 0.5, 0.0], dtype=F64), third]).expand(1, 2, 4, 3)
    u = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.9]], dtype=F64)
    r = verify_multi(d, q, p, uniforms=u)
    assert r.num_accepted.tolist() == [2] and r.tokens.tolist() == [[0, 1, 1, -1]]


def test_each_position_has_its_own_uniforms_hand_worked():
    """n = 2, k = 3, one draft block repeated: both drafts [0, 0, 0], every q row [.5, .5, 0], every
    p row [.25, .25, .5] (a(0) = .5 at every position, the residual after a rejection [0, 0, 1]).
    Uniforms: position 0 [.4, .9] (candidate 0 kept), position 1 [.6, .1] (candidate 0 rejected,
    candidate 1 judged against the residual [0, 0, 1]: a = 0, rejected), final .3 -> token 2.
    So: 1 kept, tokens [0, 2].  Reusing position 0's uniforms at position 1 would keep a second 0."""
    d = torch.zeros(1, 2, 3, dtype=torch.long)
    q = torch.tensor([0.5, 0.5, 0.0], dtype=F64).expand(1, 2, 3, 3)
    p = torch.tensor([0.25, 0.25, 0.5], dtype=F64).expand(1, 2, 4, 3)
    u = torch.tensor([[0.4, 0.9, 0.6, 0.1, 0.0, 0.0, 0.3]], dtype=F64)
    r = verify_multi(d, q, p, uniforms=u)
    assert r.num_accepted.tolist() == [1] and r.tokens.tolist() == [[0, 2, -1, -1]]


def test_sampled_outcomes_follow_the_exact_law_of_the_step():
    """One draft block (n = 2, k = 3, V = 3, context-dependent tables, drawn once) verified N times
    with a seeded generator; the outcome (tokens emitted) against its exact law from
    `multi_step_chunks` by chi-square.  Power: N = sample_size(0.03, cells) gives power 0.99 at level
    1e-3 against any law at TV >= 0.03.  Negative control: the same counts against a law on the same
    outcomes at TV 0.05 from the exact one (mixed with the uniform law on them) -- must be rejected."""
    g = torch.Generator().manual_seed(4)
    T, D = random_table_model(3, 2, g), random_table_model(3, 2, g)
    d, q, p = _chains(T, D, 2, 3, 1, g)

    def law(dd, qq, pp):
        cells = {}
        for _, toks, prob in multi_step_chunks(dd, qq, pp):
            for t, pr in zip(toks.tolist(), prob.tolist()):
                if pr > 0:
                    cells[tuple(t)] = cells.get(tuple(t), 0.0) + pr
        return cells

    exact = law(d, q, p)
    keys = sorted(exact)
    assert abs(sum(exact.values()) - 1) < 1e-12 and len(keys) > 10
    N = sample_size(0.03, len(keys), 1e-3, 0.99)
    res = verify_multi(d.expand(N, -1, -1), q.expand(N, -1, -1, -1), p.expand(N, -1, -1, -1), generator=g)
    seen = {}
    for kept, row in zip(res.num_accepted.tolist(), res.tokens.tolist()):
        seen[tuple(row[:kept + 1])] = seen.get(tuple(row[:kept + 1]), 0) + 1
    assert set(seen) <= set(keys)
    counts = np.array([seen.get(c, 0) for c in keys])
    assert gof_test(counts, np.array([exact[c] for c in keys])).p_value > 1e-3
    want = np.array([exact[c] for c in keys])
    flat = np.full(len(keys), 1.0 / len(keys))
    bad = want + 0.05 / (0.5 * np.abs(flat - want).sum()) * (flat - want)  # TV(bad, want) = 0.05
    assert gof_test(counts, bad).p_value < 1e-3


def test_injected_uniforms_are_checked():
    g = torch.Generator().manual_seed(0)
    T, D = random_table_model(3, 2, g), random_table_model(3, 2, g)
    d, q, p = _chains(T, D, 2, 3, 4, g)
    with pytest.raises(ValueError, match=r"uniforms has shape \(4, 4\), expected \(B, k n \+ 1\) = \(4, 7\)"):
        verify_multi(d, q, p, uniforms=torch.zeros(4, 4, dtype=F64))
    with pytest.raises(ValueError, match=r"uniforms must lie in \[0, 1\)"):
        verify_multi(d, q, p, uniforms=torch.full((4, 7), 2.0, dtype=F64))
    u = torch.rand(4, 7, generator=torch.Generator().manual_seed(1), dtype=F64)
    a = verify_multi(d, q, p, uniforms=u)
    b = verify_multi(d, q, p, generator=torch.Generator().manual_seed(1))  # the same numbers, drawn
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)
