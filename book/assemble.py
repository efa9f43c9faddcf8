"""Lay out the book's source folder from book/, the executed notebooks and MathJax; execute nothing.

    python book/assemble.py --notebooks build/notebooks --out build/book

The table of contents must list every notebooks/NN_*.ipynb of the repository and each listed
notebook must have an executed copy (from `make reproduce` / `make notebooks`), else this stops
with a message saying which.  The committed CSV tables under data/ are copied beside the
notebooks, so that each figure caption can link the data file behind it.  MathJax 2.7 comes from the jupyter-server-mathjax package (a PyPI
package pinned in environment.yml) and is copied into the built site (html_extra_path), so the
built pages load no script from outside the book.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def toc_notebooks(toc: Path) -> list[str]:
    return re.findall(r"^\s*(?:-\s*)?(?:file|root):\s*notebooks/(\S+)\s*$", toc.read_text(), flags=re.M)


def mathjax_dir() -> Path:
    import jupyter_server_mathjax

    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (static / "MathJax.js").exists():
        raise SystemExit(f"MathJax.js not found under {static}; reinstall jupyter-server-mathjax")
    return static


def gpu_part_status(status: Path = ROOT / "data" / "results" / "07_gpu_decoding" / "status.csv") -> str:
    """The GPU appendix's status in the table of contents: "measured" once chapter 07's committed
    status records a real GPU run, else "ready, not yet run" (the contents never imply GPU measurements)."""
    import csv

    rows = list(csv.DictReader(status.open())) if status.exists() else []
    real = bool(rows) and rows[0].get("real_gpu", "").strip().lower() in ("true", "1")
    return "measured" if real else "ready, not yet run"


def assemble(notebooks: Path, out: Path) -> None:
    listed = toc_notebooks(BOOK / "_toc.yml")
    in_repo = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if sorted(listed) != in_repo:
        raise SystemExit(f"book/_toc.yml lists {sorted(listed)} but notebooks/ holds {in_repo}: "
                         "keep them the same")
    missing = [n for n in listed if not (notebooks / f"{n}.ipynb").exists()]
    if missing:
        raise SystemExit(f"no executed copy of {missing} in {notebooks}: run `make book` "
                         "(it executes them, rendering the committed results) first")
    if out.exists():
        for child in out.iterdir():  # keep Sphinx's _build cache, replace the sources
            if child.name != "_build":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    for item in BOOK.iterdir():
        if item.name == "assemble.py" or item.name == "__pycache__":
            continue
        dest = out / item.name
        shutil.copytree(item, dest) if item.is_dir() else shutil.copy2(item, dest)
    (out / "_toc.yml").write_text((BOOK / "_toc.yml").read_text().replace("GPU_PART_STATUS", gpu_part_status()))
    # Not under _static: jupyter-book would add every .js file there to every page.
    shutil.copytree(mathjax_dir(), out / "_mathjax" / "mathjax")
    # The data behind each figure, linked from its caption ({download}`../data/results/...csv`).
    for table in sorted((ROOT / "data").glob("*/*/*.csv")) + sorted((ROOT / "data").glob("published/*.csv")):
        dest = out / table.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(table, dest)
    (out / "notebooks").mkdir()
    for name in listed:
        shutil.copy2(notebooks / f"{name}.ipynb", out / "notebooks" / f"{name}.ipynb")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notebooks", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    assemble(args.notebooks, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
