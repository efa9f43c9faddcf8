"""Chapter 08's page tables and the numbers its prose glues, joined and picked from the chapter's
committed tables (exact laws, frequency tests, laws on the real pair, precision, measured runs).
Joins, one-word verdicts and look-ups only: every number comes from a committed table, and no
function here writes a sentence (the page's Markdown does).

The verdicts follow fixed rules, stated here so that the page can state them once:
  law        "exact" when the exact law of the first tokens is within EXACT_TOL of the target's at
             every outcome (float64 rounding), else "approximate";
  test       the toy's frequency tests of one algorithm: "passes" when no run rejected the target's
             law, "caught" when every run did, "mixed" otherwise, "not run" when none was run;
  agrees     the law verdict, the family the algorithm claims and the frequency test tell the same
             story: exact, lossless and passes, or approximate, approximate and caught;
  precision  "kept" when speculative sampling in a precision path stays within ROUNDING_TV of plain
             decoding in the same precision (toy and real pair alike), else "changed".

Example: law_table(main, freq, real) -> one row per algorithm of ``main`` with its law and test verdicts;
on_page(table, {"token", "typical ..."}) keeps the lossless rows and one per kind of approximate rule.
"""

from __future__ import annotations

import pandas as pd

from specdec.family.manifest import read_sums
from specdec.io.results import read_tables, run_differences
from specdec.report.formatting import estimate_cell

__all__ = ["EXACT_TOL", "ROUNDING_TV", "main_setting", "law_table", "on_page", "exact_values", "frequency_counts",
           "real_values", "precision_table", "precision_values", "measured_table", "speed_values",
           "quality_calibration", "alternatives_tables", "SHARED"]

# a lossless law is the target's up to float64 rounding (~1e-16 per outcome); an approximate one
# moves whole tokens' worth of mass, many orders of magnitude above this
EXACT_TOL = 1e-9
# a float32 softmax leaves each row's total off 1 by a few units of float32's roundoff (6e-8), and a
# law built from such rows inherits errors of that order; a bound well above it still means rounding,
# while a half-precision softmax (roundoff 4e-3 for bfloat16, 5e-4 for float16) lands far above it
ROUNDING_TV = 1e-6


def main_setting(exact, label: str, floor: float):
    """The rows of one sampling setting, indexed by algorithm, with ``gain`` (E[L] / token
    verification's) and ``tv_shown`` (TV, floored at ``floor`` for a log axis)."""
    main = exact[exact["config"] == label].set_index("algorithm", drop=False).rename_axis(None)
    return main.assign(gain=main["expected_tokens"] / main.loc["token", "expected_tokens"],
                       tv_shown=main["tv"].clip(lower=floor))


def _test_verdict(verdicts) -> str:
    ran = [v for v in verdicts if v != "not run"]
    if not ran:
        return "not run"
    return "passes" if all(v == "passes" for v in ran) else "caught" if all(v == "caught" for v in ran) else "mixed"


def law_table(main, freq, real):
    """One row per algorithm of ``main`` (one setting of the exact table, `main_setting`): algorithm,
    family (claimed), law and test verdicts (module docstring), agrees, tv, expected_tokens and
    detect_N (the largest N its frequency tests call for; 0 = never), then from the real pair's table
    ``real`` the median TV, the first draft's acceptance and the detecting N (tv_real, accept_real,
    detect_N_real; NaN where the real pair has no row for the algorithm)."""
    tests = freq.groupby("algorithm", sort=False).agg(test=("verdict", _test_verdict), detect_N=("detect_samples", "max"))
    out = main[["algorithm", "family", "max_abs_error", "tv", "expected_tokens"]].reset_index(drop=True)
    out = out.merge(tests, left_on="algorithm", right_index=True, how="left")
    out["law"] = ["exact" if e <= EXACT_TOL else "approximate" for e in out["max_abs_error"]]
    out["agrees"] = [(law, fam, t) in (("exact", "lossless", "passes"), ("approximate", "approximate", "caught"))
                     for law, fam, t in zip(out["law"], out["family"], out["test"])]
    real = real[["algorithm", "tv_median", "accept_first", "detect_N"]].rename(
        columns={"tv_median": "tv_real", "accept_first": "accept_real", "detect_N": "detect_N_real"})
    return out.merge(real, on="algorithm", how="left")


def _kind(name: str) -> str:
    """"typical ε=0.09 δ=0.3" -> "typical", "top-2 membership" -> "top", "relaxed λ=0.5, ..." -> "relaxed"."""
    return name.split()[0].split(",")[0].split("-")[0]


def on_page(table, measured) -> pd.DataFrame:
    """The rows of ``table`` (a `law_table`) a page shows: every lossless algorithm, and of each kind
    of approximate rule (first word of its name) the setting that was measured (a name in
    ``measured``), else its first row; the other settings of a sweep stay in the CSV and the figure."""
    lossy, measured = table.loc[table["family"] != "lossless", "algorithm"], set(measured)
    kinds = {_kind(a): a for a in reversed(list(lossy))}  # each kind's first row ...
    kinds.update({_kind(a): a for a in lossy if a in measured})  # ... unless one of its settings was measured
    return table[(table["family"] == "lossless") | table["algorithm"].isin(kinds.values())].reset_index(drop=True)


def exact_values(table) -> dict:
    """Numbers the prose quotes from a `law_table`: how many algorithms are exact and agree, the
    exact ones' largest error, the approximate ones' TV range, and the largest gain in E[L] over
    token verification among exact (lossless_gain) and approximate (lossy_gain) rules."""
    exact, lossy = table[table["law"] == "exact"], table[table["law"] == "approximate"]
    token = float(table.loc[table["algorithm"] == "token", "expected_tokens"].max())
    return {"n_exact": len(exact), "n_approximate": len(lossy), "n_agree": int(table["agrees"].sum()),
            "lossless_max_err": float(exact["max_abs_error"].max()), "lossy_min_tv": float(lossy["tv"].min()),
            "lossy_max_tv": float(lossy["tv"].max()), "lossless_gain": float(exact["expected_tokens"].max() / token),
            "lossy_gain": float(lossy["expected_tokens"].max() / token)}


def frequency_counts(freq) -> dict:
    """The frequency tests as counts: the design N, lossless algorithms passing at it (n_pass of
    n_lossless), approximate algorithms caught at every N they were run at (n_caught of n_lossy; one
    never run is not caught), and the largest detecting N."""
    design = freq[freq["run"] == "design"]
    ok = design[design["family"] == "lossless"]
    lossy = freq[freq["family"] != "lossless"].groupby("algorithm", sort=False)["verdict"].agg(_test_verdict)
    return {"design_n": int(design["samples"].max()), "n_pass": int((ok["verdict"] == "passes").sum()),
            "n_lossless": len(ok), "n_caught": int((lossy == "caught").sum()), "n_lossy": len(lossy),
            "max_detect": int(freq["detect_samples"].max())}


def real_values(real, typical: str, n_max: int) -> dict:
    """Numbers the prose quotes from the real pair's table (`specdec.chapters.ch08.real_laws.
    rule_real_rows`): tokens with p > 0, the first draft's acceptance under token, match and
    ``typical`` verification and with ``n_max`` independent drafts, and the approximate rules' range
    of median TV and of detecting N."""
    r = real.set_index("algorithm")
    lossy = real[real["family"] != "lossless"]
    return {"real_cells": int(real["cells"].max()), "real_tok_acc": float(r.loc["token", "accept_first"]),
            "real_match_acc": float(r.loc["match", "accept_first"]), "real_typ_acc": float(r.loc[typical, "accept_first"]),
            "real_md_n": n_max, "real_md_acc": float(r.loc[f"multi-draft n={n_max}", "accept_first"]),
            "real_min_tv": float(lossy["tv_median"].min()), "real_max_tv": float(lossy["tv_median"].max()),
            "real_min_n": int(lossy["detect_N"].min()), "real_max_n": int(lossy["detect_N"].max())}


def precision_table(prec, real):
    """One row per precision path of ``prec`` (the toy's table, one setting) joined with ``real``
    (the real pair's, one setting): path, TV from the same-precision target on the toy (tv_toy) and
    its largest over the real pair's contexts (tv_real), the real rows' largest |total - 1|
    (row_dev), the toy's detecting N, and the precision verdict (module docstring)."""
    out = prec[["path", "tv_same_precision", "detect_same_precision"]].merge(
        real[["path", "tv_same_max", "row_sum_dev_max"]], on="path", how="left")
    out = out.rename(columns={"tv_same_precision": "tv_toy", "tv_same_max": "tv_real", "row_sum_dev_max": "row_dev",
                              "detect_same_precision": "detect_N"})
    out["verdict"] = ["kept" if max(a, b) <= ROUNDING_TV else "changed" for a, b in zip(out["tv_toy"], out["tv_real"])]
    return out


def precision_values(prec, real, sampled, alpha: float) -> dict:
    """Precision numbers the prose quotes, from the toy (``prec``), the real pair (``real``), each
    one setting, and the sampled check of the code path (``sampled``): the TV bfloat16 logits cause
    from float64 and add to their same-precision target on the toy, the TV a bfloat16 softmax adds
    (toy; real median and max) and the real median with bfloat16 verification on top, a float32
    softmax's largest TV on the real pair; the smallest p-value of the sampled counts against their
    computed laws with its verdict at level ``alpha`` ("consistent" / "rejected"), the sampled N, and
    the bfloat16 softmax's p-value against the same-precision target with the N its TV needs."""
    pv, rv, s = prec.set_index("path"), real.set_index("path"), sampled.set_index("path")
    bf16 = "bf16 softmax"
    min_p = float(s["p_vs_computed_law"].min())
    return {"bf16_logits_exact": float(pv.loc["bf16 logits, float32 softmax", "tv_exact"]),
            "bf16_logits_same": float(pv.loc["bf16 logits, float32 softmax", "tv_same_precision"]),
            "bf16_softmax_same": float(pv.loc[bf16, "tv_same_precision"]),
            "real_f32_same": float(rv.loc["float32 engine", "tv_same_max"]),
            "real_bf16_softmax_same": float(rv.loc[bf16, "tv_same_max"]),
            "real_bf16s_median": float(rv.loc[bf16, "tv_same_median"]),
            "real_bf16v_median": float(rv.loc["bf16 softmax, verify in bf16", "tv_same_median"]),
            "sampled_min_p": min_p, "sampled_check": "consistent" if min_p > alpha else "rejected",
            "sampled_n": int(s["samples"].max()),
            "sampled_bf16_p_same": float(s.loc[bf16, "p_vs_same_precision"]),
            "sampled_bf16_detect": int(s.loc[bf16, "detect_N"])}


def measured_table(speed, quality):
    """One row per measured (temperature, algorithm), highest temperature first, lossless algorithms
    first, then by median speedup: temperature, algorithm, family, the speedup with its interval as
    text (speedup), its verdict and simultaneous verdict, and the changes in the target's NLL and in
    the share of distinct 2-grams against plain sampling, each with its interval as text."""
    q = quality[["temperature", "algorithm", "nll_diff", "nll_diff_lo", "nll_diff_hi", "distinct_2_diff",
                 "distinct_2_diff_lo", "distinct_2_diff_hi"]]
    out = speed.merge(q, on=["temperature", "algorithm"], how="left")
    out = out.assign(family=["lossless" if v else "approximate" for v in out["lossless"].astype(bool)])
    out = out.sort_values(["temperature", "lossless", "speedup_median"], ascending=False, kind="stable")
    cells = lambda c, **kw: [estimate_cell(*v, **kw) for v in zip(out[c], out[f"{c}_lo"], out[f"{c}_hi"])]  # noqa: E731
    out["speedup"] = [estimate_cell(*v) for v in zip(out["speedup_median"], out["speedup_lo"], out["speedup_hi"])]
    out["nll"] = cells("nll_diff", signed=True)
    out["distinct_2"] = cells("distinct_2_diff", digits=3, signed=True)
    return out.reset_index(drop=True)


def speed_values(speed, temperature: float) -> dict:
    """At ``temperature``: token verification's speedup (median, interval, verdict and simultaneous
    verdict), the fastest algorithm's with its name and family, the comparisons faster and slower by
    their interval, and how many the simultaneous intervals cover (every temperature: n_family)."""
    at = speed[speed["temperature"] == temperature]
    best = at.loc[at["speedup_median"].idxmax()]
    tok = at.set_index("algorithm").loc["token"]
    return {"tok_speed": float(tok["speedup_median"]), "tok_lo": float(tok["speedup_lo"]),
            "tok_hi": float(tok["speedup_hi"]), "tok_verdict": str(tok["verdict"]),
            "tok_verdict_sim": str(tok["verdict_sim"]),
            "best_algorithm": str(best["algorithm"]),
            "best_family": "lossless" if bool(best["lossless"]) else "approximate",
            "best_speed": float(best["speedup_median"]), "best_lo": float(best["speedup_lo"]),
            "best_hi": float(best["speedup_hi"]), "best_verdict": str(best["verdict"]),
            "best_verdict_sim": str(best["verdict_sim"]),
            "n_faster": int((at["verdict"] == "faster").sum()), "n_slower": int((at["verdict"] == "slower").sum()),
            "n_speed": len(at), "n_family": int(speed["family_size"].max())}


def quality_calibration(quality) -> dict:
    """The quality intervals of the lossless algorithms as a calibration: their law is the target's,
    so an interval of a difference from plain sampling that excludes 0 is a false positive.  Over
    nll_diff and distinct_2_diff and every temperature: lossless_false of lossless_intervals."""
    rows = quality[quality["lossless"].astype(bool) & (quality["algorithm"] != "autoregressive")]
    cols = [c for c in ("nll_diff", "distinct_2_diff") if c in rows]
    excl = sum(int(((rows[f"{c}_lo"] > 0) | (rows[f"{c}_hi"] < 0)).sum()) for c in cols)
    return {"lossless_false": excl, "lossless_intervals": len(rows) * len(cols)}


# `make alternatives`' parameters (`specdec.cli.alternatives.PARAMS`) that must equal the chapter's own
SHARED = {"draft": "DRAFT", "prompts": "PROMPTS", "prompt_len": "PROMPT_LEN", "seed": "SEED", "k": "MEASURED_K",
          "lambda": "MEASURED_LAMBDA", "top_k": "MEASURED_TOP_K", "dtype": "DTYPE"}


def alternatives_tables(folder, params: dict, checksum: str, check: bool = True) -> dict:
    """{name: DataFrame} of `make alternatives`' committed run under ``folder`` (runs, speedup,
    acceptance, quality) and its parameters (``params``), after checking (``check``; a SMOKE run's
    sizes are not the run's) that it ran the chapter's prompts and rules on the committed weights with
    committed code: not a ``--smoke`` run, every `SHARED` parameter equal to ``params``', the same
    prompts (``checksum``), every model file's sha256 that of ``data/models/SHA256SUMS``, a commit
    without uncommitted changes; else a ValueError naming what differs."""
    t = read_tables(folder, ("runs", "speedup", "acceptance", "quality"))
    prov = t["runs"].attrs["meta"]["provenance"]
    ran, differ = prov["parameters"], {}
    if check:
        sums = read_sums()
        differ = run_differences(ran, params, SHARED, checksum)
        differ.update({f: (h[:12], sums.get(f, "absent")[:12]) for f, h in prov["models_sha256"].items()
                       if sums.get(f) != h})
        if str(prov["git_commit"]).endswith("+dirty"):
            differ["git_commit"] = (prov["git_commit"], "a commit without uncommitted changes")
    if differ:
        raise ValueError(f"{folder} was run with other prompts or rules than the chapter's (its value, ours): "
                         f"{differ}; re-run it with `make alternatives`")
    return {**t, "params": ran}
