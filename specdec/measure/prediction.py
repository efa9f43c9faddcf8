"""The cost model against every measured configuration: each run's steady-state time predicted from
terms measured in the same chapter run, then the predicted speedup set beside the measured one.

The terms (all measured; the engine's overhead o is the predicted run's own, every other term comes
from the isolated curves and, for the calibration, from the paired baseline run):
    T(n; A, ctx)   the target's forward appending n tokens at batch A to a cached context
                   ctx (`specdec.measure.cost_curve`), measured before and after the decoding runs
                   at ctx = prompt + half the output length (the mean context of a run); batch
                   sizes between two measured ones are interpolated linearly (rows leave a batch
                   when they finish, so later steps of a batch run have fewer rows)
    T_d(n; A, ctx) the draft's forward, n = 1 (a drafted token) and 2 (the catch-up forward after a
                   step whose drafts were all accepted, which also feeds the last)
                   Both measured outside the loop, and (interleaved, the default) the way the loop
                   runs them: the verification right after a draft forward, a step's first draft
                   forward right after a target forward (the other model's weights and activations
                   have just passed through the caches); the later drafts of a step back to back.
    o              the engine's own work per step outside every forward (t_step - t_target -
                   t_draft_forward), from the run itself: it is what the engine costs, not a model term
    the steps      what the run accepted: for every step after the first, its draft length k_s, its
                   active rows A_s and whether the previous step accepted all drafts (the
                   accepted-length histogram, with the batch's slowest row deciding when rows leave)

Predicted steady time of a run = sum over steps s >= 1 of
    T(k_s + 1; A_s) + T_d(1 or 2; A_s) + (k_s - 1) T_d(1; A_s) + o     (2 after a fully accepted step;
    a step with k_s = 0 costs T(1; A_s) + o),
and the predicted speedup of a (configuration, cell, repeat) is the baseline's predicted steady time
per token over the configuration's; the measured one is the same ratio of measured steady times
(`tokens_per_s`, after the first step, which feeds the prompt).  The synthesis (`regime_rows`): for each measured
cost curve, the best speed ratio over k at every alpha and the break-even alpha, the picture of the
article's alpha/k figure with this machine's verification costs in place of the unit cost.

Example:
    curve = lookup(curve_rows)                               # T(model, n, batch, context)
    pred = predicted_steady_s(run_row, curve, "draft-distilled", context=192)
"""

from __future__ import annotations

import numpy as np

from specdec.core.cost import best_k, break_even_alpha_best_k
from specdec.io.results import records

__all__ = ["step_profile", "lookup", "engine_per_step", "predicted_steady_s", "paired_predictions", "regime_rows",
           "regime_inputs", "regime_costs", "regime_points"]


def step_profile(stats) -> str:
    """The steps after the first as 'k,A,catch:count;...' (k drafted, A active rows, catch 1 when
    some row of the previous step accepted all its drafts, so the draft's next forward feeds two
    tokens), from a run's `DecodeStats`.
    Example: two steps after the first, k=2 on 1 row, the first fully accepted -> '2,1,0:1;2,1,1:1'."""
    counts: dict = {}
    prev_full = False
    for i, (s, (rows, n)) in enumerate(zip(stats.steps, stats.accepted)):
        if i >= 1:
            key = (int(s["k"]), int(s["active"]), int(prev_full and s["k"] > 0))
            counts[key] = counts.get(key, 0) + 1
        prev_full = s["k"] > 0 and max(n) >= s["k"]
    return ";".join(f"{k},{a},{c}:{m}" for (k, a, c), m in sorted(counts.items()))


def _parse(profile: str) -> list[tuple[int, int, int, int]]:
    out = []
    for part in filter(None, str(profile).split(";")):
        key, m = part.split(":")
        k, a, c = (int(x) for x in key.split(","))
        out.append((k, a, c, int(m)))
    return out


def lookup(curve_rows):
    """T(model, n, batch, context) in seconds from cost-curve rows (columns model, n, batch, context,
    median_s; several measurements of one point are averaged): linear in batch between measured
    batch sizes, linear in context between measured contexts and extended along the end segments
    beyond them (one measured context: constant).  A missing (model, n) or a batch outside the
    measured range is an error."""
    rows = records(curve_rows)
    pts: dict = {}
    for r in rows:
        pts.setdefault((r["model"], int(r["n"])), {}).setdefault(int(r["batch"]), {}).setdefault(
            int(r["context"]), []).append(float(r["median_s"]))

    def at_context(by_ctx: dict, context: float) -> float:
        cs = sorted(by_ctx)
        ts = [float(np.mean(by_ctx[c])) for c in cs]
        if len(cs) == 1:
            return ts[0]
        i = int(np.clip(np.searchsorted(cs, context) - 1, 0, len(cs) - 2))
        return ts[i] + (ts[i + 1] - ts[i]) * (context - cs[i]) / (cs[i + 1] - cs[i])

    def T(model: str, n: int, batch: int, context: float) -> float:
        by_b = pts.get((model, int(n)))
        if not by_b:
            raise KeyError(f"no cost-curve point for {model!r}, n={n}")
        bs = sorted(by_b)
        if not bs[0] <= batch <= bs[-1]:
            raise KeyError(f"batch {batch} outside the measured {bs} for {model!r}")
        return float(np.interp(batch, bs, [at_context(by_b[b], context) for b in bs]))

    return T


def _forwards(k: int, a: int, catch: int, T, draft: str, context: int, interleaved: bool) -> tuple[float, float]:
    """(target, draft) forward seconds of one step: k drafted on a rows, catch-up or not."""
    if k == 0:
        return T("target", 1, a, context), 0.0
    first = 2 if catch else 1  # a catch-up forward feeds the last accepted draft too
    if interleaved:  # the verification right after the drafts, the first draft right after a verification
        return (T(f"target after {draft}", k + 1, a, context),
                T(f"{draft} after target", first, a, context) + (k - 1) * T(draft, 1, a, context))
    return T("target", k + 1, a, context), T(draft, first, a, context) + (k - 1) * T(draft, 1, a, context)


def engine_per_step(run: dict) -> float:
    """A run's seconds per step after its first outside its model forwards (the engine's own work,
    its overhead o): from its t_step_steady, t_target_steady, t_draft_forward_steady and steps."""
    return (run["t_step_steady"] - run["t_target_steady"] - run["t_draft_forward_steady"]) / max(int(run["steps"]) - 1, 1)


def predicted_steady_s(run: dict, T, draft: str, *, context: int, interleaved: bool = True,
                       scale: float = 1.0) -> float:
    """A run's predicted time after its first step (module docstring); ``run`` needs step_profile,
    steps, t_step_steady, t_target_steady and t_draft_forward_steady (its own overhead o).
    ``interleaved``: each forward's time as measured right after the other model's (as in the
    loop); False: every forward's time measured back to back with itself.  ``scale`` multiplies
    every target forward (the calibration of `paired_predictions`)."""
    later = max(int(run["steps"]) - 1, 0)
    if later == 0:
        return float("nan")
    o = engine_per_step(run)
    total = 0.0
    for k, a, catch, m in _parse(run["step_profile"]):
        t, d = _forwards(k, a, catch, T, draft, context, interleaved)
        total += m * (scale * t + d + o)
    return total


def _target_s(run: dict, T, draft: str, context: int, interleaved: bool) -> float:
    """The run's target forwards after the first step as the (uncalibrated) curve prices them."""
    return sum(m * _forwards(k, a, c, T, draft, context, interleaved)[0] for k, a, c, m in _parse(run["step_profile"]))


def paired_predictions(runs, T, draft: str, *, keys: tuple, context_of, baseline: str = "baseline",
                       interleaved: bool = True) -> list[dict]:
    """One row per speculative run, paired with the baseline run of the same ``keys``.

    The baseline is measured, the speculative run predicted.  Calibration: isolated forwards need
    not cost what the same forwards cost inside a decoding loop (context growth, allocations,
    caches), so the target's curve is scaled by s = the paired baseline's in-loop target time over
    what the curve prices it at; the curve's shape T(n)/T(1), the draft's costs, the engine's
    overhead and the accepted lengths then predict the speculative run.  Columns: measured and
    predicted (calibrated) steady-state speedups and their ratio; ``predicted_isolated``, the same
    with s = 1 (the isolated curve alone); ``calibration`` s; and the diagnostics of a miss -- the
    in-loop target forwards of each run over what the curve prices them at, the overhead share, and
    ``predicted_inloop``: the prediction with the speculative run's target forwards re-priced at
    their measured in-loop time (a reconstruction, not a prediction: where measured over it is
    within a tolerance, the miss sits on that one measured term; what remains is the draft's).
    ``context_of(row)`` gives the mean context of a run (e.g. `specdec.chapters.ch06.runs.run_context`:
    a ragged batch's cache holds holes, so its forwards attend over more than the rows' tokens);
    ``context_ratio`` is the speculative run's over its baseline's."""
    rows = records(runs)
    base = {tuple(r[k] for k in keys): r for r in rows if r["config"] == baseline}
    steady = lambda x: (x["tokens"] - x["first_step_tokens"])  # noqa: E731
    out = []
    for r in rows:
        if r["config"] == baseline:
            continue
        b = base.get(tuple(r[k] for k in keys))
        if b is None:
            raise ValueError(f"no {baseline!r} run for {dict((k, r[k]) for k in keys)}: the design is not paired")
        ctx, ctx_b = context_of(r), context_of(b)
        iso, iso_b = _target_s(r, T, draft, ctx, interleaved), _target_s(b, T, draft, ctx_b, interleaved)
        s = b["t_target_steady"] / iso_b
        meas = r["tokens_per_s"] / b["tokens_per_s"]
        pred = {}
        for name, sc in (("predicted", s), ("predicted_isolated", 1.0)):  # calibrated: pb is b's measured time
            pb = predicted_steady_s(b, T, draft, context=ctx_b, interleaved=interleaved, scale=sc)
            pr = predicted_steady_s(r, T, draft, context=ctx, interleaved=interleaved, scale=sc)
            pred[name] = (pb / steady(b)) / (pr / steady(r))
            if name == "predicted":  # the same, the run's target forwards at what the loop paid for them
                pr_loop = pr - s * iso + r["t_target_steady"]
                pred["predicted_inloop"] = (pb / steady(b)) / (pr_loop / steady(r))
        out.append({**{k: r[k] for k in keys}, "config": r["config"], "k": r["k"], "measured": meas, **pred,
                    "measured_over_predicted": meas / pred["predicted"], "calibration": s,
                    "target_inloop_over_isolated": r["t_target_steady"] / (s * iso),
                    "base_target_inloop_over_isolated": s, "context_ratio": ctx / ctx_b,
                    "overhead_share": 1 - (r["t_target_steady"] + r["t_draft_forward_steady"]) / r["t_step_steady"],
                    "tokens_per_step": steady(r) / max(int(r["steps"]) - 1, 1) / int(r["batch"])})  # per row
    return out


def regime_rows(pairs: dict, alphas, k_max: int) -> list[dict]:
    """The synthesis figure's curves: for each named (curve {n: seconds}, c), the best k and speed
    ratio at each alpha, with the pair's break-even alpha and T(2)/T(1) on every row."""
    out = []
    for name, (curve, c) in pairs.items():
        be = break_even_alpha_best_k(c, k_max, curve)
        for a in alphas:
            k, s = best_k(float(a), c, k_max, curve)
            out.append({"pair": name, "alpha": float(a), "k_best": k, "speedup": s, "c": float(c),
                        "t2_ratio": curve[2] / curve[1] if 2 in curve else float("nan"), "break_even": be})
    return out


def regime_inputs(curve_loop, real_curve, draft: str, *, batch: int, context: int) -> dict:
    """The synthesis figure's pairs: name -> ({n: seconds}, c).  The embedded pair as the loop runs
    it (T(1) back to back for plain decoding, T(n >= 2) right after a draft forward, c from the
    draft's first forward after a verification); each real-size shape from its cost-curve table."""
    rows = [r for r in records(curve_loop) if r["batch"] == batch and r["context"] == context]
    t = {r["n"]: r["median_s"] for r in rows if r["model"] == "target"}
    after = {r["n"]: r["median_s"] for r in rows if r["model"] == f"target after {draft}"}
    d1 = next(r["median_s"] for r in rows if r["model"] == f"{draft} after target" and r["n"] == 1)
    out = {f"embedded + {draft}": ({1: t[1], **{n: v for n, v in after.items() if n >= 2}}, d1 / t[1])}
    real: dict = {}
    for r in records(real_curve):
        if r.get("batch", 1) == batch:
            real.setdefault(r["target"], []).append(r)
    for name, g in real.items():
        out[f"{name} shape + draft-3m"] = ({r["n"]: r["median_s"] for r in g}, float(g[0]["c"]))
    return out


def regime_costs(curves) -> list[dict]:
    """One row per pair of a `regime_rows` table: where its costs were timed ("in the loop" for the
    embedded pair, whose `regime_inputs` are the loop's forwards; "cost curve" for a real-size
    shape), T(2)/T(1), c and the break-even alpha (inf: no k pays)."""
    first: dict = {}
    for r in records(curves):
        first.setdefault(r["pair"], r)
    return [{"pair": r["pair"], "timed": "in the loop" if str(r["pair"]).startswith("embedded") else "cost curve",
             "t2_ratio": float(r["t2_ratio"]), "c": float(r["c"]), "break_even": float(r["break_even"])}
            for r in first.values()]


def regime_points(summary, real_vs_alpha, draft: str, *, batch: int) -> list[dict]:
    """The measured configurations on the synthesis figure: the embedded pair's fixed-k runs at one
    batch size (measured alpha, steady-state speedup and interval) and the real-size controlled
    points at that batch size (set alpha, median speedup and interval)."""
    out = [{"pair": f"embedded + {draft}", "config": f"{r['config']}, L {r['output_len']}, T {r['temperature']:g}",
            "alpha": r["alpha_mle"], "speedup": r["steady_speedup"], "lo": r["steady_lo"], "hi": r["steady_hi"]}
           for r in records(summary) if r["batch"] == batch and str(r["config"]).startswith("k=")]
    out += [{"pair": f"{r['target']} shape + draft-3m", "config": f"k={r['k']}", "alpha": r["alpha_set"],
             "speedup": r["speedup_median"], "lo": r["speedup_lo"], "hi": r["speedup_hi"]}
            for r in records(real_vs_alpha) if r["batch"] == batch]
    return out

