"""Figures of the decoding chapters: measured cost curves and speedups on CPU (06), the GPU run's
tables (07).  Each takes the chapter's table(s) and labels; nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import new

__all__ = ["cost_curve", "speedup_vs_k", "predicted_vs_measured", "regimes", "time_breakdown",
           "real_size_speedup_vs_alpha", "gpu_cost_and_controlled", "gpu_batch_throughput"]


def cost_curve(curve):
    """T(n)/T(1) of the target per batch size with its interquartile range (table cost_curve),
    against the idealized model's T(n) = T(1)."""
    fig, ax = new(6.0, 3.6)
    target = curve[curve["model"] == "target"]
    if "when" in target:
        target = target[target["when"] == "before"]
    keys = ["batch", "context"] if "context" in target else ["batch"]
    for key, g in target.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        t1 = float(g.loc[g["n"] == 1, "median_s"].iloc[0])
        ax.errorbar(g["n"], g["ratio"], yerr=[(g["median_s"] - g["q1_s"]) / t1, (g["q3_s"] - g["median_s"]) / t1],
                    marker="o", capsize=2, label=", ".join(f"{k} {v}" for k, v in zip(keys, key)))
    ns = sorted(target["n"].unique())
    ax.plot(ns, [1] * len(ns), "k--", lw=0.8, label="cost model: T(n) = T(1)")
    ax.set(xlabel="new tokens n per target forward", ylabel="T(n) / T(1)",
           title="Measured verification cost (median, IQR)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _cell(temperature: float, batch: int) -> str:
    """A legend label for a (temperature, batch) cell: "greedy, batch 1" or "τ=1, batch 8"."""
    return f"{'greedy' if temperature == 0 else f'τ={temperature:g}'}, batch {batch}"


def speedup_vs_k(summary, predictions):
    """One panel per output length: the measured end-to-end speedup with its 95% interval against
    k, one colour per (temperature, batch), and the cost model's steady-state prediction dashed;
    a star marks the dynamic rule at its median chosen k (tables summary, prediction_summary)."""
    lens = list(dict.fromkeys(summary["output_len"]))
    fig, axes = new(5.4 * len(lens), 3.8, ncols=len(lens), squeeze=False, sharey=True)
    for ax, L in zip(axes[0], lens):
        sel = summary[summary["output_len"] == L]
        for j, ((T, B), g) in enumerate(sel.groupby(["temperature", "batch"], sort=False)):
            lab = _cell(T, B)
            fx = g[g["config"].str.startswith("k=")]
            err = [fx["speedup"] - fx["speedup_lo"], fx["speedup_hi"] - fx["speedup"]]
            ax.errorbar(fx["k"], fx["speedup"], yerr=err, marker="o", capsize=2, color=f"C{j}", label=f"measured, {lab}")
            p = predictions[(predictions["output_len"] == L) & (predictions["temperature"] == T)
                            & (predictions["batch"] == B) & predictions["config"].str.startswith("k=")]
            ax.plot(p["k"], p["predicted"], ls="--", color=f"C{j}", label=f"predicted, {lab}")
            dyn = g[g["config"] == "dynamic"]
            ax.plot(dyn["k_chosen"], dyn["speedup"], "*", ms=11, color=f"C{j}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xlabel="draft length k (star: dynamic rule at its median chosen k)", title=f"{L} new tokens")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over plain decoding (95% CI)")
    axes[0][-1].legend(fontsize=6)
    return fig


def predicted_vs_measured(predictions, tolerance: float = 0.10):
    """Measured against predicted steady-state speedup, both with their 95% intervals, one marker
    per configuration, the diagonal and the +-tolerance band (table prediction_summary)."""
    import numpy as np

    fig, ax = new(5.2, 4.6)
    for j, ((T, B), g) in enumerate(predictions.groupby(["temperature", "batch"], sort=False)):
        xerr = [g["predicted"] - g["predicted_lo"], g["predicted_hi"] - g["predicted"]]
        ax.errorbar(g["predicted"], g["measured"], xerr=xerr,
                    yerr=[g["measured"] - g["measured_lo"], g["measured_hi"] - g["measured"]], fmt="o", ms=4, capsize=2,
                    color=f"C{j}", label=_cell(T, B))
    lo = float(min(predictions["predicted_lo"].min(), predictions["measured_lo"].min())) * 0.95
    hi = float(max(predictions["predicted_hi"].max(), predictions["measured_hi"].max())) * 1.05
    x = np.linspace(lo, hi, 2)
    ax.plot(x, x, "k-", lw=0.8, label="measured = predicted")
    ax.fill_between(x, (1 - tolerance) * x, (1 + tolerance) * x, color="grey", alpha=0.2,
                    label=f"within {tolerance:.0%}")
    ax.set(xlabel="predicted steady-state speedup", ylabel="measured steady-state speedup",
           title="The cost model against every configuration")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def regimes(curves, points):
    """The article's speed-ratio picture with measured verification costs: per pair the best speed
    ratio over k against alpha (table regimes), its break-even alpha dotted; the measured
    configurations placed on it (table regime_points: alpha, measured speedup and interval, pair)."""
    import numpy as np

    fig, ax = new(6.4, 4.2)
    for j, (pair, g) in enumerate(curves.groupby("pair", sort=False)):
        be = float(g["break_even"].iloc[0])
        ax.plot(g["alpha"], g["speedup"], "-", color=f"C{j}",
                label=f"{pair}: T(2)/T(1) = {g['t2_ratio'].iloc[0]:.2f}, c = {g['c'].iloc[0]:.3f}, "
                      f"break-even alpha {'none' if not np.isfinite(be) else format(be, '.2f')}")
        if np.isfinite(be):
            ax.axvline(be, color=f"C{j}", ls=":", lw=0.8)
        pts = points[points["pair"] == pair]
        if len(pts):
            ax.errorbar(pts["alpha"], pts["speedup"], yerr=[pts["speedup"] - pts["lo"], pts["hi"] - pts["speedup"]],
                        fmt="o", ms=4, capsize=2, color=f"C{j}", label=f"{pair}: measured configurations")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set(xlabel=r"acceptance $\alpha$", ylabel="speed ratio over plain decoding (best k)",
           title="Which regime each measured pair is in")
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
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
    """One panel per (real-size target, batch size): the median measured speedup against the set
    alpha per k with its 95% interval, and the T(n) prediction (dashed); the idealized prediction
    dotted for the shortest and longest k only, to keep the panel legible (table
    real_size_speedup_vs_alpha)."""
    panels = list(dict.fromkeys(zip(table["target"], table["batch"])))
    fig, axes = new(4.8 * len(panels), 3.8, ncols=len(panels), squeeze=False, sharey=True)
    for ax, (name, B) in zip(axes[0], panels):
        sel = table[(table["target"] == name) & (table["batch"] == B)]
        ks = sorted(sel["k"].unique())
        for j, k in enumerate(ks):
            g = sel[sel["k"] == k].sort_values("alpha_set")
            err = [g["speedup_median"] - g["speedup_lo"], g["speedup_hi"] - g["speedup_median"]]
            ax.errorbar(g["alpha_set"], g["speedup_median"], yerr=err, fmt="o-", ms=3, capsize=2, color=f"C{j}",
                        label=f"k={k}")
            ax.plot(g["alpha_set"], g["predicted_ext"], "--", color=f"C{j}", lw=0.8)
            if k in (ks[0], ks[-1]):
                ax.plot(g["alpha_set"], g["predicted_toy"], ":", color=f"C{j}", lw=0.8)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xlabel=r"acceptance probability $\alpha$ (set: instrumentation)",
               title=f"{name} shape, random weights, batch {B}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speedup over plain decoding (95% CI)\ndashed: T(n) prediction; dotted: idealized")
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
