"""vLLM's real OpenAI-compatible server on 127.0.0.1, started and stopped by `VLLMServer`, and the
client that measures any such endpoint.  The four fault checks of serving: a cancelled stream frees
its slot; malformed requests get the server's 4xx with its message while the run goes on; a server
killed mid-run leaves every request ended with a recorded error, nothing hanging, partial tokens
kept; a request that outlives its timeout is counted as one.  `make serve-bench` against the same
server.  The lifecycle's own failures (a server that exits, one never healthy) on stand-in
processes.  Skipped only when `.venv-vllm` is missing (`make vllm-env`).

One server serves the whole module (a vLLM start-up is the slowest step here): it is session-scoped
so that pytest-xdist interleaving another module's tests does not tear it down and start it again,
and the kill check, the last test of the module, ends it."""

import sys
import threading
import time

import pandas as pd
import pytest

from specdec.cli import serve_bench
from specdec.measure.server_runs import run_summary
from specdec.peers.openai_client import post, scrape, send
from specdec.peers.vllm import VLLM_VENV
from specdec.peers.vllm_server import LOOPBACK, ServerFailed, VLLMServer

pytestmark = [pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(),
                                 reason=f"{VLLM_VENV} is missing: build it with `make vllm-env`"),
              pytest.mark.xdist_group("vllm_server")]  # one worker: the module's server starts once

PROMPT = [348, 891, 452, 264, 1125, 321]
IDLE_S = 10.0  # the longest a freed slot may take to show in /metrics


@pytest.fixture(scope="session")
def server():
    with VLLMServer(seed=0, startup_timeout_s=240) as s:
        yield s
    assert s._proc is None and s.provenance["stopped"]


def _settled(url: str) -> dict:
    """/metrics once nothing runs or waits (or after IDLE_S)."""
    end = time.perf_counter() + IDLE_S
    while True:
        m = scrape(url)
        if (m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0) or time.perf_counter() > end:
            return m
        time.sleep(0.2)


def test_the_server_streams_token_ids_and_reports_itself(server):
    assert server.url.startswith(f"http://{LOOPBACK}:") and server.provenance["version"] == "0.32.0"
    assert "--dtype float32" in server.provenance["command"] and server.provenance["startup_s"] > 0
    assert "'enforce_eager': True" in server.provenance["non_default_args"] and "(v0.32.0)" in server.provenance["engine_config"]
    before = scrape(server.url)
    sent = send(server.url, server.model, [(0.0, PROMPT, 8, None), (0.05, PROMPT[:3], 5, None)], temperature=1.0)
    assert [r["outcome"] for r in sent] == ["ok", "ok"]
    assert [len(r["tokens"]) for r in sent] == [8, 5] and [sum(r["chunk_tokens"]) for r in sent] == [8, 5]
    assert all(0 <= t < 2048 for r in sent for t in r["tokens"])
    row = run_summary(sent, before, _settled(server.url), ttft_slo=1.0, tpot_slo=1.0)
    assert row["finished"] == 2 and row["n_ok"] == 2 and row["tokens"] == 13 and row["serve_tokens_per_s"] > 0
    assert row["ttft_p50_s"] > 0 and row["tokens_per_chunk"] >= 1 and row["running_after"] == 0


def test_a_cancelled_stream_frees_its_slot(server):
    idle = _settled(server.url)
    reqs = [(0.0, PROMPT, 64, 3), (0.0, PROMPT, 64, 5), (0.0, PROMPT, 6, None)]
    sent = send(server.url, server.model, reqs, temperature=1.0)
    assert [r["outcome"] for r in sent] == ["cancelled", "cancelled", "ok"]
    assert 3 <= len(sent[0]["tokens"]) < 64 and 5 <= len(sent[1]["tokens"]) < 64
    after = _settled(server.url)
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0
    assert after["vllm:kv_cache_usage_perc"] == idle["vllm:kv_cache_usage_perc"]
    row = run_summary(sent, idle, after, ttft_slo=1.0, tpot_slo=1.0)
    assert row["n_cancelled"] == 2 and row["n_ok"] == 1


def test_malformed_requests_get_the_servers_4xx_and_the_run_goes_on(server):
    base = {"model": server.model, "prompt": PROMPT, "max_tokens": 4}
    bad = {"prompt longer than the context": {"prompt": [5] * 600},
           "max_tokens 0": {"max_tokens": 0}, "max_tokens negative": {"max_tokens": -3},
           "negative temperature": {"temperature": -1.0}, "token id past the vocabulary": {"prompt": [5, 10 ** 6]}}
    for what, change in bad.items():
        status, message = post(server.url, {**base, **change})
        assert 400 <= status < 500 and message, (what, status, message)
    sent = send(server.url, server.model, [(0.0, [5] * 600, 4, None), (0.0, PROMPT, 4, None),
                                           (0.0, [5, 10 ** 6], 4, None)], temperature=1.0)
    assert [r["outcome"] for r in sent] == ["rejected", "ok", "rejected"]
    assert sent[0]["status"] == 400 and "context" in sent[0]["message"].lower() and not sent[0]["in_stream"]
    # vLLM answers a streamed bad token id with HTTP 200 and an error event: read as rejected, not "ok"
    assert sent[2]["status"] == 400 and "vocabulary" in sent[2]["message"] and sent[2]["tokens"] == []


def test_a_request_past_its_timeout_is_counted_and_the_server_recovers(server):
    before = _settled(server.url)
    # the whole context at a quarter second: a quiet machine decodes a few hundred tokens a second
    longest = server.max_model_len - len(PROMPT)
    sent = send(server.url, server.model, [(0.0, PROMPT, longest, None)], temperature=1.0, timeout_s=0.25)
    assert sent[0]["outcome"] == "timeout" and "0.25 s" in sent[0]["message"]
    # cut at its timeout, not run to the end; the client's clock fires when its event loop runs, which
    # on a shared 2-core machine (the other test worker starting vLLM servers) can be seconds late
    assert len(sent[0]["tokens"]) < longest and sent[0]["end_s"] - sent[0]["sent_s"] < 0.25 + 15.0
    assert run_summary(sent, before, _settled(server.url), ttft_slo=1.0, tpot_slo=1.0)["n_timeout"] == 1
    assert _settled(server.url)["vllm:num_requests_running"] == 0
    # recovered: the next request, sent after the cut one, is served (no timeout: a 1 s budget for a
    # short request is itself a race with the other test worker's load)
    assert [r["outcome"] for r in send(server.url, server.model, [(0.0, PROMPT, 2, None)], temperature=1.0)] == ["ok"]
    with pytest.raises(ValueError, match="timeout_s"):
        send(server.url, server.model, [(0.0, PROMPT, 2, None)], temperature=1.0, timeout_s=0)


def test_serve_bench_measures_a_running_endpoint(server, tmp_path):
    serve_bench.main(["--url", server.url, server.url, "--name", "a", "b", "--model", server.model,
                      "--out", str(tmp_path), "--rates", "50", "--repeats", "2", "--requests", "3",
                      "--short-len", "4", "--long-len", "8", "--prompts", "2", "--prompt-len", "8"])
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 4 and set(runs["endpoint"]) == {server.url} and (runs["n_ok"] == 3).all()
    assert set(runs["endpoint_name"]) == {"a", "b"}
    assert len(pd.read_csv(tmp_path / "speedups.csv")) == 1 and (tmp_path / "break_even.csv").exists()
    with pytest.raises(SystemExit, match="does not answer"):
        serve_bench.main(["--url", f"http://{LOOPBACK}:9", "--model", "x", "--out", str(tmp_path)])


def test_make_audit_finds_the_plain_server_consistent_with_the_target_law(server):
    from specdec.audit.deployment import audit
    from specdec.io.paths import MODELS_DIR, ROOT
    from specdec.peers.interface import Sampling
    from specdec.peers.vllm_server import PATCH_MARK

    # vLLM's samples come from the server's generator, which the module's earlier requests advanced by a
    # number that varies from run to run (timeouts, a cancelled stream): each run is a fresh draw, so
    # the test runs at level 1e-4 (one false failure in 10,000 runs; at 0.01 it failed a fresh clone
    # once).  512 values: minimal detectable binned TV ~0.14 at power 0.8 -- a smoke test of the path,
    # the audit's power is tested in tests/audit/test_deployment.py.
    (row,) = audit([("plain", server.url)], MODELS_DIR / "target", server.model, [PROMPT, PROMPT[:4]], sequences=16,
                   length=16, sampling=Sampling(1.0), seed=0, alpha=1e-4)["rows"]
    assert row["kind"] == "vllm" and row["drafts"] == 0 and row["tokens"] == 512 and row["verdict"] == "consistent"
    assert not server.provenance["patched"] and PATCH_MARK not in (ROOT / server.provenance["log"]).read_text()


def test_a_server_that_exits_or_never_answers_is_reported_and_stopped(tmp_path):
    dies = tmp_path / "dies.py"
    dies.write_text("import sys; print('bad flag'); sys.exit(3)\n")
    hangs = tmp_path / "hangs.py"
    hangs.write_text("import time; time.sleep(600)\n")
    for script, words in ((dies, "exited with status 3"), (hangs, "not healthy after 2 s")):
        wrapper = tmp_path / f"python-{script.stem}"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
        wrapper.chmod(0o755)
        s = VLLMServer(python=wrapper, startup_timeout_s=2, log_dir=tmp_path)
        with pytest.raises(ServerFailed, match=words):
            s.__enter__()
        assert s._proc is None and s.provenance["stopped"]


def test_a_server_killed_mid_run_ends_every_request_with_an_error(server):
    """Last in the module: it kills the module's server (the fixture then finds it stopped).  Six
    requests each ask for as many tokens as the context holds, so none can finish before the kill,
    which comes 0.3 s after two requests are seen running or 1.5 s after the first is sent, whichever
    is first: a metrics page the busy server answers late, or not at all, cannot postpone it past the
    requests' end."""
    longest = server.max_model_len - len(PROMPT)
    reqs = [(0.0, PROMPT, longest, None)] * 4 + [(0.2, PROMPT, longest, None)] * 2

    def kill_once_running() -> None:
        end = time.perf_counter() + 1.5
        try:
            while time.perf_counter() < end:
                try:
                    if scrape(server.url, timeout_s=0.5).get("vllm:num_requests_running", 0) >= 2:
                        time.sleep(0.3)
                        break
                except Exception:  # not answering yet is not running: keep to the deadline
                    pass
                time.sleep(0.02)
        finally:
            server.kill()

    killer = threading.Thread(target=kill_once_running)
    start = time.perf_counter()
    killer.start()
    sent = send(server.url, server.model, reqs, temperature=1.0, timeout_s=20.0)
    took = time.perf_counter() - start
    killer.join()
    assert took < 20.0 + 5.0  # nothing hangs: within the per-request timeout
    assert all(r["outcome"] == "error" and r["message"] for r in sent), [(r["outcome"], r["message"]) for r in sent]
    assert any(0 < len(r["tokens"]) < longest for r in sent)  # partial tokens kept, labelled by the outcome
