"""Chapter 10's time breakdown: why the engines decode the same pair at different speeds, and whether
speculation pays on each (`make breakdown`; the chapter renders its committed results).

Protocol, stated before the runs (one thread per engine, fp32, the embedded target and ``draft``,
greedy, ``prompts`` the chapter's speed prompts, ``length`` tokens per call):

  1. plain: every engine's plain decoding against ours (`versus.plain_rows`, reference "ours"), at
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
  4. the plain step split, ours (`specdec.measure.step_split.step_split`) and vLLM's (`vllm_split`: a
     call profiled in its worker), grouped alike, in rounds of alternating order (`split_rows`); ours
     alone: the batch-1 limit of this core's bandwidth (`limit`) and what each of our forward's means
     of speed gains (`forward_gain`: the in-place cache, the kernel, the packed weights);
  5. head to head (`head_to_head`, timed by `specdec.audit.versus.versus_rows` against ours, after
     1-4 of the same run): at greedy, each engine's draft model at its best k (the k of (2) with the
     largest median speedup over its own plain decoding at that batch) and each engine's best exact decoding (its best-k draft
     model where (2) read "faster", else its plain decoding); at temperature 1, k = 2, the
     configurations whose law chapter 10 tested: our token verification, vLLM's draft model with its
     defaults *patched* (the shipped build fails the law there), llama.cpp's probabilistic drafts.
vLLM's forwards are not timed alone (its offline API gives no per-forward time): its step cost is read
from (2), and where its time goes from the profiled split of (4).

Example: run_all(engines, prompts, session=session, ...) -> {"plain": [...], "speculative": [...], ...}
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.audit import speed
from specdec.audit.design import PATCHED, Config
from specdec.audit.versus import Matchup, plain_configs, plain_rows, versus_rows
from specdec.measure.cost_curve import cost_curve, one_token_forward
from specdec.measure.step_split import CHANGES, forward_gain, limit, step_split, vllm_split
from specdec.peers.interface import Speculation

__all__ = ["NS", "configs", "forward_rows", "predicted_cost", "split_rows", "run_all", "best_k", "head_to_head"]

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


def _draft_model(engine: str, k: int, draft: str, sampled: bool = False) -> Config:
    """An engine's draft-model configuration at k (greedy drafts; at a sampled setting the ones
    head_to_head names)."""
    if engine == "ours":
        return Config(engine, f"token verification, k = {k}", Speculation("token", k=k, draft=draft), "speculative")
    if engine == "vllm" and sampled:
        return Config(engine, f"draft model, k = {k} (defaults){PATCHED}", Speculation("draft_model", k=k, draft=draft),
                      "speculative", patched=True)
    if engine == "llama.cpp" and sampled:
        return Config(engine, f"draft model, k = {k}, probabilistic drafts (rejection)",
                      Speculation("draft_model", k=k, draft=draft, options=(("draft_sampling", "probabilistic"),)),
                      "speculative")
    return Config(engine, f"draft model, k = {k}", Speculation("draft_model", k=k, draft=draft), "speculative")


def best_k(rows: list[dict], engine: str, batch: int) -> tuple[int, str] | None:
    """(k, verdict) of ``engine``'s timed greedy speculative row at ``batch`` with the largest median
    speedup over its own plain decoding (paired, so a machine that drifts between cells does not pick
    it; only rows whose greedy outputs equal plain decoding's), or None when it has none."""
    timed = [r for r in rows if r["engine"] == engine and r["batch"] == batch and r.get("setting") == "greedy"
             and r.get("law") == "greedy outputs equal" and np.isfinite(r.get("speedup", np.nan))]
    if not timed:
        return None
    best = max(timed, key=lambda r: r["speedup"])
    return int(best["k"]), str(best["verdict"])


def head_to_head(rows: list[dict], engines: tuple, batches: tuple, draft: str, k_sampled: int = 2) -> list[Matchup]:
    """The matchups of step 5 (module docstring) from the speculative rows ``rows`` of the same run;
    ``engines`` names the engines timed ("ours" first), llama.cpp at batch 1 only; at greedy, an
    engine without a timed greedy-equal speculative row at a batch is left out of that batch's
    matchups (no matchup without ours)."""
    out = []
    for b in batches:
        here = [e for e in engines if not (e == "llama.cpp" and b > 1)]
        best = {e: best_k(rows, e, b) for e in here}
        ranked = [e for e in here if best[e] is not None]  # an engine without a timed greedy row sits out
        if "ours" in ranked and len(ranked) > 1:
            out.append(Matchup("best k, greedy", "greedy", b,
                               tuple((e, _draft_model(e, best[e][0], draft)) for e in ranked)))
            out.append(Matchup("best exact, greedy", "greedy", b, tuple(
                (e, _draft_model(e, best[e][0], draft) if best[e][1] == "faster" else plain_configs([e])[0][1])
                for e in ranked)))
        out.append(Matchup(f"temperature 1, k = {k_sampled}", "temperature 1", b,
                           tuple((e, _draft_model(e, k_sampled, draft, sampled=True)) for e in here)))
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


def split_rows(target, prompts, *, batches: tuple, length: int, seed: int, session=None, rounds: int = 2) -> list[dict]:
    """Step 4's split of a plain decoding step, ours and (with a ``session``) vLLM's, at each batch:
    ``rounds`` rounds, the engines' order reversed every other round (a drift of the machine between
    the two then weighs on both), each number the mean over the rounds (so the parts still add up to
    the profiled step), each text the last round's.  A vLLM split that fails leaves its row "not
    timed: <error>" and the run goes on."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    runs = {"ours": lambda b: step_split(target, prompts, batch=b, length=length),
            **({"vllm": lambda b: vllm_split(session, prompts, batch=b, length=length, seed=seed)}
               if session is not None else {})}
    got, failed = {}, {}
    for r in range(rounds):
        for b in batches:
            for engine in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                if (engine, b) in failed:
                    continue
                try:
                    got.setdefault((engine, b), []).append(runs[engine](b))
                except RuntimeError as exc:
                    if engine == "ours":
                        raise
                    failed[engine, b] = str(exc)
    out = [{**rows[-1], **{k: float(np.mean([x[k] for x in rows])) for k in rows[0]
                           if isinstance(rows[0][k], float)}, "rounds": len(rows)}
           for key, rows in got.items() if key not in failed]
    out += [{"engine": e, "batch": b, "length": length, "rounds": 0, "note": f"not timed: {why}"}
            for (e, b), why in failed.items()]
    return sorted(out, key=lambda r: (r["engine"] != "ours", r["engine"], r["batch"]))


def run_all(engines: dict, prompts: list, *, target, draft_model, draft: str, ks: tuple, batches: tuple,
            length: int, rounds: int, seed: int, session=None, llama_draft=None, context: int = 64,
            repeats: int = 20, split_rounds: int = 2) -> dict:
    """Every table of the breakdown (module docstring).  ``engines``: "ours" and "llama" adapters (run in
    this process), ``session`` a `specdec.peers.vllm_session.VLLMSession` or None, ``llama_draft`` a
    LlamaEngine whose target is the draft (for T_d(1)); ``target`` / ``draft_model`` the loaded models."""
    out = {}
    inproc = {"ours": engines["ours"], **({"llama.cpp": engines["llama"]} if "llama" in engines else {})}
    out["plain"] = plain_rows(inproc, "ours", prompts, batches=batches, length=length, rounds=rounds,
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
    out["split"] = split_rows(target, prompts, batches=batches, length=length, seed=seed, session=session,
                              rounds=split_rounds)
    out["limit"] = limit(target)
    out["cache"] = [forward_gain(target, prompts, change=c, batch=b, length=length, rounds=rounds, seed=seed)
                    for c in CHANGES for b in batches]
    names = ("ours", *(("llama.cpp",) if "llama" in engines else ()), *(("vllm",) if session is not None else ()))
    out["versus"] = versus_rows(inproc, "ours", prompts, head_to_head(out["speculative"], names, batches, draft),
                                length=length, rounds=rounds, seed=seed, vllm=session)
    return out
