"""Chapter 10's reproducers: one script per rejected vLLM or Hugging Face speculative configuration
(none for one that passes, for a control or for an instrument), stale ones removed, and the
Hugging Face script run for real on the embedded pair (small n: it must run and print both
total-variation lines; the committed scripts use n = 2000)."""

import py_compile
import re
import subprocess
import sys

import pandas as pd

from specdec.chapters.ch10 import audit
from specdec.chapters.ch10.repro import write_reproducers
from specdec.io.paths import MODELS_DIR

DRAFT = "draft-distilled"


def _laws(rejected):
    rows = []
    for c in audit.plan(2, DRAFT):
        rows.append({"engine": c.engine, "configuration": c.label, "setting": "temperature 1",
                     "status": "reject" if (c.engine, c.label) in rejected else "pass"})
    return pd.DataFrame(rows)


def test_rejected_configurations_get_scripts_that_run(tmp_path):
    folder = tmp_path / "data" / "results" / "10_engines"  # the committed layout: the script finds the models
    folder.mkdir(parents=True)
    (tmp_path / "data" / "models").symlink_to(MODELS_DIR)
    (folder / "reproduce_vllm_stale.py").write_text("stale")
    rejected = {("hf", "prompt lookup"), ("vllm", "draft model, k = 2 (defaults)"), ("ours", "plain decoding"),
                ("vllm", "draft model, k = 2, synthetic acceptance 0.8 (an instrument)")}
    paths = write_reproducers(_laws(rejected), audit.plan(2, DRAFT), [348, 891, 452, 264, 348, 891], folder, n=40)
    assert sorted(p.name for p in paths) == ["reproduce_hf_prompt_lookup.py", "reproduce_vllm_draft_model_k_2_defaults.py"]
    assert sorted(p.name for p in folder.glob("*.py")) == sorted(p.name for p in paths)  # the stale one is gone
    for p in paths:
        py_compile.compile(str(p), cfile=str(tmp_path / (p.name + "c")), doraise=True)
    hf = folder / "reproduce_hf_prompt_lookup.py"
    assert "prompt_lookup_num_tokens': 2" in hf.read_text()
    out = subprocess.run([sys.executable, str(hf)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    tvs = [float(x) for x in re.findall(r"TV\(second token\), plain vs [^:]*:\s+([0-9.]+)", out.stdout)]
    assert len(tvs) == 2 and all(0 <= t <= 1 for t in tvs)
    assert write_reproducers(_laws(set()), audit.plan(2, DRAFT), [1, 2], folder) == [] and not list(folder.glob("*.py"))
