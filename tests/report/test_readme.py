"""The README is the front door: rendered from committed results (never typed), short, and its
quick start runs as printed."""
import re
import subprocess
import sys

import pytest

import specdec
from specdec.cli import readme


def test_readme_is_the_rendering_of_its_template_from_the_committed_results():
    assert readme.README.read_text() == readme.render(readme.TEMPLATE.read_text(), readme.committed_values()), \
        "README.md is stale or edited by hand: edit README.in.md and run make readme"


def test_readme_is_short():
    assert len(readme.README.read_text().splitlines()) <= 120


def test_render_refuses_a_missing_value_a_bad_spec_and_a_typed_number():
    values = {"speed": {"best": 1.25, "name": "k=2"}}
    assert readme.render("best {{speed.best:.1f}}, {{ speed.name }}", values).endswith("best 1.2, k=2")
    with pytest.raises(KeyError, match=r"speed\.worst"):
        readme.render("{{speed.worst}}", values)
    with pytest.raises(ValueError, match=r"speed\.name"):
        readme.render("{{speed.name:.2f}}", values)
    for typed in ("runs 1.2x faster", "a 5% gain", "1.25 [1.10, 1.40]"):
        with pytest.raises(ValueError, match="typed"):
            readme.render(typed, values)
    # levels, code and placeholders are not typed measurements
    assert readme.typed_numbers("95% intervals; `1.2x` in code; ```\n3%\n``` {{speed.best:.2f}}x") == []


def test_the_package_docstring_names_the_trusted_path_of_the_readme():
    section = specdec.__doc__.split("The trusted path")[1].split("Everything else")[0]
    named = set(re.findall(r"`(specdec(?:\.[a-z_]+){2,})`", section))
    assert named == {m for mods in readme.TRUSTED.values() for m in mods}


def test_quick_start_runs_as_printed(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", readme.README.read_text(), re.S)
    assert len(blocks) == 1
    script = tmp_path / "quick_start.py"
    script.write_text(blocks[0])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    gap = float(re.search(r"max \|law - target law\| over 3 tokens: (\S+)", out.stdout).group(1))
    assert gap < 1e-12
    assert "drafts accepted per step" in out.stdout
