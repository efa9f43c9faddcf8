"""The numbers chapter 06's prose quotes, read from its tables (`specdec.chapters.ch06.summary`
computes the tables; this module only picks, counts and words what they hold).

Example: headline(summary, prediction, temperature=1.0, output_len=256, batch=1, k_ref=2)["n_faster"]
"""

from __future__ import annotations

import numpy as np

from specdec.chapters.ch06.summary import CELL, groups, paired
from specdec.measure.protocol import repeats_for_half_width, simultaneous_words
from specdec.report.formatting import config_text
from specdec.io.results import records

__all__ = ["SHOWN", "headline", "curve_values", "interleave_values", "curve_drift", "breakdown_values",
           "pairs_needed", "shown", "misses_markdown", "dynamic_values", "best_draft_values",
           "explained_words"]

SHOWN = ["setting", "speedup", "speedup_lo", "speedup_hi", "verdict", "tokens_per_step", "alpha_mle"]  # 7 columns
# the columns chapter 06's smaller tables show, with their headers (`specdec.report.formatting.show`)
RULE_COLUMNS = {"draft": None, "beta": None, "beta_from": "beta from", "c": None, "k_best": None,
                "predicted": "predicted speedup (a priori)",
                "best_speculative": "best with drafting, k >= 1 (the rule's rank)"}  # the choice: named below
DRAFT_COLUMNS = {"draft": None, "speedup": None, "speedup_lo": "low", "speedup_hi": "high", "verdict": None,
                 "tokens_per_step": None, "rule_predicted": "predicted a priori"}
OUTSIDE_FORWARDS = ("draft bookkeeping", "process + verify", "rollback", "other")  # work outside any model forward


def breakdown_values(breakdown, config: str) -> dict:
    """The target-forward share and the share outside any model forward of one configuration."""
    share = {r["part"]: r["share_of_total"] for r in records(breakdown) if r["config"] == config}
    return {"target_share_kref": float(share["target forward"]),
            "overhead_share_kref": float(sum(share[p] for p in OUTSIDE_FORWARDS))}


def headline(summary, pred_summary, *, temperature: float, output_len: int, batch: int, k_ref: int,
             tolerance: float = 0.10) -> dict:
    """The numbers the prose quotes: counts of words, the best configuration with its interval, the
    reference configuration, the cost model's hit rate, and the load record."""
    rows = [r for r in records(summary) if r["config"] != "baseline"]
    best = max(rows, key=lambda r: r["speedup"])
    ref = next(r for r in rows if (r["temperature"], r["output_len"], r["batch"], r["config"]) ==
               (temperature, output_len, batch, f"k={k_ref}"))
    pr = records(pred_summary)
    return {"n_spec": len(rows), "n_faster": sum(r["verdict"] == "faster" for r in rows),
            "n_slower": sum(r["verdict"] == "slower" for r in rows),
            "n_undecided": sum(r["verdict"] not in ("faster", "slower") for r in rows),
            "sim_words": simultaneous_words([r["verdict_sim"] for r in rows], [r["runs"] for r in rows], len(rows)),
            "best_config": config_text(best), "best_speedup": best["speedup"], "best_lo": best["speedup_lo"],
            "best_hi": best["speedup_hi"], "best_words": best["verdict"], "ref_speedup": ref["speedup"],
            "ref_lo": ref["speedup_lo"], "ref_hi": ref["speedup_hi"], "ref_words": ref["verdict"],
            "ref_alpha": ref["alpha_mle"], "ref_tokens_per_step": ref["tokens_per_step"],
            "half_width_median": float(np.nanmedian([r["half_width"] for r in rows])),
            "half_width_max": float(np.nanmax([r["half_width"] for r in rows])),
            "n_within_3pct": sum(r["half_width"] <= 0.03 for r in rows),
            "n_pred": len(pr), "n_pred_within": sum(bool(r["within"]) for r in pr),
            "ratio_min": float(min(r["ratio"] for r in pr)), "ratio_max": float(max(r["ratio"] for r in pr)),
            "n_pred_within_isolated": sum(abs(r["ratio_isolated"] - 1) <= tolerance for r in pr),
            "pred_dir_words": _direction_words(pr, tolerance), "pred_explained_words": explained_words(pr),
            "fwd_min": float(min(r["forward_vs_curve"] for r in pr)), "fwd_max": float(max(r["forward_vs_curve"] for r in pr)),
            "calibration_min": float(min(r["calibration"] for r in pr)),
            "calibration_max": float(max(r["calibration"] for r in pr)),
            "cpu_share_min": float(min(r["cpu_share_min"] for r in records(summary))),
            "reruns": int(sum(r["reruns"] for r in records(summary)))}


def explained_words(pred_rows) -> str:
    """How many of the cost model's misses one measured term closes (`summary.prediction_summary`'s
    ``explained``), ending the page's sentence "re-priced with that measured term, ...": 'both misses
    come within the tolerance, ...', '4 of the 6 misses ...', or, for a table made before the in-loop
    re-pricing, that it was not computed."""
    rows = records(pred_rows)
    misses = [r for r in rows if not bool(r["within"])]
    if not misses:
        return "there is no miss to explain"
    if "explained" not in rows[0] or any(r["ratio_inloop"] != r["ratio_inloop"] for r in misses):
        return "the in-loop re-pricing was not computed for this run (its table predates it)"
    n, m = sum(bool(r["explained"]) for r in misses), len(misses)
    if m == 1:
        return f"the one miss {'comes' if n else 'does not come'} within the tolerance"
    if n == m:
        return f"{'both' if m == 2 else f'all {m}'} misses come within the tolerance, so each sits on that one term"
    return (f"{n} of the {m} misses come within the tolerance; the other {m - n} do not (their draft's "
            "forwards, or a term their reason names, miss too)")


def _direction_words(pred_rows, tolerance: float) -> str:
    """Which way the cost model errs: '3 of 24 over-predicted (measured below predicted), 2 of them
    beyond the tolerance; 21 under-predicted, 7 beyond'."""
    n = len(pred_rows)
    over = [r for r in pred_rows if r["ratio"] < 1]
    under = [r for r in pred_rows if r["ratio"] >= 1]
    far = lambda rows: sum(not bool(r["within"]) for r in rows)  # noqa: E731
    return (f"{len(over)} of {n} over-predicted (measured below predicted), {far(over)} of them beyond the "
            f"{tolerance:.0%} tolerance; {len(under)} under-predicted, {far(under)} beyond it")


def curve_values(curve, batch: int, context: int, n: int, draft: str) -> dict:
    """T(1) in ms, T(n)/T(1) and c at one batch size and context (the 'before' measurement)."""
    rows = [r for r in records(curve) if r["batch"] == batch and r["context"] == context and r["when"] == "before"]
    t = {r["n"]: r["median_s"] for r in rows if r["model"] == "target"}
    d1 = next(r["median_s"] for r in rows if r["model"] == draft and r["n"] == 1)
    return {"t1_ms": 1e3 * t[1], "tk_n": n, "tk_ratio": t[n] / t[1], "c_b1": d1 / t[1],
            "t2_ratio": t[2] / t[1] if 2 in t else float("nan")}


def interleave_values(curve, batch: int, context: int, n: int, draft: str) -> dict:
    """At one batch and context: the target's T(n) right after a draft forward over T(n) back to back,
    and the draft's T_d(1) right after a target forward over T_d(1) back to back (a cost_curves
    table measured with interleaved=True)."""
    rows = [r for r in records(curve) if r["batch"] == batch and r["context"] == context]
    t = {(r["model"], r["n"]): r["median_s"] for r in rows}
    return {"loop_ratio": t[(f"target after {draft}", n)] / t[("target", n)],
            "loop_draft_ratio": t[(f"{draft} after target", 1)] / t[(draft, 1)]}


def curve_drift(*curves) -> dict:
    """How far the target's T(n) moved between the measurements before and after the decoding runs
    (cost_curves tables, ``when`` = before / after): median and largest |after / before - 1| over
    every (n, batch, context) measured both times."""
    rows = [r for c in curves for r in records(c) if r["model"] == "target"]
    before = {(r["n"], r["batch"], r["context"]): r["median_s"] for r in rows if r["when"] == "before"}
    d = [abs(r["median_s"] / before[(r["n"], r["batch"], r["context"])] - 1) for r in rows if r["when"] == "after"
         and (r["n"], r["batch"], r["context"]) in before]
    return {"drift_median": float(np.median(d)) if d else float("nan"), "drift_max": float(max(d, default=np.nan))}


def pairs_needed(runs) -> dict:
    """How many (group, round) pairs each speculative configuration would need for a 3% half-width
    (`specdec.measure.protocol.repeats_for_half_width` on the relative standard deviation of its
    paired speedups): the median and largest over configurations, and the fewest and most pairs a
    configuration had."""
    rows = [r for r in paired(runs) if r["config"] != "baseline"]
    need, had = [], []
    for rr in groups(rows, CELL + ("config",)).values():
        v = np.array([r["speedup"] for r in rr])
        need.append(repeats_for_half_width(float(v.std(ddof=1) / np.median(v))) if v.size > 1 else 0)
        had.append(v.size)
    return {"pairs_needed_median": int(np.median(need)), "pairs_needed_max": int(max(need)), "pairs_had": int(min(had)),
            "pairs_had_max": int(max(had))}


def shown(summary):
    """The summary's columns a page shows (`SHOWN`; the rest are in its CSV): the configuration in
    words (`config_text`), the speedup with its interval and words, tokens per step and alpha; the
    baseline's verdict written as what it is."""
    return summary.assign(setting=[config_text(r) for r in records(summary)],
                          verdict=summary["verdict"].where(summary["config"] != "baseline", "(the baseline)"))[SHOWN]


def misses_markdown(pred) -> str:
    """One Markdown bullet per configuration the prediction missed, with its ratio and reason."""
    rows = [r for r in records(pred) if not r["within"]]
    return "\n".join(f"* {config_text(r)}: measured/predicted {r['ratio']:.2f} "
                     f"({r['ratio_lo']:.2f}-{r['ratio_hi']:.2f}); {r['reason']}."
                     for r in rows) or "*Every configuration is within the tolerance.*"


def dynamic_values(dyn) -> dict:
    """How many cells the dynamic rule was faster / slower than the best fixed k (table
    dynamic_vs_fixed), and what the simultaneous intervals over the cells allow."""
    rows = records(dyn)
    return {"dyn_n": len(rows), "dyn_faster": sum(r["verdict"] == "faster" for r in rows),
            "dyn_slower": sum(r["verdict"] == "slower" for r in rows),
            "dyn_sim_words": simultaneous_words([r["verdict_sim"] for r in rows], [r["pairs"] for r in rows],
                                                len(rows))}


def best_draft_values(by_draft) -> dict:
    """The draft comparison's highest median with its interval and words, and the rule's choice:
    its predicted ratio and its measured speedup with interval and words."""
    rows = records(by_draft)
    b = max(rows, key=lambda r: r["speedup"])
    c = next(r for r in rows if bool(r["chosen"]))
    return {"best_draft": b["draft"], "best_draft_speedup": b["speedup"], "best_draft_lo": b["speedup_lo"],
            "best_draft_hi": b["speedup_hi"], "best_draft_words": b["verdict"], "chosen_predicted": c["rule_predicted"],
            "chosen_speedup": c["speedup"], "chosen_lo": c["speedup_lo"], "chosen_hi": c["speedup_hi"],
            "chosen_words": c["verdict"],
            "draft_sim_words": simultaneous_words([r["verdict_sim"] for r in rows], [r["runs"] for r in rows],
                                                  len(rows))}
