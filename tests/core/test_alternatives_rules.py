"""Verification rules beyond token verification (chapter 08): the positional machinery against
`verify`, the lossless alternatives (match, one-hot q, multi-draft) against the target's exact law,
the approximate rules as the negative controls they are, the optimal multi-draft bound, and the
law of reduced-precision paths.  Every exact claim is checked by enumeration on the toy pair of
chapter 02; sampled checks use chapter 02's chi-square test at a stated power."""

import numpy as np
import pytest
import torch

from specdec.core.rules import alternatives
from specdec.core.rules import approximate
from specdec.core.rules import multidraft
from specdec.core.rules import precision
from specdec.core.exact import (accepted_law, expected_accepted, expected_accepted_rule, spec_law, step_outcomes,
                                target_law)
from specdec.core.rules.positional import first_token_law, positional_law_rule, rule_outcomes, sample_rule
from specdec.core.sampling import SamplingConfig, process_logits
from specdec.core.stats import counts_of, gof_test, sample_size
from specdec.core.toy import sample_speculative, toy_pair
from specdec.core.verify import verify

F64 = torch.float64
CFGS = [SamplingConfig(1.0), SamplingConfig(1.2, 3, 0.9), SamplingConfig(0.6)]
GREEDY = SamplingConfig(0.0)


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


_token_parts = precision.token_parts(F64)  # token verification as a positional rule, checked against verify below


def _random_inputs(B, k, V, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.softmax(torch.randn(B, k, V, generator=g, dtype=F64) * 2, -1)
    p = torch.softmax(torch.randn(B, k + 1, V, generator=g, dtype=F64) * 2, -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).reshape(B, k)
    return d, q, p


def test_positional_machinery_reproduces_verify_outcome_for_outcome():
    d, q, p = _random_inputs(3000, 3, 7, 0)
    u = torch.rand(3000, 4, generator=torch.Generator().manual_seed(1), dtype=F64)
    a, b = sample_rule(_token_parts, d, q, p, uniforms=u), verify(d, q, p, uniforms=u)
    assert torch.equal(a.num_accepted, b.num_accepted) and torch.equal(a.tokens, b.tokens)
    assert torch.allclose(rule_outcomes(_token_parts, d, q, p), step_outcomes(d, q, p, "token"), atol=1e-15)


def test_match_and_one_hot_are_one_algorithm(pair):
    d, q, p = _random_inputs(500, 3, 6, 2)
    for x, y in zip(alternatives.MATCH.parts(d, q, p), alternatives.ONE_HOT.parts(d, q, p)):
        assert torch.allclose(x, y, atol=1e-15)
    T, D = pair
    assert expected_accepted_rule(T, D, 2, alternatives.MATCH.law_rule) < expected_accepted(T, D, 2) - 0.1


@pytest.mark.parametrize("cfg", CFGS, ids=str)
@pytest.mark.parametrize("rule", [alternatives.MATCH, alternatives.ONE_HOT], ids=lambda r: r.name)
def test_lossless_alternatives_keep_the_target_law_for_any_draft_law(pair, cfg, rule):
    T, D = pair
    ref = target_law(T, 3, cfg)
    for k in (1, 2, 3):
        for draws in (cfg, GREEDY):  # exact even for greedy drafts: q never enters the rule
            law = spec_law(T, D, 3, k, rule.law_rule, cfg, cfg, draws)
            assert float((law - ref).abs().max()) < 1e-12


@pytest.mark.parametrize("rule", [approximate.typical(), approximate.typical(0.4, 0.63), approximate.relaxed(0.5),
                                  approximate.relaxed(0.8, True), approximate.top_k_accept(1),
                                  approximate.top_k_accept(2)], ids=lambda r: r.name)
def test_approximate_rules_change_the_law_and_say_so(pair, rule):
    T, D = pair
    cfg = CFGS[0]
    law = spec_law(T, D, 3, 2, rule.law_rule, cfg)
    assert not rule.lossless
    assert 0.5 * float((law - target_law(T, 3, cfg)).abs().sum()) > 0.05


def test_relaxed_at_lambda_one_is_token_verification(pair):
    T, D = pair
    assert approximate.relaxed(1.0).lossless and not approximate.relaxed(0.99).lossless
    for matching in (False, True):
        law = spec_law(T, D, 3, 2, approximate.relaxed(1.0, matching).law_rule, CFGS[1])
        assert float((law - spec_law(T, D, 3, 2, "token", CFGS[1])).abs().max()) < 1e-15


def test_typical_acceptance_threshold_example():
    p = torch.tensor([[[0.95, 0.05], [0.5, 0.5]]], dtype=F64)
    q = torch.tensor([[[0.5, 0.5]]], dtype=F64)
    a, r = approximate.typical().parts(torch.tensor([[1]]), q, p)  # threshold min(0.09, 0.3 e^-H) = 0.09
    assert a.item() == 0.0 and torch.allclose(r[0, 0], torch.tensor([0.95, 0.0], dtype=F64))  # p cut to {0}
    a, _ = approximate.typical().parts(torch.tensor([[0]]), q, p)
    assert a.item() == 1.0


def test_rule_checks_its_inputs_and_parameters():
    d, q, p = _random_inputs(2, 2, 5, 3)
    bad = p.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="p contains NaN"):
        alternatives.MATCH(d, q, bad)
    for make in (lambda: approximate.typical(0.0), lambda: approximate.relaxed(1.5), lambda: approximate.top_k_accept(0)):
        with pytest.raises(ValueError):
            make()


@pytest.mark.parametrize("cfg", CFGS[:2], ids=str)
def test_multi_draft_law_is_the_target_law(pair, cfg):
    T, D = pair
    ref = target_law(T, 3, cfg)
    for n in (1, 2, 3):
        law = spec_law(T, D, 3, 2, multidraft.multi_step_chunks, cfg, drafts=n)
        assert float((law - ref).abs().max()) < 1e-12
    one = expected_accepted_rule(T, D, 2, multidraft.multi_step_chunks, cfg)
    assert one == pytest.approx(expected_accepted(T, D, 2, "token", cfg), abs=1e-12)
    more = [expected_accepted_rule(T, D, 2, multidraft.multi_step_chunks, cfg, drafts=n) for n in (1, 2, 3)]
    assert more[0] < more[1] < more[2]


def _freq_p(T, D, cfg, n_drafts, N, seed):
    samples = sample_speculative(T, D, 3, 2, N, torch.Generator().manual_seed(seed), "token", cfg,
                                 verifier=multidraft.verify_multi, drafts=n_drafts)
    return gof_test(counts_of(samples.numpy(), T.V, 3), target_law(T, 3, cfg).reshape(-1).numpy()).p_value


def test_sampled_multi_draft_passes_and_a_missing_residual_update_is_caught(pair, monkeypatch):
    """Power: the test has power 0.999 at level 1e-3 against any law at TV >= 0.08 with N samples
    (`sample_size`); the broken variant (every candidate judged against p itself, no residual
    update) is at exact TV > 0.08, so it must be caught, and the real one must pass."""
    T, D = pair
    cfg = CFGS[1]
    cells = int((target_law(T, 3, cfg) > 0).sum())
    N = sample_size(0.08, cells, 1e-3, 0.999)
    assert _freq_p(T, D, cfg, 3, N, 11) > 1e-3
    monkeypatch.setattr(multidraft, "residual", lambda pc, qc: pc)
    bad = spec_law(T, D, 3, 2, multidraft.multi_step_chunks, cfg, drafts=3)
    assert 0.5 * float((bad - target_law(T, 3, cfg)).abs().sum()) > 0.08
    assert _freq_p(T, D, cfg, 3, N, 12) < 1e-3


def test_optimal_bound_formula_equals_the_linear_program_and_bounds_rrs():
    rng = np.random.default_rng(0)
    for V, n in [(3, 1), (3, 3), (4, 2), (5, 3), (4, 4)]:
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        opt = multidraft.optimal_acceptance(p, q, n)
        assert opt == pytest.approx(multidraft.optimal_acceptance_lp(p, q, n), abs=1e-9)
        assert multidraft.rrs_acceptance(p, q, n) <= opt + 1e-12
        if n == 1:
            assert opt == pytest.approx(np.minimum(p, q).sum(), abs=1e-12)
    assert multidraft.rrs_acceptance([0.5, 0.5], [1.0, 0.0], 2) == pytest.approx(0.5)


def test_multidraft_rejects_bad_shapes_and_large_vocabularies():
    with pytest.raises(ValueError, match="need drafts"):
        multidraft.verify_multi(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, 4), torch.zeros(2, 4, 4))
    with pytest.raises(ValueError, match="2\\^V"):
        multidraft.optimal_acceptance(np.ones(21) / 21, np.ones(21) / 21, 2)
    with pytest.raises(ValueError, match="distributions"):
        multidraft.rrs_acceptance([0.5, 0.6], [0.5, 0.5], 2)


def test_process_logits_works_in_the_requested_precision():
    x = torch.randn(3, 9, dtype=F64)
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        out = process_logits(x, 0.8, 4, 0.9, dtype=dt)
        assert out.dtype == dt and float((out.double().sum(-1) - 1).abs().max()) < 2e-2


def test_precision_paths(pair):
    """float64 is exact; float32 and half-precision *logits* with a float32 softmax stay within 1e-6
    of plain decoding in the same precision; a bfloat16 softmax does not (negative control)."""
    T, D = pair
    cfg = CFGS[1]
    tvs = {}
    for name, path in precision.PATHS.items():
        raw, norm = precision.precision_cfg(path, cfg), precision.precision_cfg(path, cfg, normalize=True)
        law = spec_law(T, D, 3, 2, positional_law_rule(precision.token_parts(precision.DTYPES[path.verify])), raw, raw, norm)
        tvs[name] = float(precision.tv(law.reshape(-1), target_law(T, 3, norm).reshape(-1)))
    assert tvs["exact (float64)"] < 1e-15
    for name in ("float32 engine", "bf16 logits, float32 softmax", "fp16 logits, float32 softmax"):
        assert tvs[name] < 1e-6
    assert tvs["bf16 softmax"] > 1e-4


def test_one_step_law_of_exact_rows_is_p():
    _, q, p = _random_inputs(50, 1, 8, 4)
    assert torch.allclose(precision.one_step_law(p[:, 0], q[:, 0]), p[:, 0], atol=1e-15)
    scaled = p[:, 0] * 1.01  # a row total off by 1%: the law moves (what a half-precision softmax does)
    assert float(precision.tv(precision.one_step_law(scaled, q[:, 0]), p[:, 0]).max()) > 1e-3


def test_first_token_law_is_the_first_position_of_rule_outcomes():
    d, q, p = _random_inputs(1, 1, 9, 5)
    for parts in (_token_parts, alternatives.MATCH.parts, approximate.typical(0.3, 0.5).parts, approximate.relaxed(0.5).parts):
        law, kept = first_token_law(parts, p[0, 0], q[0, 0])
        V = 9
        out = rule_outcomes(parts, torch.arange(V).unsqueeze(1), q[0, :1].expand(V, 1, V), p[0].expand(V, 2, V))
        w = q[0, 0]
        assert torch.allclose(law, w @ out[:, 0] + w * out[:, 1].sum(-1), atol=1e-15)
        assert kept == pytest.approx(float(w @ out[:, 1].sum(-1)), abs=1e-15)
    law, _ = first_token_law(_token_parts, p[0, 0], q[0, 0])
    assert torch.allclose(law, p[0, 0], atol=1e-15)
    greedy = torch.nn.functional.one_hot(q[0, 0].argmax(), 9).double()
    assert float((first_token_law(_token_parts, p[0, 0], q[0, 0], greedy)[0] - p[0, 0]).abs().sum()) > 0.01
    assert torch.allclose(first_token_law(alternatives.MATCH.parts, p[0, 0], q[0, 0], greedy)[0], p[0, 0], atol=1e-15)


@pytest.mark.parametrize("rule", [approximate.typical(), approximate.relaxed(0.5, True), approximate.top_k_accept(2)],
                         ids=lambda r: r.name)
def test_sampled_approximate_rule_follows_its_own_exact_law(pair, rule):
    """Every reported TV of an approximate rule is that of its exact law; this checks the sampled code
    path against it.  Power: N = sample_size(0.05, cells) gives power 0.999 at level 1e-3 against any
    law at TV >= 0.05 from the rule's own law; the negative control is the same samples against the
    target's law (TV > 0.3 on this toy), which must be rejected."""
    T, D = pair
    cfg = CFGS[0]
    own = spec_law(T, D, 3, 2, rule.law_rule, cfg).reshape(-1).numpy()
    N = sample_size(0.05, int((own > 0).sum()), 1e-3, 0.999)
    samples = sample_speculative(T, D, 3, 2, N, torch.Generator().manual_seed(21), "token", cfg, verifier=rule)
    counts = counts_of(samples.numpy(), T.V, 3)
    assert gof_test(counts, own).p_value > 1e-3
    assert gof_test(counts, target_law(T, 3, cfg).reshape(-1).numpy()).p_value < 1e-3


def test_sampled_multi_draft_accepted_counts_follow_the_exact_law(pair):
    """verify_multi's number of kept drafts in the first step against `accepted_law` of its exact rule
    (3 drafts, k = 2): chi-square with N = sample_size(0.03, 3 cells) (power 0.999 at level 1e-3 against
    TV >= 0.03); negative control: the same counts against single-draft token verification's law."""
    T, D = pair
    cfg, n, k = CFGS[1], 3, 2
    law = accepted_law(T, D, k, multidraft.multi_step_chunks, cfg, drafts=n).numpy()
    N = sample_size(0.03, 3, 1e-3, 0.999)
    g = torch.Generator().manual_seed(5)
    empty = torch.zeros(N, 0, dtype=torch.long)
    chains = []
    for _ in range(n):
        ctx = empty
        for _ in range(k):
            x = torch.multinomial(D.probs_for(ctx, cfg), 1, generator=g)
            ctx = torch.cat([ctx, x], 1)
        chains.append(ctx)
    d = torch.stack(chains, 1)  # (N, n, k)
    q = torch.stack([torch.stack([D.probs_for(c[:, :i], cfg) for i in range(k)], 1) for c in chains], 1)
    p = torch.stack([torch.stack([T.probs_for(c[:, :i], cfg) for i in range(k + 1)], 1) for c in chains], 1)
    kept = multidraft.verify_multi(d, q, p, generator=g).num_accepted
    counts = torch.bincount(kept, minlength=k + 1).numpy()
    assert gof_test(counts, law).p_value > 1e-3
    one = accepted_law(T, D, k, multidraft.multi_step_chunks, cfg, drafts=1).numpy()
    assert gof_test(counts, one).p_value < 1e-3


def test_optimal_bound_hand_worked_cases():
    # both candidates are token 0 for sure: the output can be a candidate only when it is 0, p(0) = 0.5
    assert multidraft.optimal_acceptance([0.5, 0.5], [1.0, 0.0], 2) == pytest.approx(0.5)
    assert multidraft.optimal_acceptance_lp([0.5, 0.5], [1.0, 0.0], 2) == pytest.approx(0.5)
    # p = q: one draft already suffices (accept always)
    assert multidraft.optimal_acceptance([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], 3) == pytest.approx(1.0)
    # q = point mass on 0, p = [0.2, 0.8], n = 3: the candidates are all 0, so at most p(0) = 0.2;
    # one draft gets min{p, q} summed = 0.2 as well -- more drafts cannot help a point-mass draft
    assert multidraft.optimal_acceptance([0.2, 0.8], [1.0, 0.0], 3) == pytest.approx(0.2)
    assert multidraft.rrs_acceptance([0.2, 0.8], [1.0, 0.0], 3) == pytest.approx(0.2)


def test_one_step_law_equals_first_token_law_of_token_parts_on_rounded_rows():
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(2, 12, generator=g, dtype=F64) * 3
    for path in precision.PATHS.values():
        raw = precision.precision_cfg(path, SamplingConfig(0.7, 6))
        p, q = raw(logits[0]), raw(logits[1])  # truncated rows: zeros in both p and q
        law, _ = first_token_law(precision.token_parts(precision.DTYPES[path.verify]), p, q, draws=q / q.sum())
        assert torch.isfinite(law).all()
        assert torch.allclose(law, precision.one_step_law(p, q, precision.DTYPES[path.verify]), atol=1e-15)


def test_new_functions_reject_bad_input(pair):
    T, D = pair
    for bad in ([float("nan"), 1.0], [0.5, 0.6]):
        with pytest.raises(ValueError, match="distributions"):
            multidraft.optimal_acceptance(bad, [0.5, 0.5], 2)
    for n in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="drafts n"):
            multidraft.rrs_acceptance([0.5, 0.5], [0.5, 0.5], n)
    with pytest.raises(ValueError, match="V\\^n"):
        multidraft.optimal_acceptance_lp(np.ones(10) / 10, np.ones(10) / 10, 6)
    d, q, p = _random_inputs(4, 2, 5, 6)
    bad = p.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="p contains NaN"):
        multidraft.verify_multi(d[:, None], q[:, None], bad[:, None])
    with pytest.raises(ValueError, match="out of range"):
        multidraft.verify_multi(d[:, None] + 10, q[:, None], p[:, None])
    with pytest.raises(ValueError, match="multi-draft rule"):
        spec_law(T, D, 2, 1, "token", drafts=2)
    with pytest.raises(ValueError, match="drafts >= 1"):
        accepted_law(T, D, 2, multidraft.multi_step_chunks, drafts=0)
    with pytest.raises(ValueError, match="floating torch.dtype"):
        process_logits(torch.zeros(3), dtype=torch.long)
