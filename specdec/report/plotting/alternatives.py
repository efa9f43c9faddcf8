"""Figures of chapter 08 (lossless alternatives, approximate algorithms, precision).  Each takes the
chapter's table(s) and labels; nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import integer_axis, new, paired

__all__ = ["tv_against_gain", "multidraft_acceptance", "precision_tv", "measured_alternatives"]

_FAMILY = {"lossless": ("C0", "o"), "approximate": ("C3", "s")}


def tv_against_gain(exact, floor: float):
    """Exact TV from the target law (log scale; laws equal to rounding drawn at ``floor``) against
    the expected tokens per step relative to token verification (table exact, columns tv_shown,
    gain, family, algorithm)."""
    fig, ax = new(6.6, 4.2)
    for fam, g in exact.groupby("family", sort=False):
        c, m = _FAMILY.get(fam, ("C7", "^"))
        ax.scatter(g["gain"], g["tv_shown"], color=c, marker=m, label=fam, zorder=3)
        for _, r in g.iterrows():
            ax.annotate(r["algorithm"], (r["gain"], r["tv_shown"]), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    ax.axhline(floor, color="grey", lw=0.8, ls=":", label=f"exact: TV below {floor:.0e} (rounding)")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    ax.set(xlabel="E[tokens per step] / token verification's", ylabel="TV from the target law",
           title="What each rule buys (right) and what it costs (up)")
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    return fig


def multidraft_acceptance(md):
    """Acceptance at one position against the number of drafts n: recursive rejection sampling
    (solid, dark) and the optimal n-draft bound (dashed, light), one hue per pair; table multidraft."""
    fig, ax = new(6.0, 3.8)
    for j, (name, g) in enumerate(md.groupby("pair", sort=False)):
        ax.plot(g["drafts"], g["rrs"], marker="o", color=paired(j, 0), label=f"{name}: recursive rejection")
        ax.plot(g["drafts"], g["optimal"], ls="--", marker="x", color=paired(j, 1), label=f"{name}: optimal bound")
    ax.set(xlabel="independent drafts n", ylabel="P(a draft is kept) at one position",
           title="Multi-draft acceptance against the optimal coupling", ylim=(0, 1.02))
    integer_axis(ax, "x")
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    return fig


def precision_tv(prec, floor: float):
    """A bar chart: per precision path, the TV of the law it realizes from the exact target law and
    from the same-precision target (log scale), each bar labelled with its value; a TV below
    ``floor`` is rounding, drawn as no bar and labelled so (table precision)."""
    fig, ax = new(7.2, 0.55 * len(prec) + 1.4)
    y = range(len(prec))
    series = (("tv_exact", +0.2, "C1", "from the exact (float64) target law"),
              ("tv_same_precision", -0.2, "C0", "from the target in the same precision"))
    for col, dy, colour, label in series:
        values = prec[col].to_numpy(float)
        ax.barh([i + dy for i in y], [v if v >= floor else 0.0 for v in values], height=0.4, left=floor, color=colour,
                label=label)
        for i, v in zip(y, values):
            ax.text(max(v, floor) * 1.3, i + dy, f"{v:.1e}" if v >= floor else f"below {floor:.0e} (rounding)",
                    va="center", fontsize=6.5)
    ax.set_yticks(list(y), prec["path"], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlim(floor, float(max(prec["tv_exact"].max(), prec["tv_same_precision"].max(), floor)) * 30)
    ax.invert_yaxis()
    ax.set(xlabel="total variation over the first tokens (log scale)", title="The law each precision path realizes")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3, axis="x")
    return fig


def measured_alternatives(speed, acceptance):
    """Left: measured speedup over plain decoding with its 95% interval per algorithm, one colour
    per temperature (table speedup).  Right: measured acceptance per draft position given that the
    position was reached, with its 95% bootstrap interval over prompts, one hue per algorithm and
    one shade per temperature (table acceptance)."""
    fig, (ax, bx) = new(11.0, 4.0, ncols=2)
    algs = list(dict.fromkeys(speed["algorithm"]))
    temps = list(dict.fromkeys(speed["temperature"]))
    for j, t in enumerate(temps):
        g = speed[speed["temperature"] == t].set_index("algorithm").reindex(algs)
        x = [i + (j - (len(temps) - 1) / 2) * 0.25 for i in range(len(algs))]
        ax.errorbar(x, g["speedup_median"], yerr=[g["speedup_median"] - g["speedup_lo"], g["speedup_hi"] - g["speedup_median"]],
                    fmt="o", capsize=3, color=f"C{j}", label=f"τ={t:g}")
        for a in algs:
            r = acceptance[(acceptance["temperature"] == t) & (acceptance["algorithm"] == a)]
            if len(r):
                err = [r["conditional"] - r["conditional_lo_prompts"], r["conditional_hi_prompts"] - r["conditional"]]
                bx.errorbar(r["position"], r["conditional"], yerr=err, marker="o", capsize=2, color=paired(algs.index(a), j),
                            ls="-" if j == 0 else "--", label=f"{a}, τ={t:g}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(algs)), algs, rotation=30, ha="right", fontsize=7)
    ax.set(ylabel="speedup over plain decoding (95% CI)", title="Measured speed")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    bx.set(xlabel="draft position", ylabel="P(draft kept | reached)", title="Measured acceptance", ylim=(0, 1.02))
    integer_axis(bx, "x")
    bx.legend(fontsize=5, ncol=2)
    bx.grid(alpha=0.3)
    return fig
