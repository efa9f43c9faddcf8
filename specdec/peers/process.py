"""A server process the project starts on the loopback address: one way to wait for it, read its
log and stop it, shared by every server adapter (vLLM's, llama.cpp's).

The process runs in a session (process group) of its own, so that `stop_group` reaches its children
too (vLLM's engine core, for one): SIGTERM, then SIGKILL after ``timeout_s`` whatever the process did,
then reaped.  `wait_healthy` polls ``GET <url>/health`` until it answers 200; the process exiting
first, or ``timeout_s`` passing, raises `ServerFailed` with the log's last lines (the caller stops
the group).

`launch` does both for a server: start, wait, and stop the group if it never comes up.

Example: ``proc = launch(cmd, log, url, provenance, name="llama-server", timeout_s=60, stop_timeout_s=10,
cwd=log.parent)``; ...; ``stop_group(proc, 10)``.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

__all__ = ["LOOPBACK", "ServerFailed", "free_port", "tail", "wait_healthy", "launch", "signal_group", "stop_group"]

LOOPBACK = "127.0.0.1"


class ServerFailed(RuntimeError):
    """The server did not come up (or died): the message holds why and the log's last lines."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port free on ``host`` now (the kernel's pick; a race with another process is possible
    and shows as a server that fails to bind, which `wait_healthy` reports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 8) -> str:
    """The last ``lines`` lines of a log, joined by " | " ("(no log)" when it cannot be read)."""
    try:
        return " | ".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, *, timeout_s: float, name: str,
                 poll_s: float = 0.2) -> float:
    """Block until ``<url>/health`` answers 200; the seconds waited.  Raises `ServerFailed` when the
    process exits first or ``timeout_s`` passes (the process is left to the caller to stop)."""
    start = time.perf_counter()
    while True:
        if proc.poll() is not None:
            raise ServerFailed(f"{name} exited with status {proc.returncode} before it was healthy: {tail(log)}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return time.perf_counter() - start
        except httpx.TransportError:
            pass
        if time.perf_counter() - start > timeout_s:
            raise ServerFailed(f"{name} was not healthy after {timeout_s:g} s (then stopped): {tail(log)}")
        time.sleep(poll_s)


def launch(cmd: list[str], log: Path, url: str, provenance: dict, *, name: str, timeout_s: float,
           stop_timeout_s: float, cwd: Path, env: dict | None = None, poll_s: float = 0.2) -> subprocess.Popen:
    """The process of ``cmd``, started in a session of its own with stdout and stderr to ``log``
    (written from scratch), once ``<url>/health`` answers 200 (`wait_healthy`); its start-up seconds
    go to ``provenance["startup_s"]``.  A failure to come up stops the group (`stop_group`) and sets
    ``provenance["stopped"]`` before `ServerFailed` propagates."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
    try:
        provenance["startup_s"] = wait_healthy(proc, url, log, timeout_s=timeout_s, name=name, poll_s=poll_s)
    except BaseException:
        stop_group(proc, stop_timeout_s)
        provenance["stopped"] = True
        raise
    return proc


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the process's group (a group already gone is not an error)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM the group, SIGKILL it after ``timeout_s`` (children included, whatever the process did),
    and reap the process."""
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    signal_group(proc, signal.SIGKILL)
    proc.wait()
