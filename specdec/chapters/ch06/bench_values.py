"""The numbers chapter 06 quotes from `make bench`'s committed tables (`specdec.cli.bench`): the
execution modes' baselines and ranges, the best speculative speedup of each mode, and the draft
lengths the chapter's own sweep cuts.  Like `specdec.chapters.ch06.values`, it only picks, counts
and words what the tables hold.

Example: comp, summ = bench_tables("data/results/bench"); engine_values(comp, summ)["base_t0_b1"]
"""

from __future__ import annotations

from pathlib import Path

from specdec.chapters.summary.findings import fastest_plain_values
from specdec.io.results import read_table, records
from specdec.report.formatting import temperature_text

__all__ = ["BENCH_COLUMNS", "bench_tables", "long_drafts", "engine_values", "BASELINE_KEYS", "RANGE_KEYS",
           "SPEC_BEST_KEYS"]

# the columns of the bench table chapter 06 shows, with their headers (`specdec.report.formatting.show`)
BENCH_COLUMNS = {"comparison": None, "mode": None, "temperature": None, "batch": None, "k": None, "median": None,
                 "verdict": None}


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

