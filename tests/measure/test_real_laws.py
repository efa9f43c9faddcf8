"""Exact one-step laws on real logits (here: the tiny seeded pair's): every lossless rule at TV 0,
approximate rules and greedy drafts at a positive TV, and the precision paths."""

import pytest
import torch

from specdec.core import alternatives, approximate
from specdec.core.precision import PATHS, token_parts
from specdec.core.sampling import SamplingConfig
from specdec.measure import real_laws


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
