"""Small tables shown inline by notebooks: rows of dicts rendered as HTML (what the book shows)
and as Markdown (what a plain notebook viewer may pick).

Example: Table([{"k": 2, "tv": 0.0123}], "{:.3f}") renders one header row and one data row.
"""

from __future__ import annotations

import html

__all__ = ["Table"]


class Table:
    """rows: list of dicts with the same keys; fmt: format for float cells."""

    def __init__(self, rows: list[dict], fmt: str = "{:.4g}"):
        if not rows:
            raise ValueError("a table needs at least one row")
        self.cols = list(rows[0])
        if any(list(r) != self.cols for r in rows):
            raise ValueError(f"every row must have the columns {self.cols}")
        self.rows, self.fmt = rows, fmt

    def _cell(self, v) -> str:
        return self.fmt.format(v) if isinstance(v, float) else str(v)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(self._cell(r[c]))}</td>" for c in self.cols) + "</tr>"
                       for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(self.cols) + " |", "|" + "---|" * len(self.cols)]
        lines += ["| " + " | ".join(self._cell(r[c]).replace("|", "\\|") for c in self.cols) + " |" for r in self.rows]
        return "\n".join(lines)
