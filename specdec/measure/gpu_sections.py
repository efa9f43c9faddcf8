"""The sections of the GPU run (`specdec.cli.gpu_bench`): real-size random-weight pairs, the
embedded family, and a named pair.  Each section writes its tables as soon as it has rows, so a run
cut short by its budget keeps what it measured; each records what it skipped in the budget.

Tables (tidy, provenance in the sidecar; the real-size ones carry ``mode``, eager or compiled, and
a compiled pair's label ends in ", compiled", so every view of them keeps the modes apart):
  cost_curve.csv   T(n), n = 1..9, of each real-size target and T(1) of its draft (random weights)
  controlled.csv   controlled-acceptance surface: baseline and k in K_GRID at each alpha in ALPHAS
                   (INSTRUMENTATION, `specdec.measure.controlled`: measures the hardware, never
                   quality), with the extended prediction S_ext = E[L] / (T(k+1)/T(1) + k c) beside each
  batch.csv        throughput (tokens/s over all rows) at batch sizes 1..32, baseline and k = 4
  embedded.csv     the project's embedded family (data/models/, if present): real acceptance
  hub.csv          a named pair (--target/--draft), only if its weights load without network
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from specdec.core.cost import draft_cost, extended_speedup
from specdec.engine.modes.compiled import compiled
from specdec.engine.decode import generate
from specdec.family.architectures import build_model, llama_config, param_count, real_size_config
from specdec.family.loader import MEMBERS, load_model, load_tokenizer
from specdec.family.manifest import ModelUnavailableError
from specdec.family.tokens import heldout_prompts
from specdec.measure.controlled import ControlledAcceptance
from specdec.measure.cost_curve import cost_curve
from specdec.measure.harness import Cell, Config, run_row, sweep
from specdec.io.paths import MODELS_DIR
from specdec.io.results import write_table

__all__ = ["K_GRID", "COMPILED_K", "ALPHAS", "BATCHES", "log", "real_size", "embedded", "hub"]

K_GRID = (1, 2, 3, 4, 6, 8)
COMPILED_K = (2, 4)  # the compiled mode's grid, at alpha 0.8: the seed's worked example (alpha 0.8, k = 4) and k = 2
ALPHAS = (0.5, 0.7, 0.8, 0.9, 0.95)
BATCHES = (1, 2, 4, 8, 16, 32)


def log(msg: str) -> None:
    print(f"[gpu_bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _pairs(smoke: bool):
    """(name, target config, draft config) of the real-size pairs (tiny shapes when smoke)."""
    if smoke:
        tiny = dict(vocab_size=512, bos_token_id=0, eos_token_id=0)
        return [("gpt2-medium/draft-3m", real_size_config("gpt2-medium", n_layer=2, n_embd=64, n_head=2, **tiny),
                 real_size_config("draft-3m", n_layer=1, n_embd=16, **tiny)),
                ("llama-8b/llama-1b", llama_config("llama-8b", tiny=True), llama_config("llama-1b", tiny=True))]
    return [("gpt2-medium/draft-3m", real_size_config("gpt2-medium"), real_size_config("draft-3m")),
            ("llama-8b/llama-1b", llama_config("llama-8b"), llama_config("llama-1b"))]


def real_size(args, device, dtype, budget, prov) -> None:
    """Every pair eager first, then (``--modes`` with compiled) every pair again with compiled
    forwards (`specdec.engine.modes.compiled`), labelled "<pair>, compiled" in every table, on a smaller
    grid (COMPILED_K at alpha 0.8) after an untimed run of every configuration; a mode's pair starts
    only with the budget it needs."""
    gen = torch.Generator(device=device).manual_seed(args.seed)
    tables = {"cost_curve": [], "controlled": [], "batch": []}
    for mode in args.modes.split(","):
        for pair, t_cfg, d_cfg in _pairs(args.smoke):
            label = pair if mode == "eager" else f"{pair}, {mode}"
            if not budget.ok(f"{label}: everything", 60 if mode == "eager" else 120):
                continue
            try:
                _one_pair(label, t_cfg, d_cfg, args, device, dtype, gen, budget, tables, mode)
            except Exception as exc:  # one failing pair must not cost the others (a single-shot GPU run)
                log(f"{label}: FAILED: {type(exc).__name__}: {exc}")
                budget.skipped.append(f"{label}: failed with {type(exc).__name__}: {str(exc)[:200]}")
            _write(tables, device, args, prov)


def _write(tables, device, args, prov) -> None:
    """Written after every pair: a run cut short keeps what it measured."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    for name, rows in tables.items():
        if rows:
            write_table(rows, Path(args.out) / f"{name}.csv", prov, kind="timing")


def _one_pair(pair, t_cfg, d_cfg, args, device, dtype, gen, budget, tables, mode: str = "eager") -> None:
    new, ctx, reps = (8, 16, 1) if args.smoke else (64, 128, 2)
    ks, alphas = ((1, 2), (0.8,)) if args.smoke else (K_GRID, ALPHAS) if mode == "eager" else (COMPILED_K, (0.8,))
    log(f"{pair}: building random-weight models")
    target = build_model(t_cfg, generator=gen, dtype=dtype, device=device)
    draft = build_model(d_cfg, generator=gen, dtype=dtype, device=device)
    if mode == "compiled":
        target, draft = compiled(target, static=False), compiled(draft, static=False)  # a handful of graphs, not
        # one per shape of the batch sweep (specdec.engine.modes.compiled): compiling must fit the GPU budget
    rows = cost_curve(target, range(1, max(ks) + 2), context=ctx, repeats=3 if args.smoke else 20,
                      warmup=1 if args.smoke else 3, generator=gen)
    d1 = cost_curve(draft, [1], context=ctx, repeats=3 if args.smoke else 20, generator=gen)[0]
    curve = {r["n"]: r["median_s"] for r in rows}
    c = draft_cost(d1["median_s"], curve[1])
    tables["cost_curve"] += [{"pair": pair, "mode": mode, "model": "target", "params": param_count(target), **r,
                              "draft_t1_s": d1["median_s"], "c": c} for r in rows]
    log(f"{pair}: T(1) {curve[1] * 1e3:.2f} ms, T({max(curve)})/T(1) {curve[max(curve)] / curve[1]:.2f}, c {c:.3f}")
    ids = torch.randint(0, int(target.config.vocab_size), (32, ctx), generator=gen, device=device)

    def run(k, alpha, B=1):
        kw = dict(drafter=draft, k=k, verifier=ControlledAcceptance(alpha)) if k else {}
        return lambda x, seed: generate(target, ids[:B], max_new_tokens=new, temperature=1.0, generator=gen,
                                        mode="eager", **kw).summary()

    nan = float("nan")
    configs = [Config("baseline", run(0, nan), k=0, alpha_set=nan, predicted_speedup=1.0)]
    configs += [Config(f"k={k} alpha={a}", run(k, a), k=k, alpha_set=a, predicted_speedup=extended_speedup(a, k, curve, c))
                for a in alphas for k in ks]
    for cfg in configs if mode == "compiled" else configs[1:2]:  # warm-up (compiled: every shape compiles here)
        cfg.run(None, 0)
    for rep in range(reps):
        if not budget.ok(f"{pair}: controlled repeat {rep}", 30):
            break
        tables["controlled"] += [{**r, "repeat": rep, "mode": mode}
                                 for r in sweep(configs, [Cell({"pair": pair, "batch": 1}, None)], repeats=1)]
    for B in BATCHES if not args.smoke else (1, 2):
        if not budget.ok(f"{pair}: batch {B}", 20):
            break
        for k in (0, 4):
            if mode == "compiled":  # a new batch size compiles on its first run: untimed
                run(k, 0.8, B)(None, 0)
            summary = run(k, 0.8, B)(None, 0)
            tables["batch"].append(run_row(summary, pair=pair, mode=mode, batch=B, k=k, alpha_set=0.8 if k else nan))
    log(f"{pair}: done ({budget.left():.0f} s left)")


def pair_acceptance(name, target, draft, prompts, args, device, budget) -> list[dict]:
    """Real acceptance and speed of a trained pair: baseline and each k, T = 0 and 1, batch 1."""
    rows, new = [], 8 if args.smoke else 128
    temps, ks = ((1.0,), (0, 2)) if args.smoke else ((0.0, 1.0), (0,) + K_GRID)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    generate(target, prompts[:1], drafter=draft, k=4, max_new_tokens=8, temperature=1.0, generator=gen,
             mode="eager")  # warm-up
    for temp in temps:
        for k in ks:
            if not budget.ok(f"{name}: T={temp} k={k}", 10):
                return rows
            for i in range(prompts.shape[0]):
                kw = dict(drafter=draft, k=k) if k else {}
                res = generate(target, prompts[i:i + 1], max_new_tokens=new, temperature=temp, generator=gen,
                               mode="eager", **kw)
                alpha, steps = res.stats.alpha_mle(k) if k else (float("nan"), 0)
                rows.append(run_row({**res.summary(), "alpha_mle": alpha, "alpha_steps": steps}, pair=name, batch=1,
                                    k=k, temperature=temp, prompt=i))
    return rows


def embedded(args, device, dtype, budget, prov) -> None:
    if not (MODELS_DIR / "target").is_dir():
        log("embedded family: data/models/target not found, skipped")
        budget.skipped.append("embedded: no weights in data/models")
        return
    if not budget.ok("embedded: loading the family", 45):
        return
    try:
        target = load_model("target", dtype=dtype, device=str(device))
    except ModelUnavailableError as exc:
        log(f"embedded family not loadable: {exc}")
        budget.skipped.append(f"embedded: {type(exc).__name__}")
        return
    prompts = heldout_prompts(load_tokenizer("embedded"), n=1 if args.smoke else 4, prompt_len=64,
                              seed=args.seed).to(device)
    rows, sha = [], {f"target/{f}": h for f, h in target.weights_sha256.items()}
    for dname in (n for n in MEMBERS if n != "target"):
        if not (MODELS_DIR / dname).is_dir():
            continue
        if not budget.ok(f"embedded/{dname}: loading", 20):
            break
        try:
            draft = load_model(dname, dtype=dtype, device=str(device))
            sha.update({f"{dname}/{f}": h for f, h in draft.weights_sha256.items()})
            rows += pair_acceptance(f"embedded target/{dname}", target, draft, prompts, args, device, budget)
        except Exception as exc:  # keep the other drafts' results
            log(f"embedded/{dname}: FAILED: {type(exc).__name__}: {exc}")
            budget.skipped.append(f"embedded/{dname}: failed with {type(exc).__name__}: {str(exc)[:200]}")
    if rows:
        write_table(rows, Path(args.out) / "embedded.csv", {**prov, "models_sha256": sha}, kind="timing")


def hub(args, device, dtype, budget, prov) -> None:
    if not budget.ok(f"hub pair {args.target}/{args.draft}: loading", 60):
        return
    try:
        target = load_model(args.target, dtype=dtype, device=str(device))
        draft = load_model(args.draft, dtype=dtype, device=str(device))
    except (OSError, ValueError) as exc:  # ModelUnavailableError is a ValueError
        log(f"hub pair {args.target} / {args.draft} not loadable offline: {exc}")
        budget.skipped.append(f"hub pair {args.target}/{args.draft}: not reachable ({type(exc).__name__})")
        return
    gen = torch.Generator(device=device).manual_seed(args.seed)
    prompts = torch.randint(0, int(target.config.vocab_size), (2, 64), generator=gen, device=device)  # timing only
    rows = pair_acceptance(f"{args.target}/{args.draft}", target, draft, prompts, args, device, budget)
    sha = {**{f"target/{f}": h for f, h in target.weights_sha256.items()},
           **{f"draft/{f}": h for f, h in draft.weights_sha256.items()}}
    if rows:
        write_table(rows, Path(args.out) / "hub.csv", {**prov, "models_sha256": sha}, kind="timing")
