"""The conformance test on the embedded pair (target, draft-distilled) through our engine: token
verification passes the law test at the stated power, at T = 1 and at T = 0.7 with top-p 0.9, as
does plain decoding (the positive control); named wrong variants of `specdec.core.rules.variants`, run
inside the same engine as its verifier, fail it and are diagnosed; acceptance meets its exact
expectation and misses the expectation of the wrong rule.

Size: 3 prompts, n per prompt from `design_n` for worst-case power 0.8 (level 0.01 split over the
two orders, 16 bins) at binned TV 0.15 for the engine's own runs and at 0.1 for the wrong variants:
a smoke size (chapter 10 is the audit).  At the positive controls' smaller n their power against
the residual-omitted variant falls short of 0.95: ruling that bug out is the wrong-variant tests'
job, at their n.  Each wrong variant's own power at that n
(`alternative_power`, its exact binned law) is asserted >= 0.95 before it is required to fail, so
a failure to catch it would be the test's fault, not luck.  Seeds fixed."""

import numpy as np
import pytest
import torch

from specdec.core.cost import expected_tokens
from specdec.core.sampling import SamplingConfig
from specdec.engine.decode import generate
from specdec.family.loader import load_pair
from specdec.audit.design import NegativeControl
from specdec.peers.acceptance import (conditional_acceptance, first_step_expectation,
                                      metrics_from_counters, steps_of_ours)
from specdec.peers.conformance import alternative_power, design_n, law_test, verdict
from specdec.peers.diagnosis import diagnose
from specdec.peers.interface import Sampling, Speculation
from specdec.peers.laws import (CANDIDATES, candidate_joint, enumerate_prompt, joint_cells, ratio_score,
                                target_joint)
from specdec.peers.ours import OursEngine

EPS, ALPHA, BINS = 0.15, 0.01, 16  # the positive controls' design: power 0.8 at binned TV 0.15
EPS_VARIANTS = 0.1  # the wrong variants' n: power 0.8 at TV 0.1 (the residual-omitted one needs it for 0.95)
TEXTS = ["Once upon a time there was a little", "The dog ran to the", "She looked at the sky and"]
CONFIGS = {"T=1": SamplingConfig(1.0), "T=0.7 top-p 0.9": SamplingConfig(0.7, top_p=0.9)}


@pytest.fixture(scope="module")
def pair():
    target, draft, tok = load_pair("embedded", "draft-distilled", dtype=torch.float32)
    return target, draft, [tok.encode(t) for t in TEXTS]


@pytest.fixture(scope="module")
def contexts(pair):
    target, draft, prompts = pair
    return {name: [enumerate_prompt(target, draft, p, cfg) for p in prompts] for name, cfg in CONFIGS.items()}


def _counts(ctxs, tokens):
    return [np.bincount(joint_cells(c, np.asarray(t)[:, :2]), minlength=c.support.numel() * c.V + 1)
            for c, t in zip(ctxs, tokens)]


def _variant_tokens(pair, cfg, variant, n, seed):
    target, draft, prompts = pair  # max_new_tokens 3 so that k = 2 is not clipped: x1, x2 both verified
    return NegativeControl(target, draft, variant).continue_prompts(
        prompts, n, 3, Sampling(cfg.temperature, cfg.top_k, cfg.top_p), Speculation("token", k=2), seed).tokens


N = design_n(len(TEXTS), eps=EPS, alpha=ALPHA, n_bins=BINS, orders=2)
N_VARIANTS = design_n(len(TEXTS), eps=EPS_VARIANTS, alpha=ALPHA, n_bins=BINS, orders=2)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("spec", [Speculation("token", k=2, draft="draft-distilled"), None])
def test_ours_passes(pair, contexts, name, spec):
    cfg, ctxs = CONFIGS[name], contexts[name]
    s = Sampling(cfg.temperature, cfg.top_k, cfg.top_p)
    got = OursEngine().continue_prompts(pair[2], N, 3, s, spec, seed=11)
    r = law_test([target_joint(c, cfg) for c in ctxs], _counts(ctxs, got.tokens), ctxs[0].V, alpha=ALPHA,
                 eps=EPS, n_bins=BINS, scores=[ratio_score(c, cfg) for c in ctxs])
    assert r.power >= 0.8 and r.n >= r.n_needed and r.impossible == 0
    assert r.p_value > ALPHA, verdict(r)
    assert verdict(r) == "consistent"


@pytest.mark.parametrize("name,variant,diagnosis", [("T=1", "always_accept", "draft law"),
                                                    ("T=1", "resample_from_p", "residual omitted"),
                                                    ("T=0.7 top-p 0.9", "resample_from_p", "residual omitted")])
def test_wrong_variants_fail_and_are_diagnosed(pair, contexts, name, variant, diagnosis):
    cfg, ctxs = CONFIGS[name], contexts[name]
    laws = [target_joint(c, cfg) for c in ctxs]
    cands = {c: [candidate_joint(x, cfg, c, verified=(True, True)) for x in ctxs] for c in CANDIDATES}
    scores = [ratio_score(c, cfg) for c in ctxs]
    assert alternative_power(laws, cands[diagnosis], ctxs[0].V, N_VARIANTS, alpha=ALPHA, n_bins=BINS,
                             scores=scores)["power"] >= 0.95
    counts = _counts(ctxs, _variant_tokens(pair, cfg, variant, N_VARIANTS, seed=23))
    r = law_test(laws, counts, ctxs[0].V, alpha=ALPHA, eps=EPS_VARIANTS, n_bins=BINS, scores=scores)
    assert r.p_value < ALPHA and verdict(r) == "inconsistent"
    rows = diagnose(cands, counts)
    assert rows[0]["candidate"] == diagnosis and rows[1]["deficit"] > 5


def test_acceptance_meets_its_exact_expectation(pair, contexts):
    """Position 1 of the first step against its exact value; every position against its conditional
    expectation (|z| < 4); the same steps held to the argmax rule's expectation miss it (|z| > 4)."""
    target, draft, prompts = pair
    cfg = CONFIGS["T=1"]
    n = 300
    res = generate(target, torch.tensor([prompts[0]] * n), drafter=draft, k=2, max_new_tokens=8, temperature=1.0,
                   generator=torch.Generator().manual_seed(5))
    steps = steps_of_ours(res, len(prompts[0]))
    first_kept = sum(st[0][2] >= 1 for st in steps)
    lo, hi = first_step_expectation(contexts["T=1"][0], cfg, "sampled", first_from_prefill=False)
    assert lo == hi and abs(first_kept / n - lo) < 4 * np.sqrt(lo * (1 - lo) / n)
    seqs = [prompts[0] + t.tolist() for t in res.tokens]
    rows = conditional_acceptance(target, draft, seqs, steps, cfg, "sampled")
    assert [r["position"] for r in rows] == [1, 2] and all(abs(r["z"]) < 4 for r in rows)
    assert rows[0]["reached"] == sum(len(s) for s in steps)
    wrong = conditional_acceptance(target, draft, seqs, steps, cfg, "argmax")
    assert any(abs(r["z"]) > 4 for r in wrong)
    lo2, hi2 = first_step_expectation(contexts["T=1"][0], cfg, "sampled", first_from_prefill=True)
    assert 0 <= lo2 <= hi2 <= lo2 + 2e-3


def test_metric_conventions():
    c = {"vllm:spec_decode_num_drafts": 10, "num_draft_tokens": 20, "num_accepted_tokens": 12,
         "num_accepted_tokens_per_pos": [8, 4]}
    m = metrics_from_counters(c)
    assert m["acceptance_rate"] == 0.6 and m["mean_accepted_length"] == 2.2 and m["alpha"] == [0.8, 0.5]
    assert m["position_rate"] == [0.8, 0.4] and m["alpha_mle"] == 12 / 18  # F = 10 - 4 steps rejected one
    with pytest.raises(ValueError, match="non-increasing"):
        metrics_from_counters({**c, "num_accepted_tokens_per_pos": [4, 8]})
    with pytest.raises(ValueError, match="lack"):
        metrics_from_counters({"num_drafts": 1})
    # why the rate misranks draft lengths: with one alpha per position E[L] rises with k, the rate falls
    lengths = [float(expected_tokens(0.7, k)) for k in (1, 2, 4)]
    rates = [(el - 1) / k for el, k in zip(lengths, (1, 2, 4))]
    assert lengths == sorted(lengths) and rates == sorted(rates, reverse=True)
