"""Figure of chapter 10 (other engines against the exact law).  It takes the chapter's law table;
nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import new

__all__ = ["engine_tv"]


def engine_tv(laws):
    """Binned total-variation distance from the target's exact law (estimate and distribution-free
    interval) per configuration, one panel per sampled setting; filled markers for configurations the
    law test rejects, hollow for those it does not (table laws: engine, configuration, setting, tv,
    tv_lo, tv_hi, status: pass / reject / not run)."""
    rows = laws[laws["status"].isin(["pass", "reject"])]
    if rows.empty:
        raise ValueError("no law test ran: nothing to draw")
    settings = list(dict.fromkeys(rows["setting"]))
    fig, axes = new(10.0, 0.45 * max(rows.groupby("setting").size().max(), 4) + 1.2, ncols=max(len(settings), 1),
                    sharey=True, squeeze=False)
    labels = list(dict.fromkeys(rows["engine"] + ": " + rows["configuration"]))
    for ax, name in zip(axes[0], settings):
        g = rows[rows["setting"] == name]
        for status, colour, face, tag in (("pass", "C0", "none", "consistent with the law"),
                                          ("reject", "C3", "C3", "rejected by the law test")):
            h = g[g["status"] == status]
            y = [labels.index(e + ": " + c) for e, c in zip(h["engine"], h["configuration"])]
            ax.errorbar(h["tv"], y, xerr=[h["tv"] - h["tv_lo"], h["tv_hi"] - h["tv"]], fmt="o", color=colour,
                        mfc=face, capsize=3, label=tag)
        ax.set(title=name, xlabel="binned TV from the target's exact law")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    axes[0][0].set_yticks(range(len(labels)), labels, fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=7, loc="lower right")
    return fig
