"""Chapter 06's controlled-acceptance runs on real-size architectures with random weights.

The hardware's side of the cost model, apart from any pair's acceptance: GPT-2 shapes
(`specdec.family.architectures.REAL_SIZE`) built from their configs with random weights, decoded
with the INSTRUMENTATION verifier `specdec.measure.controlled.ControlledAcceptance(alpha)` (each
draft accepted with probability alpha whatever p and q are: not a decoding algorithm, and its
outputs are samples of nothing).  Per target, one at a time (memory):
  1. T(n) of the target and T_d(1) of the draft on a random context; c = T_d(1) / T(1);
  2. a short warm-up run, then rounds of the baseline and every (alpha, k) (`harness.sweep`);
  3. per (alpha, k, repeat): speedup = tokens/s / the baseline's tokens/s of the same round, beside
     S_ext = E[L](alpha, k) / (T(k+1)/T(1) + k c) and the idealized E[L] / (1 + k c).
Every random draw (weights, contexts, the runs' seeds) comes from the one generator passed in.

Example:
    out = controlled_runs(["gpt2-small"], "draft-3m", [0.8], [2], new_tokens=8, context=16, n_values=[1, 2, 3],
                         curve_repeats=3, repeats=1, temperature=1.0, generator=torch.Generator().manual_seed(1),
                         target_sizes=dict(n_layer=1, n_embd=32, n_head=2), draft_sizes=dict(n_layer=1, n_embd=16))
    out["controlled"][0]["speedup"], out["draft_params"]
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.cost import draft_cost, speedup
from specdec.engine.decode import generate
from specdec.family.architectures import build_model, param_count, real_size_config
from specdec.measure.controlled import ControlledAcceptance
from specdec.measure.cost_curve import cost_curve
from specdec.measure.harness import Cell, Config, sweep

__all__ = ["controlled_runs", "speedup_vs_alpha", "size_label", "headline"]


def _configs(target, draft, alphas, ks, new_tokens: int, temperature: float) -> list[Config]:
    def run(k, alpha):
        kw = dict(drafter=draft, k=k, verifier=ControlledAcceptance(alpha)) if k else {}
        return lambda ids, seed: generate(target, ids, max_new_tokens=new_tokens, temperature=temperature,
                                          generator=torch.Generator().manual_seed(seed), **kw).summary()
    nan = float("nan")
    return [Config("baseline", run(0, nan), k=0, alpha_set=nan)] + [
        Config(f"alpha={a} k={k}", run(k, a), k=k, alpha_set=a) for a in alphas for k in ks]


def controlled_runs(targets, draft: str, alphas, ks, *, new_tokens: int, context: int, n_values, curve_repeats: int,
                   repeats: int, temperature: float, generator: torch.Generator, target_sizes: dict | None = None,
                   draft_sizes: dict | None = None) -> dict:
    """{"cost_curve": rows, "controlled": rows, "draft_params": int} (module docstring).
    target_sizes / draft_sizes override the configs' shapes (tiny models for SMOKE runs and tests)."""
    rdraft = build_model(real_size_config(draft, **(draft_sizes or {})), generator=generator)
    curve_rows, controlled = [], []
    for name in targets:
        target = build_model(real_size_config(name, **(target_sizes or {})), generator=generator)
        params = param_count(target)
        rc = cost_curve(target, n_values, context=context, repeats=curve_repeats, generator=generator)
        rd = cost_curve(rdraft, [1], context=context, repeats=curve_repeats, generator=generator)[0]
        curve = {r["n"]: r["median_s"] for r in rc}
        c = draft_cost(rd["median_s"], curve[1])
        curve_rows += [{"target": name, "params": params, **r, "draft_t1_s": rd["median_s"], "c": c} for r in rc]
        ids = torch.randint(0, int(target.config.vocab_size), (1, context), generator=generator)  # (1, context)
        base_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        generate(target, ids, drafter=rdraft, k=2, max_new_tokens=4, temperature=temperature,
                 verifier=ControlledAcceptance(0.5), generator=generator)  # warm-up: one-off costs
        rows = sweep(_configs(target, rdraft, alphas, ks, new_tokens, temperature), [Cell({"target": name}, ids)],
                     repeats=repeats, seed=lambda rnd, i: base_seed + rnd)
        base = {r["repeat"]: r["tokens_per_s"] for r in rows if r["k"] == 0}
        for r in rows:
            if r["k"] == 0:
                continue
            a, k = r["alpha_set"], r["k"]
            controlled.append({"target": name, "params": params, "alpha_set": a, "k": k, "repeat": r["repeat"],
                               "tokens_per_s": r["tokens_per_s"], "baseline_tokens_per_s": base[r["repeat"]],
                               "speedup": r["tokens_per_s"] / base[r["repeat"]],
                               "predicted_ext": speedup(a, k, c, verify_cost=curve[k + 1] / curve[1]),
                               "predicted_toy": speedup(a, k, c), "c": c, "verify_cost": curve[k + 1] / curve[1]})
        del target
    return {"cost_curve": curve_rows, "controlled": controlled, "draft_params": param_count(rdraft)}


def speedup_vs_alpha(controlled) -> list[dict]:
    """The figure's table: per (target, k, alpha) the median measured speedup over repeats and the
    two predictions."""
    rows = controlled.to_dict("records") if hasattr(controlled, "to_dict") else list(controlled)
    out = []
    for name in dict.fromkeys(r["target"] for r in rows):
        for k in dict.fromkeys(r["k"] for r in rows if r["target"] == name):
            rr = [r for r in rows if r["target"] == name and r["k"] == k]
            for a in sorted({r["alpha_set"] for r in rr}):
                ra = [r for r in rr if r["alpha_set"] == a]
                out.append(dict(target=name, k=k, alpha_set=a,
                                speedup_median=float(np.median([r["speedup"] for r in ra])),
                                predicted_ext=ra[0]["predicted_ext"], predicted_toy=ra[0]["predicted_toy"]))
    return out


def size_label(params: int) -> str:
    """A parameter count as prose: 124439808 -> "124M", 3290000 -> "3.3M"."""
    return f"{params / 1e6:.0f}M" if params >= 1e7 else f"{params / 1e6:.1f}M"


def headline(cost_curve, controlled, draft_params: int, n: int) -> dict:
    """The numbers the prose quotes, for the last (largest) target: T(n)/T(1), c, the best measured
    speedup and the median measured / predicted speedup; and every shape's size."""
    curve = cost_curve.to_dict("records") if hasattr(cost_curve, "to_dict") else list(cost_curve)
    ctrl = controlled.to_dict("records") if hasattr(controlled, "to_dict") else list(controlled)
    sizes = {r["target"]: r["params"] for r in curve}
    name = list(sizes)[-1]
    last = [r for r in curve if r["target"] == name]
    rr = [r for r in ctrl if r["target"] == name]
    return {"real_name": name, "real_ratio": float(next(r["ratio"] for r in last if r["n"] == n)),
            "real_c": float(last[0]["c"]), "real_best": float(max(r["speedup"] for r in rr)),
            "real_ratio_med": float(np.median([r["speedup"] / r["predicted_ext"] for r in rr])),
            "real_shapes": ", ".join(f"{t}: {size_label(p)}" for t, p in sizes.items()),
            "real_draft_size": size_label(draft_params)}
