"""Chapter 10's runs: every configuration of `specdec.measure.engine_audit.plan` on every engine,
the law and acceptance samples, the greedy comparison, and the paired timing of each engine's
speculative decoding against its own plain decoding.

Which tokens a run yields.  Sampled settings: ``n`` samples of the first tokens per prompt
(``n_hf`` for Hugging Face's assisted generation, which decodes one sample per call); vLLM gets
max_new_tokens 2 (x1 from prefill, one verification step, so its position-1 counter is that step's
exactly), ours and Hugging Face 3 (their first step verifies x1 too; 3 keeps k = 2 unclipped).
Greedy: one sample of ``greedy_len`` tokens per prompt.  vLLM's jobs run in one worker process,
ordered so that consecutive jobs share an LLM.

Timing (`speed_rows`), stated before the results: per engine, plain decoding and each speculative
configuration decode the same batch (``batch`` copies of each prompt's first ``batch`` prompts) for
``speed_len`` tokens, ``rounds`` times each, in the ABBA order plain, speculative, speculative,
plain (each block rounds / 2 calls), so a linear drift of the machine cancels in the pairs; round
j of the speculative blocks pairs with round j of the plain ones.  The speedup is plain's wall time
over the configuration's, summarized by `specdec.measure.protocol.paired_interval` with its words.
A configuration whose law test failed is reported as "not the target's law here", never as a
speedup.
"""

from __future__ import annotations

import time

import numpy as np

from specdec.measure.engine_audit import SETTINGS, Config, NegativeControl, _filled
from specdec.measure.protocol import paired_interval, verdict

__all__ = ["collect", "speed_rows", "NOT_EXACT"]

NOT_EXACT = "not the target's law here"


def _tokens(engine: str) -> int:
    return 2 if engine == "vllm" else 3


def collect(configs: list[Config], engines: dict, prompts, *, n: int, n_hf: int, greedy_len: int, seed: int,
            target=None, draft=None) -> dict:
    """(Config, setting) -> Continuations for every configuration at every setting (module
    docstring): the sampled settings' first tokens and one greedy sample of ``greedy_len`` tokens
    per prompt (negative controls: sampled settings only).  ``engines`` maps "ours" / "hf" / "vllm"
    to an adapter (a missing engine: no rows); negative controls run `NegativeControl` on ``target``
    and ``draft``; every vLLM job runs in one worker process, one configuration's jobs together."""
    out, vjobs = {}, []
    for cfg in configs:
        if cfg.engine not in engines:
            continue
        for name, s in SETTINGS.items():
            if s.temperature == 0 and cfg.role == "negative control":
                continue
            size = 1 if s.temperature == 0 else n_hf if (cfg.engine == "hf" and cfg.spec is not None) else n
            length = greedy_len if s.temperature == 0 else _tokens(cfg.engine)
            job = (prompts, size, length, s, cfg.spec, seed)
            if cfg.engine == "vllm":
                vjobs.append(((cfg, name), job))
            elif cfg.variant is not None:
                out[(cfg, name)] = NegativeControl(target, draft, cfg.variant).continue_prompts(*job)
            else:
                out[(cfg, name)] = engines[cfg.engine].continue_prompts(*job)
    if vjobs:
        for (key, _), res in zip(vjobs, engines["vllm"].run_many([j for _, j in vjobs])):
            out[key] = res
    return out


def _timed(engine, job) -> float:
    start = time.perf_counter()
    res = engine.continue_prompts(*job)
    if res.error:
        raise RuntimeError(res.error)
    return time.perf_counter() - start


def speed_rows(pairs: list[tuple[Config, Config]], engines: dict, prompts, *, batches: tuple, length: int,
               rounds: int, settings: tuple, seed: int, failed: set) -> list[dict]:
    """Paired ABBA timing of each (plain, speculative) pair of one engine (module docstring), one row
    per (pair, setting, batch size): the median speedup with its interval and words; ``failed``
    holds the (engine, label) of configurations whose law test failed at some setting."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2 (ABBA blocks of rounds / 2), got {rounds}")
    half, out = rounds // 2, []
    for plain, spec in pairs:
        eng = engines.get(plain.engine)
        if eng is None:
            continue
        for name in settings:
            for b in batches:
                if spec.engine == "hf" and b > 1:  # assisted generation takes batch 1 only
                    continue
                # one batch of b rows of the first prompt (Hugging Face's assisted generation: b calls of one)
                jobs = {c: ([prompts[0]], b, length, SETTINGS[name], c.spec, seed) for c in (plain, spec)}
                base = {"engine": spec.engine, "configuration": spec.label, "setting": name, "batch": b}
                try:
                    times = _abba(eng, plain, spec, jobs, half)
                except RuntimeError as exc:
                    out.append({**base, "verdict": f"not timed: {exc}"})
                    continue
                tb, ts = np.array(times[plain]), np.array(times[spec])
                med, lo, hi = paired_interval(tb, ts, seed=seed)  # plain's time over the configuration's
                words = NOT_EXACT if (spec.engine, spec.label) in failed else verdict(lo, hi)
                out.append({**base, "rounds": len(tb), "speedup": med, "speedup_lo": lo, "speedup_hi": hi,
                            "plain_tokens_per_s": b * length / float(np.median(tb)),
                            "tokens_per_s": b * length / float(np.median(ts)), "verdict": words})
    return _filled(out)


def _abba(eng, plain: Config, spec: Config, jobs: dict, half: int) -> dict:
    """Wall times per configuration in the order plain, spec, spec, plain (half calls a block); vLLM
    times its generate calls inside one worker process (its start-up excluded)."""
    order = [plain, spec, spec, plain]
    if plain.engine == "vllm":
        res = eng.run_many([(*jobs[c], half) for c in order])
        times = {plain: [], spec: []}
        for c, r in zip(order, res):
            if r.error:
                raise RuntimeError(r.error)
            times[c] += list(r.provenance["generate_each_s"])
    else:
        times = {plain: [], spec: []}
        for c in order:
            times[c] += [_timed(eng, jobs[c]) for _ in range(half)]
    # ABBA: the first plain block pairs with the second spec block, and the other two likewise
    times[spec] = times[spec][half:] + times[spec][:half]
    return times

