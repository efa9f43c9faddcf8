"""The book's length against its budget: words per page, from a built book or executed notebooks.

    python -m specdec.cli.words build/book/_build/html      # the measure of record
    python -m specdec.cli.words build/rendered --notebooks   # estimate from executed notebooks

Exits 1 when the book is over `BOOK_WORDS` or the front page over `FRONT_WORDS`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specdec.report.length import BOOK_WORDS, FRONT_PAGE, FRONT_WORDS, html_count, notebook_count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--notebooks", action="store_true", help="root holds executed NN_*.ipynb, not HTML")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        ap.error(f"{args.root} is not a folder")
    pages = ({p.stem: notebook_count(p) for p in sorted(args.root.glob("[0-9][0-9]_*.ipynb"))}
             if args.notebooks else html_count(args.root))
    if not pages:
        ap.error(f"no pages under {args.root}")
    for name, n in pages.items():
        print(f"{n:7d}  {name}")
    total = sum(pages.values())
    print(f"{total:7d}  in all (budget {BOOK_WORDS}; front page {pages.get(FRONT_PAGE, 0)} of {FRONT_WORDS})")
    return int(total > BOOK_WORDS or pages.get(FRONT_PAGE, 0) > FRONT_WORDS)


if __name__ == "__main__":
    sys.exit(main())
