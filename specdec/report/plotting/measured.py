"""Figures of the measured chapters: the family's training curves (the model card) and agreement
(04), and measured acceptance (05).

Each function draws one chapter table (a DataFrame, named in its docstring) and computes nothing.
"""

from __future__ import annotations

import numpy as np

from specdec.report.formatting import p_value_text
from specdec.report.plotting.style import integer_axis, new, paired
from specdec.io.results import records

__all__ = ["loss_curves", "beta_by_draft", "acceptance_by_position", "accepted_length_vs_geometric", "predicted_vs_measured_length",
           "alpha_vs_temperature"]


def loss_curves(rows):
    """Validation loss against training tokens, one line per model (rows: model, tokens, val_loss;
    the model card's loss_curves table)."""
    rows = records(rows)
    fig, ax = new(6, 3.5)
    for name in dict.fromkeys(r["model"] for r in rows):
        rs = [r for r in rows if r["model"] == name]
        ax.plot([r["tokens"] / 1e6 for r in rs], [r["val_loss"] for r in rs], marker=".", label=name)
    ax.set(xlabel="training tokens (millions)", ylabel="validation loss (nats/token)")
    ax.legend()
    ax.grid(alpha=0.3)
    return fig


def beta_by_draft(beta):
    """Teacher-forced beta per draft, one bar per temperature with one standard error (table beta)."""
    drafts = list(beta["draft"].unique())
    temps = list(beta["temperature"].unique())
    fig, ax = new(6.5, 3.5)
    width = 0.8 / len(temps)
    x = np.arange(len(drafts))
    for i, T in enumerate(temps):
        rs = beta[beta["temperature"] == T].set_index("draft").loc[drafts]
        ax.bar(x + i * width, rs["beta"], width, yerr=rs["se"],
               label="greedy agreement (τ=0)" if T == 0 else f"beta, τ={T:g}")
    ax.set_xticks(x + width * (len(temps) - 1) / 2, drafts)
    ax.set(ylabel="mean over held-out contexts", ylim=(0, 1), title="Draft-target agreement on held-out text")
    ax.legend(fontsize=8)
    return fig


def acceptance_by_position(pos, temperature: float, level: float, k: int):
    """One panel per draft: the accepted fraction among steps that reached position i, with its
    interval from the table (``lo``, ``hi``: a bootstrap over prompts, at ``level``), and the mean
    recorded beta_i (table acceptance_by_position).  One panel per draft so that a reader compares
    the positions of one draft, the question the figure answers."""
    drafts = list(dict.fromkeys(pos["draft"]))
    fig, axes = new(2.6 * len(drafts) + 0.6, 3.4, ncols=len(drafts), squeeze=False, sharey=True)
    for ax, draft in zip(axes[0], drafts):
        g = pos[pos["draft"] == draft]
        err = [g["conditional_rate"] - g["lo"], g["hi"] - g["conditional_rate"]]
        ax.errorbar(g["position"], g["conditional_rate"], yerr=err, marker="o", capsize=3, color="C0",
                    label=f"accepted ({level:.0%} interval)")
        ax.plot(g["position"], g["mean_beta"], ls=":", marker="x", color="C1", label=r"mean $\beta_i$")
        ax.set(xlabel="draft position i", ylim=(0, 1.02), xlim=(0.5, k + 0.5), xticks=range(1, k + 1), title=draft)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("P(accepted | reached)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"Acceptance by draft position, temperature {temperature:g}, token verification "
                 f"({level:.0%} bootstrap intervals over prompts)", fontsize=10)
    fig.tight_layout()
    return fig


def accepted_length_vs_geometric(geo, summary):
    """Histogram of accepted drafts N against the truncated-geometric law at the fitted alpha, one
    panel per temperature (table accepted_length_vs_geometric); the titles quote the G-test's p and
    the steps from the summary table (acceptance_by_config)."""
    panels = list(geo.groupby(["draft", "temperature"], sort=False))
    fig, axes = new(3.4 * len(panels), 3.2, ncols=len(panels), squeeze=False)
    for ax, ((draft, T), g) in zip(axes[0], panels):
        s = summary[(summary["draft"] == draft) & (summary["temperature"] == T) & (summary["method"] == "token")
                    & (summary["top_p"] == 1.0)].iloc[0]
        ax.bar(g["n"] - 0.2, g["measured_freq"], width=0.4, label="measured")
        ax.bar(g["n"] + 0.2, g["geometric_pmf"], width=0.4, label=f"geometric, alpha={g['alpha_mle'].iloc[0]:.2f}")
        ax.set(title=f"{draft}, τ={T:g}\nG-test p = {p_value_text(s['gof_p']) if s['gof_p'] == s['gof_p'] else 'n/a'}, {s['steps']} steps", xlabel="accepted drafts N")
        integer_axis(ax, "x")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("fraction of steps")
    fig.tight_layout()
    return fig


def predicted_vs_measured_length(pred, k: int):
    """Measured E[L] against L_cond and L_ind per configuration, one series per (predictor, method):
    one hue per predictor, filled dark circles for token verification and hollow light squares for
    block verification (table predicted_vs_measured_length)."""
    fig, ax = new(5.2, 4.4)
    hue = {"conditional": (0, r"$L_{cond}$"), "independent": (1, r"$L_{ind}$")}
    for (predictor, method), g in pred.groupby(["predictor", "method"], sort=False):
        j, name = hue[predictor]
        c = paired(j, 0 if method == "token" else 1)
        ax.plot(g["predicted"], g["measured"], "o" if method == "token" else "s", ls="none", color=c, alpha=0.9,
                mfc=c if method == "token" else "none", label=f"{name}, {method} verification")
    lim = [1, k + 1]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.set(xlabel="predicted E[L] from per-step beta", ylabel="measured E[L]", xlim=lim, ylim=lim,
           title="Tokens per verification")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def alpha_vs_temperature(alpha, top_p: float, top_p_temperature: float, k: int):
    """Fitted alpha with its interval against temperature, per draft (hue) and method (solid, dark:
    token; dashed, lighter: block); stars, shifted right a little, in the lightest shade: nucleus
    top_p at top_p_temperature (table alpha_vs_temperature)."""
    fig, ax = new(6.4, 3.8)
    for j, (draft, d) in enumerate(alpha.groupby("draft", sort=False)):
        plain = d[d["top_p"] == 1.0]
        for i, (m, ls) in enumerate((("token", "-"), ("block", "--"))):
            g = plain[plain["method"] == m]
            if len(g):
                ax.errorbar(g["temperature"] + 0.01 * j, g["alpha_mle"], yerr=[g["alpha_mle"] - g["lo"],
                            g["hi"] - g["alpha_mle"]], ls=ls, marker="o", capsize=3, color=paired(j, i, 3),
                            label=f"{draft}, {m}")
        nuc = d[d["top_p"] != 1.0]
        ax.errorbar(nuc["temperature"] + 0.05 + 0.01 * j, nuc["alpha_mle"],
                    yerr=[nuc["alpha_mle"] - nuc["lo"], nuc["hi"] - nuc["alpha_mle"]], marker="*", ms=10,
                    color=paired(j, 2, 3), ls="none", label=f"{draft}, top-p {top_p}")
    ax.set(xlabel=f"temperature (star: {top_p_temperature:g} with top-p {top_p})", ylabel=r"measured $\hat\alpha$", ylim=(0, 1),
           title=f"Acceptance during generation, k = {k}")
    ax.legend(fontsize=6, ncol=3)
    ax.grid(alpha=0.3)
    return fig
