"""specdec.peers.contract through the adapters' public entry point, `continue_prompts`: each kind of
bad argument is refused by ours, Hugging Face and vLLM alike, before the engine runs, with a
message naming the argument, the value and the rule.  vLLM's checks fire before any process
starts: its worker here is a script that leaves a mark when run (a valid request leaves one: the
positive control).  `Sampling` and `Speculation` refuse bad fields when built, before any adapter;
top_k 0 and None decode alike; numpy ids, counts and seeds are taken as the ints they are."""

import json
import sys

import numpy as np
import pytest
import torch

from specdec.peers import Sampling, Speculation
from specdec.peers.vllm import VLLMEngine

PROMPTS = [[348, 891, 452, 264], [47, 809, 600]]
DRAFT = "draft-distilled"
V, CONTEXT = 2048, 512  # the embedded target's vocabulary size and n_positions
SPEC = {"ours": Speculation("token", 2, DRAFT), "hf": Speculation("draft_model", 2, DRAFT),
        "vllm": Speculation("draft_model", 2, DRAFT)}


class Marked:
    """A `VLLMEngine` whose worker copies its request to ``mark`` and exits: no vLLM ever runs."""

    def __init__(self, folder, **kw):
        self.mark = folder / "request-seen.json"
        worker = folder / "worker.py"
        worker.write_text(f"import shutil, sys\nshutil.copy(sys.argv[1], {str(self.mark)!r})\n")
        self.engine = VLLMEngine(python=sys.executable, worker=worker, timeout_s=30, **kw)

    def continue_prompts(self, *args):
        try:
            return self.engine.continue_prompts(*args)
        finally:
            self.started = self.mark.exists()


@pytest.fixture(params=["ours", "hf", "vllm"])
def engine(request, tmp_path):
    """(name, engine) for each adapter; vLLM's behind `Marked`."""
    name = request.param
    return name, Marked(tmp_path) if name == "vllm" else request.getfixturevalue(name)


def refused(engine, error, match, prompts=PROMPTS, n=1, max_new_tokens=2, sampling=Sampling(1.0), spec=None, seed=0):
    """The request is refused with ``error`` matching ``match``; vLLM's worker never started."""
    with pytest.raises(error, match=match):
        engine.continue_prompts(prompts, n, max_new_tokens, sampling, spec, seed)
    assert not getattr(engine, "started", False), "the vLLM worker was started for a refused request"


def test_a_valid_request_reaches_the_vllm_worker_as_python_ints(tmp_path):
    """The positive control of `Marked`: the worker does start for a valid request (numpy ids and
    seed), and its request holds the ids and seed as plain ints."""
    marked = Marked(tmp_path)
    ids = [np.array(p, dtype=np.int64).tolist() for p in PROMPTS]
    ids[0][0] = np.int64(ids[0][0])
    marked.continue_prompts(ids, 1, 2, Sampling(1.0, top_k=0), SPEC["vllm"], np.int64(7))
    assert marked.started
    run = json.loads(marked.mark.read_text())["runs"][0]
    assert run["prompts"] == PROMPTS and run["seed"] == 7 and type(run["seed"]) is int


def test_an_array_or_tensor_of_prompts_is_refused_not_converted(engine):
    _, eng = engine
    refused(eng, TypeError, r"prompts must be a list of token-id lists, got ndarray .*tolist", np.array([[5, 6]]))
    refused(eng, TypeError, r"got Tensor .*tolist", torch.tensor([[5, 6]]))
    refused(eng, TypeError, r"prompts\[0\] must be a list of token ids, got ndarray", [np.array([5, 6])])


def test_an_empty_prompt_list_or_an_empty_prompt_is_refused(engine):
    _, eng = engine
    refused(eng, ValueError, "prompts is empty", [])
    refused(eng, ValueError, r"prompts\[1\] is empty: every prompt needs at least one token id", [[5], []])


def test_bool_and_float_token_ids_are_refused(engine):
    _, eng = engine
    refused(eng, TypeError, r"prompts\[0\]\[1\] = True is a bool, not a token id", [[5, True]])
    refused(eng, TypeError, r"prompts\[1\]\[0\] = 6.0 is a float, not a token id", [[5], [6.0]])


def test_token_ids_outside_the_vocabulary_are_refused(engine):
    _, eng = engine
    refused(eng, ValueError, r"prompts\[0\]\[0\] = -1 is not a token id of this model: ids are ints in \[0, 2048\)",
            [[-1, 5]])
    refused(eng, ValueError, r"prompts\[0\]\[1\] = 2048 is not a token id", [[5, V]])


def test_a_request_past_the_models_context_is_refused(engine):
    name, eng = engine
    long = [[5] * (CONTEXT - 10)]
    refused(eng, ValueError, r"the longest prompt \(502 ids\) \+ max_new_tokens \(11\) = 513 exceeds the model's "
                             r"context of 512 positions", long, max_new_tokens=11)
    refused(eng, ValueError, r"\+ max_new_tokens \(9\) \+ k \(2\) = 513 exceeds", long, max_new_tokens=9,
            spec=SPEC[name])


def test_a_request_that_fills_the_context_exactly_runs(ours, hf, tmp_path):
    """The boundary of the rule above: prompt + max_new_tokens (+ k) = the context is accepted."""
    long = [[5] * (CONTEXT - 10)]
    for eng in (ours, hf):
        assert len(eng.continue_prompts(long, 1, 10, Sampling(0.0), None, 0).tokens[0][0]) == 10
    assert len(ours.continue_prompts(long, 1, 8, Sampling(0.0), SPEC["ours"], 0).tokens[0][0]) == 8
    marked = Marked(tmp_path)
    marked.continue_prompts(long, 1, 8, Sampling(0.0), SPEC["vllm"], 0)
    assert marked.started


def test_vllm_max_model_len_below_the_models_context_is_the_limit(tmp_path):
    marked = Marked(tmp_path, max_model_len=64)
    refused(marked, ValueError, r"= 65 exceeds the model's context of 64 positions", [[5] * 60], max_new_tokens=5)


def test_counts_must_be_positive_ints(engine):
    _, eng = engine
    refused(eng, ValueError, r"n and max_new_tokens must be ints >= 1, got n=0", n=0)
    refused(eng, ValueError, r"got max_new_tokens=-1", max_new_tokens=-1)
    refused(eng, TypeError, r"got n=True \(bool\)", n=True)
    refused(eng, TypeError, r"got max_new_tokens=2.0 \(float\)", max_new_tokens=2.0)


def test_seeds_must_be_non_negative_ints_below_2_to_the_32(engine):
    _, eng = engine
    refused(eng, TypeError, r"seed must be an int in \[0, 4294967296\), got 1.5 \(float\)", seed=1.5)
    refused(eng, TypeError, r"seed must be an int .*got True \(bool\)", seed=True)
    refused(eng, ValueError, r"seed must be an int in \[0, 4294967296\), got -1", seed=-1)
    refused(eng, ValueError, r"got 4294967296", seed=2 ** 32)


def test_sampling_and_speculation_must_be_the_interface_types(engine):
    _, eng = engine
    refused(eng, TypeError, r"sampling must be a specdec.peers.Sampling, got 1.0", sampling=1.0)
    refused(eng, TypeError, r"spec must be None or a specdec.peers.Speculation, got 'token'", spec="token")


def test_the_speculation_method_and_its_draft_are_checked(engine):
    name, eng = engine
    method = SPEC[name].method
    refused(eng, ValueError, f"method '{method}' needs a draft", spec=Speculation(method, 2))
    if name != "ours":  # ours runs only drafted methods
        other = {"hf": "prompt_lookup", "vllm": "ngram"}[name]
        refused(eng, ValueError, f"method '{other}' takes no draft model", spec=Speculation(other, 2, DRAFT))
    if name != "vllm":  # vLLM's worker refuses a method it lacks with a row (tests/peers/test_engines_vllm.py)
        refused(eng, ValueError, "unknown speculative method 'magic'", spec=Speculation("magic", 2, DRAFT))


def test_options_are_refused_where_the_method_takes_none(ours):
    refused(ours, ValueError, r"method 'token' takes options \[\], got \['max_matching_ngram_size'\]",
            spec=Speculation("token", 2, DRAFT, (("max_matching_ngram_size", 2),)))


@pytest.mark.parametrize("value,error,match", [(0, ValueError, "must be an int >= 1, got 0"),
                                               (1.5, TypeError, r"must be an int >= 1, got 1.5 \(float\)"),
                                               (True, TypeError, r"must be an int >= 1, got True \(bool\)")])
def test_hf_prompt_lookup_ngram_size_must_be_an_int_of_at_least_1(hf, value, error, match):
    spec = Speculation("prompt_lookup", 2, options=(("max_matching_ngram_size", value),))
    refused(hf, error, "option max_matching_ngram_size of method 'prompt_lookup' " + match, spec=spec)


@pytest.mark.parametrize("options,error,match", [
    ((("prompt_lookup_min", 0),), ValueError, r"option prompt_lookup_min of method 'ngram' must be an int >= 1, got 0"),
    ((("prompt_lookup_max", 2.5),), TypeError, r"option prompt_lookup_max .* got 2.5 \(float\)"),
    ((("prompt_lookup_min", 3), ("prompt_lookup_max", 2)), ValueError,
     r"prompt_lookup_min must be <= prompt_lookup_max, got 3 > 2"),
    ((("prompt_lookup_min", 5),), ValueError, r"got 5 > 3"),  # the adapter's default maximum is 3
])
def test_vllm_ngram_sizes_are_ints_of_at_least_1_min_not_above_max(tmp_path, options, error, match):
    refused(Marked(tmp_path), error, match, spec=Speculation("ngram", 2, options=options))


@pytest.mark.parametrize("kw,error,match", [
    ({"temperature": -0.5}, ValueError, r"temperature must be a finite number >= 0, got -0.5"),
    ({"temperature": float("nan")}, ValueError, r"temperature must be a finite number >= 0, got nan"),
    ({"temperature": float("inf")}, ValueError, r"temperature .* got inf"),
    ({"temperature": True}, TypeError, r"temperature .* got True \(bool\)"),
    ({"temperature": "1"}, TypeError, r"temperature .* got '1' \(str\)"),
    ({"top_p": 0.0}, ValueError, r"top_p must be a finite number in \(0, 1\], got 0.0"),
    ({"top_p": 1.5}, ValueError, r"top_p .* got 1.5"),
    ({"top_p": float("nan")}, ValueError, r"top_p .* got nan"),
    ({"top_k": -1}, ValueError, r"top_k must be an int >= 0, got -1"),
    ({"top_k": 2.5}, TypeError, r"top_k must be an int >= 0, got 2.5 \(float\)"),
    ({"top_k": True}, TypeError, r"top_k .* got True \(bool\)"),
])
def test_sampling_refuses_bad_fields_when_built(kw, error, match):
    """Before any adapter: no engine can be handed these."""
    with pytest.raises(error, match=match):
        Sampling(**{"temperature": 1.0, **kw})


@pytest.mark.parametrize("args,error,match", [
    (("token", 2.5, DRAFT), TypeError, r"Speculation k must be an int >= 0, got 2.5 \(float\)"),
    (("token", True, DRAFT), TypeError, r"Speculation k .* got True \(bool\)"),
    (("token", 0, DRAFT), ValueError, r"speculation 'token' needs k >= 1 drafted tokens, got k=0"),
    (("none", -1), ValueError, r"Speculation k must be an int >= 0, got -1"),
    ((3, 2), TypeError, r"method must be a non-empty str"),
    (("", 2), TypeError, r"method must be a non-empty str"),
    (("token", 2, ""), TypeError, r"draft must be None or a model name"),
    (("ngram", 2, None, (("prompt_lookup_min",),)), TypeError, r"options must be \(name, value\) pairs"),
    (("ngram", 2, None, (("a", 1), ("a", 2))), ValueError, r"name an option twice: \['a', 'a'\]"),
])
def test_speculation_refuses_bad_fields_when_built(args, error, match):
    with pytest.raises(error, match=match):
        Speculation(*args)


def test_interface_values_are_stored_as_python_numbers():
    s = Sampling(np.float32(0.5), top_k=np.int64(3), top_p=np.float64(0.9))
    assert (type(s.temperature), type(s.top_k), type(s.top_p)) == (float, int, float)
    spec = Speculation("ngram", np.int64(2), options={"prompt_lookup_min": 1})
    assert type(spec.k) is int and spec.options == (("prompt_lookup_min", 1),)


@pytest.mark.parametrize("name", ["ours", "hf"])
def test_top_k_zero_and_none_both_mean_no_truncation(request, name):
    eng = request.getfixturevalue(name)
    spec = SPEC[name] if name == "ours" else None  # HF samples plain generate in one batch of n
    runs = {k: eng.continue_prompts(PROMPTS, 4, 4, Sampling(1.0, top_k=k), spec, 3).tokens for k in (None, 0, V, 1)}
    assert runs[0] == runs[None] == runs[V]  # top_k = V keeps every token: no truncation at all
    assert runs[1] != runs[None]  # the control: a truncation that does act changes the samples


@pytest.mark.parametrize("name", ["ours", "hf"])
def test_numpy_ids_counts_and_seeds_are_the_ints_they_hold(request, name):
    eng = request.getfixturevalue(name)
    ids = [[np.int64(t) for t in p] for p in PROMPTS]
    got = eng.continue_prompts(ids, np.int64(2), np.int32(3), Sampling(1.0), None, np.uint32(5)).tokens
    assert got == eng.continue_prompts(PROMPTS, 2, 3, Sampling(1.0), None, 5).tokens
