"""Our serving loop (chapter 09's continuous batching, `specdec.engine.continuous.serve`) behind an
OpenAI-compatible completions endpoint on 127.0.0.1: what `make audit` is tested against beside
vLLM's and llama.cpp's servers, with a named wrong verifier as the negative control that the audit
must reject.

The server (``python -m specdec.peers.own_server --port P [--draft M --k K] [--variant NAME]``)
loads the embedded target (and draft) once and answers, one request at a time:
  * ``GET /health``, ``GET /version`` -> {"server": "specdec", "version", "draft", "k", "variant"},
    ``GET /v1/models`` -> the served name;
  * ``POST /v1/completions`` (not streamed): ``prompt`` token ids, ``max_tokens``, ``n`` samples,
    ``temperature``, ``top_p``, ``top_k`` (0 = off), ``seed`` (sample j is a job of the loop seeded
    `stream_seed` (seed, j); absent: 0; up to ``MAX_BATCH`` rows run at once),
    ``ignore_eos`` (no stop token is ever applied: every sample has exactly max_tokens ids).  A rule
    it does not run -- ``min_p``, a penalty other than neutral, ``logit_bias``, ``stop``, ``stream`` --
    is refused with HTTP 400 naming it, never ignored.  Answer: ``choices[j].token_ids`` and
    ``speculative`` {"drafts", "accepted"} (the engine's counters for the request).
The verifier: exact token-wise verification (`specdec.core.verify`) in the serving loop, or with
``--variant`` a wrong rule of `specdec.core.rules.variants` (e.g. "always_accept": every draft
kept; a planted fault, never a default, named in /version), run by the engine's `generate` on one
batch of n rows (the wrong rules draw from one generator, the loop gives each row its own).

`OwnServer` starts it in a process group of its own, waits for /health within
``startup_timeout_s`` and stops it (SIGTERM, then SIGKILL) on exit, whatever happened.

Example: with OwnServer(draft="draft-distilled", k=2, variant="always_accept") as s: s.url
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from specdec.io.paths import BUILD_DIR, ROOT
from specdec.peers.contract import check_request
from specdec.peers.interface import Sampling, Speculation, stream_seed
from specdec.peers.process import LOOPBACK, free_port, launch, stop_group

__all__ = ["OwnServer", "NEUTRAL", "completion", "main"]

MAX_BATCH = 16  # rows the serving loop runs at once
MASK = 0xFFFFFFFF
NEUTRAL = {"min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
           "logit_bias": None, "stop": None, "stream": False, "logprobs": None, "best_of": None, "echo": False,
           "suffix": None}
KNOWN = {"model", "prompt", "max_tokens", "n", "temperature", "top_p", "top_k", "seed", "ignore_eos",
         "return_token_ids", "user", *NEUTRAL}


class Refused(ValueError):
    """A request the server does not run as asked (HTTP 400 with the message)."""


def _neutral(key: str, value) -> bool:
    want = NEUTRAL[key]
    if value is None or value == want:
        return True
    return key == "stop" and value == []


def completion(body: dict, state: dict) -> dict:
    """The answer to one /v1/completions body (module docstring); `Refused` for a rule it does not run."""
    import torch

    from specdec.engine.continuous import Job, serve
    from specdec.engine.decode import generate

    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise Refused(f"unknown parameters {unknown}: this server runs only {sorted(KNOWN)}")
    odd = [f"{k}={body[k]!r}" for k in NEUTRAL if k in body and not _neutral(k, body[k])]
    if odd:
        raise Refused(f"rules this server does not run: {', '.join(odd)} (only their neutral values are accepted)")
    if body.get("model", state["name"]) != state["name"]:
        raise Refused(f"model {body.get('model')!r} is not served here (this server serves {state['name']!r})")
    try:
        sampling = Sampling(body.get("temperature", 1.0), top_k=body.get("top_k") or None, top_p=body.get("top_p"))
        spec = Speculation("token", k=state["k"], draft=state["draft"]) if state["draft"] else None
        prompts, n, length, seed, _, _ = check_request(
            [body.get("prompt")], body.get("n", 1), body.get("max_tokens", 16), sampling, spec, body.get("seed") or 0,
            vocab_size=state["vocab"], context=state["context"], methods=("none", "token"), drafted=("token",))
    except (TypeError, ValueError) as exc:
        raise Refused(str(exc)) from None
    rules = dict(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    with state["lock"]:  # one request at a time: the models are shared
        if state["verifier"] is None:
            jobs = [Job(prompt=torch.tensor(prompts[0]), max_new_tokens=length, arrival_s=0.0,
                        seed=stream_seed(seed, j) & MASK) for j in range(n)]
            res = serve(state["target"], jobs, drafter=state["draft_model"], k=state["k"] or 1,
                        max_batch=min(n, MAX_BATCH), **rules)
            rows, steps = [r["tokens"] for r in res.requests], [(st["drafted"], st["accepted"]) for st in res.steps]
        else:  # a wrong rule draws from one generator: the engine's generate, one batch of n rows
            res = generate(state["target"], torch.tensor(prompts * n), drafter=state["draft_model"], k=state["k"],
                           max_new_tokens=length, generator=torch.Generator().manual_seed(seed),
                           verifier=state["verifier"], mode="lean", **rules)
            rows = [t.tolist() for t in res.tokens]
            steps = [(r["k"], r["accepted"]) for r in res.stats.accept_rows()]
    drafted = state["draft"] is not None
    return {"object": "text_completion", "model": state["name"],
            "choices": [{"index": j, "text": "", "token_ids": [int(t) for t in row], "finish_reason": "length"}
                        for j, row in enumerate(rows)],
            "usage": {"prompt_tokens": len(prompts[0]), "completion_tokens": n * length},
            "speculative": {"drafts": sum(d for d, _ in steps) if drafted else 0,
                            "accepted": sum(a for _, a in steps) if drafted else 0}}


def _handler(state: dict):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/health":
                return self._send(200, {"status": "ok"})
            if self.path == "/version":
                return self._send(200, {"server": "specdec", "version": state["version"], "draft": state["draft"],
                                        "k": state["k"], "variant": state["variant"]})
            if self.path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": state["name"], "owned_by": "specdec"}]})
            self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})

        def do_POST(self):  # noqa: N802
            if self.path != "/v1/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not isinstance(body, dict):
                    raise Refused("the body must be a JSON object")
                self._send(200, completion(body, state))
            except (Refused, json.JSONDecodeError, ValueError) as exc:
                self._send(400, {"error": {"message": str(exc), "code": 400}})
            except Exception as exc:  # the engine failed: an answer naming why, never a dropped connection
                self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}", "code": 500}})

        def log_message(self, *args):  # keep the log to start-up and errors
            pass

    return Handler


def _state(target: str, draft: str | None, k: int, variant: str | None) -> dict:
    from importlib.metadata import version

    from specdec.core.rules.variants import VARIANTS
    from specdec.family.loader import load_model
    from specdec.peers.contract import config_limits

    if variant is not None and variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    if variant is not None and draft is None:
        raise SystemExit("a variant is a wrong verifier: it needs --draft")
    model = load_model(target, dtype="float32", device="cpu")
    vocab, context = config_limits(model.config.to_dict())
    return {"name": target, "target": model, "draft": draft, "k": k if draft else 0, "variant": variant,
            "draft_model": load_model(draft, dtype="float32", device="cpu") if draft else None,
            "verifier": VARIANTS[variant].sampled if variant else None, "vocab": vocab, "context": context,
            "lock": threading.Lock(), "version": version("specdec") if _installed() else "source"}


def _installed() -> bool:
    from importlib.metadata import PackageNotFoundError, version
    try:
        version("specdec")
        return True
    except PackageNotFoundError:
        return False


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--target", default="target")
    ap.add_argument("--draft", default=None)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--variant", default=None)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    server = ThreadingHTTPServer((LOOPBACK, a.port), _handler(_state(a.target, a.draft, a.k, a.variant)))
    print(f"serving on http://{LOOPBACK}:{a.port}", flush=True)
    server.serve_forever()


@dataclass
class OwnServer:
    """Our server in a process of its own (module docstring); a context manager."""
    draft: str | None = None
    k: int = 2
    variant: str | None = None
    target: str = "target"
    startup_timeout_s: float = 120.0
    stop_timeout_s: float = 10.0
    log_dir: Path | None = None
    provenance: dict = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return self.provenance["url"]

    def __enter__(self) -> "OwnServer":
        port = free_port()
        cmd = [sys.executable, "-m", "specdec.peers.own_server", "--port", str(port), "--target", self.target]
        if self.draft:
            cmd += ["--draft", self.draft, "--k", str(self.k)]
        if self.variant:
            cmd += ["--variant", self.variant]
        log = Path(self.log_dir or BUILD_DIR / "own-server") / f"server-{port}.log"
        url = f"http://{LOOPBACK}:{port}"
        self.provenance = {"url": url, "command": shlex.join(cmd[1:]), "log": str(log).replace(str(ROOT) + "/", "")}
        self._proc = launch(cmd, log, url, self.provenance, name="our server", cwd=ROOT,
                            timeout_s=self.startup_timeout_s,
                            stop_timeout_s=self.stop_timeout_s)
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; the process reaped.  Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, self.stop_timeout_s)
            self.provenance["stopped"] = True

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    main()
