"""Per-sample step records turned into per-token step indices (hand-worked records: vLLM's, which
list only the steps that drafted, after a prefill token; ours, which list every step); the candidate
laws' implied acceptance against a brute-force sum; a diagnosis that sets aside a rule the engine's
own counter excludes; Hugging Face's candidate lists turned into steps; the project's expand against
the expansion it replaces."""

import numpy as np
import pytest
import torch

from specdec.core.sampling import SamplingConfig
from specdec.peers.diagnosis import diagnose, greedy_divergences
from specdec.peers.hf import steps_from_candidates
from specdec.peers.laws import CANDIDATES, PromptContexts, candidate_acceptance, position_law
from specdec.peers.steps import aligned, drafted_tokens, token_steps
from specdec.peers.vllm_patch import expand_keep_dtype


def test_token_steps_hand_worked():
    idx, drafted = token_steps([(2, 1), (2, 0)], 4, prefill=True)
    assert idx.tolist() == [0, 1, 2, 1] and drafted.tolist() == [False, True, True, True]
    idx, drafted = token_steps([(2, 2), (0, 0), (1, 0)], 5, prefill=False, complete=True)
    assert idx.tolist() == [1, 2, 3, 1, 1] and drafted.tolist() == [True, True, True, False, True]
    # vLLM lists only drafted steps: 2 tokens after prefill covered by (2, 0) alone is not aligned
    assert not aligned([(2, 0)], 3, prefill=True) and token_steps([(2, 0)], 3, True)[0].tolist() == [0, 0, 0]
    assert aligned([(2, 2)], 3, prefill=True)  # the last step may be cut by max_new_tokens
    assert drafted_tokens([(2, 1), (2, 0)], 4, prefill=True) == 3 and drafted_tokens([(2, 2)], 2, True) == 1
    for bad in ([(2, 3)], [(-1, 0)], [(1, -1)]):
        with pytest.raises(ValueError, match="step"):
            token_steps(bad, 4, prefill=True)
    with pytest.raises(ValueError, match="L"):
        token_steps([(2, 1)], 0, prefill=True)
    with pytest.raises(ValueError, match="no step record"):
        drafted_tokens(None, 4, prefill=True)


def test_hf_candidate_lists_become_steps():
    # step 1 proposes [5, 6]: 5 kept, 6 rejected (token 9 emitted); step 2 proposes nothing; step 3 [4] kept
    assert steps_from_candidates([[5, 6], [], [4]], [5, 9, 7, 4, 8]) == [(2, 1), (0, 0), (1, 1)]
    assert steps_from_candidates([[5]], [5, 9, 7]) is None  # the lists do not account for the tokens


def _ctx():
    g = torch.Generator().manual_seed(0)
    V, S = 6, 3
    t1, t2 = torch.randn(V, generator=g, dtype=torch.float64), torch.randn(S, V, generator=g, dtype=torch.float64)
    d1, d2 = torch.randn(V, generator=g, dtype=torch.float64), torch.randn(S, V, generator=g, dtype=torch.float64)
    return PromptContexts((1,), torch.arange(S), t1, t2, d1, d2, 0.0)


@pytest.mark.parametrize("rule", ["sampled", "argmax"])
def test_candidate_acceptance_against_a_brute_force_sum(rule):
    ctx, cfg, t = _ctx(), SamplingConfig(1.0), 0.5
    p1 = cfg(ctx.target1)[ctx.support]
    for name in CANDIDATES:
        total = 0.0
        for s in range(3):
            p, q = cfg(ctx.target2[s]), cfg(ctx.draft2[s])
            pt, qt = SamplingConfig(t)(ctx.target2[s]), SamplingConfig(t)(ctx.draft2[s])
            star = int(q.argmax())
            if name == "draft law":
                a = 1.0
            elif name in ("target", "residual omitted"):
                a = float(torch.minimum(p, q).sum()) if rule == "sampled" else float(p[star])
            elif name == "argmax drafts":
                a = min(1.0, float(p[star] / q[star]))
            elif name == "q at T'":
                a = sum(float(qt[x]) * min(1.0, float(p[x] / q[x])) for x in range(6))
            else:  # p at T'
                a = float(torch.minimum(pt, q).sum()) if rule == "sampled" else float(pt[star])
            total += float(p1[s]) * a
        assert candidate_acceptance(ctx, cfg, name, rule, t) == pytest.approx(total, abs=1e-12), name
    assert torch.allclose(position_law("p at T'", ctx.target2, ctx.draft2, cfg, 0.5), SamplingConfig(0.5)(ctx.target2))


def test_a_rule_the_counter_excludes_is_set_aside():
    law, alt = np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.1, 0.8])
    counts = [np.array([10, 10, 80])]
    plain = diagnose({"every draft kept": [alt], "residual omitted": [law]}, counts)
    assert plain[0]["candidate"] == "every draft kept" and not plain[0]["excluded"]
    ruled = diagnose({"every draft kept": [alt], "residual omitted": [law]}, counts,
                     implied={"every draft kept": 1.0, "residual omitted": 0.05}, kept=3, drafts=100)
    assert ruled[0]["candidate"] == "residual omitted" and ruled[-1]["excluded"] and ruled[-1]["z"] == -np.inf
    for kw, match in [(dict(kept=3), "both"), (dict(kept=5, drafts=3), "kept <= drafts")]:
        with pytest.raises(ValueError, match=match):
            diagnose({"a": [law]}, counts, **kw)
    with pytest.raises(ValueError, match="at least one candidate"):
        diagnose({}, counts)
    with pytest.raises(ValueError, match="laws for"):
        diagnose({"a": [law, law]}, counts)
    with pytest.raises(ValueError, match="finite"):
        diagnose({"a": [np.array([np.nan, 0.5, 0.5])]}, counts)


def test_greedy_divergences_classes():
    plain = [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2]]
    spec = [[1, 2, 3], [1, 5, 3], [1, 2, 6], [7, 2, 3], [1, 2, 3]]
    again = {(1,): 2, (1, 2): 6, (): 9}  # plain decoding rerun at the shared prefix
    rows = greedy_divergences(spec, plain, lambda prefix: again[tuple(prefix)])
    assert [r["class"] for r in rows] == ["equal", "against speculation", "plain not reproducible", "neither",
                                          "length"]
    with pytest.raises(ValueError, match="sequences"):
        greedy_divergences(spec, plain[:2], lambda p: 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.float64])
def test_the_projects_expand_keeps_the_callers_dtype(dtype):
    x = torch.tensor([0, 0.7, 1.5] if dtype.is_floating_point else [0, 50, 20], dtype=dtype)
    cu = torch.tensor([2, 2, 5], dtype=torch.int32)  # request 1 has no drafted token
    out = expand_keep_dtype(x, cu, 6, replace_from=0, replace_to=1)  # 0 is replaced by 1, as vLLM's kernel does
    assert out.dtype == dtype and out[:5].tolist() == [1, 1, x[2].item(), x[2].item(), x[2].item()] and out[5] == 0
    assert expand_keep_dtype(x, cu, 5, replace_from=-1).tolist() == [0, 0] + [x[2].item()] * 3
    with pytest.raises(ValueError, match="does not fit"):
        expand_keep_dtype(x, cu, 4)
