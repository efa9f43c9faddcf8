"""The built pages read as a report for readers, not as a log of the code that made them.

Each check is a pure function of one page's HTML that returns what it found (empty: clean), with a
planted bad page that must be caught (the negative control) and a clean page that must pass; the last
test applies every check to every page of the built book (conftest's `built_html`: the session's book,
or one built already, SPECDEC_BUILT_BOOK=build/book/_build/html).

What is refused, and why:
- a table header in raw snake_case (``tokens_per_step``): a column name, not a header;
- a pandas index column (a frame displayed as it is: its index is noise to a reader);
- a table wider than `MAX_COLUMNS` (it no longer fits the text column; link its CSV instead);
- a "(s)" plural stub ("thread(s)"): the count is known, so is its plural;
- a bare True/False in the text outside code: a Python value, not a word;
- internal words: "the seed" for the article the report builds on, a re-run's id ("run_F"), and
  "make bench" used as a noun (it is a command; the thing it makes is the engine benchmark);
- an object's repr ("<IPython.core.display.Markdown object>"): a cell displayed something with
  nothing to show, and the page prints Python's fallback text instead.
"""

import re
from html import unescape
from html.parser import HTMLParser

import pytest

# `make test` runs pytest -n 2 --dist loadgroup: the chapters executed once and the one book they make
# (session fixtures) stay on one worker, with every test that reads them
pytestmark = pytest.mark.xdist_group("book")

MAX_COLUMNS = 8  # the pages aim at 7 (formatting.MAX_COLUMNS); 8 is where a table is refused

SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
PLURAL_STUB = re.compile(r"\w\(s\)")
BOOLEAN = re.compile(r"\b(True|False)\b")
INTERNAL = {
    "the seed (name the article)": re.compile(
        r"\bthe seed\b(?!\s*(?:=|\d|value|number|of (?:the|each) (?:generator|run)))", re.I),
    "a run id (run_F)": re.compile(r"\brun_[A-Za-z0-9]+\b"),
    "make bench as a noun": re.compile(
        r"\b(?:the|a|an|this|that|its|each|every|one|committed|last|latest)\s+make bench\b|\bmake bench(?:'s|’s)",
        re.I),
}


def _strip(html: str, *, code: bool) -> str:
    """What a reader sees as text: no scripts, styles or math; code spans removed (``code=False``)
    or kept as their text (``code=True``)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    html = re.sub(r'<(span|div)[^>]*class="[^"]*\bmath\b[^"]*"[^>]*>.*?</\1>', " ", html, flags=re.S)
    if not code:
        html = re.sub(r"<(pre|code)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


class _Tables(HTMLParser):
    """Every table of a page: its classes, its header cells' text (math removed), its widest row,
    and whether a header cell sits in the body (a pandas index)."""

    def __init__(self):
        super().__init__()
        self.tables, self._stack, self._cell, self._row = [], [], None, 0
        self._in_math = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._stack.append({"classes": (a.get("class") or "").split(), "headers": [], "width": 0,
                                "index": False, "section": None})
        elif not self._stack:
            return
        elif tag in ("thead", "tbody"):
            self._stack[-1]["section"] = tag
        elif tag == "tr":
            self._row = 0
        elif tag in ("th", "td"):
            self._row += int(a.get("colspan") or 1)
            t = self._stack[-1]
            t["width"] = max(t["width"], self._row)
            if tag == "th" and t["section"] == "tbody":
                t["index"] = True
            self._cell = [] if tag == "th" else None
        elif tag in ("span", "div") and "math" in (a.get("class") or "").split():
            self._in_math += 1
        elif self._in_math and tag in ("span", "div"):
            self._in_math += 1

    def handle_endtag(self, tag):
        if not self._stack:
            return
        if tag == "table":
            t = self._stack.pop()
            t.pop("section")
            self.tables.append(t)
        elif tag == "th" and self._cell is not None:
            self._stack[-1]["headers"].append(re.sub(r"\s+", " ", "".join(self._cell)).strip())
            self._cell = None
        elif tag in ("span", "div") and self._in_math:
            self._in_math -= 1

    def handle_data(self, data):
        if self._cell is not None and not self._in_math:
            self._cell.append(data)


def tables(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def raw_headers(html: str) -> list[str]:
    """Table headers that are raw snake_case column names (math in a header is not text)."""
    return [h for t in tables(html) for h in t["headers"] if SNAKE.search(h)]


def pandas_indexes(html: str) -> list[str]:
    """Tables that show a pandas index: a DataFrame's own HTML, or a header cell in the body."""
    return [" | ".join(t["headers"][:6]) for t in tables(html) if "dataframe" in t["classes"] or t["index"]]


def wide_tables(html: str, max_columns: int = MAX_COLUMNS) -> list[str]:
    """Tables with more than ``max_columns`` columns (widest row, colspans counted)."""
    return [f"{t['width']} columns: " + " | ".join(t["headers"][:6]) for t in tables(html) if t["width"] > max_columns]


def _around(text: str, m) -> str:
    return text[max(m.start() - 40, 0):m.end() + 40].strip()


def plural_stubs(html: str) -> list[str]:
    text = _strip(html, code=False)
    return [_around(text, m) for m in PLURAL_STUB.finditer(text)]


def bare_booleans(html: str) -> list[str]:
    text = _strip(html, code=False)
    return [_around(text, m) for m in BOOLEAN.finditer(text)]


REPR = re.compile(r"<[A-Za-z_][\w.]* object(?: at 0x[0-9a-f]+)?>|<(?:function|bound method|module) [^>]*>"
                  r"|<Figure size \d+x\d+ with \d+ Axes>")


def object_reprs(html: str) -> list[str]:
    text = _strip(html, code=True)  # the fallback text is printed in an output's <pre>
    return [_around(text, m) for m in REPR.finditer(text)]


def internal_words(html: str) -> list[str]:
    text = _strip(html, code=True)
    return [f"{name}: {_around(text, m)}" for name, rx in INTERNAL.items() for m in rx.finditer(text)]


CHECKS = {"raw snake_case header": raw_headers, "pandas index": pandas_indexes, "table too wide": wide_tables,
          "(s) plural stub": plural_stubs, "bare True/False": bare_booleans, "internal word": internal_words,
          "object repr": object_reprs}

CLEAN = """<html><head><script>var run_F = True;</script><style>.a_b{}</style></head><body>
<p>Measured on 2 threads with the seed 2026; the engine benchmark (<code>make bench</code>) ran once.
<code>RECOMPUTE=True</code> recomputes.  Leviathan et al. 2023 define <span class="math">\\(a_i(x)\\)</span>.</p>
<table class="table"><thead><tr><th>draft</th><th>tokens per step</th><th><span class="math">\\(\\max_i d_i\\)</span></th>
</tr></thead><tbody><tr><td>small</td><td>1.5</td><td>yes</td></tr></tbody></table></body></html>"""

PLANTED = {
    "raw snake_case header": '<table><thead><tr><th>draft</th><th>tokens_per_step</th></tr></thead></table>',
    "pandas index": ('<table class="dataframe"><thead><tr><th></th><th>k</th></tr></thead>'
                     '<tbody><tr><th>0</th><td>1</td></tr></tbody></table>'),
    "table too wide": "<table><tr>" + "".join(f"<td>{i}</td>" for i in range(MAX_COLUMNS + 1)) + "</tr></table>",
    "(s) plural stub": "<p>on 1 torch thread(s)</p>",
    "bare True/False": "<p>all accepted: True</p>",
    "internal word": ("<p>the seed's worked example</p><p>as run_F showed</p>"
                      "<p>the <code>make bench</code> results</p>"),
    "object repr": "<div class=\"output text_plain\"><pre>&lt;IPython.core.display.Markdown object&gt;</pre></div>",
}


def test_a_clean_page_passes_every_check():
    assert {name: check(CLEAN) for name, check in CHECKS.items() if check(CLEAN)} == {}


@pytest.mark.parametrize("name", PLANTED)
def test_each_check_catches_its_planted_page_and_only_its_own(name):
    """Negative control: each planted page must fail its own check (and not the others, so each
    check is shown to catch something the others would miss)."""
    found = {n: check(PLANTED[name]) for n, check in CHECKS.items()}
    assert found[name], f"{name}: the planted page passed"
    assert [n for n, f in found.items() if f] == [name], found


def test_internal_words_catch_each_form():
    found = internal_words(PLANTED["internal word"])
    assert [f.split(":")[0] for f in found] == list(INTERNAL)


def test_a_pandas_index_is_caught_without_the_dataframe_class_too():
    html = "<table><thead><tr><th>k</th></tr></thead><tbody><tr><th>0</th><td>1</td></tr></tbody></table>"
    assert pandas_indexes(html) and not pandas_indexes(CLEAN)


def test_every_built_page_reads_as_a_report(built_html):
    pages = sorted(built_html.rglob("*.html"))
    assert pages, f"no pages under {built_html}"
    problems = {}
    for page in pages:
        if page.name in ("search.html", "genindex.html"):
            continue
        html = page.read_text()
        for name, check in CHECKS.items():
            for found in check(html):
                problems.setdefault(str(page.relative_to(built_html)), []).append(f"{name}: {found}")
    assert not problems, "\n".join(f"{p}:\n  " + "\n  ".join(f) for p, f in problems.items())


@pytest.mark.parametrize("shown", ["<IPython.core.display.Markdown object>", "<foo.Bar object at 0x7f3a2c>",
                                   "<function plot at 0x7f3a2c>", "<Figure size 640x480 with 1 Axes>"])
def test_every_form_of_a_repr_in_place_of_content_is_caught(shown):
    page = f"<div class=\"output text_plain\"><pre>{shown.replace('<', '&lt;').replace('>', '&gt;')}</pre></div>"
    assert object_reprs(page), shown
    assert not object_reprs("<p>a &lt;b&gt; tag, x &lt; y &gt; z, and Figure 3 with 2 panels</p>")
