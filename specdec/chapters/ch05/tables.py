"""Chapter 05's derived tables and findings, computed from its summary table alone.

Every function takes the table of `specdec.chapters.ch05.runs.record_runs` (a DataFrame, as
`specdec.io.results.read_table` returns it: one row per configuration, ``top_p`` 1.0 where no nucleus
truncation was applied) and returns rows or values; nothing here decodes, so a chapter rendering from
committed results and one recomputing them say the same.  The accepted fraction at draft position i is
#(N >= i) / #(N >= i-1) (the cost model's alpha at position i); the law held against the accepted
lengths is the truncated geometric P(N = n) = alpha^n (1 - alpha) (n < k), P(N = k) = alpha^k.

Example: for counts "2 1 1" (k = 2, 4 steps) position_rows gives position 1: reached 4, accepted 2;
position 2: reached 2, accepted 1.
"""

from __future__ import annotations

import numpy as np

from specdec.core.acceptance import truncated_geometric_pmf
from specdec.core.stats import cluster_ratio_interval, wilson_interval
from specdec.chapters.ch05.runs import parse_counts
from specdec.measure.protocol import OUT_OF_REACH, bonferroni, comparison
from specdec.io.results import records

__all__ = ["token_rows", "shown_draft", "position_rows", "position_constancy", "geometric_rows", "predicted_rows",
           "alpha_rows", "gof_by_temperature", "gof_scope", "greedy_values", "prediction_check", "block_vs_token",
           "block_vs_token_values", "figure_values"]

MORE, FEWER = "more", "fewer"  # block against token verification: tokens per step (the protocol's faster, slower)


def token_rows(summary, temperature=None, plain: bool = True):
    """Token-verification rows, optionally at one temperature; ``plain``: without nucleus truncation."""
    sel = summary["method"] == "token"
    if plain:
        sel &= summary["top_p"] == 1.0
    if temperature is not None:
        sel &= summary["temperature"] == temperature
    return summary[sel]


def shown_draft(drafts) -> str:
    """The draft whose accepted lengths the chapter draws: the small draft when measured, else the first.
    Example: shown_draft(["ngram", "draft-small"]) -> "draft-small"; shown_draft(["ngram"]) -> "ngram"
    """
    drafts = list(drafts)
    return "draft-small" if "draft-small" in drafts else drafts[0]


def position_rows(summary, temperature: float, level: float = 0.95) -> list[dict]:
    """Per draft and position i = 1..k (token verification, no nucleus, at ``temperature``): reached =
    #(N >= i-1), accepted = #(N >= i), conditional_rate = accepted / reached (reached 0 counted as 1)
    with its interval [lo, hi] at ``level``, mean_beta = mean recorded beta_i.  The interval resamples
    prompts (`specdec.core.stats.cluster_ratio_interval` on ``counts_by_prompt``: one prompt's steps
    are not independent; [0, 1] where fewer than two prompts reached the position); a table without
    that column gets Wilson's interval over steps.  ``interval_unit`` says which."""
    rows = []
    by_prompt = "counts_by_prompt" in summary.columns
    for r in token_rows(summary, temperature).itertuples(index=False):
        n = parse_counts(r.counts)
        ge = n[::-1].cumsum()[::-1]                       # #(N >= i), (k+1,)
        cond = ge[1:] / np.maximum(ge[:-1], 1)            # P(accept i | reached i)
        if by_prompt:
            gp = parse_counts(r.counts_by_prompt)[:, ::-1].cumsum(1)[:, ::-1]  # per prompt #(N >= i)
            lo, hi = np.array([cluster_ratio_interval(gp[:, j + 1], gp[:, j], level)[1:]
                               if (gp[:, j] > 0).sum() >= 2 else (0.0, 1.0) for j in range(len(n) - 1)]).T
        else:
            lo, hi = wilson_interval(ge[1:], np.maximum(ge[:-1], 1), level)
        betas = [getattr(r, f"beta_pos_{j}") for j in range(1, len(n))]
        rows += [dict(draft=r.draft, temperature=float(r.temperature), position=j + 1, reached=int(ge[j]),
                      accepted=int(ge[j + 1]), conditional_rate=float(cond[j]), lo=float(lo[j]), hi=float(hi[j]),
                      mean_beta=float(betas[j]), interval_unit="prompts" if by_prompt else "steps")
                 for j in range(len(n) - 1)]
    return rows


def position_constancy(pos) -> dict:
    """Is acceptance the same at every draft position?  Per draft of ``pos`` (`position_rows`, a
    DataFrame), whether one value lies inside the intervals of all its positions (the largest low
    end <= the smallest high end).  pos_common: drafts where one does, pos_drafts: drafts,
    pos_verdict: "consistent" (with one constant) when it holds for every draft, else "inconsistent".
    Example: draft a [0.2, 0.6], [0.5, 0.9]; draft b [0.1, 0.2], [0.5, 0.9] -> pos_common 1, pos_drafts 2
    """
    common = pos.groupby("draft", sort=False).agg(lo=("lo", "max"), hi=("hi", "min"))
    n = int((common["lo"] <= common["hi"]).sum())
    return {"pos_common": n, "pos_drafts": int(len(common)),
            "pos_verdict": "consistent" if n == len(common) else "inconsistent"}


def geometric_rows(summary, draft: str) -> list[dict]:
    """Per temperature (token verification, no nucleus) of ``draft`` and n = 0..k: steps with N = n,
    their share, and the truncated-geometric probability at the row's alpha_mle."""
    rows, tok = [], token_rows(summary)
    for r in tok[tok["draft"] == draft].itertuples(index=False):
        counts = parse_counts(r.counts)
        freq = counts / counts.sum()
        law = truncated_geometric_pmf(r.alpha_mle, len(counts) - 1)
        rows += [dict(draft=r.draft, temperature=float(r.temperature), n=j, steps=int(counts[j]),
                      measured_freq=float(freq[j]), geometric_pmf=float(law[j]), alpha_mle=float(r.alpha_mle))
                 for j in range(len(counts))]
    return rows


def predicted_rows(summary) -> list[dict]:
    """Two rows per configuration: predictor conditional (L_cond) and independent (L_ind), each
    with the measured E[L], its interval [lo, hi] and the number of steps."""
    return [dict(draft=r.draft, temperature=float(r.temperature), top_p=float(r.top_p), method=r.method,
                 predictor=kind, predicted=float(getattr(r, f"el_pred_{kind}")), measured=float(r.el_measured),
                 lo=float(r.el_lo), hi=float(r.el_hi), steps=int(r.steps))
            for r in summary.itertuples(index=False) for kind in ("conditional", "independent")]


def alpha_rows(summary, top_p: float) -> list[dict]:
    """Per draft (in the table's order): the fitted alpha with its interval against temperature for
    each method without truncation, then the token-verification row with nucleus ``top_p``."""
    rows = []
    for draft in summary["draft"].unique():
        d = summary[summary["draft"] == draft]
        for m, p in (("token", 1.0), ("block", 1.0), ("token", float(top_p))):
            rows += [dict(draft=r.draft, method=m, temperature=float(r.temperature), top_p=p,
                          alpha_mle=float(r.alpha_mle), lo=float(r.alpha_lo), hi=float(r.alpha_hi), steps=int(r.steps))
                     for r in d[(d["method"] == m) & (d["top_p"] == p)].itertuples(index=False)]
    return rows


def gof_by_temperature(summary, level: float):
    """A DataFrame, per (temperature, top_p) of the token-verification rows: configurations, how
    many the G-test of the geometric law rejects at ``level`` (p < level; no test, p NaN, is no
    rejection), the smallest p-value, and the same two as if steps were independent
    (``rejected_independent``, ``min_p_independent``, from ``gof_p_independent``) with the median
    design effect (``deff``).
    Example: p-values 1e-4 and 0.3 at T = 0 -> row temperature 0.0, configurations 2, rejected 1
    """
    import pandas as pd

    tok = token_rows(summary, plain=False)
    low = lambda p: float(np.nanmin(p)) if np.isfinite(p).any() else float("nan")  # noqa: E731
    rows = []
    for (T, top_p), g in tok.groupby(["temperature", "top_p"], sort=False):
        p, pi = g["gof_p"].to_numpy(float), g["gof_p_independent"].to_numpy(float)
        rows.append({"temperature": float(T), "top_p": float(top_p), "configurations": int(len(g)),
                     "rejected": int(np.sum(p < level)), "min_p": low(p),
                     "deff": float(g["gof_deff"].median()),
                     "rejected_independent": int(np.sum(pi < level)), "min_p_independent": low(pi)})
    return pd.DataFrame(rows, columns=["temperature", "top_p", "configurations", "rejected", "min_p", "deff",
                                       "rejected_independent", "min_p_independent"])


def gof_scope(gof) -> dict:
    """Where the geometric law was rejected, from `gof_by_temperature` rows (a DataFrame): rejections
    and configurations at temperature 0 (greedy) and above (sampled), the same rejections as if steps
    were independent, all of them together (``gof_rejected_all`` of ``gof_n_all``), and the range of
    the median design effects."""
    greedy, sampled = gof[gof["temperature"] == 0], gof[gof["temperature"] > 0]
    g_rej, s_rej = int(greedy["rejected"].sum()), int(sampled["rejected"].sum())
    g_n, s_n = int(greedy["configurations"].sum()), int(sampled["configurations"].sum())
    return {"gof_greedy_rejected": g_rej, "gof_greedy_n": g_n, "gof_sampled_rejected": s_rej, "gof_sampled_n": s_n,
            "gof_rejected_all": g_rej + s_rej, "gof_n_all": g_n + s_n,
            "gof_greedy_rejected_ind": int(greedy["rejected_independent"].sum()),
            "gof_sampled_rejected_ind": int(sampled["rejected_independent"].sum()),
            "gof_deff_min": float(gof["deff"].min()), "gof_deff_max": float(gof["deff"].max())}


def greedy_values(summary, distinct_col: str = "distinct_4gram") -> dict:
    """Greedy generation against greedy agreement on real text (token rows at temperature 0), and
    the loops: ranges over drafts of alpha_mle and beta_real_text, whether the two ranges overlap,
    the mean distinct n-gram share at temperature 0 and at the highest temperature (t_high_*), and the largest
    |alpha_mle - beta_mean| at the highest temperature.  NaN where a temperature was not measured;
    ``greedy_overlap`` is "overlap" or "disjoint" (only disjoint ranges show that the two differ).
    Example: alpha 0.30-0.43 and real text 0.30-0.45 -> greedy_ranges_overlap True, greedy_overlap "overlap" """
    g0, g1 = token_rows(summary, 0.0), token_rows(summary, float(summary["temperature"].max()))
    a_lo, a_hi = float(g0["alpha_mle"].min()), float(g0["alpha_mle"].max())  # an empty selection gives NaN
    r_lo, r_hi = float(g0["beta_real_text"].min()), float(g0["beta_real_text"].max())
    overlap = bool(max(a_lo, r_lo) <= min(a_hi, r_hi))
    return {"greedy_alpha_min": a_lo, "greedy_alpha_max": a_hi, "greedy_real_min": r_lo, "greedy_real_max": r_hi,
            "greedy_ranges_overlap": overlap, "greedy_overlap": "overlap" if overlap else "disjoint",
            "greedy_distinct": float(g0[distinct_col].mean()), "t_high_distinct": float(g1[distinct_col].mean()),
            "t_high_gap": float(np.abs(g1["alpha_mle"] - g1["beta_mean"]).max())}


def prediction_check(summary) -> dict:
    """max_z_cond: the largest |mean(L - L_cond)| over token-verification rows, in half-widths of
    its interval (a zero-width interval, e.g. greedy where L = L_cond, counts as 1e-12)."""
    tok = token_rows(summary, plain=False)
    tok = tok[np.isfinite(tok["el_minus_pred_hi"])]
    half = np.maximum((tok["el_minus_pred_hi"] - tok["el_minus_pred_lo"]) / 2, 1e-12)
    z = (tok["el_minus_pred"].abs() / half).to_numpy(float)
    return {"max_z_cond": float(z.max()) if z.size else float("nan")}


def block_vs_token_values(rows, level: float = 0.95) -> dict:
    """Counts over the block-vs-token comparisons (`block_vs_token` rows): settings ``bt_n``, with more
    and fewer tokens per step at each one's own ``level`` (``bt_more``, ``bt_fewer``; ``bt_short``: too
    few prompts for it) and by the simultaneous intervals (``bt_more_sim``, ``bt_fewer_sim``,
    ``bt_short_sim``; level ``bt_level_sim``), and the range of the median gains.
    Example: verdicts more, undecided -> bt_n 2, bt_more 1, bt_fewer 0"""
    rows = records(rows)
    g = [r["gain"] for r in rows]
    count = lambda col, word: sum(r[col] == word for r in rows)  # noqa: E731
    return {"bt_n": len(rows), "bt_more": count("words", MORE), "bt_fewer": count("words", FEWER),
            "bt_short": count("words", OUT_OF_REACH),
            "bt_more_sim": count("words_sim", MORE), "bt_fewer_sim": count("words_sim", FEWER),
            "bt_short_sim": count("words_sim", OUT_OF_REACH),
            "bt_level_sim": bonferroni(level, len(rows)) if rows else float("nan"),
            "bt_min": float(min(g)) if g else float("nan"), "bt_max": float(max(g)) if g else float("nan")}


def block_vs_token(summary, level: float = 0.95) -> list[dict]:
    """Block against token verification, paired on the prompts: per (draft, temperature, top_p) the
    median over prompts of block's tokens per step / token's on the same prompt, its bootstrap
    interval and the simultaneous one over the settings compared (`specdec.measure.protocol.
    comparison`; prompts are the units) and the verdict each allows: `MORE` tokens per step (the
    protocol's "faster"), `FEWER`, or the protocol's own word (undecided, too few pairs)."""
    on = ["draft", "temperature", "top_p"]
    pairs = summary[summary["method"] == "block"].merge(token_rows(summary, plain=False), on=on, suffixes=("_b", "_t"))
    out = []
    words = {"faster": MORE, "slower": FEWER}
    for r in pairs.to_dict("records"):
        b = [float(x) for x in str(r["el_by_prompt_b"]).split()]
        t = [float(x) for x in str(r["el_by_prompt_t"]).split()]
        c = comparison(b, t, level=level, family_size=len(pairs))
        out.append({"draft": r["draft"], "temperature": r["temperature"], "top_p": r["top_p"], "prompts": len(b),
                    "gain": c["median"], "lo": c["lo"], "hi": c["hi"], "words": words.get(c["verdict"], c["verdict"]),
                    "lo_sim": c["lo_sim"], "hi_sim": c["hi_sim"],
                    "words_sim": words.get(c["verdict_sim"], c["verdict_sim"])})
    return out


def figure_values(pos, alpha, k: int) -> dict:
    """The ranges the chapter's figure captions state: across drafts, the accepted fraction at
    position 1 and at position k (``pos``: `position_rows`), and the fitted alpha of token
    verification without truncation at the lowest and the highest temperature (``alpha``: `alpha_rows`).

    Example: positions 1 at 0.5 and 0.6, k at 0.4 and 0.7 -> pos1_min 0.5, pos1_max 0.6, posk_min 0.4, posk_max 0.7
    """
    def ends(s) -> tuple[float, float]:  # a Series' min and max; NaN where empty or holding a NaN
        return float(s.min(skipna=False)), float(s.max(skipna=False))

    plain = alpha[(alpha["method"] == "token") & (alpha["top_p"] == 1.0)]
    t_lo, t_hi = plain["temperature"].min(), plain["temperature"].max()
    (p1a, p1b), (pka, pkb) = (ends(pos.loc[pos["position"] == n, "conditional_rate"]) for n in (1, k))
    (loa, lob), (hia, hib) = (ends(plain.loc[plain["temperature"] == t, "alpha_mle"]) for t in (t_lo, t_hi))
    return {"pos1_min": p1a, "pos1_max": p1b, "posk_min": pka, "posk_max": pkb, "alpha_t_lo_min": loa,
            "alpha_t_lo_max": lob, "alpha_t_hi_min": hia, "alpha_t_hi_max": hib,
            "alpha_t_lo": float(t_lo), "alpha_t_hi": float(t_hi)}
