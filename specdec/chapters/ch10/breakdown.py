"""Chapter 10's time-breakdown section: the committed tables of `make breakdown`
(`specdec.audit.breakdown`) as the page's tables and glued numbers.

Example: t = tables(resolve("data/results/breakdown")); economics_view(t)
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specdec.chapters.ch10.values import MISSING, _num as _text
from specdec.io.results import read_table
from specdec.report.formatting import estimate_cell

__all__ = ["NAMES", "tables", "economics_view", "plain_view", "values"]

NAMES = ("plain", "speculative", "forwards", "split", "limit", "cache")


def tables(path: Path) -> dict:
    """{name: DataFrame} of the breakdown's committed tables under ``path``."""
    return {name: read_table(path / f"{name}.csv") for name in NAMES}


def _num(v, fmt: str = ".2f") -> str:
    return _text(v, fmt)


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
        "engine": rows["engine"], "batch": rows["batch"], "tokens/s": [_num(v, ".0f") for v in rows["tokens_per_s"]],
        "speed / ours": [_num(v) for v in rows["relative_speed"]],
        "95% interval": [_iv(lo, hi) for lo, hi in zip(rows["relative_lo"], rows["relative_hi"])],
        "verdict": rows["verdict"],
        "of the reference": [_num(v / ref) if b == 1 else MISSING for v, b in zip(rows["tokens_per_s"], rows["batch"])]})


def _row(df: pd.DataFrame, **where) -> pd.Series:
    m = pd.Series(True, index=df.index)
    for col, v in where.items():
        m &= df[col] == v
    got = df[m]
    if len(got) != 1:
        raise KeyError(f"expected one row for {where}, found {len(got)}")
    return got.iloc[0]


def _fastest(p: pd.DataFrame, s: pd.DataFrame, engine: str, batch: int) -> tuple[str, str]:
    """(tokens/s, "plain" or "k = n"): an engine's fastest exact decoding at ``batch``: of its
    speculative rows faster than its plain decoding by their paired interval, the one of the largest
    speedup (its cell's median tokens/s), else plain decoding (its plain row's; ours: the reference's)."""
    won = s[(s["engine"] == engine) & (s["batch"] == batch) & (s["verdict"] == "faster")]
    if len(won):
        best = won.loc[won["speedup"].idxmax()]
        return _num(best["tokens_per_s"], ".0f"), f"k = {int(best['k'])}"
    plain = p.loc[p["batch"] == batch, "reference_tokens_per_s"].iloc[0] if engine == "ours" else \
        p.loc[(p["engine"] == engine) & (p["batch"] == batch), "tokens_per_s"].max()
    return _num(plain, ".0f"), "plain"


def values(t: dict, k: int = 2) -> dict:
    """The numbers the section's sentences glue; ``k`` the page's draft length (the speculative rows
    at other k are counted: faster, slower, of all)."""
    p, s, f, split, lim, cache = (t[n] for n in NAMES)
    sk = s[s["k"] == k]
    spec = {e: _row(sk, engine=e, batch=1) for e in ("ours", "vllm", "llama.cpp")}
    one, grow1, grow8 = _row(split, batch=1), _row(cache, batch=1), _row(cache, batch=8)
    vllm1, other = _row(p, engine="vllm", batch=1), s[s["k"] != k]
    fast = {(e, b): _fastest(p, s, e, b) for e, b in (("ours", 1), ("llama.cpp", 1), ("vllm", 1), ("ours", 8),
                                                    ("vllm", 8))}
    return dict(
        bd_length=int(split["length"].iloc[0]), weights_mb=_num(lim["weight_bytes"].iloc[0] / 1e6, ".1f"),
        ref_tps=_num(lim["tokens_per_s"].iloc[0], ".0f"), ref_gbs=_num(lim["bandwidth_bytes_per_s"].iloc[0] / 1e9, ".1f"),
        fwd_ms_b1=_num(1e3 * one["forward_s"]), out_ms_b1=_num(1e3 * one["outside_s"]),
        share_matrix_b1=_num(100 * one["share matrix products"], ".0f"),
        share_attention_b1=_num(100 * one["share attention"], ".0f"),
        share_copies_b1=_num(100 * one["share copies"], ".0f"), share_other_b1=_num(100 * one["share other"], ".0f"),
        vllm_step_b1=_num(1e3 / vllm1["tokens_per_s"], ".1f"), ours_step_b1=_num(1e3 / vllm1["reference_tokens_per_s"], ".1f"),
        grow_b1=_num(grow1["gain"]), grow_b1_iv=_iv(grow1["gain_lo"], grow1["gain_hi"]),
        grow_b8=_num(grow8["gain"]), grow_b8_iv=_iv(grow8["gain_lo"], grow8["gain_hi"]),
        grow_b1_verdict=grow1["verdict"], grow_b8_verdict=grow8["verdict"],
        bd_other_faster=int((other["verdict"] == "faster").sum()), bd_other_n=len(other),
        bd_other_slower=int((other["verdict"] == "slower").sum()),
        ours_b1_cost=_num(spec["ours"]["step_cost"]), ours_b1_verdict=spec["ours"]["verdict"],
        vllm_b1_cost=_num(spec["vllm"]["step_cost"]), vllm_b1_verdict=spec["vllm"]["verdict"],
        llama_b1_cost=_num(spec["llama.cpp"]["step_cost"]), llama_b1_verdict=spec["llama.cpp"]["verdict"],
        ours_fastest_b1=fast["ours", 1][0], ours_fastest_b1_how=fast["ours", 1][1],
        llama_fastest_b1=fast["llama.cpp", 1][0], llama_fastest_b1_how=fast["llama.cpp", 1][1],
        vllm_fastest_b1=fast["vllm", 1][0], vllm_fastest_b1_how=fast["vllm", 1][1],
        ours_fastest_b8=fast["ours", 8][0], ours_fastest_b8_how=fast["ours", 8][1],
        vllm_fastest_b8=fast["vllm", 8][0], vllm_fastest_b8_how=fast["vllm", 8][1])
