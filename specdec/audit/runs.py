"""The audit's runs (chapter 10): every configuration of `specdec.audit.design.plan` on every engine, in
stages, with vLLM on one worker process kept across them (`specdec.peers.vllm_session`).

Which tokens a job yields.  Law samples: ``n`` per prompt of the first tokens -- vLLM 2 (x1 from
prefill, one verification step, so its position-1 counter is that step's), ours and Hugging Face 3
(their first step verifies x1 too; 3 keeps k = 2 unclipped), llama.cpp 2 + k (x1 from prefill; its
server drafts at most the tokens left but one; the test reads the first two).  Long outputs: ``n_long`` samples of
``length`` tokens per prompt.  Greedy: one sample of ``greedy_len`` tokens per prompt.  A job's seed
is the stage's; each prompt of an in-process engine has its own stream (`peers.interface.stream_seed`), vLLM its
engine-level seed.  A vLLM row that only reads what ran (a configuration the build may ignore) is
built and inspected, never sampled.

`stage` runs one list of (Config, setting, kind, n, length, seed) jobs: the vLLM ones as one request
on the session (in a thread: it waits on the worker), llama.cpp's in another thread (it waits on its
servers), the in-process ones meanwhile, Hugging Face's assisted generation in ``workers`` processes
of its own (one call per sample).  Nothing here is timed but each lane's busy wall seconds (``lanes``:
where a recompute's budget goes).
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, is_dataclass, replace
from multiprocessing import get_context

import time

import torch

from specdec.audit.design import SETTINGS, Config, NegativeControl

__all__ = ["Job", "stage", "law_length", "greedy_next", "repeatability"]


@dataclass(frozen=True)
class Job:
    cfg: Config
    setting: str
    kind: str  # "law" | "long" | "greedy" | "inspect"
    n: int
    length: int
    seed: int


def law_length(engine: str, k: int = 0) -> int:
    """Tokens per law sample (module docstring); llama.cpp's speculative rows 2 + k (its server
    drafts at most the tokens left but one: asked for 2, it would draft nothing for x2)."""
    if engine == "llama":
        return 2 + k
    return 2 if engine == "vllm" else 3


def _fresh(engine):
    """The adapter without its loaded models (a process of its own loads them again)."""
    return replace(engine, _models={}) if is_dataclass(engine) and hasattr(engine, "_models") else engine


def _run_fresh(engine, args):
    torch.set_num_threads(1)
    return engine.continue_prompts(*args)


def _args(job: Job, prompts) -> tuple:
    return (prompts, job.n, job.length, SETTINGS[job.setting], job.cfg.spec, job.seed)


def stage(jobs: list[Job], engines: dict, prompts, *, session=None, hold: int = 1, kernel_check: bool = False,
          target=None, draft=None, workers: int = 1, parallel: tuple = ("hf",), meanwhile=None,
          lanes: dict | None = None) -> dict:
    """Job -> Continuations for every job whose engine is in ``engines`` (module docstring); vLLM's
    go to ``session`` (a `VLLMSession`; its rows carry the kernel check when asked), negative
    controls run `NegativeControl` on ``target`` and ``draft``.  ``meanwhile``: a callable of no
    arguments run in this thread once the in-process jobs are done, while vLLM's may still run (work
    that needs no result of this stage keeps the second core busy); its exceptions propagate once
    vLLM's jobs have returned (the worker has its own timeout).  ``lanes``: a dict to which the wall
    seconds of the "vllm", "llama" and "in-process" lanes are added (each from the stage's start to
    its last job)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if meanwhile is not None and not callable(meanwhile):
        raise TypeError(f"meanwhile must be a callable of no arguments or None, got {type(meanwhile).__name__}")
    jobs = [j for j in jobs if j.cfg.engine in engines]
    vjobs = [j for j in jobs if j.cfg.engine == "vllm"]
    if vjobs and session is None:
        raise ValueError("vLLM jobs need a VLLMSession")
    ljobs = [j for j in jobs if j.cfg.engine == "llama"]
    local = [j for j in jobs if j.cfg.engine not in ("vllm", "llama")]
    apart = [j for j in local if workers > 1 and j.cfg.engine in parallel and j.cfg.variant is None
             and j.cfg.spec is not None]
    out, lanes, t0 = {}, lanes if lanes is not None else {}, time.perf_counter()

    def done(lane):  # the lane's seconds from the stage's start to now, added
        lanes[lane] = round(lanes.get(lane, 0.0) + time.perf_counter() - t0, 1)

    def timed(lane, fn, *args):
        try:
            return fn(*args)
        finally:
            done(lane)
    with ThreadPoolExecutor(max_workers=2) as pool, \
            ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as procs:
        vtuples = [(*_args(j, prompts), 1, {"patched": j.cfg.patched, "inspect_only": j.kind == "inspect"})
                   for j in vjobs]
        vllm = pool.submit(timed, "vllm", session.run_many, vtuples, hold, kernel_check) if vjobs else None
        llama = pool.submit(timed, "llama", lambda: [engines["llama"].continue_prompts(*_args(j, prompts))
                                                     for j in ljobs]) if ljobs else None
        futures = {j: procs.submit(_run_fresh, _fresh(engines[j.cfg.engine]), _args(j, prompts)) for j in apart}
        for j in local:
            if j in futures:
                continue
            engine = NegativeControl(target, draft, j.cfg.variant) if j.cfg.variant else engines[j.cfg.engine]
            out[j] = engine.continue_prompts(*_args(j, prompts))
        for j, fut in futures.items():
            out[j] = fut.result()
        if local:
            done("in-process")
        if meanwhile is not None:
            meanwhile()
        for j, res in zip(vjobs, vllm.result() if vllm else []):
            out[j] = res
        for j, res in zip(ljobs, llama.result() if llama else []):
            out[j] = res
    return {j: out[j] for j in jobs}


def greedy_next(engines: dict, seed: int):
    """plain_at(engine, prompt, prefix) -> that engine's plain greedy next token after prompt +
    prefix (one call each: used only where a speculative greedy output differs from plain's)."""
    def plain_at(engine: str, prompt, prefix) -> int:
        res = engines[engine].continue_prompts([list(prompt) + list(prefix)], 1, 1, SETTINGS["greedy"], None, seed)
        if res.error:
            raise RuntimeError(res.error)
        return int(res.tokens[0][0][0])
    return plain_at


def repeatability(engine, configs: list[Config], prompts, *, n: int, setting: str, seed: int) -> list[dict]:
    """The same jobs (``n`` law samples per prompt of each configuration, in order, the engine-level
    seed ``seed``) in two fresh vLLM worker processes run side by side: per configuration, how many
    samples differ between the two.  Both processes make the same calls in the same order, so under
    one seed an engine that draws only from its seeded generators repeats them to the token."""
    jobs = [(prompts, n, law_length("vllm"), SETTINGS[setting], c.spec, seed, 1, {"patched": c.patched})
            for c in configs]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each thread only waits on its worker process
        first, second = pool.map(lambda _: engine.run_many(jobs, hold=len(jobs)), range(2))
    rows = []
    for c, a, b in zip(configs, first, second):
        row = {"engine": c.engine, "configuration": c.label, "patched": c.patched, "setting": setting, "seed": seed}
        if a.error or b.error:
            rows.append({**row, "note": a.error or b.error})
            continue
        pairs = [(x, y) for pa, pb in zip(a.tokens, b.tokens) for x, y in zip(pa, pb)]
        rows.append({**row, "samples": len(pairs), "differ": sum(x != y for x, y in pairs), "note": ""})
    return rows
