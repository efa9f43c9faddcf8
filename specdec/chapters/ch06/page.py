"""What chapter 06's page shows from its tables (`specdec.chapters.ch06.summary` computes them):
counts, medians with their interval ends, one-word verdicts (`specdec.measure.protocol`) and tables
of at most a dozen rows.  The sentences around them are the notebook's Markdown; nothing here
writes one.

Example: sweep_values(summary)["n_faster"] -> how many speculative configurations were faster by
their own 95% interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specdec.chapters.ch06.summary import CELL, groups, paired
from specdec.io.results import read_tables, records
from specdec.measure.prediction import regime_costs
from specdec.measure.protocol import FASTER, ONE_RUN, OUT_OF_REACH, SLOWER, UNDECIDED, repeats_for_half_width
from specdec.report.formatting import interval_column, temperature_text

__all__ = ["curve_values", "curve_drift", "breakdown_values", "sweep_values", "pairs_needed", "prediction_values",
           "miss_table", "dynamic_values", "draft_values", "draft_table", "unfavourable", "regime_table",
           "hf_table", "size_label", "surface_tables", "surface_values", "INTERVAL", "SHORT", "DIGITS", "SHOWN"]

INTERVAL = "95% interval"  # the header of an interval column
DIGITS = 3  # decimals of a speedup, a cost ratio and their interval ends: one fixed number per column
SHORT = (OUT_OF_REACH, ONE_RUN)  # the verdicts of a comparison whose pairs cannot reach the level
OUTSIDE_FORWARDS = ("draft bookkeeping", "process + verify", "rollback", "other")  # work outside any model forward


def _fixed(values, digits: int = DIGITS) -> list[str]:
    """Numbers as text with ``digits`` decimals ("1.200", not "1.2"), blank where missing."""
    return ["" if v is None or v != v else f"{float(v):.{digits}f}" for v in values]


def _count(rows, *words, col: str = "verdict") -> int:
    return sum(r[col] in words for r in rows)


def curve_values(curve, batch: int, context: int, n: int, draft: str) -> dict:
    """T(1) in ms, T(n)/T(1), T(2)/T(1) and c = T_d(1)/T(1) at one batch size and context, from the
    measurement before the runs.  Example: T(1) = 0.010 s, T(3) = 0.015 s, n = 3 -> tk_ratio 1.5."""
    rows = [r for r in records(curve) if r["batch"] == batch and r["context"] == context and r["when"] == "before"]
    t = {r["n"]: r["median_s"] for r in rows if r["model"] == "target"}
    d1 = next(r["median_s"] for r in rows if r["model"] == draft and r["n"] == 1)
    return {"t1_ms": 1e3 * t[1], "tk_n": n, "tk_ratio": t[n] / t[1], "c_b1": d1 / t[1],
            "t2_ratio": t[2] / t[1] if 2 in t else float("nan")}


def curve_drift(*curves) -> dict:
    """How far the target's T(n) moved between the measurements before and after the runs (cost
    curve tables, ``when`` = before / after): median and largest |after / before - 1| over every
    (n, batch, context) measured both times; NaN when nothing was measured after."""
    rows = [r for c in curves for r in records(c) if r["model"] == "target"]
    before = {(r["n"], r["batch"], r["context"]): r["median_s"] for r in rows if r["when"] == "before"}
    d = [abs(r["median_s"] / before[(r["n"], r["batch"], r["context"])] - 1) for r in rows if r["when"] == "after"
         and (r["n"], r["batch"], r["context"]) in before]
    return {"drift_median": float(np.median(d)) if d else float("nan"), "drift_max": float(max(d, default=np.nan))}


def breakdown_values(breakdown, config: str) -> dict:
    """The target-forward share and the share outside any model forward of one configuration's wall
    time (a `summary.time_breakdown` table)."""
    share = {r["part"]: r["share_of_total"] for r in records(breakdown) if r["config"] == config}
    return {"target_share_kref": float(share["target forward"]),
            "overhead_share_kref": float(sum(share[p] for p in OUTSIDE_FORWARDS))}


def sweep_values(summary) -> dict:
    """Over the speculative configurations of a `summary.summary_table`: how many each verdict
    (too few pairs apart from undecided, as `protocol.level_verdict` words them), the highest median
    with its interval, the precision reached (half-widths; how many reach the 3% aim), the fewest
    and most pairs a configuration had, and the load record (lowest CPU share, re-runs)."""
    rows = [r for r in records(summary) if r["config"] != "baseline"]
    best = max(rows, key=lambda r: r["speedup"])
    return {"n_spec": len(rows), "n_faster": _count(rows, FASTER), "n_slower": _count(rows, SLOWER),
            "n_undecided": _count(rows, UNDECIDED), "n_short": _count(rows, *SHORT),
            "best_speedup": best["speedup"], "best_lo": best["speedup_lo"], "best_hi": best["speedup_hi"],
            "half_width_median": float(np.nanmedian([r["half_width"] for r in rows])),
            "half_width_max": float(np.nanmax([r["half_width"] for r in rows])),
            "n_within_3pct": sum(r["half_width"] <= 0.03 for r in rows),
            "pairs_had": int(min(r["runs"] for r in rows)), "pairs_had_max": int(max(r["runs"] for r in rows)),
            "cpu_share_min": float(min(r["cpu_share_min"] for r in records(summary))),
            "reruns": int(sum(r["reruns"] for r in records(summary)))}


def pairs_needed(runs) -> dict:
    """The (group, round) pairs each speculative configuration would need for a 3% half-width
    (`protocol.repeats_for_half_width` on the relative standard deviation of its paired speedups):
    the median and the largest over configurations."""
    speedups = [np.array([r["speedup"] for r in rr])
                for rr in groups([r for r in paired(runs) if r["config"] != "baseline"], CELL + ("config",)).values()]
    need = [repeats_for_half_width(float(v.std(ddof=1) / np.median(v))) if v.size > 1 else 0 for v in speedups]
    return {"pairs_needed_median": int(np.median(need)), "pairs_needed_max": int(max(need))}


def prediction_values(pred, tolerance: float) -> dict:
    """Over a `summary.prediction_summary` table: configurations within ``tolerance`` (calibrated,
    and with the isolated curve alone), the range of measured / predicted, over- (ratio < 1) and
    under-predicted counts, the range of the in-loop over calibrated-curve verification time and of
    the calibration, and the misses by measured reason (`summary.REASONS`) with those the in-loop
    term closes (``n_closed``)."""
    pr = records(pred)
    miss = [r for r in pr if not bool(r["within"])]
    rng = lambda col: (float(min(r[col] for r in pr)), float(max(r[col] for r in pr)))  # noqa: E731
    (rmin, rmax), (fmin, fmax), (cmin, cmax) = rng("ratio"), rng("forward_vs_curve"), rng("calibration")
    return {"n_pred": len(pr), "n_pred_within": len(pr) - len(miss), "ratio_min": rmin, "ratio_max": rmax,
            "n_pred_within_isolated": sum(abs(r["ratio_isolated"] - 1) <= tolerance for r in pr),
            "n_over": sum(r["ratio"] < 1 for r in pr), "n_under": sum(r["ratio"] >= 1 for r in pr),
            "fwd_min": fmin, "fwd_max": fmax, "calibration_min": cmin, "calibration_max": cmax,
            "n_miss": len(miss), "n_miss_forwards": _count(miss, "verification forwards", col="reason"),
            "n_miss_spread": _count(miss, "pairs spread", col="reason"),
            "n_closed": sum(bool(r.get("explained", False)) for r in miss)}


def miss_table(pred, tolerance: float) -> pd.DataFrame:
    """The cost model's predictions as one row of counts (`prediction_values`), so that the page
    reads right for any count, zero included: within ``tolerance`` with the calibrated curve and
    with the isolated curve alone, the misses, those on the verification forwards, those the
    in-loop re-pricing closes, and those on the pairs' spread."""
    v = prediction_values(pred, tolerance)
    return pd.DataFrame([{"within, calibrated": v["n_pred_within"],
                          "within, uncalibrated": v["n_pred_within_isolated"], "misses": v["n_miss"],
                          "on the forwards": v["n_miss_forwards"], "closed re-priced": v["n_closed"],
                          "on the spread": v["n_miss_spread"]}])


def dynamic_values(dyn) -> dict:
    """How many cells the dynamic rule was faster / slower than the best fixed k, undecided, and in
    how many the pairs were too few for an interval at 95% (a `summary.dynamic_vs_fixed` table):
    the four counts add up to the cells."""
    rows = records(dyn)
    return {"dyn_n": len(rows), "dyn_faster": _count(rows, FASTER), "dyn_slower": _count(rows, SLOWER),
            "dyn_undecided": _count(rows, UNDECIDED), "dyn_short": _count(rows, *SHORT)}


def draft_values(by_draft, rule) -> dict:
    """The rule's chosen draft (`draft_choice`): its predicted speedup and k, and its measured
    speedup with interval and verdict (a `summary.draft_summary` table and the rule's)."""
    c = next(r for r in records(by_draft) if bool(r["chosen"]))
    k = next(int(r["k_best"]) for r in records(rule) if bool(r["chosen"]))
    return {"rule_predicted": c["rule_predicted"], "rule_k": k, "chosen_speedup": c["speedup"],
            "chosen_lo": c["speedup_lo"], "chosen_hi": c["speedup_hi"], "chosen_verdict": c["verdict"]}


def draft_table(by_draft) -> pd.DataFrame:
    """The draft comparison as the page shows it: beta, c and the rule's a-priori prediction beside
    the measured speedup, its interval and verdict, fastest first."""
    t = pd.DataFrame(records(by_draft)).sort_values("speedup", ascending=False)
    return pd.DataFrame({"draft": t["draft"], "beta": _fixed(t["beta"]), "c": _fixed(t["c"]),
                         "predicted a priori": _fixed(t["rule_predicted"]), "speedup": _fixed(t["speedup"]),
                         INTERVAL: interval_column(t, "speedup_lo", "speedup_hi", DIGITS), "verdict": t["verdict"]})


SHOWN = 8  # rows of a list the page shows in full only as its CSV (the slowest first)


def unfavourable(summary) -> pd.DataFrame:
    """The speculative configurations whose median speedup is below 1, slowest first: configuration,
    temperature, output length, batch, speedup, interval and verdict (the page shows the first
    `SHOWN`, the CSV every one)."""
    t = pd.DataFrame(records(summary))
    t = t[(t["config"] != "baseline") & (t["speedup"] < 1)].sort_values("speedup")
    return pd.DataFrame({"config": t["config"], "temperature": [temperature_text(x, "") for x in t["temperature"]],
                         "output_len": t["output_len"], "batch": t["batch"], "speedup": _fixed(t["speedup"]),
                         INTERVAL: interval_column(t, "speedup_lo", "speedup_hi", DIGITS), "verdict": t["verdict"]})


def regime_table(regimes) -> pd.DataFrame:
    """One row per pair of a `prediction.regime_rows` table (`prediction.regime_costs`): where its costs
    were timed, T(2)/T(1), c, and the break-even alpha (the smallest at which some k pays; "none"
    when none does)."""
    t = pd.DataFrame(regime_costs(regimes))
    be = ["none" if v == np.inf else f"{v:.{DIGITS}f}" for v in t["break_even"]]
    return pd.DataFrame({"pair": t["pair"], "costs timed": t["timed"], "$T(2)/T(1)$": _fixed(t["t2_ratio"]),
                         "$c$": _fixed(t["c"]), r"break-even $\alpha$": be})


def hf_table(hf) -> pd.DataFrame:
    """`summary.hf_summary` rows as the page shows them: ratio, interval, verdict and pairs."""
    t = pd.DataFrame(records(hf))
    return pd.DataFrame({"comparison": t["comparison"], "ratio": _fixed(t["median"]),
                         INTERVAL: interval_column(t, "lo", "hi", DIGITS), "verdict": t["verdict"], "pairs": t["pairs"]})


def surface_tables(folder, allow_smoke: bool = False) -> dict:
    """`make surface`'s committed tables under ``folder`` ({name: DataFrame}), with its parameters
    (``params``: `specdec.cli.surface.PARAMS` as run) and the draft's parameter count.  A ``--smoke``
    run's tables (tiny shapes: numbers that mean nothing) are refused unless ``allow_smoke``."""
    t = read_tables(folder, ("cost_curve", "controlled", "speedup_vs_alpha", "shapes"))
    params = t["shapes"].attrs["meta"]["provenance"]["parameters"]
    if params.get("smoke") and not allow_smoke:
        raise ValueError(f"{folder} holds a --smoke run of the surface (tiny shapes); run `make surface`")
    return {**t, "params": params, "draft_params": int(t["shapes"]["draft_params"].iloc[0])}


def size_label(params: int) -> str:
    """A parameter count as prose: 124439808 -> "124M", 3290000 -> "3.3M"."""
    return f"{params / 1e6:.0f}M" if params >= 1e7 else f"{params / 1e6:.1f}M"


def surface_values(cost_curve, controlled, table, draft_params: int, n: int, tolerance: float = 0.10) -> dict:
    """The surface's numbers for the last decoded target: T(n)/T(1) and c at batch 1; points faster /
    slower by their 95% interval; the best median with its interval and where (alpha, k, batch); the
    median measured / predicted over the points with the count within ``tolerance`` (``table``:
    `specdec.measure.surface.speedup_vs_alpha`) for the extended model with E[L] (``real_ratio_*``),
    with the run's steps (``real_steps_*``), fixed before the runs (``real_pilot_*``) and idealized
    (``real_toy_med``); the median relative half-width; the sizes of that target and of the draft."""
    curve, ctrl = records(cost_curve), records(controlled)
    name = [r["target"] for r in ctrl][-1]
    last = [r for r in curve if r["target"] == name and r.get("batch", 1) == 1]
    table = [r for r in records(table) if r["target"] == name]
    best = max(table, key=lambda r: r["speedup_median"])
    ratio = lambda col: [r["speedup_median"] / r[col] for r in table]  # noqa: E731
    near = lambda col: sum(abs(x - 1) <= tolerance for x in ratio(col))  # noqa: E731
    return {"real_ratio": float(next(r["ratio"] for r in last if r["n"] == n)), "real_c": float(last[0]["c"]),
            "real_points": len(table), "real_faster": sum(r["verdict"] == "faster" for r in table),
            "real_slower": sum(r["verdict"] == "slower" for r in table),
            "real_best": float(best["speedup_median"]), "real_best_lo": float(best["speedup_lo"]),
            "real_best_hi": float(best["speedup_hi"]), "real_best_alpha": float(best["alpha_set"]),
            "real_best_k": int(best["k"]), "real_best_batch": int(best["batch"]),
            "real_ratio_med": float(np.median(ratio("predicted_ext"))), "real_within": near("predicted_ext"),
            "real_steps_med": float(np.median(ratio("predicted_steps"))), "real_steps_within": near("predicted_steps"),
            "real_pilot_med": float(np.median(ratio("predicted_pilot"))), "real_pilot_within": near("predicted_pilot"),
            "real_runs": sum(r["target"] == name for r in ctrl),
            "real_steps_predicted": sum(r["target"] == name and bool(r.get("steps_as_predicted", False)) for r in ctrl),
            "real_toy_med": float(np.median(ratio("predicted_toy"))),
            "real_half_width": float(np.median([(r["speedup_hi"] - r["speedup_lo"]) / 2 / r["speedup_median"]
                                                for r in table])),
            "real_target_size": size_label(next(r["params"] for r in curve if r["target"] == name)),
            "real_draft_size": size_label(draft_params)}
