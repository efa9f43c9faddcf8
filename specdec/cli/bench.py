"""`make bench`: is the engine ever the bottleneck?  Our baseline against Hugging Face's, our
speculative decoding against HF's assisted generation at the same k, the engine's overhead outside
the model forwards, and its efficiency against the extended cost model of the same run.

Protocol: `specdec.measure.protocol` (paired, interleaved in a seeded shuffled order, contended runs
re-run, medians with paired bootstrap intervals, words that follow the intervals).  Per temperature
(0 = greedy, 1), every held-out prompt and repeat, at batch 1:
    ours_ar      `specdec.engine.decode.generate` without a drafter (KV cache)
    hf_ar        Hugging Face `generate`
    ours_spec    our engine with the draft model, k drafts, token verification, k in KS
    hf_assisted  `generate(assistant_model=draft)` with k pinned (`specdec.peers.hf`)
and at batch 8 (all prompts in one batch, one run per round, ``--batch-repeats`` rounds) ours_ar and
hf_ar (HF's assisted generation takes batch 1 only).  Both engines run exactly new_tokens (no stop
token).  Every configuration runs in three execution modes, interleaved in the same rounds:
    eager     both engines on Hugging Face's forward (the modules as written): our engine's own work
              against HF's, on identical forwards.  Ours at k in KS_SHARED, HF's at every k
    lean      ours only, on `specdec.engine.modes.lean` (GPT-2's forward written out on the same weights:
              the same logits to fp32 rounding), at every k; paired with HF's eager runs of the same
              round, the fastest eager forward each engine has
    compiled  ours: `specdec.engine.modes.compiled`, torch.compile on static shapes over a preallocated
              cache, target and draft; HF's: its static cache with compile_config (`specdec.peers.hf`,
              which compiles the target only: its assisted generation runs the assistant eager); at
              k in KS_SHARED, after an untimed warm-up run of every compiled configuration on every
              timed prompt and batch at full length; the graphs compiled while timing are counted and
              recorded (0: no timed run paid for a compile; a run that did is kept).
Each engine is compared with the other in the same mode (lean: with HF's eager runs).  The
comparisons, each a paired median with its interval and the target the issue set for it (per mode):
    baseline     hf_ar time per token / ours_ar time per token        (>= 1: ours is not slower)
    vs_hf        hf_assisted / ours_spec at the same k                  (>= 1.1)
    vs_hf_per_step  the same pairs per verification step: HF's time per target forward (counted by
                 a hook, `specdec.peers.hf`) / ours per step.  When sampling the two engines draw
                 different random numbers, so per token each k carries its fixed seeds' acceptance
                 luck; per step that luck is largely removed (a step is k draft forwards and one
                 target forward in both; what remains: fixed costs spread over a number of steps
                 that luck sets, and a step's cost growing slightly with what it accepts).  A
                 diagnostic beside vs_hf, not the issue's measure (1.1 shown for reference)
    efficiency   measured speedup / predicted speedup of the same run   (>= 0.95): the measured one
                 in steady state (after the first step, which also feeds the prompt: the same in
                 every engine), the prediction E[L] T(1) / (T(k+1) + k T_d(1)) with E[L] the run's
                 tokens per step and T(1), T(k+1), T_d(1) the forward times these paired runs paid
                 (so it isolates what the engine's own work costs, whatever the machine's speed)
    isolated_forwards  the same, with T and c from `specdec.measure.cost_curve` measured once at
                 the start (context: prompt + half the output): how far isolated forwards predict
                 the loop's, on a machine whose speed drifts
    overhead     the share of step time outside the model forwards      (<= 0.10), median and max
    compile_gain ours eager time per token / ours compiled, same (prompt, repeat)   (>= 1: compiling
                 pays), for the baseline and each compiled k
    lean_gain    the same for the lean forward (ours eager / ours lean) at the k both modes run
    vs_hf_compiled_ar  HF's compiled `generate` time per token / ours, for each of our configurations
                 in either mode (>= 1): against the fastest plain decoding measured here, does ours
                 (plain or speculative, eager or compiled) win?
baseline and vs_hf are worded by `specdec.measure.protocol.comparison`: the verdict of the 95%
interval, and the simultaneous interval over the comparisons of their kind with its verdict (a
level the pairs cannot reach is said to be out of reach).

Usage: python -m specdec.cli.bench [--out data/results/bench] [--smoke]
Example: python -m specdec.cli.bench --smoke --out /tmp/bench   (about a minute)
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from specdec.core.cost import draft_cost
from specdec.engine.modes.compiled import compiled, graph_count
from specdec.engine.decode import generate
from specdec.engine.kv import now
from specdec.engine.modes import forward_for, mode_of
from specdec.engine.modes.lean import lean
from specdec.family.tokens import prompt_checksum
from specdec.measure.cost_curve import cost_curve
from specdec.measure.harness import Cell, Config, protocol_sweep, sweep
from specdec.peers.hf import hf_assisted
from specdec.measure.protocol import comparison, paired_interval, paired_speedups, summarize
from specdec.measure.subjects import load_subjects
from specdec.io.paths import RESULTS_DIR
from specdec.io.results import provenance, write_table

__all__ = ["configs", "comparisons", "main"]

TARGETS = {"baseline": (">=", 1.0), "vs_hf": (">=", 1.1), "vs_hf_per_step": (">=", 1.1), "efficiency": (">=", 0.95),
           "overhead": ("<=", 0.10), "isolated_forwards": (">=", 0.95), "compile_gain": (">=", 1.0),
           "vs_hf_compiled_ar": (">=", 1.0), "lean_gain": (">=", 1.0)}
MODES = ("eager", "lean", "compiled")
KS_SHARED = (1, 2, 4, 8)  # ours eager and compiled at fewer k: every mode at every k would not fit in 15 minutes


def configs(target, draft, ks, temperature: float, n_new: int, spec: bool = True, mode: str = "eager",
            hf_ks=None) -> list[Config]:
    """ours_ar and hf_ar, then (spec) ours_spec for each k in ``ks`` and hf_assisted for each k in
    ``hf_ks`` (default: ``ks``), in ``mode``: "eager"; "lean" (target and draft are
    `specdec.engine.modes.lean` wrappers; ours only: HF's counterparts are its eager runs); or "compiled"
    (`specdec.engine.modes.compiled` wrappers; HF unwraps them and runs its own compiled mode)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    hf_ks = () if mode == "lean" else ks if hf_ks is None else hf_ks
    suffix = "" if mode == "eager" else f" {mode}"

    def ours(k):
        return lambda ids, seed: generate(target, ids, drafter=draft if k else None, k=max(k, 1), max_new_tokens=n_new,
                                          temperature=temperature, generator=torch.Generator().manual_seed(seed),
                                          mode="eager").summary()  # the model as given: this mode's forward

    def hf(k):
        return lambda ids, seed: hf_assisted(target, draft, ids if ids.dim() == 2 else ids[None], k=k,
                                             max_new_tokens=n_new, temperature=temperature, seed=seed,
                                             compiled=mode == "compiled")[1]

    out = [Config("ours_ar" + suffix, ours(0), impl="ours_ar", k=0, mode=mode)]
    if mode != "lean":
        out.append(Config("hf_ar" + suffix, hf(0), impl="hf_ar", k=0, mode=mode))
    for k in sorted(set(ks) | set(hf_ks)) if spec else ():
        if k in ks:
            out.append(Config(f"ours_spec k={k}{suffix}", ours(k), impl="ours_spec", k=k, mode=mode))
        if k in hf_ks:
            out.append(Config(f"hf_assisted k={k}{suffix}", hf(k), impl="hf_assisted", k=k, mode=mode))
    return out


def _per_token(r) -> float:
    return r["wall_s"] / r["tokens"]


def _per_step(r) -> float:
    return r["wall_s"] / r["steps"]


def _steady(r) -> float:
    """Seconds per token after the first step (the prompt's forward is the same for every engine)."""
    return 1.0 / r["tokens_per_s"]


def _el(r) -> float:
    """Tokens per step after the first step: the run's measured E[L]."""
    return (r["tokens"] - r["first_step_tokens"]) / (r["steps"] - 1)


def _same_run_prediction(base, r) -> float:
    """E[L] x T(1) / (T(k+1) + k T_d(1)) with every cost the one these two runs paid in their model
    forwards after the first step: the baseline's target forward per step, the speculative run's
    target forward and draft forwards per step.  Measured / this = what the engine's own work costs."""
    t1 = base["t_target_steady"] / (base["steps"] - 1)
    step = (r["t_target_steady"] + r["t_draft_forward_steady"]) / (r["steps"] - 1)
    return _el(r) * t1 / step


def _row(name, mode, temperature, batch, k, med, lo, hi, runs, words: dict | None = None) -> dict:
    """One comparison: the median with its interval (for overhead: the median and the range),
    whether the median -- and the whole interval -- meet the target, and for a speedup (``words``:
    `specdec.measure.protocol.comparison`'s dict) its verdict and its simultaneous interval and verdict
    over the comparisons of its kind."""
    op, goal = TARGETS[name]
    meets = (lambda x: x >= goal) if op == ">=" else (lambda x: x <= goal)
    whole = (lo if op == ">=" else hi) if lo == lo else float("nan")
    w = words or {"verdict": "", "lo_sim": float("nan"), "hi_sim": float("nan"), "verdict_sim": ""}
    return {"comparison": name, "mode": mode, "temperature": temperature, "batch": batch, "k": k, "median": med, "lo": lo,
            "hi": hi, "runs": runs, "verdict": w["verdict"], "lo_sim": w["lo_sim"], "hi_sim": w["hi_sim"],
            "verdict_sim": w["verdict_sim"], "target": f"{op} {goal:g}", "target_met_by_median": bool(meets(med)),
            "target_met_by_interval": bool(whole == whole and meets(whole))}


def comparisons(rows: list[dict], curve: dict, c: float) -> list[dict]:
    """The baseline, vs_hf, vs_hf_per_step, efficiency, overhead, compile_gain, lean_gain and
    vs_hf_compiled_ar rows (module docstring) from the paired runs, per execution mode
    (isolated_forwards: eager only, the curve's mode)."""
    out, groups = [], {}
    for r in rows:
        groups.setdefault((r.get("mode", "eager"), r["temperature"], r["batch"], r["impl"], r["k"]), []).append(r)
    key = lambda r: (r["prompt"], r["repeat"])  # noqa: E731  (the pairing unit)
    family = {(mode, impl): sum(g[0] == mode and g[3] == impl for g in groups)
              for mode, impl in {(g[0], g[3]) for g in groups}}

    def pairs_of(rs, mode, T, B, impl, k):  # (other's run, this run) on the same (prompt, repeat)
        other = {key(r): r for r in groups.get((mode, T, B, impl, k), [])}
        return [(other[key(r)], r) for r in rs if key(r) in other]

    def speed(name, mode, other, T, B, k, rs, family_size, other_mode=None, other_k=None, per=_per_token):
        pairs = pairs_of(rs, other_mode or mode, T, B, other, k if other_k is None else other_k)  # other's / this one's
        w = comparison([per(h) for h, _ in pairs], [per(o) for _, o in pairs], family_size=family_size)
        return _row(name, mode, T, B, k, w["median"], w["lo"], w["hi"], len(pairs), w)

    ours_impl = ("ours_ar", "ours_spec")
    gains = {m: sum(g[0] == m and g[3] in ours_impl and ("eager", *g[1:]) in groups for g in groups)
             for m in ("compiled", "lean")}  # each gain's family: the configurations that ran eager too
    n_ours = sum(g[3] in ours_impl for g in groups)
    for (mode, T, B, impl, k), rs in sorted(groups.items()):
        hf_mode = "eager" if mode == "lean" else mode  # the lean mode is ours only
        if impl == "ours_ar" and (hf_mode, T, B, "hf_ar", 0) in groups:
            out.append(speed("baseline", mode, "hf_ar", T, B, 0, rs, family[mode, impl], other_mode=hf_mode))
        if impl == "ours_spec" and (hf_mode, T, B, "hf_assisted", k) in groups:
            out.append(speed("vs_hf", mode, "hf_assisted", T, B, k, rs, family[mode, impl], other_mode=hf_mode))
            hf_pairs = pairs_of(rs, hf_mode, T, B, "hf_assisted", k)
            if hf_pairs and all(h.get("steps", 0) > 0 for h, _ in hf_pairs):  # tables before HF counted its steps: none
                out.append(speed("vs_hf_per_step", mode, "hf_assisted", T, B, k, rs, family[mode, impl],
                                 other_mode=hf_mode, per=_per_step))
        if impl == "ours_spec":
            pairs = pairs_of(rs, mode, T, B, "ours_ar", 0)
            preds = [("efficiency", [_same_run_prediction(b, r) for b, r in pairs])]
            if mode == "eager":
                preds.append(("isolated_forwards", [_el(r) / (curve[k + 1] / curve[1] + k * c) for _, r in pairs]))
            for name, pred in preds:
                med, lo, hi = paired_interval([_steady(b) for b, _ in pairs],
                                              [_steady(r) * p for (_, r), p in zip(pairs, pred)])
                out.append(_row(name, mode, T, B, k, med, lo, hi, len(pairs)))
            share = [r["overhead_share"] for r in rs]
            out.append(_row("overhead", mode, T, B, k, statistics.median(share), min(share), max(share), len(rs)))
        if mode in gains and impl in ours_impl and ("eager", T, B, impl, k) in groups:
            name = "compile_gain" if mode == "compiled" else "lean_gain"
            out.append(speed(name, mode, impl, T, B, k, rs, gains[mode], other_mode="eager"))
        if impl in ours_impl and (("compiled", T, B, "hf_ar", 0) in groups):
            out.append(speed("vs_hf_compiled_ar", mode, "hf_ar", T, B, k, rs, n_ours, other_mode="compiled", other_k=0))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specdec.cli.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS_DIR / "bench"))
    ap.add_argument("--smoke", action="store_true", help="a short run of the same code: 1 prompt, k in {1, 2}")
    ap.add_argument("--draft", default="draft-distilled", help="a draft of the embedded family")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8, help="batch size of the second baseline comparison")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=6, help="rounds at batch 1 (each prompt once per round)")
    ap.add_argument("--batch-repeats", type=int, default=12, help="rounds of the batch cell (one run per round; 6 is "
                    "the fewest that reach a 95%% interval of a median, and then the interval is the range)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ks = [1, 2] if a.smoke else list(range(1, 9))
    n_prompts, n_new, repeats, batch = (1, 12, 2, 2) if a.smoke else (a.prompts, a.new_tokens, a.repeats, a.batch)
    batch_repeats = 2 if a.smoke else a.batch_repeats
    torch.set_num_threads(a.threads)
    subj = load_subjects(allow_stand_in=a.smoke, seed=a.seed)
    target, draft = subj.target, subj.drafts[a.draft if a.draft in subj.drafts else "draft-small"]
    prompts = subj.prompts(max(n_prompts, batch), a.prompt_len, seed=a.seed)
    t0 = now()
    log = lambda m: print(f"[{now() - t0:6.1f}s] {m}", flush=True)  # noqa: E731
    ctx, gen = a.prompt_len + n_new // 2, torch.Generator().manual_seed(a.seed)
    curve_rows = cost_curve(target, range(1, max(ks) + 2), context=ctx, repeats=5 if a.smoke else 15, generator=gen)
    d1 = cost_curve(draft, [1], context=ctx, repeats=5 if a.smoke else 15, generator=gen)[0]
    curve = {r["n"]: r["median_s"] for r in curve_rows}
    c = draft_cost(d1["median_s"], curve[1])
    log(f"{subj.kind}: T(1) {curve[1] * 1e3:.2f} ms, c {c:.3f}; {n_prompts} prompts x {n_new} tokens x {repeats} repeats")
    ks_c = [k for k in KS_SHARED if k in ks]
    ct, cd, lt, ld = compiled(target), compiled(draft), lean(target), lean(draft)
    plain_mode = mode_of(forward_for(target, "auto"))  # what generate(target, ids) runs unless told otherwise
    log(f"a plain generate(target, ids) call runs the {plain_mode} forward (mode='auto'); "
        "the eager rows below pass mode='eager'")

    def all_configs(T, spec):  # the three modes, interleaved by the protocol
        return (configs(target, draft, ks_c, T, n_new, spec, hf_ks=ks) + configs(lt, ld, ks, T, n_new, spec, mode="lean")
                + configs(ct, cd, ks_c, T, n_new, spec, mode="compiled"))

    sweep(configs(target, draft, [2], 1.0, 8) + configs(lt, ld, [2], 1.0, 8, mode="lean"), [Cell({}, prompts[0])],
          repeats=1)  # warm-up: one-off costs
    g0 = graph_count()
    for T in (0.0, 1.0):  # warm-up: every compiled configuration on every timed cell, untimed
        for cells, spec in (([Cell({}, p) for p in prompts[:n_prompts]], True), ([Cell({}, prompts[:batch])], False)):
            sweep(configs(ct, cd, ks_c, T, n_new, spec, mode="compiled"), cells, repeats=1,
                  seed=lambda rnd, i: a.seed + 10**6 + i)
    g1 = graph_count()
    log(f"compiled-mode warm-up: {g1 - g0} graphs")
    runs = []
    for T in (0.0, 1.0):
        plan = [([Cell({"temperature": T, "batch": 1, "prompt": i}, p) for i, p in enumerate(prompts[:n_prompts])],
                 True, repeats), ([Cell({"temperature": T, "batch": batch, "prompt": -1}, prompts[:batch])], False,
                                  batch_repeats)]
        for cells, spec, rounds in plan:
            runs += protocol_sweep(all_configs(T, spec), cells, repeats=rounds, seed=a.seed,
                                   min_share=0.9, max_reruns=2, log=log)
    g2 = graph_count()
    log(f"graphs compiled while timing: {g2 - g1}")
    runs = paired_speedups(runs, baseline="ours_ar", keys=("mode", "temperature", "batch", "prompt", "repeat"))
    params = {"draft": a.draft, "models": subj.kind, "ks": ks, "ks_shared": ks_c, "modes": list(MODES),
              "temperatures": [0.0, 1.0], "prompts": n_prompts,
              "batch": batch, "prompt_len": a.prompt_len, "new_tokens": n_new, "repeats": repeats,
              "batch_repeats": batch_repeats,
              "threads": a.threads, "smoke": a.smoke, "method": "token", "curve_context": ctx, "c": c,
              "prompt_sha256": prompt_checksum(prompts), "graphs_compiled_warmup": g1 - g0,
              "graphs_compiled_while_timing": g2 - g1, "plain_call_mode": plain_mode}
    prov = provenance(params, a.seed, models=subj.sha256)
    write_table(runs, f"{a.out}/bench_runs.csv", prov, kind="timing")
    write_table([{**r, "model": "target"} for r in curve_rows] + [{**d1, "model": "draft", "ratio": float("nan")}],
                f"{a.out}/bench_cost_curve.csv", prov, kind="timing")
    write_table(summarize(runs, by=("mode", "temperature", "batch", "impl", "k")), f"{a.out}/bench_summary.csv", prov,
                kind="timing")
    comp = comparisons(runs, curve, c)
    write_table(comp, f"{a.out}/bench_comparisons.csv", prov, kind="timing")
    for r in comp:
        met = "met by the whole interval" if r["target_met_by_interval"] else \
            "met by the median only" if r["target_met_by_median"] else "not met"
        print(f"{r['comparison']:<12} {r['mode']:<8} T={r['temperature']:g} B={r['batch']} k={r['k']}: {r['median']:.3f} "
              f"[{r['lo']:.3f}, {r['hi']:.3f}] {r['verdict']} (target {r['target']}: {met})")
    print(f"a plain generate(target, ids) call gets the {plain_mode} mode: the rows of mode {plain_mode!r} above")
    print(f"wrote {a.out}/bench_*.csv in {now() - t0:.0f} s; {sum(r['reruns'] for r in runs)} contended runs re-run",
          file=sys.stderr)


if __name__ == "__main__":
    main()
