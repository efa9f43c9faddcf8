"""Chapter 10's time breakdown: why the engines decode the same pair at different speeds, and whether
speculation pays on each (`make breakdown`; the chapter renders its committed results).

Protocol, stated before the runs (one thread per engine, fp32, the embedded target and ``draft``,
greedy, ``prompts`` the chapter's speed prompts, ``length`` tokens per call):

  1. plain: every engine's plain decoding against ours (`speed.plain_rows`, reference "ours"), at
     batch 1 and 8 (llama-server: batch 1), ``rounds`` rounds per prompt;
  2. speculative: each engine's draft-model decoding against its own plain decoding at k in ``ks``
     (`speed.speed_rows`: ABBA, ``rounds`` per prompt), each row factored into E[L] (tokens per target
     forward, from the engine's own kept-draft counts) over the step cost (one speculative step in
     plain steps): speedup = E[L] / step cost;
  3. forwards: what a step costs outside the loop, for the two engines whose forwards can be timed
     alone: T(n), one target forward appending n tokens to a cached context, over T(1) for
     n = 1, 2, 3, 5, and the draft's T_d(1) / T(1) -- ours through `specdec.measure.cost_curve`,
     llama.cpp through its server's own prompt timings (`LlamaEngine.forward_times`) -- giving the
     step cost a loop with no work besides its forwards would pay, (T(k + 1) + k T_d(1)) / T(1);
  4. ours alone: the plain step split (`specdec.measure.step_split.step_split`), the batch-1 limit
     of this core's bandwidth (`limit`), and the in-place cache's gain (`cache_gain`).
vLLM's forwards are not timed alone: its offline API gives no per-forward time, and its step cost is
read from (2) only.

Example: run_all(engines, prompts, session=session, ...) -> {"plain": [...], "speculative": [...], ...}
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.audit import speed
from specdec.audit.design import Config
from specdec.measure.cost_curve import cost_curve, one_token_forward
from specdec.measure.step_split import cache_gain, limit, step_split
from specdec.peers.interface import Speculation

__all__ = ["NS", "configs", "forward_rows", "predicted_cost", "run_all"]

NS = (1, 2, 3, 5)  # fed tokens timed: plain decoding, and verifying k = 1, 2, 4 drafts


def configs(engines: tuple, draft: str) -> list[Config]:
    """Plain decoding and the draft-model configuration of each engine (greedy drafts for llama.cpp;
    at greedy every rule keeps the argmax), as `speed.speed_pairs` reads them."""
    method = {"ours": "token", "vllm": "draft_model", "llama": "draft_model"}
    out = []
    for e in engines:
        out.append(Config(e, "plain decoding", None, "control"))
        out.append(Config(e, "draft model, k = 2", Speculation(method[e], k=2, draft=draft), "speculative"))
    return out


def forward_rows(engine: str, times: dict, draft_times: list, ks: tuple) -> list[dict]:
    """One row per n: T(n) (median milliseconds) and T(n) / T(1); then one per k: the draft's
    T_d(1) / T(1) and `predicted_cost`.  ``times``: {n: [seconds]}; ``draft_times``: [seconds] of the
    draft's one-token forward."""
    if 1 not in times or any(k + 1 not in times for k in ks):
        raise ValueError(f"forward_rows needs T(1) and T(k + 1) for every k of {tuple(ks)}, got n = {sorted(times)}")
    t1, td = float(np.median(times[1])), float(np.median(draft_times))
    rows = [{"engine": engine, "n": n, "forward_ms": 1e3 * float(np.median(v)), "ratio": float(np.median(v)) / t1}
            for n, v in sorted(times.items())]
    c = td / t1
    for k in ks:
        rows.append({"engine": engine, "k": k, "draft_ratio": c,
                     "predicted_cost": predicted_cost(float(np.median(times[k + 1])) / t1, c, k)})
    return rows


def predicted_cost(verify_ratio: float, draft_ratio: float, k: int) -> float:
    """(T(k + 1) + k T_d(1)) / T(1): one speculative step in plain steps, forwards only."""
    if k < 1 or verify_ratio <= 0 or draft_ratio < 0:
        raise ValueError(f"need k >= 1, T(k + 1) / T(1) > 0 and T_d / T >= 0, got {k}, {verify_ratio}, {draft_ratio}")
    return verify_ratio + k * draft_ratio


def _ours_forwards(target, draft, *, context: int, repeats: int, seed: int) -> tuple[dict, list]:
    from specdec.engine.modes.lean import lean

    g = lambda: torch.Generator().manual_seed(seed)  # noqa: E731
    between = one_token_forward(lean(draft), context=context, batch=1, generator=g())  # as in the loop
    rows = cost_curve(lean(target), NS, context=context, repeats=repeats, generator=g(), between=between, blocked=True)
    drows = cost_curve(lean(draft), (1,), context=context, repeats=repeats, generator=g(), blocked=True)
    return {r["n"]: [r["median_s"]] for r in rows}, [drows[0]["median_s"]]


def _llama_forwards(llama_target, llama_draft, prompt: list, *, context: int, repeats: int, seed: int):
    rng = np.random.default_rng(seed)
    ctx = (list(prompt) * (context // max(len(prompt), 1) + 1))[:context]
    vocab = llama_target.limits()[0]
    extra = [int(x) for x in rng.choice(np.arange(1, vocab), size=max(NS) + 1, replace=False)]
    t = llama_target.forward_times(NS, context=ctx, extra=extra, repeats=repeats)
    d = llama_draft.forward_times((1,), context=ctx, extra=extra, repeats=repeats)
    return {n: [x / 1e3 for x in v] for n, v in t.items()}, [x / 1e3 for x in d[1]]


def run_all(engines: dict, prompts: list, *, target, draft_model, draft: str, ks: tuple, batches: tuple,
            length: int, rounds: int, seed: int, session=None, llama_draft=None, context: int = 64,
            repeats: int = 20) -> dict:
    """Every table of the breakdown (module docstring).  ``engines``: "ours" and "llama" adapters (run in
    this process), ``session`` a `specdec.peers.vllm_session.VLLMSession` or None, ``llama_draft`` a
    LlamaEngine whose target is the draft (for T_d(1)); ``target`` / ``draft_model`` the loaded models."""
    out = {}
    inproc = {"ours": engines["ours"], **({"llama.cpp": engines["llama"]} if "llama" in engines else {})}
    out["plain"] = speed.plain_rows(inproc, "ours", prompts, batches=batches, length=length, rounds=rounds,
                                    settings=("greedy",), seed=seed, vllm=session)
    timed = {**engines, **({"vllm": session} if session is not None else {})}
    pairs = speed.speed_pairs(configs(tuple(timed), draft), ks)
    out["speculative"] = speed.speed_rows(pairs, timed, prompts, batches=batches, length=length, rounds=rounds,
                                          settings=("greedy",), seed=seed, failed=set())
    for row in out["speculative"]:
        row["engine"] = {"llama": "llama.cpp"}.get(row["engine"], row["engine"])
    ours_t, ours_d = _ours_forwards(target, draft_model, context=context, repeats=repeats, seed=seed)
    out["forwards"] = forward_rows("ours", ours_t, ours_d, ks)
    if "llama" in engines and llama_draft is not None:
        lt, ld = _llama_forwards(engines["llama"], llama_draft, prompts[0], context=context, repeats=repeats, seed=seed)
        out["forwards"] += forward_rows("llama.cpp", lt, ld, ks)
    out["forwards"] = speed.filled(out["forwards"])
    out["split"] = [step_split(target, prompts, batch=b, length=length) for b in batches]
    out["limit"] = limit(target)
    out["cache"] = [cache_gain(target, prompts, batch=b, length=length, rounds=rounds, seed=seed) for b in batches]
    return out
