"""Figures of the measured chapters: the family's training curves (the model card) and agreement
(04), and measured acceptance (05).

Each function draws one chapter table (a DataFrame, named in its docstring) and computes nothing.
"""

from __future__ import annotations

import numpy as np

from specdec.report.formatting import p_value_text
from specdec.report.plotting.style import new
from specdec.report.results import records

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
    """Accepted fraction among steps that reached position i, with its Wilson interval, and the
    mean recorded beta_i, per draft (table acceptance_by_position)."""
    fig, ax = new(6.4, 3.8)
    for draft, g in pos.groupby("draft", sort=False):
        err = [g["conditional_rate"] - g["lo"], g["hi"] - g["conditional_rate"]]
        line = ax.errorbar(g["position"], g["conditional_rate"], yerr=err, marker="o", capsize=3,
                           label=f"{draft}: accepted")
        ax.plot(g["position"], g["mean_beta"], ls=":", marker="x", color=line.lines[0].get_color(),
                label=f"{draft}: mean beta")
    ax.set(xlabel="draft position i", ylabel="P(accepted | reached)", ylim=(0, 1.02), xticks=range(1, k + 1),
           title=f"Per-position acceptance, temperature {temperature:g}, token verification ({level:.0%} Wilson)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
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
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("fraction of steps")
    fig.tight_layout()
    return fig


def predicted_vs_measured_length(pred, k: int):
    """Measured E[L] against L_cond and L_ind per configuration; hollow squares (coloured edges):
    block verification (table predicted_vs_measured_length)."""
    fig, ax = new(5.2, 4.4)
    colour = {"conditional": "C0", "independent": "C1"}
    for r in pred.itertuples(index=False):
        c = colour[r.predictor]
        ax.plot(r.predicted, r.measured, "o" if r.method == "token" else "s", color=c, alpha=0.8,
                mfc=c if r.method == "token" else "none")
    lim = [1, k + 1]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.plot([], [], "o", color="C0", label=r"$L_{cond}$ (token)")
    ax.plot([], [], "o", color="C1", label=r"$L_{ind}$ (token)")
    ax.plot([], [], "s", color="gray", mfc="none", label="block verification")
    ax.set(xlabel="predicted E[L] from per-step beta", ylabel="measured E[L]", xlim=lim, ylim=lim,
           title="Tokens per verification")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def alpha_vs_temperature(alpha, top_p: float, top_p_temperature: float, k: int):
    """Fitted alpha with its interval against temperature, per draft (colour) and method (solid:
    token, dashed: block); stars, shifted right a little: nucleus top_p at top_p_temperature
    (table alpha_vs_temperature)."""
    fig, ax = new(6.4, 3.8)
    for j, (draft, d) in enumerate(alpha.groupby("draft", sort=False)):
        plain = d[d["top_p"] == 1.0]
        for m, ls in (("token", "-"), ("block", "--")):
            g = plain[plain["method"] == m]
            if len(g):
                ax.errorbar(g["temperature"] + 0.01 * j, g["alpha_mle"], yerr=[g["alpha_mle"] - g["lo"],
                            g["hi"] - g["alpha_mle"]], ls=ls, marker="o", capsize=3, color=f"C{j}", label=f"{draft}, {m}")
        nuc = d[d["top_p"] != 1.0]
        ax.errorbar(nuc["temperature"] + 0.05 + 0.01 * j, nuc["alpha_mle"],
                    yerr=[nuc["alpha_mle"] - nuc["lo"], nuc["hi"] - nuc["alpha_mle"]], marker="*", ms=10,
                    color=f"C{j}", ls="none")
    ax.set(xlabel=f"temperature (star: {top_p_temperature:g} with top-p {top_p})", ylabel=r"measured $\hat\alpha$", ylim=(0, 1),
           title=f"Acceptance during generation, k = {k}")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return fig
