"""The approximate rules (`specdec.core.rules.approximate`) on hand-worked rows: where each one's
acceptance sits exactly on its boundary, and which distribution its ratio scales.  Their laws over
whole generations (and that they are lossy) are in test_alternatives_rules.py."""

import pytest
import torch

from specdec.core.rules import approximate

F64 = torch.float64


def _one(p_row, q_row, x, k=1):
    """Drafts [[x]] (k = 1) over the given p_0 (target) and q_0 (draft); p_1 is uniform (unused)."""
    V = len(p_row)
    p = torch.tensor([p_row, [1.0 / V] * V], dtype=F64)[None]  # (1, 2, V)
    q = torch.tensor([q_row], dtype=F64)[None]  # (1, 1, V)
    return torch.tensor([[x]]), q, p


def test_typical_acceptance_rejects_a_draft_exactly_at_the_threshold():
    """Medusa keeps x iff p(x) > thr = min(eps, delta exp(-H(p))).  p uniform over 4 tokens: p(x) =
    0.25, exact in binary; delta = 10 makes delta exp(-H) about 2.5 > eps, so thr = eps.  At eps =
    0.25, p(x) == thr: rejected (a = 0; the bug p(x) >= thr keeps it).  At eps = 0.24 the same draft
    is above the threshold: kept.  A rejected step emits from p cut to {y: p(y) >= thr} -- all four."""
    d, q, p = _one([0.25] * 4, [0.7, 0.1, 0.1, 0.1], 1)
    a, r = approximate.typical(0.25, 10.0).parts(d, q, p)
    assert a.tolist() == [[0.0]]
    assert r[0, 0].tolist() == [0.25] * 4
    a, _ = approximate.typical(0.24, 10.0).parts(d, q, p)
    assert a.tolist() == [[1.0]]


@pytest.mark.parametrize("matching", [False, True])
def test_relaxed_acceptance_scales_q_not_p(matching):
    """a = min{1, p(x) / (lam q(x))}.  p = [.25, .75], q = [.5, .5], lam = .5, x = 0:
    .25 / (.5 * .5) = 1, so a = 1 (lam on p instead: .125 / .5 = .25).  And p = [.1, .9], same q:
    .1 / .25 = .4 (lam on p: .05 / .5 = .1).  The residual: [p - q]+ = [0, .4] (standard) or
    [p - lam q]+ = [0, .65] (matching) for the second case."""
    rule = approximate.relaxed(0.5, matching)
    a, _ = rule.parts(*_one([0.25, 0.75], [0.5, 0.5], 0))
    assert a.tolist() == [[1.0]]
    a, r = rule.parts(*_one([0.1, 0.9], [0.5, 0.5], 0))
    assert a.item() == pytest.approx(0.4, abs=1e-15)
    torch.testing.assert_close(r[0, 0], torch.tensor([0.0, 0.65 if matching else 0.4], dtype=F64))
