"""specdec.report.robustness: re-run agreement on hand-made tables (and a negative control: a shifted
re-run's intervals are counted as missing)."""

import pandas as pd

from specdec.report import robustness as rb
from specdec.io.results import write_table


def _summary(shift=0.0):
    rows = [{"temperature": 1.0, "output_len": 32, "batch": 1, "config": "baseline", "speedup": 1.0, "speedup_lo": 1.0,
             "speedup_hi": 1.0, "verdict": "(the baseline)"}]
    for k, (est, lo, hi, words) in enumerate([(1.10, 1.05, 1.15, "faster"), (0.98, 0.95, 1.02, "undecided"),
                                              (0.90, 0.85, 0.95, "slower")], start=1):
        rows.append({"temperature": 1.0, "output_len": 32, "batch": 1, "config": f"k={k}", "speedup": est + shift,
                     "speedup_lo": lo + shift, "speedup_hi": hi + shift, "verdict": words})
    return pd.DataFrame(rows)


def test_agreement_counts_overlaps_and_the_verdicts_both_runs_could_give():
    same = rb.agreement(_summary(), _summary(0.02))
    assert same == {"n": 3, "overlap": 3, "words_agree": 3, "words_n": 3}
    moved = rb.agreement(_summary(), _summary(0.11).assign(verdict="faster"))  # every interval moved past the other
    assert moved == {"n": 3, "overlap": 0, "words_agree": 1, "words_n": 3}
    old = _summary().replace({"verdict": {"undecided": "no difference detected at this precision"}})
    assert rb.agreement(_summary(), old)["words_agree"] == 3  # an older table's words for the same statement
    refused = _summary().assign(verdict="too few pairs for this level")
    assert rb.agreement(refused, refused)["words_agree"] == 0  # two refusals are not an agreement
    assert rb.agreement(refused, refused)["words_n"] == 0  # ... nor a verdict to count
    half = _summary().assign(verdict=["(the baseline)", "faster", "too few pairs for this level", "slower"])
    assert rb.agreement(half, _summary())["words_n"] == 2


def test_rerun_agreements_read_every_rerun_folder_in_name_order(tmp_path):
    for name, shift in (("run_b", 0.2), ("run_a", 0.0)):
        d = tmp_path / name
        d.mkdir()
        write_table(_summary(shift), d / "summary.csv", {}, kind="timing")
    (tmp_path / "older").mkdir()  # a folder without a summary of its own (e.g. older runs below it) is skipped
    got = rb.rerun_agreements(_summary(), tmp_path)
    assert [d.name for d, _, _ in got] == ["run_a", "run_b"]
    assert [a["overlap"] for _, _, a in got] == [3, 0]  # the shifted re-run misses every interval
    assert rb.rerun_agreements(_summary(), tmp_path / "none") == []
