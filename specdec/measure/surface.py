"""The controlled-acceptance surface: real-size architectures with random weights (`make surface`,
`specdec.cli.surface`; chapter 06 renders the committed tables).

The hardware's side of the cost model, apart from any pair's acceptance: GPT-2 shapes
(`specdec.family.architectures.REAL_SIZE`) built from their configs with random weights, decoded
with the INSTRUMENTATION verifier `specdec.measure.controlled.ControlledAcceptance(alpha)` (each
draft accepted with probability alpha whatever p and q are: not a decoding algorithm, and its
outputs are samples of nothing).  Per target, one at a time (memory):
  1. T(n) of the target and T_d(1) of the draft on a random context, per batch size; c = T_d(1) / T(1);
  2. a short warm-up run, then rounds in which the baseline and every (alpha, k) run on every batch
     size's cell, shuffled per round with a seeded RNG, contended runs re-run (`harness.sweep`);
  3. per (batch, alpha, k, round): speedup = tokens/s / the baseline's tokens/s of the same round and
     batch, beside S_ext = E[L](alpha, k) / (T(k+1)/T(1) + k c), the idealized E[L] / (1 + k c), and
     S_steps = (tokens per step of the run / of the baseline) / (T(k+1)/T(1) + k c): the extended
     model with the steps as the loop took them (a batch waits for its slowest row; the token budget
     cuts the last steps short), which E[L] per row does not see;
     `speedup_vs_alpha` gives each point's median with its paired bootstrap interval and verdict;
     beside them S_steps with its forward terms priced as the loop paid for them (`_inloop`), which
     leaves the engine's own work per step as the only term not priced;
  4. the prediction fixed before the runs, S_pilot: before step 2, a pilot (``pilot_rounds`` rounds,
     on each batch's cell, seeds above the timed runs': the baseline, every k at the middle alpha,
     the baseline again) prices, per (batch, k), the verification forward and the draft's token in
     the loop as `_inloop` does, against the mean of the two baselines, and the engine's own work per
     step (a step's time outside its forwards) of the run, h_k, and of the baseline, h_0, in the same
     unit; each timed run's steps are known before it runs (the instrument is seeded per run,
     `specdec.measure.controlled.controlled_steps`), so S_pilot = (its tokens per step / the
     baseline's) (1 + h_0) / (T_loop(k+1)/T_loop(1) + k c_loop + h_k) is computed, for every run,
     before the sweep.  The engine's work is priced because the faster the forwards, the larger its
     share of a step: left out, the prediction overstates every speedup by about that share.
Shapes named in ``curve_only`` get step 1 at batch 1 and nothing else (the synthesis figure's curves).
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
from specdec.engine.modes import forward_for
from specdec.family.architectures import build_model, param_count, real_size_config
from specdec.family.arena import pack_weights
from specdec.measure.controlled import ControlledAcceptance, controlled_steps
from specdec.measure.cost_curve import cost_curve
from specdec.measure.harness import Cell, Config, sweep
from specdec.measure.prediction import engine_per_step
from specdec.measure.protocol import comparison
from specdec.io.results import records

__all__ = ["controlled_runs", "speedup_vs_alpha"]


ACCEPT_SEED = 2**31  # a run's instrument draws from seed + ACCEPT_SEED: apart from every run's own seed


def _configs(target, draft, alphas, ks, new_tokens: int, temperature: float, mode: str) -> list[Config]:
    def run(k, alpha):
        def go(ids, seed):
            kw = dict(drafter=draft, k=k, verifier=ControlledAcceptance(alpha, seed=seed + ACCEPT_SEED)) if k else {}
            return generate(target, ids, max_new_tokens=new_tokens, temperature=temperature,
                            generator=torch.Generator().manual_seed(seed), mode=mode, **kw).summary()
        return go
    nan = float("nan")
    return [Config("baseline", run(0, nan), k=0, alpha_set=nan)] + [
        Config(f"alpha={a} k={k}", run(k, a), k=k, alpha_set=a) for a in alphas for k in ks]


def controlled_runs(targets, draft: str, alphas, ks, *, new_tokens: int, context: int, n_values, curve_repeats: int,
                    repeats: int, temperature: float, generator: torch.Generator, batches=(1,), curve_only=(),
                    target_sizes: dict | None = None, draft_sizes: dict | None = None, min_share: float = 0.0,
                    max_reruns: int = 0, mode: str = "lean", pilot_rounds: int = 2) -> dict:
    """{"cost_curve": rows, "controlled": rows, "draft_params": int} (module docstring).

    targets: the shapes decoded at every (batch, alpha, k), one cell per batch size (random context
    rows), the configurations shuffled per round (seeded), contended runs re-run (``min_share``,
    ``max_reruns``: `specdec.measure.harness.sweep`); curve_only: shapes whose cost curve is
    measured (batch 1) but which are not decoded.  target_sizes / draft_sizes override the
    configs' shapes (tiny models for SMOKE runs and tests).  ``mode``: the forward of every curve
    and run (`specdec.engine.modes.forward_for`)."""
    made = lambda shape, sizes: pack_weights(build_model(real_size_config(shape, **(sizes or {})), generator=generator))  # noqa: E731
    rdraft = forward_for(made(draft, draft_sizes), mode)  # packed as `load_model` packs the family (`specdec.family.arena`)
    curve_rows, controlled = [], []
    for name in list(targets) + [t for t in curve_only if t not in targets]:
        target = forward_for(made(name, target_sizes), mode)
        params = param_count(target)
        curves = {}
        for B in (batches if name in targets else [1]):
            rc = cost_curve(target, n_values, context=context, batch=B, repeats=curve_repeats, generator=generator)
            rd = cost_curve(rdraft, [1], context=context, batch=B, repeats=curve_repeats, generator=generator)[0]
            curves[B] = ({r["n"]: r["median_s"] for r in rc}, draft_cost(rd["median_s"], rc[0]["median_s"]))
            curve_rows += [{"target": name, "params": params, **r, "draft_t1_s": rd["median_s"], "c": curves[B][1]}
                           for r in rc]
        if name not in targets:
            del target
            continue
        ids = torch.randint(0, int(target.config.vocab_size), (max(batches), context), generator=generator)  # (B, T)
        base_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        generate(target, ids[:1], drafter=rdraft, k=2, max_new_tokens=4, temperature=temperature,
                 verifier=ControlledAcceptance(0.5), generator=generator, mode=mode)  # warm-up: one-off costs
        cells = [Cell({"target": name, "batch": B}, ids[:B]) for B in batches]
        configs = _configs(target, rdraft, alphas, ks, new_tokens, temperature, mode)
        prices = _pilot(configs, cells, sorted(alphas)[len(alphas) // 2], pilot_rounds, base_seed + repeats)
        fixed = {(B, k, a, rnd): _pilot_prediction(prices[B, k], a, k, B, new_tokens, base_seed + rnd)
                 for B in batches for k in ks for a in alphas for rnd in range(repeats)}  # before the sweep
        rows = sweep(configs, cells, repeats=repeats, seed=lambda rnd, i: base_seed + rnd, shuffle=True,
                     shuffle_seed=base_seed, min_share=min_share, max_reruns=max_reruns)
        base = {(r["batch"], r["repeat"]): r["tokens_per_s"] for r in rows if r["k"] == 0}
        base_steps = {(r["batch"], r["repeat"]): _per_step(r) for r in rows if r["k"] == 0}
        base_t1 = {(r["batch"], r["repeat"]): _per_later_step(r, "t_target_steady") for r in rows if r["k"] == 0}
        for r in rows:
            if r["k"] == 0:
                continue
            a, k, B = r["alpha_set"], r["k"], r["batch"]
            curve, c = curves[B]
            controlled.append({"target": name, "params": params, "batch": B, "alpha_set": a, "k": k,
                               "repeat": r["repeat"], "tokens_per_s": r["tokens_per_s"],
                               "baseline_tokens_per_s": base[(B, r["repeat"])],
                               "speedup": r["tokens_per_s"] / base[(B, r["repeat"])],
                               "predicted_ext": speedup(a, k, c, verify_cost=curve[k + 1] / curve[1]),
                               "predicted_toy": speedup(a, k, c), "c": c, "verify_cost": curve[k + 1] / curve[1],
                               "tokens_per_step": _per_step(r), "baseline_tokens_per_step": base_steps[(B, r["repeat"])],
                               "predicted_steps": _per_step(r) / base_steps[(B, r["repeat"])] / (curve[k + 1] / curve[1]
                                                                                                 + k * c),
                               **_inloop(r, base_t1[(B, r["repeat"])], base_steps[(B, r["repeat"])]),
                               "predicted_pilot": fixed[B, k, a, r["repeat"]][0], "verify_pilot": prices[B, k][0],
                               "c_pilot": prices[B, k][1], "host_pilot": prices[B, k][2],
                               "host_base_pilot": prices[B, k][3],
                               "steps_as_predicted": _per_step(r) == fixed[B, k, a, r["repeat"]][1],
                               "cpu_share": r["cpu_share"], "reruns": r["reruns"]})
        del target
    return {"cost_curve": curve_rows, "controlled": controlled, "draft_params": param_count(rdraft)}


def _pilot(configs: list[Config], cells: list[Cell], alpha: float, rounds: int, seed: int) -> dict:
    """{(batch, k): (T_loop(k+1)/T_loop(1), c_loop, h_k, h_0)}: the in-loop prices (`_inloop`'s) of a
    pilot of ``rounds`` rounds, on every cell, of the baseline, each k at ``alpha`` and the baseline
    again, seeded ``seed`` + round (above the timed runs' seeds), with the engine's work per step of
    the run and of the baseline (module docstring, item 4): medians over rounds, each run against its
    round's two baselines' mean."""
    if rounds < 1:
        raise ValueError(f"the pilot needs at least one round, got {rounds}")
    base = next(c for c in configs if c.labels["k"] == 0)
    at = [c for c in configs if c.labels["k"] > 0 and c.labels["alpha_set"] == alpha]
    got: dict = {}
    for rnd in range(rounds):
        for cell in cells:
            B = cell.labels["batch"]
            first = base.run(cell.inputs, seed + rnd)
            runs = [(c.labels["k"], c.run(cell.inputs, seed + rnd)) for c in at]
            bases = (first, base.run(cell.inputs, seed + rnd))
            t1 = float(np.mean([_per_later_step(b, "t_target_steady") for b in bases]))
            h0 = float(np.mean([engine_per_step(b) for b in bases])) / t1
            for k, run in runs:
                got.setdefault((B, k), []).append((_per_later_step(run, "t_target_steady") / t1,
                                                   _per_later_step(run, "t_draft_forward_steady") / k / t1,
                                                   engine_per_step(run) / t1, h0))
    return {key: tuple(float(np.median([x[i] for x in xs])) for i in range(4)) for key, xs in got.items()}


def _pilot_prediction(price: tuple, alpha: float, k: int, batch: int, new_tokens: int, seed: int) -> tuple:
    """(S_pilot, tokens per step) of the run seeded ``seed`` (module docstring, item 4): its steps from
    the seeded instrument, the baseline's one token per row per step, the pilot's prices; the run's
    row records whether its steps were the predicted ones (``steps_as_predicted``)."""
    steps = controlled_steps(alpha, k, batch, new_tokens, seed + ACCEPT_SEED)
    per_step = _per_step({"tokens": sum(e for *_, e in steps), "first_step_tokens": steps[0][2], "steps": len(steps)})
    verify, c, host, host0 = price
    return per_step / batch * (1 + host0) / (verify + k * c + host), per_step


def _per_later_step(run: dict, key: str) -> float:
    """Seconds of ``key`` (a ``*_steady`` time) per step after the first."""
    return run[key] / max(int(run["steps"]) - 1, 1)


def _inloop(run: dict, base_t1: float, base_per_step: float) -> dict:
    """The extended model with the steps as the loop took them, its forward terms priced as the loop
    paid for them: T(k+1)/T(1) as the run's verification seconds per step over the baseline's target
    seconds per step, and c as the run's draft seconds per drafted token over the same.  A
    reconstruction, not a prediction: with both forward terms measured, measured / reconstructed is
    (1 - the run's share of steady time outside its forwards) / (1 - the baseline's), so it says
    how much the engine's own work per step (and the time between steps), which the extended model
    does not price, differs between the two runs."""
    k = int(run["k"])
    verify = _per_later_step(run, "t_target_steady") / base_t1
    c = _per_later_step(run, "t_draft_forward_steady") / k / base_t1
    return {"verify_inloop": verify, "c_inloop": c,
            "predicted_inloop": _per_step(run) / base_per_step / (verify + k * c)}


def _per_step(run: dict) -> float:
    """Tokens a run emitted per step after its first (all rows together): what the steps really
    advanced, the batch's slowest row and the token budget's cut included."""
    return (run["tokens"] - run["first_step_tokens"]) / max(int(run["steps"]) - 1, 1)


def speedup_vs_alpha(controlled, level: float = 0.95) -> list[dict]:
    """The surface's table: per (target, batch, k, alpha) the median measured speedup over rounds with
    its paired bootstrap interval and verdict, and the simultaneous interval over every point of the
    surface (`specdec.measure.protocol.comparison`: each round's baseline against the same round's
    run), and the two predictions."""
    rows = records(controlled)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["target"], r.get("batch", 1), r["k"], r["alpha_set"]), []).append(r)
    out = []
    order = {t: i for i, t in enumerate(dict.fromkeys(r["target"] for r in rows))}
    for (name, B, k, a), ra in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], *kv[0][1:])):
        c = comparison([1 / r["baseline_tokens_per_s"] for r in ra], [1 / r["tokens_per_s"] for r in ra],
                       level=level, family_size=len(groups))
        out.append(dict(target=name, batch=B, k=k, alpha_set=a, runs=len(ra), speedup_median=c["median"],
                        speedup_lo=c["lo"], speedup_hi=c["hi"], verdict=c["verdict"], speedup_lo_sim=c["lo_sim"],
                        speedup_hi_sim=c["hi_sim"], verdict_sim=c["verdict_sim"], pairs_sim=c["pairs_sim"],
                        predicted_ext=ra[0]["predicted_ext"], predicted_toy=ra[0]["predicted_toy"],
                        predicted_steps=float(np.median([r["predicted_steps"] for r in ra])),
                        predicted_inloop=float(np.median([r.get("predicted_inloop", np.nan) for r in ra])),
                        predicted_pilot=float(np.median([r.get("predicted_pilot", np.nan) for r in ra]))))
    return out
