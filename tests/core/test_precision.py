"""Reduced-precision paths (`specdec.core.rules.precision`): each arithmetic step happens in the path's
own dtype (pinned on bfloat16 values worked by hand), and bad inputs are refused by name.  The laws
of whole generations under each path are in test_alternatives_rules.py."""

import pytest
import torch

from specdec.core.rules import precision
from specdec.core.rules.positional import first_token_law
from specdec.core.sampling import SamplingConfig, process_logits

F64 = torch.float64
BF16 = torch.bfloat16

# p = [.3, .5, .2], q = [.2, .3, .5] rounded to bfloat16: p~ = [.30078125, .5, .2001953125],
# q~ = [.2001953125, .30078125, .5].  The residual in bfloat16 arithmetic is p~ - q~ (each difference
# exact, and representable): [.1005859375, .19921875, 0]+; subtracted in float64 and rounded after,
# it is [bf16(.1), bf16(.2), 0] = [.10009765625, .2001953125, 0]: another ratio between the two.
P = torch.tensor([0.3, 0.5, 0.2], dtype=F64)
Q = torch.tensor([0.2, 0.3, 0.5], dtype=F64)
R_BF16 = [0.1005859375, 0.19921875, 0.0]


def test_the_bf16_residual_is_subtracted_in_bf16():
    """token_parts(bf16) on drafts x = 2 (q(2) = .5): r is the bfloat16 difference R_BF16, not the
    rounded float64 one; a = bf16(p~(2) / q~(2)) = bf16(.400390625) = .400390625."""
    d = torch.tensor([[2]])
    a, r = precision.token_parts(BF16)(d, Q[None, None], torch.stack([P, P])[None])
    assert r[0, 0].tolist() == R_BF16
    assert a.tolist() == [[0.400390625]]


def test_one_step_law_in_bf16_hand_worked():
    """pi = qn a + (sum_x qn (1 - a)) r / |r| with a = [1, 1, .400390625] (bfloat16 ratios, clipped),
    rejection mass .5 * (1 - .400390625) = .2998046875 and |r| = .1005859375 + .19921875 = the same,
    so pi = [.2 + .1005859375, .3 + .19921875, .5 * .400390625].  The residual rounded after a
    float64 subtraction gives pi(0) = .2 + .2998046875 * .10009765625 / .30029296875 instead.
    Also equal to first_token_law of token_parts(bf16) with draws q (its batched closed form)."""
    law = precision.one_step_law(P, Q, BF16)
    want = torch.tensor([0.3005859375, 0.49921875, 0.2001953125], dtype=F64)
    torch.testing.assert_close(law, want, rtol=0, atol=1e-15)
    torch.testing.assert_close(first_token_law(precision.token_parts(BF16), P, Q)[0], want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ["bf16 logits, float32 softmax", "fp16 logits, float32 softmax"])
def test_the_logits_are_rounded_to_the_paths_dtype_first(name):
    """A path whose logits arrive in half precision and are processed in float32 processes the
    rounded logits: equal to process_logits(logits.to(half), dtype=float32), and different from
    processing the float64 logits themselves (asserted, so the rounding is seen).  (A half-precision
    softmax rounds its input anyway, so those paths cannot show the difference.)"""
    path = precision.PATHS[name]
    cfg = SamplingConfig(0.8, 6, 0.95)
    x = torch.randn(4, 11, generator=torch.Generator().manual_seed(1), dtype=F64) * 3
    lo, pr = precision.DTYPES[path.logits], precision.DTYPES[path.probs]
    want = process_logits(x.to(lo), 0.8, 6, 0.95, dtype=pr).to(F64)
    got = precision.precision_cfg(path, cfg)(x)
    assert torch.equal(got, want)
    assert not torch.equal(got, process_logits(x, 0.8, 6, 0.95, dtype=pr).to(F64))


def test_one_step_law_refuses_rows_that_are_not_laws():
    """NaN or inf in p or q, negative entries, or a row with no mass (q all zeros) has no one-step
    law: a ValueError naming it, never an all-NaN law."""
    q0 = torch.zeros(3, dtype=F64)
    cases = [(torch.tensor([float("nan"), 0.5, 0.5], dtype=F64), Q, "p contains NaN or inf"),
             (P, torch.tensor([0.5, float("inf"), 0.0], dtype=F64), "q contains NaN or inf"),
             (P, q0, "a row of q has no mass"), (q0, Q, "a row of p has no mass"),
             (torch.tensor([1.2, -0.2, 0.0], dtype=F64), Q, "p has negative entries"),
             (P, Q[:2], "one shape"), ([0.3, 0.7], Q, "one shape")]
    for p, q, msg in cases:
        with pytest.raises(ValueError, match=msg):
            precision.one_step_law(p, q)
    batch = torch.stack([Q, q0])  # one bad row among good ones
    with pytest.raises(ValueError, match="a row of q has no mass"):
        precision.one_step_law(torch.stack([P, P]), batch)


def test_unknown_dtype_names_are_refused_with_the_valid_ones():
    """"float8" is no dtype of the paths: a ValueError listing the four valid names, at the Path and
    at precision_cfg (whatever built the path), never a bare KeyError."""
    listed = r"\['bfloat16', 'float16', 'float32', 'float64'\]"
    for part in ("logits", "probs", "verify"):
        kw = dict(logits="float32", probs="float32", verify="float64")
        kw[part] = "float8"
        with pytest.raises(ValueError, match=f"{part} dtype must be one of {listed}, got 'float8'"):
            precision.precision_cfg(precision.Path("x", **kw), SamplingConfig(1.0))
    bad = precision.Path("x", "float32", "float32", "float64")
    object.__setattr__(bad, "logits", "float8")  # a path altered after it was built
    with pytest.raises(ValueError, match=f"logits dtype must be one of {listed}"):
        precision.precision_cfg(bad, SamplingConfig(1.0))
    with pytest.raises(ValueError, match="precision Path"):
        precision.precision_cfg("bf16 softmax", SamplingConfig(1.0))
