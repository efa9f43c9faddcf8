"""SMOKE against the real vLLM (no mock): one worker process (a session kept across the module's
first two tests: a worker's start-up is paid once) runs plain and draft_model k = 2 greedy decoding
on two prompts (then plain again, on the LLM it still holds; a configuration that raised is not
built twice), plus configurations the installed vLLM must refuse as rows. Greedy speculative output
must equal vLLM's own plain greedy output, which must equal our engine's, and the spec-decode
counters must come back (chapter 10's SMOKE run audits vLLM's draft-model default only: vLLM's plain
decoding and refusals are checked here). Skipped only when `.venv-vllm` is missing
(`make vllm-env`)."""

import pytest

from specdec.measure.step_split import GROUPS, operator_split
from specdec.peers import Sampling, Speculation
from specdec.peers.ours import OursEngine
from specdec.peers.vllm import VLLM_VENV, VLLMEngine, ignored_options
from specdec.peers.vllm_session import VLLMSession

pytestmark = [pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(),
                                 reason=f"{VLLM_VENV} is missing: build it with `make vllm-env`"),
              pytest.mark.xdist_group("vllm_session")]  # one worker: the module's session starts once

PROMPTS = [[348, 891, 452, 264, 1125, 321], [47, 809, 600, 259]]
DRAFT = "draft-distilled"


@pytest.fixture(scope="module")
def session():
    """One vLLM worker for the module's session tests; closing it must kill the worker."""
    with VLLMSession(VLLMEngine(timeout_s=240)) as s:
        yield s
        proc = s.proc
    assert proc.poll() is not None  # the worker is gone with the session


def test_vllm_greedy_speculation_equals_plain_and_counters_come_back(session):
    greedy = Sampling(0.0)
    # vLLM 0.32.0's CPU sampler refuses synthetic acceptance when it samples (an AssertionError)
    forced = Speculation("draft_model", 2, DRAFT, (("rejection_sample_method", "synthetic"),
                                                   ("synthetic_acceptance_rates", (0.8, 0.64))))
    jobs = [(PROMPTS, 1, 6, greedy, None, 0),
            (PROMPTS, 1, 6, greedy, Speculation("draft_model", 2, DRAFT), 0),
            (PROMPTS, 1, 6, greedy, None, 0, 2),
            (PROMPTS, 1, 3, Sampling(1.0), forced, 0),
            (PROMPTS, 1, 3, Sampling(1.0), forced, 0),
            (PROMPTS, 1, 6, greedy, Speculation("not_a_method", 2), 0),
            (PROMPTS, 1, 6, greedy, Speculation("draft_model", 2, DRAFT, (("rejection_sample_method", "magic"),)), 0)]
    # hold=2: the plain LLM is still alive when it comes back after the speculative one
    plain, spec, again, refused, refused_again, no_method, no_value = session.run_many(jobs, hold=2)
    assert again.error is None and again.provenance["startup_s"] == 0 and again.tokens == plain.tokens
    assert "Synthetic acceptance not supported with CPU sampling" in refused.error
    # the failed configuration is not built again: its error comes back without a start-up
    assert refused_again.error == refused.error and "startup_s" not in refused_again.provenance
    assert len(again.provenance["generate_each_s"]) == 2 and plain.provenance["startup_s"] > 0
    assert plain.error is None and spec.error is None, (plain.error, spec.error)
    assert [[len(s) for s in p] for p in plain.tokens] == [[6], [6]]
    assert spec.tokens == plain.tokens
    ours = OursEngine().continue_prompts(PROMPTS, 1, 6, greedy, None, seed=0)
    assert plain.tokens == ours.tokens  # vLLM's argmax of the same float32 target is ours
    c = spec.counters
    drafts, proposed = c["vllm:spec_decode_num_drafts"], c["vllm:spec_decode_num_draft_tokens"]
    per_pos = c["vllm:spec_decode_num_accepted_tokens_per_pos"]
    assert drafts > 0 and proposed == 2 * drafts and len(per_pos) == 2
    assert sum(per_pos) == c["vllm:spec_decode_num_accepted_tokens"] <= proposed and per_pos[1] <= per_pos[0]
    assert "vllm:spec_decode_num_drafts" not in plain.counters
    assert spec.provenance["versions"]["vllm"] == "0.32.0" and spec.provenance["startup_s"] > 0
    assert no_method.error.startswith("method 'not_a_method' not available in vLLM 0.32.0")
    assert no_value.error.startswith("rejection_sample_method 'magic' not available in vLLM 0.32.0")
    assert no_method.tokens == [] and no_value.tokens == []


def test_a_session_keeps_its_llms_reads_what_ran_and_patches_only_where_asked(session):
    """One worker across three requests: the first builds the LLMs (inspect only) and runs the kernel
    check, the second reuses them (start-up 0); what ran shows the block option ignored; samples of
    the shipped and the patched call come with per-sample step records; a profiled call names vLLM's
    kernels as the step split groups them (closing kills the worker: the fixture checks it)."""
    probabilistic = Speculation("draft_model", 2, DRAFT, (("draft_sample_method", "probabilistic"),))
    block = Speculation("draft_model", 2, DRAFT, (("draft_sample_method", "probabilistic"),
                                                  ("rejection_sample_method", "block")))
    t1 = Sampling(1.0)
    s = session
    built = s.run_many([(PROMPTS, 1, 2, t1, probabilistic, 0, 1, {"inspect_only": True}),
                        (PROMPTS, 1, 2, t1, block, 0, 1, {"inspect_only": True})], hold=4, kernel_check=True)
    assert [r.error for r in built] == [None, None] and built[0].tokens == []
    check = built[0].provenance["kernel_check"]
    assert [c["dtype"] for c in check["cases"]] == ["float32", "int32", "int64"]
    assert all(c["patched_correct"] for c in check["cases"]) and check["cases"][2]["shipped_correct"]
    assert built[0].provenance["what_ran"]["draft_sampling"] == "probabilistic"
    assert ignored_options(built[1].provenance["speculative_config"], built[1].provenance["what_ran"]) == [
        "draft_sample_method=probabilistic", "rejection_sample_method=block"]
    shipped, patched = s.run_many([(PROMPTS, 30, 2, t1, probabilistic, 0),
                                   (PROMPTS, 30, 2, t1, probabilistic, 0, 1, {"patched": True})], hold=4)
    assert shipped.provenance["startup_s"] == 0 and patched.provenance["startup_s"] == 0
    assert not shipped.provenance["what_ran"]["patched"] and patched.provenance["what_ran"]["patched"]
    for r in (shipped, patched):
        assert [[len(x) for x in p] for p in r.tokens] == [[2] * 30] * 2
        assert all(len(rec) == 1 and rec[0][0] == 2 for p in r.steps for rec in p)  # one drafted step each
    profiled, after = s.run_many([(PROMPTS, 4, 3, t1, probabilistic, 0, 1, {"profile": True}),
                                  (PROMPTS, 4, 3, t1, probabilistic, 0)], hold=4)
    prof = profiled.provenance["profile"]
    split = operator_split(prof["ops"], prof["wall_s"], 3)
    # vLLM's own kernels are the ones GROUPS names: a renamed kernel would fall into "other"
    assert {n for names in GROUPS.values() for n in names if n.startswith("_C::")} <= set(prof["ops"])
    assert split["ms matrix products"] > 0 and split["ms attention"] > 0 and split["ms outside operators"] > 0
    assert after.error is None and after.provenance["startup_s"] == 0 and "profile" not in after.provenance


def test_two_fresh_processes_under_one_seed_repeat_plain_sampling():
    """Chapter 10's repeatability check (`runs.repeatability`, which its SMOKE run skips): the same
    calls in two fresh worker processes side by side under one engine-level seed.  vLLM's plain
    sampling draws only from its seeded generator, so the two give the same samples, every one."""
    from specdec.audit import design, runs

    plain = [c for c in design.plan(2, DRAFT) if c.engine == "vllm" and c.spec is None]
    rows = runs.repeatability(VLLMEngine(timeout_s=240), plain, PROMPTS, n=12, setting="temperature 1", seed=3)
    assert [(r["configuration"], r["samples"], r["differ"], r["note"]) for r in rows] == [("plain decoding", 24, 0, "")]
