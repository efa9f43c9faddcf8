"""Chapter 10's stages on the real embedded pair (tiny sizes): stage 1 draws law, long and greedy
samples for every configuration the build did not ignore; stage 2 draws fresh samples only for the
rows stage 1 did not reject (vLLM keeping its engine-level seed, the in-process engines a new one);
the merged law table takes stage 2's test where it ran and keeps stage 1's p-value beside it; a wrong
rule is rejected at stage 1 and never reaches stage 2.  What ran and the verified samples are read
from the engine's own record; Hugging Face's samples drawn in processes of their own are the same."""

import math

import pytest
import torch

from specdec.audit import design, law, runs, tables
from specdec.family.loader import load_pair
from specdec.peers.interface import Continuations
from specdec.peers.laws import enumerate_prompt
from specdec.peers.ours import OursEngine

DRAFT = "draft-distilled"
SIZES = {e: {"n1": 80, "n2": 160, "n_long": 0} for e in ("ours", "hf", "hf-spec", "vllm")}
TEST = dict(alpha1=0.001, alpha2=0.009, eps=0.1, n_bins=8, x1_bins=2, power_target=0.8)


@pytest.fixture(scope="module")
def setup():
    target, draft, tok = load_pair("embedded", DRAFT, dtype=torch.float32)
    prompts = [tok.encode("?\n\nBENEDICK.")]
    ctx = {name: [enumerate_prompt(target, draft, p, design.config_cfg(s)) for p in prompts]
           for name, s in design.SETTINGS.items() if s.temperature > 0}
    return target, draft, prompts, law.Exact(ctx)


def test_two_stages_decide_each_row(setup):
    target, draft, prompts, exact = setup
    configs = [c for c in design.plan(2, DRAFT) if c.engine == "ours" and c.label in (
        "plain decoding", "token verification, k = 2", "wrong rule: every draft kept")]
    engines = {"ours": OursEngine(mode="lean")}
    jobs = tables.stage_jobs(configs, SIZES, seed=5, long_len=8, greedy_len=4)
    assert {(j.kind, j.cfg.role) for j in jobs} >= {("law", "control"), ("greedy", "speculative")}
    assert not [j for j in jobs if j.kind == "greedy" and j.cfg.role == "negative control"]
    assert not [j for j in jobs if j.kind == "long"]  # n_long 0: none
    first = runs.stage(jobs, engines, prompts, target=target, draft=draft)
    one = tables.law_table(first, {}, exact, {}, configs, **TEST)
    wrong = [r for r in one if r["configuration"] == "wrong rule: every draft kept"]
    assert all(r["status"] == "reject" and r["stage"] == 1 and r["n"] == 80 for r in wrong)
    more = tables.second_jobs(one, configs, SIZES, seed=5)
    assert {j.cfg.label for j in more} == {"plain decoding", "token verification, k = 2"}
    assert all(j.seed == 6 and j.n == 160 for j in more)  # fresh samples in process: seed + 1
    lanes = {}
    second = runs.stage(more, engines, prompts, target=target, draft=draft, lanes=lanes)
    assert list(lanes) == ["in-process"] and lanes["in-process"] > 0   # where the stage's time went
    rows = tables.law_table(first, second, exact, {}, configs, **TEST)
    ok = [r for r in rows if r["configuration"] != "wrong rule: every draft kept"]
    assert all(r["stage"] == 2 and r["n"] == 160 and r["status"] == "pass" and 0 < r["p_stage1"] <= 1 for r in ok)
    assert all(r["level"] == pytest.approx(0.01) for r in rows)
    assert [r["verified_share"] for r in rows if r["configuration"].startswith("token")] == [1.0, 1.0]
    assert all(math.isnan(r["verified_share"]) for r in rows if r["role"] == "control")


def test_vllm_keeps_its_seed_in_stage_two_and_ignored_rows_get_no_jobs():
    configs = [c for c in design.plan(2, DRAFT) if c.engine == "vllm"]
    rows = [{"engine": "vllm", "configuration": c.label, "setting": "temperature 1", "status": "pass"} for c in configs]
    assert {j.seed for j in tables.second_jobs(rows, configs, SIZES, seed=5)} == {5}
    skip = {("vllm", configs[-1].label): ("ignored by this build", "rejection_sample_method=block")}
    jobs = tables.stage_jobs(configs, SIZES, seed=5, long_len=8, greedy_len=4, skip=skip)
    assert configs[-1].label not in {j.cfg.label for j in jobs}
    order = [j.cfg.label for j in tables.inspect_jobs(configs, 5)]
    assert order[0] == "plain decoding" and order[-1].startswith("n-gram") and not any("patched" in x for x in order)


def test_each_row_draws_at_its_own_size():
    """vLLM's speculative rows at the design's size; a plain-decoding control at its engine's control
    size where the chapter gives one; Hugging Face's speculative rows at theirs."""
    sizes = {"vllm": {"n1": 10, "n2": 100}, "vllm-control": {"n1": 5, "n2": 20}, "ours": {"n1": 4, "n2": 8},
             "hf": {"n1": 3, "n2": 6}, "hf-spec": {"n1": 2, "n2": 4}, "llama": {"n1": 7, "n2": 70},
             "llama-control": {"n1": 1, "n2": 30}}
    got = {(c.engine, c.spec is None): tables.size_of(c, sizes)["n2"] for c in design.plan(2, DRAFT)}
    assert got == {("vllm", False): 100, ("vllm", True): 20, ("ours", False): 8, ("ours", True): 8,
                   ("hf", False): 4, ("hf", True): 6, ("llama", False): 70, ("llama", True): 30}


def test_what_ran_and_verified_samples_come_from_the_engine_record():
    cfg = next(c for c in design.plan(2, DRAFT) if c.label == "draft model, k = 2, probabilistic drafts, block rejection")
    spec = {"method": "draft_model", "draft_sample_method": "probabilistic", "rejection_sample_method": "block"}
    argmax = {"draft_sampling": "argmax", "rejection": "standard"}
    res = Continuations([], {}, {"speculative_config": spec, "what_ran": argmax})
    assert law.ran(cfg, res) == ("ignored by this build",
                                 "draft_sample_method=probabilistic; rejection_sample_method=block")
    ran = {"draft_sampling": "probabilistic", "rejection": "block"}
    assert law.ran(cfg, Continuations([], {}, {"speculative_config": spec, "what_ran": ran})) == ("tested", "")
    with pytest.raises(ValueError, match="what ran is unknown"):
        law.ran(cfg, Continuations([], {}, {"speculative_config": spec}))
    # vLLM: x1 from prefill, x2 from the one step; a sample whose step carried no draft is not verified
    ngram = next(c for c in design.plan(2, DRAFT) if c.label == "n-gram prompt lookup, k = 2")
    got = Continuations([[[1, 2], [1, 3], [4, 5]]], {}, {}, steps=[[[[2, 0]], [[2, 1]], []]])
    assert law.verified_x2(ngram, got) == (2, 3)
    assert law.first_step_counts(got) == (1, 2)
    # ours: every step listed, x2 in the first step when its first draft was kept, else in the second
    token = next(c for c in design.plan(2, DRAFT) if c.label == "token verification, k = 2")
    ours = Continuations([[[1, 2, 3], [1, 2, 3]]], {}, {}, steps=[[[(2, 1), (1, 0)], [(2, 0), (0, 0), (0, 0)]]])
    assert law.verified_x2(token, ours) == (1, 2)  # sample 2's x2 came from an undrafted step
    assert law.verified_x2(token, Continuations([[[1, 2, 3]]], {}, {})) == (-1, 1)


def test_law_samples_drawn_in_processes_of_their_own_are_the_same_tokens(setup):
    """workers=2: Hugging Face's assisted jobs run in two spawned processes that load the models
    again; every call is seeded by its job, so the tokens equal those drawn in this process."""
    from specdec.peers.hf import HFEngine

    target, draft, prompts, _ = setup
    ours = OursEngine()
    engines = {"ours": ours, "hf": HFEngine(_models=ours._models)}
    configs = [c for c in design.plan(2, DRAFT) if c.engine == "hf" and c.role == "speculative"]
    jobs = [runs.Job(c, "temperature 1", "law", 6, 3, 3) for c in configs]
    here, apart = runs.stage(jobs, engines, prompts), runs.stage(jobs, engines, prompts, workers=2)
    assert list(here) == list(apart) == jobs
    assert all(here[j].tokens == apart[j].tokens and here[j].error is None and here[j].steps for j in jobs)
    with pytest.raises(ValueError, match="workers"):
        runs.stage(jobs, engines, prompts, workers=0)
    with pytest.raises(TypeError, match="meanwhile"):
        runs.stage(jobs, engines, prompts, meanwhile="pit")
    import threading

    seen = []  # work given as meanwhile runs once, in this thread
    runs.stage(jobs[:1], engines, prompts, meanwhile=lambda: seen.append(threading.get_ident()))
    assert seen == [threading.get_ident()]
    with pytest.raises(ValueError, match="VLLMSession"):
        runs.stage([runs.Job(next(c for c in design.plan(2, DRAFT) if "block rejection" in c.label), "temperature 1",
                             "law", 6, 2, 3)], {"vllm": None}, prompts)


def test_only_a_lead_is_drawn_again_and_its_draw_decides():
    """Stage 3: a stage-2 rejection with lead_p < p and no impossible token gets factor x n2 fresh
    samples (in process seed + 2, vLLM its own seed); a rejection far below lead_p, one with an
    impossible token, a stage-1 rejection and a pass get none."""
    configs = design.plan(2, DRAFT)
    token, plain, ngram = configs[1], configs[0], next(c for c in configs if c.engine == "vllm" and c.spec is not None)
    row = lambda c, **kw: {"engine": c.engine, "configuration": c.label, "setting": "temperature 1",  # noqa: E731
                           "status": "reject", "stage": 2, "p_value": 0.005, "impossible": 0, **kw}
    rows = [row(token), row(ngram), row(plain, p_value=1e-9), row(plain, impossible=3),
            row(plain, stage=1), row(plain, status="pass", p_value=0.5)]
    jobs = tables.lead_jobs(rows, configs, SIZES, seed=5, lead_p=1e-4, factor=2)
    assert [(j.cfg.label, j.n, j.seed) for j in jobs] == [(token.label, 320, 7), (ngram.label, 320, 5)]


def test_a_lead_of_the_every_position_test_is_drawn_again():
    configs = design.plan(2, DRAFT)
    hf = next(c for c in configs if c.engine == "hf" and c.spec is not None)
    neg = next(c for c in configs if c.role == "negative control")
    row = lambda c, **kw: {"engine": c.engine, "configuration": c.label, "role": c.role, "setting": "temperature 1",  # noqa: E731
                           "status": "reject", "p_value": 0.008, "impossible": 0, "sequences": 16, "prompts": 2,
                           "length": 32, **kw}
    rows = [row(hf), row(neg), row(hf, setting="temperature 0.7, top-p 0.9", p_value=1e-9)]
    jobs = tables.pit_lead_jobs(rows, configs, lead_p=1e-4, factor=2, seed=5)
    assert [(j.cfg.label, j.kind, j.n, j.length, j.seed) for j in jobs] == [(hf.label, "long", 16, 32, 7)]
    merged = tables.merge_leads(rows, [{**rows[0], "status": "pass", "p_value": 0.4}])
    assert [(r["status"], r["stage"]) for r in merged] == [("pass", 2), ("reject", 1), ("reject", 1)]
    assert merged[0]["p_first"] == 0.008
