"""specdec.chapters.summary.findings reads the chapters' committed tables: its counts agree with the tables
counted directly, the comparison keeps theirs apart from ours, and a missing table is an error
naming it (not a silent gap on the front page)."""

import shutil

import pandas as pd
import pytest

from specdec.chapters.summary import findings as summary
from specdec.io.paths import RESULTS_DIR
from specdec.chapters.summary.published import published_results


def test_speed_counts_are_the_summary_tables_verdicts():
    s = pd.read_csv(RESULTS_DIR / "06_measured_decoding" / "summary.csv")
    spec = s[s["config"] != "baseline"]
    got = summary.speed()
    assert got["n_spec"] == len(spec) == got["n_faster"] + got["n_slower"] + got["n_undecided"]
    assert got["n_faster"] == (spec["verdict"] == "faster").sum()
    assert got["best_speedup"] == spec["speedup"].max() and got["best_lo"] <= got["best_speedup"] <= got["best_hi"]


def test_fastest_plain_counts_the_bench_check_and_refuses_a_table_without_it(tmp_path):
    from specdec.io.results import read_table, records, write_table

    c = read_table(RESULTS_DIR / "bench" / "bench_comparisons.csv")
    fast = c[c["comparison"] == "vs_hf_compiled_ar"]
    base = fast[(fast["mode"] == "eager") & (fast["k"] == 0) & (fast["batch"] == 1) & (fast["temperature"] == 0)]
    got = summary.fastest_plain()
    assert got["fast_n"] == len(fast) > 0 and got["fast_faster"] == (fast["verdict"] == "faster").sum()
    assert len(base) == 1 and got["fast_base"] == base["median"].iloc[0] and got["fast_max"] == fast["median"].max()
    assert got["fast_base_lo"] <= got["fast_base"] <= got["fast_base_hi"]
    cbase = fast[(fast["mode"] == "compiled") & (fast["k"] == 0) & (fast["batch"] == 1) & (fast["temperature"] == 0)]
    assert len(cbase) == 1 and got["fast_cbase"] == cbase["median"].iloc[0] != got["fast_base"]
    write_table(records(c[c["comparison"] != "vs_hf_compiled_ar"]), tmp_path / "bench" / "bench_comparisons.csv",
                {"test": True}, kind="timing")
    with pytest.raises(ValueError, match="vs_hf_compiled_ar"):
        summary.fastest_plain(tmp_path / "bench")
    with pytest.raises(FileNotFoundError, match="bench_comparisons"):
        summary.fastest_plain(tmp_path / "nowhere")


def test_exactness_counts_the_variants_the_tests_caught():
    f = pd.read_csv(RESULTS_DIR / "02_distribution_tests" / "frequency_tests.csv")
    got = summary.exactness()
    assert got["n_variants"] == (f["bug"] != "(correct)").sum() and got["n_caught"] <= got["n_variants"]
    assert got["law_err"] < 1e-12 and got["one_step_err"] < 1e-12


def test_comparison_marks_whose_numbers_and_ours_carry_intervals():
    rows = summary.comparison_rows(published_results())
    theirs = [r for r in rows if r["whose"].startswith("theirs")]
    ours = [r for r in rows if r["whose"].startswith("this report")]
    assert len(theirs) == len(published_results()) and len(ours) == 3
    assert all("(" in r["speedup"] and "-" in r["speedup"] for r in ours)
    assert all(1.0 <= r["mean_accepted_tokens"] <= r["k"] + 1 for r in ours if r["k"])


def test_guide_has_this_reports_evidence_for_every_rule():
    rows = summary.guide_rows()
    assert len(rows) == 8 and all(r["this report"] and r["rule"] for r in rows)
    assert "typical" in rows[-3]["this report"] and "bfloat16 softmax" in rows[-3]["this report"]
    assert all(p in rows[-2]["this report"] for p in ("fixed k=2", "load-aware", "break-even"))  # chapter 09
    engines = rows[-1]["this report"]  # chapter 10: every engine, its law tests, no instrument read as a speedup
    assert all(f"{e}: " in engines for e in ("ours", "hf", "vllm")) and "law tests passed" in engines
    assert "instrument" not in engines and "controlled acceptance" not in engines


def test_a_missing_chapter_table_is_an_error_that_names_it(tmp_path):
    shutil.copytree(RESULTS_DIR / "06_measured_decoding", tmp_path / "06_measured_decoding")
    shutil.copytree(RESULTS_DIR / "07_gpu_decoding", tmp_path / "07_gpu_decoding")
    (tmp_path / "06_measured_decoding" / "prediction.csv").unlink()
    with pytest.raises(FileNotFoundError, match="prediction"):
        summary.speed(tmp_path)
