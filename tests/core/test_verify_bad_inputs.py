"""Bad inputs to the math modules: float64 rows from a float32 softmax, block verification
with k = 0, the test-only `uniforms=` argument, and the already-handled cases that had no test yet
(the others live in test_verify.py and test_sampling.py)."""

import pytest
import torch

from specdec.core.exact import all_sequences, spec_law, step_outcomes, target_law
from specdec.core.sampling import process_logits, sample
from specdec.core.toy import random_table_model
from specdec.core.verify import block_weights, check_inputs, verify, verify_unchecked

F64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---- float64 distributions that came from a float32 softmax ----------------------------------------

@pytest.mark.parametrize("V", [16, 50_257])
def test_float64_rows_from_a_float32_softmax_are_accepted(V):
    """`.double()` of a float32 softmax: rows sum to 1 only within ~sqrt(V) 2^-24 (here more than the
    old float64 tolerance 1e-9, asserted), and verify accepts them (tolerance 1e-4 for float32 and
    float64 alike: a tolerance, not a renormalization -- see check_inputs).  A float64 row off by
    1e-3 is still refused."""
    B, k = 4, 2
    g = _gen(V)
    logits = torch.randn(B, k + 1, V, generator=g) * 3  # float32
    p = torch.softmax(logits, -1).double()  # (B, k+1, V)
    q = torch.softmax(logits[:, :k] * 0.7, -1).double()  # (B, k, V)
    assert max((p.sum(-1) - 1).abs().max().item(), (q.sum(-1) - 1).abs().max().item()) > 1e-9
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, k)
    for method in ("token", "block"):
        r = verify(drafts, q, p, method=method, generator=_gen(1))
        assert ((r.tokens[:, 0] >= 0) & (r.tokens[:, 0] < V)).all()
    off = p.clone()
    off[0, 0] *= 1 + 1e-3
    with pytest.raises(ValueError, match="rows of p do not sum to 1"):
        verify(drafts, q, off, generator=_gen(1))


@pytest.mark.parametrize("method", ["token", "block"])
def test_rounded_rows_move_the_step_law_by_at_most_2_k_plus_1_tol(method):
    """The bound in check_inputs' docstring: rows whose entries are within a relative tol = 1e-4 of
    exact distributions (rounding, as after a float32 softmax, at the tolerance's own scale) move
    the exact law of a step's outcome (accepted count, tokens; `step_outcomes` weighted by the
    drafts' true law) by at most 2 (k+1) tol in total variation.  Random rows, half of them with
    q = p exactly before rounding (block verification's 0/0 case w_i = 1, s_i = 0)."""
    V, k, tol = 5, 3, 1e-4
    g = _gen(11)
    blocks = all_sequences(V, k)  # (V^k, k)
    D = blocks.shape[0]
    worst = 0.0
    for trial in range(40):
        p = torch.softmax(2 * torch.randn(k + 1, V, generator=g, dtype=F64), -1)
        q = p[:k].clone() if trial % 2 else torch.softmax(2 * torch.randn(k, V, generator=g, dtype=F64), -1)
        P = p * (1 + tol * (2 * torch.rand(p.shape, generator=g, dtype=F64) - 1))
        Q = q * (1 + tol * (2 * torch.rand(q.shape, generator=g, dtype=F64) - 1))
        w = torch.stack([q[i][blocks[:, i]] for i in range(k)], 1).prod(1)  # (D,) true draft law
        exact = w[:, None, None] * step_outcomes(blocks, q.expand(D, -1, -1), p.expand(D, -1, -1), method)
        rounded = w[:, None, None] * step_outcomes(blocks, Q.expand(D, -1, -1), P.expand(D, -1, -1), method)
        worst = max(worst, 0.5 * (exact - rounded).abs().sum().item())
    assert worst <= 2 * (k + 1) * tol, worst


# ---- block verification with k = 0: the bonus token alone, as token verification -------------------

def test_block_with_k_zero_is_the_bonus_token_like_token():
    """k = 0 (no drafts): both methods draw the one token from p_0 with the same uniform, so with the
    same generator they agree token for token; the block weights are w = [1]."""
    B, V = 500, 6
    p = torch.softmax(torch.randn(B, 1, V, generator=_gen(2), dtype=F64), -1)
    d, q = torch.zeros(B, 0, dtype=torch.long), torch.zeros(B, 0, V, dtype=F64)
    tok = verify(d, q, p, method="token", generator=_gen(3))
    blk = verify(d, q, p, method="block", generator=_gen(3))
    assert torch.equal(tok.tokens, blk.tokens) and torch.equal(tok.num_accepted, blk.num_accepted)
    assert blk.tokens.shape == (B, 1) and (blk.num_accepted == 0).all() and len(set(blk.tokens[:, 0].tolist())) > 1
    assert block_weights(torch.zeros(3, 0, dtype=F64), torch.zeros(3, 0, dtype=F64)).tolist() == [[1.0]] * 3
    r = verify_unchecked(d[:1], q[:1], p[:1], method="block", uniforms=torch.tensor([[0.0]], dtype=F64))
    assert r.tokens.tolist() == [[int((p[0, 0] > 0).nonzero()[0])]]


def test_exact_block_law_with_k_zero_equals_token():
    """exact.step_outcomes and spec_law with k = 0 and method "block": the table is p_0 itself, as
    for "token", and the law of the first n tokens is the target's."""
    p = torch.softmax(torch.randn(7, 1, 5, generator=_gen(4), dtype=F64), -1)
    d, q = torch.zeros(7, 0, dtype=torch.long), torch.zeros(7, 0, 5, dtype=F64)
    torch.testing.assert_close(step_outcomes(d, q, p, "block"), step_outcomes(d, q, p, "token"), rtol=0, atol=0)
    g = _gen(5)
    target, draft = random_table_model(4, 2, g, stop=3), random_table_model(4, 1, g, stop=3)
    ref = target_law(target, 3)
    for method in ("token", "block"):
        assert (spec_law(target, draft, 3, 0, method) - ref).abs().max() <= 1e-12


# ---- uniforms= (tests only): validated -------------------------------------------------------------

def _ok(B=2, k=2, V=3):
    q = torch.full((B, k, V), 1.0 / V, dtype=F64)
    p = torch.full((B, k + 1, V), 1.0 / V, dtype=F64)
    return torch.zeros(B, k, dtype=torch.long), q, p


@pytest.mark.parametrize("u,match", [
    (torch.zeros(2, 2, dtype=F64), "shape"),
    (torch.zeros(3, 3, dtype=F64), "shape"),
    (torch.zeros(2, 3), "float64"),
    ([[0.0] * 3] * 2, "float64"),
    (torch.full((2, 3), 1.0, dtype=F64), r"\[0, 1\)"),
    (torch.full((2, 3), -0.25, dtype=F64), r"\[0, 1\)"),
    (torch.full((2, 3), float("nan"), dtype=F64), r"\[0, 1\)"),
])
def test_bad_uniforms_raise(u, match):
    for fn in (verify, verify_unchecked):
        for method in ("token", "block"):
            with pytest.raises(ValueError, match=match):
                fn(*_ok(), method=method, uniforms=u)


# ---- already handled, not yet tested ---------------------------------------------------------------

def _with(t, idx, val):
    t = t.clone()
    t[idx] = val
    return t


@pytest.mark.parametrize("make,match", [
    (lambda d, q, p: (d, q, _with(p, (0, 1, 2), -0.1)), "p has negative entries"),
    (lambda d, q, p: (d, q, _with(p, (1, 0, 0), float("nan"))), "p contains NaN"),
    (lambda d, q, p: (d, _with(q, (0, 1, 0), float("inf")), p), "q contains NaN or inf"),
    (lambda d, q, p: (d, _with(q, (1, 0, 2), 0.9), p), "rows of q do not sum to 1"),
    (lambda d, q, p: (d, q * 2, p * 2), "rows of q do not sum to 1"),
    (lambda d, q, p: (d.bool(), q, p), "integer"),
    (lambda d, q, p: (d.tolist(), q, p), "torch.Tensor"),
    (lambda d, q, p: (d, q, p[:, :, 0]), r"p \(B, k\+1, V\)"),
    (lambda d, q, p: (d, q.long(), p), "float tensors"),
    (lambda d, q, p: (d, q[..., :0], p[..., :0]), "empty vocabulary"),
])
def test_more_bad_verify_inputs_raise(make, match):
    d, q, p = make(*_ok())
    with pytest.raises(ValueError, match=match):
        check_inputs(d, q, p)
    with pytest.raises(ValueError, match=match):
        verify(d, q, p, generator=_gen(0))


@pytest.mark.parametrize("kwargs,match", [
    ({"temperature": float("inf")}, "temperature"),
    ({"temperature": True}, "temperature"),
    ({"temperature": "1"}, "temperature"),
    ({"top_k": True}, "top_k"),
    ({"top_p": float("nan")}, "top_p"),
    ({"top_p": True}, "top_p"),
])
def test_more_bad_sampling_knobs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        process_logits(torch.tensor([0.0, 1.0]), **kwargs)


@pytest.mark.parametrize("probs", [
    torch.tensor([[0.5, float("nan")]]),
    torch.tensor([[0.0, 0.0]]),
    torch.zeros(2, 0),
])
def test_sample_refuses_rows_that_are_not_distributions(probs):
    with pytest.raises(ValueError, match="probs"):
        sample(probs, _gen(0))
