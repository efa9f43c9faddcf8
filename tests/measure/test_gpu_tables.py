"""Chapter 07's reading of the GPU run (specdec.chapters.ch07.gpu_tables): no tables is status "none", smoke
or CPU tables are "not from a GPU", a CUDA run is "measured" and named with its GPU, and the reduced
tables hold what the plots draw (hand-made tables in a temp folder)."""

import math

import pandas as pd
import pytest

from specdec.chapters.ch07 import gpu_tables as gt
from specdec.report import plotting
from specdec.report.plotting import visible_series
from specdec.io.results import provenance, read_table, write_table


def _write(folder, device: str, smoke: bool):
    prov = provenance({"smoke": smoke})
    prov["gpu_environment"] = {"device": device, "date_utc": "2025-01-02T03:04:05+00:00", "torch": "2.x",
                               **({"gpu": "NVIDIA H200", "driver": "550.1", "cuda_runtime": "12.4"}
                                  if device.startswith("cuda") else {})}
    write_table([{"section": "all", "status": "complete", "wall_s": 12.5, "smoke": smoke}], folder / "run_summary.csv",
                prov, kind="timing")
    write_table([{"pair": "a/b", "model": "target", "params": 10, "n": n, "ratio": 1.0 + 0.1 * (n - 1), "c": 0.05}
                 for n in (1, 2, 3)], folder / "cost_curve.csv", prov, kind="timing")
    nan = float("nan")
    ctrl = [{"pair": "a/b", "batch": 1, "config": "baseline", "k": 0, "alpha_set": nan, "predicted_speedup": 1.0,
             "tokens_per_s": t} for t in (10.0, 12.0)]
    ctrl += [{"pair": "a/b", "batch": 1, "config": f"k={k} alpha={a}", "k": k, "alpha_set": a,
              "predicted_speedup": 1.5 * a * k, "tokens_per_s": 22.0 * a * k} for a in (0.5, 0.9) for k in (1, 2)]
    write_table(ctrl, folder / "controlled.csv", prov, kind="timing")
    write_table([{"pair": "a/b", "batch": B, "k": k, "alpha_set": 0.8 if k else nan, "tokens_per_s_total": 10.0 * B}
                 for k in (4, 0) for B in (2, 1)], folder / "batch.csv", prov, kind="timing")
    write_table([{"pair": "e/d", "batch": 1, "k": k, "temperature": 1.0, "prompt": i, "tokens_per_s_total": 5.0 + i,
                  "alpha_mle": nan if k == 0 else 0.6 + 0.1 * i} for k in (0, 2) for i in (0, 1)],
                folder / "embedded.csv", {**prov, "models_sha256": {"target/model.safetensors": "abc"}}, kind="timing")


def test_no_tables(tmp_path):
    tables = gt.read_gpu_tables(tmp_path / "missing")
    assert tables == {} and not gt.is_gpu_run(tables)
    s = gt.status_row(tables, cuda_here=False)
    assert s["gpu_tables"] == "none" and s["real_gpu"] is False and s["cuda_here"] is False
    assert s["status"] == gt.status_word(s) == gt.NONE == "none"


def test_cpu_smoke_tables_are_labelled_not_from_a_gpu(tmp_path):
    _write(tmp_path, "cpu", smoke=True)
    tables = gt.read_gpu_tables(tmp_path)
    assert set(tables) == {"run_summary", "cost_curve", "controlled", "batch", "embedded"}
    s = gt.status_row(tables, cuda_here=True)
    assert s["real_gpu"] is False and s["status"] == gt.NOT_GPU and s["device"] == "cpu"
    assert s["gpu_tables"] == "batch controlled cost_curve embedded run_summary"


def test_a_cuda_run_is_named_and_reduced(tmp_path):
    _write(tmp_path, "cuda", smoke=False)
    tables = gt.read_gpu_tables(tmp_path)
    assert gt.is_gpu_run(tables)
    s = gt.status_row(tables, cuda_here=False)
    assert s["real_gpu"] is True and s["gpu"] == "NVIDIA H200" and s["driver"] == "550.1" and s["status"] == gt.MEASURED
    prov = {r["item"]: r["value"] for r in gt.provenance_rows(tables)}
    assert prov["gpu"] == "NVIDIA H200" and prov["parameter smoke"] == "False" and "package torch" in prov
    assert prov["embedded model target/model.safetensors"] == "abc"
    assert gt.sections(tables) == [{"section": "all", "status": "complete", "wall_s": 12.5}]

    cc = gt.cost_and_controlled(tables)
    curve = [r for r in cc if r["panel"] == "cost_curve"]
    assert [r["measured"] for r in curve] == [1.0, 1.1, 1.2] and all(r["c"] == 0.05 for r in curve)
    ctrl = {(r["k"], r["x"]): r for r in cc if r["panel"] == "controlled"}
    assert ctrl[(2, 0.9)]["measured"] == pytest.approx(22.0 * 0.9 * 2 / 11.0)  # over the median baseline, 11
    assert ctrl[(2, 0.9)]["predicted"] == pytest.approx(1.5 * 0.9 * 2)
    bt = gt.batch_throughput(tables)
    assert [(r["k"], r["batch"]) for r in bt] == [(0, 1), (0, 2), (4, 1), (4, 2)]
    ps = gt.pair_speeds(tables)
    assert [(r["k"], r["runs"]) for r in ps] == [(0, 2), (2, 2)] and math.isnan(ps[0]["alpha_mle"])
    assert ps[1]["alpha_mle"] == pytest.approx(0.65) and ps[1]["tokens_per_s"] == 5.5

    for fig in (plotting.gpu_cost_and_controlled(pd.DataFrame(cc), s["gpu"]),
                plotting.gpu_batch_throughput(pd.DataFrame(bt), s["gpu"])):
        assert visible_series(fig) and all(seen for _, _, seen in visible_series(fig))


def test_the_status_word_reads_a_status_row_as_written_or_as_read_back(tmp_path):
    """The page glues the word from the committed row: booleans may come back as text."""
    assert gt.status_word({"real_gpu": "True", "gpu_tables": "batch"}) == gt.MEASURED
    assert gt.status_word({"real_gpu": "False", "gpu_tables": "batch run_summary"}) == gt.NOT_GPU
    assert gt.status_word(pd.Series({"real_gpu": False, "gpu_tables": "none"})) == gt.NONE
    write_table([gt.status_row({}, cuda_here=False)], tmp_path / "status.csv", {}, kind="exact")
    back = read_table(tmp_path / "status.csv")
    assert gt.status_word(back) == gt.NONE and gt.found(back) == set()
    assert gt.found({"gpu_tables": "batch run_summary"}) == {"batch", "run_summary"}


def test_protocol_values_quote_the_grids_the_run_sweeps():
    from specdec.measure import gpu_sections

    v = gt.protocol_values()
    assert v["k_grid"].split(", ") == [f"{k:g}" for k in gpu_sections.K_GRID]
    assert v["alphas"].split(", ") == [f"{a:g}" for a in gpu_sections.ALPHAS]
    assert v["batches"].split(", ") == [str(b) for b in gpu_sections.BATCHES]
    assert v["compiled_k"].split(", ") == [str(k) for k in gpu_sections.COMPILED_K]
