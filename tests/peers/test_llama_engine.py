"""llama.cpp behind the Engine interface (`specdec.peers.llama`), against the real llama-server
that `make llama-env` builds (skipped only when the binary is missing): requests pin every sampling
rule and a server that ran other settings gives an error row, never tokens; the step records read
from the server's draft totals are never wrong (checked against simulated requests); the same seed
gives the same tokens, with requests in several server slots too; speculative greedy equals plain greedy; each drafting rule's first-step
acceptance meets its own exact expectation and misses the other rule's (the check that the server
ran the rule its flags name); bad requests are refused before a server starts; no server is left.

Chapter 10's SMOKE run (tests/report/test_notebooks.py) runs the law and every-position tests
through this adapter."""

import math
import random

import pytest

from specdec.peers.interface import Sampling, Speculation
from specdec.peers.llama import CHECKED, LlamaEngine, banned, request_payload, settings_differ
from specdec.peers.llama_steps import ngram_steps, step_record, step_records
from specdec.peers.llama_server import LLAMA_SERVER

PROMPTS = [[348, 891, 452, 264, 1125, 321, 77, 99], [40, 47, 54, 61, 68, 75]]
DRAFT = "draft-distilled"
llama_group = pytest.mark.xdist_group("llama_server")  # one worker runs them; the fixture `engine` skips without the binary


def _spec(drafting: str, k: int = 2) -> Speculation:
    return Speculation("draft_model", k=k, draft=DRAFT, options=(("draft_sampling", drafting),))


def test_the_echoed_bans_are_read_and_an_unasked_bias_is_refused():
    assert banned({"logit_bias": [{"bias": None, "token": 7}, {"bias": float("-inf"), "token": 0}]}) == [0, 7]
    assert banned({"logit_bias": []}) == [] and banned({}) == []
    with pytest.raises(ValueError, match="not asked for"):
        banned({"logit_bias": [{"bias": -2.5, "token": 3}]})
    got = request_payload([1], 1, Sampling(1.0), 0)
    assert (got["dynatemp_range"], got["min_keep"], got["logit_bias"], got["grammar"]) == (0.0, 0, [], "")


def test_requests_pin_the_order_of_the_rules_and_a_difference_is_caught():
    got = request_payload([1, 2], 4, Sampling(0.7, top_p=0.9), seed=2**40 + 5)
    assert got["samplers"] == ["temperature", "top_p"]       # Sampling's order, not llama.cpp's default
    assert (got["top_k"], got["min_p"], got["seed"]) == (0, 0.0, 5)
    assert request_payload([1], 1, Sampling(1.0, top_k=5), 0)["samplers"] == ["temperature", "top_k"]
    assert request_payload([1], 1, Sampling(1.0), 0xFFFFFFFF)["seed"] != 0xFFFFFFFF   # llama.cpp's "random"
    echoed = {key: got[key] for key in CHECKED}
    assert settings_differ(got, {**echoed, "speculative.types": "none,draft-simple"}, drafted="draft-simple") == []
    wrong = settings_differ(got, {**echoed, "samplers": ["top_p", "temperature"], "top_p": 0.95}, drafted="draft-simple")
    assert [w.split(":")[0] for w in wrong] == ["samplers", "top_p", "speculative.types"]


def test_step_records_from_the_totals_are_never_wrong():
    """Requests simulated by the server's rule (a step drafts min(k, n_predict - decoded - 1)):
    the record from their totals is the truth or None, never another sequence."""
    assert step_record(3, 1, 2, 4) == [(2, 0), (1, 1)]
    assert step_record(2, 1, 2, 4) == [(2, 1), (0, 0)]
    assert step_record(2, 2, 2, 4) == [(2, 2)]
    rng, known = random.Random(0), 0
    for _ in range(3000):
        k, n_predict = rng.choice([1, 2, 3, 4]), rng.randint(2, 12)
        decoded, steps = 1, []
        while decoded < n_predict:
            m = max(0, min(k, n_predict - decoded - 1))
            a = rng.randint(0, m)
            steps.append((m, a))
            decoded += a + 1
        got = step_record(sum(m for m, _ in steps), sum(a for _, a in steps), k, n_predict)
        assert got in (None, steps)
        known += got is not None
        if k == 2 and n_predict == 4:
            assert got == steps      # the law samples' case: always determined
    assert 1000 < known < 3000        # both outcomes occur


def test_the_lookup_replay_follows_llama_cpps_rule():
    """`ngram_steps` replays common_ngram_simple_draft (size n 1): the last sampled token is looked up
    at context positions len - 2 down to 1 (never 0, never the context's last), the k tokens after the
    match are drafted, kept while they equal what the target sampled; near the end a step drafts at
    most n_predict - decoded - 1."""
    prompt = [7, 3, 4, 9, 3, 5]
    # x1 = 3 is found at position 4 (the later match wins): draft [5, 3]... only [5] follows -> m = 1
    assert ngram_steps(prompt, [3, 5, 1, 2], k=2, n_predict=4) == [(1, 1), (0, 0)]
    # x1 = 4 at position 2: draft [9, 3]; the target sampled 9 then 8: one kept, then x4 = 8 emitted
    assert ngram_steps(prompt, [4, 9, 8, 2], k=2, n_predict=4) == [(2, 1), (0, 0)]
    assert ngram_steps(prompt, [7, 1, 2, 6], k=2, n_predict=4)[0] == (0, 0)    # position 0 is never a match
    assert ngram_steps([7, 3, 4, 9, 3, 8], [8, 1, 2, 6], k=2, n_predict=4)[0] == (0, 0)  # nor the last
    assert ngram_steps([1, 2, 3], [2, 3, 4], k=2, n_predict=3) == [(0, 0), (0, 0)]   # context too short
    # the length rule exactly: a context of k + 2 tokens never drafts, one of k + 3 does
    assert ngram_steps([1, 2, 1, 5], [1, 5, 1, 7], k=2, n_predict=4) == [(0, 0), (1, 1)]
    assert ngram_steps([1, 2, 1, 5, 9], [1, 5, 1, 7], k=2, n_predict=4) == [(2, 1), (0, 0)]
    assert step_records("ngram", prompt, [4, 9, 8, 2], 2, 1, 2, 4) == [(2, 1), (0, 0)]
    assert step_records("ngram", prompt, [4, 9, 8, 2], 2, 2, 2, 4) is None   # not what the server counted


@pytest.mark.parametrize("request_args, match", [
    (([[1, 2]], 2, 2, Sampling(1.0), Speculation("suffix", k=2), 0), "unknown speculative method"),
    (([[1, 2]], 2, 2, Sampling(1.0), _spec("sampled"), 0), "draft_sampling"),
    (([[1, 99999]], 2, 2, Sampling(1.0), None, 0), "token"),
    (([[1, 2]], 2, 2, Sampling(1.0), Speculation("draft_model", k=2, draft=DRAFT, options=(("n_max", 3),)), 0),
     "takes options"),
])
def test_bad_requests_are_refused_before_a_server_starts(request_args, match):
    engine = LlamaEngine()
    with pytest.raises(ValueError, match=match):
        engine.continue_prompts(*request_args)
    assert engine._servers == {}


@pytest.fixture(scope="module")
def engine():
    if not LLAMA_SERVER.exists():
        pytest.skip(f"{LLAMA_SERVER} is missing: build it with `make llama-env`")
    with LlamaEngine() as e:
        yield e


@llama_group
def test_one_seed_one_output_and_every_server_stopped(engine, gone):
    a = engine.continue_prompts(PROMPTS, 6, 5, Sampling(1.0), None, seed=3)
    b = engine.continue_prompts(PROMPTS, 6, 5, Sampling(1.0), None, seed=3)
    c = engine.continue_prompts(PROMPTS, 6, 5, Sampling(1.0), None, seed=4)
    assert a.error is None and a.tokens == b.tokens != c.tokens
    assert [len(s) for p in a.tokens for s in p] == [5] * 12 and a.steps is None
    assert len({tuple(s) for s in a.tokens[0]}) > 1          # samples of one prompt are not copies
    spec = engine.continue_prompts(PROMPTS[:1], 4, 4, Sampling(1.0), _spec("probabilistic"), seed=3)
    assert spec.counters["num_drafted_requests"] == 4 and all(r is not None for r in spec.steps[0])
    assert "--spec-draft-sampling probabilistic" in spec.provenance["what_ran"]["command"]
    with LlamaEngine() as own:
        own.continue_prompts(PROMPTS[:1], 1, 2, Sampling(0.0), None, seed=0)
        pids = [s.pid for s in own._servers.values()]
    assert pids and all(gone(pid) for pid in pids)


@llama_group
def test_slots_decode_the_same_samples_as_one_slot_and_are_stopped(engine, gone):
    """Four requests in flight in four slots (chapter 10's law stages) answered by more than one slot:
    each request keeps its own sampler and seed, so the samples equal one slot's under the same seeds,
    drafting included.  A batched forward may round differently, but a sampled token moves only when
    a uniform falls within that rounding (~1e-6) of a cumulative-probability boundary: among these
    192 tokens, expected ~1e-3 times, so no difference is allowed.  Every slot server is stopped;
    a count of slots that is no positive int is refused before anything starts."""
    spec = _spec("probabilistic")
    one = [engine.continue_prompts(PROMPTS, 24, 4, Sampling(1.0), s, seed=11) for s in (None, spec)]
    with LlamaEngine(parallel=4) as wide:
        four = [wide.continue_prompts(PROMPTS, 24, 4, Sampling(1.0), s, seed=11) for s in (None, spec)]
        pids = [s.pid for s in wide._servers.values()]
    for a, b in zip(one, four):
        assert a.error is None and b.error is None and [len(p) for p in a.tokens] == [24, 24]
        assert "-np 4" in b.provenance["command"] and b.provenance["what_ran"]["slots_used"] > 1
        assert b.tokens == a.tokens
    assert one[1].provenance["what_ran"]["slots_used"] == 1
    assert four[1].counters["num_drafted_requests"] == 48 and four[1].steps == one[1].steps
    assert len(pids) == 2 and all(gone(pid) for pid in pids)
    for bad in (0, 1.5, True):
        with pytest.raises((TypeError, ValueError), match="parallel"):
            LlamaEngine(parallel=bad)


@llama_group
@pytest.mark.parametrize("drafting", ["greedy", "probabilistic"])
def test_speculative_greedy_equals_plain_greedy(engine, drafting):
    plain = engine.continue_prompts(PROMPTS, 1, 24, Sampling(0.0), None, seed=0)
    spec = engine.continue_prompts(PROMPTS, 1, 24, Sampling(0.0), _spec(drafting), seed=0)
    assert spec.error is None and spec.tokens == plain.tokens
    assert spec.counters["draft_n"] > 0                       # it speculated


@llama_group
def test_each_drafting_rule_meets_its_own_acceptance_and_misses_the_other(engine):
    """First-step acceptance at temperature 1 against the exact expectations of sample-and-match
    (p(argmax q)) and rejection sampling with the server's retuned q (its top 10 at the
    temperature): n = 150 requests each, |z| < 4 for the rule the flags name, |z| > 4 for the other
    (the two expectations differ by ~0.3 on this prompt: z ~ 8 at this n)."""
    from specdec.core.sampling import SamplingConfig
    from specdec.family.loader import load_model
    from specdec.peers.acceptance import first_step_expectation
    from specdec.peers.laws import enumerate_prompt

    ctx = enumerate_prompt(load_model("target", dtype="float32"), load_model(DRAFT, dtype="float32"), PROMPTS[0],
                           SamplingConfig(1.0))
    expect = {rule: first_step_expectation(ctx, SamplingConfig(1.0), rule, first_from_prefill=True,
                                           draft_sampling=SamplingConfig(1.0, top_k=10))
              for rule in ("argmax", "sampled")}
    n = 150
    for drafting, own, other in (("greedy", "argmax", "sampled"), ("probabilistic", "sampled", "argmax")):
        res = engine.continue_prompts(PROMPTS[:1], n, 4, Sampling(1.0), _spec(drafting), seed=7)
        kept = sum(r[0][1] >= 1 for r in res.steps[0])
        assert all(r[0][0] == 2 for r in res.steps[0])      # every x2 came from a step with 2 drafts

        def z(ends):
            lo, hi = ends
            a = min(max(kept / n, lo), hi)
            return (kept - n * a) / math.sqrt(n * a * (1 - a))
        assert abs(z(expect[own])) < 4, (drafting, kept, expect)
        assert abs(z(expect[other])) > 4, (drafting, kept, expect)


@llama_group
def test_the_lookup_drafter_runs_and_its_replay_is_what_the_server_counted(engine):
    """ngram-simple on a prompt of repeats: at temperature 1 every request's step record replays to
    the server's own totals (a replay that differed would be None), some first steps drafted; greedy
    equals plain greedy."""
    prompt = [[40, 47, 54, 40, 47, 54, 40, 47]]
    lookup = Speculation("ngram", k=2)
    res = engine.continue_prompts(prompt, 40, 4, Sampling(1.0), lookup, seed=5)
    assert res.error is None and "--spec-type ngram-simple" in res.provenance["what_ran"]["command"]
    assert all(r is not None for r in res.steps[0]) and res.counters["draft_n"] > 0
    assert sum(r[0][0] > 0 for r in res.steps[0]) > 0    # x1 was in the prompt (6 of 40 here)
    greedy = engine.continue_prompts(prompt, 1, 24, Sampling(0.0), lookup, seed=0)
    assert greedy.tokens == engine.continue_prompts(prompt, 1, 24, Sampling(0.0), None, seed=0).tokens
    assert greedy.counters["draft_n"] > 0 and greedy.steps[0][0] is not None


@llama_group
def test_forward_times_time_exactly_the_new_tokens_and_refuse_bad_requests(engine):
    """Each timed request evaluates exactly n tokens past the cached context (the server's prompt_n,
    checked inside; a request whose tail matched the cache would raise), more tokens cost more; the
    draft's one-token forward is cheaper than the target's; a cache-defeating extra (first two tokens
    equal) and out-of-range n are refused before any request."""
    ctx, extra = PROMPTS[0] * 4, [901, 17, 333, 48, 1200, 7]
    t = engine.forward_times((1, 5), context=ctx, extra=extra, repeats=6)
    assert sorted(t) == [1, 5] and all(len(v) == 6 and min(v) > 0 for v in t.values())
    assert sorted(t[5])[3] > sorted(t[1])[3]
    with LlamaEngine(target=DRAFT) as draft:
        d = draft.forward_times((1,), context=ctx, extra=extra, repeats=6)
    assert sorted(d[1])[3] < sorted(t[1])[3]
    for bad in (dict(ns=(1,), extra=[5, 5, 6]), dict(ns=(6,), extra=extra), dict(ns=(0,), extra=extra)):
        with pytest.raises(ValueError, match="forward_times needs"):
            engine.forward_times(bad["ns"], context=ctx, extra=bad["extra"], repeats=1)
