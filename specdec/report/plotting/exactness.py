"""Figures of the exactness chapters: one verified token (01) and whole generations (02).

Each function takes the chapter's table(s) as DataFrames and the labels it needs; none computes.
Every series is drawn visibly: hollow markers always carry an edge colour.
"""

from __future__ import annotations

import numpy as np

from specdec.report.plotting.style import integer_axis, new

__all__ = ["mass_decomposition", "replacement_rules", "exact_laws_scatter", "frequency_tests", "block_vs_token"]


def mass_decomposition(mass):
    """Stacked bars per token, accepted part min{p, q} and residual part (1 - beta) r, with the
    target p and the draft q marked (table mass_decomposition)."""
    fig, ax = new(7, 3.6)
    xs = mass["token"].to_numpy()
    ax.bar(xs, mass["accepted"], color="#4C72B0", label=r"accepted: $\min\{p, q\}$")
    ax.bar(xs, mass["residual_part"], bottom=mass["accepted"], color="#DD8452",
           label=r"rejected, then residual: $(1-\beta)\,r$")
    ax.scatter(xs, mass["p"], marker="_", s=600, color="black", zorder=3, label=r"target $p$")
    ax.scatter(xs, mass["q"], marker="o", facecolors="none", edgecolors="#55A868", zorder=3, label=r"draft $q$")
    ax.set(xlabel="token", ylabel="probability", xticks=xs, title="Accepted mass plus residual mass is p, token by token")
    ax.legend(fontsize=8, loc="upper right")
    return fig


def replacement_rules(rules, tv):
    """Law of the verified token under each replacement rule, side by side per token, with the
    target p marked; the legend gives each rule's TV from p (tables replacement_rules, replacement_tv)."""
    fig, ax = new(7.5, 3.6)
    names = list(dict.fromkeys(rules["rule"]))
    tv_of = dict(zip(tv["rule"], tv["tv_from_p"]))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        g = rules[rules["rule"] == name]
        ax.bar(g["token"] + (i - (len(names) - 1) / 2) * width, g["probability"], width,
               label=f"{name}: TV {tv_of[name]:.3f}")
    target = rules[rules["rule"] == names[0]]
    ax.scatter(target["token"], target["target"], marker="_", s=600, color="black", zorder=3, label="target p")
    ax.set(xticks=target["token"].to_numpy(), xlabel="token", ylabel="law of the verified token",
           title="Only the residual restores p")
    ax.legend(fontsize=7.5)
    return fig


def exact_laws_scatter(laws, n_tokens: int, k: int, setting: str):
    """Law of every output sequence under each algorithm against the target's own law (table
    exact_laws_scatter): the correct algorithms sit on the diagonal.  Distinct markers, each with
    its own edge colour (hollow markers with no edge colour would draw nothing)."""
    fig, ax = new(5.2, 5)
    markers = ["o", "x", "s", "^", "D", "v"]
    sizes = [70, 30, 40, 40, 40, 40]  # the first series (token) rings the second (block) on the diagonal
    names = list(dict.fromkeys(laws["algorithm"]))
    for i, name in enumerate(names):
        g = laws[laws["algorithm"] == name]
        color = f"C{i}"
        style = dict(c=color) if markers[i % len(markers)] == "x" else dict(facecolors="none", edgecolors=color)
        ax.scatter(g["target_law"], g["algorithm_law"], marker=markers[i % len(markers)], s=sizes[i % len(sizes)],
                   linewidths=1.0, label=name, **style)
    lim = float(laws["target_law"].max()) * 1.1
    ax.plot([0, lim], [0, lim], color="grey", lw=0.8)
    n_seq = int((laws["algorithm"] == names[0]).sum())
    ax.set(xlabel="target's own law of the sequence", ylabel="law under the algorithm")
    ax.set_title(f"All {n_seq} sequences of {n_tokens} tokens, k = {k}, {setting}", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def frequency_tests(freq, eps: float, power: float, confidence: float):
    """Empirical TV of each algorithm's samples from the target law with its interval (green: passes,
    red: caught), the exact TV of its law, and the detectable TV (table frequency_tests)."""
    fig, ax = new(7, 3.4)
    x = np.arange(len(freq))
    tvs = freq["tv"].to_numpy()
    err = [tvs - freq["tv_low"].to_numpy(), freq["tv_high"].to_numpy() - tvs]
    colors = ["#55A868" if v == "passes" else "#C44E52" for v in freq["verdict"]]
    ax.errorbar(x, tvs, yerr=err, fmt="none", ecolor="grey", capsize=3, label=f"{confidence:g}% interval")
    ax.scatter(x, tvs, c=colors, zorder=3, label="TV of the frequencies")
    ax.scatter(x, freq["exact_tv"], marker="_", s=300, color="black", zorder=4, label="exact TV of the algorithm's law")
    ax.axhline(eps, color="#8172B2", ls=":", label=f"detectable TV (power {power})")
    ax.set_xticks(x)
    ax.set_xticklabels(freq["algorithm"], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("TV(frequencies, target law)")
    ax.set_title(f"{int(freq['samples'].iloc[0])} sampled generations each: green passes, red caught", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def block_vs_token(blocks):
    """Exact expected accepted drafts in the first step against k, token and block verification,
    one panel per model (table block_vs_token)."""
    models = list(dict.fromkeys(blocks["model"]))
    fig, axes = new(4 * len(models), 3.2, ncols=len(models))
    for ax, name in zip(np.atleast_1d(axes), models):
        g = blocks[blocks["model"] == name]
        ax.plot(g["k"], g["token"], "o-", label="token")
        ax.plot(g["k"], g["block"], "s-", label="block")
        ax.set_title(name, fontsize=9)
        ax.set(xlabel="k (drafts per step)", ylabel="expected accepted drafts (first step)")
        integer_axis(ax, "x")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
