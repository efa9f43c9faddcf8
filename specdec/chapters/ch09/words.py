"""Chapter 09's tables and words, from its measured rows (`specdec.measure.serving_runs`): the
policies' written rules, latency and throughput per (policy, rate), acceptance per draft position,
memory, the break-even load in either direction, the checks, and the extended cost model's prediction
beside the measured.

Example: latency_table(runs) -> one row per (policy, rate): medians over rounds of each metric.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["tidy_runs", "rules_table", "latency_table", "position_table", "memory_table", "rate_text",
           "break_even_text", "trend_text", "headline",
           "check_words", "memory_words", "role"]

MIB = 2.0 ** 20
_LAT = ["mean_running", "serve_tokens_per_s", "goodput_tokens_per_s", "e2e_mean_s", "e2e_p99_s", "ttft_p95_s",
        "tpot_p50_s", "tpot_p95_s", "itl_p95_s", "itl_p99_s", "queue_p95_s", "tokens_per_row_step", "k_mean",
        "alpha_mle", "draft_share", "cpu_share", "load_1m"]


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
                           "every step (the acceptance floor, once hit, holds for the busy spell: no drafts, no new "
                           "judgements)")}
    rows = []
    for name, (_, k) in pols.items():
        key = next((t for t in ("fixed", "dynamic", "load-aware") if t in name), baseline)
        rows.append({"policy": name, "rule": text[key], "parameters": "none" if key == baseline else repr(k),
                     "k_max": 0 if key == baseline else (k if isinstance(k, int) else k_max)})
    return rows


def latency_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, rate): medians over rounds of the serving metrics."""
    cols = [c for c in _LAT if c in runs.columns]  # a server's runs lack the engine's own step counters
    return runs.groupby(["policy", "rate"], sort=False)[cols].median().reset_index().sort_values(["policy", "rate"],
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
                        "needed_kv_mib": g["needed_kv_bytes_mean"].median() / MIB}).reset_index()
    out["row_over_needed"] = out["row_kv_mib"] / out["needed_kv_mib"]
    return out


def rate_text(x: float, rates) -> str:
    """A break-even rate in words; an infinite one says it lies beyond the tested range."""
    if x == math.inf:
        return f"beyond the tested range (> {max(rates):g} requests/s)"
    if x == -math.inf:
        return f"below the tested range (< {min(rates):g} requests/s)"
    return f"{x:.3g} requests/s"


def break_even_text(r, rates) -> str:
    """One policy's break-even (`specdec.measure.serving_runs.break_even`) in words that follow its
    direction: where the median latency speedup falls through 1 (stops paying) or rises through it
    (starts paying), or that it stays on one side over the tested range.

    Example: falls at 6.6 -> "stops paying at 6.63 requests/s ..."; rises, none -> "below 1 at every tested rate"."""
    side = "above" if r.direction == "falls" else "at or below"
    if r.break_even_rate == math.inf:
        head = (f"no break-even: {side} 1 at every tested rate (no crossing from {min(rates):g} to "
                f"{max(rates):g} requests/s)")
    else:
        verb = "first stops paying (its median falls through 1)" if r.direction == "falls" else \
            "first starts paying (its median rises through 1)"
        run = "" if math.isnan(r.running_at_break_even) else \
            f", where plain decoding runs {r.running_at_break_even:.2f} requests at a time (mean over steps)"
        head = (f"break-even where it {verb} at {rate_text(r.break_even_rate, rates)}{run}; 95% interval "
                f"{rate_text(r.lo, rates)} to "
                f"{rate_text(r.hi, rates)}")
    return (f"{r.policy}: {head} ({100 * r.share_no_crossing:.0f}% of resamples never cross, "
            f"{100 * r.share_opposite:.0f}% start on the other side of 1)")


def trend_text(speed: pd.DataFrame) -> str:
    """How each policy's latency speedup moves from the lightest to the heaviest tested rate, in words
    its intervals allow: "gains with load" / "loses with load" only when the two intervals are
    disjoint, else "no trend detected".  For the figure's title and the prose."""
    lo, hi = speed["rate"].min(), speed["rate"].max()
    parts = []
    for pol, g in speed.groupby("policy", sort=False):
        a, b = g[g["rate"] == lo].iloc[0], g[g["rate"] == hi].iloc[0]
        word = "gains with load" if b["latency_lo"] > a["latency_hi"] else \
            "loses with load" if b["latency_hi"] < a["latency_lo"] else "no trend detected"
        parts.append(f"{pol} {word}")
    return "; ".join(parts)


def role(policy: str) -> str:
    """The kind of a policy, from its name: fixed, dynamic, load_aware, else other."""
    return next((k.replace("-", "_") for k in ("fixed", "dynamic", "load-aware") if k in policy), "other")


# per policy kind (`role`), the glue names `headline` gives its words at the lightest and the
# heaviest rate and its break-even
ROLE_KEYS = {"fixed": ("light_fixed", "heavy_fixed", "be_fixed"),
             "dynamic": ("light_dynamic", "heavy_dynamic", "be_dynamic"),
             "load_aware": ("light_load_aware", "heavy_load_aware", "be_load_aware")}


def _keys(policy: str) -> tuple[str, str, str]:
    """ROLE_KEYS of a policy's kind; a kind it does not name is an error."""
    if role(policy) not in ROLE_KEYS:
        raise ValueError(f"no glue names for the policy {policy!r} (kind {role(policy)!r}): declare them in ROLE_KEYS")
    return ROLE_KEYS[role(policy)]


def _speed_text(r) -> str:
    return (f"{r.policy} {r.latency_speedup:.3f} [{r.latency_lo:.3f}, {r.latency_hi:.3f}] ({r.verdict}; "
            f"simultaneous: {r.verdict_sim})")


def headline(speed: pd.DataFrame, be: pd.DataFrame, lat: pd.DataFrame, baseline: str) -> dict:
    """Glue values, keyed by policy kind (`role`, names from ROLE_KEYS): each policy at the lightest
    and the heaviest rate, the highest median at the lightest, the idealized prediction and time to
    first token worded by their sign, the break-evens in words (`rate_text`)."""
    lo_rate, hi_rate = speed["rate"].min(), speed["rate"].max()
    top = speed[speed["rate"] == lo_rate].sort_values("latency_speedup", ascending=False).iloc[0]
    base = lat[lat["policy"] == baseline].set_index("rate")
    rates = sorted(lat["rate"].unique())
    k_light = lat[lat["rate"] == lo_rate].set_index("policy")["k_mean"]
    out = {"light_rate": lo_rate, "heavy_rate": hi_rate, "top_light": top["policy"],
           "top_light_speed": top["latency_speedup"], "top_light_lo": top["latency_lo"],
           "top_light_hi": top["latency_hi"], "top_light_verdict": top["verdict"],
           "n_faster": int((speed["verdict"] == "faster").sum()), "n_slower": int((speed["verdict"] == "slower").sum()),
           "n_comparisons": len(speed),
           "half_width_median": float(speed["half_width"].median()), "running_light": base.loc[lo_rate, "mean_running"],
           "running_heavy": base.loc[hi_rate, "mean_running"], "base_tps_heavy": base.loc[hi_rate, "serve_tokens_per_s"]}
    for r in speed[speed["rate"] == lo_rate].itertuples():
        out[_keys(r.policy)[0]] = f"{_speed_text(r)}, mean k {k_light[r.policy]:.2f}"
    for r in speed[speed["rate"] == hi_rate].itertuples():
        out[_keys(r.policy)[1]] = _speed_text(r)
    fixed = speed[(speed["rate"] == lo_rate) & speed["predicted_batch1"].notna()]
    if len(fixed):
        f = fixed.iloc[0]
        rel = "above" if f["predicted_batch1"] > f["latency_hi"] else "below" if f["predicted_batch1"] < f["latency_lo"] \
            else "inside"
        out["prediction_words"] = (f"the extended cost model predicts {f['predicted_batch1']:.3f} for {f['policy']} "
                                   f"at the lightest rate, {rel} the measured interval [{f['latency_lo']:.3f}, "
                                   f"{f['latency_hi']:.3f}]")
    t_base = 1000 * base.loc[lo_rate, "ttft_p95_s"]
    spec = lat[(lat["rate"] == lo_rate) & (lat["policy"] != baseline)]
    t_lo, t_hi = 1000 * spec["ttft_p95_s"].min(), 1000 * spec["ttft_p95_s"].max()
    out["ttft_words"] = (f"plain decoding's p95 time to first token is {t_base:.1f} ms of a "
                         f"{1000 * base.loc[lo_rate, 'e2e_mean_s']:.1f} ms mean end-to-end latency; the speculative "
                         f"policies' is {t_lo:.1f} to {t_hi:.1f} ms, "
                         + ("longer: the draft model reads the prompt too, and the first target forward waits for the "
                            "first drafts" if t_lo > t_base else "not longer in every policy"))
    la = lat[(lat["rate"] == hi_rate) & lat["policy"].map(lambda p: role(p) == "load_aware")]
    if len(la):
        out.update(la_draft_share=float(la["draft_share"].iloc[0]), la_k_heavy=float(la["k_mean"].iloc[0]))
    for r in be.itertuples():
        out[_keys(r.policy)[2]] = break_even_text(r, rates)
    out["trend_words"] = trend_text(speed)
    return out


def check_words(inv: pd.DataFrame, canc: pd.DataFrame) -> dict:
    """Glue values and sentences of the invariance and cancellation checks, worded by their outcome."""
    cut, rest = canc[canc["finish"] == "cancelled"], canc[canc["finish"] != "cancelled"]
    same, total = int(inv["identical"].sum()), int(inv["requests"].sum())
    diff = inv[inv["identical"] < inv["requests"]]
    inv_words = ("joining, padding, ragged acceptance and departures changed no request's output" if same == total else
                 f"{total - same} request outputs differ between served alone and batched, in "
                 + "; ".join(f"{r.policy} at temperature {r.temperature:g} (first difference at token "
                             f"{r.first_difference:.0f})" for r in diff.itertuples()))
    freed = int(cut["rows_freed"].astype(bool).sum()) if len(cut) else 0
    return {"inv_identical": same, "inv_total": total, "inv_settings": len(inv), "inv_words": inv_words,
            "n_cancelled": len(cut), "cancel_consistent": int(cut["consistent"].astype(bool).sum()),
            "others_unchanged": int(rest["consistent"].astype(bool).sum()), "n_others": len(rest),
            "rows_freed": freed, "row_min_mib": float(cut["row_bytes"].min()) / MIB if len(cut) else math.nan,
            "shared_steps": int((cut["step_departed"] > 1).sum()) if len(cut) else 0}


def memory_words(mem: pd.DataFrame, baseline: str) -> dict:
    """Glue values of the memory table: the row-over-needed range and the peaks at both ends."""
    base, spec = mem[mem["policy"] == baseline], mem[mem["policy"] != baseline]
    return {"row_over_needed_min": float(mem["row_over_needed"].min()),
            "row_over_needed_max": float(mem["row_over_needed"].max()),
            "peak_base_light": float(base.loc[base["rate"].idxmin(), "peak_kv_mib"]),
            "peak_spec_heavy": float(spec[spec["rate"] == spec["rate"].max()]["peak_kv_mib"].max())}


def vllm_words(speed: pd.DataFrame, be: pd.DataFrame, lat: pd.DataFrame, baseline: str, ours_lat=None) -> dict:
    """Glue values of the vLLM server runs: each configuration's latency speedup over vLLM's plain
    server at the lightest and the heaviest rate, its break-even in words, and plain decoding's
    throughput at the heaviest rate of each sweep: on vLLM's server and (``ours_lat``) on our engine."""
    lo, hi = speed["rate"].min(), speed["rate"].max()
    rates = sorted(lat["rate"].unique())
    pick = lambda rate: "; ".join(_speed_text(r) for r in speed[speed["rate"] == rate].itertuples())  # noqa: E731
    base = lat[lat["policy"] == baseline].set_index("rate")
    out = {"vllm_light_rate": lo, "vllm_heavy_rate": hi, "vllm_light": pick(lo), "vllm_heavy": pick(hi),
           "vllm_be_words": "; ".join(break_even_text(r, rates) for r in be.itertuples()),
           "vllm_base_tps_heavy": float(base.loc[hi, "serve_tokens_per_s"])}
    if ours_lat is not None:
        ours = ours_lat[ours_lat["policy"] == baseline].set_index("rate")
        out["ours_heavy_rate"] = float(ours.index.max())
        out["ours_base_tps_heavy"] = float(ours.loc[ours.index.max(), "serve_tokens_per_s"])
    return out


def server_tables(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (policy, rate), medians over rounds of a server's runs: (what ended how and what was left
    running after the run; what the stream delivered per chunk)."""
    runs = runs.assign(not_completed=runs["requests"] - runs["n_ok"])
    med = runs.groupby(["policy", "rate"], sort=False).median(numeric_only=True).reset_index()
    health = med[["policy", "rate", "n_ok", "not_completed", "preemptions", "running_after", "kv_usage_after"]]
    chunks = med[["policy", "rate", "acceptance_rate", "tokens_per_chunk", "chunk_itl_p95_s", "tpot_p95_s"]]
    return health, chunks


def server_words(servers: list[dict], policies, part_s: float | None = None) -> dict:
    """Glue values naming the servers of a run: vLLM's version, the KV-cache GiB, the configurations,
    and the wall time of the run's vLLM part as the end of a sentence ("took 264 s", or that a run
    made before it was timed was not)."""
    return {"vllm_version": servers[0]["version"], "vllm_kv_gib": servers[0]["kv_cache_gib"],
            "vllm_configs": ", ".join(policies),
            "vllm_part_words": "was not timed (a run made before it was)" if part_s is None else f"took {part_s:.0f} s"}


def beside(ours: pd.DataFrame, server: pd.DataFrame) -> pd.DataFrame:
    """Both engines' latency tables in one, each policy prefixed with its engine (one figure)."""
    served = "vLLM server: " + server["policy"].str.removeprefix("vLLM ")
    return pd.concat([ours.assign(policy="ours: " + ours["policy"]), server.assign(policy=served)], ignore_index=True)


YES_NO = {True: "yes", "True": "yes", False: "no", "False": "no"}  # a boolean column read back from CSV

# the chapter's column headings by table (None: the column's own name)
COLUMNS = {
    "speedup": {"policy": None, "rate": None, "latency_speedup": "latency speedup", "latency_lo": "low",
                "latency_hi": "high", "verdict": None, "predicted_batch1": "predicted, batch 1"},
    "server_speedup": {"policy": None, "rate": None, "latency_speedup": "latency speedup", "latency_lo": "low",
                       "latency_hi": "high", "verdict": None, "throughput_ratio": "throughput ratio"},
    "latency": {"policy": None, "rate": None, "serve_tokens_per_s": "tokens/s", "e2e_mean_s": "mean latency (s)",
                "ttft_p95_s": "first token p95 (s)", "tpot_p95_s": "time per token p95 (s)",
                "draft_share": "draft's share"},
    "memory": {"policy": None, "rate": None, "peak_kv_mib": "peak KV (MiB)", "row_kv_mib": "row's KV (MiB)",
               "needed_kv_mib": "needed KV (MiB)", "row_over_needed": "row / needed"},
    "invariance": {"policy": None, "temperature": None, "requests": None, "identical": "identical alone and batched",
                   "first_difference": "first different token", "max_running": "most running at once"},
    "cancellation": {"rid": "request", "cancel_after": "cancelled after (tokens)", "finish": "finish",
                     "streamed": "tokens streamed", "consistent": "prefix of its uncancelled output",
                     "step_departed": "step it left", "rows_freed": "rows freed"},
    "server_health": {"policy": None, "rate": None, "n_ok": "completed", "not_completed": "not completed",
                      "preemptions": None, "running_after": "running after", "kv_usage_after": "KV use after"},
    "server_chunks": {"policy": None, "rate": None, "acceptance_rate": "acceptance rate",
                      "tokens_per_chunk": "tokens per chunk", "chunk_itl_p95_s": "ITL p95 per chunk (s)",
                      "tpot_p95_s": "TPOT p95 (s)"},
}
