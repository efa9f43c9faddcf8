"""Chapter 10's timing on the real embedded pair (tiny sizes; the numbers mean nothing here): each
speculative row's exactness decided before its speed is read -- at greedy by its own timed outputs
on every prompt, with a wrong rule that must be caught (the negative control), at a sampled setting
by the law test of the same method -- the pairs of every prompt pooled, a row with fewer pairs than
its level needs worded so, the draft lengths relabelled, the engines' plain decoding against a
reference, and greedy differences classified against plain decoding at the shared prefix."""

import pandas as pd
import pytest

from specdec.measure.protocol import OUT_OF_REACH
from specdec.audit import design, tables
from specdec.audit import speed as runs, versus
from specdec.audit.runs import Job
from specdec.peers.interface import Continuations
from specdec.peers.ours import OursEngine

PROMPTS = [[348, 891, 452, 264, 1125, 321], [47, 809, 600, 259, 12, 14]]
DRAFT = "draft-distilled"


@pytest.fixture(scope="module")
def ours():
    return OursEngine()


def _ours_pairs(ks):
    return [p for p in runs.speed_pairs(design.plan(2, DRAFT), ks) if p[0].engine == "ours"]


def test_draft_lengths_are_relabelled_and_keep_the_tested_configuration():
    pairs = _ours_pairs((1, 4))
    assert [p[1].label for p in pairs] == ["token verification, k = 1", "token verification, k = 4"]
    assert [p[1].spec.k for p in pairs] == [1, 4] and {p[2].label for p in pairs} == {"token verification, k = 2"}
    with pytest.raises(ValueError, match="k >= 1"):
        runs.at_k(pairs[0][1], 0)


def test_rows_are_exact_by_their_own_outputs_at_greedy_and_by_the_law_test_when_sampled(ours):
    pairs = _ours_pairs((1, 2))
    kw = dict(batches=(1,), length=4, rounds=2, settings=("greedy", "temperature 1"), seed=0)
    rows = runs.speed_rows(pairs, {"ours": ours}, PROMPTS, failed=set(), **kw)
    assert len(rows) == 4 and all(r["pairs"] == 4 and r["prompts"] == 2 and r["speedup"] > 0 for r in rows)
    assert [r["law"] for r in rows] == ["greedy outputs equal", "law test at k = 2 passed"] * 2
    assert all(r["verdict"] == OUT_OF_REACH for r in rows)  # 4 pairs cannot carry a 95% interval
    enough = runs.speed_rows(pairs[:1], {"ours": ours}, PROMPTS, failed=set(), **{**kw, "rounds": 4,
                                                                                    "settings": ("greedy",)})
    assert enough[0]["pairs"] == 8 and enough[0]["verdict"] in ("faster", "slower", "undecided")
    tested = ("ours", "token verification, k = 2")
    failed = runs.speed_rows(pairs, {"ours": ours}, PROMPTS, failed={tested}, **kw)
    assert [r["verdict"] == runs.NOT_EXACT for r in failed] == [False, True, False, True]
    # a rejected law is not timed at the sampled setting; greedy is still decided by its outputs
    assert [pd.isna(r["speedup"]) for r in failed] == [False, True, False, True]
    assert [r["law"] for r in failed][1::2] == ["law test at k = 2 rejected"] * 2
    with pytest.raises(ValueError, match="even"):
        runs.speed_rows(pairs, {"ours": ours}, PROMPTS, failed=set(), **{**kw, "rounds": 3})


class _WrongWhenSpeculating:
    """Our engine, except that speculative calls keep every draft (a named wrong rule)."""

    def __init__(self, ours):
        self.ours, self.name = ours, "ours"

    def continue_prompts(self, prompts, n, max_new_tokens, sampling, spec, seed):
        if spec is None:
            return self.ours.continue_prompts(prompts, n, max_new_tokens, sampling, spec, seed)
        wrong = design.NegativeControl(self.ours.model("target"), self.ours.model(DRAFT), "always_accept")
        return wrong.continue_prompts(prompts, n, max_new_tokens, sampling, spec, seed)


def test_a_wrong_rule_is_not_read_as_a_speedup_at_greedy(ours):
    rows = runs.speed_rows(_ours_pairs((2,)), {"ours": _WrongWhenSpeculating(ours)}, PROMPTS, batches=(1,),
                           length=16, rounds=2, settings=("greedy",), seed=0, failed=set())
    assert rows[0]["law"] == "greedy outputs differ" and rows[0]["verdict"] == runs.NOT_EXACT


def test_plain_decoding_against_a_reference(ours):
    engines = {"ours, eager": ours, "ours, lean": OursEngine(mode="lean", _models=ours._models)}
    rows = versus.plain_rows(engines, "ours, eager", PROMPTS, batches=(1, 2), length=3, rounds=2,
                           settings=("greedy",), seed=0)
    assert [(r["engine"], r["batch"]) for r in rows] == [("ours, lean", 1), ("ours, lean", 2)]
    assert all(r["pairs"] == 4 and r["verdict"] == OUT_OF_REACH for r in rows)  # 2 prompts x 2 rounds
    assert all(r["relative_speed"] > 0 and r["relative_lo"] <= r["relative_speed"] <= r["relative_hi"]
               and r["tokens_per_s"] > 0 for r in rows)
    with pytest.raises(ValueError, match="reference"):
        versus.plain_rows(engines, "vllm", PROMPTS, batches=(1,), length=3, rounds=2, settings=("greedy",), seed=0)
    lean = OursEngine(mode="lean", _models=ours._models)
    g = ours.continue_prompts(PROMPTS, 2, 6, design.SETTINGS["greedy"], None, 0)
    assert lean.continue_prompts(PROMPTS, 2, 6, design.SETTINGS["greedy"], None, 0).tokens == g.tokens
    with pytest.raises(ValueError, match="mode"):
        OursEngine(mode="fast").continue_prompts(PROMPTS, 1, 2, design.SETTINGS["greedy"], None, 0)


def test_greedy_differences_are_classified_against_plain_at_the_prefix():
    plain_cfg, spec_cfg = design.plan(2, DRAFT)[0], design.plan(2, DRAFT)[1]
    first = {Job(plain_cfg, "greedy", "greedy", 1, 3, 0): Continuations([[[1, 2, 3], [1, 2, 3]]], {}, {}),
             Job(spec_cfg, "greedy", "greedy", 1, 3, 0): Continuations([[[1, 5, 3], [1, 2, 7]]], {}, {})}
    again = {(9, 1): 2, (9, 1, 2): 7}  # plain decoding emits its own token at (9, 1), the other one at (9, 1, 2)
    row = tables.greedy_table(first, [[9]], lambda engine, prompt, prefix: again[tuple(prompt + prefix)])[0]
    assert (row["samples"], row["identical"]) == (2, 0)
    assert row["against_speculation"] == 1 and row["plain_not_reproducible"] == 1


def test_tokens_per_forward_reads_each_engines_kept_drafts_and_factors_the_speedup(ours):
    """E[L] = tokens / (tokens - kept drafts), the kept drafts read under ours' and llama.cpp's names;
    vLLM's from its step records (its counter also counts kept drafts max_tokens cut); NaN without
    them, an error for a count that cannot be theirs; a timed row's E[L] is what our engine's own
    step records give for the same call."""
    toks = [[[1] * 12, [2] * 12]]  # 24 tokens
    for name in ("num_accepted_tokens", "draft_n_accepted"):  # ours (and HF), llama.cpp
        assert runs.tokens_per_forward(toks, {name: 8}) == pytest.approx(24 / 16)
    assert pd.isna(runs.tokens_per_forward(toks, {"num_drafts": 3}))
    for bad in (-1, 24, 30):
        with pytest.raises(ValueError, match="not a count of their drafts"):
            runs.tokens_per_forward(toks, {"draft_n_accepted": bad})
    # vLLM: 4 steps keeping 2 drafts each would make 13 tokens; max_tokens cut the last kept draft, which
    # its counter (8) still counts: E[L] is 12 tokens over prefill + 4 steps, not 12 / (12 - 8)
    one = [[[7] * 12]]
    vllm = {"vllm:spec_decode_num_accepted_tokens": 8}
    assert runs.tokens_per_forward(one, vllm, [[[(2, 2)] * 4]]) == pytest.approx(12 / 5)
    assert pd.isna(runs.tokens_per_forward(one, vllm)) and pd.isna(runs.tokens_per_forward(one, vllm, [[None]]))
    row = runs.speed_rows(_ours_pairs((2,)), {"ours": ours}, PROMPTS[:1], failed=set(), batches=(1,), length=12,
                          rounds=2, settings=("greedy",), seed=0)[0]
    spec = _ours_pairs((2,))[0][1]
    res = ours.continue_prompts([PROMPTS[0]], 1, 12, design.SETTINGS["greedy"], spec.spec, 0)
    kept = sum(a for sample in res.steps[0] for _, a in sample)
    assert row["tokens_per_forward"] == pytest.approx(12 / (12 - kept)) and 1 < row["tokens_per_forward"] <= 3
