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
           "bench_tables", "engine_values"]

SHOWN = ["setting", "speedup", "speedup_lo", "speedup_hi", "verdict", "tokens_per_step", "alpha_mle"]  # 7 columns
# the columns chapter 06's smaller tables show, with their headers (`specdec.report.formatting.show`)
RULE_COLUMNS = {"draft": None, "beta": None, "c": None, "k_best": None, "predicted": "predicted speedup (a priori)",
                "chosen": None}
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
            "calibration_min": float(min(r["calibration"] for r in pr)),
            "calibration_max": float(max(r["calibration"] for r in pr)),
            "cpu_share_min": float(min(r["cpu_share_min"] for r in records(summary))),
            "reruns": int(sum(r["reruns"] for r in records(summary)))}


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


def _range(rows, name: str, prefix: str) -> dict:
    """Median range, count and counts meeting the target by median and by interval of one comparison."""
    g = [r for r in rows if r["comparison"] == name]
    med = [r["median"] for r in g]
    return {f"{prefix}_min": float(min(med, default=float("nan"))), f"{prefix}_max": float(max(med, default=float("nan"))),
            f"{prefix}_n": len(g), f"{prefix}_met_median": sum(bool(r["target_met_by_median"]) for r in g),
            f"{prefix}_met_interval": sum(bool(r["target_met_by_interval"]) for r in g),
            f"{prefix}_target": str(g[0]["target"]) if g else "",
            f"{prefix}_faster": sum(r["verdict"] == "faster" for r in g),
            f"{prefix}_slower": sum(r["verdict"] == "slower" for r in g)}


def engine_values(comp, bench_summary=None) -> dict:
    """The numbers chapter 06 quotes from `make bench`'s comparisons table (`specdec.cli.bench`).
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
    in every mode, and our greedy batch-1 baselines (``fast_base``, ``fast_lbase``, ``fast_cbase``)."""
    out = {}
    for mode, pre in (("eager", ""), ("lean", "l"), ("compiled", "c")):
        rows = _mode(comp, mode)
        if not rows and mode != "eager":  # a bench without this mode: no values (a glue of one fails)
            continue
        for r in (r for r in rows if r["comparison"] == "baseline"):
            tag = f"{pre}base_t{int(r['temperature'])}_{'b1' if r['batch'] == 1 else 'bn'}"  # bn: the batch cell
            out["bench_batch"] = max(out.get("bench_batch", 1), int(r["batch"]))
            out.update({tag: r["median"], f"{tag}_lo": r["lo"], f"{tag}_hi": r["hi"], f"{tag}_words": r["verdict"]})
        names = ("vs_hf",) if mode == "compiled" else ("overhead", "efficiency", "vs_hf")
        for name in names:
            out.update(_range(rows, name, pre + name))
        gain = [r for r in rows if r["comparison"] in ("compile_gain", "lean_gain")]
        if gain:
            g = "gain" if mode == "compiled" else "lgain"
            out.update(_range([r for r in gain if r["k"] == 0], gain[0]["comparison"], f"{g}_ar"))
            out.update(_range([r for r in gain if r["k"] > 0], gain[0]["comparison"], f"{g}_spec"))
    if any(r["comparison"] == "vs_hf_compiled_ar" for r in records(comp)):  # against the fastest plain decoding
        out.update(fastest_plain_values(comp))
    if bench_summary is not None and _mode(bench_summary, "compiled"):
        modes = [m for m in ("eager", "lean", "compiled") if _mode(bench_summary, m)]
        ks = set.intersection(*({r["k"] for r in _mode(bench_summary, m) if r["impl"] == "ours_spec"} for m in modes))
        for mode in modes if ks else ():  # modes that share no k have no comparable best
            best = max((r for r in _mode(bench_summary, mode) if r["impl"] == "ours_spec" and r["k"] in ks),
                       key=lambda r: r["speedup_median"])
            out.update({f"spec_best_{mode}": float(best["speedup_median"]), f"spec_best_{mode}_lo": float(best["speedup_lo"]),
                        f"spec_best_{mode}_hi": float(best["speedup_hi"]), f"spec_best_{mode}_words": best["verdict"],
                        f"spec_best_{mode}_config": f"k={best['k']}, {temperature_text(best['temperature'])}"})
        out["spec_ks_compiled"] = ", ".join(str(k) for k in sorted(ks))
    return out
