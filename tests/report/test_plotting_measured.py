"""specdec.report.plotting.measured: every figure of chapters 04-05 draws every series visibly,
from small hand-made tables shaped as the chapters' tables."""

import pandas as pd
import pytest

from specdec.chapters.ch05 import tables as at
from specdec.report import plotting


def _summary():
    rows = []
    for draft in ("ngram", "draft-small"):
        for T, method, top_p, counts in ((0.0, "token", 1.0, "3 1 1"), (1.0, "token", 1.0, "2 1 2"),
                                         (1.0, "block", 1.0, "1 1 3"), (1.0, "token", 0.9, "2 2 1")):
            rows.append({"draft": draft, "temperature": T, "top_p": top_p, "method": method, "steps": 5,
                         "alpha_mle": 0.5, "alpha_lo": 0.4, "alpha_hi": 0.6, "el_measured": 2.0, "el_lo": 1.8,
                         "el_hi": 2.2, "el_pred_conditional": 1.9, "el_pred_independent": 1.7, "gof_p": 0.1,
                         "beta_pos_1": 0.5, "beta_pos_2": 0.4, "counts": counts})
    return pd.DataFrame(rows)


def _hidden(fig):
    import matplotlib.pyplot as plt

    hidden = [s for s in plotting.visible_series(fig) if not s[2]]
    plt.close(fig)
    return hidden


def test_beta_by_draft_is_visible():
    beta = pd.DataFrame({"draft": ["a", "a", "b", "b"], "temperature": [1.0, 0.0] * 2, "beta": [0.5, 0.3, 0.6, 0.4],
                         "se": [0.01] * 4, "contexts": [10] * 4, "windows": [2] * 4})
    assert not _hidden(plotting.beta_by_draft(beta))


@pytest.mark.parametrize("name", ["acceptance_by_position", "accepted_length_vs_geometric",
                                  "predicted_vs_measured_length", "alpha_vs_temperature"])
def test_measured_acceptance_figures_are_visible(name):
    s = _summary()
    fig = {"acceptance_by_position": lambda: plotting.acceptance_by_position(
               pd.DataFrame(at.position_rows(s, 1.0)), 1.0, 0.95, 2),
           "accepted_length_vs_geometric": lambda: plotting.accepted_length_vs_geometric(
               pd.DataFrame(at.geometric_rows(s, "draft-small")), s),
           "predicted_vs_measured_length": lambda: plotting.predicted_vs_measured_length(
               pd.DataFrame(at.predicted_rows(s)), 2),
           "alpha_vs_temperature": lambda: plotting.alpha_vs_temperature(
               pd.DataFrame(at.alpha_rows(s, 0.9)), 0.9, 1.0, 2)}[name]()
    assert fig.axes and not _hidden(fig)
