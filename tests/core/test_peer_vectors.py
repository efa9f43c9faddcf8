"""Peer test vectors: other implementations' verification cases, ported to our `verify`.

Each test names its origin (repository, file and test) in its docstring.  The code is ours: the
cases are rebuilt from the numbers and the semantics the peer tests state, with our conventions
(tokens (B, k+1) padded with -1, the bonus token drawn from p_k instead of a mocked sampler,
uniforms in [0, 1) with "accept iff u < a").  Where a peer test states no expected output, the
expected values here are worked by hand from Leviathan et al. (token) and Sun et al. (block)
and say so.

The statistical chain test at the end checks the joint law of (accepted count, emitted tokens)
against the exact law of `specdec.core.exact`, sized by a stated power calculation and with a
negative control that must fail.
"""

import numpy as np
import pytest
import torch

from specdec.core.exact import all_sequences, step_outcomes
from specdec.core.sampling import process_logits
from specdec.core.stats import gof_test, pool_cells, power, sample_size
from specdec.core.rules.variants import resample_from_p_sampled
from specdec.core.verify import block_stop_probs, block_weights, greedy_verify, verify

F64 = torch.float64
METHODS = ("token", "block")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---- vLLM: the greedy rejection-sampler cases ---------------------------------------------------

def _vllm_greedy(spec_tokens, output_tokens, vocab=100):
    """vLLM's greedy setup, ported: the target's logits are +100 at its own token and -100 elsewhere
    (vLLM's create_logits_tensor), one row per drafted position plus one for the bonus token (vLLM
    mocks the bonus sampler; ours draws it from p_k).  Drafts are greedy, so q is one-hot.
    Returns (drafts (B, k), q (B, k, V), p (B, k+1, V), logits (B, k+1, V))."""
    drafts = torch.tensor(spec_tokens)  # (B, k)
    target = torch.tensor(output_tokens)  # (B, k+1): the target's argmax at every position
    logits = torch.full(target.shape + (vocab,), -100.0).scatter_(-1, target[..., None], 100.0)
    p = process_logits(logits, temperature=0)  # (B, k+1, V) one-hot
    q = torch.nn.functional.one_hot(drafts, vocab).float()  # (B, k, V)
    return drafts, q, p, logits


def _check_greedy_case(spec_tokens, output_tokens, expected):
    drafts, q, p, logits = _vllm_greedy(spec_tokens, output_tokens)
    want = torch.tensor(expected)
    for method in METHODS:
        for seed in range(3):  # one-hot p and q: the outcome cannot depend on the uniforms
            r = verify(drafts, q, p, method=method, generator=_gen(seed))
            assert r.tokens.tolist() == expected, (method, seed)
            assert torch.equal(r.num_accepted, (want != -1).sum(1) - 1)
    n, toks = greedy_verify(drafts, logits)  # the engine's greedy fast path agrees
    assert toks.tolist() == expected and torch.equal(n, (want != -1).sum(1) - 1)


def test_vllm_perfect_match_appends_bonus():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler.py::test_perfect_match:
    drafts [1, 2, 3], target tokens [1, 2, 3] and bonus 4 -> [1, 2, 3, 4]."""
    _check_greedy_case([[1, 2, 3]], [[1, 2, 3, 4]], [[1, 2, 3, 4]])


def test_vllm_early_mismatch():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler.py::test_early_mismatch:
    drafts [1, 2, 3], target [1, 5, 3, 4] -> [1, 5, -1, -1] (vLLM's PLACEHOLDER_TOKEN_ID is our -1);
    the drafts after the first mismatch are dropped even where they agree with the target (the 3)."""
    _check_greedy_case([[1, 2, 3]], [[1, 5, 3, 4]], [[1, 5, -1, -1]])


def test_vllm_multiple_mismatches_in_a_batch():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler.py::test_multiple_mismatches:
    drafts [[1, 2, 3], [4, 5, 6]], target [[1, 2, 7, 6], [4, 8, 6, 9]]
    -> [[1, 2, 7, -1], [4, 8, -1, -1]]: each row stops at its own first mismatch."""
    _check_greedy_case([[1, 2, 3], [4, 5, 6]], [[1, 2, 7, 6], [4, 8, 6, 9]], [[1, 2, 7, -1], [4, 8, -1, -1]])


def test_vllm_single_token():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler.py::test_single_token_sequence:
    one draft [1], target [1] and bonus 2 -> [1, 2]."""
    _check_greedy_case([[1]], [[1, 2]], [[1, 2]])


def test_vllm_first_position_mismatch_and_mixed_batch():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler.py::test_parametrized_cases:
    "First mismatch" (draft [1], target [2, 3] -> [2, -1]) and "Mixed matches"
    (drafts [[1, 2], [3, 4]], target [[1, 5, 6], [3, 4, 7]] -> [[1, 5, -1], [3, 4, 7]])."""
    _check_greedy_case([[1]], [[2, 3]], [[2, -1]])
    _check_greedy_case([[1, 2], [3, 4]], [[1, 5, 6], [3, 4, 7]], [[1, 5, -1], [3, 4, 7]])


# ---- Hugging Face: test_speculative_sampling -------------------------------------------------------

def test_hugging_face_speculative_sampling_case():
    """huggingface/transformers, tests/generation/test_utils.py::UtilsFunctionsTest::test_speculative_sampling:
    V = 10, drafts [1, 4, 5] from near-one-hot draft logits (+10 on the draft, -10 elsewhere); the
    target agrees on the first two and forbids everything but 8 at the third (-inf elsewhere, +10
    on 8) -> validated tokens [1, 4, 8] with 2 drafts accepted.  Their fourth target row (all
    -10) is our bonus distribution p_3, never reached.  The outcome holds for every uniform: the
    first two ratios p/q are exactly 1, the third is 0 and the residual is a point mass on 8 --
    checked with seeded generators and with injected extreme uniforms (0 and the largest < 1)."""
    inf = float("inf")

    def peaked(tok):
        row = torch.full((10,), -10.0)
        row[tok] = 10.0
        return row

    q = torch.softmax(torch.stack([peaked(1), peaked(4), peaked(5)])[None], -1)  # (1, 3, 10) float32
    third = torch.full((10,), -inf)
    third[8] = 10.0
    p = torch.softmax(torch.stack([peaked(1), peaked(4), third, torch.full((10,), -10.0)])[None], -1)  # (1, 4, 10)
    drafts = torch.tensor([[1, 4, 5]])
    top = 1 - 2 ** -53
    for method in METHODS:
        outs = [verify(drafts, q, p, method=method, generator=_gen(s)) for s in range(5)]
        outs += [verify(drafts, q, p, method=method, uniforms=torch.full((1, 4), u, dtype=F64)) for u in (0.0, top)]
        for r in outs:
            assert r.num_accepted.tolist() == [2], method
            assert r.tokens.tolist() == [[1, 4, 8, -1]], method


# ---- vLLM: block verification with fixed uniforms ------------------------------------------------

def test_vllm_block_verify_fixed_uniforms():
    """vllm-project/vllm, tests/v1/sample/test_rejection_sampler_block_verify.py::
    test_block_verify_pytorch_accepts_and_appends_bonus, request 0: k = 2 drafts [1, 0] over V = 4,
    q rows [0, .6, 0, .4], [.1, .2, .3, .4]; p rows [0, .8, 0, .2], [.2, .1, .3, .4]; uniforms .7, .6
    -> both drafts accepted, then the bonus token.  vLLM mocks the bonus (id 100); here p_2 is a
    point mass on token 3, drawn with vLLM's third uniform (.5, request 1's in their batch).
    Hand-worked (Sun et al.): w = [1, min(1, .8/.6), min(1, 1 * .2/.1)] = [1, 1, 1],
    s_1 = sum [w_1 p_1 - q_1]_+ = .1, h_1 = .1 / (.1 + 1 - 1) = 1, h_2 = w_2 = 1, so tau = 2 for any
    uniforms below 1.  Token verification agrees here (a_1 = a_2 = 1).

    vLLM's request 1 drafts token 2 from q = [.5, .5, 0, 0], i.e. a draft with q(x) = 0; vLLM's
    kernel takes it silently (the test asserts nothing about it), our verify refuses it."""
    q = torch.tensor([[[0.0, 0.6, 0.0, 0.4], [0.1, 0.2, 0.3, 0.4]]], dtype=F64)
    p = torch.tensor([[[0.0, 0.8, 0.0, 0.2], [0.2, 0.1, 0.3, 0.4], [0.0, 0.0, 0.0, 1.0]]], dtype=F64)
    drafts = torch.tensor([[1, 0]])
    u = torch.tensor([[0.7, 0.6, 0.5]], dtype=F64)
    w = block_weights(p[:, :2].gather(-1, drafts[..., None])[..., 0], q.gather(-1, drafts[..., None])[..., 0])
    torch.testing.assert_close(w, torch.tensor([[1.0, 1.0, 1.0]], dtype=F64))
    torch.testing.assert_close(block_stop_probs(w, p, q), torch.tensor([[1.0, 1.0]], dtype=F64))
    for method in METHODS:
        r = verify(drafts, q, p, method=method, uniforms=u)
        assert r.num_accepted.tolist() == [2] and r.tokens.tolist() == [[1, 0, 3]], method
    q1 = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]], dtype=F64)
    p1 = torch.tensor([[[0.9, 0.1, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]], dtype=F64)
    with pytest.raises(ValueError, match=r"q\(x\) = 0"):
        verify(torch.tensor([[2]]), q1, p1, method="block", uniforms=torch.tensor([[0.5, 0.5]], dtype=F64))


# ---- FlashInfer: chain speculative sampling invariants ---------------------------------------------

@pytest.mark.parametrize("onehot_target", [False, True])
@pytest.mark.parametrize("k", [1, 3, 5, 7])
@pytest.mark.parametrize("B", [1, 99, 989])
def test_flashinfer_chain_invariants(B, k, onehot_target):
    """flashinfer-ai/flashinfer, tests/test_sampling.py::test_chain_speculative_sampling: V = 111,
    q = normalized torch.rand rows (float32), drafts drawn uniformly at random (not from q: any
    draft with q(x) > 0 is valid input), p random (k+1 rows) or one-hot on the drafts then a random
    bonus token.  Invariants, per row and method: every id is -1 or in [0, V); the accepted prefix
    is the drafts; every entry after the first rejected position is -1 (FlashInfer's "from the
    second mismatched token on"); emitted = accepted + 1; and with the one-hot target the output
    is exactly the target's tokens.  Their 10 trials per case are 3 seeded trials here; their
    larger vocabularies (32000, 128256) are left out to keep the suite fast."""
    V = 111
    g = _gen(1000 * B + 10 * k + onehot_target)
    q = torch.rand(B, k, V, generator=g)
    q = q / q.sum(-1, keepdim=True)
    drafts = torch.randint(V, (B, k), generator=g)
    if onehot_target:
        target_ids = torch.randint(V, (B, k + 1), generator=g)
        target_ids[:, :k] = drafts
        p = torch.zeros(B, k + 1, V).scatter_(2, target_ids[..., None], 1.0)
    else:
        p = torch.rand(B, k + 1, V, generator=g)
        p = p / p.sum(-1, keepdim=True)
    col = torch.arange(k + 1)
    for method in METHODS:
        for trial in range(3):
            r = verify(drafts, q, p, method=method, generator=g)
            toks, n = r.tokens, r.num_accepted
            assert toks.shape == (B, k + 1)
            assert ((toks == -1) | ((toks >= 0) & (toks < V))).all()
            assert (n + 1 == (toks != -1).sum(1)).all()  # emitted = accepted + 1
            kept = col[None, :k] < n[:, None]
            assert torch.equal(toks[:, :k][kept], drafts[kept])
            assert (toks[col[None] > n[:, None]] == -1).all()
            if onehot_target:
                assert torch.equal(toks, target_ids)
            else:  # FlashInfer's form: the mismatches with the drafts are one contiguous run
                mismatch = toks[:, :k] != drafts
                first = torch.where(mismatch.any(1), mismatch.long().argmax(1), k)
                assert torch.equal(first, n)


# ---- the statistical chain test: joint law of (accepted count, emitted tokens) --------------------

N_CHAIN, K_CHAIN, V_CHAIN = 65_536, 2, 16
EPS, ALPHA, POWER = 0.025, 1e-3, 0.99


def _chain_setup():
    """One fixed draft row per position (k rows) and target row per position (k+1 rows), each
    torch.rand(V) ** 3 normalized (peaked, as TileOPs does), float64, seeded."""
    g = _gen(20240611)
    q = torch.rand(K_CHAIN, V_CHAIN, generator=g, dtype=F64) ** 3
    p = torch.rand(K_CHAIN + 1, V_CHAIN, generator=g, dtype=F64) ** 3
    return q / q.sum(-1, keepdim=True), p / p.sum(-1, keepdim=True)


def _joint_law(q, p, out):
    """Outcome table out (D, k+1, V) = P(j accepted, y | draft block) over all V^2 blocks -> the
    joint law of the emitted sequence, cells [(y) for j = 0 | (x1, y) for j = 1 | (x1, x2, y)]."""
    V = V_CHAIN
    blocks = all_sequences(V, K_CHAIN)  # (V^2, 2)
    w = q[0][blocks[:, 0]] * q[1][blocks[:, 1]]  # (V^2,) P(draft block)
    l0 = (w[:, None] * out[:, 0]).sum(0)  # (V,)
    l1 = torch.zeros(V, V, dtype=F64).index_add_(0, blocks[:, 0], w[:, None] * out[:, 1])  # (V, V)
    l2 = w[:, None] * out[:, 2]  # (V^2, V) = (x1, x2, y)
    return torch.cat([l0, l1.reshape(-1), l2.reshape(-1)]).numpy()


def _exact(q, p, method):
    blocks = all_sequences(V_CHAIN, K_CHAIN)
    D = blocks.shape[0]
    return _joint_law(q, p, step_outcomes(blocks, q.expand(D, -1, -1), p.expand(D, -1, -1), method))


def _resample_from_p_law(q, p):
    """Exact law of the negative control (on rejection at position j, draw from p_j instead of the
    residual): out[:, j] = P(first j accepted, j-th rejected) p_j."""
    blocks = all_sequences(V_CHAIN, K_CHAIN)
    D = blocks.shape[0]
    a = torch.stack([torch.clamp(p[i][blocks[:, i]] / q[i][blocks[:, i]], max=1.0) for i in range(K_CHAIN)], 1)
    out = torch.zeros(D, K_CHAIN + 1, V_CHAIN, dtype=F64)
    reach = torch.ones(D, dtype=F64)
    for j in range(K_CHAIN):
        out[:, j] = (reach * (1 - a[:, j]))[:, None] * p[j]
        reach = reach * a[:, j]
    out[:, K_CHAIN] = reach[:, None] * p[K_CHAIN]
    return _joint_law(q, p, out)


def _counts(r):
    """Sampled (num_accepted, tokens) -> counts in the cell order of `_joint_law`."""
    n, t, V = r.num_accepted.numpy(), r.tokens.numpy(), V_CHAIN
    code = np.where(n == 0, t[:, 0],
                    np.where(n == 1, V + t[:, 0] * V + t[:, 1], V + V * V + (t[:, 0] * V + t[:, 1]) * V + t[:, 2]))
    return np.bincount(code, minlength=V + V * V + V ** 3)


def _chain_samples(q, p, sampler, method, seed):
    g = _gen(seed)
    N = N_CHAIN
    drafts = torch.stack([torch.multinomial(q[i], N, replacement=True, generator=g) for i in range(K_CHAIN)], 1)
    return sampler(drafts, q.expand(N, -1, -1), p.expand(N, -1, -1), method=method, generator=g)


@pytest.mark.parametrize("method", METHODS)
def test_chain_joint_law_of_accepted_count_and_tokens(method):
    """The statistical chain test.  Setup as tile-ai/TileOPs, tests/ops/test_sampling.py::
    test_chain_speculative_sampling (a FlashInfer-compatible chain op): n = 65,536 rows, k = 2
    drafts, V = 16, one fixed peaked draft / target row per position, drafts drawn from their row.
    TileOPs checks marginals with 6-sigma bands; here the whole joint law of (accepted count,
    emitted tokens) -- 16 + 16^2 + 16^3 = 4,368 cells -- is tested against the exact law
    (`specdec.core.exact.step_outcomes`) with Pearson's chi-square at level 1e-3.

    Power: cells with expected count < 5 are pooled (about 250 cells remain at this n); the
    worst-case power against any law at total variation >= EPS = 0.025 on the pooled cells is
    noncentral chi-square (`specdec.core.stats.power`), and the test asserts it is >= 0.99 at
    n = 65,536 (sample_size(0.025, cells, 1e-3, 0.99) is about 59,000).  Negative control: the
    "resample from p" variant (`specdec.core.rules.variants`), whose exact TV from the law is asserted
    to be >= EPS on the pooled cells, must be rejected."""
    q, p = _chain_setup()
    law = _exact(q, p, method)
    assert abs(law.sum() - 1) < 1e-12
    pos = law > 0
    labels = pool_cells(law[pos] / law[pos].sum(), N_CHAIN)
    cells = int(labels.max()) + 1
    assert sample_size(EPS, cells, ALPHA, POWER) <= N_CHAIN and power(N_CHAIN, EPS, cells, ALPHA) >= POWER

    r = _chain_samples(q, p, verify, method, seed=7 if method == "token" else 8)
    fit = gof_test(_counts(r), law)
    assert fit.impossible == 0 and fit.p_value > ALPHA, fit

    wrong = _resample_from_p_law(q, p)  # the variant is token-wise whatever the method
    pooled = 0.5 * (np.abs(np.bincount(labels, weights=wrong[pos]) - np.bincount(labels, weights=law[pos])).sum()
                    + wrong[~pos].sum())
    assert pooled >= EPS, pooled  # so the power calculation covers the control
    bad = _chain_samples(q, p, resample_from_p_sampled, method, seed=9)
    assert gof_test(_counts(bad), wrong).p_value > ALPHA  # the control is what we think it is
    assert gof_test(_counts(bad), law).p_value < ALPHA


def test_uniforms_are_exactly_the_generators_numbers():
    """`uniforms=` is the generator's draw made explicit: torch.rand((B, k+1), float64) from a
    generator, passed as uniforms, gives the result of passing a copy of that generator -- for
    both methods -- and a generator passed alongside uniforms is not advanced."""
    B, k, V = 300, 3, 7
    g = _gen(5)
    p = torch.softmax(torch.randn(B, k + 1, V, generator=g, dtype=F64), -1)
    q = torch.softmax(torch.randn(B, k, V, generator=g, dtype=F64), -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, k)
    for method in METHODS:
        u = torch.rand((B, k + 1), generator=_gen(6), dtype=F64)
        a = verify(d, q, p, method=method, generator=_gen(6))
        side = _gen(99)
        before = side.get_state()
        b = verify(d, q, p, method=method, generator=side, uniforms=u)
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)
        assert torch.equal(side.get_state(), before)
        assert 0 < int((a.num_accepted < k).sum()) < B  # rejections and full acceptances both occur
