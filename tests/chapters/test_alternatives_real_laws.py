"""Exact one-step laws on real logits (here: the tiny seeded pair's): every lossless rule at TV 0,
approximate rules and greedy drafts at a positive TV, and the precision paths."""

import numpy as np
import pytest
import torch

from specdec.core.rules import alternatives
from specdec.core.rules import approximate
from specdec.core.rules.precision import PATHS, token_parts
from specdec.core.sampling import SamplingConfig
from specdec.chapters.ch08 import real_laws


@pytest.fixture(scope="module")
def logits(tiny_pair):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    return real_laws.context_logits(target, draft, prompts, 8)


def test_context_logits_shapes_and_bad_count(tiny_pair, logits):
    lt, lq = logits
    assert lt.shape == lq.shape == (8, 64) and lt.dtype == torch.float64
    with pytest.raises(ValueError, match="contexts"):
        real_laws.context_logits(*tiny_pair, torch.zeros(1, 3, dtype=torch.long), 4)


def test_rule_rows_lossless_exact_lossy_not(logits):
    tok = token_parts(torch.float64)
    rules = {"token": (tok, "lossless", False), "match": (alternatives.MATCH.parts, "lossless", False),
             "match, greedy drafts": (alternatives.MATCH.parts, "lossless", True),
             "typical": (approximate.typical().parts, "approximate", False),
             "greedy draft, sampled target": (tok, "approximate", True)}
    rows = {r["algorithm"]: r for r in real_laws.rule_real_rows(*logits, rules, SamplingConfig(1.0), n_drafts=(1, 3),
                                                               alpha=1e-3, power=0.999)}
    for name in ("token", "match", "match, greedy drafts"):
        assert rows[name]["tv_max"] < 1e-12 and rows[name]["detect_N"] == 0
    for name in ("typical", "greedy draft, sampled target"):
        assert rows[name]["tv_median"] > 1e-3 and rows[name]["detect_N"] > 0
    assert rows["match"]["accept_first"] < rows["token"]["accept_first"]
    assert rows["multi-draft n=1"]["accept_first"] == pytest.approx(rows["token"]["accept_first"], abs=1e-9)
    assert rows["multi-draft n=3"]["accept_first"] > rows["token"]["accept_first"]


def test_precision_paths_on_real_logits(logits):
    rows = {r["path"]: r for r in real_laws.precision_real_rows(*logits, SamplingConfig(1.0))}
    assert set(rows) == set(PATHS) and all(r["contexts"] == 8 for r in rows.values())
    exact = rows["exact (float64)"]
    assert exact["tv_exact_max"] < 1e-12 and exact["tv_same_max"] < 1e-12 and exact["row_sum_dev_max"] < 1e-12
    assert rows["float32 engine"]["tv_exact_max"] < 1e-5
    bf16, bf16_f32 = rows["bf16 softmax"], rows["bf16 logits, float32 softmax"]
    assert bf16["tv_same_median"] > bf16_f32["tv_same_max"] and bf16["row_sum_dev_max"] > 1e-5


def test_sampled_precision_rows_check_the_computed_law(logits):
    """The real code path (verify on bf16 rows) follows the law `one_step_law` computes for it: with
    N = 60,000 the chi-square test has power 0.999 at level 1e-3 against a law at TV >= 0.03 over these
    64 tokens (sample_size(0.03, 64) = 49,166), so a wrong model of the path at that distance fails."""
    rows = {r["path"]: r for r in real_laws.sampled_precision_rows(*logits, ["bf16 softmax", "float32 engine"],
                                                                    SamplingConfig(1.0), samples=60_000, seed=0,
                                                                    alpha=1e-3, power=0.999)}
    for r in rows.values():
        assert r["p_vs_computed_law"] > 1e-3 and r["samples"] == 60_000
    assert rows["bf16 softmax"]["tv_same"] > rows["float32 engine"]["tv_same"]
    assert rows["float32 engine"]["detect_N"] > 10 ** 9
    with pytest.raises(ValueError, match="float64"):
        real_laws.sampled_precision_rows(*logits, ["bf16 softmax, verify in bf16"], SamplingConfig(1.0), samples=10,
                                         seed=0, alpha=1e-3, power=0.999)


def test_sampled_precision_negative_control(logits):
    """The same sampler and test against a law moved by TV about 0.05 from the computed one (5% of the
    mass moved onto the least likely token) must be rejected at N = 60,000 (power 0.999 at
    TV >= 0.03, see above)."""
    from specdec.core.rules.precision import PATHS, one_step_law, precision_cfg
    from specdec.core.stats import gof_test
    lt, lq = logits
    raw = precision_cfg(PATHS["bf16 softmax"], SamplingConfig(1.0))
    pt, qt = raw(lt[0]), raw(lq[0])
    law = one_step_law(pt, qt).numpy()
    counts = real_laws.first_token_counts(pt.to(torch.bfloat16), qt.to(torch.bfloat16), 60_000, 1).numpy()
    assert gof_test(counts, law / law.sum()).p_value > 1e-3
    law = law / law.sum()
    wrong = 0.95 * law + 0.05 * (np.arange(law.size) == law.argmin())  # TV = 0.05 (1 - law.min()) >= 0.049
    assert gof_test(counts, wrong).p_value < 1e-3
