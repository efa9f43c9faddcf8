"""Chapter 09's vLLM serving run (`specdec.audit.serving`, `specdec.cli.serving_vllm`): chapter 10's
configurations and verdicts label the runs, a configuration outside the target's law is never read as
faster, every server is stopped whichever failed to start (stand-in processes that answer HTTP on
127.0.0.1 as the server would, and one that exits), and the command line refuses bad input before
any server starts.  The real servers: tests/peers/test_vllm_server.py; the whole run: `make engines`."""

import sys

import pytest

from specdec.audit import serving as serving_vllm
from specdec.cli import serving_vllm as cli
from specdec.cli.args import UsageError
from specdec.measure.serving_runs import NONE
from specdec.peers.process import ServerFailed
from specdec.peers.vllm_server import VLLMServer
from specdec.report.robustness import NOT_EXACT

HEALTHY = """import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"version": "stand-in"}')
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), H).serve_forever()
"""


def test_chapter_10s_configurations_and_verdicts_label_the_serving_runs(tmp_path):
    cfgs = serving_vllm.configs(["n-gram prompt lookup, k = 2", "draft model, k = 2 (defaults)"], 2, "draft-distilled")
    assert [c.spec.method for c in cfgs] == ["ngram", "draft_model"]
    with pytest.raises(ValueError, match="not vLLM configurations"):
        serving_vllm.configs(["draft model, k = 3 (defaults)"], 2, "draft-distilled")
    laws = tmp_path / "laws.csv"
    laws.write_text("engine,configuration,setting,status,verified_share\n"
                    "vllm,\"n-gram prompt lookup, k = 2\",temperature 1,pass,0.95\n"
                    "vllm,\"draft model, k = 2 (defaults)\",temperature 1,reject,1.0\n"
                    "vllm,\"n-gram prompt lookup, k = 2\",temperature 0.5,pass,0.02\n")
    status = serving_vllm.law_status(laws, cfgs, "temperature 1")
    assert status == {"n-gram prompt lookup, k = 2": "pass", "draft model, k = 2 (defaults)": "reject"}
    # a pass on samples the drafter barely drafted is no pass of its verification
    assert serving_vllm.law_status(laws, cfgs[:1], "temperature 0.5") == {"n-gram prompt lookup, k = 2": "not tested"}
    assert serving_vllm.policy_name(cfgs[0], "not tested").endswith("(law not tested)")
    assert set(serving_vllm.law_status(tmp_path / "none.csv", cfgs, "temperature 1").values()) == {"not tested"}
    names = [serving_vllm.policy_name(c, status[c.label]) for c in cfgs]
    assert names[0] == "vLLM n-gram prompt lookup, k = 2" and names[1].endswith(f"({NOT_EXACT})")
    # the page reads a name back as its configuration and its law status
    assert [serving_vllm.label_of(n) for n in names] == [c.label for c in cfgs]
    assert [serving_vllm.law_of(n) for n in names] == ["passed", "rejected"]
    assert serving_vllm.law_of(serving_vllm.policy_name(cfgs[0], "not tested")) == "not tested"
    vcfg = serving_vllm.labelled_configs([c.label for c in cfgs], 2, "draft-distilled", 1.0, laws_csv=laws)
    assert list(vcfg) == names and [s for _, s in vcfg.values()] == ["pass", "reject"]
    hotter = serving_vllm.labelled_configs([c.label for c in cfgs], 2, "draft-distilled", 1.5, laws_csv=laws)
    assert {s for _, s in hotter.values()} == {"not tested"}  # another temperature's verdict is not borrowed
    assert all(r["verdict"] == NOT_EXACT for r in serving_vllm.labelled(
        [{"policy": n, "verdict": "faster", "verdict_sim": "faster"} for n in hotter], hotter))
    speed = [{"policy": n, "verdict": "faster", "verdict_sim": "faster"} for n in names]
    out = serving_vllm.labelled(speed, vcfg)
    assert [r["verdict"] for r in out] == ["faster", NOT_EXACT]  # the negative case: never "faster"
    assert NONE == "no speculation"


def _python(tmp_path, name: str, code: str):
    """A stand-in for .venv-vllm's python: it runs ``code`` with the server's arguments."""
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    wrapper = tmp_path / f"python-{name}"
    wrapper.write_text(f"#!/bin/sh\nshift 2\nexec {sys.executable} {script} \"$@\"\n")  # drops "-m vllm...."
    wrapper.chmod(0o755)
    return wrapper


def test_the_servers_start_together_and_every_one_is_stopped_whichever_failed(tmp_path):
    ok = _python(tmp_path, "healthy", HEALTHY)
    servers = {n: VLLMServer(python=ok, startup_timeout_s=20, log_dir=tmp_path) for n in ("a", "b")}
    with serving_vllm.started(servers) as running:
        assert all(s._proc is not None and s.provenance["version"] == "stand-in" for s in running.values())
    assert all(s._proc is None and s.provenance["stopped"] for s in servers.values())
    dies = _python(tmp_path, "dies", "import sys; sys.exit(3)\n")
    servers = {"up": VLLMServer(python=ok, startup_timeout_s=20, log_dir=tmp_path),
               "dies": VLLMServer(python=dies, startup_timeout_s=20, log_dir=tmp_path)}
    with pytest.raises(ServerFailed, match="exited with status 3"):
        with serving_vllm.started(servers):
            pytest.fail("the body ran although a server failed to start")
    assert servers["up"].provenance["stopped"] and servers["up"]._proc is None


@pytest.mark.parametrize("argv, words", [
    (["--configs", "draft model, k = 3 (defaults)"], "not vLLM configurations"),
    (["--rates", "0"], "--rates must be a finite number > 0"),
    (["--repeats", "0"], "--repeats must be an int >= 1"),
    (["--temperature", "nan"], "--temperature must be a finite number >= 0"),
    (["--long-share", "1.5"], "--long-share must be a fraction"),
    (["--k", "two"], "invalid int value"),
])
def test_the_command_line_refuses_bad_input_before_any_server_starts(argv, words, tmp_path, capsys):
    with pytest.raises(UsageError) as exc:
        cli.main(["--out", str(tmp_path)] + argv)
    assert exc.value.code == 2 and words in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
