"""The front page (specdec.chapters.summary and notebooks/98_summary.ipynb): its numbers agree with the
chapters' tables counted directly, hand-made tables give hand-counted values, a missing table is an
error naming it, and the page's deployment code is the code that runs (the cost lines on the page,
the `make audit` line through the Makefile)."""

import json
import re
import shutil

import pandas as pd
import pytest

from specdec.chapters.summary import findings, front
from specdec.io.paths import RESULTS_DIR, ROOT
from specdec.io.results import read_table, records, write_table
from specdec.measure.prediction import regime_costs
from specdec.measure.replication import free_level

NOTEBOOK = ROOT / "notebooks" / "98_summary.ipynb"


def _cells(kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == kind]


def test_speed_counts_are_the_summary_tables_verdicts():
    s = pd.read_csv(RESULTS_DIR / "06_measured_decoding" / "summary.csv", comment="#")
    spec = s[s["config"] != "baseline"]
    got = findings.speed()
    assert got["n_spec"] == len(spec) == got["n_faster"] + got["n_slower"] + got["n_undecided"] + got["n_too_few"]
    assert got["n_faster"] == (spec["verdict"] == "faster").sum() and got["n_slower"] == (spec["verdict"] == "slower").sum()
    assert got["n_undecided"] == (spec["verdict"] == "undecided").sum()  # too few pairs is counted apart
    assert got["gpu_state"] in ("measured", "unmeasured")


def test_fastest_plain_reads_each_modes_baseline_and_refuses_a_table_without_it(tmp_path):
    c = read_table(RESULTS_DIR / "bench" / "bench_comparisons.csv")
    fast = c[(c["comparison"] == "vs_hf_compiled_ar") & (c["k"] == 0) & (c["batch"] == 1) & (c["temperature"] == 0)]
    got = findings.fastest_plain()
    for mode, (med, lo, hi) in findings.FAST_BASE_KEYS.items():
        row = fast[fast["mode"] == mode]
        assert len(row) == 1 and got[med] == row["median"].iloc[0] and got[lo] <= got[med] <= got[hi]
    write_table(records(c[c["comparison"] != "vs_hf_compiled_ar"]), tmp_path / "bench" / "bench_comparisons.csv",
                {"test": True}, kind="timing")
    with pytest.raises(ValueError, match="vs_hf_compiled_ar"):
        findings.fastest_plain(tmp_path / "bench")
    with pytest.raises(FileNotFoundError, match="bench_comparisons"):
        findings.fastest_plain(tmp_path / "nowhere")


def test_exactness_counts_the_variants_the_tests_caught():
    f = pd.read_csv(RESULTS_DIR / "02_distribution_tests" / "frequency_tests.csv", comment="#")
    got = findings.exactness()
    assert got["n_variants"] == (f["bug"] != "(correct)").sum() and got["n_caught"] <= got["n_variants"]
    assert got["law_err"] < 1e-12 and 0 < got["freq_power"] < 1 and 0 < got["freq_eps"] < 1


def test_guide_medians_are_the_summary_tables():
    s = pd.read_csv(RESULTS_DIR / "06_measured_decoding" / "summary.csv", comment="#")
    fixed = s[s["config"].str.startswith("k=")]
    g = findings.guide()
    t1 = fixed[fixed["temperature"] == 1.0]
    assert g["median_batch_large"] == t1.loc[t1["batch"] == t1["batch"].max(), "speedup"].median()
    assert g["median_greedy"] == fixed.loc[(fixed["batch"] == 1) & (fixed["temperature"] == 0), "speedup"].median()
    assert g["bt_undecided"] <= g["bt_n"] and g["serve_undecided"] <= g["serve_n"] and g["approx_faster"] <= g["approx_n"]


def test_engine_counts_keep_only_rows_that_tested_what_they_name(tmp_path):
    laws = read_table(RESULTS_DIR / "10_engines" / "laws.csv")
    got = front.engines_values()
    vllm = laws[(laws["engine"] == "vllm") & (laws["role"] == "speculative") & laws["status"].isin(["pass", "reject"])]
    assert got["engines_shipped_n"] == (~vllm["patched"].astype(bool)).sum()
    assert got["engines_patched_n"] == vllm["patched"].astype(bool).sum()
    assert got["engines_shipped_rejected"] <= got["engines_shipped_n"]
    # a row the build ignored, or that did not run, is counted nowhere
    d = tmp_path / "10_engines"
    shutil.copytree(RESULTS_DIR / "10_engines", d)
    row = {**records(laws)[0], "engine": "vllm", "role": "speculative", "patched": False, "status": "ignored by this build"}
    write_table(records(laws) + [row, {**row, "status": "error"}], d / "laws.csv", {"test": True}, kind="sampled")
    again = front.engines_values(tmp_path)
    assert again["engines_shipped_n"] == got["engines_shipped_n"]
    assert again["engines_ignored"] == got["engines_ignored"] + (row["configuration"] not in set(
        laws.loc[laws["status"] == "ignored by this build", "configuration"]))


def test_reference_is_the_stated_setting_and_its_absence_is_an_error(tmp_path):
    p = json.loads((RESULTS_DIR / "06_measured_decoding" / "chapter.json").read_text())["parameters"]
    ref = front.reference()
    assert (ref["ref_k"], ref["ref_len"]) == (p["K_REF"], max(p["OUTPUT_LENS"]))
    assert ref["ref_lo"] <= ref["ref_speedup"] <= ref["ref_hi"]
    d = tmp_path / "06_measured_decoding"
    shutil.copytree(RESULTS_DIR / "06_measured_decoding", d)
    s = read_table(d / "summary.csv")
    write_table(records(s[s["config"] != f"k={p['K_REF']}"]), d / "summary.csv", {"test": True}, kind="timing")
    with pytest.raises(ValueError, match="reference configuration"):
        front.reference(tmp_path)


def test_the_headline_is_the_reference_pooled_over_the_runs_and_its_absence_is_an_error():
    rows = [{"setting": s, "runs": 4, "speedup": m, "lo_sim": m - 0.1, "hi_sim": m + 0.1, "level_sim": 0.9875,
             "verdict_sim": v} for s, m, v in (("k=2, batch 1, 128 tokens, greedy", 1.0, "undecided"),
                                               ("k=2, batch 1, 128 tokens, temperature 1", 1.5, "faster"))]
    got = front.reference(RESULTS_DIR, pd.DataFrame(rows))
    assert (got["ref_pooled"], got["ref_pooled_lo"], got["ref_pooled_hi"], got["ref_pooled_verdict"]) == (1.5, 1.4, 1.6, "faster")
    assert got["ref_speedup"] == front.reference()["ref_speedup"]  # the committed run's, kept apart
    with pytest.raises(ValueError, match="reference setting"):
        front.reference(RESULTS_DIR, rows[:1])


def test_replicated_counts_the_pooled_verdicts_and_states_the_level_r_runs_carry():
    rows = [{"setting": s, "runs": 3, "speedup": 1.0, "lo_sim": 0.9, "hi_sim": 1.1, "level_sim": 0.99, "verdict_sim": v}
            for s, v in (("a", "faster"), ("b", "undecided"), ("c", "slower"), ("d", "faster"))]
    got = front.replicated(pd.DataFrame(rows))
    assert (got["rep_runs"], got["rep_n_primary"], got["rep_primary_faster"], got["rep_primary_slower"]) == (3, 4, 2, 1)
    assert got["rep_level"] == 0.99 and got["rep_free_level"] == free_level(3) == 0.75
    with pytest.raises(ValueError):
        front.replicated([])


def test_rerun_rows_count_agreement_over_the_verdicts_both_runs_could_give():
    rows = front.rerun_rows()
    assert rows and [r["rerun"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["agree"] <= r["stated"] <= r["settings"] and r["overlap"] <= r["settings"] for r in rows)


def test_regime_values_by_hand_and_a_table_without_the_embedded_pair_is_refused():
    curves = pd.DataFrame([{"pair": "embedded + d", "alpha": a, "t2_ratio": 1.2, "c": 0.1, "break_even": 0.3}
                           for a in (0.0, 0.5)] + [{"pair": "big + d", "alpha": 0.0, "t2_ratio": 1.8, "c": 0.02,
                                                    "break_even": float("inf")}])
    assert [(r["pair"], r["timed"]) for r in regime_costs(curves)] == [("embedded + d", "in the loop"),
                                                                            ("big + d", "cost curve")]
    v = front.regime_values(curves)
    assert (v["t2_embedded"], v["c_embedded"], v["be_embedded"], v["t2_max"]) == (1.2, 0.1, 0.3, 1.8)
    assert v["be_max"] == float("inf")  # no k pays for the big pair
    with pytest.raises(ValueError, match="embedded"):
        front.regime_values(curves[curves["pair"] == "big + d"])
    committed, points = front.regimes()
    assert set(points["pair"]) <= set(committed["pair"])


def test_a_missing_chapter_table_is_an_error_that_names_it(tmp_path):
    shutil.copytree(RESULTS_DIR / "06_measured_decoding", tmp_path / "06_measured_decoding")
    (tmp_path / "06_measured_decoding" / "regime_points.csv").unlink()
    with pytest.raises(FileNotFoundError, match="regime_points"):
        front.regimes(tmp_path)


def test_the_deployment_code_shown_is_the_code_that_runs():
    """The box shows the five lines the page executes (the page hides code cells): the fenced block
    that imports `specdec.core.cost` is the executed cell's source up to its glue line."""
    shown = [m for md in _cells("markdown") for m in re.findall(r"```python\n(.*?)```", md, re.S)
             if "specdec.core.cost" in m]
    runs = [c for c in _cells("code") if "specdec.core.cost" in c]
    assert len(shown) == 1 and len(runs) == 1
    code = [ln for ln in runs[0].splitlines() if ln.strip()]
    assert [ln for ln in shown[0].splitlines() if ln.strip()] == code[:-1] and code[-1].startswith("ch.glue(")
    assert len(code) - 1 == 5


def test_guide_cells_are_short():
    guide = [md for md in _cells("markdown") if "| question |" in md]
    assert len(guide) == 1
    rows = [ln for ln in guide[0].splitlines() if ln.startswith("| ") and not ln.startswith("| question")]
    assert 5 <= len(rows) <= 12
    for row in rows:
        for cell in row.strip("|").split("|"):
            words = re.sub(r"\{glue:text\}`[^`]*`", "N", cell).split()
            assert len(words) <= 25, cell


def test_the_audit_command_shown_runs_the_audit_with_its_arguments():
    """The box's `make audit` line is a command the Makefile runs as the audit's command line with the
    same URLs, model and weights (the audit itself is tested against real servers in
    tests/audit/test_deployment*.py)."""
    import shlex
    import subprocess

    shown = [m for md in _cells("markdown") for m in re.findall(r"```bash\n(make audit .*?)\n```", md, re.S)]
    assert len(shown) == 1
    args = shlex.split(shown[0])
    dry = subprocess.run(["make", "-n", *args[1:]], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = [ln for ln in dry.splitlines() if "specdec.cli.audit" in ln]
    assert len(line) == 1
    want = dict(a.split("=", 1) for a in args[2:])
    got = shlex.split(line[0])
    assert got[got.index("--url") + 1:got.index("--model")] == want["URL"].split()
    assert got[got.index("--model") + 1] == want["MODEL"] and got[got.index("--target") + 1] == want["TARGET"]
