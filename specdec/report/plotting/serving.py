"""Figures of chapter 09 (continuous batching).  Each takes the chapter's table(s); nothing is computed here."""

from __future__ import annotations

from specdec.report.plotting.style import new

__all__ = ["latency_curves", "speedup_vs_rate"]


def _by_policy(df):
    return [(name, g.sort_values("rate")) for name, g in df.groupby("policy", sort=False)]


def latency_curves(lat):
    """Throughput-latency: mean end-to-end latency (left) and p95 time per output token (right) against
    the achieved tokens/s, one point per arrival rate, one line per policy (table latency)."""
    fig, axes = new(10.0, 3.9, ncols=2)
    for j, (name, g) in enumerate(_by_policy(lat)):
        for ax, col in zip(axes, ("e2e_mean_s", "tpot_p95_s")):
            ax.plot(g["serve_tokens_per_s"], 1000 * g[col], marker="o", color=f"C{j}", label=name)
    axes[0].set(xlabel="throughput (tokens/s)", ylabel="mean end-to-end latency (ms)",
                title="Latency against throughput, light load (left) to a burst (right)")
    axes[1].set(xlabel="throughput (tokens/s)", ylabel="p95 time per output token (ms)", title="Time per output token")
    for ax in axes:
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return fig


def speedup_vs_rate(speed, title: str = "Latency speedup against the arrival rate"):
    """Latency speedup over plain decoding (plain's mean end-to-end latency / the policy's) with its 95%
    interval against the arrival rate, one series per policy; the break-even level 1 (table speedup).
    The title is the caller's; the finding belongs in the chapter's caption."""
    fig, ax = new(6.8, 4.0)
    for j, (name, g) in enumerate(_by_policy(speed)):
        x = g["rate"] * (1.0 + 0.06 * (j - 1))  # side by side at each rate
        ax.errorbar(x, g["latency_speedup"], yerr=[g["latency_speedup"] - g["latency_lo"],
                                                   g["latency_hi"] - g["latency_speedup"]],
                    marker="o", capsize=3, color=f"C{j + 1}", label=name)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set(xlabel="arrival rate (requests/s)", ylabel="latency speedup over plain decoding",
           title=title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig
