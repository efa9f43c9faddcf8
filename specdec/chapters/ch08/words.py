"""Chapter 08's one-row-per-algorithm table and the numbers its prose glues, joined and picked from
the chapter's tables (exact laws, frequency tests, laws on the real pair, precision, measured
speedups and quality).  Joins and look-ups only: every number comes from a committed table.

Example: algorithm_table(exact, freq, real, prec, speed, quality, 1.0) -> one row per algorithm of
``exact`` (NaN in the measured columns of the algorithms that were not measured), then one row per
precision path.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["main_setting", "exact_words", "algorithm_table", "speed_headline", "frequency_words", "measured_words",
           "lossy_range", "real_words", "precision_words", "quality_calibration"]

SPEED = ["speedup_median", "speedup_lo", "speedup_hi", "verdict"]
NLL = ["nll_diff", "nll_diff_lo", "nll_diff_hi"]
DISTINCT = ["distinct_2_diff", "distinct_2_diff_lo", "distinct_2_diff_hi"]


def main_setting(exact, label: str, floor: float):
    """The rows of one sampling setting, indexed by algorithm, with ``gain`` (E[L] / token
    verification's) and ``tv_shown`` (TV, floored at ``floor`` for a log axis)."""
    main = exact[exact["config"] == label].set_index("algorithm", drop=False).rename_axis(None)
    return main.assign(gain=main["expected_tokens"] / main.loc["token", "expected_tokens"],
                       tv_shown=main["tv"].clip(lower=floor))


def exact_words(exact, main, typical: str, n_drafts) -> dict:
    """Exact-table numbers the prose quotes: lossless max error and counts, the approximate TV range,
    E[L] of token, match and typical (``typical`` names its row), typical's TV, the lossless rules
    that gain over token verification (block, multi-draft), and E[L] for 1 then ``n_drafts`` drafts."""
    lossless, lossy = exact[exact["family"] == "lossless"], exact[exact["family"] == "approximate"]
    gainers = main[(main["family"] == "lossless") & (main["gain"] > 1 + 1e-9)]
    return {"lossless_max_err": float(lossless["max_abs_error"].max()), "n_lossless": lossless["algorithm"].nunique(),
            "n_lossy": lossy["algorithm"].nunique(), "lossy_min_tv": float(lossy["tv"].min()),
            "lossy_max_tv": float(lossy["tv"].max()), "token_el": float(main.loc["token", "expected_tokens"]),
            "match_el": float(main.loc["match", "expected_tokens"]), "typical_el": float(main.loc[typical, "expected_tokens"]),
            "typical_tv": float(main.loc[typical, "tv"]),
            "lossless_gainers": ", ".join(f"{a} ({g:.3f})" for a, g in zip(gainers["algorithm"], gainers["gain"])),
            "md_el": ", ".join(f"{main.loc[a, 'expected_tokens']:.3f}"
                               for a in ["token"] + [f"multi-draft n={n}" for n in n_drafts])}


def algorithm_table(exact, freq, real, prec, speed, quality, temperature: float):
    """exact (one setting: algorithm, family, tv, kl, expected_tokens) joined with the largest
    detecting sample size of the toy's frequency tests (detect_N; 0 = never, the law is the
    target's), the real pair's one-step TV, first-draft acceptance and detecting N (tv_real,
    accept_real, detect_N_real), and the speedup and NLL change measured at ``temperature``; then
    one row per precision path of ``prec`` (one setting) with family "precision", its TV from the
    same-precision target (what the algorithm adds) and the N that detects it."""
    det = freq.groupby("algorithm", sort=False)["detect_samples"].max().rename("detect_N")
    out = exact[["algorithm", "family", "tv", "kl", "expected_tokens"]].merge(det, on="algorithm", how="left")
    out = out.merge(real[["algorithm", "tv_median", "accept_first", "detect_N"]].rename(columns={
        "tv_median": "tv_real", "accept_first": "accept_real", "detect_N": "detect_N_real"}), on="algorithm", how="left")
    out = out.merge(speed[speed["temperature"] == temperature][["algorithm", *SPEED]], on="algorithm", how="left")
    q = quality[quality["temperature"] == temperature]
    out = out.merge(q[["algorithm", *NLL, *[c for c in DISTINCT if c in q]]], on="algorithm", how="left")
    paths = pd.DataFrame({"algorithm": "token verification, " + prec["path"], "family": "precision",
                          "tv": prec["tv_same_precision"], "detect_N": prec["detect_same_precision"]})
    return pd.concat([out, paths], ignore_index=True)


def speed_headline(speed, temperature: float) -> dict:
    """Token verification's and the fastest algorithm's speedup at ``temperature`` (median, interval,
    verdict), and how many of that temperature's comparisons are faster by their interval."""
    at = speed[speed["temperature"] == temperature]
    best, tok = at.sort_values("speedup_median").iloc[-1], at[at["algorithm"] == "token"].iloc[0]
    return {"best_alg": best["algorithm"], "n_faster": int((at["verdict"] == "faster").sum()), "n_speed": len(at),
            "best_speed": float(best["speedup_median"]), "best_lo": float(best["speedup_lo"]),
            "best_hi": float(best["speedup_hi"]), "best_verdict": best["verdict"],
            "tok_speed": float(tok["speedup_median"]), "tok_lo": float(tok["speedup_lo"]),
            "tok_hi": float(tok["speedup_hi"]), "tok_verdict": tok["verdict"]}


def frequency_words(freq) -> dict:
    """The frequency tests in words: the design N, "a of b" lossless algorithms that pass at it,
    "c of d" approximate algorithms caught at every N they were run at, and the largest detecting N.
    Example: 6 lossless rows passing, 10 approximate algorithms all caught -> "6 of 6", "10 of 10"."""
    design = freq[freq["run"] == "design"]
    ok = design[design["family"] == "lossless"]
    lossy = freq[freq["family"] == "approximate"]
    ran = lambda v: v[v != "not run"]  # noqa: E731
    caught = lossy.groupby("algorithm")["verdict"].apply(lambda v: bool(len(ran(v)) and (ran(v) == "caught").all()))
    return {"design_n": int(design["samples"].iloc[0]),
            "lossless_pass": f"{int((ok['verdict'] == 'passes').sum())} of {len(ok)}",
            "lossy_caught": f"{int(caught.sum())} of {len(caught)}", "max_detect": int(freq["detect_samples"].max())}


# the glue name of each measured algorithm's words (`measured_words`), by its kind (`_slug`)
WORDS_KEYS = {"token": "words_token", "block": "words_block", "match": "words_match", "typical": "words_typical",
              "relaxed": "words_relaxed", "top_k": "words_top_k"}


def _slug(name: str) -> str:
    """"typical ε=0.09 δ=0.3" -> "typical", "top-2 membership" -> "top_k", "token" -> "token"."""
    first = name.split()[0].split(",")[0]
    return "top_k" if first.startswith("top-") else first.replace("-", "_")


def measured_words(table) -> dict:
    """Per measured algorithm of the joined table (`algorithm_table`), under the name WORDS_KEYS gives
    its kind (``words_<first word>``): its speedup with interval and verdict, then its change in the
    target's NLL and (when the table has it) in the share of distinct 2-grams, with intervals, e.g.
    "S [lo, hi], faster; NLL +d [lo, hi], distinct 2-grams -d [lo, hi]" (three decimals each).
    A measured algorithm of a kind WORDS_KEYS does not name raises, and so do two of the same kind
    (their words would collide)."""
    out = {}
    for _, r in table.dropna(subset=["speedup_median"]).iterrows():
        key = WORDS_KEYS.get(_slug(r["algorithm"]))
        if key is None:
            raise ValueError(f"no words key for the measured algorithm {r['algorithm']!r}: declare it in WORDS_KEYS")
        if key in out:
            raise ValueError(f"two measured algorithms share the words key {key!r}")
        nll = "" if r[NLL].isna().any() else \
            f"; NLL {r['nll_diff']:+.3f} [{r['nll_diff_lo']:+.3f}, {r['nll_diff_hi']:+.3f}]"
        if nll and all(c in r for c in DISTINCT) and not r[DISTINCT].isna().any():
            nll += f", distinct 2-grams {r[DISTINCT[0]]:+.3f} [{r[DISTINCT[1]]:+.3f}, {r[DISTINCT[2]]:+.3f}]"
        out[key] = f"{r['speedup_median']:.3f} [{r['speedup_lo']:.3f}, {r['speedup_hi']:.3f}], {r['verdict']}{nll}"
    return out


def lossy_range(real) -> dict:
    """Range over the approximate rules of the real pair's table (`specdec.chapters.ch08.real_laws.
    rule_real_rows`): median TV (real_min_tv, real_max_tv) and detecting N (real_min_n, real_max_n)."""
    lossy = real[real["family"] == "approximate"]
    return {"real_min_tv": float(lossy["tv_median"].min()), "real_max_tv": float(lossy["tv_median"].max()),
            "real_min_n": int(lossy["detect_N"].min()), "real_max_n": int(lossy["detect_N"].max())}


def real_words(real, typical: str, n_max: int) -> dict:
    """The real pair's numbers the prose quotes: cells, typical's TV, N and acceptance, token's and
    match's acceptance, the multi-draft acceptance with ``n_max`` drafts, and `lossy_range`."""
    r = real.set_index("algorithm")
    return {"real_cells": int(real["cells"].iloc[0]), "real_typ_tv": float(r.loc[typical, "tv_median"]),
            "real_typ_n": int(r.loc[typical, "detect_N"]), "real_typ_acc": float(r.loc[typical, "accept_first"]),
            "real_tok_acc": float(r.loc["token", "accept_first"]), "real_match_acc": float(r.loc["match", "accept_first"]),
            "real_md_n": n_max, "real_md_acc": float(r.loc[f"multi-draft n={n_max}", "accept_first"]), **lossy_range(real)}


def precision_words(prec, real, sampled) -> dict:
    """Precision numbers the prose quotes, from the toy (``prec``), the real pair (``real``) and the
    sampled check (``sampled``), each restricted to its first setting by the caller."""
    pv, rv = prec.set_index("path"), real.set_index("path")
    s = sampled.set_index("path")
    return {"f32_same": float(pv.loc["float32 engine", "tv_same_precision"]),
            "bf16_logits_same": float(pv.loc["bf16 logits, float32 softmax", "tv_same_precision"]),
            "bf16_logits_exact": float(pv.loc["bf16 logits, float32 softmax", "tv_exact"]),
            "bf16_softmax_same": float(pv.loc["bf16 softmax", "tv_same_precision"]),
            "bf16_row_dev": float(pv.loc["bf16 softmax", "row_total_deviation"]),
            "bf16_softmax_detect": int(pv.loc["bf16 softmax", "detect_same_precision"]),
            "real_f32_same": float(rv.loc["float32 engine", "tv_same_max"]),
            "real_f32v_same": float(rv.loc["float32, verify in float32", "tv_same_max"]),
            "real_bf16_same": float(rv.loc["bf16 logits, float32 softmax", "tv_same_max"]),
            "real_bf16_softmax_same": float(rv.loc["bf16 softmax", "tv_same_max"]),
            "real_bf16v_median": float(rv.loc["bf16 softmax, verify in bf16", "tv_same_median"]),
            "real_bf16s_median": float(rv.loc["bf16 softmax", "tv_same_median"]),
            "sampled_min_p": float(s["p_vs_computed_law"].min()), "sampled_n": int(s["samples"].iloc[0]),
            "sampled_bf16_detect": int(s.loc["bf16 softmax", "detect_N"]),
            "sampled_bf16_p_same": float(s.loc["bf16 softmax", "p_vs_same_precision"])}


def quality_calibration(quality) -> dict:
    """The quality intervals of the lossless algorithms as a calibration: their law is the target's,
    so an interval of a difference from plain sampling that excludes 0 is a false positive.  Counts
    them over nll_diff and distinct_2_diff and every temperature: "a of b" (``lossless_false``)."""
    rows = quality[(quality["lossless"]) & (quality["algorithm"] != "autoregressive")]
    cols = [c for c in ("nll_diff", "distinct_2_diff") if c in rows]
    excl = sum(int(((rows[f"{c}_lo"] > 0) | (rows[f"{c}_hi"] < 0)).sum()) for c in cols)
    return {"lossless_false": f"{excl} of {len(rows) * len(cols)}"}
