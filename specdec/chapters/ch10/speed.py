"""Chapter 10's timing: each engine's speculative decoding against its own plain decoding, the
engines' plain decoding against each other, and forced-acceptance instruments.

Timing (`speed_rows`), stated before the results: per engine, plain decoding and each speculative
configuration decode the same batch (``batch`` copies of each prompt's first ``batch`` prompts) for
``speed_len`` tokens, ``rounds`` times each, in the ABBA order plain, speculative, speculative,
plain (each block rounds / 2 calls), so a linear drift of the machine cancels in the pairs; round
j of the speculative blocks pairs with round j of the plain ones.  The speedup is plain's wall time
over the configuration's, summarized by `specdec.measure.protocol.paired_interval` with its words.
A configuration whose law test failed is reported as "not the target's law here" and not timed at
the sampled settings (its speed is not a speedup of this model's decoding); at greedy it is timed
when its outputs equal plain decoding's, and reported "not the target's law here" when they differ.

Instruments: vLLM's ``synthetic`` rejection method (`engine_audit.synthetic`) and our engine's
controlled acceptance (`controlled`, run by `WithInstruments`) keep each draft with a set
probability whatever p and q: the speed an engine's loop gives at that acceptance, never a speedup
of this model's decoding (their rows say so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from specdec.measure.controlled import ControlledAcceptance
from specdec.chapters.ch10.audit import SETTINGS, Config, _filled, synthetic, with_verifier
from specdec.measure.protocol import paired_interval, verdict
from specdec.peers.interface import Continuations, Sampling, Speculation
from specdec.report.robustness import INSTRUMENT, NOT_EXACT

__all__ = ["speed_pairs", "at_k", "controlled", "instrument_pairs", "WithInstruments", "speed_rows", "plain_rows",
           "NOT_EXACT", "INSTRUMENT"]


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


def controlled(k: int, draft: str, alpha: float) -> Config:
    """Our engine's counterpart of `synthetic`: `specdec.measure.controlled.ControlledAcceptance`
    (each draft kept with probability alpha), run by `WithInstruments`."""
    return Config("ours", f"token verification, k = {k}, controlled acceptance {alpha:g} (an instrument)",
                  Speculation("controlled", k=k, draft=draft, options=(("alpha", float(alpha)),)), "instrument")


def instrument_pairs(configs: list[Config], alphas, k: int, draft: str) -> list[tuple[Config, Config, None]]:
    """(plain, instrument, None) per engine that has both and per alpha: vLLM's synthetic acceptance
    and ours' controlled acceptance, each against its own plain decoding (no law test stands for
    an instrument)."""
    plain = {c.engine: c for c in configs if c.role == "control"}
    make = {"vllm": synthetic, "ours": controlled}
    return [(plain[e], make[e](k, draft, a), None) for e in make if e in plain for a in alphas]


@dataclass
class WithInstruments:
    """Our engine, plus method "controlled" (option "alpha"): each draft kept with probability
    alpha whatever p and q (`specdec.measure.controlled`, an instrument of speed at a set
    acceptance; its tokens are not the target's law).  Every other request goes to ``ours``."""
    ours: object
    name: str = "ours"

    def continue_prompts(self, prompts, n: int, max_new_tokens: int, sampling: Sampling, spec: Speculation | None,
                         seed: int) -> Continuations:
        if spec is None or spec.method != "controlled":
            return self.ours.continue_prompts(prompts, n, max_new_tokens, sampling, spec, seed)
        alpha = dict(spec.options).get("alpha")
        return with_verifier(self.ours.model("target"), self.ours.model(spec.draft), ControlledAcceptance(alpha),
                             prompts, n, max_new_tokens, sampling, spec, seed,
                             {"engine": self.name, "instrument": f"controlled acceptance {alpha}"})


def _timed(engine, job) -> tuple[float, list]:
    """(wall seconds, tokens) of one call."""
    start = time.perf_counter()
    res = engine.continue_prompts(*job)
    if res.error:
        raise RuntimeError(res.error)
    return time.perf_counter() - start, res.tokens


def _cells(pairs, engines: dict, settings: tuple, batches: tuple, instruments_at: tuple) -> list[tuple]:
    """(plain, spec, tested, setting, batch) for every timed comparison, in run order; an
    instrument (tested None) only at the (setting, batch) cells of ``instruments_at``."""
    return [(plain, spec, tested, name, b) for plain, spec, tested in pairs if plain.engine in engines
            for name in settings for b in batches
            if not (spec.engine == "hf" and b > 1)  # assisted generation takes batch 1 only
            and (tested is not None or (name, b) in instruments_at)]


def speed_rows(pairs: list[tuple[Config, Config, Config]], engines: dict, prompts, *, batches: tuple, length: int,
               rounds: int, settings: tuple, seed: int, failed: set,
               instruments_at: tuple = (("temperature 1", 1),)) -> list[dict]:
    """Paired ABBA timing of each (plain, speculative) pair of one engine (module docstring), one row
    per (pair, setting, batch size): the median speedup with its interval and words.  ``pairs`` holds
    (plain, speculative, tested): ``tested`` is the configuration whose law test stands for the
    speculative one at sampled settings (the same method at the law test's k); ``failed`` holds the
    (engine, label) of configurations whose law test failed at some sampled setting.  At greedy the
    law is the argmax, and the test is the timed outputs themselves: speculative equal to plain.
    ``tested`` None marks an instrument (forced acceptance): timed only at ``instruments_at``, its
    words kept and its exactness column saying it is not the target's law.  Every vLLM cell runs in
    one worker process holding the plain and the speculative LLM at once."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2 (ABBA blocks of rounds / 2), got {rounds}")
    half, out = rounds // 2, []
    cells = _cells(pairs, engines, settings, batches, instruments_at)
    rejected = lambda c: (c[2] is not None and SETTINGS[c[3]].temperature > 0  # noqa: E731
                          and (c[2].engine, c[2].label) in failed)
    job = lambda c, name, b: ([prompts[0]], b, length, SETTINGS[name], c.spec, seed)  # noqa: E731
    timed = _vllm_abba([c for c in cells if c[0].engine == "vllm" and not rejected(c)], engines.get("vllm"), job,
                       half)
    for cell in cells:
        plain, spec, tested, name, b = cell
        base = {"engine": spec.engine, "configuration": spec.label, "setting": name, "batch": b}
        if rejected(cell):  # not the target's law: no speed of this model's decoding to time
            out.append({**base, "k": spec.spec.k, "law": f"law test at k = {tested.spec.k} rejected",
                        "verdict": NOT_EXACT})
            continue
        try:
            got = timed[cell] if plain.engine == "vllm" else _abba(engines[plain.engine], plain, spec,
                                                                    {c: job(c, name, b) for c in (plain, spec)}, half)
        except RuntimeError as exc:
            got = str(exc)
        if isinstance(got, str):  # the engine's error, in the row
            out.append({**base, **({"law": INSTRUMENT} if tested is None else {}), "verdict": f"not timed: {got}"})
            continue
        times, tokens = got
        if tested is None:
            same, law = True, INSTRUMENT
        elif SETTINGS[name].temperature == 0:
            same = tokens[spec] == tokens[plain]
            law = "greedy outputs equal" if same else "greedy outputs differ"
        else:
            same, law = True, f"law test at k = {tested.spec.k} passed"
        tb, ts = np.array(times[plain]), np.array(times[spec])
        med, lo, hi = paired_interval(tb, ts, seed=seed)  # plain's time over the configuration's
        out.append({**base, "k": spec.spec.k, "rounds": len(tb), "speedup": med, "speedup_lo": lo, "speedup_hi": hi,
                    "plain_tokens_per_s": b * length / float(np.median(tb)),
                    "tokens_per_s": b * length / float(np.median(ts)), "law": law,
                    "verdict": verdict(lo, hi) if same else NOT_EXACT})
    return _filled(out)


def _paired(plain: Config, spec: Config, blocks: list, half: int) -> tuple[dict, dict]:
    """(wall times per configuration, tokens of its first call) from the four blocks run in the
    order plain, spec, spec, plain (each: (times, tokens of its first call)); ABBA: the first plain
    block pairs with the second speculative block, and the other two likewise."""
    times, tokens = {plain: [], spec: []}, {}
    for c, (t, toks) in zip((plain, spec, spec, plain), blocks):
        times[c] += list(t)
        tokens.setdefault(c, toks)
    times[spec] = times[spec][half:] + times[spec][:half]
    return times, tokens


def _abba(eng, plain: Config, spec: Config, jobs: dict, half: int) -> tuple[dict, dict]:
    """`_paired` of one in-process engine, half calls a block."""
    blocks = []
    for c in (plain, spec, spec, plain):
        calls = [_timed(eng, jobs[c]) for _ in range(half)]
        blocks.append(([t for t, _ in calls], calls[0][1]))
    return _paired(plain, spec, blocks, half)


def _vllm_abba(cells: list[tuple], eng, job, half: int) -> dict:
    """cell -> `_paired` times and tokens for every vLLM cell, from ONE worker process holding two
    LLMs (the plain one and the current speculative one), each block ``half`` generate calls timed
    inside it (its start-up and a warm-up call excluded); a failed cell maps to the engine's error."""
    if not cells:
        return {}
    jobs = [(*job(c, name, b), half) for plain, spec, _, name, b in cells for c in (plain, spec, spec, plain)]
    res = eng.run_many(jobs, hold=2)
    out = {}
    for i, (plain, spec, *_) in enumerate(cells):
        block = res[4 * i:4 * i + 4]
        bad = next((r.error for r in block if r.error), None)
        out[cells[i]] = bad or _paired(plain, spec, [(r.provenance["generate_each_s"], r.tokens) for r in block],
                                       half)
    return out


def plain_rows(inprocess: dict, reference: str, prompts, *, batches: tuple, length: int, rounds: int,
               settings: tuple, seed: int, vllm=None) -> list[dict]:
    """The engines' plain decoding against each other: each engine's speed relative to
    ``reference`` (one of ``inprocess``: name -> adapter run in this process), one row per
    (engine, setting, batch): the median of reference time / engine time over paired rounds with
    its interval and words (faster = faster than the reference).

    Order, stated before the results: the in-process engines run ``rounds / 2`` rounds, then the
    vLLM worker (one process, one LLM, ``rounds`` generate calls per cell, its start-up and a
    warm-up excluded), then ``rounds / 2`` more rounds; within a round every engine decodes each
    cell once, the order reversed every other round.  In-process engines pair by round; vLLM's
    calls pair ABBA with the reference's (its first half with the reference's last rounds), so a
    linear drift of the machine cancels."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2, got {rounds}")
    if reference not in inprocess:
        raise ValueError(f"the reference {reference!r} is not one of the engines {sorted(inprocess)}")
    half, names = rounds // 2, list(inprocess)
    cells = [(name, b) for name in settings for b in batches]
    job = lambda name, b: ([prompts[0]], b, length, SETTINGS[name], None, seed)  # noqa: E731
    times = {(e, c): [] for e in names for c in cells}

    def rounds_of(count: int, first: int) -> None:
        for r in range(first, first + count):
            for c in cells:
                for e in (names if r % 2 == 0 else names[::-1]):
                    times[e, c].append(_timed(inprocess[e], job(*c))[0])

    rounds_of(half, 0)
    vres = vllm.run_many([(*job(*c), rounds) for c in cells]) if vllm is not None else [None] * len(cells)
    rounds_of(half, half)
    out = []
    for c, r in zip(cells, vres):
        ref = np.array(times[reference, c])
        others = [(e, np.array(times[e, c])) for e in names if e != reference]
        if r is not None and r.error:
            out.append({"engine": "vllm", "setting": c[0], "batch": c[1], "verdict": f"not timed: {r.error}"})
        elif r is not None:  # its first half pairs with the reference's last rounds (ABBA)
            each = list(r.provenance["generate_each_s"])
            others.append(("vllm", np.array(each[half:] + each[:half])))
        for e, t in others:
            med, lo, hi = paired_interval(ref, t, seed=seed)
            out.append({"engine": e, "setting": c[0], "batch": c[1], "rounds": len(t), "relative_speed": med,
                        "relative_lo": lo, "relative_hi": hi, "tokens_per_s": c[1] * length / float(np.median(t)),
                        "reference_tokens_per_s": c[1] * length / float(np.median(ref)), "verdict": verdict(lo, hi)})
    return _filled(out)
