"""The upstream reproducers of `reproducers/vllm-cpu-expand/` (vllm-project/vllm issue #55005, fix
PR #55006) run as their readers will run them: `.venv-vllm/bin/python -I SCRIPT`, each in a
subprocess of its own session with no PYTHONPATH, from an empty temporary folder; the three runs go
side by side and are killed (each whole process group) past one shared timeout.

`kernel_check.py` must exit 0 and report the three dtypes with int64 expanded correctly and a
boolean ``affected``; on vllm-cpu 0.32.0 ``affected`` must be true.  `law_check.py` (N = 600, the
default T = 1 probabilistic drafts; its docstring states the power) must exit 0; its plain-decoding
control and its ``--patched`` speculative run must be consistent with the target law at level 0.01,
and the shipped speculative run must be rejected exactly when kernel_check says the installed vLLM
is affected: on a future vLLM with the fix, the shipped assertion fails saying so (the reproducer's
README is then out of date), it does not pass or fail silently.  Each verdict is a level-0.01 test
on seeded draws: reproducible on one machine, a 1 % false rejection on a fresh draw elsewhere.

Skipped only when `.venv-vllm` is missing (`make vllm-env`)."""

import json
import os
import signal
import subprocess
import time

import pytest

from specdec.io.paths import ROOT
from specdec.peers.vllm import VLLM_VENV

PYTHON = VLLM_VENV / "bin" / "python"
FOLDER = ROOT / "reproducers" / "vllm-cpu-expand"
KNOWN_AFFECTED = {"0.32.0"}  # vllm-cpu releases whose expand_kernel CPU shim discards its output
N = 600  # law_check's samples per run: the shipped bug is rejected by orders of magnitude (README)
TIMEOUT_S = 240  # for the three runs together: generous, vLLM's start-up dominates

pytestmark = [pytest.mark.skipif(not PYTHON.exists(), reason=f"{VLLM_VENV} is missing: build it with `make vllm-env`"),
              pytest.mark.xdist_group("vllm_reproducers")]  # one worker: the module's three runs start once


def _start(script: str, args: list[str], cwd, log) -> subprocess.Popen:
    """`PYTHON -I script args` in ``cwd``, in a session of its own, without PYTHONPATH, its stdout
    and stderr to the file ``log`` (a file, not a pipe: the runs go on side by side, unread)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    with open(log, "w") as f:
        return subprocess.Popen([str(PYTHON), "-I", str(FOLDER / script), *args], cwd=cwd, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: vLLM may leave helpers behind
    except ProcessLookupError:
        pass


def _finish(name: str, proc: subprocess.Popen, deadline: float, log, json_path) -> tuple[dict, str]:
    """(the JSON it wrote, its stdout + stderr) once ``proc`` exits 0; the test fails if it runs past
    ``deadline`` (time.monotonic(); it is then killed), exits non-zero or writes no JSON."""
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
        out = log.read_text(errors="replace")
        pytest.fail(f"{name} ran past its timeout and was killed; its output ends:\n{out[-4000:]}")
    finally:
        _kill(proc)
    out = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out[-4000:]}"
    assert json_path.exists(), f"{name} exited 0 but wrote no JSON; its output ends:\n{out[-4000:]}"
    return json.loads(json_path.read_text()), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs, started together (each is mostly vLLM's single-threaded start-up):
    {"kernel" | "shipped" | "patched": (JSON result, output)}."""
    cwd = tmp_path_factory.mktemp("reproducers")
    jobs = {"kernel": ("kernel_check.py", []),
            "shipped": ("law_check.py", ["--n", str(N)]),
            "patched": ("law_check.py", ["--n", str(N), "--patched", "--no-control"])}
    procs = {key: _start(script, args + ["--json", f"{key}.json"], cwd, cwd / f"{key}.log")
             for key, (script, args) in jobs.items()}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        return {key: _finish(" ".join([jobs[key][0], *jobs[key][1]]), proc, deadline, cwd / f"{key}.log",
                             cwd / f"{key}.json") for key, proc in procs.items()}
    finally:
        for proc in procs.values():
            _kill(proc)


@pytest.fixture(scope="module")
def kernel(runs):
    return runs["kernel"]


def test_kernel_check_reports_three_dtypes_and_whether_vllm_is_affected(kernel):
    result, out = kernel
    cases = {c["dtype"]: c for c in result["cases"]}
    assert set(cases) == {"float32", "int32", "int64"}, result
    assert cases["int64"]["correct"] and cases["int64"]["output"] == [50, 50, 20, 20], cases["int64"]
    assert cases["float32"]["expected"] == pytest.approx([0.7, 0.7, 1.0, 1.0])
    assert cases["int32"]["expected"] == [50, 50, 20, 20]
    assert isinstance(result["affected"], bool) and isinstance(result["has_triton"], bool)
    assert result["affected"] == (not all(c["correct"] for c in cases.values()))
    assert f"vLLM {result['vllm']}" in out
    if result["vllm"] in KNOWN_AFFECTED and not result["has_triton"]:
        assert result["affected"], f"vLLM {result['vllm']}'s CPU shim is known to discard expand_kernel's output"


def test_law_check_rejects_the_shipped_build_exactly_when_affected_and_passes_the_patch(runs):
    affected, version = runs["kernel"][0]["affected"], runs["kernel"][0]["vllm"]
    (shipped, out), (patched, out_p) = runs["shipped"], runs["patched"]
    assert shipped["vllm"] == patched["vllm"] == version
    assert not shipped["patched"] and patched["patched"] and shipped["n"] == patched["n"] == N
    assert "decision (speculative run):" in out and "decision (speculative run):" in out_p
    control = shipped["runs"]["control"]
    assert control["consistent"], f"vLLM {version}'s plain decoding failed the law test (the harness?): {control}"
    assert control["acceptance"] is None and "control" not in patched["runs"]
    fixed = patched["runs"]["speculative"]
    assert fixed["consistent"] and fixed["impossible"] == 0, f"the patched run failed the law test: {fixed}"
    assert abs(fixed["acceptance"]["z"]) < 4, f"patched acceptance off its exact expectation: {fixed['acceptance']}"
    spec = shipped["runs"]["speculative"]
    verdict = "rejected" if not spec["consistent"] else "consistent"
    assert (not spec["consistent"]) == affected, (
        f"kernel_check says vLLM {version} is {'' if affected else 'not '}affected, but law_check's shipped "
        f"speculative run is {verdict} (p = {spec['p_value']:.3g}, binned TV {spec['binned_tv']:.3f})"
        + ("" if affected else ": the bug no longer reproduces; update reproducers/vllm-cpu-expand/README.md"))
