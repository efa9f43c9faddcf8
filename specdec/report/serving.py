"""Chapter 09's tables and words, from its measured rows (`specdec.measure.serving_runs`): the
policies' written rules, latency and throughput per (policy, rate), acceptance per draft position,
memory, the break-even load, the checks, and the idealized model's prediction beside the measured.

Example: latency_table(runs) -> one row per (policy, rate): medians over rounds of each metric.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["tidy_runs", "rules_table", "latency_table", "position_table", "memory_table", "rate_text", "headline",
           "check_words", "memory_words"]

MIB = 2.0 ** 20
_LAT = ["mean_running", "serve_tokens_per_s", "goodput_tokens_per_s", "e2e_mean_s", "e2e_p99_s", "ttft_p95_s",
        "itl_p50_s", "itl_p95_s", "itl_p99_s", "queue_p95_s", "tokens_per_row_step", "k_mean", "alpha_mle",
        "cpu_share", "load_1m"]


def tidy_runs(rows: list[dict]) -> list[dict]:
    """The runs as flat rows: acceptance per draft position as columns accept_pos_1.. (NaN beyond a run's k)."""
    kmax = max((len(r.get("accept_by_position") or []) for r in rows), default=0)
    out = []
    for r in rows:
        r = dict(r)
        acc = list(r.pop("accept_by_position", None) or [])
        r.update({f"accept_pos_{i + 1}": acc[i] if i < len(acc) else math.nan for i in range(kmax)})
        out.append(r)
    return out


def rules_table(pols: dict, *, baseline: str, c: float, k_max: int) -> list[dict]:
    """Each policy's rule in words, with its parameters (written before any result)."""
    text = {baseline: "plain decoding: one target token per running request per step",
            "fixed": "every step drafts k tokens for every running request",
            "dynamic": ("chapter 06's rule: k_start drafts for the first warmup steps, then the k in 0..k_max that "
                        "maximizes E[L](alpha_hat, k) / (T(k+1)/T(1) + k c) for the run's acceptance estimate "
                        f"alpha_hat, with the measured batch-1 cost curve and c = {c:.3f}; k = 0 ends drafting"),
            "load-aware": ("k = 0 while more than max_batch requests run or, after min_judged judged drafts, while "
                           "alpha_hat < min_alpha; k_small while more than small_above run; else k; re-evaluated "
                           "every step")}
    rows = []
    for name, (_, k) in pols.items():
        key = next((t for t in ("fixed", "dynamic", "load-aware") if t in name), baseline)
        rows.append({"policy": name, "rule": text[key], "parameters": "none" if key == baseline else repr(k),
                     "k_max": 0 if key == baseline else (k if isinstance(k, int) else k_max)})
    return rows


def latency_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, rate): medians over rounds of the serving metrics."""
    return runs.groupby(["policy", "rate"], sort=False)[_LAT].median().reset_index().sort_values(["policy", "rate"],
                                                                                                   kind="stable")


def position_table(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per speculative (policy, rate): mean over rounds of the acceptance rate at each draft position."""
    cols = [c for c in runs.columns if c.startswith("accept_pos_")]
    spec = runs[runs["policy"] != baseline]
    return spec.groupby(["policy", "rate"])[cols].mean().reset_index()


def memory_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, rate): median peak key/value MiB of the run, and per request the MiB of its row of
    the batched caches (padding and holes included) against the MiB its own tokens need."""
    g = runs.groupby(["policy", "rate"], sort=False)
    out = pd.DataFrame({"peak_kv_mib": g["peak_kv_bytes"].median() / MIB,
                        "row_kv_mib": g["row_kv_bytes_mean"].median() / MIB,
                        "needed_kv_mib": g["valid_kv_bytes_mean"].median() / MIB}).reset_index()
    out["row_over_needed"] = out["row_kv_mib"] / out["needed_kv_mib"]
    return out


def rate_text(x: float, rates) -> str:
    """A break-even rate in words; an infinite one says which end of the tested range it lies beyond."""
    if x == math.inf:
        return f"above the tested range (> {max(rates):g} requests/s)"
    if x == -math.inf:
        return f"below the tested range (< {min(rates):g} requests/s)"
    return f"{x:.3g} requests/s"


def headline(speed: pd.DataFrame, be: pd.DataFrame, lat: pd.DataFrame, baseline: str) -> dict:
    """Glue values: the best policy at the lightest rate, every policy at the heaviest, break-evens
    in words (`rate_text`)."""
    lo_rate, hi_rate = speed["rate"].min(), speed["rate"].max()
    light = speed[speed["rate"] == lo_rate].sort_values("latency_speedup", ascending=False).iloc[0]
    heavy = speed[speed["rate"] == hi_rate]
    base = lat[lat["policy"] == baseline].set_index("rate")
    rates = sorted(lat["rate"].unique())
    out = {"light_rate": lo_rate, "heavy_rate": hi_rate, "best_light": light["policy"],
           "best_light_speed": light["latency_speedup"], "best_light_lo": light["latency_lo"],
           "best_light_hi": light["latency_hi"], "best_light_verdict": light["verdict"],
           "n_faster": int((speed["verdict"] == "faster").sum()), "n_slower": int((speed["verdict"] == "slower").sum()),
           "n_comparisons": len(speed), "running_light": base.loc[lo_rate, "mean_running"],
           "running_heavy": base.loc[hi_rate, "mean_running"],
           "base_tps_heavy": base.loc[hi_rate, "serve_tokens_per_s"]}
    k_light = lat[lat["rate"] == lo_rate].set_index("policy")["k_mean"]
    for i, r in enumerate(speed[speed["rate"] == lo_rate].itertuples()):
        out[f"light_{i}"] = (f"{r.policy} {r.latency_speedup:.3f} [{r.latency_lo:.3f}, {r.latency_hi:.3f}] "
                             f"({r.verdict}), mean k {k_light[r.policy]:.2f}")
    for i, r in enumerate(heavy.itertuples()):
        out[f"heavy_{i}"] = f"{r.policy} {r.latency_speedup:.3f} [{r.latency_lo:.3f}, {r.latency_hi:.3f}] ({r.verdict})"
    same = [(a, b) for a in k_light.index for b in k_light.index if a < b and a != baseline and b != baseline
            and abs(k_light[a] - k_light[b]) < 0.005]
    light = speed[speed["rate"] == lo_rate].set_index("policy")["latency_speedup"]
    out["same_k"] = (" and ".join(same[0]) + f" drafted the same k at this rate, and their speedups differ by "
                     f"{abs(light[same[0][0]] - light[same[0][1]]):.3f}: a difference of that size is run-to-run "
                     "noise") if same else "no two policies drafted the same k at this rate"
    fixed = speed[(speed["rate"] == lo_rate) & speed["predicted_batch1"].notna()]
    if len(fixed):
        f = fixed.iloc[0]
        out.update(pred_policy=f["policy"], pred_light=f["predicted_batch1"], meas_light=f["latency_speedup"])
    out.update(ttft_base_light=1000 * base.loc[lo_rate, "ttft_p95_s"], e2e_base_light=1000 * base.loc[lo_rate, "e2e_mean_s"],
               ttft_spec_light=1000 * lat[(lat["rate"] == lo_rate) & (lat["policy"] != baseline)]["ttft_p95_s"].min())
    for i, r in enumerate(be.itertuples()):
        run = "" if math.isnan(r.running_at_break_even) else \
            f", where plain decoding runs {r.running_at_break_even:.2f} requests at a time"
        out[f"be_{i}"] = (f"{r.policy}: {rate_text(r.break_even_rate, rates)}{run}; 95% interval "
                          f"{rate_text(r.lo, rates)} to {rate_text(r.hi, rates)} ({100 * r.share_never:.0f}% of "
                          f"resamples never fall to 1, {100 * r.share_always_below:.0f}% are at or below 1 from the "
                          "lowest rate on)")
    return out


def check_words(inv: pd.DataFrame, canc: pd.DataFrame) -> dict:
    """Glue values of the invariance and cancellation checks."""
    cut = canc[canc["finish"] == "cancelled"]
    rest = canc[canc["finish"] != "cancelled"]
    return {"inv_identical": int(inv["identical"].sum()), "inv_total": int(inv["requests"].sum()),
            "inv_settings": len(inv), "n_cancelled": len(cut), "cancel_consistent": int(cut["consistent"].sum()),
            "others_unchanged": int(rest["consistent"].sum()), "n_others": len(rest),
            "released_min_mib": float(np.min(cut["released_bytes"])) / MIB if len(cut) else math.nan,
            "row_min_mib": float(np.min(cut["row_bytes"])) / MIB if len(cut) else math.nan}


def memory_words(mem: pd.DataFrame, baseline: str) -> dict:
    """Glue values of the memory table: the row-over-needed range and the peaks at both ends."""
    base, spec = mem[mem["policy"] == baseline], mem[mem["policy"] != baseline]
    return {"row_over_needed_min": float(mem["row_over_needed"].min()),
            "row_over_needed_max": float(mem["row_over_needed"].max()),
            "peak_base_light": float(base.loc[base["rate"].idxmin(), "peak_kv_mib"]),
            "peak_spec_heavy": float(spec[spec["rate"] == spec["rate"].max()]["peak_kv_mib"].max())}
