"""specdec.report.robustness: re-run agreement and multiplicity words, on hand-made tables (and a
negative control: a shifted re-run is reported as missing)."""

import json

import pandas as pd
import pytest

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


def test_agreement_counts_overlaps_and_names_the_misses():
    same = rb.agreement(_summary(), _summary(0.02))
    assert (same["n"], same["overlap"], same["words_agree"], same["missed"]) == (3, 3, 3, [])
    moved = rb.agreement(_summary(), _summary(0.11).assign(verdict="faster"))  # every interval moved past the other
    assert moved["n"] == 3 and moved["overlap"] == 0 and moved["words_agree"] == 1
    assert moved["missed"][0] == ("k=1, batch 1, 32 tokens, temperature 1: 1.100 [1.050, 1.150] against "
                                  "1.210 [1.160, 1.260]")
    old = _summary().replace({"verdict": {"undecided": "no difference detected at this precision"}})
    assert rb.agreement(_summary(), old)["words_agree"] == 3  # an older table's words for the same statement
    refused = _summary().assign(verdict="too few pairs for this level")
    assert rb.agreement(refused, refused)["words_agree"] == 0  # two refusals are not an agreement
    assert rb.agreement(refused, refused)["words_n"] == 0 and same["words_n"] == 3  # ... nor a word to count
    half = _summary().assign(verdict=["(the baseline)", "faster", "too few pairs for this level", "slower"])
    assert rb.agreement(half, _summary())["words_n"] == 2


def test_rerun_values_read_every_rerun_folder(tmp_path):
    for name, shift in (("run_a", 0.0), ("run_b", 0.2)):
        d = tmp_path / name
        d.mkdir()
        write_table(_summary(shift), d / "summary.csv", {}, kind="timing")
        (d / "run.json").write_text(json.dumps({"commit": "abcdef0123"}))
    (tmp_path / "older").mkdir()  # a folder without a summary of its own (e.g. older runs below it) is skipped
    v = rb.rerun_values(_summary(), tmp_path)
    assert v["reruns_n"] == 2
    assert v["reruns_words"].startswith("re-run 1 (commit abcdef0): 3 of 3 intervals overlap, 3 verdicts agree, its "
                                        "best k=1, batch 1, 32 tokens, temperature 1 at 1.100 [1.050, 1.150]; re-run 2")
    assert "re-run 2 (commit abcdef0): 0 of 3 intervals overlap" in v["reruns_words"]
    assert v["reruns_missed"].count("against") == 3 and v["best_here"].endswith("1.100 [1.050, 1.150]")
    assert v["reruns_missed"].startswith("re-run 2: committed k=1, batch 1, 32 tokens, temperature 1: 1.100")
    (tmp_path / "run_b" / "run.json").unlink()
    assert "re-run 2 (commit unknown)" in rb.rerun_values(_summary(), tmp_path)["reruns_words"]
    assert rb.rerun_values(_summary().iloc[:1], tmp_path)["best_here"] == "none"  # only the baseline
    assert rb.rerun_values(_summary(), tmp_path / "none")["reruns_words"] == "no re-run is committed"


def test_multiplicity_words_say_what_each_family_decided(tmp_path):
    chapters = {"acc": "a", "dec": "d", "alt": "x", "serve": "s"}
    nan = float("nan")
    tables = {
        ("a", "block_vs_token"): [{"lo_sim": 1.1, "words_sim": "more tokens per step"},
                                  {"lo_sim": 0.9, "words_sim": "undecided"}],
        ("d", "summary"): [{"config": "baseline", "speedup_lo_sim": 1.0, "verdict_sim": "faster"},
                           {"config": "k=1", "speedup_lo_sim": nan, "verdict_sim": "too few pairs for this level"}],
        ("d", "draft_summary"): [{"speedup_lo_sim": 1.1, "verdict_sim": "faster"},
                                 {"speedup_lo_sim": nan, "verdict_sim": "too few pairs for this level"}],
        ("d", "dynamic_vs_fixed"): [{"lo": 1.0}],  # a table from before the simultaneous columns: skipped
        ("d", "real_size_speedup_vs_alpha"): [{"speedup_lo_sim": 0.5, "verdict_sim": "slower"}],
        ("x", "speedup"): [{"speedup_lo_sim": 0.5, "verdict_sim": "undecided"}],
        ("s", "speedup"): [{"latency_lo_sim": nan, "verdict_sim": "too few pairs for this level"}]}
    for (ch, name), rows in tables.items():
        (tmp_path / ch).mkdir(exist_ok=True)
        write_table(rows, tmp_path / ch / f"{name}.csv", {}, kind="timing")
    assert rb.multiplicity_words(tmp_path, chapters) == (
        "block against token verification (2): 1 decided; chapter 06's sweep (1): out of reach with so few pairs; "
        "the drafts (2): 1 decided, 1 out of reach; the real-size surface (1): 1 decided; "
        "the approximate algorithms (1): 0 decided; the serving policies (1): out of reach with so few pairs")
    with pytest.raises(FileNotFoundError):
        rb.multiplicity_words(tmp_path / "missing", chapters)
