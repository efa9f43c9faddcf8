"""The chapters executed and the book built once per test session, shared by every test module
that reads them (test_notebooks: the chapters and the book; test_rendered_pages: the built pages).

SPECDEC_BUILT_BOOK=<html folder> (e.g. build/book/_build/html after `make book`) lets the page checks
read a book built already instead of building one (`built_html`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "notebooks"))
sys.path.insert(0, str(ROOT / "book"))
import assemble  # noqa: E402  (book/assemble.py)
import run  # noqa: E402  (notebooks/run.py)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def execute_all(out: Path, params_for, kernel=None) -> dict:
    """Execute every notebook into ``out`` with ``params_for(nb)`` (in ``kernel``, a
    `run.SharedKernel`, when given); {stem: error} of the failures."""
    failures = {}
    for nb in NOTEBOOKS:
        params = params_for(nb)
        try:
            run.execute(nb, out / nb.name, params, run.run_key(nb, params), kernel=kernel)
            run.record_run(nb, params, 1.0)
        except Exception as exc:  # papermill's error carries the failing cell's traceback
            failures[nb.stem] = str(exc)
    return failures


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """Render every notebook from the committed results in one shared kernel, as `make book` does
    (run.json untouched: record_run writes only after a recompute)."""
    out = tmp_path_factory.mktemp("rendered")
    with run.SharedKernel() as kernel:
        return out, execute_all(out, lambda nb: {"RECOMPUTE": False}, kernel)


@pytest.fixture(scope="session")
def book(rendered, tmp_path_factory):
    out, failures = rendered
    if failures:
        pytest.fail(f"notebooks failed to render, no book: {sorted(failures)}")
    src = tmp_path_factory.mktemp("book")
    assemble.assemble(out, src)
    proc = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(src), "-W",
                           "--keep-going", "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"book build failed (warnings are errors):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return src / "_build" / "html", out


@pytest.fixture(scope="session")
def built_html(request) -> Path:
    """The built book's HTML folder: SPECDEC_BUILT_BOOK if set, else the session's `book`."""
    given = os.environ.get("SPECDEC_BUILT_BOOK")
    if given:
        path = Path(given) if Path(given).is_absolute() else ROOT / given
        if not list(path.rglob("*.html")):
            pytest.fail(f"SPECDEC_BUILT_BOOK={given}: no built pages there (run `make book` first)")
        return path
    return request.getfixturevalue("book")[0]
