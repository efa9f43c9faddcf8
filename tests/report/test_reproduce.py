"""specdec.report.reproduction.status and .page: each kind of table is compared as its sidecar says, and each
comparison rejects a planted difference (negative controls)."""

import pandas as pd

from specdec.report.reproduction.status import compare_frames


def _frame(kind, data, **meta):
    df = pd.DataFrame(data)
    df.attrs["meta"] = {"kind": kind, **meta}
    return df


def test_exact_tables_agree_to_rounding_and_catch_a_changed_value():
    old = _frame("exact", {"k": [1, 2], "v": [1.336363636363636, 0.5], "s": ["a", "b"]})
    same = _frame("exact", {"k": [1, 2], "v": [1.3363636363636362, 0.5], "s": ["a", "b"]})  # last bit differs
    assert compare_frames(same, old)["status"] == "reproduced"
    moved = _frame("exact", {"k": [1, 2], "v": [1.3364, 0.5], "s": ["a", "b"]})
    assert compare_frames(moved, old)["status"] == "differs" and "v" in compare_frames(moved, old)["detail"]
    relabelled = _frame("exact", {"k": [1, 2], "v": [1.336363636363636, 0.5], "s": ["a", "c"]})
    assert compare_frames(relabelled, old)["status"] == "differs"
    assert compare_frames(_frame("exact", {"k": [1]}), _frame("exact", {"k": [1, 2]}))["status"] == "differs"


def test_an_exact_table_from_float32_logits_is_held_to_the_tolerance_it_states():
    """Chapter 08's real-pair tables: a rounding-level TV that moved 100% between CPUs (4e-7 absolute)
    agrees within the stated atol, one that moved by 2e-6 does not; without the statement it differs."""
    from specdec.chapters.ch08.real_laws import LOGITS_TOLERANCE

    old = _frame("exact", {"tv": [4.0e-7, 0.595], "n": [61512, 100]})
    cpu = {"tv": [8.0e-7, 0.5950001], "n": [61513, 100]}
    assert compare_frames(_frame("exact", cpu, tolerance=LOGITS_TOLERANCE), old)["status"] == "reproduced"
    assert compare_frames(_frame("exact", cpu), old)["status"] == "differs"  # the default: rtol 1e-9
    moved = _frame("exact", {**cpu, "tv": [2.4e-6, 0.595]}, tolerance=LOGITS_TOLERANCE)
    assert compare_frames(moved, old)["status"] == "differs" and "tv" in compare_frames(moved, old)["detail"]


def test_sampled_tables_use_their_intervals_errors_and_keys():
    meta = dict(intervals=[["a", "lo", "hi"]], se={"m": "se"}, keys=["verdict"])
    old = _frame("sampled", {"a": [0.5], "lo": [0.45], "hi": [0.55], "m": [2.0], "se": [0.01], "verdict": ["passes"]}, **meta)
    new = _frame("sampled", {"a": [0.53], "lo": [0.48], "hi": [0.58], "m": [2.03], "se": [0.01], "verdict": ["passes"]}, **meta)
    assert compare_frames(new, old)["status"] == "reproduced"
    far = new.copy()
    far["lo"], far["hi"] = [0.6], [0.7]
    assert "intervals do not overlap" in compare_frames(far, old)["detail"]
    off = new.copy()
    off["m"] = [2.1]  # 0.1 > 4 * sqrt(2) * 0.01
    assert "standard errors" in compare_frames(off, old)["detail"]
    flipped = new.copy()
    flipped["verdict"] = ["caught"]
    assert compare_frames(flipped, old)["status"] == "differs"
    bare = _frame("sampled", {"x": [1.0]})
    assert compare_frames(bare, _frame("sampled", {"x": [2.0]}))["status"] == "not compared"


def test_timing_tables_are_reported_never_asserted():
    old = _frame("timing", {"tokens_per_s": [100.0, 200.0], "wall_s": [1.0, 2.0], "k": [1, 2]})
    new = _frame("timing", {"tokens_per_s": [50.0, 400.0], "wall_s": [1.0, 2.0], "k": [1, 2]})
    r = compare_frames(new, old)
    assert r["status"] == "timing" and "median 1.00" in r["detail"] and "0.50-2.00" in r["detail"]


SPEED = dict(intervals=[["speedup", "speedup_lo", "speedup_hi"], ["steady", "steady_lo", "steady_hi"]])


def _speed(rows, runs=10):
    """A chapter-06-like summary: a baseline row (the point [1, 1], no measurement) and speculative
    rows (config, speedup [lo, hi], verdict, steady [lo, hi] with no verdict of its own, a rate);
    the sample count ``runs`` stands among the leading columns, where it must not be taken for a label."""
    cols = ["config", "speedup", "speedup_lo", "speedup_hi", "verdict"]
    data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    data = {"temperature": [0.0] * len(rows), **data, "runs": [runs] * len(rows)}
    data["steady"], data["steady_lo"], data["steady_hi"] = data["speedup"], data["speedup_lo"], data["speedup_hi"]
    data["tokens_per_s"] = [100.0] * len(rows)
    cols = ["temperature", "runs", "config", "speedup", "speedup_lo", "speedup_hi", "verdict", "steady", "steady_lo",
            "steady_hi", "tokens_per_s"]
    return _frame("timing", {c: data[c] for c in cols}, **SPEED)


OLD = [("baseline", 1.0, 1.0, 1.0, "undecided"), ("k=1", 1.2, 1.1, 1.3, "faster"),
       ("k=2", 0.9, 0.8, 0.95, "slower"), ("k=3", 1.05, 0.98, 1.12, "undecided")]


def _counts(r):
    from specdec.report.reproduction.timing import COUNTS

    return [r[c] for c in COUNTS]


def test_timing_intervals_count_overlaps_and_agreeing_verdicts_on_matched_rows():
    from specdec.report.reproduction.status import chapter_status

    new = [("k=3", 1.1, 1.02, 1.18, "faster"),   # overlaps, but the verdict differs
           ("k=2", 0.7, 0.6, 0.75, "slower"),    # misses the committed interval, same verdict
           ("k=1", 1.25, 1.15, 1.35, "faster"), ("baseline", 1.0, 1.0, 1.0, "undecided")]  # another order
    r = compare_frames(_speed(new, runs=12), _speed(OLD))  # other sample counts: runs is no label
    # per interval 2 of 3 overlap (baseline not compared), twice; the verdict words the first interval only
    assert r["status"] == "timing" and _counts(r) == [4, 6, 2, 3, 0]
    assert "speedup [speedup_lo, speedup_hi]: 2 of 3 intervals overlap, 2 of 3 verdicts (verdict) agree" in r["detail"]
    assert "matched on temperature, config" in r["detail"] and "median 1.00" in r["detail"]
    row = {"table": "summary", "kind": "timing", **r}
    assert chapter_status([row], True) == "timing"  # the counts are the chapter row's own columns
    exact = {"table": "laws", "kind": "exact", "status": "reproduced", "detail": ""}
    assert chapter_status([exact, row], True) == "reproduced"
    assert chapter_status([{**exact, "status": "differs"}, row], True) == "differs"
    assert chapter_status([{**exact, "status": "missing"}], True) == "differs"
    assert chapter_status([{**exact, "status": "not compared", "kind": "sampled"}], True) == "not compared"
    assert chapter_status([row], False) == "no reference"


def test_timing_intervals_of_an_identical_rerun_all_agree():
    old = _speed(OLD)
    new = _speed([r if r[0] != "k=3" else (*r[:4], "no difference detected at this precision") for r in OLD])
    r = compare_frames(new, old)  # the older wording of "undecided" says the same
    assert r["status"] == "timing" and _counts(r) == [6, 6, 3, 3, 0] and "rows unmatched" not in r["detail"]


def test_timing_intervals_compare_the_matched_rows_when_the_row_sets_differ():
    from specdec.report.reproduction.status import chapter_status

    renamed = _speed([OLD[0], OLD[1], OLD[2], ("k=4", *OLD[3][1:])])
    r = compare_frames(renamed, _speed(OLD))
    assert r["status"] == "timing" and _counts(r) == [4, 4, 2, 2, 2]
    assert "rows unmatched: 1 committed, 1 recomputed; " in r["detail"]
    assert chapter_status([{"table": "summary", "kind": "timing", **r}], True) == "timing"
    shorter = compare_frames(_speed(OLD[:2]), _speed(OLD))  # fewer rows: still reported, not "differs"
    assert shorter["status"] == "timing" and _counts(shorter) == [2, 2, 1, 1, 2]
    twice = [OLD[1], OLD[1], OLD[2]]  # no labels name the rows: in order when the counts are equal, else none
    none = compare_frames(_speed(twice), _speed(OLD))
    assert _counts(none) == [0, 0, 0, 0, 7] and "none matched" in none["detail"]
    in_order = compare_frames(_speed(twice + [OLD[3]]), _speed(OLD))  # k=1 against the baseline first
    assert _counts(in_order) == [6, 8, 3, 4, 0] and "matched in order" in in_order["detail"]


def test_timing_tables_without_intervals_report_ratios_only():
    old = _frame("timing", {"config": ["a", "b"], "speedup": [1.0, 2.0], "speedup_lo": [0.9, 1.9],
                            "speedup_hi": [1.1, 2.1], "verdict": ["faster", "slower"], "wall_s": [1.0, 2.0]})
    new = old.copy()
    new["speedup_lo"], new["verdict"], new["wall_s"] = [3.0, 3.0], ["slower", "faster"], [2.0, 2.0]
    new.attrs["meta"] = dict(old.attrs["meta"])
    r = compare_frames(new, old)
    assert r["status"] == "timing" and "overlap" not in r["detail"] and "median 1.50" in r["detail"]
    assert all(r.get(k, 0) == 0 for k in ("intervals_compared", "verdicts_compared", "rows_unmatched"))
    assert compare_frames(new.iloc[:1], old)["status"] == "differs"  # rows are compared in order: equal counts


def test_compare_chapter_reads_the_intervals_from_the_sidecar(tmp_path):
    from specdec.report.reproduction.status import chapter_status, compare_chapter
    from specdec.io.results import write_table

    for d, rows in (("new", OLD[:3] + [("k=3", 1.3, 1.2, 1.4, "faster")]), ("old", OLD)):
        df = _speed(rows)
        write_table(df, tmp_path / d / "summary.csv", {}, kind="timing", **SPEED)
        write_table([{"k": 1, "v": 0.5}], tmp_path / d / "laws.csv", {}, kind="exact")
    rows = compare_chapter(tmp_path / "new", tmp_path / "old")
    assert [list(r) for r in rows][0] == list(rows[1])  # one set of columns, as write_table needs
    by = {r["table"]: r for r in rows}
    assert _counts(by["laws"]) == [0] * 5 and _counts(by["summary"]) == [4, 6, 2, 3, 0]
    assert chapter_status(rows, True) == "reproduced"


def test_the_page_shows_each_chapter_by_its_word_and_counts():
    """One row per chapter: its status word (an older recorded status read as the word it begins
    with), wall time, and "a of b" counts where intervals were compared; blank counts in a summary
    recorded without them."""
    from specdec.report.reproduction.page import chapter_counts, chapter_rows, chapter_verdict

    summary = pd.DataFrame({"chapter": ["03_cost_model", "06_measured_decoding", "10_engines"],
                            "status": ["reproduced; timing: 1 of 2 intervals overlap", "timing", "differs: laws"],
                            "wall_s": [7.0, 730.0, 314.0], "intervals_overlap": [0, 20, 3],
                            "intervals_compared": [0, 24, 4], "verdicts_agree": [0, 18, 2],
                            "verdicts_compared": [0, 24, 4],
                            "reference": ["0123456789abcdef"] * 3, "cpu": ["EPYC"] * 3, "cores": [2] * 3,
                            "commit": ["abc", "abc+dirty", "abc"]})
    rows = chapter_rows(summary)
    assert rows.values.tolist() == [["03_cost_model", "reproduced", "", 7.0, "", ""],
                                    ["06_measured_decoding", "timing", "", 730.0, "20 of 24", "18 of 24"],
                                    ["10_engines", "differs", "", 314.0, "3 of 4", "2 of 4"]]
    assert chapter_verdict("timing only") == "timing" and chapter_verdict("not compared") == "not compared"
    recorded = summary[["chapter", "status", "wall_s"]]  # a comparison recorded without the counts
    assert chapter_rows(recorded)["intervals"].tolist() == ["", "", ""]
    assert chapter_counts(summary) == {"n_chapters": 3, "n_reproduced": 1, "n_changed": 0, "n_dirty": 1,
                                       "machines": "EPYC (2 cores)", "reference": "0123456789ab"}
    # a chapter the run did not recompute (its committed run, another CPU) is no machine of this run
    elsewhere = summary.assign(status=["reproduced", "timing", "not recomputed"], cpu=["EPYC", "EPYC", "Xeon"])
    assert chapter_counts(elsewhere)["machines"] == "EPYC (2 cores)"


def test_table_counts_and_the_tables_that_differ():
    from specdec.report.reproduction.page import differing, table_counts

    tables = pd.DataFrame({"chapter": ["a"] * 5, "table": list("vwxyz"),
                           "kind": ["exact", "exact", "sampled", "sampled", "timing"],
                           "status": ["reproduced", "differs", "reproduced", "not compared", "timing"]})
    assert table_counts(tables) == {"n_tables": 5, "n_exact": 2, "n_exact_ok": 1, "n_sampled": 2, "n_sampled_ok": 1,
                                    "n_sampled_nc": 1, "n_timing": 1}
    missing = tables.assign(status=tables["status"].replace({"timing": "missing"}))
    assert differing(tables)["table"].tolist() == ["w"] and differing(missing)["table"].tolist() == ["w", "z"]


def test_a_chapter_whose_run_record_is_the_committed_one_was_not_recomputed(tmp_path):
    """Chapter 10 under `make reproduce` keeps the committed run.json: its tables equal the committed
    ones without having been recomputed, and the page must not call it reproduced."""
    import json

    from specdec.report.reproduction.page import chapter_verdict
    from specdec.report.reproduction.status import was_recomputed

    rec = {"chapter": "10_engines", "wall_s": 1230.7, "date": "2026-12-06T18:24:26+00:00"}
    for d, r in (("new", rec), ("ref", rec), ("again", {**rec, "wall_s": 1190.2, "date": "2026-12-08"})):
        (tmp_path / d).mkdir()
        (tmp_path / d / "run.json").write_text(json.dumps(r))
    (tmp_path / "bare").mkdir()
    assert not was_recomputed(tmp_path / "new", tmp_path / "ref")
    assert was_recomputed(tmp_path / "again", tmp_path / "ref")
    assert was_recomputed(tmp_path / "new", None) and was_recomputed(tmp_path / "bare", tmp_path / "ref")
    assert chapter_verdict("not recomputed") == "not recomputed"


def test_a_chapter_not_recomputed_lists_its_tables_uncompared_and_uncounted(tmp_path):
    """A fresh clone's page before any recompute: every chapter left alone still lists its tables (the
    page's table is never empty) and none enters the counts."""
    from specdec.report.reproduction.page import table_counts
    from specdec.report.reproduction.status import compare_chapter
    from specdec.io.results import write_table

    for d in ("new", "old"):
        write_table([{"k": 1, "v": 0.5}], tmp_path / d / "laws.csv", {}, kind="exact")
    write_table([{"k": 1, "v": 0.7}], tmp_path / "new" / "moved.csv", {}, kind="exact")
    write_table([{"k": 1, "v": 0.5}], tmp_path / "old" / "moved.csv", {}, kind="exact")
    left = compare_chapter(tmp_path / "new", tmp_path / "old", recomputed=False)
    assert [(r["table"], r["status"]) for r in left] == [("laws", "not recomputed"), ("moved", "not recomputed")]
    assert table_counts(pd.DataFrame(left))["n_tables"] == 0
    ran = compare_chapter(tmp_path / "new", tmp_path / "old")
    assert [r["status"] for r in ran] == ["reproduced", "differs"]
    assert table_counts(pd.DataFrame(ran + left))["n_tables"] == 2


def test_the_reproduction_chapter_does_not_compare_itself():
    from pathlib import Path

    from specdec.report.reproduction.status import chapter_names

    assert chapter_names([Path("r/01_a"), Path("r/99_reproduction")], "99_reproduction") == ["01_a"]


def test_the_recompute_budget_sums_the_chapters_make_reproduce_recomputes():
    """Chapters with a target of their own (chapter 10: make engines) are summed apart."""
    from specdec.report.reproduction.budget import recompute_budget

    summary = pd.DataFrame({"chapter": ["01_a", "06_b", "07_c", "10_engines"],
                            "wall_s": [600.0, 900.0, float("nan"), 1200.0]})  # no run.json adds nothing
    assert recompute_budget(summary) == {"recompute_minutes": 25.0, "recompute_budget": 25.0,
                                         "recompute_verdict": "within", "own_target_minutes": 20.0}
    assert recompute_budget(summary.assign(wall_s=[600.0, 901.0, 0.0, 0.0]))["recompute_verdict"] == "over"
    assert recompute_budget(summary, budget_min=20)["recompute_verdict"] == "over"
    assert recompute_budget(summary.assign(chapter=["01_a", "06_b", "07_c", "10_x"]))["recompute_verdict"] == "over"


def test_the_make_reproduce_record_round_trips(tmp_path):
    import math
    import time

    from specdec.report.reproduction import budget

    none = budget.last_run(tmp_path)
    assert math.isnan(none["reproduce_minutes"]) and none["reproduce_fresh"] == "n/a"
    assert budget.main(["--since", str(time.time() - 600), "--fresh-env", "true", "--folder", str(tmp_path)]) == 0
    got = budget.last_run(tmp_path)
    assert got["reproduce_fresh"] == "yes" and 10.0 <= got["reproduce_minutes"] <= 10.2
    budget.record(time.time() - 60, False, tmp_path)
    assert budget.last_run(tmp_path)["reproduce_fresh"] == "no"


def test_a_chapter_recomputed_with_other_parameters_names_them_and_keeps_its_status(tmp_path, monkeypatch):
    """A chapter whose parameters changed since the reference (run controls apart) has them named
    beside its status, which stays what its tables say: a changed table still "differs", an equal one
    is still "reproduced" (a changed parameter never hides a failure); unchanged parameters (or a
    moved results folder only) name none."""
    import json

    import specdec.report.reproduction.status as st
    from specdec.io.results import write_table
    from specdec.report.reproduction.page import chapter_counts, chapter_rows
    from specdec.report.reproduction.status import changed_parameters, compare_all

    old = {"SEED": 1, "NEW_TOKENS": 48, "DRAFTS": ["a", "b", "c"], "RECOMPUTE": False, "RESULTS_DIR": "x"}
    for d, params, v in (("redesigned", {**old, "NEW_TOKENS": 32, "DRAFTS": ["a", "c"], "RECOMPUTE": True}, 0.7),
                         ("same", {**old, "RECOMPUTE": True, "RESULTS_DIR": "y"}, 0.7),
                         ("kept", {**old, "NEW_TOKENS": 32}, 0.5)):
        for root, p, val, wall in (("new", params, v, 9.0), ("ref", old, 0.5, 8.0)):
            folder = tmp_path / root / d
            write_table([{"k": 1, "v": val}], folder / "laws.csv", {}, kind="exact")
            (folder / "chapter.json").write_text(json.dumps({"parameters": p}))
            (folder / "run.json").write_text(json.dumps({"wall_s": wall}))
    assert changed_parameters(tmp_path / "new" / "redesigned", tmp_path / "ref" / "redesigned") == ["DRAFTS", "NEW_TOKENS"]
    assert changed_parameters(tmp_path / "new" / "same", tmp_path / "ref" / "same") == []
    assert changed_parameters(tmp_path / "new" / "same", None) == []
    monkeypatch.setattr(st, "extract_reference", lambda revision="HEAD", into=None: (tmp_path / "ref", "f" * 40))
    _, summary = compare_all(tmp_path / "new", ["redesigned", "same", "kept"])
    assert [(r["status"], r["changed"]) for r in summary] == [("differs", "DRAFTS NEW_TOKENS"), ("differs", ""),
                                                              ("reproduced", "NEW_TOKENS")]
    assert chapter_rows(pd.DataFrame(summary))["changed"].tolist() == ["DRAFTS NEW_TOKENS", "", "NEW_TOKENS"]
    assert chapter_counts(pd.DataFrame(summary))["n_changed"] == 2
