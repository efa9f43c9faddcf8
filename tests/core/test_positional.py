"""The positional machinery (`specdec.core.rules.positional`): the sampled path keeps a draft iff u < a,
the exact outcome table sums to 1 on rounded rows, and injected uniforms are checked as `verify`
checks them.  Each case is small enough to work by hand; the laws of whole generations are in
test_alternatives_rules.py."""

import pytest
import torch

from specdec.core.rules.alternatives import MATCH, ONE_HOT
from specdec.core.rules.positional import rule_outcomes, sample_rule
from specdec.core.rules.precision import token_parts
from specdec.core.verify import verify

F64 = torch.float64


def _fixed(a_row):
    """Parts with a fixed acceptance a (B, k) and a stop law one-hot on token 2 at every position."""
    def parts(d, q, p):
        B, k = d.shape
        r = torch.zeros(B, k, p.shape[-1], dtype=F64)
        r[..., 2] = 1.0
        return torch.tensor(a_row, dtype=F64).expand(B, k), r
    return parts


def _rows(B, k, V=3):
    d = torch.zeros(B, k, dtype=torch.long)
    q = torch.full((B, k, V), 1.0 / V, dtype=F64)
    p = torch.full((B, k + 1, V), 1.0 / V, dtype=F64)
    return d, q, p


def test_a_draft_is_kept_iff_u_is_below_a_never_at_u_equal_a():
    """a = 0 and u = 0: nothing may be kept (u < a is false; the bug u <= a keeps it).  a = 0.5 at
    u = 0.5 is rejected too, and u just below a is kept.  Row by row, k = 2 (the second position has
    a = 1, always kept once reached):
      a = [0, 1],   u = [0, 0, .5]          -> 0 kept, token 2 (the stop law)
      a = [.5, 1],  u = [.5, 0, .5]         -> 0 kept
      a = [.5, 1],  u = [.5 - 2^-53, 0, .5] -> 2 kept, then the bonus from p_2 (uniform, u = .5 -> 1)"""
    d, q, p = _rows(1, 2)
    zero = torch.tensor([[0.0, 0.0, 0.5]], dtype=F64)
    r = sample_rule(_fixed([0.0, 1.0]), d, q, p, uniforms=zero)
    assert r.num_accepted.tolist() == [0] and r.tokens.tolist() == [[2, -1, -1]]
    half = torch.tensor([[0.5, 0.0, 0.5]], dtype=F64)
    assert sample_rule(_fixed([0.5, 1.0]), d, q, p, uniforms=half).num_accepted.tolist() == [0]
    below = torch.tensor([[0.5 - 2.0 ** -53, 0.0, 0.5]], dtype=F64)
    r = sample_rule(_fixed([0.5, 1.0]), d, q, p, uniforms=below)
    assert r.num_accepted.tolist() == [2] and r.tokens.tolist() == [[0, 0, 1]]


def test_outcome_tables_of_rows_rounded_to_bf16_sum_to_one():
    """Rows rounded to bfloat16 (held in float64) do not sum to 1; the sampler draws the bonus by an
    inverse CDF over p_k's own total, so the exact table must divide p_k by it: every table sums to 1
    (to rounding).  Without that division the all-kept row carries reach * sum(p_k) != reach.  The
    rows are chosen so that all k drafts are kept with probability well above zero (asserted)."""
    g = torch.Generator().manual_seed(3)
    B, k, V = 64, 3, 7
    logits = torch.randn(B, k + 1, V, generator=g, dtype=F64)
    p = torch.softmax(logits, -1).bfloat16().double()
    q = torch.softmax(logits[:, :k] * 0.9, -1).bfloat16().double()
    assert float((p.sum(-1) - 1).abs().max()) > 1e-4  # really off 1
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, k)
    for parts in (token_parts(torch.bfloat16), token_parts(F64), MATCH.parts):
        out = rule_outcomes(parts, d, q, p)  # (B, k+1, V)
        assert float(out[:, k].sum(-1).max()) > 0.1  # the bonus row matters
        torch.testing.assert_close(out.sum((1, 2)), torch.ones(B, dtype=F64), rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", [MATCH, ONE_HOT], ids=lambda r: r.name)
def test_injected_uniforms_are_checked_as_verify_checks_them(rule):
    """Uniforms outside [0, 1) (2.0, -0.1, NaN), of the wrong shape ((B, k) instead of (B, k+1)) or
    dtype get `verify`'s own ValueError from a positional rule -- never every draft rejected (u = 2)
    or an IndexError inside the rule (shape (B, k)); with the rule's row check off as well."""
    g = torch.Generator().manual_seed(0)
    B, k, V = 3, 2, 5
    q = torch.softmax(torch.randn(B, k, V, generator=g, dtype=F64), -1)
    p = torch.softmax(torch.randn(B, k + 1, V, generator=g, dtype=F64), -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, k)
    unchecked = type(rule)(rule.name, rule.lossless, rule.parts, rule.description, rule.draws, check=False)
    for bad in (2.0, -0.1, float("nan")):
        u = torch.full((B, k + 1), bad, dtype=F64)
        for call in (rule, unchecked, verify):
            with pytest.raises(ValueError, match=r"uniforms must lie in \[0, 1\)"):
                call(d, q, p, uniforms=u)
    for call in (rule, unchecked, verify):
        with pytest.raises(ValueError, match=r"uniforms has shape \(3, 2\), expected \(B, k\+1\) = \(3, 3\)"):
            call(d, q, p, uniforms=torch.zeros(B, k, dtype=F64))
        with pytest.raises(ValueError, match="uniforms must be a float64 tensor"):
            call(d, q, p, uniforms=torch.zeros(B, k + 1))
    ok = torch.rand(B, k + 1, generator=g, dtype=F64)
    assert torch.equal(rule(d, q, p, uniforms=ok).tokens, unchecked(d, q, p, uniforms=ok).tokens)
