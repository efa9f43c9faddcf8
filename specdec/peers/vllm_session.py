"""One vLLM worker process kept across several requests: a design whose second stage depends on the
first stage's results runs both on the same process and the same built LLMs.

`VLLMSession(engine)` starts `vllm_worker.py --session` with the engine's interpreter and
environment, in a process group of its own, its output in a log file.  `run_many` has
`VLLMEngine.run_many`'s contract: it writes the request, hands its path to the worker, and waits
for the worker to mark the result done, at most the engine's ``timeout_s`` per request; a worker that
exits or runs out of time is killed with its group, and the rows it did not finish carry why.  The
LLMs a request leaves held (its ``hold``) serve the next request.  `close` (or leaving the ``with``
block) ends the input and kills the group: nothing the session started outlives it.

Example:
    with VLLMSession(VLLMEngine()) as s:
        first = s.run_many(jobs, hold=4)
        second = s.run_many(more_jobs, hold=4)   # the same process and LLMs
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from specdec.peers.interface import Continuations
from specdec.peers.vllm import WORKER, VLLMEngine, kill_group

__all__ = ["VLLMSession"]


class VLLMSession:
    def __init__(self, engine: VLLMEngine, poll_s: float = 0.2):
        self.engine, self.poll_s = engine, poll_s
        self._tmp = tempfile.TemporaryDirectory(prefix="specdec-vllm-session-")
        self.dir = Path(self._tmp.name)
        self.log = self.dir / "log.txt"
        self._count, self.proc = 0, None
        python = engine.interpreter()
        out = open(self.log, "w")
        try:  # -I: the script's folder is not put on sys.path (its vllm.py would shadow vllm)
            self.proc = subprocess.Popen([str(python), "-I", str(engine.worker or WORKER), "--session"],
                                         stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True,
                                         env=engine.environment(), cwd=self.dir, start_new_session=True)
        finally:
            out.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "proc", None) is not None:
            kill_group(self.proc)

    @property
    def name(self) -> str:
        return self.engine.name

    def continue_prompts(self, prompts, n: int, max_new_tokens: int, sampling, spec, seed: int) -> Continuations:
        """`specdec.peers.Engine`'s call, on the session's worker (its held LLMs kept)."""
        return self.run_many([(prompts, n, max_new_tokens, sampling, spec, seed)], hold=8)[0]

    def run_many(self, jobs: list[tuple], hold: int = 1, kernel_check: bool = False) -> list[Continuations]:
        runs = self.engine.requests(jobs, hold)
        self._count += 1
        request, result = self.dir / f"request{self._count}.json", self.dir / f"result{self._count}.json"
        request.write_text(json.dumps({"runs": runs, "hold": int(hold), "kernel_check": bool(kernel_check),
                                       "result": str(result)}))
        start, failure = time.perf_counter(), None
        if self.proc is None or self.proc.poll() is not None:
            failure = "the vLLM session's worker is not running: " + self._tail()
        else:
            try:
                self.proc.stdin.write(f"{request}\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                failure = "the vLLM session's worker closed its input: " + self._tail()
        done = Path(f"{result}.done")
        while failure is None and not done.exists():
            if self.proc.poll() is not None:
                failure = f"the vLLM worker exited with status {self.proc.returncode}: " + self._tail()
            elif time.perf_counter() - start > self.engine.timeout_s:
                failure = f"timed out: the vLLM worker was killed after {self.engine.timeout_s:g} s"
                kill_group(self.proc)
                self.proc = None
            else:
                time.sleep(self.poll_s)
        out = json.loads(result.read_text()) if result.exists() else {"runs": []}
        return self.engine.rows(runs, out, failure, time.perf_counter() - start, kernel_check)

    def _tail(self) -> str:
        return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-5:])

    def close(self) -> None:
        """End the worker's input, give it a moment to shut its LLMs down, then kill its group."""
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
            kill_group(self.proc)
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
