"""Figures of the decoding chapters: measured cost curves and speedups on CPU (06), the GPU run's
tables (07).  Each takes the chapter's table(s) and labels; nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import integer_axis, new, paired

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
    integer_axis(ax, "x")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _cell(temperature: float, batch: int) -> str:
    """A legend label for a (temperature, batch) cell: "greedy, batch 1" or "τ=1, batch 8"."""
    return f"{'greedy' if temperature == 0 else f'τ={temperature:g}'}, batch {batch}"


def speedup_vs_k(summary, predictions):
    """One panel per output length: the measured end-to-end speedup with its 95% interval against
    k, one hue per (temperature, batch): measured dark, the dynamic rule at its median chosen k a
    star in the middle shade, the cost model's steady-state prediction dashed in the lightest
    (tables summary, prediction_summary)."""
    lens = list(dict.fromkeys(summary["output_len"]))
    fig, axes = new(5.4 * len(lens), 3.8, ncols=len(lens), squeeze=False, sharey=True)
    for ax, L in zip(axes[0], lens):
        sel = summary[summary["output_len"] == L]
        for j, ((T, B), g) in enumerate(sel.groupby(["temperature", "batch"], sort=False)):
            lab = _cell(T, B)
            fx = g[g["config"].str.startswith("k=")]
            err = [fx["speedup"] - fx["speedup_lo"], fx["speedup_hi"] - fx["speedup"]]
            ax.errorbar(fx["k"], fx["speedup"], yerr=err, marker="o", capsize=2, color=paired(j, 0, 3),
                        label=f"measured, {lab}")
            p = predictions[(predictions["output_len"] == L) & (predictions["temperature"] == T)
                            & (predictions["batch"] == B) & predictions["config"].str.startswith("k=")]
            ax.plot(p["k"], p["predicted"], ls="--", color=paired(j, 2, 3), label=f"predicted, {lab}")
            dyn = g[g["config"] == "dynamic"]
            ax.plot(dyn["k_chosen"], dyn["speedup"], "*", ms=11, color=paired(j, 1, 3), label=f"dynamic rule, {lab}")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xlabel="draft length k (star: dynamic rule at its median chosen k)", title=f"{L} new tokens")
        integer_axis(ax, "x")
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
    """The article's speed-ratio picture with measured verification costs: per pair (one hue) the
    best speed ratio over k against alpha (table regimes, dark), its break-even alpha dotted
    (lightest); the measured configurations placed on it (table regime_points: alpha, measured
    speedup and interval, pair; middle shade)."""
    import numpy as np

    fig, ax = new(6.4, 4.2)
    for j, (pair, g) in enumerate(curves.groupby("pair", sort=False)):
        be = float(g["break_even"].iloc[0])
        ax.plot(g["alpha"], g["speedup"], "-", color=paired(j, 0, 3),
                label=f"{pair}: T(2)/T(1) = {g['t2_ratio'].iloc[0]:.2f}, c = {g['c'].iloc[0]:.3f}, "
                      f"break-even alpha {'none' if not np.isfinite(be) else format(be, '.2f')}")
        if np.isfinite(be):
            ax.axvline(be, color=paired(j, 2, 3), ls=":", lw=1.2)
        pts = points[points["pair"] == pair]
        if len(pts):
            ax.errorbar(pts["alpha"], pts["speedup"], yerr=[pts["speedup"] - pts["lo"], pts["hi"] - pts["speedup"]],
                        fmt="o", ms=4, capsize=2, color=paired(j, 1, 3), label=f"{pair}: measured configurations")
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
    """One heatmap per (real-size target, batch size): the median measured speedup over plain
    decoding for every (set alpha, k), coloured on a scale centred at 1 (blue: faster, red: slower)
    and written in each cell, with "+" where the 95% interval lies above 1, "-" where it lies below,
    nothing where it is undecided (`make surface`'s speedup_vs_alpha: target, batch, k, alpha_set,
    speedup_median, speedup_lo, speedup_hi).  The predictions are in the table, not drawn: a
    surface of 40 cells reads as numbers, not as 16 overlapping curves."""
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    panels = list(dict.fromkeys(zip(table["target"], table["batch"])))
    alphas = sorted(table["alpha_set"].unique())
    ks = sorted(int(k) for k in table["k"].unique())
    values = table["speedup_median"].to_numpy(float)
    spread = max(float(np.nanmax(np.abs(values - 1.0))), 0.05)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=1.0 - spread, vmax=1.0 + spread)
    fig, axes = new(0.9 * len(alphas) * len(panels) + 1.6, 0.42 * len(ks) + 1.4, ncols=len(panels), squeeze=False,
                    layout="constrained")
    for ax, (name, B) in zip(axes[0], panels):
        sel = table[(table["target"] == name) & (table["batch"] == B)]
        grid = sel.pivot_table(index="k", columns="alpha_set", values="speedup_median").reindex(index=ks, columns=alphas)
        lo = sel.pivot_table(index="k", columns="alpha_set", values="speedup_lo").reindex(index=ks, columns=alphas)
        hi = sel.pivot_table(index="k", columns="alpha_set", values="speedup_hi").reindex(index=ks, columns=alphas)
        image = ax.imshow(grid.to_numpy(float), cmap="RdBu", norm=norm, aspect="auto", origin="lower")
        for i in range(len(ks)):
            for j in range(len(alphas)):
                v = grid.iat[i, j]
                if v != v:
                    continue
                mark = "+" if lo.iat[i, j] > 1 else "-" if hi.iat[i, j] < 1 else ""
                ax.text(j, i, f"{v:.2f}{mark}", ha="center", va="center", fontsize=7,
                        color="white" if abs(norm(v) - 0.5) > 0.35 else "black")
        ax.set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
        ax.set_yticks(range(len(ks)), [str(k) for k in ks])
        ax.set(xlabel=r"set acceptance $\alpha$ (instrumentation)", ylabel="draft length k",
               title=f"{name} shape, random weights, batch {B}")
    fig.colorbar(image, ax=list(axes[0]), label="median speedup over plain decoding", shrink=0.9)
    fig.suptitle("Measured speedup over (alpha, k); + faster, - slower (95% interval), blank mark: undecided",
                 fontsize=9)
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
    integer_axis(axes[0][0], "x")
    axes[0][0].legend(fontsize=7)
    for ax, p in zip(axes[0][1:], pairs):
        for j, (k, g) in enumerate(ctrl[ctrl["pair"] == p].groupby("k", sort=False)):
            ax.plot(g["x"], g["measured"], "o-", color=paired(j, 0), label=f"k={k}")
            ax.plot(g["x"], g["predicted"], "--", color=paired(j, 1), label=f"k={k}, predicted")
        ax.axhline(1, color="black", lw=0.8)
        ax.set(xlabel=r"set acceptance $\alpha$ (instrumentation)", ylabel="speedup", title=p)
        ax.legend(fontsize=7)
    fig.suptitle(source, fontsize=9)
    fig.tight_layout()
    return fig


def gpu_batch_throughput(table, source: str):
    """Tokens/s over all rows against batch size, per pair and k (table gpu_batch_throughput)."""
    import matplotlib

    fig, ax = new(6.0, 3.6)
    colours = matplotlib.colormaps["tab20"].colors  # up to 20 series, none sharing a colour
    for i, ((p, k), g) in enumerate(table.groupby(["pair", "k"], sort=False)):
        label = f"{p}, plain" if k == 0 else f"{p}, k={k}, alpha {g['alpha_set'].iloc[0]} (instrumentation)"
        ax.plot(g["batch"], g["tokens_per_s"], "o-", color=colours[i % len(colours)], label=label)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="tokens/s, all rows", title=f"Throughput ({source})")
    batches = sorted(int(b) for b in table["batch"].unique())
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.legend(fontsize=6)
    return fig
