"""Small bugs planted in the math modules: one test per bug, each hand-worked or pinned to an
independent formula, each seen to fail on its bug.

The engine's two (a KV crop one slot short, prompt lookup taking the earliest match) are in
tests/engine/test_planted_engine_bugs.py.
"""

import math

import pytest
import torch
from scipy import stats as st

from specdec.core.cost import optimal_k
from specdec.core.exact import step_outcomes
from specdec.core.sampling import process_logits
from specdec.core.stats import power, sample_size, tv_interval
from specdec.core.verify import block_stop_probs, block_weights, verify

F64 = torch.float64


# ---- verify: accept iff u < a, never u <= a -------------------------------------------------------

@pytest.mark.parametrize("method", ["token", "block"])
def test_zero_probability_draft_rejected_even_at_uniform_zero(method):
    """A draft with p(x) = 0 has a(x) = 0 (token) and makes w, hence h, zero (block): with u < a it
    is rejected for every uniform, u = 0 included; the bug u <= a accepts it exactly at u = 0,
    which a generator essentially never draws -- so the uniforms are injected.
    Row 0: k = 1, x_1 = 0 with p_0(0) = 0.  Row 1: k = 2, x_1 = 0 with p_0 = q_0 (always kept:
    a_1 = 1, and in block h_1 = s_1 / (s_1 + 0) = 1), x_2 = 1 with p_1(1) = 0 -> exactly one kept."""
    p0 = torch.tensor([[[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]], dtype=F64)
    r = verify(torch.tensor([[0]]), torch.tensor([[[0.4, 0.3, 0.3]]], dtype=F64), p0, method=method,
               uniforms=torch.zeros(1, 2, dtype=F64))
    assert r.num_accepted.tolist() == [0] and r.tokens[0, 0] != 0
    q = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.6, 0.2]]], dtype=F64)
    p = torch.tensor([[[0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [1.0, 0.0, 0.0]]], dtype=F64)
    r = verify(torch.tensor([[0, 1]]), q, p, method=method, uniforms=torch.zeros(1, 3, dtype=F64))
    assert r.num_accepted.tolist() == [1] and r.tokens.tolist() == [[0, 0, -1]]  # residual [p_1 - q_1]_+: token 0


# ---- block verification: a hand-worked case whose p differs by position ---------------------------

def test_block_verification_hand_worked_position_dependent():
    """k = 2 over V = 3, drafts x_1 = 0, x_2 = 1, and every p_i different:
        q_0 = [.5, .5, 0]  p_0 = [.25, .25, .5]
        q_1 = [.5, .5, 0]  p_1 = [.1, .1, .8]        p_2 = [.6, .3, .1] (bonus)
    w_1 = min(1, .25/.5) = .5,  w_2 = min(1, w_1 * .1/.5) = .1,
    s_1 = sum [w_1 p_1 - q_1]_+ = [.05 - .5]_+ + [.05 - .5]_+ + [.4 - 0]_+ = .4,
    h_1 = s_1 / (s_1 + 1 - w_1) = .4 / .9 = 4/9,   h_2 = w_2 = .1.
    (The wrong index, s_1 from p_0 and q_0, gives .25 and h_1 = 1/3; h_2 from w_1 gives .5.)
    P(tau = 0, 1, 2) = (1 - h_1)(1 - h_2), h_1 (1 - h_2), h_2 = .5, .4, .1.
    Rows (uniforms eta_1, eta_2, then the final draw's):
      [.4, .5, .3]:  .4 < 4/9, .5 >= .1 -> tau = 1: x_1, then [w_1 p_1 - q_1]_+ = [0, 0, .4] -> 2
      [.9, .05, .7]: .05 < .1 -> tau = 2: x_1, x_2, then p_2 at .7 (cdf .6, .9, 1) -> 1
      [.9, .3, .5]:  no hit -> tau = 0: [w_0 p_0 - q_0]_+ = [0, 0, .5] -> 2"""
    q = torch.tensor([[.5, .5, 0.0], [.5, .5, 0.0]], dtype=F64).expand(3, 2, 3)
    p = torch.tensor([[.25, .25, .5], [.1, .1, .8], [.6, .3, .1]], dtype=F64).expand(3, 3, 3)
    d = torch.tensor([[0, 1]]).expand(3, 2)
    w = block_weights(torch.tensor([[.25, .1]], dtype=F64), torch.tensor([[.5, .5]], dtype=F64))
    torch.testing.assert_close(w, torch.tensor([[1.0, 0.5, 0.1]], dtype=F64))
    torch.testing.assert_close(block_stop_probs(w, p[:1], q[:1]), torch.tensor([[4 / 9, 0.1]], dtype=F64))
    out = step_outcomes(d[:1], q[:1], p[:1], "block")[0]  # (k+1, V): P(tau = j, y)
    torch.testing.assert_close(out.sum(-1), torch.tensor([0.5, 0.4, 0.1], dtype=F64))
    torch.testing.assert_close(out, torch.tensor([[0, 0, .5], [0, 0, .4], [.06, .03, .01]], dtype=F64))
    u = torch.tensor([[.4, .5, .3], [.9, .05, .7], [.9, .3, .5]], dtype=F64)
    r = verify(d, q, p, method="block", uniforms=u)
    assert r.num_accepted.tolist() == [1, 2, 0]
    assert r.tokens.tolist() == [[0, 2, -1], [0, 1, 1], [2, -1, -1]]


# ---- sampling: top-p exactly on a boundary ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top_p_exactly_on_the_boundary_keeps_the_smaller_set(dtype):
    """Four equal logits, top_p = 0.5: the first two tokens hold exactly 0.5 (exact in binary), so
    they reach top_p and the third is dropped (mass ranked above it, 0.5, is not < 0.5).  The bug
    `mass_before > top_p` keeps three."""
    out = process_logits(torch.zeros(4, dtype=dtype), top_p=0.5)
    assert out.tolist() == [0.5, 0.5, 0.0, 0.0]


# ---- cost: ties go to the smaller k ----------------------------------------------------------------

def test_optimal_k_ties_go_to_the_smaller_k():
    """alpha = 0, c = 0: every k has speedup exactly 1 (one token per step, drafting free), a tie
    over all of 0..k_max; the cheaper k = 0 wins.  Also with a flat measured cost curve."""
    assert optimal_k(0.0, 0.0) == 0
    assert optimal_k(0.0, 0.0, 8, curve={n: 1.0 for n in range(1, 10)}) == 0
    assert optimal_k([0.0, 0.0], [0.0, 0.0]).tolist() == [0, 0]


# ---- stats: power and sample size pinned to the noncentral chi-square formula ----------------------

@pytest.mark.parametrize("N,eps,cells,alpha", [(5517, 0.05, 16, 1e-3), (100, 0.2, 4, 0.01), (40000, 0.02, 250, 1e-3)])
def test_power_is_the_noncentral_chi_square_formula(N, eps, cells, alpha):
    """power = P(X > chi2_{1-alpha}(m-1)) with X ~ noncentral chi2(m-1, lambda = 4 N eps^2)
    (specdec.core.stats, module docstring), computed here from scipy.stats directly."""
    df = cells - 1
    want = st.ncx2.sf(st.chi2.ppf(1 - alpha, df), df, 4 * N * eps ** 2)
    assert power(N, eps, cells, alpha) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_sample_size_documented_value_and_minimal():
    """The documented value sample_size(0.05, 16, 1e-3, 0.99) = 5517 (stats module docstring):
    the noncentral chi-square power is 0.990014 at N = 5517 and 0.989998 at N = 5516, so 5517 is
    the smallest N reaching 0.99 -- checked with scipy alone."""
    assert sample_size(0.05, 16, 1e-3, 0.99) == 5517
    crit = st.chi2.ppf(1 - 1e-3, 15)
    assert st.ncx2.sf(crit, 15, 4 * 5517 * 0.05 ** 2) >= 0.99 > st.ncx2.sf(crit, 15, 4 * 5516 * 0.05 ** 2)
    assert sample_size(0.06, 8, 0.01, 0.9) == min(N for N in range(1, 5000)
                                                  if st.ncx2.sf(st.chi2.ppf(0.99, 7), 7, 4 * N * 0.06 ** 2) >= 0.9)


# ---- stats: the TV interval, both ends hand-worked -------------------------------------------------

def test_tv_interval_hand_worked():
    """counts [3000, 7000] against [.5, .5], delta = .01: TV(f, p) = .2, and
    b = 1/2 sqrt((m-1)/N) + sqrt(ln(2/delta)/(2N)) = .5 * .01 + sqrt(ln(200)/20000)
      = .005 + .0162762363 = .0212762363, so the interval is [.1787237637, .2212762363]."""
    tv, lo, hi = tv_interval([3000, 7000], [0.5, 0.5], delta=0.01)
    b = 0.005 + math.sqrt(math.log(200) / 20000)
    assert tv == pytest.approx(0.2, abs=1e-15)
    assert hi == pytest.approx(0.2212762363, abs=1e-10) and hi == pytest.approx(0.2 + b, abs=1e-15)
    assert lo == pytest.approx(0.1787237637, abs=1e-10) and lo == pytest.approx(0.2 - b, abs=1e-15)
    assert tv_interval([95, 5], [0.05, 0.95], delta=0.01)[2] == 1.0  # .9 + b > 1: clipped to 1
