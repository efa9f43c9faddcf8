"""specdec.io.results and paths: typed round trips, the one atomic writer, version checks, and
paths that do not depend on the working directory."""

import json
import os

import pytest

from specdec.io import paths
from specdec.io.results import atomic_path, atomic_write, provenance, read_meta, read_table, write_table


def test_typed_round_trip_from_rows_and_from_a_dataframe(tmp_path):
    rows = [{"k": 1, "alpha": 0.8, "name": "1.0", "ok": True, "gap": None},
            {"k": 2, "alpha": float("nan"), "name": "", "ok": False, "gap": 3}]
    write_table(rows, tmp_path / "t.csv", provenance({"A": 1}), kind="sampled", keys=["name"])
    df = read_table(tmp_path / "t.csv")
    assert list(df.dtypes.astype(str)) == ["int64", "float64", "object", "bool", "Int64"]
    assert df["name"].tolist() == ["1.0", ""] and df["ok"].tolist() == [True, False]  # strings stay strings
    assert df["alpha"].isna().tolist() == [False, True] and df.attrs["meta"]["keys"] == ["name"]
    assert df.attrs["meta"]["kind"] == "sampled" and df.attrs["meta"]["provenance"]["parameters"] == {"A": 1}
    write_table(df, tmp_path / "u.csv", {}, kind="exact")                          # a DataFrame writes too
    assert (tmp_path / "u.csv").read_text() == (tmp_path / "t.csv").read_text()


def test_bad_tables_and_versions_raise(tmp_path):
    with pytest.raises(ValueError, match="no rows"):
        write_table([], tmp_path / "e.csv", {})
    with pytest.raises(ValueError, match="columns"):
        write_table([{"a": 1}, {"b": 2}], tmp_path / "e.csv", {})
    with pytest.raises(ValueError, match="kind"):
        write_table([{"a": 1}], tmp_path / "e.csv", {}, kind="guess")
    write_table([{"a": 1}], tmp_path / "v.csv", {})
    meta = json.loads((tmp_path / "v.json").read_text())
    (tmp_path / "v.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99"):
        read_meta(tmp_path / "v.csv")
    with pytest.raises(FileNotFoundError):
        read_table(tmp_path / "missing.csv")


def test_version_1_tables_are_read_with_inferred_types(tmp_path):
    (tmp_path / "old.csv").write_text("k,x,s\n1,0.5,a\n2,1.5,b\n")
    (tmp_path / "old.json").write_text(json.dumps({"format_version": 1, "columns": ["k", "x", "s"]}))
    df = read_table(tmp_path / "old.csv")
    assert df["k"].dtype == "int64" and df["x"].dtype == "float64" and df["s"].tolist() == ["a", "b"]


def test_atomic_writes_leave_the_old_file_on_error(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write(target, lambda f: f.write("old"))

    def boom(f):
        f.write("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]   # no temp file left
    with atomic_path(tmp_path / "b.bin") as tmp:
        tmp.write_bytes(b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


def test_paths_resolve_from_the_repository_root_whatever_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.resolve("data/results") == paths.RESULTS_DIR
    assert paths.resolve(tmp_path / "x") == tmp_path / "x"
    assert (paths.ROOT / "specdec" / "io" / "paths.py").is_file()
    assert paths.MODELS_DIR == paths.ROOT / "data" / "models"


def test_provenance_records_load_models_and_hardware():
    p = provenance({"K": 4}, seed=3, models={"target/model.safetensors": "ab" * 32})
    assert p["seed"] == 3 and p["parameters"] == {"K": 4} and p["models_sha256"]["target/model.safetensors"]
    assert len(p["load_average"]) == 3 and p["hardware"]["cpu_count"] >= 1


def test_written_files_get_the_usual_mode_not_mkstemps_0600(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "m.txt", lambda f: f.write("x"))
    finally:
        os.umask(umask)
    assert (tmp_path / "m.txt").stat().st_mode & 0o777 == 0o644


def test_run_differences_names_each_mismatch():
    from specdec.io.results import run_differences

    shared = {"k": "K", "seed": "SEED"}
    assert run_differences({"k": 4, "seed": 1, "checksum": "ab"}, {"K": 4, "SEED": 1}, shared, "ab") == {}
    assert run_differences({"k": 4, "seed": 1, "checksum": "ab"}, {"K": 2, "SEED": 1}, shared, "ab") == {"k": (4, 2)}
    assert run_differences({"k": 4, "checksum": "ab"}, {"K": 4, "SEED": 1}, shared, "ab") == {"seed": (None, 1)}
    assert run_differences({"k": 4, "seed": 1, "checksum": "ab"}, {"K": 4}, shared, "ab") == {"seed": (1, None)}
    assert run_differences({"k": 4, "seed": 1, "checksum": "ab"}, {"K": 4, "SEED": 1}, shared, "cd") == \
        {"checksum": ("ab", "cd")}
    assert run_differences({"k": 4, "seed": 1, "checksum": "ab", "smoke": True}, {"K": 4, "SEED": 1}, shared,
                           "ab") == {"smoke": (True, False)}
