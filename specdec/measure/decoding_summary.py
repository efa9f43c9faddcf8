"""Chapter 06's summaries of its timed runs: per configuration, against the baseline, and against the
cost model's prediction with the measured curve; the figures' tables and the numbers the prose quotes.

Per (output length L, batch B, configuration), over its repeats (`specdec.core.stats.spread`):
    tokens_per_s   steady-state rate (tokens after each row's first / time after the first token)
    speedup        median tokens_per_s / the baseline's median at the same (L, B)
    alpha_mle      median over runs of the maximum-likelihood constant alpha (fixed k only)
    predicted_ext  S_ext = E[L](alpha, k) / (T(k+1)/T(1) + k c)   (`specdec.core.cost.speedup`)
    predicted_toy  the idealized S = E[L](alpha, k) / (1 + k c);  1 for the baseline, NaN for dynamic
    <part>_share   median of (time in that part / wall time of the run)

Example: summarize_runs(runs, {1: {1: 0.01, 2: 0.012}}, {1: 0.2}) -> one row per (L, B, config),
         the baseline's speedup 1.0.
"""

from __future__ import annotations

import numpy as np

from specdec.core.cost import speedup
from specdec.core.stats import spread

__all__ = ["SHARE_PARTS", "BREAKDOWN_PARTS", "summarize_runs", "summarize_hf", "speedup_vs_k", "time_breakdown",
           "headline", "curve_values", "breakdown_values", "engine_values"]

SHARE_PARTS = ("t_draft_forward", "t_draft", "t_target", "t_accept", "t_rollback", "t_other", "t_step", "prefill_s")
BREAKDOWN_PARTS = (("prefill_s", "prefill"), ("t_draft_forward", "draft forwards"),
                   ("t_draft_other", "draft bookkeeping"), ("t_target", "target forward"),
                   ("t_accept", "process + verify"), ("t_rollback", "rollback"), ("t_other", "other"))
OUTSIDE_FORWARDS = ("draft bookkeeping", "process + verify", "rollback", "other")  # work outside any model forward
NAN_SPREAD = {"median": float("nan"), "q1": float("nan"), "q3": float("nan"), "min": float("nan"),
              "max": float("nan"), "n": 0}


def _records(table) -> list[dict]:
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)


def _spread(values) -> dict:
    v = [x for x in values if x is not None and np.isfinite(x)]
    return spread(v) if v else dict(NAN_SPREAD)


def _groups(rows, keys) -> dict:
    """rows grouped by the tuple of `keys`, groups and members in order of first appearance."""
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def summarize_runs(runs, curves: dict, cs: dict) -> list[dict]:
    """One row per (output_len, batch, config) of a runs table (module docstring); curves and cs
    per batch as `specdec.measure.decoding_runs.curves_by_batch` returns them."""
    out = []
    for (L, B), sel in _groups(_records(runs), ("output_len", "batch")).items():
        base_rows = [r for r in sel if r["config"] == "baseline"]
        base = _spread(r["tokens_per_s"] for r in base_rows)["median"]
        base_e2e = _spread(r["tokens"] / r["total_s"] for r in base_rows)["median"]
        for (name,), rr in _groups(sel, ("config",)).items():
            k = int(rr[0]["k"])
            tps = _spread(r["tokens_per_s"] for r in rr)
            med = lambda key: _spread(r[key] for r in rr)["median"]  # noqa: E731
            alpha = float(np.nanmedian([r["alpha_mle"] for r in rr])) if k > 0 else float("nan")
            row = {"output_len": L, "batch": B, "config": name, "k": k, "runs": tps["n"],
                   "tokens_per_s": tps["median"], "tokens_per_s_q1": tps["q1"], "tokens_per_s_q3": tps["q3"],
                   "tokens_per_s_min": tps["min"], "tokens_per_s_max": tps["max"],
                   "speedup": tps["median"] / base,
                   "speedup_end_to_end": _spread(r["tokens"] / r["total_s"] for r in rr)["median"] / base_e2e,
                   "ttft_ms": 1e3 * med("ttft_s"), "lat_p50_ms": 1e3 * med("lat_p50_s"),
                   "lat_p95_ms": 1e3 * med("lat_p95_s"), "lat_p99_ms": 1e3 * med("lat_p99_s"),
                   "peak_rss_mib": _spread(r["peak_memory_bytes"] for r in rr)["max"] / 2**20, "alpha_mle": alpha,
                   "k_chosen": float(np.median([r["k_chosen"] for r in rr]))}
            for part in SHARE_PARTS:
                row[part + "_share"] = _spread(r[part] / r["total_s"] for r in rr)["median"]
            if k > 0 and np.isfinite(alpha):
                row["predicted_toy"] = speedup(alpha, k, cs[B])
                row["predicted_ext"] = speedup(alpha, k, cs[B], verify_cost=curves[B][k + 1] / curves[B][1])
            else:
                row["predicted_toy"] = row["predicted_ext"] = 1.0 if k == 0 else float("nan")
            row["measured_over_predicted"] = row["speedup"] / row["predicted_ext"]
            out.append(row)
    return out


def summarize_hf(hf_runs) -> list[dict]:
    """Per (output_len, config) of Hugging Face's runs: median, min and max end-to-end tokens/s."""
    out = []
    for (L, name), rr in _groups(_records(hf_runs), ("output_len", "config")).items():
        s = _spread(r["tokens_per_s"] for r in rr)
        out.append({"output_len": L, "config": name, "tokens_per_s_end_to_end": s["median"], "min": s["min"],
                    "max": s["max"], "runs": s["n"]})
    return out


def speedup_vs_k(summary) -> list[dict]:
    """The speedup figure's table: per (L, B) each fixed k's speedup with its interquartile range
    (tokens/s quartiles over the baseline's median), both predictions and alpha; then the dynamic
    rule at its median chosen k (no range, no prediction)."""
    nan = float("nan")
    out = []
    for (L, B), sel in _groups(_records(summary), ("output_len", "batch")).items():
        base = next(r["tokens_per_s"] for r in sel if r["config"] == "baseline")
        out += [dict(output_len=L, batch=B, config=r["config"], k=r["k"], speedup=r["speedup"],
                     q1=r["tokens_per_s_q1"] / base, q3=r["tokens_per_s_q3"] / base, predicted_ext=r["predicted_ext"],
                     predicted_toy=r["predicted_toy"], alpha_mle=r["alpha_mle"])
                for r in sel if r["config"].startswith("k=")]
        out += [dict(output_len=L, batch=B, config="dynamic", k=r["k_chosen"], speedup=r["speedup"], q1=nan, q3=nan,
                     predicted_ext=nan, predicted_toy=nan, alpha_mle=nan) for r in sel if r["config"] == "dynamic"]
    return out


def time_breakdown(summary, output_len: int, batch: int) -> list[dict]:
    """Median share of the wall time per part (BREAKDOWN_PARTS) for each configuration at one
    (output length, batch); draft bookkeeping = draft share - draft forwards share."""
    rr = [r for r in _records(summary) if r["output_len"] == output_len and r["batch"] == batch]
    out = []
    for key, label in BREAKDOWN_PARTS:
        for r in rr:
            v = r["t_draft_share"] - r["t_draft_forward_share"] if key == "t_draft_other" else r[key + "_share"]
            out.append(dict(output_len=output_len, batch=batch, config=r["config"], part=label,
                            share_of_total=float(v)))
    return out


def headline(summary, k_ref: int, batch: int) -> dict:
    """The numbers the prose quotes: the fastest speculative configuration, how many were slower
    than plain decoding, measured / predicted over the fixed-k rows, and alpha at k_ref, batch."""
    rows = _records(summary)
    spec = [r for r in rows if r["k"] != 0]
    best = max(spec, key=lambda r: r["speedup"])
    ratio = np.array([r["measured_over_predicted"] for r in spec if r["config"].startswith("k=")])
    alpha = [r["alpha_mle"] for r in rows if r["config"] == f"k={k_ref}" and r["batch"] == batch]
    return {"best_speedup": float(best["speedup"]),
            "best_config": f"{best['config']}, batch {best['batch']}, {best['output_len']} tokens",
            "n_slower": sum(r["speedup"] < 1 for r in spec), "n_spec": len(spec),
            "ratio_median": float(np.nanmedian(ratio)), "ratio_min": float(np.nanmin(ratio)),
            "ratio_max": float(np.nanmax(ratio)), "alpha_kref": float(np.nanmedian(alpha))}


def curve_values(cost_curve, batch: int, n: int) -> dict:
    """T(1) in ms, T(n)/T(1) and c at one batch size, from a cost_curves table."""
    rows = [r for r in _records(cost_curve) if r["batch"] == batch]
    t = {r["n"]: r["median_s"] for r in rows if r["model"] == "target"}
    d1 = next(r["median_s"] for r in rows if r["model"] != "target")
    return {"t1_ms": 1e3 * t[1], "tk_n": n, "tk_ratio": t[n] / t[1], "c_b1": d1 / t[1]}


def breakdown_values(breakdown, config: str) -> dict:
    """The target-forward share and the share outside any model forward of one configuration."""
    share = {r["part"]: r["share_of_total"] for r in _records(breakdown) if r["config"] == config}
    return {"target_share_kref": float(share["target forward"]),
            "overhead_share_kref": float(sum(share[p] for p in OUTSIDE_FORWARDS))}


def engine_values(comp) -> dict:
    """The numbers chapter 06 quotes from `make bench`'s comparisons table (`specdec.measure.bench`):
    per (temperature, batch) the baseline ratio with its interval and words; the largest median
    overhead share; the range of engine efficiency and of the ratio to HF assisted generation, and
    how many (T, k) meet their targets by the median and by the whole interval."""
    out = {}
    for r in comp[comp["comparison"] == "baseline"].to_dict("records"):
        tag = f"base_t{int(r['temperature'])}_b{r['batch']}"
        out.update({tag: r["median"], f"{tag}_lo": r["lo"], f"{tag}_hi": r["hi"], f"{tag}_words": r["verdict"]})
    for name in ("overhead", "efficiency", "vs_hf"):
        g = comp[comp["comparison"] == name]
        out.update({f"{name}_min": float(g["median"].min()), f"{name}_max": float(g["median"].max()),
                    f"{name}_n": len(g), f"{name}_met_median": int(g["target_met_by_median"].sum()),
                    f"{name}_met_interval": int(g["target_met_by_interval"].sum()),
                    f"{name}_target": str(g["target"].iloc[0]) if len(g) else ""})
    vs = comp[comp["comparison"] == "vs_hf"]
    out["vs_hf_faster"] = int((vs["verdict"] == "faster").sum())
    out["vs_hf_slower"] = int((vs["verdict"] == "slower").sum())
    return out
