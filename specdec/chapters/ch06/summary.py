"""Chapter 06's summaries of its timed runs, by the protocol of `specdec.measure.protocol`: paired
speedups with intervals and the words they allow, the field's convention beside them, and the cost
model's prediction against every configuration (what the page shows of these tables:
`specdec.chapters.ch06.page`).

Per (temperature, output length L, batch B, configuration), over prompt groups x repeats:
    speedup_*       end-to-end: the baseline's wall time per token over the configuration's, paired on
                    (group, repeat); median, 95% interval, half-width, verdict; and the simultaneous
                    (Bonferroni) interval over every speculative configuration
    steady_speedup  the same ratio after each run's first step (the prompt's forward): what the cost
                    model predicts (`specdec.measure.prediction`)
    tokens_per_step `per_row_tokens_per_step` (at most k + 1; Spec-Bench's "mean accepted tokens",
                    bonus included)
    sb_mean, sb_sd  Spec-Bench's convention: per repeat the mean speedup over prompt groups, then the
                    mean and standard deviation over repeats
    alpha_mle, k_chosen, ttft_ms, latency percentiles, peak memory, the load record (lowest CPU
    share, mean load average, re-runs)

Example: summary_table(runs) -> one row per (temperature, output_len, batch, config), baseline first.
"""

from __future__ import annotations

import numpy as np

from specdec.measure.protocol import LEVEL, comparison, paired_interval, paired_speedups, spec_bench, summarize
from specdec.measure.replication import PAIR
from specdec.io.results import records

__all__ = ["CELL", "PAIR", "DYN_INTERVALS", "HF_PLAIN", "OURS_PLAIN", "REASONS", "SUMMARY_INTERVALS",
           "PREDICTION_INTERVALS", "paired", "summary_table", "prediction_summary", "draft_summary", "dynamic_vs_fixed",
           "hf_summary", "time_breakdown", "groups", "per_row_tokens_per_step"]

CELL = ("temperature", "output_len", "batch")
SUMMARY_INTERVALS = [["speedup", "speedup_lo", "speedup_hi"], ["speedup", "speedup_lo_sim", "speedup_hi_sim"],
                     ["steady_speedup", "steady_lo", "steady_hi"]]  # [estimate, low, high] of the summary table
PREDICTION_INTERVALS = [["measured", "measured_lo", "measured_hi"], ["predicted", "predicted_lo", "predicted_hi"],
                        ["ratio", "ratio_lo", "ratio_hi"]]
DYN_INTERVALS = [["dynamic_over_best", "lo", "hi"]]  # [estimate, low, high] of the dynamic_vs_fixed table
HF_PLAIN = "HF generate"
OURS_PLAIN = {"lean": "ours plain (lean)", "eager": "ours plain (eager)"}  # the HF runs' configurations of ours
# why a prediction misses (`prediction_summary`'s ``reason``): its verification forwards inside the loop
# against the calibrated curve, the spread of the pairs, or neither
REASONS = ("verification forwards", "pairs spread", "unexplained")
BREAKDOWN_PARTS = (("t_draft_forward", "draft forwards"), ("t_draft_other", "draft bookkeeping"),
                   ("t_target", "target forward"), ("t_accept", "process + verify"), ("t_rollback", "rollback"),
                   ("t_other", "other"))


def per_row_tokens_per_step(run: dict) -> float:
    """Tokens one row emits per verification step after the first: the run's tokens after its first
    step over its later steps, divided by the batch size (one definition at every B, at most k + 1).

    Example: batch 8, 8 x 40 tokens after the first step, 20 later steps -> 2.0."""
    return (run["tokens"] - run["first_step_tokens"]) / max(run["steps"] - 1, 1) / int(run["batch"])


def groups(rows, keys) -> dict:
    """rows grouped by the tuple of ``keys``, groups and members in order of first appearance."""
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _config_order(name: str) -> tuple:
    """baseline, then k=1, k=2, ..., then anything else (dynamic) by name."""
    if name == "baseline":
        return (0, 0, "")
    if name.startswith("k=") and name[2:].isdigit():
        return (1, int(name[2:]), "")
    return (2, 0, name)


def paired(runs, keys: tuple = PAIR) -> list[dict]:
    """Every run with its end-to-end ``speedup`` and ``steady_speedup`` against the baseline run of
    the same keys (`specdec.measure.protocol.paired_speedups`)."""
    rows = paired_speedups(records(runs), baseline="baseline", keys=keys, impl="config")
    steady = {tuple(r[k] for k in keys): r["tokens_per_s"] for r in rows if r["config"] == "baseline"}
    return [{**r, "steady_speedup": r["tokens_per_s"] / steady[tuple(r[k] for k in keys)]} for r in rows]


def summary_table(runs, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """One row per (temperature, L, B, configuration) (module docstring)."""
    rows, by = paired(runs), CELL + ("config",)
    m = len(groups([r for r in rows if r["config"] != "baseline"], by))
    key_of = lambda s: tuple(s[k] for k in by)  # noqa: E731
    stats = {key_of(s): s for s in summarize(rows, by=by, level=level, seed=seed, family_size=max(m, 1))}
    sb = {key_of(s): s for s in spec_bench(rows, by=by, run="repeat")}  # the runs are the repeats
    out = []
    cell_index = {c: i for i, c in enumerate(groups(rows, CELL))}  # cells in the order they ran
    order = lambda kv: (cell_index[kv[0][:3]], _config_order(kv[0][3]))  # noqa: E731
    for key, rr in sorted(groups(rows, by).items(), key=order):
        med = lambda col: float(np.nanmedian([float(r[col]) for r in rr]))  # noqa: E731
        st = paired_interval([r["steady_speedup"] / r["tokens_per_s"] for r in rr], [1 / r["tokens_per_s"] for r in rr],
                             level=level, seed=seed)
        steps = [per_row_tokens_per_step(r) for r in rr]
        s = stats[key]
        out.append({**dict(zip(by, key)), "k": rr[0]["k"], "runs": len(rr),
                    "speedup": s["speedup_median"], **{c: s[c] for c in ("speedup_lo", "speedup_hi", "half_width",
                                                                         "verdict", "speedup_lo_sim", "speedup_hi_sim",
                                                                         "verdict_sim", "level_sim", "pairs_sim")},
                    "steady_speedup": st[0], "steady_lo": st[1], "steady_hi": st[2],
                    "sb_mean": sb[key]["speedup_mean"], "sb_sd": sb[key]["speedup_sd"],
                    "tokens_per_s": med("tokens_per_s"), "tokens_per_step": float(np.mean(steps)),
                    "alpha_mle": med("alpha_mle") if rr[0]["k"] > 0 else float("nan"), "k_chosen": med("k_chosen"),
                    "ttft_ms": 1e3 * med("ttft_s"), "lat_p50_ms": 1e3 * med("lat_p50_s"),
                    "lat_p95_ms": 1e3 * med("lat_p95_s"), "lat_p99_ms": 1e3 * med("lat_p99_s"),
                    "peak_rss_mib": max(float(r["peak_memory_bytes"]) for r in rr) / 2**20,
                    "cpu_share_min": min(float(r["cpu_share"]) for r in rr), "load_mean": med("load_1m"),
                    "reruns": int(sum(int(r["reruns"]) for r in rr))})
    return out


def prediction_summary(pred_rows, *, level: float = LEVEL, seed: int = 0, tolerance: float = 0.10) -> list[dict]:
    """Per (temperature, L, B, configuration) of `specdec.measure.prediction.paired_predictions`
    rows: measured and predicted steady speedups (medians with intervals over the pairs), their ratio's
    median and interval, whether it is within ``tolerance`` of 1, the ratio with the isolated curve
    alone (uncalibrated), the calibration, and a miss's measured reason (`REASONS`; "" when within):
    its in-loop verification forwards off the calibrated curve by more than half the tolerance
    (``forward_vs_curve``; ``context_ratio`` beside it: a ragged batch's cache holds masked holes),
    else the pairs' spread (the ratio's interval reaches the tolerance band), else unexplained.
    ``ratio_inloop``: measured over the prediction with those forwards at their in-loop time (NaN for
    rows without that column); ``explained``: within, or a forwards miss that it brings within."""
    out = []
    for key, rr in groups(records(pred_rows), CELL + ("config",)).items():
        meas, pred = [r["measured"] for r in rr], [r["predicted"] for r in rr]
        one = np.ones(len(rr))
        m, mlo, mhi = paired_interval(meas, one, level=level, seed=seed)
        p, plo, phi = paired_interval(pred, one, level=level, seed=seed)
        q, qlo, qhi = paired_interval(meas, pred, level=level, seed=seed)
        fwd = float(np.median([r["target_inloop_over_isolated"] for r in rr]))
        ctx = float(np.median([r["context_ratio"] for r in rr]))
        loop = float(np.median([r["measured"] / r["predicted_inloop"] for r in rr])) \
            if "predicted_inloop" in rr[0] else float("nan")
        within, closed = abs(q - 1) <= tolerance, False
        if within:
            reason = ""
        elif abs(fwd - 1) > tolerance / 2:
            reason = REASONS[0]
            closed = loop == loop and abs(loop - 1) <= tolerance
        elif qlo <= 1 + tolerance and qhi >= 1 - tolerance:
            reason = REASONS[1]
        else:
            reason = REASONS[2]
        out.append({**dict(zip(CELL + ("config",), key)), "k": rr[0]["k"], "pairs": len(rr), "measured": m,
                    "measured_lo": mlo, "measured_hi": mhi, "predicted": p, "predicted_lo": plo,
                    "predicted_hi": phi, "ratio": q, "ratio_lo": qlo, "ratio_hi": qhi, "within": bool(within),
                    "ratio_isolated": float(np.median([r["measured"] / r["predicted_isolated"] for r in rr])),
                    "calibration": float(np.median([r["calibration"] for r in rr])), "forward_vs_curve": fwd,
                    "ratio_inloop": loop, "explained": bool(within or closed),
                    "context_ratio": ctx,
                    "tokens_per_step": float(np.mean([r["tokens_per_step"] for r in rr])),
                    "overhead_share": float(np.median([r["overhead_share"] for r in rr])), "reason": reason})
    return out


def draft_summary(draft_rows, rule_rows, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per draft of the comparison: the end-to-end speedup with interval and words, and the
    simultaneous interval over the drafts compared (`specdec.measure.protocol.comparison`), tokens
    per step, alpha, and the rule's prediction where the draft was a candidate
    (`specdec.measure.draft_choice`)."""
    rule = {r["draft"]: r for r in records(rule_rows)}
    rows = paired(draft_rows)
    out = []
    by_draft = groups([r for r in rows if r["config"] != "baseline"], ("config",))
    for (name,), rr in by_draft.items():
        c = comparison([r["base_s_per_token"] for r in rr], [r["wall_s"] / r["tokens"] for r in rr], level=level,
                       family_size=len(by_draft), seed=seed)
        ru = rule.get(name, {})
        out.append({"draft": name, "k": rr[0]["k"], "runs": len(rr), "speedup": c["median"], "speedup_lo": c["lo"],
                    "speedup_hi": c["hi"], "verdict": c["verdict"], "speedup_lo_sim": c["lo_sim"],
                    "speedup_hi_sim": c["hi_sim"], "verdict_sim": c["verdict_sim"],
                    "tokens_per_step": float(np.mean([per_row_tokens_per_step(r) for r in rr])),
                    "alpha_mle": float(np.nanmedian([r["alpha_mle"] for r in rr])),
                    "beta": ru.get("beta", float("nan")), "c": ru.get("c", float("nan")),
                    "rule_predicted": ru.get("predicted", float("nan")), "chosen": bool(ru.get("chosen", False))})
    return out


def dynamic_vs_fixed(runs, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per (temperature, L, B): the dynamic rule against the best fixed k of that cell (by median
    speedup), paired on (group, repeat): the fixed run's time per token over the dynamic run's, with
    its interval and words, and the simultaneous interval over the cells compared
    (`specdec.measure.protocol.comparison`)."""
    out = []
    compared = {cell: rr for cell, rr in groups(paired(runs), CELL).items()  # cells with the rule and a fixed k
                if any(r["config"] == "dynamic" for r in rr) and any(r["config"].startswith("k=") for r in rr)}
    for cell, rr in compared.items():
        fixed = {name: float(np.median([r["speedup"] for r in g]))
                 for (name,), g in sorted(groups(rr, ("config",)).items(), key=lambda kv: _config_order(kv[0][0]))
                 if name.startswith("k=")}
        best = max(fixed, key=fixed.get)  # the median speedup of summary_table, without its intervals
        by = {(r["config"], r["group"], r["repeat"]): r["wall_s"] / r["tokens"] for r in rr}
        units = [(g, rep) for (c, g, rep) in by if c == "dynamic"]
        c = comparison([by[(best, *u)] for u in units], [by[("dynamic", *u)] for u in units], level=level,
                       family_size=len(compared), seed=seed)
        out.append({**dict(zip(CELL, cell)), "best_fixed": best, "dynamic_over_best": c["median"], "lo": c["lo"],
                    "hi": c["hi"], "verdict": c["verdict"], "lo_sim": c["lo_sim"], "hi_sim": c["hi_sim"],
                    "verdict_sim": c["verdict_sim"], "pairs": len(units), "pairs_sim": c["pairs_sim"]})
    return out


def hf_summary(hf_rows, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """The Hugging Face comparison, paired on (prompt, repeat), one row per ratio of time per token:
    HF's assisted generation over its own plain `generate`, our lean plain decoding over HF's
    `generate`, and our lean over our eager plain decoding; each with median, interval, verdict and
    pairs, and both sides' median tokens/s end to end."""
    rr = records(hf_rows)
    names = {r["config"] for r in rr}
    assisted = [n for n in names if n.startswith("HF assisted")]
    if HF_PLAIN not in names or len(assisted) != 1 or not set(OURS_PLAIN.values()) <= names:
        raise ValueError(f"the HF runs need {HF_PLAIN!r}, one 'HF assisted k=..' and {sorted(OURS_PLAIN.values())}; "
                         f"got {sorted(names)}")
    rate = lambda name: float(np.median([r["tokens"] / r["wall_s"] for r in rr if r["config"] == name]))  # noqa: E731

    def compare(base: str, other: str) -> dict:
        rows = paired_speedups([r for r in rr if r["config"] in (base, other)], baseline=base,
                               keys=("group", "repeat"), impl="config")
        sel = [r for r in rows if r["config"] == other]
        c = comparison([r["base_s_per_token"] for r in sel], [r["wall_s"] / r["tokens"] for r in sel], level=level,
                       seed=seed)
        return {"comparison": f"{other} over {base}", "median": c["median"], "lo": c["lo"], "hi": c["hi"],
                "verdict": c["verdict"], "pairs": len(sel), "tokens_per_s": rate(other),
                "base_tokens_per_s": rate(base)}
    return [compare(HF_PLAIN, assisted[0]), compare(HF_PLAIN, OURS_PLAIN["lean"]),
            compare(OURS_PLAIN["eager"], OURS_PLAIN["lean"])]


def time_breakdown(runs, temperature: float, output_len: int, batch: int) -> list[dict]:
    """Median share of each run's wall time per part, for each configuration at one cell."""
    rr = [r for r in records(runs) if tuple(r[c] for c in CELL) == (temperature, output_len, batch)]
    part = lambda r, key: r["t_draft"] - r["t_draft_forward"] if key == "t_draft_other" else r[key]  # noqa: E731
    return [dict(temperature=temperature, output_len=output_len, batch=batch, config=name, part=label,
                 share_of_total=float(np.median([part(r, key) / r["wall_s"] for r in sel])))
            for (name,), sel in groups(rr, ("config",)).items() for key, label in BREAKDOWN_PARTS]
