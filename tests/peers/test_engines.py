"""specdec.peers adapters without vLLM: ours and Hugging Face on the embedded pair (shapes, counters,
greedy speculative output equal to plain greedy output), bad input refused with clear errors, and
the vLLM adapter's process handling against real fake workers (a missing environment, a worker that
hangs and is killed at the timeout with its child, one that fails)."""

import sys
import time
import typing

import pytest

from specdec.peers import Sampling, Speculation
from specdec.peers.vllm import VLLMEngine, VLLMUnavailable, speculative_config
from specdec.peers.vllm_worker import _choices, _close, _difference

PROMPTS = [[348, 891, 452, 264], [47, 809, 600]]
DRAFT = "draft-distilled"


def _shape(c):
    return [[len(s) for s in p] for p in c.tokens]


def test_ours_shapes_counters_and_greedy_equality(ours):
    plain = ours.continue_prompts(PROMPTS, 2, 5, Sampling(0.0), None, seed=0)
    assert _shape(plain) == [[5, 5], [5, 5]] and plain.error is None
    assert plain.counters["num_drafts"] == 0 and plain.counters["num_steps"] == 2 * 5
    for method in ("token", "block"):
        spec = ours.continue_prompts(PROMPTS, 2, 5, Sampling(0.0), Speculation(method, 2, DRAFT), seed=0)
        assert spec.tokens == plain.tokens, method  # greedy speculation keeps the target's argmax
    sampled = ours.continue_prompts(PROMPTS, 8, 5, Sampling(1.0), Speculation("token", 2, DRAFT), seed=1)
    c = sampled.counters
    assert _shape(sampled) == [[5] * 8, [5] * 8]
    assert c["num_draft_tokens"] == sum(c["num_draft_tokens_per_pos"]) > 0
    assert c["num_accepted_tokens"] == sum(c["num_accepted_tokens_per_pos"])
    assert all(a <= d for a, d in zip(c["num_accepted_tokens_per_pos"], c["num_draft_tokens_per_pos"]))
    assert c["num_accepted_tokens_per_pos"][1] <= c["num_accepted_tokens_per_pos"][0]  # accepted at 2 => at 1
    assert c["num_drafts"] == c["num_draft_tokens_per_pos"][0]  # every drafting step proposes position 1
    again = ours.continue_prompts(PROMPTS, 8, 5, Sampling(1.0), Speculation("token", 2, DRAFT), seed=1)
    other = ours.continue_prompts(PROMPTS, 8, 5, Sampling(1.0), Speculation("token", 2, DRAFT), seed=2)
    assert again.tokens == sampled.tokens and other.tokens != sampled.tokens  # the seed decides
    assert sampled.provenance["engine"] == "ours" and sampled.provenance["k"] == 2


def test_hf_methods_shapes_and_greedy_equality_with_ours(ours, hf):
    plain = ours.continue_prompts(PROMPTS, 2, 5, Sampling(0.0), None, seed=0)
    for spec in (None, Speculation("draft_model", 2, DRAFT), Speculation("prompt_lookup", 2)):
        got = hf.continue_prompts(PROMPTS, 2, 5, Sampling(0.0), spec, seed=0)
        assert got.tokens == plain.tokens, spec
        assert got.counters["num_tokens"] == 2 * 2 * 5 and got.counters["num_steps"] >= 1
    sampled = hf.continue_prompts(PROMPTS, 3, 4, Sampling(1.0, top_k=50), Speculation("draft_model", 2, DRAFT), 0)
    assert _shape(sampled) == [[4] * 3, [4] * 3]
    assert len({tuple(s) for s in sampled.tokens[0]}) > 1  # each sample is its own seeded call
    assert sampled.provenance["transformers"] and sampled.provenance["method"] == "draft_model"


@pytest.mark.parametrize("engine_name", ["ours", "hf"])
def test_bad_requests_are_refused_with_the_reason(engine_name, ours, hf):
    engine = {"ours": ours, "hf": hf}[engine_name]
    with pytest.raises(ValueError, match="unknown speculative method 'magic'"):
        engine.continue_prompts(PROMPTS, 1, 2, Sampling(1.0), Speculation("magic", 2, DRAFT), 0)
    method = "token" if engine_name == "ours" else "draft_model"
    with pytest.raises(ValueError, match="needs a draft"):
        engine.continue_prompts(PROMPTS, 1, 2, Sampling(1.0), Speculation(method, 2), 0)
    with pytest.raises(ValueError, match="k >= 1"):
        engine.continue_prompts(PROMPTS, 1, 2, Sampling(1.0), Speculation(method, 0, DRAFT), 0)
    with pytest.raises(ValueError, match="at least one token"):
        engine.continue_prompts([[]], 1, 2, Sampling(1.0), None, 0)
    with pytest.raises(ValueError, match="n and max_new_tokens"):
        engine.continue_prompts(PROMPTS, 0, 2, Sampling(1.0), None, 0)


def test_vllm_speculative_config_mapping():
    folder = lambda name: f"/models/{name}"  # noqa: E731
    assert speculative_config(None) is None and speculative_config(Speculation("none")) is None
    assert speculative_config(Speculation("draft_model", 2, DRAFT, (("draft_sample_method", "probabilistic"),)),
                              folder) == {"method": "draft_model", "num_speculative_tokens": 2,
                                          "model": f"/models/{DRAFT}", "draft_sample_method": "probabilistic"}
    assert speculative_config(Speculation("ngram", 3)) == {"method": "ngram", "num_speculative_tokens": 3,
                                                           "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    assert speculative_config(Speculation("suffix", 2)) == {"method": "suffix", "num_speculative_tokens": 2}
    with pytest.raises(ValueError, match="needs a draft"):
        speculative_config(Speculation("draft_model", 2))
    with pytest.raises(ValueError, match="takes no draft"):
        speculative_config(Speculation("ngram", 2, DRAFT))
    with pytest.raises(ValueError, match="k >= 1"):
        speculative_config(Speculation("ngram", 0))


def test_worker_helpers_read_literals_and_take_counter_differences():
    assert _choices(typing.Literal["standard", "block"]) == ("standard", "block")
    assert _choices(typing.Optional[typing.Literal["a", "b"]]) == ("a", "b")
    assert _choices(int) is None and _choices(typing.Optional[int]) is None
    after = {"vllm:spec_decode_num_drafts": 10, "vllm:spec_decode_num_accepted_tokens_per_pos": [7, 3]}
    before = {"vllm:spec_decode_num_drafts": 4, "vllm:spec_decode_num_accepted_tokens_per_pos": [5]}
    assert _difference(after, before) == {"vllm:spec_decode_num_drafts": 6,
                                          "vllm:spec_decode_num_accepted_tokens_per_pos": [2, 3]}


def test_the_worker_shuts_down_its_least_recently_used_llm_first():
    class LLM:
        def __init__(self, name, log):
            self.name, self.log = name, log
            self.llm_engine = self  # the worker calls llm.llm_engine.engine_core.shutdown()
            self.engine_core = self

        def shutdown(self):
            self.log.append(self.name)

    log = []
    held = {key: LLM(key, log) for key in ("plain", "spec k=1")}
    held["plain"] = held.pop("plain")  # plain used last, as run_one records a reuse
    _close(held, keep=1)
    assert log == ["spec k=1"] and list(held) == ["plain"]
    _close(held)
    assert log == ["spec k=1", "plain"] and held == {}


def test_missing_vllm_environment_names_the_make_target(tmp_path):
    engine = VLLMEngine(python=tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(VLLMUnavailable, match="make vllm-env"):
        engine.continue_prompts(PROMPTS, 1, 2, Sampling(1.0), None, 0)


HANGS = """import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[2] + ".pids", "w").write(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""


def test_a_hanging_worker_and_its_child_are_killed_at_the_timeout(tmp_path, monkeypatch, gone):
    """A real subprocess (not a mock) that starts a child and sleeps: every row says it timed out, the
    call returns at the timeout, and neither process survives (the whole group is killed)."""
    worker, folder = tmp_path / "hangs.py", tmp_path / "request"
    worker.write_text(HANGS)
    monkeypatch.setattr("specdec.peers.vllm.tempfile.TemporaryDirectory", lambda prefix: _Fixed(folder))
    engine = VLLMEngine(python=sys.executable, worker=worker, timeout_s=3)
    start = time.perf_counter()
    rows = engine.run_many([(PROMPTS, 1, 2, Sampling(1.0), None, 0), (PROMPTS, 1, 2, Sampling(0.0), None, 0)])
    assert time.perf_counter() - start < 15
    assert [r.error for r in rows] == ["timed out: the vLLM worker was killed after 3 s"] * 2
    assert rows[0].tokens == [] and rows[0].provenance["process_wall_s"] >= 3
    worker_pid, child_pid = map(int, (folder / "result.json.pids").read_text().split())
    time.sleep(0.2)
    assert gone(worker_pid) and gone(child_pid)


class _Fixed:
    """A request folder that outlives the call (for reading what the fake worker left there)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.path.mkdir(parents=True, exist_ok=True)
        return str(self.path)

    def __exit__(self, *exc):
        return False


def test_a_failing_worker_gives_rows_with_its_status_and_log(tmp_path):
    worker = tmp_path / "fails.py"
    worker.write_text("import sys\nprint('engine exploded: no CPU left')\nsys.exit(3)\n")
    rows = VLLMEngine(python=sys.executable, worker=worker, timeout_s=30).run_many(
        [(PROMPTS, 1, 2, Sampling(1.0), None, 0)])
    assert rows[0].error.startswith("the vLLM worker exited with status 3") and "engine exploded" in rows[0].error
