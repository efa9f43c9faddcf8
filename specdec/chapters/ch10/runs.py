"""Chapter 10's runs: every configuration of `specdec.chapters.ch10.audit.plan` on every engine,
the law and acceptance samples and the greedy comparison (the timing: `specdec.chapters.ch10.speed`).

Which tokens a run yields.  Sampled settings: ``n`` samples of the first tokens per prompt
(``n_hf`` for Hugging Face's assisted generation, which decodes one sample per call); vLLM gets
max_new_tokens 2 (x1 from prefill, one verification step, so its position-1 counter is that step's
exactly), ours and Hugging Face 3 (their first step verifies x1 too; 3 keeps k = 2 unclipped).
Greedy: one sample of ``greedy_len`` tokens per prompt.  vLLM's jobs run in one worker process,
ordered so that consecutive jobs share an LLM.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import is_dataclass, replace
from multiprocessing import get_context

import torch

from specdec.chapters.ch10.audit import SETTINGS, Config, NegativeControl, law_rows
from specdec.peers.interface import Continuations

__all__ = ["collect", "with_followups", "greedy_next"]


def _tokens(engine: str) -> int:
    return 2 if engine == "vllm" else 3


def _fresh(engine):
    """The adapter without its loaded models (a process of its own loads them again)."""
    return replace(engine, _models={}) if is_dataclass(engine) and hasattr(engine, "_models") else engine


def _run_fresh(engine, job) -> Continuations:
    torch.set_num_threads(1)
    return engine.continue_prompts(*job)


def collect(configs: list[Config], engines: dict, prompts, *, n: int, n_hf: int, greedy_len: int, seed: int,
            target=None, draft=None, settings=None, workers: int = 1, parallel: tuple = ("hf",)) -> dict:
    """(Config, setting) -> Continuations for every configuration at every setting (module
    docstring): the sampled settings' first tokens and one greedy sample of ``greedy_len`` tokens
    per prompt (negative controls: sampled settings only).  ``engines`` maps "ours" / "hf" / "vllm"
    to an adapter (a missing engine: no rows); ``settings``: only these setting names (default all);
    negative controls run `NegativeControl` on ``target`` and ``draft``; every vLLM job runs in one
    worker process, one configuration's jobs together, started first and run while the in-process
    engines sample.  With ``workers`` > 1 the jobs of the engines in ``parallel`` (Hugging Face's:
    one call per sample) run in that many processes of their own, each loading the models again,
    one torch thread each; their tokens are the same (every call is seeded by its job).  Nothing
    here is timed; the engines' own clocks count the overlap."""
    out, vjobs, local = {}, [], []
    for cfg in configs:
        if cfg.engine not in engines:
            continue
        for name, s in SETTINGS.items():
            if settings is not None and name not in settings:
                continue
            if s.temperature == 0 and cfg.role == "negative control":
                continue
            size = 1 if s.temperature == 0 else n_hf if (cfg.engine == "hf" and cfg.spec is not None) else n
            length = greedy_len if s.temperature == 0 else _tokens(cfg.engine)
            job = (prompts, size, length, s, cfg.spec, seed)
            (vjobs if cfg.engine == "vllm" else local).append(((cfg, name), job))
    if int(workers) < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    apart = [(key, job) for key, job in local if int(workers) > 1 and key[0].engine in parallel
             and key[0].variant is None]
    with ThreadPoolExecutor(max_workers=1) as pool, \
            ProcessPoolExecutor(max_workers=int(workers), mp_context=get_context("spawn")) as procs:
        # the vLLM worker is a subprocess: this thread only waits for it
        vllm = pool.submit(engines["vllm"].run_many, [j for _, j in vjobs]) if vjobs else None
        futures = {key: procs.submit(_run_fresh, _fresh(engines[key[0].engine]), job) for key, job in apart}
        for (cfg, name), job in local:
            if (cfg, name) in futures:
                continue
            engine = NegativeControl(target, draft, cfg.variant) if cfg.variant is not None else engines[cfg.engine]
            out[(cfg, name)] = engine.continue_prompts(*job)
        for key, fut in futures.items():
            out[key] = fut.result()
        for (key, _), res in zip(vjobs, vllm.result() if vllm else []):
            out[key] = res
    return {key: out[key] for key in [k for k, _ in local] + [k for k, _ in vjobs]}


def with_followups(rows: list[dict], configs: list[Config], engines: dict, prompts, contexts: dict, *,
                   lead_p: float, factor: int, n: int, n_hf: int, seed: int, target=None, draft=None,
                   workers: int = 1, **test) -> list[dict]:
    """The law rows with every lead decided: a rejection with lead_p < p <= the level and no
    impossible token (a lead, which chance gives about once in 1 / level tests) is run once more
    with a fresh seed (``seed``) and ``factor`` times the samples, and that run decides the row
    (status, p-value, power, TV, diagnosis); the first run's p-value and n stay in ``first_p`` and
    ``first_n``.  ``test``: `law_rows`' keywords (alpha, eps, n_bins).  Stated before the results."""
    by_key = {(c.engine, c.label): c for c in configs}
    out = []
    for r in rows:
        lead = (r.get("status") == "reject" and r["p_value"] > lead_p and not r.get("impossible")
                and (r["engine"], r["configuration"]) in by_key)
        if not lead:
            out.append({**r, "first_p": math.nan, "first_n": math.nan})
            continue
        cfg = by_key[(r["engine"], r["configuration"])]
        again = collect([cfg], engines, prompts, n=n * factor, n_hf=n_hf * factor, greedy_len=1, seed=seed,
                        target=target, draft=draft, settings=(r["setting"],), workers=workers)
        f = law_rows(again, contexts, **test)[0]
        words = f"{f['verdict']} (follow-up of a first run with p = {r['p_value']:.2g}: fresh seed, {factor}x samples)"
        out.append({**r, **f, "verdict": words, "first_p": r["p_value"], "first_n": r["n"]})
    return out


def greedy_next(engines: dict, seed: int):
    """plain_at(engine, prompt, prefix) -> that engine's plain greedy next token after prompt +
    prefix (one call each: used only where a speculative greedy output differs from plain's)."""
    def plain_at(engine: str, prompt, prefix) -> int:
        res = engines[engine].continue_prompts([list(prompt) + list(prefix)], 1, 1, SETTINGS["greedy"], None, seed)
        if res.error:
            raise RuntimeError(res.error)
        return int(res.tokens[0][0][0])
    return plain_at
