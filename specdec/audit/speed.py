"""The audit's timing (chapter 10): each engine's speculative decoding against its own plain decoding (the
engines against each other: `specdec.audit.versus`).

Timing (`speed_rows`), stated before the results: per engine and prompt (every prompt of
``prompts``), plain decoding and the speculative configuration decode the same batch (``batch``
copies of the prompt) for ``length`` tokens, ``rounds`` times each, in the ABBA order plain,
speculative, speculative, plain (each block rounds / 2 calls, after one untimed call of each), so a
linear drift of the machine cancels in the pairs; round j of the speculative blocks pairs with round
j of the plain ones.  The pairs of every prompt are pooled: the speedup is plain's wall time over the configuration's,
summarized by `specdec.measure.protocol.paired_interval` with its words; a row with fewer pairs
than its level needs reads "too few pairs for this level" (`protocol.level_verdict`).  Each row also
factors its speedup: ``tokens_per_forward`` (E[L], from the engine's own kept-draft count or step
records of the configuration's first call per prompt, `tokens_per_forward`) over ``step_cost``, what one
speculative step (drafts and verification) costs in plain decoding steps: speedup = E[L] / cost.
A configuration whose law test failed is reported as "not the target's law here" and not timed at
the sampled settings (its speed is not a speedup of this model's decoding); at greedy it is timed
when its outputs equal plain decoding's, and reported "not the target's law here" when they differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

import math

from specdec.audit.design import SETTINGS, Config
from specdec.measure.protocol import level_verdict, paired_interval
from specdec.report.robustness import NOT_EXACT

__all__ = ["speed_pairs", "at_k", "speed_rows", "timed_call", "NOT_EXACT", "filled", "tokens_per_forward"]


def filled(rows: list[dict]) -> list[dict]:
    """Every row with the union of the rows' columns (first-seen order), NaN where a row has none:
    a row that could not run keeps its place in the table."""
    cols = list(dict.fromkeys(c for r in rows for c in r))
    return [{c: r.get(c, math.nan) for c in cols} for r in rows]


def speed_pairs(configs: list[Config], ks: tuple = ()) -> list[tuple[Config, Config, Config]]:
    """(plain, speculative, tested) per engine and draft length for the speed section: its plain
    decoding against its first speculative configuration of the plan (ours' token verification,
    Hugging Face's assisted generation, vLLM's draft model with its defaults: what its users get)
    at each k of ``ks`` (default: the plan's own k); ``tested`` is the plan's configuration, whose
    law test stands for every k of the same method."""
    plain = {c.engine: c for c in configs if c.role == "control"}
    first = {}
    for c in configs:
        if c.role == "speculative" and c.engine in plain:
            first.setdefault(c.engine, c)
    return [(plain[e], at_k(c, k), c) for e, c in first.items() for k in (ks or (c.spec.k,))]


def at_k(cfg: Config, k: int) -> Config:
    """The same configuration drafting ``k`` tokens a step (its label says so)."""
    if k < 1:
        raise ValueError(f"a speculative configuration drafts k >= 1 tokens, got k={k}")
    if cfg.spec.k == k:
        return cfg
    return replace(cfg, label=cfg.label.replace(f"k = {cfg.spec.k}", f"k = {k}"), spec=replace(cfg.spec, k=k))


def timed_call(engine, job) -> tuple[float, list, tuple]:
    """(wall seconds, tokens, (the engine's counters, its step records)) of one call."""
    start = time.perf_counter()
    res = engine.continue_prompts(*job)
    if res.error:
        raise RuntimeError(res.error)
    return time.perf_counter() - start, res.tokens, (res.counters, res.steps)


ACCEPTED = ("num_accepted_tokens", "draft_n_accepted")  # ours (and HF), llama.cpp
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"  # read only to know the counts are vLLM's


def tokens_per_forward(tokens: list, counters: dict, steps: list | None = None) -> float:
    """Tokens emitted per target forward in one call: every forward emits one token of the target's own
    plus the drafts it kept, so forwards = tokens - kept drafts (the prefill's forward, which emits the
    first token, counted as one).  The kept drafts are read from the engine's own counters (a name
    of ACCEPTED); NaN when it reports none; a count below 0 or not below the tokens emitted is no
    count of these tokens' drafts, and raises naming both.

    vLLM is counted from its step records instead (``steps``, [prompt][sample] -> [(drafted,
    accepted)]): it drafts k at a request's last step too and counts the drafts kept there even when
    max_tokens then cuts them (seen: 161 counted against ours' 158 for the same 384 tokens), so its
    counter overstates E[L]; its records list every verification step (with a draft model every step
    drafts), and a sample's forwards are its prefill plus its steps.  NaN without complete records."""
    n = sum(len(sample) for prompt in tokens for sample in prompt)
    if VLLM_ACCEPTED in counters:
        if steps is None or any(sample is None for prompt in steps for sample in prompt):
            return math.nan
        return n / sum(1 + len(sample) for prompt in steps for sample in prompt)
    kept = next((counters[name] for name in ACCEPTED if name in counters), None)
    if kept is None:
        return math.nan
    if not 0 <= kept < n:
        raise ValueError(f"the engine counts {kept} kept drafts for {n} emitted tokens: not a count of their drafts")
    return n / (n - kept)


def _cells(pairs, engines: dict, settings: tuple, batches: tuple) -> list[tuple]:
    """(plain, spec, tested, setting, batch) for every timed comparison, in run order."""
    return [(plain, spec, tested, name, b) for plain, spec, tested in pairs if plain.engine in engines
            for name in settings for b in batches
            if not (spec.engine in ("hf", "llama") and b > 1)]  # assisted generation takes batch 1 only;
    # llama-server's adapter sends one request per sample (a batch would be its requests in turn)


def speed_rows(pairs: list[tuple[Config, Config, Config]], engines: dict, prompts, *, batches: tuple, length: int,
               rounds: int, settings: tuple, seed: int, failed: set) -> list[dict]:
    """Paired ABBA timing of each (plain, speculative) pair of one engine on every prompt (module
    docstring), one row per (pair, setting, batch size): the median speedup over the pooled pairs
    with its interval and words.  ``pairs`` holds (plain, speculative, tested): ``tested`` is the
    configuration whose law test stands for the speculative one at sampled settings (the same method
    at the law test's k); ``failed`` holds the (engine, label) of configurations whose law test
    failed at some sampled setting.  At greedy the law is the argmax, and the test is the timed
    outputs themselves: speculative equal to plain on every prompt.  Every vLLM cell runs in one
    worker process holding the plain and the speculative LLM at once."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2 (ABBA blocks of rounds / 2), got {rounds}")
    if not prompts:
        raise ValueError("speed_rows needs at least one prompt")
    half, out = rounds // 2, []
    cells = _cells(pairs, engines, settings, batches)
    rejected = lambda c: (SETTINGS[c[3]].temperature > 0 and (c[2].engine, c[2].label) in failed)  # noqa: E731
    job = lambda c, name, b, i: ([prompts[i]], b, length, SETTINGS[name], c.spec, seed)  # noqa: E731
    timed = _vllm_abba([c for c in cells if c[0].engine == "vllm" and not rejected(c)], engines.get("vllm"), job,
                       half, len(prompts))
    for cell in cells:
        plain, spec, tested, name, b = cell
        base = {"engine": spec.engine, "configuration": spec.label, "setting": name, "batch": b}
        if rejected(cell):  # not the target's law: no speed of this model's decoding to time
            out.append({**base, "k": spec.spec.k, "law": f"law test at k = {tested.spec.k} rejected",
                        "verdict": NOT_EXACT})
            continue
        try:
            got = timed[cell] if plain.engine == "vllm" else [
                _abba(engines[plain.engine], plain, spec, {c: job(c, name, b, i) for c in (plain, spec)}, half)
                for i in range(len(prompts))]
        except RuntimeError as exc:
            got = str(exc)
        if isinstance(got, str):  # the engine's error, in the row
            out.append({**base, "verdict": f"not timed: {got}"})
            continue
        if SETTINGS[name].temperature == 0:
            same = all(tokens[spec] == tokens[plain] for _, tokens, _ in got)
            law = "greedy outputs equal" if same else "greedy outputs differ"
        else:
            same, law = True, f"law test at k = {tested.spec.k} passed"
        tb = np.array([t for times, _, _ in got for t in times[plain]])
        ts = np.array([t for times, _, _ in got for t in times[spec]])
        med, lo, hi = paired_interval(tb, ts, seed=seed)  # plain's time over the configuration's
        per_forward = float(np.mean([g[2] for g in got]))  # over prompts; NaN if the engine reports no counts
        out.append({**base, "k": spec.spec.k, "prompts": len(prompts), "pairs": len(tb), "speedup": med,
                    "speedup_lo": lo, "speedup_hi": hi, "plain_tokens_per_s": b * length / float(np.median(tb)),
                    "tokens_per_s": b * length / float(np.median(ts)), "tokens_per_forward": per_forward,
                    "step_cost": per_forward / med, "law": law,
                    "verdict": level_verdict(lo, hi, len(tb)) if same else NOT_EXACT})
    return filled(out)


def _paired(plain: Config, spec: Config, blocks: list, half: int) -> tuple[dict, dict, float]:
    """(wall times per configuration, tokens of its first call, the speculative first call's tokens
    per target forward) from the four blocks run in the order plain, spec, spec, plain (each: (times,
    tokens and counters of its first call)); ABBA: the first plain block pairs with the second
    speculative block, and the other two likewise."""
    times, tokens, counts = {plain: [], spec: []}, {}, {}
    for c, (t, toks, cnt) in zip((plain, spec, spec, plain), blocks):
        times[c] += list(t)
        tokens.setdefault(c, toks)
        counts.setdefault(c, cnt)
    times[spec] = times[spec][half:] + times[spec][:half]
    return times, tokens, tokens_per_forward(tokens[spec], *counts[spec])


def _abba(eng, plain: Config, spec: Config, jobs: dict, half: int) -> tuple[dict, dict]:
    """`_paired` of one in-process engine, half calls a block, after one untimed call of each
    configuration (a llama-server configuration starts on its first call)."""
    for c in (plain, spec):
        timed_call(eng, jobs[c])
    blocks = []
    for c in (plain, spec, spec, plain):
        calls = [timed_call(eng, jobs[c]) for _ in range(half)]
        blocks.append(([t for t, _, _ in calls], calls[0][1], calls[0][2]))
    return _paired(plain, spec, blocks, half)


def _vllm_abba(cells: list[tuple], eng, job, half: int, n_prompts: int) -> dict:
    """cell -> [per prompt `_paired` times and tokens] for every vLLM cell, from ONE worker process
    holding two LLMs (the plain one and the current speculative one), each block ``half`` generate
    calls timed inside it (its start-up and a warm-up call excluded); a failed cell maps to the
    engine's error."""
    if not cells:
        return {}
    jobs = [(*job(c, name, b, i), half) for plain, spec, _, name, b in cells for i in range(n_prompts)
            for c in (plain, spec, spec, plain)]
    res = eng.run_many(jobs, hold=2)
    out = {}
    for j, (plain, spec, *_) in enumerate(cells):
        got = []
        for i in range(n_prompts):
            block = res[4 * (j * n_prompts + i):4 * (j * n_prompts + i) + 4]
            bad = next((r.error for r in block if r.error), None)
            if bad:
                got = bad
                break
            got.append(_paired(plain, spec, [(r.provenance["generate_each_s"], r.tokens, (r.counters, r.steps))
                                             for r in block], half))
        out[cells[j]] = got
    return out
