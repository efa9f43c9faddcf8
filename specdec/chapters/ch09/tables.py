"""Chapter 09's tables and glued values, from its measured rows (`specdec.measure.serving_runs`):
latency per (policy, rate), memory, each policy's speedup at every rate and its break-even load,
the checks' counts, and vLLM's server runs beside ours.  Values are numbers and one-word verdicts;
the chapter's sentences are in its notebook.

Example: speed_table(speed) -> one row per policy and a column per rate ("4/s"), each cell
"median [low, high] verdict" of that policy at that rate.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from specdec.audit.serving import LAWS, label_of, labelled_configs, law_of
from specdec.io.results import read_tables, run_differences
from specdec.measure.protocol import FASTER, HALF_WIDTH, LEVEL, SLOWER, bonferroni, max_level, pairs_for_level
from specdec.report.formatting import estimate_cell, number_list
from specdec.report.robustness import NOT_EXACT

__all__ = ["tidy_runs", "latency_table", "memory_table", "speed_table", "break_even_table", "break_even_state",
           "break_even_values", "trend", "serving_values", "check_values", "memory_values", "vllm_tables",
           "vllm_table", "vllm_values", "beside", "RESOLVED", "UNRESOLVED", "SHARED"]

RESOLVED, UNRESOLVED = "resolved", "unresolved"  # whether a break-even's interval locates it in the tested range

MIB = 2.0 ** 20
_LAT = ["mean_running", "serve_tokens_per_s", "goodput_tokens_per_s", "e2e_mean_s", "e2e_p99_s", "ttft_p95_s",
        "tpot_p50_s", "tpot_p95_s", "itl_p95_s", "itl_p99_s", "queue_p95_s", "tokens_per_row_step", "k_mean",
        "alpha_mle", "draft_share", "cpu_share", "load_1m"]


def tidy_runs(rows: list[dict]) -> list[dict]:
    """The runs as flat rows: acceptance per draft position as columns accept_pos_1.. (NaN beyond a run's k)."""
    acc = [list(r.get("accept_by_position") or []) for r in rows]
    names = [f"accept_pos_{i + 1}" for i in range(max(map(len, acc), default=0))]
    return [{**{c: v for c, v in r.items() if c != "accept_by_position"},
             **dict(zip(names, a + [math.nan] * len(names)))} for r, a in zip(rows, acc)]


def latency_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, rate): medians over rounds of the serving metrics."""
    cols = [c for c in _LAT if c in runs.columns]  # a server's runs lack the engine's own step counters
    return runs.groupby(["policy", "rate"], sort=False)[cols].median().reset_index().sort_values(["policy", "rate"],
                                                                                                 kind="stable")


def memory_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, rate): median peak key/value MiB of the run, and per request the MiB of its row of
    the batched caches (padding and holes included) against the MiB its own tokens need."""
    g = runs.groupby(["policy", "rate"], sort=False)
    out = pd.DataFrame({"peak_kv_mib": g["peak_kv_bytes"].median() / MIB,
                        "row_kv_mib": g["row_kv_bytes_mean"].median() / MIB,
                        "needed_kv_mib": g["needed_kv_bytes_mean"].median() / MIB}).reset_index()
    out["row_over_needed"] = out["row_kv_mib"] / out["needed_kv_mib"]
    return out


def _by_rate(speed: pd.DataFrame, first: dict) -> pd.DataFrame:
    """One row per policy (``first``: policy -> its leading columns), a column "<rate>/s" per rate
    holding "median [low, high] verdict" (the verdict only where the row's verdict is a speed verdict)."""
    rows = []
    for pol, g in speed.groupby("policy", sort=False):
        row = dict(first[pol])
        for r in g.sort_values("rate").to_dict("records"):
            text = estimate_cell(r["latency_speedup"], r["latency_lo"], r["latency_hi"])
            row[f"{r['rate']:g}/s"] = text if r["verdict"] == NOT_EXACT else f"{text} {r['verdict']}"
        rows.append(row)
    return pd.DataFrame(rows)


def speed_table(speed: pd.DataFrame) -> pd.DataFrame:
    """Our engine's policies, one row each (`_by_rate`)."""
    return _by_rate(speed, {p: {"policy": p} for p in speed["policy"].unique()})


def _rate(x: float, rates) -> str:
    """A break-even rate or interval end; one outside the tested range as "< lightest" / "> heaviest"."""
    if x == math.inf:
        return f"> {max(rates):g}"
    if x == -math.inf:
        return f"< {min(rates):g}"
    return f"{x:.3g}"


def break_even_state(lo: float, hi: float) -> str:
    """`UNRESOLVED` when a break-even's interval reaches beyond both ends of the tested rates (its
    ends -inf and +inf: the data place it nowhere in the range), else `RESOLVED`."""
    return UNRESOLVED if lo == -math.inf and hi == math.inf else RESOLVED


def break_even_values(be: pd.DataFrame, fixed: str) -> dict:
    """How many policies' break-evens are `UNRESOLVED` (`break_even_state`), of how many, and the
    state of the ``fixed`` policy's."""
    states = dict(zip(be["policy"], (break_even_state(a, b) for a, b in zip(be["lo"], be["hi"]))))
    return {"be_n": len(states), "be_unresolved": sum(v == UNRESOLVED for v in states.values()),
            "be_fixed": states.get(fixed, UNRESOLVED)}


def trend(speed: pd.DataFrame, policy: str) -> str:
    """"gains" / "loses" when the policy's interval at the heaviest rate lies wholly above / below its
    interval at the lightest, else "undecided"."""
    g = speed[speed["policy"] == policy].set_index("rate").sort_index()
    a, b = g.loc[g.index.min()], g.loc[g.index.max()]
    return "gains" if b["latency_lo"] > a["latency_hi"] else "loses" if b["latency_hi"] < a["latency_lo"] \
        else "undecided"


def break_even_table(be: pd.DataFrame, speed: pd.DataFrame) -> pd.DataFrame:
    """Per policy: the direction its median speedup crosses 1 in ("falling": its median is above 1
    at the lightest rate, "rising": it is not), the rate where it does ("> heaviest" when it never
    does) with the bootstrap interval and its `break_even_state`, the share of resamples that never
    cross, and its `trend`."""
    rates = sorted(speed["rate"].unique())
    return pd.DataFrame({
        "policy": be["policy"],
        "median crosses 1": be["direction"].map({"falls": "falling", "rises": "rising"}),
        "break-even (requests/s)": [_rate(x, rates) for x in be["break_even_rate"]],
        "95% interval": [f"[{_rate(a, rates)}, {_rate(b, rates)}]" for a, b in zip(be["lo"], be["hi"])],
        "state": [break_even_state(a, b) for a, b in zip(be["lo"], be["hi"])],
        "resamples never crossing": [f"{100 * x:.0f}%" for x in be["share_no_crossing"]],
        "lightest to heaviest": [trend(speed, p) for p in be["policy"]]})


def serving_values(speed: pd.DataFrame, lat: pd.DataFrame, baseline: str) -> dict:
    """Glue values of the speed comparison: counts by verdict, the interval half-width against the
    protocol's aim, what a statement simultaneous over all comparisons would need, the fixed policy's
    idealized prediction at the lightest rate beside its measured median and verdict ("above" /
    "below" / "inside" its interval), time to first token at the lightest rate ("longer" when every
    speculative policy's exceeds plain decoding's, else "mixed"), the load-aware rule at the heaviest."""
    lo_rate, hi_rate = speed["rate"].min(), speed["rate"].max()
    base = lat[lat["policy"] == baseline].set_index("rate")
    n, pairs = len(speed), int(speed["pairs"].min())
    out = {"light_rate": lo_rate, "heavy_rate": hi_rate, "n_comparisons": n,
           "n_faster": int((speed["verdict"] == FASTER).sum()), "n_slower": int((speed["verdict"] == SLOWER).sum()),
           "half_width_median": float(speed["half_width"].median()), "half_width_aim": HALF_WIDTH,
           "sim_level": 100 * bonferroni(LEVEL, n), "sim_pairs": pairs_for_level(bonferroni(LEVEL, n)),
           "pairs": pairs, "pairs_level": 100 * max_level(pairs),
           "n_sim_decided": int(speed["verdict_sim"].isin([FASTER, SLOWER]).sum()),
           "running_light": float(base.loc[lo_rate, "mean_running"]),
           "running_heavy": float(base.loc[hi_rate, "mean_running"]),
           "base_tps_heavy": float(base.loc[hi_rate, "serve_tokens_per_s"])}
    fixed = speed[(speed["rate"] == lo_rate) & speed["predicted_batch1"].notna()].to_dict("records")
    if fixed:
        f = fixed[0]
        out.update(pred_fixed=f["predicted_batch1"], pred_lo=f["latency_lo"], pred_hi=f["latency_hi"],
                   pred_median=f["latency_speedup"], pred_verdict=f["verdict"],
                   pred_rel="above" if f["predicted_batch1"] > f["latency_hi"] else
                   "below" if f["predicted_batch1"] < f["latency_lo"] else "inside")
    spec = lat[(lat["rate"] == lo_rate) & (lat["policy"] != baseline)]
    t_base = 1000 * base.loc[lo_rate, "ttft_p95_s"]
    out.update(ttft_base_ms=t_base, e2e_base_ms=1000 * base.loc[lo_rate, "e2e_mean_s"],
               ttft_spec_lo_ms=1000 * spec["ttft_p95_s"].min(), ttft_spec_hi_ms=1000 * spec["ttft_p95_s"].max(),
               ttft_verdict="longer" if 1000 * spec["ttft_p95_s"].min() > t_base else "mixed")
    la = lat[(lat["rate"] == hi_rate) & lat["policy"].str.contains("load-aware")].to_dict("records")
    if la:
        out.update(la_draft_share=float(la[0]["draft_share"]), la_k_heavy=float(la[0]["k_mean"]))
    return out


def check_values(inv: pd.DataFrame, canc: pd.DataFrame) -> dict:
    """Glue values of the invariance and cancellation checks: counts, and the smallest row's MiB."""
    cut, rest = canc[canc["finish"] == "cancelled"], canc[canc["finish"] != "cancelled"]
    return {"inv_identical": int(inv["identical"].sum()), "inv_total": int(inv["requests"].sum()),
            "inv_settings": len(inv), "n_cancelled": len(cut),
            "cancel_consistent": int(cut["consistent"].astype(bool).sum()),
            "others_unchanged": int(rest["consistent"].astype(bool).sum()), "n_others": len(rest),
            "rows_freed": int(cut["rows_freed"].astype(bool).sum()) if len(cut) else 0,
            "row_min_mib": float(cut["row_bytes"].min()) / MIB if len(cut) else math.nan}


def memory_values(mem: pd.DataFrame, baseline: str) -> dict:
    """Glue values of the memory table: the row-over-needed range and the peaks at both ends."""
    base, spec = mem[mem["policy"] == baseline], mem[mem["policy"] != baseline]
    return {"row_over_needed_min": float(mem["row_over_needed"].min()),
            "row_over_needed_max": float(mem["row_over_needed"].max()),
            "peak_base_light": float(base.loc[base["rate"].idxmin(), "peak_kv_mib"]),
            "peak_spec_heavy": float(spec[spec["rate"] == spec["rate"].max()]["peak_kv_mib"].max())}


# the workload parameters vLLM's run (`specdec.cli.serving_vllm`) must share with the chapter: its flag -> ours
SHARED = {"prompts": "PROMPTS", "prompt_len": "PROMPT_LEN", "requests": "N_REQUESTS", "short_len": "SHORT_LEN",
          "long_len": "LONG_LEN", "long_share": "LONG_SHARE", "temperature": "TEMPERATURE", "ttft_slo": "TTFT_SLO",
          "tpot_slo": "TPOT_SLO", "seed": "SEED", "draft": "DRAFT", "k": "FIXED_K"}


def vllm_tables(folder, params: dict, checksum: str, check: bool = True, laws_csv=LAWS) -> dict:
    """{name: DataFrame} of vLLM's committed serving run under ``folder`` (runs, speedups, break_even,
    servers), after checking (``check``; a SMOKE run's sizes are not the run's) that it ran the
    chapter's workload: every `SHARED` parameter equal to ``params``' and the same prompts
    (``checksum``), and that its configurations carry chapter 10's law verdicts as committed now
    (``laws_csv``: a verdict that changed since the run would mark a row wrongly); else a ValueError
    naming what differs."""
    t = read_tables(folder, ("runs", "speedups", "break_even", "servers"))
    if not check:
        return t
    differ = run_differences(t["servers"].attrs["meta"]["provenance"]["parameters"], params, SHARED, checksum)
    if differ:
        raise ValueError(f"{folder} was run with another workload than the chapter's (its value, ours): {differ}; "
                         "re-run it with `make engines`")
    served = list(t["speedups"]["policy"].unique())
    now = list(labelled_configs([label_of(x) for x in served], params["FIXED_K"], params["DRAFT"],
                                params["TEMPERATURE"], laws_csv=laws_csv))
    if sorted(served) != sorted(now):
        raise ValueError(f"{folder}: its configurations' law marks {served} are not chapter 10's verdicts now {now}; "
                         "re-run it with `make engines`")
    return t


def vllm_table(vspeed: pd.DataFrame) -> pd.DataFrame:
    """vLLM's server: one row per speculative configuration, its chapter 10 law status (`law_of`),
    and a column per rate with its latency speedup over vLLM's plain server; a verdict only for a
    configuration whose law test passed."""
    first = {p: {"configuration": label_of(p), "chapter 10's law test": law_of(p)} for p in vspeed["policy"].unique()}
    return _by_rate(vspeed, first)


def vllm_values(vspeed: pd.DataFrame, vruns: pd.DataFrame, vlat: pd.DataFrame, ours_lat: pd.DataFrame,
                baseline: str, servers: pd.DataFrame) -> dict:
    """Glue values of the vLLM server runs: the servers' version and KV cache, the wall seconds of
    the run's vLLM part (servers started, the sweep, servers stopped), configurations by law status,
    requests completed and what was left after the runs, and plain decoding's throughput at the
    heaviest rate on vLLM's server and on our loop."""
    laws = [law_of(p) for p in vspeed["policy"].unique()]
    vbase = vlat[vlat["policy"] == baseline].set_index("rate")
    ours = ours_lat[ours_lat["policy"] == baseline].set_index("rate")
    return {"vllm_version": servers["version"].iloc[0], "vllm_kv_gib": int(servers["kv_cache_gib"].iloc[0]),
            "vllm_part_s": float(servers["wall_s"].iloc[0]),
            "vllm_rates_shown": number_list(sorted(vspeed["rate"].unique())),
            "vllm_repeats": int(vruns["repeat"].nunique()),
            "vllm_n_configs": len(laws), "vllm_rejected": laws.count("rejected"),
            "vllm_passed": laws.count("passed"),
            "vllm_requests": int(vruns["requests"].sum()), "vllm_completed": int(vruns["n_ok"].sum()),
            "vllm_preemptions": int(np.nansum(vruns["preemptions"])),
            "vllm_running_after": int(np.nanmax(vruns["running_after"])),
            "vllm_heavy_rate": float(vbase.index.max()),
            "vllm_base_tps_heavy": float(vbase.loc[vbase.index.max(), "serve_tokens_per_s"]),
            "ours_heavy_rate": float(ours.index.max()),
            "ours_base_tps_heavy": float(ours.loc[ours.index.max(), "serve_tokens_per_s"])}


def beside(ours: pd.DataFrame, server: pd.DataFrame) -> pd.DataFrame:
    """Both engines' latency tables in one, each policy prefixed with its engine (one figure); a
    server's configuration by its label (`label_of`)."""
    served = "vLLM server: " + server["policy"].map(label_of)
    return pd.concat([ours.assign(policy="ours: " + ours["policy"]), server.assign(policy=served)], ignore_index=True)

