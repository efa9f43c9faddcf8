"""Figure of the greedy criterion in floating point (chapter 01): top-2 logit gaps against the
difference between the one-token and the verification forwards.

Example: greedy_gaps(gaps) -> Figure (table greedy_gaps: dtype, top2_gap, max_abs_diff, flip)
"""

from __future__ import annotations

from specdec.report.plotting.style import new, paired

__all__ = ["greedy_gaps"]


def greedy_gaps(gaps):
    """Per dtype, the empirical CDF of the top-2 gap of the one-token logits (log axis; gaps of
    exactly 0 count in the height but draw no point) and a dashed line at the largest difference
    max |z^(k+1) - z^(1)| seen: positions left of the line are near ties; flipped positions are
    marked; one hue per dtype, three shades.  Table greedy_gaps."""
    fig, ax = new(7, 3.6)
    for i, (dtype, g) in enumerate(gaps.groupby("dtype", sort=False)):
        ax.ecdf(g["top2_gap"], color=paired(i, 0, 3), label=f"{dtype}: top-2 gap of the one-token logits")
        worst = float(g["max_abs_diff"].max())
        ax.axvline(worst, color=paired(i, 2, 3), ls="--", lw=1.5, label=f"{dtype}: largest logit difference {worst:.1e}")
        flips = g[g["flip"] & (g["top2_gap"] > 0)]
        if len(flips):
            ax.scatter(flips["top2_gap"], [0.02] * len(flips), marker="x", color=paired(i, 1, 3), zorder=3,
                       label=f"{dtype}: flipped positions (gap > 0)")
    ax.set_xscale("log")
    ax.set(xlabel="top-2 logit gap (largest minus second largest)", ylabel="share of positions at or below",
           title="Near ties: gaps below the largest difference between the two forwards")
    ax.legend(fontsize=7.5, loc="upper left")
    return fig
