"""The engines against each other (chapters 10's plain table and the breakdown's head-to-head): one
configuration per engine in each matchup, every engine's wall time paired with a reference engine's.

A `Matchup` names a comparison ("plain decoding", "best k, greedy", ...), the setting and batch it
runs at, and the configuration each engine runs in it (`specdec.audit.design.Config`: its
speculation, and for vLLM whether it is patched); an engine absent from a matchup is not timed there
(llama-server at batch > 1: its adapter sends one request per sample).

Order, stated before the results (`versus_rows`): each in-process engine makes one untimed call of
each matchup (a llama-server configuration starts then); the in-process engines run ``rounds / 2``
rounds, then the vLLM worker (one process; per matchup and prompt ``rounds`` generate calls of its
configuration, its start-up and a warm-up call excluded), then ``rounds / 2`` more rounds; within a
round every engine decodes each matchup and prompt once, the engines' order reversed every other
round.  In-process engines pair by round with the reference, so a linear drift of the machine
cancels.  vLLM's calls pair ABBA with the reference's (its first half with the reference's last
rounds); a row's vLLM calls run back to back at that job's place in the vLLM block, so a drift
cancels exactly only for a job in the block's middle (the block is minutes long; the in-process
rounds before and after it frame it).  Each row: the median of reference time / engine time over the pairs of every prompt and
round ("faster" = the engine faster than the reference), its interval and words
(`specdec.measure.protocol.level_verdict`), and whether the engine's first call gave the
reference's tokens (greedy only: equal logits up to rounding give the same tokens; a difference is
recorded, not judged: near-ties may flip).

Example: versus_rows({"ours": ours, "llama.cpp": llama}, "ours", prompts,
    [Matchup("plain decoding", "greedy", 1, plain_configs(("ours", "llama.cpp")))], length=128,
    rounds=4, seed=0) -> [{"comparison": "plain decoding", "engine": "llama.cpp", ...}]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specdec.audit.design import SETTINGS, Config
from specdec.audit.speed import filled, timed_call
from specdec.measure.protocol import level_verdict, paired_interval

__all__ = ["Matchup", "versus_rows", "plain_configs", "plain_rows"]


@dataclass(frozen=True)
class Matchup:
    """One comparison: ``configs`` holds (engine, Config) pairs, one per engine timed in it."""
    comparison: str
    setting: str
    batch: int
    configs: tuple

    def __post_init__(self):
        if self.setting not in SETTINGS:
            raise ValueError(f"unknown setting {self.setting!r}; known: {sorted(SETTINGS)}")
        if int(self.batch) < 1:
            raise ValueError(f"a matchup's batch is >= 1, got {self.batch}")
        engines = [e for e, _ in self.configs]
        if len(set(engines)) != len(engines):
            raise ValueError(f"one configuration per engine in a matchup, got engines {engines}")

    def of(self, engine: str) -> Config | None:
        """The configuration ``engine`` runs in this matchup, None when it is not timed here."""
        return dict(self.configs).get(engine)


def plain_configs(engines) -> tuple:
    """(engine, its plain decoding) for every engine named."""
    return tuple((e, Config(e, "plain decoding", None, "control")) for e in engines)


def versus_rows(inprocess: dict, reference: str, prompts, matchups: list[Matchup], *, length: int, rounds: int,
                seed: int, vllm=None) -> list[dict]:
    """Every engine against ``reference`` (one of ``inprocess``: name -> adapter run in this process)
    in every matchup (module docstring); vLLM's configurations run on ``vllm`` (a `VLLMSession` or
    `VLLMEngine`), named "vllm" in the matchups.  One row per (matchup, engine other than the
    reference), a matchup without the reference or a named engine without an adapter is an error.  An
    in-process call that raises ends that engine's part of its matchup (no further calls; the row, or
    every row of the matchup when the reference failed, reads "not timed: ... failed: <error>") and the
    run goes on, as a vLLM configuration's error does."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2, got {rounds}")
    if reference not in inprocess:
        raise ValueError(f"the reference {reference!r} is not one of the engines {sorted(inprocess)}")
    if not prompts:
        raise ValueError("versus_rows needs at least one prompt")
    for m in matchups:
        if m.of(reference) is None:
            raise ValueError(f"the matchup {m.comparison!r} ({m.setting}, batch {m.batch}) has no configuration of "
                             f"the reference {reference!r}")
        if missing := [e for e, _ in m.configs if e not in inprocess and not (e == "vllm" and vllm is not None)]:
            raise ValueError(f"the matchup {m.comparison!r} names engines without an adapter: {missing}")
    half, P = rounds // 2, len(prompts)
    order = list(inprocess)
    job = lambda m, cfg, i: ([prompts[i]], m.batch, length, SETTINGS[m.setting], cfg.spec, seed)  # noqa: E731
    times = {(j, e, i): [] for j, m in enumerate(matchups) for e, _ in m.configs for i in range(P)}
    tokens, failed = {}, {}  # failed: (matchup, engine) -> why; its later calls are skipped

    def call(j: int, e: str, cfg, i: int):
        if (j, e) in failed:
            return None
        try:
            return timed_call(inprocess[e], job(matchups[j], cfg, i))
        except Exception as exc:  # one engine's failure ends its row, not the run
            failed[j, e] = f"{type(exc).__name__}: {exc}"
            return None

    def rounds_of(first: int) -> None:
        for r in range(first, first + half):
            for j, m in enumerate(matchups):
                names = dict(m.configs)
                for i in range(P):
                    for e in (order if r % 2 == 0 else order[::-1]):
                        if e in names and (got := call(j, e, names[e], i)) is not None:
                            times[j, e, i].append(got[0])
                            tokens.setdefault((j, e, i), got[1])

    for j, m in enumerate(matchups):  # one untimed call each: a server's start, a first call's one-off costs
        for e, cfg in m.configs:
            if e in inprocess:
                call(j, e, cfg, 0)
    rounds_of(0)
    at = [(j, i) for j, m in enumerate(matchups) if m.of("vllm") is not None and (j, reference) not in failed
          for i in range(P)]
    jobs = [(*job(matchups[j], matchups[j].of("vllm"), i), rounds, {"patched": bool(matchups[j].of("vllm").patched)})
            for j, i in at]
    vres = dict(zip(at, vllm.run_many(jobs, hold=4))) if jobs else {}
    rounds_of(half)
    out = []
    for j, m in enumerate(matchups):
        base = {"comparison": m.comparison, "setting": m.setting, "batch": m.batch}
        ref = np.array([t for i in range(P) for t in times[j, reference, i]])
        for e, cfg in m.configs:
            if e == reference:
                continue
            row = {**base, "engine": e, "configuration": cfg.label,
                   "reference_configuration": m.of(reference).label}
            if why := failed.get((j, reference)) or failed.get((j, e)):
                who = reference if (j, reference) in failed else e
                out.append({**row, "verdict": f"not timed: {who} failed: {why}"})
                continue
            if e == "vllm":
                got = [vres[j, i] for i in range(P)]  # every (j, i) of a matchup whose reference has not failed
                if bad := next((r.error for r in got if r.error), None):
                    out.append({**row, "verdict": f"not timed: {bad}"})
                    continue
                each = [list(r.provenance["generate_each_s"]) for r in got]
                t = np.array([x for ts in each for x in ts[half:] + ts[:half]])
                same = all(r.tokens == tokens[j, reference, i] for i, r in enumerate(got))
            else:
                t = np.array([x for i in range(P) for x in times[j, e, i]])
                same = all(tokens[j, e, i] == tokens[j, reference, i] for i in range(P))
            same = same if SETTINGS[m.setting].temperature == 0 else None  # sampled: other draws, other tokens
            med, lo, hi = paired_interval(ref, t, seed=seed)
            out.append({**row, "prompts": P, "pairs": len(t), "relative_speed": med, "relative_lo": lo,
                        "relative_hi": hi, "tokens_per_s": m.batch * length / float(np.median(t)),
                        "reference_tokens_per_s": m.batch * length / float(np.median(ref)),
                        "same_tokens": same, "verdict": level_verdict(lo, hi, len(t))})
    return filled(out)


def plain_rows(inprocess: dict, reference: str, prompts, *, batches: tuple, length: int, rounds: int,
               settings: tuple, seed: int, vllm=None) -> list[dict]:
    """The engines' plain decoding against ``reference``: `versus_rows` with one matchup per (setting,
    batch), every engine's plain decoding (vLLM's when ``vllm`` is given; llama.cpp at batch 1 only),
    the rows without the matchup's name and configuration (every row is plain decoding)."""
    if reference not in inprocess:
        raise ValueError(f"the reference {reference!r} is not one of the engines {sorted(inprocess)}")
    names = list(inprocess) + (["vllm"] if vllm is not None else [])
    matchups = [Matchup("plain decoding", s, b, plain_configs([e for e in names if not (e == "llama.cpp" and b > 1)]))
                for s in settings for b in batches]
    rows = versus_rows(inprocess, reference, prompts, matchups, length=length, rounds=rounds, seed=seed, vllm=vllm)
    named = ("comparison", "configuration", "reference_configuration", "same_tokens")
    return [{k: v for k, v in r.items() if k not in named} for r in rows]
