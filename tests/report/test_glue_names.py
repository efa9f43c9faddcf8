"""Every glue name a chapter's Markdown quotes is written out literally where its value is made, so
that searching for the name finds it: in the library as a string literal ("name") or a keyword
(name= in a call such as ``ch.glue(name=...)`` or ``dict(name=...)``), or in that chapter's code
cells as a string literal, a keyword or an assigned name (the parameters cell: ``glue_parameters``
glues each parameter under its own name).  A name only an f-string composes (f"{tag}_lo"), or only
a docstring mentions, is not declared.

The check reads sources (Python's ast), never executes a notebook; a planted library and page show
that it reports what it must.
"""

import ast
import json
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# an inline glue role: {glue}`name`, {glue:text}`name:.2f`, {glue:md}`name`
ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")


def quoted_names(markdown: str) -> set[str]:
    """The glue names the inline roles of ``markdown`` quote, each without its ``:format``."""
    return {m.split(":", 1)[0].strip() for m in ROLE.findall(markdown)}


def declared_names(source: str, assigned: bool = False) -> set[str]:
    """The names ``source`` (Python) writes out literally: every string constant outside an f-string
    and every keyword of a call; with ``assigned``, also every plain name assigned to.  A line that
    is an IPython magic or shell escape is skipped."""
    tree = ast.parse("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()))
    in_fstring, out = set(), set()
    for n in ast.walk(tree):  # breadth first: an f-string comes before its parts
        if isinstance(n, ast.JoinedStr):
            in_fstring |= {id(v) for v in n.values}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in in_fstring:
            out.add(n.value)
        elif isinstance(n, ast.Call):
            out |= {kw.arg for kw in n.keywords if kw.arg}
        elif assigned and isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def undeclared(markdown: str, code: str, library: set[str]) -> list[str]:
    """The glue names ``markdown`` quotes that neither ``library`` (`declared_names` of the library's
    sources) nor ``code`` (the page's own code) declares, sorted."""
    return sorted(quoted_names(markdown) - library - declared_names(code, assigned=True))


@lru_cache(maxsize=1)
def library_names() -> frozenset:
    """`declared_names` over every module of the specdec package."""
    return frozenset().union(*(declared_names(p.read_text()) for p in sorted((ROOT / "specdec").rglob("*.py"))))


def notebook_text(path: Path) -> tuple[str, str]:
    """(the Markdown cells, the code cells) of a notebook, each joined into one text."""
    cells = json.loads(path.read_text())["cells"]
    text = lambda kind: "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == kind)  # noqa: E731
    return text("markdown"), text("code")


def test_every_glue_name_a_chapter_quotes_is_declared_literally():
    missing = {nb.name: undeclared(*notebook_text(nb), library_names()) for nb in NOTEBOOKS}
    assert {k: v for k, v in missing.items() if v} == {}
    assert sum(len(quoted_names(notebook_text(nb)[0])) for nb in NOTEBOOKS) > 100  # the pages were read


PLANTED_LIBRARY = '''
def values(rows, tag):
    """Example: values(rows, "base") -> {"doc_only": 1, ...}"""
    out = {f"{tag}_lo": min(rows), "made_hi": max(rows)}
    out.update(dict(kw_name=len(rows)))
    return out
'''
PLANTED_PAGE = ("The range is {glue:text}`base_lo:.2f` to {glue:text}`made_hi:.2f` over {glue:text}`kw_name` rows "
                "({glue}`doc_only`, {glue:text}`never_made`; this page's own {glue:text}`code_kw` and {glue}`SEED`).")
PLANTED_CODE = "SEED = 3\n%matplotlib inline\nch.glue(code_kw=len(values([1, 2], 'base')))"


def test_a_name_only_an_f_string_composes_or_a_docstring_mentions_is_reported():
    """The negative control: the planted page quotes one name its library composes with an f-string,
    one only a docstring mentions and one nobody makes; a literal, a keyword and the page's own code
    declare the rest."""
    assert quoted_names(PLANTED_PAGE) == {"base_lo", "made_hi", "kw_name", "doc_only", "never_made", "code_kw", "SEED"}
    assert undeclared(PLANTED_PAGE, PLANTED_CODE, declared_names(PLANTED_LIBRARY)) == ["base_lo", "doc_only",
                                                                                        "never_made"]
    assert undeclared(PLANTED_PAGE, "", declared_names(PLANTED_LIBRARY)) == ["SEED", "base_lo", "code_kw", "doc_only",
                                                                            "never_made"]


def test_the_real_library_does_not_declare_a_made_up_name():
    page = "{glue:text}`pooled_free_level:.2f` and {glue:text}`pooled_free_level_9:.2f`"
    assert undeclared(page, "", library_names()) == ["pooled_free_level_9"]
