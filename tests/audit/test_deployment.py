"""`make audit` (`specdec.audit.deployment`, `specdec.peers.endpoint`, `specdec.cli.audit`) against
real servers on 127.0.0.1: our own OpenAI-compatible server (`specdec.peers.own_server`: plain,
and the negative control that keeps every draft; its exact speculative decoding runs at full size
in `make audit-servers`) and llama.cpp's llama-server (plain and probabilistic drafts).  vLLM's servers: tests/audit/test_deployment_vllm.py and
tests/peers/test_vllm_server.py.  Bad input on every path: a malformed URL, nothing listening, a
server whose rules cannot be pinned, a model name not served, weights that are not the served ones,
greedy settings, and the command line's arguments.

Sizes and power (stated before the runs): 4 prompts x 16 samples x 16 tokens = 1,024 u values in
10 bins, level 0.01 split over two component tests: the minimal detectable binned TV at power 0.8 is
~0.076 (asserted from the rows).  The negative control's TV is ~0.13 (measured at 2,048 values while
building this test: p ~ 1e-50), so it is rejected with margin; the exact servers pass with
probability >= 0.99 each under the target law (our server's seeds are fixed; llama.cpp's too)."""

import http.server
import threading

import pytest

from specdec.audit.deployment import CONTROL_FAILS, attribute, audit
from specdec.cli import audit as cli
from specdec.io.paths import MODELS_DIR
from specdec.peers.conformance import CONSISTENT, INCONSISTENT
from specdec.peers.endpoint import EndpointError, probe
from specdec.peers.interface import Sampling, Speculation
from specdec.peers.llama_server import LLAMA_SERVER
from specdec.peers.own_server import OwnServer
from specdec.peers.process import free_port

PROMPTS = [[348, 891, 452, 264, 1125, 321, 77, 99], [40, 47, 54, 61, 68, 75, 82, 89], [5, 6, 7, 8, 9, 10, 11, 12],
           [600, 12, 44, 900, 3, 17, 250, 31]]
TARGET = MODELS_DIR / "target"
SIZE = dict(sequences=16, length=16, seed=0)
pytestmark = pytest.mark.xdist_group("own_server")  # one worker: the module's servers start once


@pytest.fixture(scope="module")
def servers():
    with OwnServer() as plain, OwnServer(draft="draft-distilled", k=2, variant="always_accept") as keep_all:
        yield {"plain": plain, "keep_all": keep_all}
    assert all(s._proc is None for s in (plain, keep_all))


def test_our_plain_server_passes_and_the_one_that_keeps_every_draft_is_rejected(servers):
    plain, bad = audit([("plain", servers["plain"].url), ("keep all", servers["keep_all"].url)], TARGET, "target",
                       PROMPTS, sampling=Sampling(1.0), **SIZE)["rows"]
    assert (plain["verdict"], bad["verdict"]) == (CONSISTENT, INCONSISTENT) and bad["p_value"] < 1e-6
    assert all(r["tokens"] == 1024 and r["kind"] == "specdec" and 0.07 < r["mdtv"] < 0.1 for r in (plain, bad))
    assert bad["tv"] > bad["mdtv"]
    # the server's own counters: the negative control keeps every draft
    assert plain["drafts"] == 0 and bad["drafts"] > 0 and bad["accepted"] == bad["drafts"]
    # greedy through the negative control is not the target's argmax: counted, as a finding
    assert bad["greedy_mismatches"] > 0 and plain["greedy_mismatches"] == 0


def test_a_failed_control_is_not_reported_as_a_speculative_finding():
    control, spec = {"status": "reject", "verdict": INCONSISTENT}, {"status": "reject", "verdict": INCONSISTENT}
    assert [r["verdict"] for r in attribute([control, spec])] == [INCONSISTENT, CONTROL_FAILS]
    assert [r["verdict"] for r in attribute([{**control, "status": "pass", "verdict": CONSISTENT}, spec])] == \
        [CONSISTENT, INCONSISTENT]
    assert attribute([control]) == [control] and spec["verdict"] == INCONSISTENT  # one row: nothing to attribute


def test_weights_that_are_not_the_served_ones_are_refused(servers):
    with pytest.raises(ValueError, match="does not serve TARGET's weights"):
        audit([("plain", servers["plain"].url)], MODELS_DIR / "draft-distilled", "target", PROMPTS,
              sampling=Sampling(1.0), **SIZE)
    with pytest.raises(ValueError, match=r"or its speculative decoding is not exact at greedy"):
        audit([("alone", servers["keep_all"].url)], TARGET, "target", PROMPTS, sampling=Sampling(1.0), **SIZE)
    with pytest.raises(EndpointError, match=r"serves \['target'\], not 'gpt2'"):
        audit([("plain", servers["plain"].url)], TARGET, "gpt2", PROMPTS, sampling=Sampling(1.0), **SIZE)
    with pytest.raises(ValueError, match="not a model folder"):
        audit([("plain", servers["plain"].url)], MODELS_DIR / "nowhere", "target", PROMPTS, sampling=Sampling(1.0), **SIZE)


def test_greedy_and_bad_sizes_are_refused_before_anything_is_sent():
    url = "http://127.0.0.1:9"
    with pytest.raises(ValueError, match="temperature must be > 0"):
        audit([("a", url)], TARGET, "target", PROMPTS, sampling=Sampling(0.0), **SIZE)
    with pytest.raises(ValueError, match="sequences"):
        audit([("a", url)], TARGET, "target", PROMPTS, sampling=Sampling(1.0), **{**SIZE, "sequences": 1})
    with pytest.raises(ValueError, match="one or two"):
        audit([("a", url)] * 3, TARGET, "target", PROMPTS, sampling=Sampling(1.0), **SIZE)


class _Unknown(http.server.BaseHTTPRequestHandler):
    """An OpenAI-looking server of no known kind: /v1/models answers, nothing says what it is."""

    def do_GET(self):  # noqa: N802
        body = b'{"data": [{"id": "target"}]}' if self.path == "/v1/models" else b"{}"
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_malformed_unreachable_and_unpinnable_endpoints_are_refused_naming_why():
    with pytest.raises(EndpointError, match="no http"):
        probe("127.0.0.1:8000")
    port = free_port()
    with pytest.raises(EndpointError, match="refused the connection"):
        probe(f"http://127.0.0.1:{port}")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unknown)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(EndpointError, match="cannot pin|can pin"):
            probe(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


def test_the_command_line_refuses_bad_arguments_in_one_line(capsys):
    base = ["--url", "http://127.0.0.1:9", "--model", "target", "--target", str(TARGET)]
    for extra, words in ((["--temperature", "0"], "--temperature must be"), (["--alpha", "2"], "--alpha must"),
                         (["--sequences", "0"], "--sequences must"), (["--top-p", "1.5"], "top_p"),
                         (["--url", "a", "b", "c"], "one endpoint, or two")):
        with pytest.raises(SystemExit) as exc:
            cli.main(base + extra)
        assert exc.value.code == 2 and words in str(exc.value)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("audit: ")
    with pytest.raises(SystemExit) as exc:
        cli.main(base)
    assert exc.value.code == 2 and "refused the connection" in str(exc.value)


@pytest.mark.xdist_group("llama_server")
def test_llama_server_plain_and_probabilistic_drafts_pass(tmp_path):
    if not LLAMA_SERVER.exists():
        pytest.skip(f"{LLAMA_SERVER} is missing: build it with `make llama-env`")
    from specdec.peers.llama import LlamaEngine

    spec = Speculation("draft_model", k=2, draft="draft-distilled", options=(("draft_sampling", "probabilistic"),))
    with LlamaEngine() as engine:
        plain, drafted = engine.server(None), engine.server(spec)
        rows = cli.main(["--url", plain.url, drafted.url, "--model", "target", "--target", str(TARGET), "--out",
                         str(tmp_path), "--prompts", "4", "--sequences", "12", "--length", "10"])
    assert [r["verdict"] for r in rows] == [CONSISTENT, CONSISTENT] and [r["kind"] for r in rows] == ["llama.cpp"] * 2
    assert rows[0]["bans"] == rows[1]["bans"] == "0"  # the family's end of text, as the server echoes it
    assert rows[1]["drafts"] > 0 and 0 < rows[1]["accepted"] < rows[1]["drafts"]
    assert (tmp_path / "audit.csv").exists() and (tmp_path / "identity.csv").exists()


def test_a_token_just_past_the_nucleus_is_a_boundary_token_and_one_far_past_it_is_not():
    """The case `make audit-servers` met (traced there: llama.cpp's own plain chain keeps token 378
    at this prefix, 229 tokens in its nucleus; the local float32 law keeps 229 without it, the mass
    ranked before it 0.90044 against top-p 0.9): a boundary token.  Far past the cut, or under a
    margin of 0, it stays impossible."""
    from specdec.audit.deployment import Banned, boundary, load_target
    from specdec.core.sampling import SamplingConfig

    local = load_target(TARGET)
    prompt, tokens = [522, 400, 86, 323, 523, 282, 321, 666], [321, 199, 878, 378]
    law = Banned(SamplingConfig(0.7, top_p=0.9), (0,))
    assert boundary(local, prompt, tokens, 3, law, 1e-3)
    assert not boundary(local, prompt, tokens, 3, law, 1e-4)
    import torch

    with torch.inference_mode():
        logits = local(input_ids=torch.tensor([prompt + tokens[:3]])).logits[0, -1]
    far = int(logits.argsort(descending=True)[600])
    assert not boundary(local, prompt, tokens[:3] + [far], 3, law, 1e-3)
