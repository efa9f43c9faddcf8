"""llama.cpp's ``llama-server``, started and stopped by the project on a loopback address.

`LlamaServer.start(model, draft=None, extra_args=())` picks a free port on 127.0.0.1, starts the
binary `make llama-env` built (``.llama/bin/llama-server``) in a process group of its own with its
log in a file, polls ``GET /health`` until it answers 200 within ``startup_timeout_s`` and returns
the base URL; the process exiting first, or the timeout, raises `ServerFailed` with the log's last
lines (and the group is killed).  `stop` sends the group SIGTERM, then SIGKILL after
``stop_timeout_s``; it is idempotent, and the context manager calls it whatever happens inside the
block.  `post` sends one JSON request with ``request_timeout_s`` on one kept-alive connection (a
new connection per request pays TCP set-up and delayed acknowledgement, which can exceed a short
request's own work).

Flags always given: ``-m <model> --host 127.0.0.1 --port <free> -t <threads> -tb <threads>
-c <ctx x parallel> -np <parallel> --no-webui`` (``parallel`` slots of ``ctx`` tokens each: the server
decodes the requests in flight as one batch, each with its own sampler and seed), and ``-md <draft>`` when a draft is named; ``extra_args`` follow
(sampling and speculation flags are the caller's).  `provenance` records the URL, the command line,
the log path, the start-up seconds and the build record of ``.llama/build_info.json``.

Example:
    with LlamaServer() as server:
        server.start(Path("target.gguf"), extra_args=["-ctk", "f32", "-ctv", "f32", "-fa", "off"])
        server.post("/completion", {"prompt": [11, 12], "n_predict": 1, "n_probs": 5})
"""
from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import httpx

from specdec.io.paths import BUILD_DIR, ROOT
from specdec.peers.interface import as_int
from specdec.peers.process import LOOPBACK, ServerFailed, free_port, launch, stop_group

__all__ = ["LLAMA_DIR", "LLAMA_SERVER", "LOOPBACK", "LlamaServer", "LlamaUnavailable", "ServerFailed", "build_info"]

LLAMA_DIR = ROOT / ".llama"                      # `make llama-env` builds here
LLAMA_SERVER = LLAMA_DIR / "bin" / "llama-server"


class LlamaUnavailable(RuntimeError):
    """The llama-server binary is missing: `make llama-env` builds it."""


def build_info(llama_dir: Path = LLAMA_DIR) -> dict:
    """The build record `make llama-env` wrote beside the binary ({} when there is none)."""
    try:
        return json.loads((Path(llama_dir) / "build_info.json").read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class LlamaServer:
    """One llama-server process (module docstring)."""
    binary: Path = LLAMA_SERVER
    threads: int = 1          # one thread, as every engine in chapter 10's speed comparison
    ctx: int = 512            # per slot: the embedded family's n_positions
    parallel: int = 1         # slots (requests decoded together)
    startup_timeout_s: float = 60.0
    request_timeout_s: float = 60.0
    stop_timeout_s: float = 10.0
    log_dir: Path | None = None  # default build/llama-server/
    provenance: dict = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _client: httpx.Client | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return self.provenance["url"]

    def command(self, port: int, model: Path, draft: Path | None = None, extra_args: Sequence[str] = ()) -> list[str]:
        as_int("parallel (llama-server's slots)", self.parallel, low=1)
        cmd = [str(self.binary), "-m", str(model), "--host", LOOPBACK, "--port", str(port), "-t", str(self.threads),
               "-tb", str(self.threads), "-c", str(self.ctx * self.parallel), "-np", str(self.parallel), "--no-webui"]
        if draft is not None:
            cmd += ["-md", str(draft)]
        return cmd + [str(a) for a in extra_args]

    def start(self, model: Path, draft: Path | None = None, extra_args: Sequence[str] = ()) -> str:
        """Start the server on `model` (and `draft`); the base URL once it is healthy."""
        if self._proc is not None:
            raise RuntimeError("this LlamaServer is already running: stop it first")
        if not Path(self.binary).exists():
            raise LlamaUnavailable(f"{self.binary} does not exist: build it with `make llama-env`")
        port = free_port()
        cmd = self.command(port, Path(model), None if draft is None else Path(draft), extra_args)
        log_dir = Path(self.log_dir or BUILD_DIR / "llama-server")
        log = log_dir / f"server-{port}.log"
        url = f"http://{LOOPBACK}:{port}"
        here = str(ROOT) + "/"
        self.provenance = {"url": url, "command": shlex.join(cmd).replace(here, ""), "threads": self.threads,
                           "log": str(log).replace(here, ""), "build": build_info(Path(self.binary).parent.parent)}
        self._proc = launch(cmd, log, url, self.provenance, name="llama-server", cwd=log_dir,
                            timeout_s=self.startup_timeout_s,
                            stop_timeout_s=self.stop_timeout_s)
        self._client = httpx.Client(timeout=self.request_timeout_s)
        return url

    def post(self, path: str, payload: dict) -> dict:
        """POST `payload` as JSON to `path`; the decoded answer (an HTTP error raises; a connection the
        server dropped before answering is retried once)."""
        if self._proc is None:
            raise RuntimeError("the server is not running: call start first")
        try:
            response = self._client.post(self.url + path, json=payload)
        except httpx.RemoteProtocolError:
            # the server closed a kept-alive connection as the request went out (cpp-httplib closes one
            # idle for 5 s): sent once more on a fresh connection.  The transport, never a sample's value,
            # triggers the retry, so it cannot bias what a law test counts; a second failure raises.
            response = self._client.post(self.url + path, json=payload)
        response.raise_for_status()
        return response.json()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after ``stop_timeout_s``; the process reaped.  Idempotent."""
        proc, self._proc = self._proc, None
        client, self._client = self._client, None
        if client is not None:
            client.close()
        if proc is None:
            return
        stop_group(proc, self.stop_timeout_s)
        self.provenance["stopped"] = True

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
