"""The dry run of `make gpu`'s offline wheel path on CPU: `make gpu-wheels` (run by `make test`
before the tests) fills build/gpu-wheels from requirements-gpu.txt; here `make gpu` itself installs
them with no index into a temporary site directory and runs `gpu_bench --device cpu --smoke` on
them, as the GPU machine would with its own torch.  The numbers are not GPU measurements and go to a
temporary folder.

This machine's CPython is not the GPU machine's 3.12, so a compiled wheel built for cp312 (regex)
cannot load here: the dry run installs the wheels this interpreter can load (transformers, pure
Python) and checks the others by name, version and what transformers requires of them."""

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

from specdec.io.paths import ROOT
from specdec.io.results import read_table

WHEELS = ROOT / "build" / "gpu-wheels"


def _pins() -> dict:
    lines = (ROOT / "requirements-gpu.txt").read_text().splitlines()
    reqs = [Requirement(x) for x in (ln.split("#")[0].strip() for ln in lines) if x]
    return {r.name: str(r.specifier).removeprefix("==") for r in reqs}


def _wheels() -> dict:
    return {str(parse_wheel_filename(w.name)[0]): w for w in sorted(WHEELS.glob("*.whl"))}


def test_gpu_pins_follow_the_project_and_transformers_requirements():
    """requirements-gpu.txt pins transformers at environment.yml's version, exactly."""
    pins = _pins()
    env = re.search(r"transformers==([\w.]+)", (ROOT / "environment.yml").read_text()).group(1)
    assert pins["transformers"] == env and set(pins) == {"transformers", "regex"}


@pytest.fixture(scope="module")
def wheels():
    found = _wheels()
    if not found:
        pytest.skip(f"no wheels in {WHEELS}: `make gpu-wheels` (run by `make test`) could not download them")
    return found


def test_the_wheel_set_is_the_pinned_one_and_meets_transformers_requirements(wheels):
    pins = _pins()
    assert {n: str(parse_wheel_filename(w.name)[1]) for n, w in wheels.items()} == pins
    assert sum(w.stat().st_size for w in wheels.values()) < 32 * 2**20  # travels with the tree (64 MiB in all)
    with zipfile.ZipFile(wheels["transformers"]) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    needs = {r.name: r for r in (Requirement(x) for x in re.findall(r"^Requires-Dist: (.+)$", meta, re.M))
             if not r.marker}
    assert needs["regex"].specifier.contains(pins["regex"])  # what transformers checks at import
    for name, w in wheels.items():  # every wheel loads on CPython 3.12 x86-64 Linux (the GPU machine)
        tags = parse_wheel_filename(w.name)[3]
        assert any(t.interpreter in ("py3", "cp312") and t.platform == "any" or
                   (t.interpreter == "cp312" and "x86_64" in t.platform) for t in tags), (name, tags)


def test_make_gpu_installs_the_wheels_offline_and_runs_on_them(wheels, tmp_path):
    here = {str(t) for t in sys_tags()}
    local = tmp_path / "wheels"
    local.mkdir()
    for w in wheels.values():  # the wheels this interpreter can load (module docstring)
        if any(str(t) in here for t in parse_wheel_filename(w.name)[3]):
            (local / w.name).symlink_to(w)
    assert (local / wheels["transformers"].name).exists()
    out, site = tmp_path / "gpu", tmp_path / "site"
    proc = subprocess.run(["make", "--no-print-directory", "gpu", "ENV=system", f"PYTHON={sys.executable}",
                           f"GPU_WHEELS={local}", f"GPU_SITE={site}", f"GPU_OUT={out}", "GPU_DEVICE=cpu",
                           "GPU_ARGS=--smoke --budget-s 300 --modes eager"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "installed into" in proc.stdout and (site / "transformers").is_dir()
    for name in ("cost_curve", "controlled", "batch", "run_summary"):
        env = read_table(out / f"{name}.csv").attrs["meta"]["provenance"]["gpu_environment"]
        assert env["transformers"] == _pins()["transformers"], env
        assert env["transformers_source"] == "PYTHONPATH (make gpu's wheels)", env
        assert env["device"] == "cpu"


def test_make_gpu_without_wheels_runs_on_the_environments_own(tmp_path):
    """No wheel folder: the machine's own transformers, and provenance says so."""
    out = tmp_path / "gpu"
    proc = subprocess.run(["make", "--no-print-directory", "gpu", "ENV=system", f"PYTHON={sys.executable}",
                           f"GPU_WHEELS={tmp_path / 'none'}", f"GPU_OUT={out}", "GPU_DEVICE=cpu",
                           "GPU_ARGS=--smoke --budget-s 300 --modes eager"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no wheels in" in proc.stdout
    env = read_table(out / "run_summary.csv").attrs["meta"]["provenance"]["gpu_environment"]
    assert env["transformers_source"] == "the environment's own" and env["transformers"]
