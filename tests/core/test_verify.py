"""verify(): the seed's boundary cases, greedy identity, the paper's toy pair, and bad input.

The exact output law of verify over whole generations is tested in tests/test_exact.py and
tests/test_stats.py; here each case is small enough to reason about by hand.
"""

import math

import pytest
import torch

from specdec.core.sampling import process_logits
from specdec.core.verify import accept_prob, block_weights, residual, verify

F64 = torch.float64


def _const(dist, B, n):
    """A context-independent distribution repeated to (B, n, V)."""
    return torch.tensor(dist, dtype=F64).expand(B, n, len(dist)).contiguous()


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_equations_1_and_2_hand_worked():
    p = torch.tensor([1 / 3, 2 / 3], dtype=F64)
    q = torch.tensor([2 / 3, 1 / 3], dtype=F64)
    torch.testing.assert_close(accept_prob(p, q), torch.tensor([0.5, 1.0], dtype=F64))
    torch.testing.assert_close(q * accept_prob(p, q), torch.minimum(p, q))
    torch.testing.assert_close(residual(p, q), torch.tensor([0.0, 1.0], dtype=F64))
    # accepted mass + rejection mass * residual = p, item by item
    beta = torch.minimum(p, q).sum()
    torch.testing.assert_close(q * accept_prob(p, q) + (1 - beta) * residual(p, q), p)
    torch.testing.assert_close(block_weights(p[[0, 1]].unsqueeze(0), q[[0, 1]].unsqueeze(0)),
                               torch.tensor([[1.0, 0.5, 1.0]], dtype=F64))


# ---- the seed's boundary cases, one named test each ------------------------------------------

def test_zero_probability_draft_is_always_rejected():
    B, k = 2000, 3
    p = _const([0.0, 0.5, 0.5], B, k + 1)
    q = _const([0.4, 0.3, 0.3], B, k)
    drafts = torch.zeros(B, k, dtype=torch.long)  # token 0 has p = 0
    for method in ("token", "block"):
        r = verify(drafts, q, p, method=method, generator=_gen(1))
        assert (r.num_accepted == 0).all()
        assert (r.tokens[:, 0] != 0).all()  # the residual never proposes a p = 0 token
        assert (r.tokens[:, 1:] == -1).all()


def test_equal_distributions_never_reject_and_no_nan():
    B, k = 3000, 4
    dist = torch.softmax(torch.randn(6, generator=_gen(2), dtype=F64), -1)
    p = dist.expand(B, k + 1, 6).contiguous()
    q = dist.expand(B, k, 6).contiguous()
    drafts = torch.multinomial(dist, B * k, replacement=True, generator=_gen(3)).view(B, k)
    assert not torch.isnan(residual(dist, dist)).any()
    for method in ("token", "block"):
        r = verify(drafts, q, p, method=method, generator=_gen(4))
        assert (r.num_accepted == k).all()
        assert torch.equal(r.tokens[:, :k], drafts)
        assert ((r.tokens[:, k] >= 0) & (r.tokens[:, k] < 6)).all()


def test_equal_float32_distributions_never_reject():
    # rounding must not make a(x) < 1 when p and q are the very same numbers
    logits = torch.randn(500, 5, 50, generator=_gen(5))
    p = process_logits(logits, temperature=0.8, top_k=20)
    drafts = torch.multinomial(p[:, :4].reshape(-1, 50), 1, generator=_gen(6)).view(500, 4)
    r = verify(drafts, p[:, :4], p, generator=_gen(7))
    assert (r.num_accepted == 4).all()


def test_first_step_rejection_draws_from_residual():
    # p puts no mass where q does except token 0; q(0) = 1/2, p(0) = 1/10
    B, k = 4000, 2
    p = _const([0.1, 0.0, 0.9], B, k + 1)
    q = _const([0.5, 0.5, 0.0], B, k)
    drafts = torch.zeros(B, k, dtype=torch.long)
    r = verify(drafts, q, p, generator=_gen(8))
    rejected = r.num_accepted == 0
    # P(accept x_1 = 0) = min(1, 0.1/0.5) = 0.2; the residual [p - q]_+ is a point mass on token 2
    assert (r.tokens[rejected, 0] == 2).all()
    frac = rejected.double().mean().item()
    assert abs(frac - 0.8) < 5 * math.sqrt(0.8 * 0.2 / B)  # 5 sigma
    # negative control: resampling from p after a rejection emits token 0 about 1/10 of the time
    from specdec.core.rules.variants import resample_from_p_sampled
    wrong = resample_from_p_sampled(drafts, q, p, generator=_gen(8))
    assert (wrong.tokens[wrong.num_accepted == 0, 0] == 0).any()


def test_full_acceptance_appends_bonus_from_last_target_position():
    B, k = 1000, 3
    q = _const([0.5, 0.5, 0.0], B, k)
    p = torch.cat([_const([0.5, 0.5, 0.0], B, k), _const([0.0, 0.0, 1.0], B, 1)], dim=1)  # p_k: token 2
    drafts = torch.randint(0, 2, (B, k), generator=_gen(9))
    for method in ("token", "block"):
        r = verify(drafts, q, p, method=method, generator=_gen(10))
        assert (r.num_accepted == k).all()
        assert (r.tokens[:, k] == 2).all()


def test_stop_token_inside_draft():
    # token 3 is a stop token; after it both models put all mass on stop (absorbing), so the
    # drafts past the stop are accepted as stop and the step output is the draft up to the stop
    V, stop, k, B = 4, 3, 4, 500
    p = torch.zeros(B, k + 1, V, dtype=F64)
    q = torch.zeros(B, k, V, dtype=F64)
    p[:, 0] = torch.tensor([0.2, 0.3, 0.1, 0.4], dtype=F64)
    q[:, 0] = torch.tensor([0.3, 0.3, 0.1, 0.3], dtype=F64)
    p[:, 1:, stop] = 1.0
    q[:, 1:, stop] = 1.0
    drafts = torch.full((B, k), stop)
    r = verify(drafts, q, p, generator=_gen(11))
    assert (r.num_accepted == k).all() and (r.tokens == stop).all()


def test_greedy_target_gives_target_greedy_tokens():
    B, k, V = 300, 5, 12
    g = _gen(12)
    p = process_logits(torch.randn(B, k + 1, V, generator=g), temperature=0)
    q = process_logits(torch.randn(B, k, V, generator=g), temperature=1.0)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, k)
    drafts[: B // 2] = p[: B // 2, :k].argmax(-1)  # half the rows: the draft agrees with the target
    target_greedy = p.argmax(-1)  # (B, k+1)
    for method in ("token", "block"):
        r = verify(drafts, q, p, method=method, generator=_gen(13))
        agree = (drafts == target_greedy[:, :k]).long().cumprod(-1).sum(-1)
        assert torch.equal(r.num_accepted, agree)
        for b in range(B):
            n = int(agree[b])
            assert r.tokens[b, : n + 1].tolist() == target_greedy[b, : n + 1].tolist()
    assert (agree[: B // 2] == k).all()


def test_half_precision_inputs_are_accepted():
    logits = torch.randn(50, 4, 300, generator=_gen(20))
    p = torch.softmax(logits, -1).to(torch.bfloat16)
    q = torch.softmax(logits[:, :3] * 0.5, -1).to(torch.bfloat16)
    d = torch.multinomial(q.float().reshape(-1, 300), 1, generator=_gen(21)).view(50, 3)
    r = verify(d, q, p, method="block", generator=_gen(22))
    assert ((r.tokens[:, 0] >= 0) & (r.tokens[:, 0] < 300)).all()


def test_k_zero_is_one_target_sample():
    p = _const([0.0, 1.0], 5, 1)
    r = verify(torch.zeros(5, 0, dtype=torch.long), torch.zeros(5, 0, 2, dtype=F64), p, generator=_gen(0))
    assert r.tokens.tolist() == [[1]] * 5 and r.num_accepted.tolist() == [0] * 5


# ---- the paper's toy pair: expected accepted drafts, hand-worked in Sun et al. ------------------

@pytest.mark.parametrize("method,expected,other", [("token", 10 / 9, 11 / 9), ("block", 11 / 9, 10 / 9)])
def test_toy_pair_expected_accepted(method, expected, other):
    # target [1/3, 2/3], draft [2/3, 1/3], k = 2.  num_accepted has sd < 1, so with B = 200,000 the
    # standard error is < 0.0023; the tolerance 0.012 (> 5 se) separates 10/9 from 11/9 (gap 0.111)
    # with power ~1; the other method's value is the negative control that must be rejected.
    B, k = 200_000, 2
    g = _gen(14)
    q1 = torch.tensor([2 / 3, 1 / 3], dtype=F64)
    drafts = torch.multinomial(q1, B * k, replacement=True, generator=g).view(B, k)
    r = verify(drafts, _const([2 / 3, 1 / 3], B, k), _const([1 / 3, 2 / 3], B, k + 1), method=method, generator=g)
    mean = r.num_accepted.double().mean().item()
    assert abs(mean - expected) < 0.012
    assert abs(mean - other) > 0.012


# ---- determinism, no mutation, bad input ----------------------------------------------------------

def test_deterministic_given_generator_and_inputs_untouched():
    B, k, V = 50, 3, 9
    g = _gen(15)
    p = torch.softmax(torch.randn(B, k + 1, V, generator=g), -1)
    q = torch.softmax(torch.randn(B, k, V, generator=g), -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, k)
    before = (d.clone(), q.clone(), p.clone())
    for method in ("token", "block"):
        a = verify(d, q, p, method=method, generator=_gen(16))
        b = verify(d, q, p, method=method, generator=_gen(16))
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)
        assert a.tokens.dtype == torch.int64 and a.tokens.shape == (B, k + 1)
        for row, n in zip(a.tokens.tolist(), a.num_accepted.tolist()):
            assert all(t >= 0 for t in row[: n + 1]) and all(t == -1 for t in row[n + 1:])
    assert all(torch.equal(x, y) for x, y in zip(before, (d, q, p)))


def _ok(B=2, k=2, V=3):
    q = torch.full((B, k, V), 1.0 / V, dtype=F64)
    p = torch.full((B, k + 1, V), 1.0 / V, dtype=F64)
    return torch.zeros(B, k, dtype=torch.long), q, p


def _with(t, idx, val):
    t = t.clone()
    t[idx] = val
    return t


@pytest.mark.parametrize("make,match", [
    (lambda d, q, p: (d, q[:, :1], p), "q has shape"),
    (lambda d, q, p: (d, q, p[:, :2]), "p has shape"),
    (lambda d, q, p: (d, q[..., :2] / q[..., :2].sum(-1, keepdim=True), p), "vocabulary mismatch"),
    (lambda d, q, p: (_with(d, (0, 1), 3), q, p), "out of range"),
    (lambda d, q, p: (_with(d, (0, 1), -1), q, p), "out of range"),
    (lambda d, q, p: (d.double(), q, p), "integer"),
    (lambda d, q, p: (d, _with(q, (0, 0, 1), float("nan")), p), "q contains NaN"),
    (lambda d, q, p: (d, q, _with(p, (1, 2, 0), float("inf"))), "p contains NaN or inf"),
    (lambda d, q, p: (d, _with(q, (0, 0, 1), -0.1), p), "negative"),
    (lambda d, q, p: (d, q, _with(p, (0, 0, 1), 0.5)), "do not sum to 1"),
    (lambda d, q, p: (d, _with(_with(q, (1, 1, 0), 0.0), (1, 1, 1), 2 / 3), p), "q\\(x\\) = 0"),
])
def test_bad_input_raises(make, match):
    d, q, p = make(*_ok())
    with pytest.raises(ValueError, match=match):
        verify(d, q, p, generator=_gen(0))


def test_q_from_raw_logits_while_draft_sampled_after_top_k_is_caught():
    # the Hugging Face bug class: drafts sampled from top-k filtered q, but raw softmax passed as q.
    # The raw q is positive everywhere, so that bug only shows as a wrong law; the reverse
    # mismatch (a draft outside the filtered support) is what verify can and does catch.
    logits = torch.randn(4, 2, 10, generator=_gen(17))
    q_filtered = process_logits(logits, top_k=3)
    raw_draft = torch.multinomial(torch.softmax(logits, -1).reshape(-1, 10), 1, generator=_gen(18)).view(4, 2)
    outside = (q_filtered.gather(-1, raw_draft.unsqueeze(-1)) == 0).any()
    assert outside  # seeded: some raw draft lies outside the top-3 support
    p = torch.softmax(torch.randn(4, 3, 10, generator=_gen(19)), -1)
    with pytest.raises(ValueError, match="not the distribution the draft was sampled from"):
        verify(raw_draft, q_filtered, p, generator=_gen(0))


def test_bad_method():
    with pytest.raises(ValueError, match="method"):
        verify(*_ok(), method="tree")


def test_block_stop_probabilities_hand_worked():
    """block_stop_probs' docstring case: s_1 = [0.8/3 - 2/3]_+ + [1.6/3 - 1/3]_+ = 0.2,
    h_1 = 0.2 / (0.2 + 1 - 0.8) = 0.5, h_2 = w_2 = 0.5; and s = 0 gives h = 0."""
    from specdec.core.verify import block_stop_probs

    p = torch.tensor([[[1 / 3, 2 / 3]] * 3], dtype=torch.float64)
    q = torch.tensor([[[2 / 3, 1 / 3]] * 2], dtype=torch.float64)
    h = block_stop_probs(torch.tensor([[1.0, 0.8, 0.5]], dtype=torch.float64), p, q)
    assert torch.allclose(h, torch.tensor([[0.5, 0.5]], dtype=torch.float64), atol=1e-12)
    h0 = block_stop_probs(torch.tensor([[1.0, 0.5, 1.0]], dtype=torch.float64), p, q)  # s_1 = 0
    assert h0[0, 0].item() == 0.0 and h0[0, 1].item() == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("method", ["token", "block"])
def test_the_final_draw_uses_its_own_uniform_on_every_path(dtype, method):
    """Column k of the uniforms is the final token's inverse-CDF draw, never the last acceptance
    uniform (column k-1) -- on float32 rows too.  k = 1, p_0 = [.2, .4, .4], q_0 = [.6, .2, .2], p_1 = [.5, .3, .2]:
      draft 0: a = h_1 = 1/3; u = [.7, .2] rejects it, and the residual [0, .2, .2] at .2 gives 1
               (at .7, the acceptance uniform reused: 2);
      draft 1: a = h_1 = 1; u = [.7, .2] keeps it, and the bonus p_1 at .2 gives 0 (at .7: 1)."""
    p = torch.tensor([[0.2, 0.4, 0.4], [0.5, 0.3, 0.2]], dtype=dtype).expand(2, 2, 3)
    q = torch.tensor([[0.6, 0.2, 0.2]], dtype=dtype).expand(2, 1, 3)
    u = torch.tensor([[0.7, 0.2], [0.7, 0.2]], dtype=F64)
    r = verify(torch.tensor([[0], [1]]), q, p, method=method, uniforms=u)
    assert r.num_accepted.tolist() == [0, 1]
    assert r.tokens.tolist() == [[1, -1], [1, 0]]
