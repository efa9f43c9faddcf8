"""specdec.chapters.ch05.runs (chapter 05's measurement): the configuration list and the row
builder by hand, and recorded runs on tiny random-weight models (a draft equal to the target is
always accepted; a fixed seed gives the same rows)."""

import pandas as pd
import pytest
import torch

from specdec.family.architectures import build_model, real_size_config
from specdec.chapters.ch05 import runs

V = 32
TINY = dict(n_embd=32, n_head=2, vocab_size=V, n_positions=128, bos_token_id=0, eos_token_id=0)


@pytest.fixture(scope="module")
def pair():
    g = torch.Generator().manual_seed(0)
    return (build_model(real_size_config("gpt2-small", n_layer=2, **TINY), generator=g),
            build_model(real_size_config("draft-3m", n_layer=1, **TINY), generator=g))


def test_configurations_skip_greedy_block_and_end_with_the_nucleus_setting():
    cfgs = runs.configurations(["a", "b"], [0.0, 0.7], ["token", "block"], top_p=0.9)
    assert [(c["draft"], c["temperature"], c["top_p"], c["method"]) for c in cfgs] == [
        ("a", 0.0, None, "token"), ("a", 0.7, None, "token"), ("a", 0.7, None, "block"), ("a", 1.0, 0.9, "token"),
        ("b", 0.0, None, "token"), ("b", 0.7, None, "token"), ("b", 0.7, None, "block"), ("b", 1.0, 0.9, "token")]
    assert runs.configurations(["a"], [1.0], ["token"], 0.5, top_p_temperature=0.7)[-1]["temperature"] == 0.7
    with pytest.raises(ValueError, match="top_p"):
        runs.configurations(["a"], [1.0], ["token"], 1.0)


def test_select_drafts():
    d = {"ngram": 1, "draft-small": 2}
    assert runs.select_drafts(d, "draft-small") == {"draft-small": 2}
    assert runs.select_drafts(d, "") == d and runs.select_drafts(d, "Qwen/Qwen2.5-0.5B") == d


def test_summary_row_and_parse_counts_by_hand():
    cfg = {"draft": "a", "temperature": 0.0, "top_p": None, "method": "token"}
    row = runs.summary_row(cfg, {"steps": 3, "alpha_mle": 0.5, "counts": [1, 1, 1]}, k=2, prompts=4,
                           beta_real_text=0.4, distinct=0.9)
    assert list(row) == ["draft", "temperature", "top_p", "method", "k", "prompts", "steps", "alpha_mle",
                         "beta_real_text", "distinct_4gram", "counts"]
    assert row["top_p"] == 1.0 and row["counts"] == "1 1 1" and cfg["top_p"] is None  # input untouched
    assert runs.summary_row({**cfg, "top_p": 0.9}, {"counts": [2]}, 1, 1, 0.0, 1.0, distinct_n=3)["distinct_3gram"] == 1.0
    assert runs.parse_counts(row["counts"]).tolist() == [1, 1, 1]


def test_record_runs_on_tiny_models(pair):
    target, draft = pair
    text = torch.randint(0, V, (3, 16), generator=torch.Generator().manual_seed(2))  # 8 prompt + 8 real tokens
    # the target drafting for itself, greedily (one-hot p = q: beta exactly 1; at T > 0 the float32
    # sum of min(p, p) can exceed 1 by ~1e-7, which summarize_steps refuses), then a real draft
    cfgs = [dict(draft="same", temperature=0.0, top_p=None, method="token")]
    cfgs += runs.configurations(["draft"], [0.0, 1.0], ["token", "block"], top_p=0.9)
    kw = dict(k=3, new_tokens=10, seed=7)
    rows = runs.record_runs(target, {"same": target, "draft": draft}, text, 8, cfgs, **kw)
    assert len(rows) == len(cfgs) and all(r["k"] == 3 and r["prompts"] == 3 for r in rows)
    assert [(r["draft"], r["temperature"], r["top_p"], r["method"]) for r in rows] == [
        (c["draft"], c["temperature"], c["top_p"] or 1.0, c["method"]) for c in cfgs]
    for r in rows:
        counts = runs.parse_counts(r["counts"])
        assert counts.size == 4 and counts.sum() == r["steps"] and 0 <= r["alpha_lo"] <= r["alpha_mle"] <= r["alpha_hi"]
        assert 0 < r["distinct_4gram"] <= 1
    same = rows[0]  # every draft accepted: all steps accept k
    assert same["alpha_mle"] == 1.0 and same["beta_real_text"] == 1.0 and same["beta_mean"] == 1.0
    assert same["counts"] == f"0 0 0 {same['steps']}" and same["el_measured"] == 4.0
    assert sum(r["alpha_mle"] < 1 for r in rows[1:]) >= 3, [r["alpha_mle"] for r in rows]
    with pytest.raises(ValueError, match="prompt_len"):
        runs.record_runs(target, {"draft": draft}, text, 16, cfgs[4:5], **kw)


def test_record_runs_are_seeded(pair):
    target, draft = pair
    text = torch.randint(0, V, (2, 14), generator=torch.Generator().manual_seed(3))
    cfgs = runs.configurations(["draft"], [1.0], ["token"], top_p=0.9)
    a = runs.record_runs(target, {"draft": draft}, text, 6, cfgs, k=2, new_tokens=8, seed=1)
    b = runs.record_runs(target, {"draft": draft}, text, 6, cfgs, k=2, new_tokens=8, seed=1)
    c = runs.record_runs(target, {"draft": draft}, text, 6, cfgs, k=2, new_tokens=8, seed=2)
    assert pd.DataFrame(a).equals(pd.DataFrame(b))  # NaN (e.g. a G-test without degrees of freedom) equal to NaN
    assert a[0]["el_pred_conditional"] != c[0]["el_pred_conditional"]
