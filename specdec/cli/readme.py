"""README.md rendered from README.in.md and the committed summary: the front door's numbers are
computed, never typed.

A placeholder ``{{section.key}}`` or ``{{section.key:fmt}}`` names a value of the summary chapter's
committed ``values.json`` (``data/results/98_summary``: sections ``exactness``, ``speed``,
``scope``, ``verdicts``) and a Python format spec; section ``code`` is computed from the source tree
(``trusted_table``, ``trusted_lines``: the modules of `TRUSTED` and their sizes).  A placeholder naming no value, or a spec the
value cannot take, raises naming it; so does a number typed in the template's prose (a ratio like
``1.2x``, a percentage or a bracketed interval outside code and placeholders), because a typed
number goes stale the first time a chapter is recomputed.  `make readme` writes README.md;
`make test` checks that README.md is what the template and the committed values render to.

Example: render("best {{speed.best_speedup:.2f}}x", {"speed": {"best_speedup": 1.254}}) == "best 1.25x"
"""

from __future__ import annotations

import argparse
import json
import re

from specdec.io.paths import RESULTS_DIR, ROOT

__all__ = ["TEMPLATE", "README", "PLACEHOLDER", "TRUSTED", "typed_numbers", "render", "code_values", "committed_values", "main"]

TEMPLATE = ROOT / "README.in.md"
README = ROOT / "README.md"
PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\.([a-z0-9_]+)\s*(?::([^}]*))?\}\}")
_TYPED = re.compile(r"\d(?:\.\d+)?x\b|\b(?!(?:90|95|99)%)\d+(?:\.\d+)?%|\[[-+]?\d+\.\d+, [-+]?\d+\.\d+\]")  # levels 90/95/99% allowed
_FENCE = re.compile(r"```.*?```", re.S)
_CODE = re.compile(r"`[^`\n]*`")
# What a reader must read to trust the headline results, by what it establishes.  The package
# docstring names the same modules (a test holds them equal).
TRUSTED = {
    "exactness": ("specdec.core.sampling", "specdec.core.verify", "specdec.core.exact", "specdec.core.stats"),
    "the engine": ("specdec.engine.decode", "specdec.engine.step", "specdec.engine.drafters", "specdec.engine.inputs",
                   "specdec.engine.kv", "specdec.engine.cache", "specdec.engine.stats", "specdec.engine.modes",
                   "specdec.engine.modes.lean", "specdec.engine.modes.grow", "specdec.engine.modes.kernel"),
    "a measured speedup": ("specdec.measure.harness", "specdec.measure.protocol", "specdec.measure.cost_curve",
                           "specdec.core.cost"),
}
HEADER = "<!-- Rendered by `make readme` from README.in.md and data/results/98_summary: edit the template. -->\n"


def typed_numbers(template: str) -> list[str]:
    """The measured-looking numbers typed in the prose of `template` (outside fenced code, inline
    code and placeholders): ratios ("1.2x"), percentages and bracketed intervals."""
    prose = PLACEHOLDER.sub("", _CODE.sub("", _FENCE.sub("", template)))
    return _TYPED.findall(prose)


def render(template: str, values: dict) -> str:
    """`template` with every placeholder replaced by its formatted value (module docstring)."""
    typed = typed_numbers(template)
    if typed:
        raise ValueError(f"numbers typed in the README template (glue them from results instead): {typed}")

    def one(m: re.Match) -> str:
        section, key, spec = m.group(1), m.group(2), m.group(3) or ""
        if key not in values.get(section, {}):
            raise KeyError(f"README placeholder {m.group(0)}: the committed summary has no {section}.{key}")
        try:
            return format(values[section][key], spec)
        except (TypeError, ValueError) as e:
            raise ValueError(f"README placeholder {m.group(0)}: {e}") from None
    return HEADER + PLACEHOLDER.sub(one, template)


def _lines(module: str) -> int:
    """Lines of a module's file (a package: its __init__.py)."""
    path = ROOT / module.replace(".", "/")
    return len((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text().splitlines())


def code_values() -> dict:
    """Section ``code``: the trusted path as a markdown table (what, modules, lines) and its total."""
    sizes = {what: sum(_lines(m) for m in mods) for what, mods in TRUSTED.items()}
    rows = ["| to trust | modules | lines |", "|---|---|---|"]
    for what, mods in TRUSTED.items():
        names = ", ".join(f"`{m.removeprefix('specdec.')}`" for m in mods)
        rows.append(f"| {what} | {names} | {sizes[what]} |")
    return {"trusted_table": "\n".join(rows), "trusted_lines": sum(sizes.values())}


def committed_values(results_dir=RESULTS_DIR) -> dict:
    """The summary chapter's committed values (its ``values.json``), by section."""
    path = results_dir / "98_summary" / "values.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run the summary chapter (make notebooks) first")
    return {**json.loads(path.read_text())["values"], "code": code_values()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not the rendering")
    args = ap.parse_args(argv)
    text = render(TEMPLATE.read_text(), committed_values())
    if args.check:
        ok = README.read_text() == text
        print("README.md is up to date" if ok else "README.md differs from its rendering: run make readme")
        return 0 if ok else 1
    README.write_text(text)
    print(f"wrote {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
