"""specdec.cli.gpu_bench on CPU with --smoke: the code path that runs on the GPU machine, on tiny
configs.  These numbers are not GPU measurements and are written only to a temp folder."""

import json

import pytest
import torch

from specdec.family.architectures import build_model, llama_config, param_count, real_size_config
from specdec.measure import gpu_sections
from specdec.cli import gpu_bench
from specdec.io.results import read_table


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu")
    rc = gpu_bench.main(["--out", str(out), "--device", "cpu", "--smoke", "--budget-s", "300", "--modes", "eager"])
    return rc, out


def test_smoke_run_writes_tidy_tables_with_provenance(smoke_run):
    rc, out = smoke_run
    assert rc == 0
    for name in ("cost_curve", "controlled", "batch", "run_summary"):
        df = read_table(out / f"{name}.csv")
        meta = df.attrs["meta"]
        assert len(df), name
        env = meta["provenance"]["gpu_environment"]
        assert env["device"] == "cpu" and env["torch"] == torch.__version__ and env["date_utc"]
        assert meta["provenance"]["parameters"]["smoke"] is True and meta["kind"] == "timing"
    ctrl = read_table(out / "controlled.csv")
    assert set(ctrl["pair"]) == {"gpt2-medium/draft-3m", "llama-8b/llama-1b"}
    spec = ctrl[ctrl["k"] != 0]
    assert len(spec) and (spec["predicted_speedup"] > 0).all() and (spec["tokens_per_s_total"] > 0).all()
    assert set(read_table(out / "cost_curve.csv")["n"]) == {1, 2, 3}


def test_missing_cuda_writes_nothing(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert gpu_bench.main(["--out", str(tmp_path / "g"), "--device", "cuda"]) == 2
    assert not (tmp_path / "g").exists()
    assert "CUDA is not available" in capsys.readouterr().err


def test_pair_acceptance_on_a_tiny_pair():
    g = torch.Generator().manual_seed(0)
    t = build_model(real_size_config("gpt2-small", n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=128),
                    generator=g)
    d = build_model(real_size_config("draft-3m", n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=128),
                    generator=g)

    class A:
        smoke, seed = True, 0

    rows = gpu_sections.pair_acceptance("tiny", t, d, torch.randint(0, 64, (1, 8), generator=g), A, torch.device("cpu"),
                                     gpu_bench.Budget(120))
    assert {r["k"] for r in rows} == {0, 2} and all(r["tokens"] == 8 for r in rows)
    assert all(0 <= r["alpha_mle"] <= 1 for r in rows if r["k"])
    assert gpu_bench.Budget(-1).ok("x") is False


def test_llama_configs_have_the_stated_sizes():
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        big = AutoModelForCausalLM.from_config(llama_config("llama-8b"))
        small = AutoModelForCausalLM.from_config(llama_config("llama-1b"))
    assert 7.9e9 < param_count(big) < 8.1e9 and 1.1e9 < param_count(small) < 1.3e9
    json.dumps(gpu_bench.gpu_info(torch.device("cpu")))


def _page(path):
    """The glued status word, all displayed text, and the number of images of an executed notebook."""
    import nbformat

    outs = [o for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    glued = {o["metadata"]["scrapbook"]["name"]: next((v for k, v in o["data"].items() if k.endswith("text/plain")), "")
             for o in outs if "scrapbook" in o.get("metadata", {})}
    shown = "".join("".join(v for v in o.get("data", {}).values() if isinstance(v, str)) for o in outs
                    if "scrapbook" not in o.get("metadata", {}))
    return glued["gpu_status"].strip("'"), shown, sum(any(k.endswith("image/png") for k in o.get("data", {}))
                                                      for o in outs)


def test_chapter_07_labels_non_gpu_tables_and_shows_them(smoke_run, tmp_path):
    """07 reads GPU tables; fed the CPU smoke tables its status is "not from a GPU" and it shows their
    tables (no figure: the protocol page draws none), then renders the same page from its own tables;
    with no GPU tables its status is "none" and it shows none."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "notebooks"))
    import run  # notebooks/run.py

    _, out = smoke_run
    nb = root / "notebooks" / "07_gpu_decoding.ipynb"
    r07 = str(tmp_path / "r07")
    with run.SharedKernel() as kernel:  # one kernel for the three runs (each starts from an emptied namespace)
        run.execute(nb, tmp_path / "07.ipynb", {"RECOMPUTE": True, "RESULTS_DIR": r07, "GPU_RESULTS": str(out)}, "test",
                    kernel=kernel)
        status, shown, images = _page(tmp_path / "07.ipynb")
        assert status == "not from a GPU" and images == 0
        assert "gpu_cost_and_controlled.csv" in shown and "gpu_batch_throughput.csv" in shown and "| section |" in shown
        assert read_table(tmp_path / "r07" / "status.csv")["real_gpu"].tolist() == [False]
        run.execute(nb, tmp_path / "07r.ipynb", {"RECOMPUTE": False, "RESULTS_DIR": r07}, "test", kernel=kernel)
        assert _page(tmp_path / "07r.ipynb") == (status, shown, images)
        run.execute(nb, tmp_path / "07n.ipynb", {"RECOMPUTE": True, "RESULTS_DIR": str(tmp_path / "n07"),
                                                 "GPU_RESULTS": str(tmp_path / "none")}, "test", kernel=kernel)
    status, shown, images = _page(tmp_path / "07n.ipynb")
    assert status == "none" and ".csv" not in shown and images == 0


def test_every_section_checks_the_budget_before_it_builds_or_loads_a_model(tmp_path, monkeypatch):
    """With no budget left nothing is built or loaded (both patched to fail loudly), every section
    is recorded as skipped, and the summary table is still written."""
    def boom(*a, **k):
        raise AssertionError("a model was built or loaded with no budget left")

    monkeypatch.setattr(gpu_sections, "build_model", boom)
    monkeypatch.setattr(gpu_sections, "load_model", boom)
    out = tmp_path / "g"
    assert gpu_bench.main(["--out", str(out), "--device", "cpu", "--smoke", "--budget-s", "0",
                           "--target", "a", "--draft", "b"]) == 0
    s = read_table(out / "run_summary.csv")
    assert (s["status"] == "skipped").all()
    skipped = " ".join(s["section"])
    assert "llama-8b/llama-1b: everything" in skipped and "hub pair a/b: loading" in skipped
    assert "FAILED" not in skipped and "failed" not in skipped


def test_the_compiled_mode_is_measured_apart_and_labelled(tmp_path, monkeypatch):
    """--modes eager,compiled: every real-size pair again through `compiled` (here a stand-in that
    records what it wraps: inductor's compile would take minutes on CPU), after every eager pair,
    labelled "<pair>, compiled" with mode "compiled" in each table, on the smaller grid."""
    from specdec.engine.kv import KVCompat

    wrapped = []

    def fake_compiled(model, *, static=True):
        assert static is False, "the GPU sweep compiles dynamic shapes: a graph per shape would not fit its budget"
        wrapped.append(model)
        return KVCompat(model)

    monkeypatch.setattr(gpu_sections, "compiled", fake_compiled)
    out = tmp_path / "g"
    assert gpu_bench.main(["--out", str(out), "--device", "cpu", "--smoke", "--budget-s", "300",
                           "--modes", "eager,compiled", "--seed", "1"]) == 0
    assert len(wrapped) == 4  # target and draft of both pairs
    for name in ("cost_curve", "controlled", "batch"):
        t = read_table(out / f"{name}.csv")
        assert set(t["mode"]) == {"eager", "compiled"}, name
        assert all(p.endswith(", compiled") == (m == "compiled") for p, m in zip(t["pair"], t["mode"])), name
    ctrl = read_table(out / "controlled.csv")
    assert list(dict.fromkeys(ctrl["mode"])) == ["eager", "compiled"]  # eager first, every pair
    with pytest.raises(SystemExit):
        gpu_bench.main(["--out", str(out), "--device", "cpu", "--modes", "graph"])
