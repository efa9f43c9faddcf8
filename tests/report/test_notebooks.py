"""Every notebook executes with papermill in SMOKE mode; the book builds from them with warnings
as errors, loads no script from outside itself, shows every figure, and typesets its math."""

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "notebooks"))
sys.path.insert(0, str(ROOT / "book"))
import assemble  # noqa: E402  (book/assemble.py)
import run  # noqa: E402  (notebooks/run.py)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(nb):
    data = json.loads(nb.read_text())
    cells = data["cells"]
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# "), \
        "a notebook opens with a markdown title"
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    declared = run.declared_parameters(nb)
    assert {"SMOKE", "RESULTS_DIR"} <= declared, f"parameters cell lacks SMOKE/RESULTS_DIR: {declared}"
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), "committed with outputs"
    assert not any("pip install" in "".join(c["source"]) for c in cells), "installs packages"
    assert data["metadata"]["kernelspec"]["name"] == "python3"


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """Execute every notebook once (SMOKE=True, results to a temp dir); remember failures."""
    out = tmp_path_factory.mktemp("executed")
    failures = {}
    for nb in NOTEBOOKS:
        params = {"SMOKE": True, "RESULTS_DIR": str(out / "results" / nb.stem)}
        try:
            run.execute(nb, out / nb.name, params, run.run_key(nb, params))
        except Exception as exc:  # papermill's error carries the failing cell's traceback
            failures[nb.stem] = str(exc)
    return out, failures


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_in_smoke_mode(executed, nb):
    out, failures = executed
    assert nb.stem not in failures, failures.get(nb.stem)
    assert (out / nb.name).exists()


def test_runner_resumes_on_hash_not_on_existence(tmp_path):
    nb = NOTEBOOKS[0]
    params = {"SMOKE": True}
    key = run.run_key(nb, params)
    fake = tmp_path / nb.name
    fake.write_text(json.dumps({"metadata": {"specdec": {"run_key": "stale"}}}))
    assert run.stored_key(fake) == "stale" != key          # present but stale: re-run
    assert run.run_key(nb, {"SMOKE": False}) != key          # parameters are part of the key
    assert run.stored_key(tmp_path / "missing.ipynb") is None


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.links, self.imgs = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        elif tag == "link" and a.get("href") and "stylesheet" in (a.get("rel") or ""):
            self.links.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.imgs.append(a["src"])


def external_loads(html: str) -> list[str]:
    """Scripts and stylesheets a page would fetch from outside the book."""
    refs = _Refs()
    refs.feed(html)
    return [u for u in refs.scripts + refs.links if re.match(r"^([a-z]+:)?//", u, flags=re.I)]


def test_external_load_check_catches_a_cdn_script():
    page = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js"></script>' \
           '<link rel="stylesheet" href="//fonts.example/x.css"><script src="_static/a.js"></script>'
    assert external_loads(page) == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js", "//fonts.example/x.css"]


@pytest.fixture(scope="session")
def book(executed, tmp_path_factory):
    out, failures = executed
    if failures:
        pytest.fail(f"notebooks failed, no book: {sorted(failures)}")
    src = tmp_path_factory.mktemp("book")
    assemble.assemble(out, src)
    proc = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(src), "-W",
                           "--keep-going", "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"book build failed (warnings are errors):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return src / "_build" / "html", out


def test_book_loads_nothing_from_outside(book):
    html_dir, _ = book
    pages = list(html_dir.rglob("*.html"))
    assert pages
    bad = {str(p.relative_to(html_dir)): external_loads(p.read_text()) for p in pages}
    assert not {k: v for k, v in bad.items() if v}
    assert (html_dir / "mathjax" / "MathJax.js").exists()
    assert (html_dir / "mathjax" / "config" / "TeX-AMS-MML_HTMLorMML-full.js").exists()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_book_chapter_shows_every_figure(book, nb):
    html_dir, executed_dir = book
    page = html_dir / "notebooks" / f"{nb.stem}.html"
    assert page.exists()
    cells = json.loads((executed_dir / nb.name).read_text())["cells"]
    n_images = sum("image/png" in o.get("data", {}) for c in cells if c["cell_type"] == "code" for o in c["outputs"])
    refs = _Refs()
    refs.feed(page.read_text())
    shown = [s for s in refs.imgs if (page.parent / s).resolve().is_file()]
    assert len(shown) >= n_images, f"{n_images} figures in the notebook, {len(shown)} shown on the page"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium) — render check skipped")
def test_cost_model_math_typesets_in_a_browser(book):
    html_dir, _ = book
    page = html_dir / "notebooks" / "03_cost_model.html"
    # MathJax typesets asynchronously and headless chromium dumps the DOM when the page's load ends
    # or the timeout stops it, whichever comes first: a race, seen to give 0-75 typeset formulas for
    # the same page. So try several timeouts and fail only if MathJax never typesets the page.
    for wait_ms in (12000, 20000, 8000, 30000, 12000):
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={html_dir.parent / 'chromium-profile'}", f"--timeout={wait_ms}", "--dump-dom",
             page.as_uri()],
            capture_output=True, text=True, timeout=wait_ms / 1000 + 120)
        dom = proc.stdout
        assert "speed_ratio" in dom or "Speed ratio" in dom, "page did not load"
        typeset = len(re.findall(r'class="MathJax[ "_]', dom))
        raw = re.findall(r'<span class="math notranslate nohighlight">\\\(', dom)
        if typeset > 10 and not raw:
            break
    assert typeset > 10 and not raw, f"{typeset} typeset formulas, {len(raw)} left as raw TeX"
