"""How long the book reads: words per rendered page, the measure behind the book's length budget.

A page's words are the whitespace-separated tokens of its article body (text, tables, captions,
equations' source, a lone dash or equals sign included) with scripts and styles dropped: what a
reader scrolls through, counted the strict way.  The budget
(`BUDGET`) is the reading time a busy engineer grants: the whole book in an afternoon (about
20,000 words at ~150 words a minute with tables), the front page in five minutes.

`notebook_count` estimates a chapter's page from its executed notebook (markdown with glued values
substituted, plus the markdown its cells display), so a chapter can be measured without building
the book; `html_count` is the measure of record.

Example: a page whose article reads "<p>one two</p><table><td>3</td></table>" has 3 words.
"""

from __future__ import annotations

import html as _html
import json
import re
from pathlib import Path

BOOK_WORDS = 20_000  # the book in an afternoon
FRONT_WORDS = 1_200  # the front page in five minutes
FRONT_PAGE = "98_summary"

_ARTICLE = re.compile(r"<article[^>]*>(.*)</article>", re.S)
_DROP = re.compile(r"<(script|style)[^>]*>.*?</\1>", re.S)
_TAG = re.compile(r"</?[A-Za-z!][^<>]*>")  # a tag, never a "< 1e-300" in a table cell
_GLUE = re.compile(r"\{glue(?::text|:md|:math)?\}`([^`:]+)(?::[^`]*)?`")


def _count(text: str) -> int:
    return len(text.split())


def page_count(page: str) -> int:
    """Words in one rendered page's article body (0 when the page has no article)."""
    m = _ARTICLE.search(page)
    if not m:
        return 0
    return _count(_html.unescape(_TAG.sub(" ", _DROP.sub("", m.group(1)))))


def html_count(html_root: Path) -> dict[str, int]:
    """{page stem: words} for every page of a built book (index, search and genindex excluded)."""
    out = {}
    for f in sorted(Path(html_root).rglob("*.html")):
        if "_static" in f.parts or f.stem in ("index", "search", "genindex"):
            continue
        n = page_count(f.read_text(errors="replace"))
        if n:
            out[f.stem] = n
    return out


def _glued(nb: dict) -> dict[str, str]:
    values = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                d = o.get("data", {})
                v = next((d[k] for k in d if k.endswith("text/markdown")), None) or \
                    next((d[k] for k in d if k.endswith("text/plain")), "")
                values[name] = "".join(v) if isinstance(v, list) else str(v)
    return values


def notebook_count(executed: Path) -> int:
    """Estimated words of an executed chapter's page: its markdown with glued values put in, and
    the markdown or plain text its code cells display (code itself is hidden on the page)."""
    nb = json.loads(Path(executed).read_text())
    glued = _glued(nb)
    total = 0
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"])
            total += _count(_GLUE.sub(lambda m: glued.get(m.group(1), "x").strip("'\""), src))
            continue
        for o in cell.get("outputs", []):
            if "scrapbook" in o.get("metadata", {}) or o["output_type"] not in ("execute_result", "display_data"):
                continue
            d = o.get("data", {})
            v = d.get("text/markdown") or d.get("text/html") or d.get("text/plain") or ""
            total += _count(_TAG.sub(" ", "".join(v) if isinstance(v, list) else v))
    return total
