"""Shared figure conventions, and the check that every plotted series is visible.

`new` makes a figure (pyplot's current backend, never switched here).  `visible_series` lists, for every line,
collection and bar container of a figure, whether it draws anything a reader can see (a colour
with alpha > 0 on its face or edge, a non-zero size): a test asserts it for every book figure.

Two series of one panel never share a colour (`shared_colours` finds those that do): series that
belong together (a measurement and its prediction, one draft under two methods) take two shades of
one hue from `paired`.  An axis of whole numbers (k, batch, positions, counts) gets whole-number
ticks only (`integer_axis`).

Example: fig, ax = new(6, 3.6); ax.plot([0, 1]); visible_series(fig) -> [("line", "_child0", True)]
"""

from __future__ import annotations

__all__ = ["new", "visible_series", "paired", "integer_axis", "series_colours", "shared_colours"]


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


def paired(group: int, member: int = 0, members: int = 2):
    """The colour of ``member`` (0 = the darkest) of ``group``: shades of one hue per group, so that
    series that belong together read as a family and no two share a colour.  Up to 10 groups of 2
    (matplotlib's tab20) or 5 groups of 3-4 (tab20c).  Example: paired(0, 0) is tab20's dark blue,
    paired(0, 1) its light blue; paired(1, 0) dark orange."""
    import matplotlib

    if members <= 2:
        cmap, size, span = matplotlib.colormaps["tab20"], 10, 2
    elif members <= 4:
        cmap, size, span = matplotlib.colormaps["tab20c"], 5, 4
    else:
        raise ValueError(f"at most 4 shades of one hue, asked for {members}")
    if not 0 <= group < size or not 0 <= member < members:
        raise ValueError(f"group {group} member {member}: at most {size} groups of {members}")
    return cmap.colors[group * span + member]


def integer_axis(ax, which: str = "x") -> None:
    """Whole-number ticks only on ``which`` ("x", "y" or "both") of ``ax``: for axes of k, batch
    sizes, positions and counts, where 2.5 means nothing."""
    from matplotlib.ticker import MaxNLocator

    for name in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if name == "x" else ax.yaxis
        if axis.get_scale() == "linear":
            axis.set_major_locator(MaxNLocator(integer=True))
        else:  # log or symlog: keep the scale's positions, drop the fractional ones
            axis.set_minor_locator(MaxNLocator(integer=True, nbins=1))
            ticks = [t for t in axis.get_majorticklocs() if float(t).is_integer()]
            axis.set_ticks(ticks, [f"{int(t)}" for t in ticks])


def series_colours(ax) -> list[tuple[str, tuple]]:
    """(label, RGBA) of every data series of one panel: each line (an error bar's data line, not its
    caps), each scatter and each bar group; error bars' own lines and filled bands are not series."""
    from matplotlib.colors import to_rgba
    from matplotlib.container import BarContainer, ErrorbarContainer

    parts = set()
    for cont in ax.containers:
        if isinstance(cont, ErrorbarContainer):
            data, caps, bars = cont.lines
            parts.update(id(c) for c in (caps or ()))
            parts.update(id(b) for b in (bars or ()))
    out = []
    for line in ax.get_lines():
        if id(line) in parts:
            continue
        drawn = line.get_linestyle() not in ("None", "none", " ", "") or line.get_marker() not in (None, "None", "none", "", " ")
        if drawn and (len(line.get_xdata()) or not str(line.get_label()).startswith("_")):
            out.append((str(line.get_label()), to_rgba(line.get_color())))
    for coll in ax.collections:
        if id(coll) in parts or type(coll).__name__ in ("PolyCollection", "FillBetweenPolyCollection", "QuadMesh"):
            continue
        face, edge = coll.get_facecolors(), coll.get_edgecolors()
        colours = face if len(face) and face[0][3] > 0 else edge
        if len(colours) == 1:  # one colour per point (e.g. green passes, red caught) is one series of marks
            out.append((str(coll.get_label()), tuple(float(v) for v in colours[0])))
    for cont in ax.containers:
        if isinstance(cont, BarContainer) and cont.patches:
            out.append((str(cont.get_label()), to_rgba(cont.patches[0].get_facecolor())))
    return out


def shared_colours(fig) -> list[tuple[int, list[str]]]:
    """(panel index, labels) for every colour two or more series of one panel share."""
    found = []
    for i, ax in enumerate(fig.axes):
        by = {}
        for label, rgba in series_colours(ax):
            by.setdefault(tuple(round(v, 3) for v in rgba), []).append(label)
        found += [(i, labels) for labels in by.values() if len(labels) > 1]
    return found
