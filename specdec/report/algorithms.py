"""Chapter 08's one-row-per-algorithm table and its headline numbers, joined from the chapter's
tables (exact laws, frequency tests, measured speedups and quality).  Joins only: every number
comes from a committed table.

Example: algorithm_table(exact, freq, speed, quality, 1.0) -> one row per algorithm of ``exact``,
with NaN in the measured columns of the algorithms that were not measured.
"""

from __future__ import annotations

__all__ = ["algorithm_table", "speed_headline", "frequency_words", "measured_words", "lossy_range"]

SPEED = ["speedup_median", "speedup_lo", "speedup_hi", "verdict"]
NLL = ["nll_diff", "nll_diff_lo", "nll_diff_hi"]
DISTINCT = ["distinct_2_diff", "distinct_2_diff_lo", "distinct_2_diff_hi"]


def algorithm_table(exact, freq, real, speed, quality, temperature: float):
    """exact (one setting: algorithm, family, tv, kl, expected_tokens) joined with the largest
    detecting sample size of the toy's frequency tests (detect_N; 0 = never, the law is the
    target's), the real pair's one-step TV, first-draft acceptance and detecting N (tv_real,
    accept_real, detect_N_real), and the speedup and NLL change measured at ``temperature``."""
    det = freq.groupby("algorithm", sort=False)["detect_samples"].max().rename("detect_N")
    out = exact[["algorithm", "family", "tv", "kl", "expected_tokens"]].merge(det, on="algorithm", how="left")
    out = out.merge(real[["algorithm", "tv_median", "accept_first", "detect_N"]].rename(columns={
        "tv_median": "tv_real", "accept_first": "accept_real", "detect_N": "detect_N_real"}), on="algorithm", how="left")
    out = out.merge(speed[speed["temperature"] == temperature][["algorithm", *SPEED]], on="algorithm", how="left")
    q = quality[quality["temperature"] == temperature]
    return out.merge(q[["algorithm", *NLL, *[c for c in DISTINCT if c in q]]], on="algorithm", how="left")


def speed_headline(speed, temperature: float) -> dict:
    """Token verification's and the fastest algorithm's speedup at ``temperature`` (median, interval,
    verdict), and how many comparisons of the whole table are faster by their interval."""
    at = speed[speed["temperature"] == temperature]
    best, tok = at.sort_values("speedup_median").iloc[-1], at[at["algorithm"] == "token"].iloc[0]
    out = {"best_alg": best["algorithm"], "n_faster": int((speed["verdict"] == "faster").sum()), "n_speed": len(speed)}
    for tag, r in (("best", best), ("tok", tok)):
        out.update({f"{tag}_speed": float(r["speedup_median"]), f"{tag}_lo": float(r["speedup_lo"]),
                    f"{tag}_hi": float(r["speedup_hi"]), f"{tag}_verdict": r["verdict"]})
    return out


def frequency_words(freq) -> dict:
    """The frequency tests in words: the design N, "a of b" lossless algorithms that pass at it,
    "c of d" approximate algorithms caught at every N they were run at, and the largest detecting N.
    Example: 6 lossless rows passing, 10 approximate algorithms all caught -> "6 of 6", "10 of 10"."""
    design = freq[freq["run"] == "design"]
    ok = design[design["family"] == "lossless"]
    lossy = freq[freq["family"] == "approximate"]
    caught = lossy.groupby("algorithm")["verdict"].apply(lambda v: bool((v[v != "not run"] == "caught").all()))
    return {"design_n": int(design["samples"].iloc[0]),
            "lossless_pass": f"{int((ok['verdict'] == 'passes').sum())} of {len(ok)}",
            "lossy_caught": f"{int(caught.sum())} of {len(caught)}", "max_detect": int(freq["detect_samples"].max())}


def _slug(name: str) -> str:
    """"typical ε=0.09 δ=0.3" -> "typical", "top-2 membership" -> "top_k", "token" -> "token"."""
    first = name.split()[0].split(",")[0]
    return "top_k" if first.startswith("top-") else first.replace("-", "_")


def measured_words(table) -> dict:
    """Per measured algorithm of the joined table (`algorithm_table`), ``words_<first word>``: its
    speedup with interval and verdict, then its change in the target's NLL and (when the table has
    it) in the share of distinct 2-grams, with intervals, e.g.
    "1.384 [1.281, 1.415], faster; NLL +0.172 [+0.065, +0.285], distinct 2-grams -0.011 [-0.025, +0.002]"."""
    out = {}
    for _, r in table.dropna(subset=["speedup_median"]).iterrows():
        nll = "" if r[NLL].isna().any() else \
            f"; NLL {r['nll_diff']:+.3f} [{r['nll_diff_lo']:+.3f}, {r['nll_diff_hi']:+.3f}]"
        if nll and all(c in r for c in DISTINCT) and not r[DISTINCT].isna().any():
            nll += f", distinct 2-grams {r[DISTINCT[0]]:+.3f} [{r[DISTINCT[1]]:+.3f}, {r[DISTINCT[2]]:+.3f}]"
        out[f"words_{_slug(r['algorithm'])}"] = (f"{r['speedup_median']:.3f} [{r['speedup_lo']:.3f}, "
                                                f"{r['speedup_hi']:.3f}], {r['verdict']}{nll}")
    return out


def lossy_range(real) -> dict:
    """Range over the approximate rules of the real pair's table (`specdec.measure.real_laws.
    rule_real_rows`): median TV (real_min_tv, real_max_tv) and detecting N (real_min_n, real_max_n)."""
    lossy = real[real["family"] == "approximate"]
    return {"real_min_tv": float(lossy["tv_median"].min()), "real_max_tv": float(lossy["tv_median"].max()),
            "real_min_n": int(lossy["detect_N"].min()), "real_max_n": int(lossy["detect_N"].max())}
