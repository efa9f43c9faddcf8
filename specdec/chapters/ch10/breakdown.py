"""Chapter 10's time-breakdown section: the committed tables of `make breakdown`
(`specdec.audit.breakdown`) as the page's tables and glued numbers.

Example: t = read_tables(resolve("data/results/breakdown"), NAMES); economics_view(t)
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from specdec.chapters.ch10.values import MISSING, _num as _text
from specdec.report.formatting import estimate_cell

__all__ = ["NAMES", "economics_view", "plain_view", "split_view", "versus_view", "at_least_as_fast", "values"]

NAMES = ("plain", "speculative", "forwards", "split", "limit", "cache", "versus")  # its tables, for `read_tables`
GAINS = (("in-place cache", 1, "grow_b1", "grow_b1_iv"), ("kernel", 1, "kernel_b1", "kernel_b1_iv"),
         ("packed weights", 1, "packed_b1", "packed_b1_iv"), ("in-place cache", 8, "grow_b8", "grow_b8_iv"),
         ("kernel", 8, "kernel_b8", "kernel_b8_iv"), ("packed weights", 8, "packed_b8", "packed_b8_iv"))  # cache.csv's rows glued
AT_LEAST = 0.97  # ours "at least as fast" as an engine: ours / engine's interval starts at 0.97 or above, median >= 1


_num = partial(_text, fmt=".2f")
def _iv(lo, hi) -> str:
    return MISSING if pd.isna(lo) else f"[{_num(lo)}, {_num(hi)}]"


def economics_view(t: dict, ks: tuple = (2,)) -> pd.DataFrame:
    """One row per engine and batch at each k of ``ks``: tokens per target forward, the step cost in
    plain steps, the speedup with its interval, and its verdict."""
    s = t["speculative"]
    s = s[s["k"].isin(ks)]
    return pd.DataFrame({
        "engine": s["engine"], "batch": s["batch"], "tokens per forward": [_num(v) for v in s["tokens_per_forward"]],
        "step cost": [_num(v) for v in s["step_cost"]],
        "speedup [95%]": [estimate_cell(v, lo, hi) or MISSING for v, lo, hi in zip(s["speedup"], s["speedup_lo"],
                                                                                       s["speedup_hi"])],
        "verdict": s["verdict"]})


def plain_view(t: dict) -> pd.DataFrame:
    """Each engine's plain decoding against ours: tokens per second, relative speed with its interval
    and verdict, and (batch 1) the share of the streaming reference's rate."""
    p, ref = t["plain"], float(t["limit"]["tokens_per_s"].iloc[0])
    first = p.drop_duplicates("batch")
    ours = pd.DataFrame({"engine": "ours", "batch": first["batch"], "tokens_per_s": first["reference_tokens_per_s"],
                         "relative_speed": 1.0, "relative_lo": float("nan"), "relative_hi": float("nan"),
                         "verdict": "reference"})
    rows = pd.concat([ours, p[list(ours.columns)]], ignore_index=True).sort_values(["batch", "engine"], kind="stable")
    return pd.DataFrame({
        "engine": rows["engine"], "batch": rows["batch"], "tokens/s": [_text(v, ".0f") for v in rows["tokens_per_s"]],
        "speed / ours": [_num(v) for v in rows["relative_speed"]],
        "95% interval": [_iv(lo, hi) for lo, hi in zip(rows["relative_lo"], rows["relative_hi"])],
        "verdict": rows["verdict"],
        "of the reference": [_num(v / ref) if b == 1 else MISSING for v, b in zip(rows["tokens_per_s"], rows["batch"])]})


def split_view(t: dict) -> pd.DataFrame:
    """Milliseconds per plain decoding step of the profiled calls per engine and batch (means over
    the split's rounds), by part (`specdec.measure.step_split.operator_split`; copies counted with the
    other operators), and the unprofiled calls' step."""
    s = t["split"]
    return pd.DataFrame({"engine, batch": [f"{e}, {b}" for e, b in zip(s["engine"], s["batch"])],
                         "matrix products": [_num(v) for v in s["ms matrix products"]],
                         "attention": [_num(v) for v in s["ms attention"]],
                         "other operators": [_num(a + b) for a, b in zip(s["ms copies"], s["ms other"])],
                         "outside operators": [_num(v) for v in s["ms outside operators"]],
                         "profiled step": [_num(v) for v in s["ms profiled step"]],
                         "unprofiled step": [_num(v) for v in s["ms unprofiled step"]]})


def at_least_as_fast(rows: pd.DataFrame) -> pd.Series:
    """Per head-to-head row: is ours at least as fast as the engine (ours over the engine, the inverse
    of the row's relative speed: median >= 1, interval's low end >= AT_LEAST)?  False where untimed.
    The inversion is exact for the interval's ends; with an even number of pairs the median averages
    the two middle ratios, so the inverted one can read below 1 where ours-over-engine's would not:
    the rule errs towards "no"."""
    return (rows["relative_speed"] <= 1.0) & (rows["relative_hi"] <= 1.0 / AT_LEAST)


SHORT = ((" verification", ""), (" drafts (rejection)", ""), (" (defaults)", ""), (" decoding", ""), (", greedy", ""),
         ("temperature 1", "T = 1"))  # page labels


def _short(label: str) -> str:
    """A configuration's label as the head-to-head table prints it ("token verification, k = 2" ->
    "token, k = 2"; "plain decoding" -> "plain"); the CSV keeps the full label."""
    for old, new in SHORT:
        label = label.replace(old, new)
    return label


def versus_view(t: dict) -> pd.DataFrame:
    """The head-to-head rows: each engine's configuration against ours' in every matchup, its speed over
    ours with the interval, and whether ours was at least as fast (tokens/s and verdicts: the CSV)."""
    v = t["versus"]
    return pd.DataFrame({
        "matchup": [_short(c) for c in v["comparison"]], "batch": v["batch"],
        "engine: configuration": [f"{e}: {_short(c)}" for e, c in zip(v["engine"], v["configuration"])],
        "ours": [_short(c) for c in v["reference_configuration"]], "speed / ours [95%]": [estimate_cell(x, lo, hi) or MISSING for x, lo, hi in
                               zip(v["relative_speed"], v["relative_lo"], v["relative_hi"])],
        "ours >= it": at_least_as_fast(v).map({True: "yes", False: "no"})})


def _row(df: pd.DataFrame, **where) -> pd.Series:
    got = df[(df[list(where)] == pd.Series(where)).all(axis=1)]
    if len(got) != 1:
        raise KeyError(f"expected one row for {where}, found {len(got)}")
    return got.iloc[0]


def values(t: dict) -> dict:
    """The numbers the section's sentences glue."""
    p, split, lim, cache, vs = (t[n] for n in ("plain", "split", "limit", "cache", "versus"))
    ms = {(e, b): _row(split, engine=e, batch=b) for e in ("ours", "vllm") for b in (1, 8)}
    llama1 = _row(p, engine="llama.cpp", batch=1)
    return dict(
        bd_length=int(split["length"].iloc[0]), weights_mb=_text(lim["weight_bytes"].iloc[0] / 1e6, ".1f"),
        ref_tps=_text(lim["tokens_per_s"].iloc[0], ".0f"), ref_gbs=_text(lim["bandwidth_bytes_per_s"].iloc[0] / 1e9, ".1f"),
        split_rounds=int(split["rounds"].min()),
        ours_mm_b1=_num(ms["ours", 1]["ms matrix products"]), vllm_mm_b1=_num(ms["vllm", 1]["ms matrix products"]),
        ours_mm_b8=_num(ms["ours", 8]["ms matrix products"]), vllm_mm_b8=_num(ms["vllm", 8]["ms matrix products"]),
        ours_outside_b1=_num(ms["ours", 1]["ms outside operators"]),
        vllm_outside_b1=_num(ms["vllm", 1]["ms outside operators"]),
        **{n: v for c, b, *names in GAINS for r in [_row(cache, change=c, batch=b)]
           for n, v in zip(names, (_num(r["gain"]), _iv(r["gain_lo"], r["gain_hi"])))},
        vs_n=len(vs), vs_ours_ge=int(at_least_as_fast(vs).sum()),
        vs_faster=int((vs["verdict"] == "faster").sum()), vs_slower=int((vs["verdict"] == "slower").sum()),
        vs_pairs=int(vs["pairs"].min()), vs_prompts=int(vs["prompts"].min()),
        vs_llama_exact_b1=_row(vs, comparison="best exact, greedy", engine="llama.cpp", batch=1)["verdict"],
        vs_llama_k_b1=_row(vs, comparison="best k, greedy", engine="llama.cpp", batch=1)["verdict"],
        ours_over_llama_b1=_num(1 / llama1["relative_speed"]),
        ours_over_llama_b1_iv=_iv(1 / llama1["relative_hi"], 1 / llama1["relative_lo"]))
