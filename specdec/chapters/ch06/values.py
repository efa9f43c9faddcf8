"""The numbers chapter 06's prose quotes, read from its tables (`specdec.chapters.ch06.summary`
computes the tables; this module only picks, counts and words what they hold).

Example: headline(summary, prediction, temperature=1.0, output_len=256, batch=1, k_ref=2)["n_faster"]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specdec.chapters.ch06.summary import CELL, groups, paired
from specdec.measure.protocol import repeats_for_half_width, simultaneous_words
from specdec.report.formatting import config_text, temperature_text
from specdec.chapters.summary.findings import fastest_plain_values
from specdec.io.results import read_table, records

__all__ = ["SHOWN", "headline", "curve_values", "interleave_values", "curve_drift", "breakdown_values",
           "pairs_needed", "long_drafts", "shown", "misses_markdown", "dynamic_values", "best_draft_values",
           "bench_tables", "explained_words", "engine_values"]

SHOWN = ["setting", "speedup", "speedup_lo", "speedup_hi", "verdict", "tokens_per_step", "alpha_mle"]  # 7 columns
# the columns chapter 06's smaller tables show, with their headers (`specdec.report.formatting.show`)
RULE_COLUMNS = {"draft": None, "beta": None, "beta_from": "beta from", "c": None, "k_best": None,
                "predicted": "predicted speedup (a priori)",
                "best_speculative": "best with drafting, k >= 1 (the rule's rank)"}  # the choice: named below
DRAFT_COLUMNS = {"draft": None, "speedup": None, "speedup_lo": "low", "speedup_hi": "high", "verdict": None,
                 "tokens_per_step": None, "rule_predicted": "predicted a priori"}
BENCH_COLUMNS = {"comparison": None, "mode": None, "temperature": None, "batch": None, "k": None, "median": None,
                 "verdict": None}
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
    paired speedups): the median and largest over configurations, and the pairs each had."""
    rows = [r for r in paired(runs) if r["config"] != "baseline"]
    need, had = [], []
    for rr in groups(rows, CELL + ("config",)).values():
        v = np.array([r["speedup"] for r in rr])
        need.append(repeats_for_half_width(float(v.std(ddof=1) / np.median(v))) if v.size > 1 else 0)
        had.append(v.size)
    return {"pairs_needed_median": int(np.median(need)), "pairs_needed_max": int(max(need)), "pairs_had": int(min(had))}


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


def bench_tables(folder) -> tuple:
    """`make bench`'s committed comparisons and summary tables, read from ``folder``."""
    return read_table(Path(folder) / "bench_comparisons.csv"), read_table(Path(folder) / "bench_summary.csv")


def _mode(rows, mode: str = "eager") -> list[dict]:
    """The rows of one execution mode of `make bench`'s tables (a table from before the compiled
    mode has no mode column: all eager)."""
    return [r for r in records(rows) if r.get("mode", "eager") == mode]


def long_drafts(bench_summary, k_from: int) -> dict:
    """What `make bench` measured for our speculative decoding at k >= k_from (the draft lengths this
    chapter cuts): how many (temperature, k) settings, how many faster than plain decoding of the
    same mode, and the largest median; in the eager mode (the chapter's) unless the lean mode ran k
    it skipped (``long_mode``)."""
    def spec(mode):
        return [r for r in _mode(bench_summary, mode) if r["impl"] == "ours_spec" and r["k"] >= k_from]

    lean_ks = {r["k"] for r in spec("lean")}
    mode = "lean" if lean_ks - {r["k"] for r in spec("eager")} else "eager"  # eager unless it skipped some
    rows = spec(mode)
    return {"long_n": len(rows), "long_faster": sum(r["verdict"] == "faster" for r in rows),
            "long_max": float(max((r["speedup_median"] for r in rows), default=float("nan"))),
            "long_k_from": k_from, "long_k_to": int(max((r["k"] for r in rows), default=k_from)), "long_mode": mode}


# The glue names of `engine_values`, declared literally (the chapter's Markdown quotes them).
# A baseline ratio per (mode, temperature, batch cell: b1 at batch 1, bn at the bench's batch):
# the names of its median, interval ends and words.
BASELINE_KEYS = {
    ("eager", 0.0, "b1"): ("base_t0_b1", "base_t0_b1_lo", "base_t0_b1_hi", "base_t0_b1_words"),
    ("eager", 0.0, "bn"): ("base_t0_bn", "base_t0_bn_lo", "base_t0_bn_hi", "base_t0_bn_words"),
    ("eager", 1.0, "b1"): ("base_t1_b1", "base_t1_b1_lo", "base_t1_b1_hi", "base_t1_b1_words"),
    ("eager", 1.0, "bn"): ("base_t1_bn", "base_t1_bn_lo", "base_t1_bn_hi", "base_t1_bn_words"),
    ("lean", 0.0, "b1"): ("lbase_t0_b1", "lbase_t0_b1_lo", "lbase_t0_b1_hi", "lbase_t0_b1_words"),
    ("lean", 0.0, "bn"): ("lbase_t0_bn", "lbase_t0_bn_lo", "lbase_t0_bn_hi", "lbase_t0_bn_words"),
    ("lean", 1.0, "b1"): ("lbase_t1_b1", "lbase_t1_b1_lo", "lbase_t1_b1_hi", "lbase_t1_b1_words"),
    ("lean", 1.0, "bn"): ("lbase_t1_bn", "lbase_t1_bn_lo", "lbase_t1_bn_hi", "lbase_t1_bn_words"),
    ("compiled", 0.0, "b1"): ("cbase_t0_b1", "cbase_t0_b1_lo", "cbase_t0_b1_hi", "cbase_t0_b1_words"),
    ("compiled", 0.0, "bn"): ("cbase_t0_bn", "cbase_t0_bn_lo", "cbase_t0_bn_hi", "cbase_t0_bn_words"),
    ("compiled", 1.0, "b1"): ("cbase_t1_b1", "cbase_t1_b1_lo", "cbase_t1_b1_hi", "cbase_t1_b1_words"),
    ("compiled", 1.0, "bn"): ("cbase_t1_bn", "cbase_t1_bn_lo", "cbase_t1_bn_hi", "cbase_t1_bn_words"),
}
# A range over one comparison's rows of one mode (all of them, or only k = 0 "ar" / k > 0 "spec"):
# the names of `_range`'s values, in the order of RANGE_FIELDS.
RANGE_FIELDS = ("min", "max", "n", "met_median", "met_interval", "target", "faster", "slower")
RANGE_KEYS = {
    ("eager", "overhead", "all"): ("overhead_min", "overhead_max", "overhead_n", "overhead_met_median",
                                   "overhead_met_interval", "overhead_target", "overhead_faster", "overhead_slower"),
    ("eager", "efficiency", "all"): ("efficiency_min", "efficiency_max", "efficiency_n", "efficiency_met_median",
                                     "efficiency_met_interval", "efficiency_target", "efficiency_faster",
                                     "efficiency_slower"),
    ("eager", "vs_hf", "all"): ("vs_hf_min", "vs_hf_max", "vs_hf_n", "vs_hf_met_median", "vs_hf_met_interval",
                                "vs_hf_target", "vs_hf_faster", "vs_hf_slower"),
    ("lean", "overhead", "all"): ("loverhead_min", "loverhead_max", "loverhead_n", "loverhead_met_median",
                                  "loverhead_met_interval", "loverhead_target", "loverhead_faster",
                                  "loverhead_slower"),
    ("lean", "efficiency", "all"): ("lefficiency_min", "lefficiency_max", "lefficiency_n", "lefficiency_met_median",
                                    "lefficiency_met_interval", "lefficiency_target", "lefficiency_faster",
                                    "lefficiency_slower"),
    ("lean", "vs_hf", "all"): ("lvs_hf_min", "lvs_hf_max", "lvs_hf_n", "lvs_hf_met_median", "lvs_hf_met_interval",
                               "lvs_hf_target", "lvs_hf_faster", "lvs_hf_slower"),
    ("lean", "lean_gain", "ar"): ("lgain_ar_min", "lgain_ar_max", "lgain_ar_n", "lgain_ar_met_median",
                                  "lgain_ar_met_interval", "lgain_ar_target", "lgain_ar_faster", "lgain_ar_slower"),
    ("lean", "lean_gain", "spec"): ("lgain_spec_min", "lgain_spec_max", "lgain_spec_n", "lgain_spec_met_median",
                                    "lgain_spec_met_interval", "lgain_spec_target", "lgain_spec_faster",
                                    "lgain_spec_slower"),
    ("compiled", "vs_hf", "all"): ("cvs_hf_min", "cvs_hf_max", "cvs_hf_n", "cvs_hf_met_median", "cvs_hf_met_interval",
                                   "cvs_hf_target", "cvs_hf_faster", "cvs_hf_slower"),
    ("compiled", "compile_gain", "ar"): ("gain_ar_min", "gain_ar_max", "gain_ar_n", "gain_ar_met_median",
                                         "gain_ar_met_interval", "gain_ar_target", "gain_ar_faster", "gain_ar_slower"),
    ("compiled", "compile_gain", "spec"): ("gain_spec_min", "gain_spec_max", "gain_spec_n", "gain_spec_met_median",
                                           "gain_spec_met_interval", "gain_spec_target", "gain_spec_faster",
                                           "gain_spec_slower"),
}
GAINS = ("lean_gain", "compile_gain")  # ranges named only where the mode's table has the comparison
# The best speculative speedup of each mode: the names of its median, interval ends, words and setting.
SPEC_BEST_KEYS = {
    "eager": ("spec_best_eager", "spec_best_eager_lo", "spec_best_eager_hi", "spec_best_eager_words",
              "spec_best_eager_config"),
    "lean": ("spec_best_lean", "spec_best_lean_lo", "spec_best_lean_hi", "spec_best_lean_words",
             "spec_best_lean_config"),
    "compiled": ("spec_best_compiled", "spec_best_compiled_lo", "spec_best_compiled_hi", "spec_best_compiled_words",
                 "spec_best_compiled_config"),
}


def _range(rows, keys: tuple) -> dict:
    """Median range, count, counts meeting the target by median and by interval, the target, and the
    counts faster and slower of the rows, under ``keys`` (the names of RANGE_FIELDS, in order)."""
    med = [r["median"] for r in rows]
    return dict(zip(keys, (float(min(med, default=float("nan"))), float(max(med, default=float("nan"))), len(rows),
                           sum(bool(r["target_met_by_median"]) for r in rows),
                           sum(bool(r["target_met_by_interval"]) for r in rows), str(rows[0]["target"]) if rows else "",
                           sum(r["verdict"] == "faster" for r in rows), sum(r["verdict"] == "slower" for r in rows)),
                    strict=True))


def engine_values(comp, bench_summary=None) -> dict:
    """The numbers chapter 06 quotes from `make bench`'s comparisons table (`specdec.cli.bench`),
    under the names BASELINE_KEYS, RANGE_KEYS and SPEC_BEST_KEYS declare.
    Eager mode (the chapter's): per temperature, at batch 1 (b1) and at the bench's batch (bn,
    ``bench_batch``), the baseline ratio with its interval and words; the range of overhead share,
    engine efficiency and ratio to HF assisted generation, and how many (T, k) meet their targets by
    the median and by the whole interval.  Lean mode (prefix l, when the table has it): the same,
    against HF's eager runs, and what the lean forward gains over the eager one (``lgain_ar_*``,
    ``lgain_spec_*``).  Compiled mode (prefix c, when the table has it): the same baseline and vs-HF
    figures against HF's compiled mode and what compiling gains (``gain_ar_*``, ``gain_spec_*``).
    From the summary, the best median speculative speedup over plain decoding of the same mode, over
    the k every mode ran (``spec_best_eager`` / ``_lean`` / ``_compiled``).  Against HF's compiled
    plain `generate`, the fastest plain decoding measured (prefix fast): every configuration of ours
    in every mode, and our greedy batch-1 baselines (``fast_base``, ``fast_lbase``, ``fast_cbase``).
    A baseline row of a cell BASELINE_KEYS does not name is an error."""
    out = {}
    by_mode = {m: _mode(comp, m) for m in ("eager", "lean", "compiled")}
    for mode, rows in by_mode.items():
        for r in (r for r in rows if r["comparison"] == "baseline"):
            cell = (mode, float(r["temperature"]), "b1" if r["batch"] == 1 else "bn")  # bn: the batch cell
            if cell not in BASELINE_KEYS:
                raise ValueError(f"no glue names for the baseline cell {cell}: declare them in BASELINE_KEYS")
            out["bench_batch"] = max(out.get("bench_batch", 1), int(r["batch"]))
            out.update(zip(BASELINE_KEYS[cell], (r["median"], r["lo"], r["hi"], r["verdict"]), strict=True))
    for (mode, name, which), keys in RANGE_KEYS.items():
        rows = [r for r in by_mode[mode] if r["comparison"] == name]
        if (not by_mode[mode] and mode != "eager") or (name in GAINS and not rows):  # nothing to name (a glue fails)
            continue
        out.update(_range([r for r in rows if which == "all" or (r["k"] > 0) == (which == "spec")], keys))
    if any(r["comparison"] == "vs_hf_compiled_ar" for r in records(comp)):  # against the fastest plain decoding
        out.update(fastest_plain_values(comp))
    if bench_summary is not None and _mode(bench_summary, "compiled"):
        modes = [m for m in SPEC_BEST_KEYS if _mode(bench_summary, m)]
        ks = set.intersection(*({r["k"] for r in _mode(bench_summary, m) if r["impl"] == "ours_spec"} for m in modes))
        for mode in modes if ks else ():  # modes that share no k have no comparable best
            best = max((r for r in _mode(bench_summary, mode) if r["impl"] == "ours_spec" and r["k"] in ks),
                       key=lambda r: r["speedup_median"])
            out.update(zip(SPEC_BEST_KEYS[mode], (float(best["speedup_median"]), float(best["speedup_lo"]),
                                                  float(best["speedup_hi"]), best["verdict"],
                                                  f"k={best['k']}, {temperature_text(best['temperature'])}"),
                           strict=True))
        out["spec_ks_compiled"] = ", ".join(str(k) for k in sorted(ks))
    return out

