"""vLLM behind `specdec.peers.Engine`, run in its own environment as its offline users run it.

The main environment never imports vllm (an import-linter contract): vLLM's CPU build pins a torch
and a transformers of its own, so it lives in `.venv-vllm` (`make vllm-env`). This module writes
a JSON request, runs `vllm_worker.py` with `.venv-vllm/bin/python` in a subprocess of its own
process group, waits at most `timeout_s`, kills the whole group on a timeout (and always at the end:
vLLM spawns helper processes), and reads the JSON result back into `Continuations`.

The model vLLM loads is a folder under `build/vllm-models/<member>/` of symlinks to the member's
checked files (`data/models/<member>/`: config, generation config, safetensors) with the family's
tokenizer files beside them, the layout `vllm.LLM(model=folder)` expects.

`Speculation` -> vLLM's `speculative_config`:
  - None / "none": plain decoding (the control);
  - "draft_model": {"method": "draft_model", "model": <draft folder>, "num_speculative_tokens": k};
  - "ngram": prompt lookup, {"prompt_lookup_min": 1, "prompt_lookup_max": 3} unless options say;
  - any other method (e.g. "suffix"): {"method": m, "num_speculative_tokens": k};
  - `options` are added as they are (e.g. ("draft_sample_method", "probabilistic"),
    ("rejection_sample_method", "block")); the worker refuses a method, option or value the installed
    vLLM does not declare with a row "not available in vLLM X.Y.Z", never a crash.

Process knobs (recorded in each row's provenance): `threads` OpenMP threads without core binding
(`VLLM_CPU_OMP_THREADS_BIND=nobind`: the cores are shared with other work), `kv_cache_gib` of KV
cache (`VLLM_CPU_KVCACHE_SPACE`, whole GiB), and `multiprocessing` (vLLM's
`VLLM_ENABLE_V1_MULTIPROCESSING`): off by default, so the engine core runs in the worker's process
instead of two spawned ones; the scheduler, model runner and samplers are the same code either way,
and start-up is several times shorter on a small CPU.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specdec.family.loader import embedded_dir
from specdec.family.manifest import verify_dir
from specdec.peers.contract import check_options, check_request, config_limits
from specdec.peers.interface import Continuations, Sampling, Speculation
from specdec.io.paths import BUILD_DIR, MODELS_DIR, ROOT

__all__ = ["VLLM_VENV", "WORKER", "VLLMUnavailable", "VLLMEngine", "model_folder", "speculative_config",
           "ignored_options"]

VLLM_VENV = ROOT / ".venv-vllm"
WORKER = Path(__file__).with_name("vllm_worker.py")
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class VLLMUnavailable(RuntimeError):
    """The vLLM environment is missing: `make vllm-env` builds it."""


def model_folder(member: str, root: Path | None = None) -> Path:
    """A folder vLLM can load for an embedded family member (checked against SHA256SUMS first).

    Example: model_folder("draft-distilled") -> build/vllm-models/draft-distilled/ holding
    config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json.
    """
    name = embedded_dir(member)
    if name is None:
        raise ValueError(f"{member!r} is not a member of the embedded family (vLLM runs the embedded pair)")
    verify_dir(MODELS_DIR / name)
    folder = Path(root or BUILD_DIR / "vllm-models") / name
    folder.mkdir(parents=True, exist_ok=True)
    sources = [MODELS_DIR / name / f for f in MODEL_FILES] + [MODELS_DIR / f for f in TOKENIZER_FILES]
    for src in sources:
        link = folder / src.name
        if link.is_symlink() or link.exists():
            if link.resolve() == src.resolve():
                continue
            link.unlink(missing_ok=True)
        try:
            link.symlink_to(src.resolve())
        except FileExistsError:  # another process (a parallel test) made it first: it must be the same link
            if link.resolve() != src.resolve():
                raise
    return folder


def speculative_config(spec: Speculation | None, folder_of=model_folder) -> dict | None:
    """vLLM's `speculative_config` for a `Speculation` (None for plain decoding); see the module doc."""
    if spec is None or spec.method == "none":
        return None
    if spec.k < 1:
        raise ValueError(f"speculation {spec.method!r} needs k >= 1 drafted tokens, got k={spec.k}")
    config = {"method": spec.method, "num_speculative_tokens": spec.k}
    if spec.method == "draft_model":
        if not spec.draft:
            raise ValueError("method 'draft_model' needs a draft: Speculation(..., draft='draft-distilled')")
        config["model"] = str(folder_of(spec.draft))
    elif spec.draft:
        raise ValueError(f"method {spec.method!r} takes no draft model (got draft={spec.draft!r})")
    if spec.method == "ngram":
        config.update(prompt_lookup_min=1, prompt_lookup_max=3)  # the lookup vLLM's docs show
    config.update(dict(spec.options))
    return config


def ignored_options(config: dict | None, what_ran: dict | None) -> list[str]:
    """The requested options of a `speculative_config` that the running vLLM did not execute, read
    against `vllm_patch.what_ran`: "draft_sample_method=probabilistic" where the drafter kept no
    draft probabilities, "rejection_sample_method=<m>" where the rejection sampler ran another rule.
    Raises where what ran is unknown (the row cannot say what it tested)."""
    if not config:
        return []
    if not what_ran:
        raise ValueError("what ran is unknown: the worker reported no what_ran for this row")
    out = []
    drafting = config.get("draft_sample_method")
    if drafting is not None and what_ran.get("draft_sampling") not in (drafting, "lookup"):
        out.append(f"draft_sample_method={drafting}")
    rule = config.get("rejection_sample_method")
    if rule is not None and what_ran.get("rejection") != rule:
        out.append(f"rejection_sample_method={rule}")
    return out


@dataclass
class VLLMEngine:
    """vLLM's offline `LLM`, one engine-level seed per configuration, ids in and ids out."""
    timeout_s: float = 600.0  # one worker call, all its configurations; then the group is killed
    threads: int = 2  # the machine's cores; unbound, they are shared
    kv_cache_gib: int = 1  # the smallest whole GiB: ~20k tokens of the embedded target's cache
    multiprocessing: bool = False  # see the module doc
    max_model_len: int = 512  # the embedded models' n_positions
    target: str = "target"
    python: Path | None = None  # default .venv-vllm/bin/python
    worker: Path | None = None  # default vllm_worker.py (tests point it at a fake)
    name: str = "vllm"

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        return self.run_many([(prompts, n, max_new_tokens, sampling, spec, seed)])[0]

    def run_many(self, jobs: list[tuple], hold: int = 1, kernel_check: bool = False) -> list[Continuations]:
        """Several `continue_prompts` argument tuples in ONE worker process (vLLM's start-up shared;
        jobs of one configuration share its LLM while it is one of the ``hold`` most recently used).
        A tuple may carry a 7th element, ``repeats``: the worker then times that many generate calls
        (``generate_each_s`` in the row's provenance; tokens and counters are the first call's), and
        an 8th, a dict of run options: ``patched`` (vLLM's expand replaced by the project's,
        `vllm_patch`), ``inspect_only`` (build, read what ran, no tokens) and ``profile`` (one more
        call under torch's CPU profiler: ``profile`` in the row's provenance).  Every row's
        provenance holds ``what_ran`` (`vllm_patch.what_ran`) and ``patched``; with ``kernel_check``
        the worker first runs `vllm_patch.kernel_check`, kept in every row's provenance."""
        runs = self.requests(jobs, hold)  # bad requests are refused before anything else
        python = self.interpreter()
        with tempfile.TemporaryDirectory(prefix="specdec-vllm-") as tmp:
            request, result, log = Path(tmp, "request.json"), Path(tmp, "result.json"), Path(tmp, "log.txt")
            request.write_text(json.dumps({"runs": runs, "hold": int(hold), "kernel_check": bool(kernel_check)}))
            start = time.perf_counter()
            failure = self._execute(python, request, result, log)
            wall = time.perf_counter() - start
            out = json.loads(result.read_text()) if result.exists() else {"runs": []}
        return self.rows(runs, out, failure, wall, kernel_check)

    def interpreter(self) -> Path:
        """.venv-vllm's python (or ``python``); VLLMUnavailable when it is missing."""
        python = Path(self.python or VLLM_VENV / "bin" / "python")
        if not python.exists():
            raise VLLMUnavailable(f"the vLLM environment is missing ({python} does not exist): "
                                  "build it with `make vllm-env`")
        return python

    def requests(self, jobs: list[tuple], hold: int) -> list[dict]:
        """The worker's run dicts of `run_many`'s job tuples, every one checked before a process starts."""
        if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
            raise ValueError(f"hold must be an int >= 1 LLM, got {hold!r}")
        return [self._run(*job) for job in jobs]

    def environment(self) -> dict:
        """The worker's environment (module docstring's process knobs)."""
        return {**os.environ, "OMP_NUM_THREADS": str(self.threads), "VLLM_CPU_OMP_THREADS_BIND": "nobind",
                "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib), "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "1" if self.multiprocessing else "0"}

    def rows(self, runs: list[dict], out: dict, failure: str | None, wall: float,
             kernel_check: bool = False) -> list[Continuations]:
        """One `Continuations` per run from the worker's result ``out`` (a run with no row: ``failure``)."""
        rows = []
        for i, run in enumerate(runs):
            got = out["runs"][i] if i < len(out["runs"]) else None
            provenance = {"engine": self.name, "versions": out.get("versions", {}),
                          "speculative_config": run["speculative_config"], "sampling": run["sampling"],
                          "seed": run["seed"], "threads": self.threads, "kv_cache_gib": self.kv_cache_gib,
                          "multiprocessing": self.multiprocessing, "process_wall_s": wall,
                          "import_s": out.get("import_s"), "patched": bool(run.get("patched")),
                          "what_ran": (got or {}).get("what_ran"), **((got or {}).get("timings", {}))}
            if kernel_check:
                provenance["kernel_check"] = out.get("kernel_check")
            if got and (got.get("profile") or got.get("profile_error")):
                provenance["profile"] = got.get("profile")  # `specdec.measure.step_split.vllm_split` reads it
                provenance["profile_error"] = got.get("profile_error")
            if got and got.get("traceback"):
                provenance["traceback"] = got["traceback"]  # where vLLM raised, for the row's diagnosis
            if got is None:
                rows.append(Continuations([], {}, provenance, failure or "the vLLM worker returned no row"))
            else:
                rows.append(Continuations(got["tokens"], got["counters"], provenance, got["error"], got.get("steps")))
        return rows

    def _run(self, prompts, n, max_new_tokens, sampling: Sampling, spec, seed, repeats: int = 1,
             options: dict | None = None) -> dict:
        # the contract (specdec.peers.contract), before any process starts: V from the folder's config.json,
        # the context the smaller of max_model_len and the model's; any method name (the worker refuses one
        # vLLM lacks with a row); the n-gram options checked as vLLM gets them (defaults filled in)
        vocab, context = config_limits(json.loads((model_folder(self.target) / "config.json").read_text()))
        prompts, n, max_new_tokens, seed, _, _ = check_request(
            prompts, n, max_new_tokens, sampling, spec, seed, vocab_size=vocab,
            context=min(self.max_model_len, context or self.max_model_len), drafted=("draft_model",))
        check_options(spec.method if spec else "none", speculative_config(spec, folder_of=str) or {})
        if int(repeats) < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        options = dict(options or {})
        if set(options) - {"patched", "inspect_only", "profile"}:
            raise ValueError(f"run options are 'patched', 'inspect_only' and 'profile', got {sorted(options)}")
        return {"model": str(model_folder(self.target)), "seed": int(seed), "max_model_len": self.max_model_len,
                "repeats": int(repeats), "patched": bool(options.get("patched")),
                "inspect_only": bool(options.get("inspect_only")), "profile": bool(options.get("profile")),
                "speculative_config": speculative_config(spec), "prompts": [list(map(int, p)) for p in prompts],
                "sampling": {"n": int(n), "temperature": float(sampling.temperature), "top_k": sampling.top_k,
                             "top_p": sampling.top_p, "max_tokens": int(max_new_tokens)}}

    def _execute(self, python: Path, request: Path, result: Path, log: Path) -> str | None:
        """Run the worker; None when it exited 0, else why it did not (timeout or exit status + log tail)."""
        env = self.environment()
        with open(log, "w") as out:
            # -I: the script's folder is not put on sys.path (its vllm.py would shadow vllm)
            proc = subprocess.Popen([str(python), "-I", str(self.worker or WORKER), str(request), str(result)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=request.parent,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                kill_group(proc)
        if rc is None:
            return f"timed out: the vLLM worker was killed after {self.timeout_s:g} s"
        if rc != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            return f"the vLLM worker exited with status {rc}: " + " | ".join(tail)
        return None


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's process group (vLLM's spawned processes included) and reap the worker."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
