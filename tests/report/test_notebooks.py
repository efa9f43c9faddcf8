"""The chapters: committed clean and thin, recomputed in SMOKE mode, rendered from the committed
results as `make book` does (also from notebooks/ as the working directory), and the book built
from them with warnings as errors: no code, warnings or local paths on a page, every figure shown,
math typeset offline.  The executed chapters and the book are conftest.py's session fixtures."""

import ast
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "notebooks"))
import run  # noqa: E402  (notebooks/run.py)

# `make test` runs pytest -n 2 --dist loadgroup: the chapters rendered once and the one book they
# make (session fixtures) stay on one worker with every test that reads them (group "book"); each
# SMOKE recompute is a test of its own, spread over the workers
BOOK = pytest.mark.xdist_group("book")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FORBIDDEN_ON_PAGES = [r"/work/", r"/tmp/", r"/home/", r"\.venv", r"site-packages", r"Traceback",
                      r"Warning:", r"UserWarning", r"DeprecationWarning", r"FutureWarning", r"tqdm", r"<IPython\.",
                      r"object at 0x"]


def logic_in(source: str) -> list[str]:
    """What in a notebook's code belongs to the library: a loop, a comprehension, `.groupby`,
    `.iloc` (a chapter presents: calls into specdec, glue, show). IPython magics are skipped."""
    tree = ast.parse("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()))
    found = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            found.append(f"line {n.lineno}: a loop")
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            found.append(f"line {n.lineno}: a comprehension")
        elif isinstance(n, ast.Attribute) and n.attr in ("groupby", "iloc"):
            found.append(f"line {n.lineno}: .{n.attr}")
    return found


def test_the_logic_check_catches_each_form_and_passes_calls():
    assert logic_in("x = lib.table(a)\nch.glue('x', x.loc['a', 'b'])\n%matplotlib inline") == []
    planted = ["for r in rows:\n    pass", "while x:\n    break", "y = [r for r in rows]",
               "y = {k: v for k, v in d.items()}", "y = sum(r for r in rows)", "df.groupby('a').size()",
               "df.iloc[0]"]
    assert all(len(logic_in(src)) == 1 for src in planted)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean_and_thin(nb):
    data = json.loads(nb.read_text())
    cells = data["cells"]
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# "), \
        "a notebook opens with a markdown title"
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    tree = ast.parse("".join(params[0]["source"]))
    for stmt in tree.body:  # literals only: everything else belongs after the parameters cell
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name), \
            f"parameters cell holds a non-assignment: {ast.unparse(stmt)}"
        assert stmt.targets[0].id.isupper(), f"parameter {stmt.targets[0].id} is not UPPERCASE"
        ast.literal_eval(stmt.value)
    declared = run.declared_parameters(nb)
    assert {"SMOKE", "RECOMPUTE", "RESULTS_DIR"} <= declared, f"parameters cell lacks SMOKE/RECOMPUTE/RESULTS_DIR"
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), "committed with outputs"
    assert not any("pip install" in "".join(c["source"]) for c in cells), "installs packages"
    assert data["metadata"]["kernelspec"]["name"] == "python3"
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert not logic_in(code), f"logic that belongs in specdec: {logic_in(code)}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_results_are_a_full_run_with_provenance(nb):
    """What the book renders: a non-SMOKE recompute, every table typed and of a stated kind, and the
    models' sha256 recorded wherever models were loaded."""
    d = ROOT / "data" / "results" / nb.stem
    chapter = json.loads((d / "chapter.json").read_text())
    assert chapter["parameters"]["SMOKE"] is False and chapter["parameters"]["RECOMPUTE"] is True
    assert set(chapter["parameters"]) == run.declared_parameters(nb) - {"SMOKE_SIZES"}, \
        "the recorded parameters are exactly the parameters cell's (no imported constant among them)"
    for sidecar in d.glob("*.json"):
        if sidecar.name in ("chapter.json", "values.json", "run.json"):
            continue
        meta = json.loads(sidecar.read_text())
        assert meta["format_version"] == 2 and meta["kind"] in ("exact", "sampled", "timing"), sidecar.name
        assert set(meta["dtypes"]) == set(meta["columns"]), sidecar.name
    if "DEVICE" in chapter["parameters"] and nb.stem != "07_gpu_decoding":  # chapters that load models
        assert chapter["models_sha256"], f"{nb.stem} loaded models but recorded no sha256"


FIGURE_DIRECTIVE = re.compile(r"```\{glue:figure\} fig_(\w+)\n:name: (fig-[\w-]+)\n(.*?)```", flags=re.S)
DOWNLOAD = re.compile(r"\{download\}`[^<`]+<([^>]+)>`")


def figure_placements(cells) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The names a notebook passes to ``ch.figure(fig, "name")`` without a caption and data file of
    its own, and its ``{glue:figure}`` directives (name -> (label, caption))."""
    calls = [node for c in cells if c["cell_type"] == "code" for node in ast.walk(ast.parse("".join(c["source"])))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "figure" and len(node.args) == 2
             and isinstance(node.args[1], ast.Constant)]
    # a figure drawn only when its data exist is placed by the code, from a computed caption and its data file
    made = [n.args[1].value for n in calls if not {"caption", "data"} <= {k.arg for k in n.keywords}]
    placed = {m.group(1): (m.group(2), m.group(3)) for c in cells if c["cell_type"] == "markdown"
              for m in FIGURE_DIRECTIVE.finditer("".join(c["source"]))}
    return made, placed


def figure_problems(cells, notebooks_dir: Path = ROOT / "notebooks") -> list[str]:
    """Every figure a chapter makes is placed once as a numbered figure whose caption states
    something (not only a title) and links an existing data file."""
    made, placed = figure_placements(cells)
    problems = [f"{n}: made but not placed with a glue:figure directive" for n in made if n not in placed]
    problems += [f"{n}: placed but never made" for n in placed if n not in made]
    for name, (label, caption) in placed.items():
        links = DOWNLOAD.findall(caption)
        if not links:
            problems.append(f"{name}: caption links no data file")
        problems += [f"{name}: links {t}, which does not exist" for t in links if not (notebooks_dir / t).resolve().is_file()]
        words = re.sub(r"\{download\}`[^`]*`", "", caption).split()
        if len(words) < 12:
            problems.append(f"{name}: a caption of {len(words)} words states no finding")
    return problems


def test_figure_check_catches_an_unplaced_figure_and_a_caption_without_data():
    code = {"cell_type": "code", "source": 'ch.figure(plotting.a(df), "a")\nch.figure(plotting.b(df), "b")'}
    md = {"cell_type": "markdown", "source": "```{glue:figure} fig_a\n:name: fig-a\n\nAxes only.\n```"}
    problems = figure_problems([code, md])
    assert any("b: made but not placed" in p for p in problems)
    assert any("a: caption links no data file" in p for p in problems)
    assert any("states no finding" in p for p in problems)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_numbered_with_a_finding_and_its_data(nb):
    assert figure_problems(json.loads(nb.read_text())["cells"]) == []


@pytest.fixture(scope="session")
def smoke_kernel():
    """One kernel per test worker for the SMOKE recomputes (`run.SharedKernel`: each chapter starts
    from an emptied namespace; the kernel's start and the library's imports are paid once per worker,
    not once per chapter).  `make reproduce` recomputes each chapter in a kernel of its own."""
    with run.SharedKernel() as kernel:
        yield kernel


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_recomputes_in_smoke_mode(nb, tmp_path, smoke_kernel):
    """Each chapter recomputed in SMOKE mode; the summary chapters read the committed results of the
    others, as `make book` does."""
    params = {"SMOKE": True, "RECOMPUTE": True, "RESULTS_DIR": str(tmp_path / "results" / nb.stem)}
    run.execute(nb, tmp_path / nb.name, params, run.run_key(nb, params), kernel=smoke_kernel)  # raises with the failing cell
    run.record_run(nb, params, 1.0)
    assert (tmp_path / "results" / nb.stem / "chapter.json").exists()
    assert not _stderr(tmp_path / nb.name), "warnings in the executed chapter (the book hides stderr; fix them instead)"


@BOOK
def test_the_book_group_shares_one_worker(request):
    """The chapters are rendered once only if every test of the book's group runs on one worker:
    under --dist loadgroup pytest-xdist marks a grouped test's node id with its group, and a pytest
    that drops the mark (9.x with xdist 3.8) spreads the group and renders everything per worker."""
    if not getattr(request.config.option, "loadgroup", False):  # set on an xdist worker under --dist loadgroup
        pytest.skip("not an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@book"), request.node.nodeid


@BOOK
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_renders_from_committed_results(rendered, nb):
    out, failures = rendered
    assert nb.stem not in failures, failures.get(nb.stem)
    assert not _stderr(out / nb.name), "warnings in the rendered chapter"


@BOOK
def test_chapter_10s_verdict_tables_are_on_the_page(rendered):
    """The tables that carry chapter 10's conclusion are read on the page, never only linked: a
    selection wider or longer than a page allows shows only a CSV link (`table_text`)."""
    out, failures = rendered
    assert "10_engines" not in failures, failures.get("10_engines")
    cells = json.loads((out / "10_engines.ipynb").read_text())["cells"]
    shown = "".join(str(o.get("data", {}).get("text/markdown", "")) for c in cells for o in c.get("outputs", []))
    assert "Full table: " not in shown
    assert shown.count("| verdict |") >= 2, "the law tables of vLLM and of the other engines"


def test_a_chapter_run_from_the_notebooks_folder_writes_and_reads_under_the_repository(tmp_path):
    """JupyterLab starts kernels in notebooks/: a relative RESULTS_DIR must still mean the repository's
    folder, when writing (recompute) and when reading back (render)."""
    nb = ROOT / "notebooks" / "03_cost_model.ipynb"
    rel = "build/test-cwd/03_cost_model"
    shutil.rmtree(ROOT / rel, ignore_errors=True)
    for params in ({"RECOMPUTE": True, "SMOKE": True, "RESULTS_DIR": rel}, {"RECOMPUTE": False, "RESULTS_DIR": rel}):
        run.execute(nb, tmp_path / nb.name, params, "test", cwd=ROOT / "notebooks")
        assert "image/png" in (tmp_path / nb.name).read_text()
    assert (ROOT / rel / "chapter.json").exists() and (ROOT / rel / "speed_ratio_vs_alpha.csv").exists()
    assert not (ROOT / "notebooks" / "build").exists() and not (ROOT / "notebooks" / "data").exists()
    shutil.rmtree(ROOT / rel)


def test_a_shared_kernel_shows_each_chapter_a_fresh_kernels_state(tmp_path, monkeypatch):
    """Renders share one kernel (`run.SharedKernel`): a chapter that leaves a name, a pandas option
    and another working directory behind shows none of them to the next.  The control: without the
    reset cell the second notebook sees the first's state and fails."""
    import nbformat

    first = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, pandas as pd\nLEFT = 1\npd.set_option('display.max_colwidth', 7)\nos.chdir('/')")])
    second = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, pandas as pd\nassert 'LEFT' not in globals(), 'a name left behind'\n"
        f"assert pd.get_option('display.max_colwidth') == 50 and os.getcwd() == {str(ROOT)!r}")])
    for nb in (first, second):
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    paths = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]
    for nb, path in zip((first, second), paths):
        nbformat.write(nb, path)

    def render_both():
        with run.SharedKernel() as kernel:
            for path in paths:
                run.execute(path, tmp_path / f"out-{path.name}", {}, "test", kernel=kernel)

    render_both()
    monkeypatch.setattr(run, "_FRESH", "pass")
    with pytest.raises(Exception, match="a name left behind"):
        render_both()


def _stderr(executed: Path) -> list[str]:
    cells = json.loads(executed.read_text())["cells"]
    return [o["text"][:300] for c in cells if c["cell_type"] == "code" for o in c["outputs"]
            if o.get("output_type") == "stream" and o.get("name") == "stderr"]


def test_runner_resumes_on_hash_not_on_existence(tmp_path):
    nb = ROOT / "notebooks" / "03_cost_model.ipynb"
    params = {"SMOKE": True}
    key = run.run_key(nb, params)
    fake = tmp_path / nb.name
    fake.write_text(json.dumps({"metadata": {"specdec": {"run_key": "stale"}}}))
    assert run.stored_key(fake) == "stale" != key          # present but stale: re-run
    assert run.run_key(nb, {"SMOKE": False}) != key          # parameters are part of the key
    assert run.stored_key(tmp_path / "missing.ipynb") is None


def test_a_recompute_of_every_chapter_leaves_chapter_10_to_make_engines():
    """`make reproduce` (no --only) leaves the chapters with a target of their own; `make engines`
    (--only 10) runs chapter 10; a render (`make book`) and `make replicate` (--only 06) are as asked."""
    every, left = run.select("", recompute=True)
    assert [nb.stem for nb in left] == ["10_engines"] and "10_engines" not in [nb.stem for nb in every]
    assert len(every) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))) - 1
    assert [nb.stem for nb in run.select("10", recompute=True)[0]] == ["10_engines"]
    assert run.select("", recompute=False)[1] == [] and len(run.select("", recompute=False)[0]) == len(every) + 1
    assert [nb.stem for nb in run.select("06", recompute=True)[0]] == ["06_measured_decoding"]
    with pytest.raises(SystemExit, match="no notebooks/NN_"):
        run.select("42", recompute=True)


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


def page_text(html: str) -> str:
    """What a reader sees: the page without scripts, styles and tags."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return re.sub(r"<[^>]+>", " ", html)


def test_external_load_check_catches_a_cdn_script():
    page = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js"></script>' \
           '<link rel="stylesheet" href="//fonts.example/x.css"><script src="_static/a.js"></script>'
    assert external_loads(page) == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js", "//fonts.example/x.css"]


def test_page_check_catches_a_local_path_and_a_warning():
    page = "<p>loaded /work/main/.venv/lib/x.py</p><pre>UserWarning: tqdm</pre><script>var a='/tmp/'</script>"
    found = [p for p in FORBIDDEN_ON_PAGES if re.search(p, page_text(page))]
    assert {r"/work/", r"\.venv", r"UserWarning", r"tqdm"} <= set(found) and r"/tmp/" not in found


@BOOK
def test_book_loads_nothing_from_outside(book):
    html_dir, _ = book
    pages = list(html_dir.rglob("*.html"))
    assert pages
    bad = {str(p.relative_to(html_dir)): external_loads(p.read_text()) for p in pages}
    assert not {k: v for k, v in bad.items() if v}
    assert (html_dir / "mathjax" / "MathJax.js").exists()
    assert (html_dir / "mathjax" / "config" / "TeX-AMS-MML_HTMLorMML-full.js").exists()


@BOOK
def test_pages_read_like_a_report(book):
    """No code, warnings, tracebacks or local paths on any page; every chapter page has no code cell input."""
    html_dir, _ = book
    for page in html_dir.rglob("*.html"):
        html = page.read_text()
        text = page_text(html)
        found = [p for p in FORBIDDEN_ON_PAGES if re.search(p, text)]
        assert not found, f"{page.relative_to(html_dir)} shows {found}"
        assert 'class="cell_input' not in html, f"{page.relative_to(html_dir)} shows code"


@BOOK
def test_the_book_reads_in_an_afternoon_and_its_front_page_in_five_minutes(built_html):
    """The rendered book within its length budget (`specdec.report.length`: every token of every
    page's article), the front page within its own."""
    from specdec.report.length import BOOK_WORDS, FRONT_PAGE, FRONT_WORDS, html_count

    pages = html_count(built_html)
    assert FRONT_PAGE in pages and len(pages) >= len(NOTEBOOKS), sorted(pages)
    assert pages[FRONT_PAGE] <= FRONT_WORDS, f"front page: {pages[FRONT_PAGE]} words"
    assert sum(pages.values()) <= BOOK_WORDS, f"{sum(pages.values())} words: {pages}"


@BOOK
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_book_chapter_shows_every_figure(book, nb):
    html_dir, executed_dir = book
    page = html_dir / "notebooks" / f"{nb.stem}.html"
    assert page.exists()
    cells = json.loads((executed_dir / nb.name).read_text())["cells"]
    n_images = sum(any(k.endswith("image/png") for k in o.get("data", {}))  # displayed or glued (ch.figure)
                   for c in cells if c["cell_type"] == "code" for o in c["outputs"])
    refs = _Refs()
    refs.feed(page.read_text())
    shown = [s for s in refs.imgs if (page.parent / s).resolve().is_file()]
    assert len(shown) >= n_images, f"{n_images} figures in the notebook, {len(shown)} shown on the page"


@BOOK
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
