"""Chapter 09's tables and glued values (`specdec.chapters.ch09.tables`) on hand-made rows: the
break-even's direction and out-of-range ends, a trend named only where intervals are disjoint, the
per-rate cells, vLLM's rows carrying chapter 10's law status and no verdict without a pass, vLLM's run
read only on the chapter's workload, and
the counts and one-word verdicts the page glues."""

import math

import pandas as pd
import pytest

from specdec.chapters.ch09 import tables
from specdec.measure.serving_runs import NONE
from specdec.report.robustness import NOT_EXACT


def _speed(rows, verdict="undecided"):
    return pd.DataFrame([dict(policy=p, rate=r, latency_speedup=m, latency_lo=lo, latency_hi=hi, verdict=verdict)
                         for p, r, m, lo, hi in rows])


SPEED = _speed([("fixed", 1.0, 0.976, 0.948, 1.007), ("fixed", 256.0, 1.050, 1.021, 1.096),
                ("la", 1.0, 1.005, 0.946, 1.078), ("la", 256.0, 0.976, 0.970, 0.982),
                ("down", 1.0, 1.2, 1.1, 1.3), ("down", 256.0, 0.9, 0.85, 0.95)])


def test_a_trend_is_named_only_where_the_two_intervals_are_disjoint():
    assert [tables.trend(SPEED, p) for p in ("fixed", "la", "down")] == ["gains", "undecided", "loses"]


def test_the_break_even_table_names_the_direction_and_reads_ends_outside_the_range():
    be = pd.DataFrame([dict(policy="fixed", break_even_rate=2.0, direction="falls", lo=-math.inf, hi=math.inf,
                            share_no_crossing=0.03),
                       dict(policy="la", break_even_rate=math.inf, direction="rises", lo=40.0, hi=math.inf,
                            share_no_crossing=0.9),
                       dict(policy="down", break_even_rate=16.0, direction="falls", lo=4.0, hi=64.0,
                            share_no_crossing=0.0)])
    t = tables.break_even_table(be, SPEED)
    assert list(t["median crosses 1"]) == ["falling", "rising", "falling"]
    assert list(t["break-even (requests/s)"]) == ["2", "> 256", "16"]
    assert list(t["95% interval"]) == ["[< 1, > 256]", "[40, > 256]", "[4, 64]"]
    assert list(t["resamples never crossing"]) == ["3%", "90%", "0%"]
    assert list(t["lightest to heaviest"]) == ["gains", "undecided", "loses"]
    # only an interval reaching past both ends of the tested rates leaves the break-even unresolved
    assert list(t["state"]) == ["unresolved", "resolved", "resolved"] and t.shape[1] <= 7
    assert tables.break_even_values(be, "fixed") == {"be_n": 3, "be_unresolved": 1, "be_fixed": "unresolved"}
    assert tables.break_even_values(be, "down")["be_fixed"] == "resolved"


def test_each_policy_is_one_row_with_a_cell_per_rate():
    t = tables.speed_table(SPEED)
    assert list(t.columns) == ["policy", "1/s", "256/s"] and list(t["policy"]) == ["fixed", "la", "down"]
    assert t.loc[0, "256/s"] == "1.05 [1.02, 1.10] undecided"


def test_a_vllm_configuration_without_a_pass_shows_its_law_status_and_no_verdict():
    bad, ok = f"vLLM draft model, k = 2 ({NOT_EXACT})", "vLLM n-gram prompt lookup, k = 2"
    v = pd.concat([_speed([(bad, 4.0, 0.6, 0.5, 0.7)], verdict=NOT_EXACT),
                   _speed([(ok, 4.0, 1.1, 1.05, 1.2)], verdict="faster")])
    t = tables.vllm_table(v)
    assert list(t["configuration"]) == ["draft model, k = 2", "n-gram prompt lookup, k = 2"]
    assert list(t["chapter 10's law test"]) == ["rejected", "passed"]
    assert list(t["4/s"]) == ["0.60 [0.50, 0.70]", "1.10 [1.05, 1.20] faster"]  # the negative case: no verdict


def _lat(policy, rate, **v):
    base = dict(mean_running=1.0, serve_tokens_per_s=100.0, ttft_p95_s=0.04, e2e_mean_s=0.2, draft_share=0.0,
                k_mean=0.0)
    return dict(policy=policy, rate=rate, **{**base, **v})


def test_the_glued_values_are_counts_numbers_and_one_word_verdicts():
    speed = pd.DataFrame([dict(policy="fixed k=2", rate=1.0, pairs=6, latency_speedup=1.0, latency_lo=0.9,
                               latency_hi=1.2, half_width=0.15, verdict="undecided", verdict_sim="too few pairs",
                               predicted_batch1=1.3),
                          dict(policy="load-aware", rate=1.0, pairs=6, latency_speedup=1.1, latency_lo=1.05,
                               latency_hi=1.2, half_width=0.07, verdict="faster", verdict_sim="faster",
                               predicted_batch1=math.nan)])
    lat = pd.DataFrame([_lat(NONE, 1.0), _lat("fixed k=2", 1.0, ttft_p95_s=0.05),
                        _lat("load-aware", 1.0, ttft_p95_s=0.03, draft_share=0.05, k_mean=0.2)])
    v = tables.serving_values(speed, lat, NONE)
    assert (v["n_comparisons"], v["n_faster"], v["n_slower"], v["n_sim_decided"]) == (2, 1, 0, 1)
    assert v["half_width_median"] == pytest.approx(0.11) and v["pairs"] == 6
    assert (v["sim_pairs"], v["sim_level"]) == (7, pytest.approx(97.5))  # 1 - 2/2^7 >= 97.5% > 1 - 2/2^6
    assert v["pred_fixed"] == 1.3 and v["pred_rel"] == "above"
    assert (v["pred_median"], v["pred_verdict"]) == (1.0, "undecided")  # the prediction is set beside the median
    assert v["ttft_verdict"] == "mixed" and v["ttft_spec_lo_ms"] == pytest.approx(30.0)  # one policy is quicker
    assert v["la_k_heavy"] == pytest.approx(0.2)
    assert tables.serving_values(speed, lat.assign(ttft_p95_s=[0.04, 0.05, 0.06]), NONE)["ttft_verdict"] == "longer"
    assert all(isinstance(x, (int, float)) or x in ("above", "below", "inside", "longer", "mixed",
                                                                          "undecided") for x in v.values())


def test_the_checks_count_cancelled_and_other_requests_apart():
    inv = pd.DataFrame([dict(identical=12, requests=12), dict(identical=11, requests=12)])
    canc = pd.DataFrame([dict(finish="cancelled", consistent=True, rows_freed=True, row_bytes=2 ** 21),
                         dict(finish="cancelled", consistent=False, rows_freed=False, row_bytes=2 ** 22),
                         dict(finish="length", consistent=True, rows_freed=None, row_bytes=2 ** 21)])
    v = tables.check_values(inv, canc)
    assert (v["inv_identical"], v["inv_total"], v["inv_settings"]) == (23, 24, 2)
    assert (v["n_cancelled"], v["cancel_consistent"], v["rows_freed"], v["others_unchanged"], v["n_others"]) == \
        (2, 1, 1, 1, 1)
    assert v["row_min_mib"] == 2.0



def test_vllms_run_is_read_only_on_the_chapters_workload_prompts_and_verdicts(tmp_path):
    from specdec.audit.serving import policy_name, configs
    from specdec.cli.serving_vllm import parser
    from specdec.io.results import provenance, write_table

    ours = {"PROMPTS": 8, "PROMPT_LEN": 64, "N_REQUESTS": 16, "SHORT_LEN": 16, "LONG_LEN": 64, "LONG_SHARE": 0.25,
            "TEMPERATURE": 1.0, "TTFT_SLO": 0.2, "TPOT_SLO": 0.02, "SEED": 9, "DRAFT": "draft-distilled", "FIXED_K": 2}
    ran = vars(parser().parse_args([]))  # the command line's own names and defaults, not a copy of SHARED
    assert set(tables.SHARED) <= set(ran) and all(ran[k] == ours[v] for k, v in tables.SHARED.items())
    laws = tmp_path / "laws.csv"
    laws.write_text("engine,configuration,setting,status,verified_share\n"
                    "vllm,\"n-gram prompt lookup, k = 2\",temperature 1,reject,1.0\n")
    cfg = configs(["n-gram prompt lookup, k = 2"], 2, "draft-distilled")[0]
    run = tmp_path / "run"
    for name in ("runs", "speedups", "break_even"):
        write_table([{"policy": policy_name(cfg, "reject"), "rate": 4.0}], run / f"{name}.csv", provenance(), kind="timing")
    write_table([{"policy": NONE, "version": "v", "kv_cache_gib": 1, "wall_s": 9.0}], run / "servers.csv",
                provenance({**ran, "checksum": "abc"}), kind="timing")
    assert set(tables.vllm_tables(run, ours, "abc", laws_csv=laws)) == {"runs", "speedups", "break_even", "servers"}
    with pytest.raises(ValueError, match="'requests': \\(16, 4\\)"):
        tables.vllm_tables(run, {**ours, "N_REQUESTS": 4}, "abc", laws_csv=laws)
    with pytest.raises(ValueError, match="checksum"):
        tables.vllm_tables(run, ours, "other prompts", laws_csv=laws)
    # chapter 10's verdict changed since the run: the row's mark is stale, the page refuses it
    laws.write_text(laws.read_text().replace(",reject,", ",pass,"))
    with pytest.raises(ValueError, match="law marks"):
        tables.vllm_tables(run, ours, "abc", laws_csv=laws)
    assert set(tables.vllm_tables(run, {**ours, "N_REQUESTS": 4}, "x", check=False, laws_csv=laws)) == {
        "runs", "speedups", "break_even", "servers"}  # a SMOKE run's sizes are not the run's
