"""`make serve-bench` (specdec.cli.serve_bench) and the OpenAI client it drives refuse bad input
before anything is sent.  The command line: each kind of usage error exits with status 2 and ONE
line on stderr, no traceback: checked in process for every kind (fast), and as a real subprocess,
`python -m specdec.cli.serve_bench`, for the one that gets furthest (the interpreter's own exit
status and output; started with the module, it runs while the in-process tests do).  "Nothing
listens" is a port just bound and closed.  The client's public functions refuse an empty request
list and malformed URLs with clear errors."""

import json
import re
import socket
import subprocess
import sys

import pytest

from specdec.cli.serve_bench import main
from specdec.peers.openai_client import check_url, endpoint_info, post, reachable, scrape, send

PROMPT = [348, 891, 452]


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens: bound by the OS, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def url():
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def prompt_file(tmp_path):
    """A function: JSON text (or None: no file) -> the path of a prompt file holding it."""
    def make(text):
        path = tmp_path / "prompts.json"
        if text is not None:
            path.write_text(text)
        return str(path)
    return make


def usage_error(capsys, argv) -> str:
    """The one line `main(argv)` prints before it exits with status 2 (a usage error)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("serve-bench: "), err
    return err.strip()


def test_a_valid_prompt_file_gets_as_far_as_the_endpoint(capsys, url, prompt_file):
    """The positive control: nothing below is refused for its prompts, only for its endpoint."""
    line = usage_error(capsys, ["--url", url, "--model", "m", "--prompt-file", prompt_file("[[1, 2], [3]]")])
    assert "refused the connection" in line


@pytest.mark.parametrize("value,match", [("-1", "--temperature must be a finite number >= 0, got -1.0"),
                                         ("nan", "--temperature must be a finite number >= 0, got nan"),
                                         ("inf", "--temperature .* got inf"),
                                         ("abc", "argument --temperature: invalid float value: 'abc'")])
def test_a_negative_or_non_finite_temperature_is_a_usage_error(capsys, url, value, match):
    assert re.search(match, usage_error(capsys, ["--url", url, "--model", "m", "--temperature", value]))


@pytest.mark.parametrize("flag,value,match", [("--rates", "0", "--rates must be a finite number > 0, got 0.0"),
                                              ("--timeout", "-1", "--timeout must be a finite number > 0, got -1.0"),
                                              ("--repeats", "0", "--repeats must be an int >= 1, got 0"),
                                              ("--long-share", "1.5", r"--long-share must be a fraction in \[0, 1\]"),
                                              ("--seed", "-1", r"--seed must be an int in \[0, 4294967296\), got -1"),
                                              ("--requests", "2.5", "argument --requests: invalid int value")])
def test_other_out_of_range_arguments_are_usage_errors(capsys, url, flag, value, match):
    assert re.search(match, usage_error(capsys, ["--url", url, "--model", "m", flag, value]))


def test_a_missing_prompt_file_is_a_usage_error(capsys, url, prompt_file):
    path = prompt_file(None)
    assert usage_error(capsys, ["--url", url, "--model", "m", "--prompt-file", path]) == \
        f"serve-bench: --prompt-file {path}: no such file"


def test_a_prompt_file_that_is_not_json_is_a_usage_error(capsys, url, prompt_file):
    line = usage_error(capsys, ["--url", url, "--model", "m", "--prompt-file", prompt_file("[[1, 2],")])
    assert " is not JSON (" in line and "expected a JSON list of token-id lists" in line


@pytest.mark.parametrize("text,match", [
    ('{"prompts": [[1]]}', "prompts must be a list of token-id lists, got dict"),
    ("[]", "prompts is empty"),
    ("[[1], []]", r"prompts\[1\] is empty"),
    ("[[1], 2]", r"prompts\[1\] must be a list of token ids, got int"),
    ("[[1, -2]]", r"prompts\[0\]\[1\] = -2 is not a token id of this model: ids are ints >= 0"),
    ("[[1, true]]", r"prompts\[0\]\[1\] = True is a bool, not a token id"),
    ("[[1, 2.0]]", r"prompts\[0\]\[1\] = 2.0 is a float, not a token id"),
    ('[["a"]]', r"prompts\[0\]\[0\] = 'a' is a str, not a token id"),
])
def test_a_prompt_file_that_is_not_a_list_of_non_empty_id_lists_is_a_usage_error(capsys, url, prompt_file, text,
                                                                                  match):
    line = usage_error(capsys, ["--url", url, "--model", "m", "--prompt-file", prompt_file(text)])
    assert re.search(match, line) and line.endswith("expected a JSON list of non-empty token-id lists"), line


@pytest.mark.parametrize("bad,match", [("http://[::1", "is not a URL"), ("127.0.0.1:8000", "has no http(s) scheme"),
                                       ("ftp://127.0.0.1", "has no http(s) scheme"), ("http://", "names no host"),
                                       ("http://:8000", "names no host"), ("http://h:99999", "is not a URL"),
                                       ("http://h:8000/?q=1", "a query or a fragment")])
def test_a_malformed_url_is_a_usage_error(capsys, prompt_file, bad, match):
    line = usage_error(capsys, ["--url", bad, "--model", "m", "--prompt-file", prompt_file("[[1]]")])
    assert line.startswith(f"serve-bench: --url: the endpoint {bad!r} ") and match in line, line


def test_a_port_where_nothing_listens_is_a_usage_error_that_says_so(capsys, url, prompt_file):
    line = usage_error(capsys, ["--url", url, "--model", "m", "--prompt-file", prompt_file("[[1]]")])
    assert line == (f"serve-bench: {url} does not answer GET /v1/models: the endpoint refused the connection "
                    f"(nothing listens at {url[len('http://'):]}); is the server running?")


def test_names_must_match_the_urls(capsys, url):
    assert "--name needs one distinct name per --url" in usage_error(
        capsys, ["--url", url, url, "--name", "a", "a", "--model", "m"])


def test_the_client_refuses_an_empty_request_list_and_bad_requests(url):
    with pytest.raises(ValueError, match="requests is empty"):
        send(url, "m", [], temperature=1.0)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0, got -1.0"):
        send(url, "m", [(0.0, PROMPT, 2, None)], temperature=-1.0)
    with pytest.raises(TypeError, match=r"the requests' prompts\[1\]\[0\] = True is a bool"):
        send(url, "m", [(0.0, PROMPT, 2, None), (0.0, [True], 2, None)], temperature=1.0)
    with pytest.raises(ValueError, match=r"the requests' prompts\[0\] is empty"):
        send(url, "m", [(0.0, [], 2, None)], temperature=1.0)
    with pytest.raises(ValueError, match="request 0's max_tokens must be an int >= 1, got 0"):
        send(url, "m", [(0.0, PROMPT, 0, None)], temperature=1.0)
    with pytest.raises(ValueError, match="request 0's cancel_after must be an int >= 1, got 0"):
        send(url, "m", [(0.0, PROMPT, 2, 0)], temperature=1.0)
    with pytest.raises(ValueError, match="request 0's arrival_s must be a finite number >= 0 seconds"):
        send(url, "m", [(float("nan"), PROMPT, 2, None)], temperature=1.0)


@pytest.mark.parametrize("call", [lambda u: send(u, "m", [(0.0, PROMPT, 2, None)], temperature=1.0),
                                  lambda u: post(u, {}), lambda u: scrape(u), lambda u: endpoint_info(u),
                                  lambda u: reachable(u)],
                         ids=["send", "post", "scrape", "endpoint_info", "reachable"])
@pytest.mark.parametrize("bad,why", [("localhost:8000", "has no http(s) scheme"), ("ftp://h", "has no http(s) scheme"),
                                     ("http://", "names no host"), ("http://h:port", "is not a URL"),
                                     ("http://h:8000/#x", "a query or a fragment")])
def test_every_client_function_refuses_a_malformed_url(call, bad, why):
    with pytest.raises(ValueError, match=re.escape(f"the endpoint {bad!r} ") + ".*" + re.escape(why)):
        call(bad)


def test_the_client_says_when_nothing_listens(url):
    assert reachable(url) == f"the endpoint refused the connection (nothing listens at {url[len('http://'):]})"
    assert check_url(url + "/") == url
    sent = send(url, "m", [(0.0, PROMPT, 2, None)], temperature=1.0, timeout_s=10)
    assert sent[0]["outcome"] == "error" and sent[0]["message"].startswith("ConnectError")
    assert json.dumps(endpoint_info(url))  # what the endpoint said, kept as text for provenance


CASES = {  # as a user runs it, in its own process: one case (each costs seconds of imports), the one that
    # goes furthest (arguments, prompt file, URL, network); every usage error leaves through the same `_usage`
    "nothing listens": lambda f: ["--prompt-file", f("[[1]]")],
}


@pytest.fixture(scope="module", autouse=True)
def processes(url, tmp_path_factory):
    """Every case of CASES started when the module starts (each process spends seconds importing
    the project, meanwhile the in-process tests run); a function name -> (returncode, stdout,
    stderr) that waits for that one."""
    folder = tmp_path_factory.mktemp("cli")

    def file(text):
        path = folder / f"prompts-{len(list(folder.iterdir()))}.json"
        path.write_text(text)
        return str(path)

    procs = {name: subprocess.Popen([sys.executable, "-m", "specdec.cli.serve_bench", "--url", url, "--model", "m",
                                     "--out", str(folder / "out"), *case(file)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, case in CASES.items()}
    done = {}

    def result(name):
        if name not in done:
            stdout, stderr = procs[name].communicate(timeout=120)
            done[name] = (procs[name].returncode, stdout, stderr)
        return done[name]

    yield result
    for p in procs.values():  # only if a test failed before waiting for it
        if p.poll() is None:
            p.kill()
            p.communicate()


@pytest.mark.parametrize("name,line", [
    ("nothing listens", r"serve-bench: http://127\.0\.0\.1:\d+ does not answer GET /v1/models: the endpoint "
                        r"refused the connection"),
])
def test_the_command_exits_2_with_one_line_and_no_traceback(processes, name, line):
    rc, stdout, stderr = processes(name)
    assert rc == 2 and stdout == "" and "Traceback" not in stderr, (rc, stdout, stderr)
    assert stderr.count("\n") == 1 and re.match(line, stderr), stderr


def _stand_in(body: bytes) -> tuple[str, "threading.Thread"]:
    """A one-request HTTP server on 127.0.0.1 answering 200 with ``body``, then closing the connection."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:  # the whole request, so that closing sends no reset
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), b"0"))
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body)
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", t


@pytest.mark.parametrize("done, outcome", [(True, "ok"), (False, "error")])
def test_a_stream_is_an_answer_only_when_it_ends_with_its_done_line(done, outcome):
    """A server that dies mid-stream can close the connection cleanly: without the [DONE] line the
    request is an error (with the tokens it got), never "ok"."""
    from specdec.peers.openai_client import send

    event = b'data: {"choices": [{"token_ids": [5, 6]}]}\n\n' + (b"data: [DONE]\n\n" if done else b"")
    url, t = _stand_in(event)
    [row] = send(url, "m", [(0.0, [1, 2], 8, None)], temperature=1.0, timeout_s=10.0)
    t.join(timeout=5)
    assert row["outcome"] == outcome and row["tokens"] == [5, 6]
    assert (row["message"] is None) == done
