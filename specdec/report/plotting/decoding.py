"""Figures of the decoding chapters: measured cost curves and speedups on CPU (06), the GPU run's
tables (07).  Each takes the chapter's table(s) and labels; nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import new

__all__ = ["cost_curve", "speedup_vs_k", "time_breakdown", "real_size_speedup_vs_alpha", "gpu_cost_and_controlled",
           "gpu_batch_throughput"]


def cost_curve(curve):
    """T(n)/T(1) of the target per batch size with its interquartile range (table cost_curve),
    against the idealized model's T(n) = T(1)."""
    fig, ax = new(6.0, 3.6)
    target = curve[curve["model"] == "target"]
    for B, g in target.groupby("batch", sort=False):
        t1 = float(g.loc[g["n"] == 1, "median_s"].iloc[0])
        ax.errorbar(g["n"], g["ratio"], yerr=[(g["median_s"] - g["q1_s"]) / t1, (g["q3_s"] - g["median_s"]) / t1],
                    marker="o", capsize=2, label=f"batch {B}")
    ns = sorted(target["n"].unique())
    ax.plot(ns, [1] * len(ns), "k--", lw=0.8, label="cost model: T(n) = T(1)")
    ax.set(xlabel="new tokens n per target forward", ylabel="T(n) / T(1)",
           title="Measured verification cost (median, IQR)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def speedup_vs_k(table):
    """One panel per output length: measured speedup (IQR bars) and the T(n)-prediction against k,
    one colour per batch size; a star marks the dynamic rule at its median chosen k (table
    speedup_vs_k)."""
    lens = list(dict.fromkeys(table["output_len"]))
    fig, axes = new(5.4 * len(lens), 3.8, ncols=len(lens), squeeze=False, sharey=True)
    for ax, L in zip(axes[0], lens):
        for j, (B, g) in enumerate(table[table["output_len"] == L].groupby("batch", sort=False)):
            fx = g[g["config"] != "dynamic"]
            ax.errorbar(fx["k"], fx["speedup"], yerr=[fx["speedup"] - fx["q1"], fx["q3"] - fx["speedup"]], marker="o",
                        capsize=2, color=f"C{j}", label=f"measured, batch {B}")
            ax.plot(fx["k"], fx["predicted_ext"], ls="--", color=f"C{j}", label=f"predicted (T(n), c), batch {B}")
            dyn = g[g["config"] == "dynamic"]
            ax.plot(dyn["k"], dyn["speedup"], "*", ms=11, color=f"C{j}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xlabel="draft length k (star: dynamic rule at its median chosen k)", title=f"{L} new tokens")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over plain decoding")
    axes[0][-1].legend(fontsize=7)
    return fig


def time_breakdown(table):
    """Stacked median shares of the wall time per part, one bar per configuration (table
    time_breakdown, one output length and batch size)."""
    import numpy as np

    configs = list(dict.fromkeys(table["config"]))
    fig, ax = new(7.0, 3.8)
    bottom = np.zeros(len(configs))
    for part, g in table.groupby("part", sort=False):
        v = g.set_index("config").loc[configs, "share_of_total"].to_numpy()
        ax.bar(range(len(configs)), v, bottom=bottom, label=part)
        bottom += v
    ax.set_xticks(range(len(configs)), configs, rotation=45, fontsize=8)
    ax.set(ylabel="share of wall time (median)",
           title=f"Time breakdown, batch {table['batch'].iloc[0]}, {table['output_len'].iloc[0]} new tokens")
    ax.legend(fontsize=7, ncol=2)
    return fig


def real_size_speedup_vs_alpha(table):
    """One panel per real-size target: median measured speedup against the set alpha per k, with
    the T(n) prediction (dashed) and the idealized one (dotted) (table real_size_speedup_vs_alpha)."""
    names = list(dict.fromkeys(table["target"]))
    fig, axes = new(5.4 * len(names), 3.8, ncols=len(names), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], names):
        for j, (k, g) in enumerate(table[table["target"] == name].groupby("k", sort=False)):
            ax.plot(g["alpha_set"], g["speedup_median"], "o-", color=f"C{j}", label=f"k={k} measured")
            ax.plot(g["alpha_set"], g["predicted_ext"], "--", color=f"C{j}", label=f"k={k} predicted, T(n)")
            ax.plot(g["alpha_set"], g["predicted_toy"], ":", color=f"C{j}", label=f"k={k} idealized, T(n)=T(1)")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xlabel=r"acceptance probability $\alpha$ (set: instrumentation)", title=f"{name} shape, random weights")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over plain decoding")
    axes[0][-1].legend(fontsize=6, ncol=2)
    return fig


def gpu_cost_and_controlled(table, source: str):
    """Left: T(n)/T(1) per pair; then one panel per pair: measured controlled-acceptance speedup
    (solid) and the extended prediction (dashed) against the set alpha, per k (table
    gpu_cost_and_controlled).  ``source`` labels where the numbers come from (GPU or not)."""
    curve, ctrl = table[table["panel"] == "cost_curve"], table[table["panel"] == "controlled"]
    pairs = list(dict.fromkeys(curve["pair"]))
    fig, axes = new(4.6 * (1 + len(pairs)), 3.6, ncols=1 + len(pairs), squeeze=False)
    for p, g in curve.groupby("pair", sort=False):
        axes[0][0].plot(g["x"], g["measured"], "o-", label=f"{p} (c = {g['c'].iloc[0]:.3f})")
    axes[0][0].set(xlabel="new tokens n", ylabel="T(n) / T(1)", title="Verification cost")
    axes[0][0].legend(fontsize=7)
    for ax, p in zip(axes[0][1:], pairs):
        for j, (k, g) in enumerate(ctrl[ctrl["pair"] == p].groupby("k", sort=False)):
            ax.plot(g["x"], g["measured"], "o-", color=f"C{j}", label=f"k={k}")
            ax.plot(g["x"], g["predicted"], "--", color=f"C{j}")
        ax.axhline(1, color="black", lw=0.8)
        ax.set(xlabel=r"set acceptance $\alpha$ (instrumentation)", ylabel="speedup", title=p)
        ax.legend(fontsize=7)
    fig.suptitle(source, fontsize=9)
    fig.tight_layout()
    return fig


def gpu_batch_throughput(table, source: str):
    """Tokens/s over all rows against batch size, per pair and k (table gpu_batch_throughput)."""
    fig, ax = new(6.0, 3.6)
    for (p, k), g in table.groupby(["pair", "k"], sort=False):
        label = f"{p}, plain" if k == 0 else f"{p}, k={k}, alpha {g['alpha_set'].iloc[0]} (instrumentation)"
        ax.plot(g["batch"], g["tokens_per_s"], "o-", label=label)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="tokens/s, all rows", title=f"Throughput ({source})")
    ax.legend(fontsize=6)
    return fig
