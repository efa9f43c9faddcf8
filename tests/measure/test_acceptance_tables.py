"""specdec.chapters.ch05.tables (chapter 05's derived tables and findings) on hand-worked
summary rows, and its round trip through the results writer."""

import math

import numpy as np
import pandas as pd
import pytest

from specdec.core.stats import wilson_interval
from specdec.chapters.ch05 import tables as at
from specdec.io.results import read_table, write_table


def _row(draft, T, method, counts, alpha, top_p=1.0, gof_p=0.5, real=0.4, distinct=1.0, el=2.0, d=0.0, half=0.1,
         by_prompt="2.0 2.0 2.0 2.0"):
    n = [int(c) for c in counts.split()]
    k = len(n) - 1
    return {"draft": draft, "temperature": T, "top_p": top_p, "method": method, "k": k, "prompts": 2,
            "steps": sum(n), "alpha_mle": alpha, "alpha_lo": alpha - 0.1, "alpha_hi": alpha + 0.1,
            "el_measured": el, "el_lo": el - 0.2, "el_hi": el + 0.2, "el_pred_conditional": el - d,
            "el_pred_independent": el - 0.3, "el_minus_pred": d, "el_minus_pred_lo": d - half,
            "el_minus_pred_hi": d + half, "beta_mean": alpha - 0.05, "gof_G": 1.0, "gof_df": 1, "gof_p": gof_p,
            "gof_p_independent": gof_p, "gof_deff": 1.0,
            **{f"beta_pos_{i}": 0.1 * i for i in range(1, k + 1)}, "beta_real_text": real,
            "distinct_4gram": distinct, "counts": counts, "el_by_prompt": by_prompt}


@pytest.fixture
def summary():
    rows = [_row("ngram", 0.0, "token", "3 1 0", 0.2, gof_p=1e-5, real=0.5, distinct=0.6, d=0.0, half=0.0),
            _row("ngram", 1.0, "token", "2 1 1", 0.5, gof_p=0.3, el=2.0, d=0.05, half=0.1, by_prompt="1.8 2.2 2.0 2.1"),
            _row("ngram", 1.0, "block", "1 1 2", 0.6, el=2.5, by_prompt="2.3 2.7 2.4 2.6"),
            _row("ngram", 1.0, "token", "2 2 0", 0.4, top_p=0.9, gof_p=0.02, d=-0.3, half=0.2),
            _row("draft-small", 0.0, "token", "1 2 1", 0.45, gof_p=0.5, real=0.6, distinct=0.5),
            _row("draft-small", 1.0, "token", "0 2 2", 0.7, gof_p=np.nan, el=3.0, by_prompt="3.0 3.0 3.0 3.0"),
            _row("draft-small", 1.0, "block", "0 1 3", 0.8, el=3.3, by_prompt="2.7 3.3 3.0 3.6"),
            _row("draft-small", 1.0, "token", "1 1 2", 0.6, top_p=0.9)]
    return pd.DataFrame(rows)


def test_position_rows_by_hand(summary):
    rows = at.position_rows(summary, 1.0, 0.95)
    assert [(r["draft"], r["position"]) for r in rows] == [("ngram", 1), ("ngram", 2), ("draft-small", 1),
                                                          ("draft-small", 2)]
    first, second = rows[0], rows[1]  # counts "2 1 1": 4 steps; 2 reach position 2; 1 accepts it
    assert (first["reached"], first["accepted"], first["conditional_rate"]) == (4, 2, 0.5)
    assert (second["reached"], second["accepted"], second["conditional_rate"]) == (2, 1, 0.5)
    lo, hi = wilson_interval(2, 4, 0.95)
    assert (first["lo"], first["hi"]) == (pytest.approx(float(lo)), pytest.approx(float(hi)))
    assert (first["mean_beta"], second["mean_beta"]) == (0.1, 0.2)
    assert rows[2]["reached"] == 4 and rows[2]["accepted"] == 4  # "0 2 2": no step stops at position 1


def test_position_rows_resample_prompts_when_the_table_has_them(summary):
    """ngram at temperature 1, counts "2 1 1" split over two prompts as "2 0 0" and "0 1 1": position
    1 is reached 2 + 2 times and accepted 0 + 2 times; its interval is the bootstrap over the two
    prompts (`cluster_ratio_interval([0, 2], [2, 2])`), not Wilson's over 4 steps."""
    from specdec.core.stats import cluster_ratio_interval

    s = summary.assign(counts_by_prompt="2 0 0;0 1 1")
    rows = at.position_rows(s, 1.0, 0.95)
    first = rows[0]
    assert (first["reached"], first["accepted"], first["interval_unit"]) == (4, 2, "prompts")
    _, lo, hi = cluster_ratio_interval([0, 2], [2, 2], 0.95)
    assert (first["lo"], first["hi"]) == (pytest.approx(lo), pytest.approx(hi)) and (lo, hi) == (0.0, 1.0)
    assert at.position_rows(summary, 1.0)[0]["interval_unit"] == "steps"
    # position 2 is reached by one prompt only ("0 1 1"): no interval from one prompt, [0, 1]
    assert (rows[1]["reached"], rows[1]["lo"], rows[1]["hi"]) == (2, 0.0, 1.0)


def test_position_rows_count_an_unreached_position_as_one_trial():
    s = pd.DataFrame([_row("a", 1.0, "token", "3 0 0", 0.0)])
    last = at.position_rows(s, 1.0)[-1]
    assert (last["reached"], last["accepted"], last["conditional_rate"]) == (0, 0, 0.0)


def test_position_constancy_asks_for_one_value_inside_every_interval():
    pos = pd.DataFrame({"draft": ["a", "a", "b", "b"], "lo": [0.2, 0.5, 0.1, 0.5], "hi": [0.6, 0.9, 0.2, 0.9]})
    assert at.position_constancy(pos) == {"pos_common": 1, "pos_drafts": 2, "pos_verdict": "inconsistent"}
    assert at.position_constancy(pos[pos["draft"] == "a"])["pos_verdict"] == "consistent"  # 0.5-0.6 in both


def test_geometric_rows_by_hand(summary):
    assert at.shown_draft(summary["draft"].unique()) == "draft-small"
    assert at.shown_draft(["ngram", "draft-medium"]) == "ngram"
    rows = at.geometric_rows(summary, "ngram")
    assert [(r["temperature"], r["n"], r["steps"]) for r in rows] == [(0.0, 0, 3), (0.0, 1, 1), (0.0, 2, 0),
                                                                     (1.0, 0, 2), (1.0, 1, 1), (1.0, 2, 1)]
    assert [r["measured_freq"] for r in rows[3:]] == [0.5, 0.25, 0.25]
    assert [r["geometric_pmf"] for r in rows[3:]] == [0.5, 0.25, 0.25]  # alpha 0.5, k 2
    assert rows[0]["geometric_pmf"] == pytest.approx(0.8) and rows[2]["geometric_pmf"] == pytest.approx(0.04)


def test_predicted_and_alpha_rows(summary):
    pred = at.predicted_rows(summary)
    assert len(pred) == 2 * len(summary)
    assert pred[2] == {"draft": "ngram", "temperature": 1.0, "top_p": 1.0, "method": "token",
                       "predictor": "conditional", "predicted": 1.95, "measured": 2.0, "lo": 1.8, "hi": 2.2, "steps": 4}
    assert pred[3]["predictor"] == "independent" and pred[3]["predicted"] == pytest.approx(1.7)
    rows = at.alpha_rows(summary, 0.9)
    assert [(r["draft"], r["method"], r["temperature"], r["top_p"]) for r in rows[:4]] == [
        ("ngram", "token", 0.0, 1.0), ("ngram", "token", 1.0, 1.0), ("ngram", "block", 1.0, 1.0),
        ("ngram", "token", 1.0, 0.9)]
    assert rows[3]["alpha_mle"] == 0.4 and rows[3]["lo"] == pytest.approx(0.3) and rows[3]["steps"] == 4
    assert len(rows) == 8


def test_gof_counts_rejections_per_temperature(summary):
    gof = at.gof_by_temperature(summary, 1e-3)
    assert gof[["temperature", "top_p", "configurations", "rejected"]].values.tolist() == [
        [0.0, 1.0, 2, 1], [1.0, 1.0, 2, 0], [1.0, 0.9, 2, 0]]
    assert gof["min_p"].tolist() == [1e-5, 0.3, 0.02]  # a NaN p-value (no test) is neither a rejection nor a minimum
    scope = at.gof_scope(gof)
    assert scope == {"gof_greedy_rejected": 1, "gof_greedy_n": 2, "gof_sampled_rejected": 0, "gof_sampled_n": 4,
                     "gof_rejected_all": 1, "gof_n_all": 6, "gof_greedy_rejected_ind": 1,
                     "gof_sampled_rejected_ind": 0, "gof_deff_min": 1.0, "gof_deff_max": 1.0}
    # per prompt: the corrected p beside the one as if steps were independent, and the design effect
    s = summary.assign(gof_p_independent=summary["gof_p"] / 100, gof_deff=2.0)
    g = at.gof_by_temperature(s, 1e-3)
    assert g["rejected_independent"].tolist() == [1, 0, 1] and g["rejected"].tolist() == [1, 0, 0]
    assert g["deff"].tolist() == [2.0] * 3 and at.gof_scope(g)["gof_sampled_rejected_ind"] == 1
    wide = at.gof_scope(at.gof_by_temperature(summary, 0.05))  # p 0.02 (nucleus) now rejected too
    assert (wide["gof_greedy_rejected"], wide["gof_sampled_rejected"], wide["gof_rejected_all"]) == (1, 1, 2)
    assert at.gof_scope(at.gof_by_temperature(summary, 1e-9))["gof_rejected_all"] == 0


def test_greedy_values_says_whether_the_ranges_overlap(summary):
    g = at.greedy_values(summary)  # alpha 0.2-0.45, real text 0.5-0.6
    assert (g["greedy_alpha_min"], g["greedy_alpha_max"], g["greedy_real_min"], g["greedy_real_max"]) == (
        0.2, 0.45, 0.5, 0.6)
    assert g["greedy_ranges_overlap"] is False and g["greedy_overlap"] == "disjoint"
    assert g["greedy_distinct"] == pytest.approx(0.55) and g["t_high_distinct"] == 1.0
    assert g["t_high_gap"] == pytest.approx(0.05)
    s = summary.copy()
    s.loc[0, "beta_real_text"] = 0.3
    g = at.greedy_values(s)
    assert g["greedy_ranges_overlap"] is True and g["greedy_overlap"] == "overlap"
    assert math.isnan(at.greedy_values(summary[summary["temperature"] > 0])["greedy_alpha_min"])


def test_prediction_check_by_hand(summary):
    c = at.prediction_check(summary)
    assert c["max_z_cond"] == pytest.approx(1.5)  # |-0.3| / 0.2 on the nucleus row; greedy 0 / 1e-12 = 0
    assert set(c) == {"max_z_cond"}


def test_block_vs_token_is_paired_on_prompts(summary):
    """Each prompt's tokens twice (8 prompts): ngram's per-prompt ratios 2.3/1.8, 2.7/2.2, 2.4/2.0,
    2.6/2.1, all above 1 -> more (tokens per step), also with the simultaneous interval over the 2
    settings ([min, max] of 8 pairs covers the median with 99.2% >= 97.5%); draft-small: 0.9, 1.1,
    1.0, 1.2 straddle 1 -> undecided (its mean gain 1.1 alone would not say so)."""
    twice = summary.assign(el_by_prompt=summary["el_by_prompt"] + " " + summary["el_by_prompt"])
    rows = {r["draft"]: r for r in at.block_vs_token(twice)}
    assert set(rows) == {"ngram", "draft-small"}
    ng, ds = rows["ngram"], rows["draft-small"]
    assert ng["words"] == "more" and ng["lo"] > 1 and ng["prompts"] == 8
    assert ng["words_sim"] == "more" and ng["lo_sim"] == pytest.approx(2.4 / 2.0)
    assert ng["gain"] == pytest.approx(float(np.median([2.3 / 1.8, 2.7 / 2.2, 2.4 / 2.0, 2.6 / 2.1])))
    assert ds["words"] == "undecided" and ds["lo"] <= 1 <= ds["hi"]
    v = at.block_vs_token_values(at.block_vs_token(twice))
    assert (v["bt_n"], v["bt_more"], v["bt_fewer"], v["bt_more_sim"], v["bt_short"], v["bt_short_sim"]) == (
        2, 1, 0, 1, 0, 0)
    assert v["bt_level_sim"] == pytest.approx(0.975) and v["bt_max"] == pytest.approx(ng["gain"])


def test_block_vs_token_refuses_a_level_four_prompts_cannot_reach(summary):
    """4 prompts: no interval for a median reaches 95% ([min, max] covers it with 1 - 2/16 = 87.5%),
    so the words say so instead of a verdict, although every ngram prompt gained."""
    rows = {r["draft"]: r for r in at.block_vs_token(summary)}
    assert rows["ngram"]["words"] == rows["ngram"]["words_sim"] == "too few pairs for this level"
    v = at.block_vs_token_values(at.block_vs_token(summary))
    assert (v["bt_more"], v["bt_more_sim"], v["bt_short"], v["bt_short_sim"]) == (0, 0, 2, 2)


def test_derived_tables_survive_the_results_round_trip(summary, tmp_path):
    """The chapter derives its tables from the summary as read back: the same rows as from memory."""
    write_table(summary, tmp_path / "s.csv", {}, kind="sampled")
    back = read_table(tmp_path / "s.csv")
    for f in (lambda s: at.position_rows(s, 1.0), lambda s: at.geometric_rows(s, "ngram"), at.predicted_rows,
              lambda s: at.alpha_rows(s, 0.9)):
        assert f(back) == f(summary)


def test_figure_values_state_the_ranges_across_drafts():
    import pandas as pd

    from specdec.chapters.ch05.tables import figure_values

    pos = pd.DataFrame({"draft": ["a", "a", "b", "b"], "position": [1, 2, 1, 2], "conditional_rate": [0.5, 0.4, 0.6, 0.7]})
    alpha = pd.DataFrame({"draft": ["a", "b", "a", "b", "a"], "method": ["token"] * 4 + ["block"],
                          "top_p": [1.0] * 5, "temperature": [0.0, 0.0, 1.0, 1.0, 1.0],
                          "alpha_mle": [0.3, 0.35, 0.5, 0.6, 0.9]})
    v = figure_values(pos, alpha, k=2)
    assert (v["pos1_min"], v["pos1_max"], v["posk_min"], v["posk_max"]) == (0.5, 0.6, 0.4, 0.7)
    assert (v["alpha_t_lo_min"], v["alpha_t_lo_max"], v["alpha_t_hi_min"], v["alpha_t_hi_max"]) == (0.3, 0.35, 0.5, 0.6)
