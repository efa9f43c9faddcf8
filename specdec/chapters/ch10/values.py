"""What chapter 10's page shows from its committed tables (DataFrames as
`specdec.report.chapter.Chapter.table` reads them back): the counts and one-word states its
sentences quote (`*_values`), and the compact tables it shows (`*_view`).  No sentence is made
here: the chapter's markdown words every finding.

A view shows one row per configuration, its two sampled settings in one cell: "a; b" (temperature 1
first) where they differ, one value where they agree, "-" where a setting has no number (a row
that did not run, plain decoding's verified share), so that no cell reads "nan".  A count counts
only rows that tested what they name (status pass / reject).

Example: law_values(laws)["shipped_rejected"] -> 6;  law_view(laws, ["vllm"]).columns[-1] -> "verdict"
"""

from __future__ import annotations

import math

import pandas as pd

from specdec.report.formatting import p_value_text

__all__ = ["law_values", "block_values", "fit_values", "acceptance_values", "pit_values", "kernel_values",
           "greedy_values", "prompt_values", "plain_values", "llama_values", "law_view", "acceptance_view", "pit_view", "speed_view",
           "repeat_view", "MISSING"]

MISSING = "-"  # a cell with no number
POWER_HEADERS = {"power": "power", "mdtv": "TV detected"}  # a law row's power at the design's TV, or the TV it detects
TESTED = ["pass", "reject"]


def _flag(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(["true", "1"])


def _tested(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["status"].isin(TESTED)]


def _num(v, fmt: str = ".3g") -> str:
    return MISSING if pd.isna(v) else format(float(v), fmt)


def _pair(values, text) -> str:
    """The cell of one configuration's settings: each value as ``text`` gives it, "; "-joined, one
    text where all agree."""
    cells = list(dict.fromkeys(text(v) for v in values))
    return "; ".join(cells) if cells else MISSING


def _p(v) -> str:
    return MISSING if pd.isna(v) else p_value_text(v)


def _per_config(t: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """One row per (engine, configuration) of ``t`` in table order: engine, configuration, then for
    each ``columns`` item out-name -> (column, text) the `_pair` cell of its rows."""
    rows = [{"engine": e, "configuration": c, **{name: _pair(g[col], text) for name, (col, text) in columns.items()}}
            for (e, c), g in t.groupby(["engine", "configuration"], sort=False)]
    return pd.DataFrame(rows, columns=["engine", "configuration", *columns])


def law_view(laws: pd.DataFrame, engines: list[str], power: str = "power") -> pd.DataFrame:
    """The verdict table of ``engines``' law rows: configuration (engine-prefixed when several
    engines share the table), what ran, verified share, samples of the deciding stage, p-value,
    ``power`` ("power" at the design's TV, or "mdtv": the binned TV detected with power 0.8), verdict."""
    out = _per_config(laws[laws["engine"].isin(engines)], {
        "what ran": ("ran", str), "verified share": ("verified_share", _num),
        "samples": ("n", lambda v: _num(v, ".0f")), "p-value": ("p_value", _p),
        POWER_HEADERS[power]: (power, _num), "verdict": ("verdict", str)})
    if len(engines) > 1:
        out["configuration"] = out["engine"] + ": " + out["configuration"]
    return out.drop(columns="engine")


def acceptance_view(acc: pd.DataFrame) -> pd.DataFrame:
    """vLLM's position-1 acceptance per configuration: measured, the exact expectation (one number
    where its two ends agree to the digits shown, else "[low, high]"), z and meets / misses."""
    def exact(lo, hi) -> str:
        a, b = _num(lo), _num(hi)
        return a if a == b else f"[{a}, {b}]"

    t = acc.assign(exact=[exact(lo, hi) for lo, hi in zip(acc["expected_lo"], acc["expected_hi"])])
    return _per_config(t, {"measured": ("measured", _num), "exact expectation": ("exact", str), "$z$": ("z", _num),
                           "status": ("status", str)}).drop(columns="engine")


def pit_view(pit: pd.DataFrame, power: pd.DataFrame) -> pd.DataFrame:
    """The every-position rows that carry the finding: vLLM's and llama.cpp's speculative configurations and the
    negative controls (the plain-decoding controls are in the CSV), p-value and verdict per setting, and for a negative control the test's power against
    it at vLLM's size ("-" for the others)."""
    t = _tested(pit)
    t = t[(t["engine"].isin(["vllm", "llama"]) & (t["role"] == "speculative")) | (t["role"] == "negative control")]
    pw = power.set_index(["configuration", "setting"])["power_vllm"] if len(power) else pd.Series(dtype=float)
    t = t.assign(power=[pw.get((c, s), math.nan) for c, s in zip(t["configuration"], t["setting"])])
    return _per_config(t, {"p-value": ("p_value", _p), "verdict": ("verdict", str),
                           "power at vLLM's size": ("power", _num)})


def speed_view(speed: pd.DataFrame) -> pd.DataFrame:
    """Each speed row: engine, setting, batch, speedup and its interval ("-" where not timed), verdict."""
    iv = [MISSING if pd.isna(lo) else f"[{_num(lo)}, {_num(hi)}]" for lo, hi in zip(speed["speedup_lo"], speed["speedup_hi"])]
    return pd.DataFrame({"engine": speed["engine"], "setting": speed["setting"], "batch": speed["batch"],
                         "speedup": [_num(v) for v in speed["speedup"]], "95% interval": iv, "verdict": speed["verdict"]})


def repeat_view(repeat: pd.DataFrame) -> pd.DataFrame:
    """Per configuration of the two-process check: samples and samples that differ ("not run"
    where the check did not run)."""
    if "differ" not in repeat:
        return pd.DataFrame({"configuration": ["all"], "samples": ["not run"], "samples that differ": ["not run"]})
    return pd.DataFrame({"configuration": repeat["configuration"], "samples": [_num(v, ".0f") for v in repeat["samples"]],
                         "samples that differ": [_num(v, ".0f") for v in repeat["differ"]]})


def law_values(laws: pd.DataFrame) -> dict:
    """Counts of the tested law rows: vLLM's shipped speculative rows rejected, patched rows passed,
    plain decoding passed; ours and Hugging Face's exact rows passed; the negative controls rejected;
    the rows a lead's follow-up decided; the smallest power of vLLM's passing speculative rows as
    text ("-" where none passed)."""
    t = _tested(laws)
    v, o = t[t["engine"] == "vllm"], t[t["engine"].isin(["ours", "hf"])]
    patched = _flag(v["patched"])
    shipped, vp = v[(v["role"] == "speculative") & ~patched], v[patched]
    neg, rest = o[o["role"] == "negative control"], o[o["role"] != "negative control"]
    passing = v[(v["status"] == "pass") & (v["role"] == "speculative")]["power"]
    return {"shipped_rejected": int((shipped["status"] == "reject").sum()), "shipped_n": len(shipped),
            "patched_pass": int((vp["status"] == "pass").sum()), "patched_n": len(vp),
            "vllm_controls_pass": int(((v["role"] == "control") & (v["status"] == "pass")).sum()),
            "vllm_controls": int((v["role"] == "control").sum()),
            "vllm_min_power": _num(passing.min() if len(passing) else math.nan, ".2f"),
            "neg_rejected": int((neg["status"] == "reject").sum()), "neg_n": len(neg),
            "others_pass": int((rest["status"] == "pass").sum()), "others_n": len(rest),
            "leads": int((t["stage"] == 3).sum()) if "stage" in t else 0}


def block_values(ran: pd.DataFrame) -> dict:
    """What the build did with the block-rejection configuration, for "was ___ by this build":
    "tested", "ignored", or "not run" (it raised, or is not in this run's plan)."""
    block = ran[ran["configuration"].str.contains("block")]
    state = str(block["ran"].iloc[0]) if len(block) else "not run"
    return {"block_ran": "ignored" if state.startswith("ignored") else state if state == "tested" else "not run"}


def fit_values(laws: pd.DataFrame, alpha: float) -> dict:
    """vLLM's rejected rows, and those whose best named wrong rule the counter leaves possible and
    the same test at ``alpha`` does not reject (it *fits*)."""
    f = laws[(laws["engine"] == "vllm") & (laws["status"] == "reject")]
    fits = f["best_fit"].fillna("").astype(str).ne("") & (f["fit_p"] > alpha)
    return {"failed_n": len(f), "fits_any": int(fits.sum())}


def acceptance_values(acc: pd.DataFrame) -> dict:
    """vLLM's patched rows meeting their exact expectation, shipped rows missing it."""
    acc = acc[acc["engine"] == "vllm"] if len(acc) else acc
    if not len(acc):
        return {"acc_patched_meet": 0, "acc_patched_n": 0, "acc_shipped_miss": 0, "acc_shipped_n": 0}
    patched = _flag(acc["patched"])
    return {"acc_patched_meet": int((patched & (acc["status"] == "meets")).sum()), "acc_patched_n": int(patched.sum()),
            "acc_shipped_miss": int((~patched & (acc["status"] == "misses")).sum()), "acc_shipped_n": int((~patched).sum())}


def pit_values(pit: pd.DataFrame) -> dict:
    """The every-position rows the page does not show: our engine's and Hugging Face's exact rules
    (no negative control) passed, of those tested."""
    t = _tested(pit)
    others = t[t["engine"].isin(["ours", "hf"]) & (t["role"] != "negative control")]
    return {"pit_others_pass": int((others["status"] == "pass").sum()), "pit_others_n": len(others)}


def kernel_values(kernel: pd.DataFrame) -> dict:
    """"affected" where vLLM's expand got some dtype wrong, "unaffected" where it got every one
    right, "unchecked" where the check did not run (no dtype rows)."""
    ok = kernel[kernel["dtype"].fillna("").astype(str) != ""]
    if not len(ok):
        return {"kernel_affected": "unchecked"}
    return {"kernel_affected": "affected" if (~_flag(ok["shipped_correct"])).any() else "unaffected"}


def greedy_values(greedy: pd.DataFrame) -> dict:
    """Speculative greedy configurations equal to their engine's plain greedy, and the differences
    that count against speculation."""
    g = greedy[greedy["samples"].fillna(0) > 0] if "samples" in greedy else greedy.iloc[:0]
    same = g["identical"] == g["samples"] if len(g) else pd.Series(dtype=bool)
    return {"greedy_same": int(same.sum()), "greedy_n": len(g),
            "greedy_against": int(g["against_speculation"].sum()) if len(g) else 0}


def prompt_values(inputs: dict) -> dict:
    """The chosen prompts' smallest drafting share and second-token spread over every setting."""
    chosen = inputs["chosen"]
    return {"min_share_chosen": min(min(r["drafts"]) for r in chosen),
            "min_spread_chosen": min(min(r["spread"]) for r in chosen)}


def llama_values(laws: pd.DataFrame, acc: pd.DataFrame, pit: pd.DataFrame) -> dict:
    """llama.cpp's rows: law rows passed of those tested (speculative, and plain decoding), the
    range of binned TV its speculative rows detect with power 0.8 (text), the smallest power of its
    passing speculative rows at the design's TV (text, "-" where none passed), acceptance rows meeting
    their exact expectation, speculative every-position rows passed, and
    whether its sample-and-match rows' (greedy drafts, n-gram lookup) p-values equal its plain
    decoding's ("equal", "different", "untested")."""
    t, a, p = _tested(laws), acc[acc["engine"] == "llama"] if len(acc) else acc, _tested(pit)
    lt, lp = t[t["engine"] == "llama"], p[(p["engine"] == "llama") & (p["role"] == "speculative")]
    spec = lt[lt["role"] == "speculative"]
    lo, hi = (spec["mdtv"].min(), spec["mdtv"].max()) if len(spec) else (math.nan, math.nan)
    # sample-and-match draws the target's own sample at every position: under the same request seeds
    # its samples are plain decoding's, so its rows' p-values equal the control's to the digit
    plain = lt[lt["role"] == "control"].set_index("setting")["p_value"]
    match = lt[lt["configuration"].str.contains("sample-and-match|ngram")]
    same = [bool(plain.get(k) == v) for k, v in zip(match["setting"], match["p_value"])]
    return {"llama_spec_pass": int((spec["status"] == "pass").sum()), "llama_spec_n": len(spec),
            "llama_control_pass": int(((lt["role"] == "control") & (lt["status"] == "pass")).sum()),
            "llama_control_n": int((lt["role"] == "control").sum()),
            "llama_min_power": _num(spec.loc[spec["status"] == "pass", "power"].min(), ".2f"),
            "llama_mdtv": _num(lo, ".2f") if _num(lo, ".2f") == _num(hi, ".2f") else f"{_num(lo, '.2f')}-{_num(hi, '.2f')}",
            "llama_acc_meet": int((a["status"] == "meets").sum()) if len(a) else 0, "llama_acc_n": len(a),
            "llama_pit_pass": int((lp["status"] == "pass").sum()), "llama_pit_n": len(lp),
            "llama_coupled": "equal" if same and all(same) else "different" if same else "untested"}


def plain_values(plain: pd.DataFrame) -> dict:
    """The engines' plain decoding against the reference: comparisons faster, of all."""
    return {"plain_faster": int((plain["verdict"] == "faster").sum()), "plain_n": len(plain)}
