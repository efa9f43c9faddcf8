"""Every book figure drawn from the committed tables reads as intended: no two series of one panel
share a colour, and an axis of whole numbers (k, batch sizes, positions, counts) has whole-number
ticks only.  The checks (`style.shared_colours`, `fractional_ticks` below) are shown to catch a
planted bad figure first (the negative controls)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from specdec.report import plotting  # noqa: E402
from specdec.io.paths import RESULTS_DIR  # noqa: E402
from specdec.report.plotting.style import integer_axis, paired, shared_colours  # noqa: E402


def table(chapter: str, name: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS_DIR / chapter / f"{name}.csv")


def fractional_ticks(ax, which: str) -> list[float]:
    """The visible ticks of an axis that are not whole numbers."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    return [t for t in axis.get_majorticklocs() if lo <= t <= hi and not float(t).is_integer()]


def test_shared_colour_check_catches_two_series_in_one_colour_and_passes_shades():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], color="C0", label="measured")
    ax.plot([1, 2], [2, 3], "--", color="C0", label="predicted")
    ax.errorbar([1, 2], [1, 1], yerr=[0.1, 0.1], color="C1", capsize=2, label="with caps")  # caps are not series
    assert shared_colours(fig) == [(0, ["measured", "predicted"])]
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], color=paired(0, 0), label="measured")
    ax.plot([1, 2], [2, 3], "--", color=paired(0, 1), label="predicted")
    assert shared_colours(fig) == []
    plt.close(fig)


def test_integer_axis_check_catches_half_steps_and_integer_axis_removes_them():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 2, 3])
    assert fractional_ticks(ax, "x"), "matplotlib's default ticks 1.0, 1.25, ... should be caught"
    integer_axis(ax, "x")
    assert fractional_ticks(ax, "x") == []
    plt.close(fig)


def _preds():
    return table("06_measured_decoding", "prediction")


FIGURES = {  # name: (builder, integer axes as (panel index or "all", "x"/"y"))
    "mass_decomposition": (lambda: plotting.mass_decomposition(table("01_acceptance_and_residual", "mass_decomposition")),
                           [("all", "x")]),
    "replacement_rules": (lambda: plotting.replacement_rules(table("01_acceptance_and_residual", "replacement_rules"),
                                                             table("01_acceptance_and_residual", "replacement_tv")), []),
    "greedy_gaps": (lambda: plotting.greedy_gaps(table("01_acceptance_and_residual", "greedy_gaps")), []),
    "block_vs_token": (lambda: plotting.block_vs_token(table("02_distribution_tests", "block_vs_token")), [("all", "x")]),
    "frequency_tests": (lambda: plotting.frequency_tests(table("02_distribution_tests", "frequency_tests"), 0.02, 0.9, 99),
                        []),
    "speed_ratio_vs_alpha": (lambda: plotting.speed_ratio_vs_alpha(table("03_cost_model", "speed_ratio_vs_alpha"), 0.1,
                                                                   0.8, 2.4), []),
    "optimal_k_and_break_even": (lambda: plotting.optimal_k_and_break_even(
        table("03_cost_model", "optimal_k_and_break_even"), table("03_cost_model", "break_even_alpha"), 16),
        [(0, "y"), (1, "x")]),
    "beta_by_draft": (lambda: plotting.beta_by_draft(table("04_model_family", "beta_by_draft")), []),
    "acceptance_by_position": (lambda: plotting.acceptance_by_position(
        table("05_measured_acceptance", "acceptance_by_position"), 1.0, 0.95, 4), [("all", "x")]),
    "accepted_length_vs_geometric": (lambda: plotting.accepted_length_vs_geometric(
        table("05_measured_acceptance", "accepted_length_vs_geometric"),
        table("05_measured_acceptance", "acceptance_by_config")), [("all", "x")]),
    "predicted_vs_measured_length": (lambda: plotting.predicted_vs_measured_length(
        table("05_measured_acceptance", "predicted_vs_measured_length"), 4), []),
    "alpha_vs_temperature": (lambda: plotting.alpha_vs_temperature(
        table("05_measured_acceptance", "alpha_vs_temperature"), 0.9, 1.0, 4), []),
    "cost_curve": (lambda: plotting.cost_curve(table("06_measured_decoding", "cost_curve_before")
                                               .query("context == context.max()")), [("all", "x")]),
    "speedup_vs_k": (lambda: plotting.speedup_vs_k(table("06_measured_decoding", "summary"), _preds()), [("all", "x")]),
    "predicted_vs_measured": (lambda: plotting.predicted_vs_measured(_preds()), []),
    "time_breakdown": (lambda: plotting.time_breakdown(table("06_measured_decoding", "time_breakdown")), []),
    "real_size_speedup_vs_alpha": (lambda: plotting.real_size_speedup_vs_alpha(
        table("surface", "speedup_vs_alpha")), [(0, "y"), (1, "y")]),
    "regimes": (lambda: plotting.regimes(table("06_measured_decoding", "regimes"),
                                         table("06_measured_decoding", "regime_points")), []),
    "multidraft_acceptance": (lambda: plotting.multidraft_acceptance(table("08_alternatives", "multidraft")),
                              [("all", "x")]),
    "precision_tv": (lambda: plotting.precision_tv(table("08_alternatives", "precision").query("config == config.iloc[0]"),
                                                   1e-12), []),
    "measured_alternatives": (lambda: plotting.measured_alternatives(table("alternatives", "speedup"),
                                                                     table("alternatives", "acceptance")), [(1, "x")]),
    "latency_curves": (lambda: plotting.latency_curves(table("09_serving", "latency")), []),
    "speedup_vs_rate": (lambda: plotting.speedup_vs_rate(table("09_serving", "speedup")), []),
}


@pytest.mark.parametrize("name", FIGURES)
def test_book_figure_has_no_shared_colour_and_whole_number_ticks(name):
    build, integer_axes = FIGURES[name]
    fig = build()
    try:
        assert shared_colours(fig) == [], f"{name}: series sharing a colour"
        data_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
        for panel, which in integer_axes:
            for ax in data_axes if panel == "all" else [data_axes[panel]]:
                assert fractional_ticks(ax, which) == [], f"{name}: fractional ticks on a whole-number {which} axis"
    finally:
        plt.close(fig)
