"""Shared figure conventions, and the check that every plotted series is visible.

`new` makes a figure (pyplot's current backend, never switched here).  `visible_series` lists, for every line,
collection and bar container of a figure, whether it draws anything a reader can see (a colour
with alpha > 0 on its face or edge, a non-zero size): a test asserts it for every book figure.

Example: fig, ax = new(6, 3.6); ax.plot([0, 1]); visible_series(fig) -> [("line", "_child0", True)]
"""

from __future__ import annotations

__all__ = ["new", "visible_series"]


def new(width: float, height: float, ncols: int = 1, **kw):
    """(figure, axes) of the given size in inches; ``ncols`` > 1 gives an array of axes.  The
    backend is left as it is (a notebook's inline backend; a non-interactive one without a screen)."""
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width, height), **kw)


def _alpha_of(colors) -> float:
    import numpy as np

    c = np.asarray(colors, dtype=float).reshape(-1, 4) if len(colors) else np.zeros((0, 4))
    return float(c[:, 3].max()) if c.size else 0.0


def visible_series(fig) -> list[tuple[str, str, bool]]:
    """(kind, label, visible) for every data series drawn on the figure's axes."""
    from matplotlib.collections import Collection
    from matplotlib.colors import to_rgba
    from matplotlib.container import BarContainer
    from matplotlib.lines import Line2D

    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if not isinstance(line, Line2D):
                continue
            drawn_line = line.get_linestyle() not in ("None", "none", " ", "") and line.get_linewidth() > 0
            marker = line.get_marker() not in (None, "None", "none", " ", "")
            face = to_rgba(line.get_markerfacecolor())[3] if marker else 0.0
            edge = to_rgba(line.get_markeredgecolor())[3] if marker else 0.0
            seen = (drawn_line and to_rgba(line.get_color())[3] > 0) or (marker and max(face, edge) > 0)
            out.append(("line", line.get_label(), bool(seen)))
        for coll in ax.collections:
            if not isinstance(coll, Collection):
                continue
            face, edge = _alpha_of(coll.get_facecolors()), _alpha_of(coll.get_edgecolors())
            widths = coll.get_linewidths()
            seen = face > 0 or (edge > 0 and len(widths) and max(widths) > 0)
            out.append(("collection", coll.get_label(), bool(seen)))
        for cont in ax.containers:
            if not isinstance(cont, BarContainer):
                continue  # error bars are drawn by their own lines and collections, checked above
            patches = list(cont.patches)
            seen = any(to_rgba(p.get_facecolor())[3] > 0 or to_rgba(p.get_edgecolor())[3] > 0 for p in patches)
            out.append(("bars", cont.get_label(), bool(seen)))
    return out
