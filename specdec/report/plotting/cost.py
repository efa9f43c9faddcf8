"""Chapter 03's figures: the idealized model's speed ratio, optimal draft length and break-even alpha."""

from __future__ import annotations

from specdec.report.plotting.style import integer_axis, new, paired

__all__ = ["speed_ratio_vs_alpha", "optimal_k_and_break_even"]


def speed_ratio_vs_alpha(grid, c: float, alpha_example: float, s_example: float):
    """S_toy against alpha, one line per k (table speed_ratio_vs_alpha), the seed's example marked."""
    fig, ax = new(6.4, 4.0)
    for k, g in grid.groupby("k", sort=False):
        ax.plot(g["alpha"], g["speed_ratio"], label=f"k = {k}")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.plot([alpha_example], [s_example], "ko")
    ax.annotate(f"worked example: {s_example:.3f}", (alpha_example, s_example), textcoords="offset points",
                xytext=(-120, 10))
    ax.set(xlabel=r"acceptance rate $\alpha$", ylabel=r"speed ratio $S_{toy}$",
           title=f"Idealized model: unit verification cost, c = {c} (not a measurement)")
    ax.legend(ncol=2, fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def optimal_k_and_break_even(kgrid, break_even, k_max: int):
    """Left: the optimal k against alpha per c (table optimal_k_and_break_even), a dotted line in
    the lighter shade of its hue at alpha = c where speculation starts to pay; right: the break-even alpha against k per c (table
    break_even_alpha)."""
    fig, (ax1, ax2) = new(10, 3.8, ncols=2)
    for j, (c, g) in enumerate(kgrid.groupby("c", sort=False)):
        ax1.step(g["alpha"], g["optimal_k"], where="mid", color=paired(j, 0), label=f"c = {c}")
        ax1.axvline(c, color=paired(j, 1), ls=":", lw=1.2)
    for c, g in break_even.groupby("c", sort=False):
        ax2.plot(g["k"], g["break_even_alpha"], marker=".", label=f"c = {c}")
    ax1.set(xlabel=r"acceptance rate $\alpha$", ylabel="optimal k (0 = do not speculate)", yscale="symlog",
            title=f"Best draft length, k <= {k_max}")
    ax2.set(xlabel="draft length k", ylabel=r"break-even $\alpha$", title=r"Below this $\alpha$, speculation loses")
    integer_axis(ax1, "y")
    integer_axis(ax2, "x")
    for a, loc in ((ax1, "lower right"), (ax2, "lower right")):
        a.grid(alpha=0.3)
        a.legend(fontsize=8, loc=loc)
    fig.tight_layout()
    return fig
