"""specdec.report.chapter: parameters collected (literals only), SMOKE sizes applied without
reassignment, recompute writes what render reads back with the committed parameters, and the
figure check rejects series that draw nothing (negative control included)."""

import json

import pytest

from specdec.report import plotting
from specdec.report.chapter import Chapter, as_text, collect_parameters
from specdec.report.plotting.style import new


def _ns(tmp_path, **kw):
    return {"SMOKE": False, "RECOMPUTE": True, "RESULTS_DIR": str(tmp_path / "07_x"), "N": 1000, "KS": [1, 2],
            "SMOKE_SIZES": {"N": 10}, "lower": 5, "OBJ": object(), **kw}


def test_parameters_are_the_uppercase_literals():
    ns = {"A": 1, "B": [1, 2.5, None], "C": {"x": (1, 2)}, "d": 3, "E": object(), "_F": 1, "G": "text"}
    assert collect_parameters(ns) == {"A": 1, "B": [1, 2.5, None], "C": {"x": (1, 2)}, "G": "text"}
    assert as_text([1, 2, 4]) == "1, 2, 4" and as_text(None) == "none" and as_text(0.5) == "0.5"


def test_smoke_sizes_apply_and_render_reads_the_committed_parameters(tmp_path):
    ch = Chapter(_ns(tmp_path, SMOKE=True))
    assert ch.P.N == 10 and ch.P.KS == [1, 2] and ch.name == "07_x"
    with pytest.raises(AttributeError, match="read-only"):
        ch.P.N = 3
    t = ch.table("grid", lambda: [{"k": 1, "v": 0.5}], kind="exact")
    assert t["v"].tolist() == [0.5] and t.attrs["meta"]["provenance"]["parameters"]["N"] == 10
    assert ch.values("numbers", lambda: {"a": 1.5}) == {"a": 1.5}
    ch.use_models({"target/model.safetensors": "ff" * 32})
    # render mode: nothing is computed, and P is what the committed run used (not the cell's N = 1000)
    r = Chapter(_ns(tmp_path, RECOMPUTE=False))
    assert r.P.N == 10 and r.P.SMOKE is True and r.models == {"target/model.safetensors": "ff" * 32}
    assert r.table("grid", compute=None)["k"].tolist() == [1] and r.values("numbers") == {"a": 1.5}
    with pytest.raises(KeyError, match="other"):
        r.values("other")
    with pytest.raises(ValueError, match="nothing to compute"):
        ch.table("more")


def test_missing_results_and_bad_smoke_sizes_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="RECOMPUTE=True"):
        Chapter(_ns(tmp_path, RECOMPUTE=False, RESULTS_DIR=str(tmp_path / "none")))
    with pytest.raises(ValueError, match="not parameters"):
        Chapter(_ns(tmp_path, SMOKE_SIZES={"M": 1}))
    with pytest.raises(ValueError, match="RESULTS_DIR"):
        Chapter({"RECOMPUTE": True})


def test_figures_with_invisible_series_are_refused(tmp_path):
    ch = Chapter(_ns(tmp_path))
    fig, ax = new(3, 2)
    ax.scatter([0, 1], [0, 1], facecolors="none", label="hollow")  # no edge colour: draws nothing
    with pytest.raises(ValueError, match="hollow"):
        ch.figure(fig, "bad")
    fig, ax = new(3, 2)
    ax.scatter([0, 1], [0, 1], facecolors="none", edgecolors="C0", label="hollow but edged")
    ch.figure(fig, "good")
    assert (tmp_path / "07_x" / "good.png").exists() and not (tmp_path / "07_x" / "bad.png").exists()
    assert all(seen for _, _, seen in plotting.visible_series(fig))


def test_the_run_record_is_glued_as_values_and_reads_not_recorded_before_a_recompute(tmp_path, monkeypatch):
    import specdec.report.chapter as chapter_mod

    glued = {}
    monkeypatch.setattr(chapter_mod.Chapter, "glue", lambda self, **v: glued.update(v))
    ch = Chapter(_ns(tmp_path))
    ch.glue_run_record()
    assert set(glued.values()) == {"not recorded"} and len(glued) == 4
    (tmp_path / "07_x" / "run.json").write_text(json.dumps({
        "chapter": "07_x", "wall_s": 12.3, "date": "2026-11-30T00:00:00", "commit": "abc",
        "hardware": {"cpu": "Some CPU", "cpu_count": 2}}))
    ch.glue_run_record()
    assert glued == {"run_wall": "12 s", "run_cpu": "Some CPU, 2 cores", "run_date": "2026-11-30", "run_commit": "abc"}
    (tmp_path / "07_x" / "run.json").write_text(json.dumps({
        "chapter": "07_x", "wall_s": 12.3, "date": "2026-11-30T00:00:00", "commit": "0123456789abcdef+dirty",
        "hardware": {}}))
    ch.glue_run_record()
    assert glued["run_commit"] == "0123456789ab+dirty"  # the flag is kept


def test_the_page_states_the_machine_of_the_run_it_shows(tmp_path, monkeypatch):
    import specdec.report.chapter as chapter_mod

    fake = {"git_commit": "0123456789abcdef+dirty", "python": "3.11.7", "packages": {"torch": "2.13.0", "transformers": "5.24.0"},
            "hardware": {"cpu": "Test CPU 9000", "cpu_count": 2, "machine": "x86_64", "torch_threads": 1}}
    monkeypatch.setattr(chapter_mod, "provenance", lambda *a, **k: dict(fake))
    Chapter(_ns(tmp_path))  # the recompute records it
    monkeypatch.setattr(chapter_mod, "provenance", lambda *a, **k: {**fake, "hardware": {"cpu": "Other"}})
    text = Chapter(_ns(tmp_path, RECOMPUTE=False)).machine_text()  # render: the committed run's, not this machine's
    assert text == ("Test CPU 9000, 2 cores (x86_64), 1 torch thread; Python 3.11.7, torch 2.13.0, "
                    "transformers 5.24.0; commit 0123456789ab with uncommitted changes")
