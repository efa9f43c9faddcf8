"""The numbers chapter 10's sentences quote, counted from its committed tables (DataFrames as
`specdec.report.chapter.Chapter.table` reads them back).  Counts, extremes and one-word states only;
the sentences around them are the chapter's own.

Example: law_values(laws)["shipped_rejected"] -> 6
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["law_values", "acceptance_values", "pit_summary", "repeat_values", "kernel_values", "speed_counts",
           "block_values", "failed_fits"]


def _flag(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(["true", "1"])


def _min(s: pd.Series) -> float:
    return float(s.min()) if len(s) else math.nan


def law_values(laws: pd.DataFrame) -> dict:
    """Counts of the law rows that tested what they name (status pass / reject): vLLM's shipped
    speculative rows rejected, patched rows passed, controls passed (and the TV they detect), the
    smallest power of vLLM's passing speculative rows and their smallest verified share; the other engines' rows passed and their range of
    detectable TV; the negative controls rejected; the rows a lead's follow-up decided (stage 3)."""
    t = laws[laws["status"].isin(["pass", "reject"])]
    v, o = t[t["engine"] == "vllm"], t[t["engine"] != "vllm"]
    patched = _flag(v["patched"])
    shipped = v[(v["role"] == "speculative") & ~patched]
    vp = v[patched]
    neg = o[o["role"] == "negative control"]
    rest = o[o["role"] != "negative control"]
    return {"shipped_rejected": int((shipped["status"] == "reject").sum()), "shipped_n": len(shipped),
            "patched_pass": int((vp["status"] == "pass").sum()), "patched_n": len(vp),
            "vllm_controls_pass": int(((v["role"] == "control") & (v["status"] == "pass")).sum()),
            "vllm_controls": int((v["role"] == "control").sum()),
            "vllm_min_power": _min(v[(v["status"] == "pass") & (v["role"] == "speculative")]["power"]),
            "vllm_controls_mdtv": float(v.loc[v["role"] == "control", "mdtv"].max()),  # the weakest row's
            "vllm_min_share": _min(v[v["role"] == "speculative"]["verified_share"]),
            "neg_rejected": int((neg["status"] == "reject").sum()), "neg_n": len(neg),
            "others_pass": int((rest["status"] == "pass").sum()), "others_n": len(rest),
            "others_mdtv_min": _min(rest["mdtv"]), "others_mdtv_max": float(rest["mdtv"].max()) if len(rest) else math.nan,
            "others_min_share": _min(rest[rest["role"] == "speculative"]["verified_share"]),
            "vllm_leads": int((v["stage"] == 3).sum()) if "stage" in v else 0,
            "other_leads": int((rest["stage"] == 3).sum()) if "stage" in rest else 0}


def block_values(ran: pd.DataFrame) -> dict:
    """What the build did with the block-rejection row: its state ("tested" / "ignored by this
    build") and the options it ignored."""
    block = ran[ran["configuration"].str.contains("block")]
    if not len(block):
        return {"block_status": "not in this run", "block_ignored": "none"}
    return {"block_status": str(block["ran"].iloc[0]), "block_ignored": str(block["ignored"].iloc[0]) or "none"}


def failed_fits(laws: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """vLLM's rejected rows with their best named rule ("none left" where the counter excluded every
    rule) and whether it fits (its own test's p-value above ``alpha``)."""
    f = laws[(laws["engine"] == "vllm") & (laws["status"] == "reject")].copy()
    f["fits"] = f["fit_p"].map(lambda p: "yes" if p == p and p > alpha else "no")
    f["best_fit"] = f["best_fit"].fillna("").replace("", "none left")
    f["excluded"] = f["excluded"].fillna("")
    return f


def acceptance_values(acc: pd.DataFrame) -> dict:
    """Patched rows meeting their exact expectation, shipped rows missing it."""
    patched = _flag(acc["patched"]) if len(acc) else pd.Series(dtype=bool)
    return {"acc_patched_meet": int((patched & (acc["status"] == "meets")).sum()) if len(acc) else 0,
            "acc_patched_n": int(patched.sum()) if len(acc) else 0,
            "acc_shipped_miss": int((~patched & (acc["status"] == "misses")).sum()) if len(acc) else 0,
            "acc_shipped_n": int((~patched).sum()) if len(acc) else 0}


def repeat_values(repeat: pd.DataFrame) -> dict:
    """Samples that differ between the two fresh processes: plain, shipped speculative, patched."""
    if not len(repeat) or "differ" not in repeat:
        return {"repeat_plain": 0, "repeat_shipped": 0, "repeat_patched": 0, "repeat_samples": 0}
    patched, plain = _flag(repeat["patched"]), repeat["configuration"] == "plain decoding"
    return {"repeat_plain": int(repeat.loc[plain, "differ"].sum()),
            "repeat_shipped": int(repeat.loc[~patched & ~plain, "differ"].sum()),
            "repeat_patched": int(repeat.loc[patched, "differ"].sum()),
            "repeat_samples": int(repeat["samples"].max())}


def kernel_values(kernel: pd.DataFrame) -> dict:
    """"affected" / "not affected" and the dtypes vLLM's expand got wrong."""
    ok = kernel[kernel["dtype"].astype(str) != ""]
    wrong = ok.loc[~_flag(ok["shipped_correct"]), "dtype"]
    return {"kernel_affected": "affected" if len(ok) and len(wrong) else "not affected",
            "kernel_wrong": ", ".join(wrong) or "none"}


def pit_summary(pit: pd.DataFrame, power: pd.DataFrame) -> dict:
    """The every-position rows: vLLM's shipped speculative rows rejected, patched passed, the rows
    that should pass (plain decoding, patched vLLM, the other engines' exact rules) passed, the
    negative controls rejected, vLLM's smallest row in tokens and largest detectable TV, and the
    smallest power against a planted fault at vLLM's size."""
    t = pit[pit["status"].isin(["pass", "reject"])]
    patched = _flag(t["patched"])
    shipped_spec = (t["engine"] == "vllm") & (t["role"] == "speculative") & ~patched
    neg = t["role"] == "negative control"
    clean = ~neg & ~shipped_spec
    v = t[t["engine"] == "vllm"]
    col = [c for c in power.columns if c.startswith("power_vllm")]
    return {"pit_shipped_rej": int((shipped_spec & (t["status"] == "reject")).sum()), "pit_shipped_n": int(shipped_spec.sum()),
            "pit_patched_pass": int((patched & (t["status"] == "pass")).sum()), "pit_patched_n": int(patched.sum()),
            "pit_clean_pass": int((clean & (t["status"] == "pass")).sum()), "pit_clean_n": int(clean.sum()),
            "pit_neg_rej": int((neg & (t["status"] == "reject")).sum()), "pit_neg_n": int(neg.sum()),
            "pit_tokens": int(v["tokens"].min()) if len(v) else 0,
            "pit_mdtv": float(v["mdtv"].max()) if len(v) else math.nan,
            "pit_min_power": float(power[col].min().min()) if col and len(power) else math.nan,
            "pit_leads": int((t["stage"] == 2).sum()) if "stage" in t else 0}


def speed_counts(speed: pd.DataFrame) -> dict:
    """Comparisons faster, slower, undecided, out of reach and not the target's law."""
    c = speed["verdict"].value_counts()
    return {"speed_n": len(speed), "speed_faster": int(c.get("faster", 0)), "speed_slower": int(c.get("slower", 0)),
            "speed_undecided": int(c.get("undecided", 0)), "speed_out_of_reach": int(c.get("too few pairs for this level", 0)),
            "speed_not_exact": int(c.get("not the target's law here", 0))}
