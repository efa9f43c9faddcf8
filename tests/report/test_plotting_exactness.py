"""The exactness chapters' figures (`specdec.report.plotting.exactness`): drawn from small tables
built by the chapters' own functions, every series visible (hollow markers carry an edge colour)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from specdec.core.sampling import SamplingConfig  # noqa: E402
from specdec.core.toy import toy_pair  # noqa: E402
from specdec.chapters.ch02 import frequency_tests
from specdec.chapters.ch01 import one_step
from specdec.chapters.ch02 import sequence_laws  # noqa: E402
from specdec.report import plotting  # noqa: E402
from specdec.report.formatting import config_label  # noqa: E402
from specdec.report.plotting import visible_series  # noqa: E402

CFG = SamplingConfig(1.2, 3, 0.9)


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


def _all_visible(fig):
    series = visible_series(fig)
    plt.close(fig)
    assert series and all(seen for _, _, seen in series), series
    return series


def test_chapter_01_figures_are_visible():
    p, q = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(0))
    mass = pd.DataFrame(one_step.mass_decomposition_rows(one_step.per_token_rows(p, q)))
    _all_visible(plotting.mass_decomposition(mass))
    laws = one_step.replacement_laws(p, q)
    series = _all_visible(plotting.replacement_rules(pd.DataFrame(one_step.replacement_rule_rows(laws, p)),
                                                     pd.DataFrame(one_step.replacement_tv_rows(laws, p))))
    assert sum(kind == "bars" for kind, _, _ in series) == len(laws)


def test_exact_laws_scatter_draws_every_series_with_its_own_marker(pair):
    laws = pd.DataFrame(sequence_laws.law_scatter_rows(*pair, 3, 2, CFG))
    fig = plotting.exact_laws_scatter(laws, 3, 2, config_label(CFG))
    colls = fig.axes[0].collections
    assert [c.get_label() for c in colls] == list(dict.fromkeys(laws["algorithm"]))
    assert len({tuple(c.get_edgecolor()[0]) for c in colls}) == len(colls)  # distinct edge colours
    assert len({c.get_paths()[0].vertices.tobytes() for c in colls}) == len(colls)  # distinct markers
    assert "All 64 sequences of 3 tokens, k = 2" in fig.axes[0].get_title()
    _all_visible(fig)


def test_frequency_and_block_figures_are_visible(pair):
    freq = pd.DataFrame(frequency_tests.frequency_test_rows(*pair, 2, 1, CFG, 0.2, 1e-3, 0.9, seed=1))
    _all_visible(plotting.frequency_tests(freq, 0.2, 0.9, 99.0))
    blocks = pd.DataFrame(sequence_laws.block_vs_token_rows(*pair, [1, 2], CFG))
    series = _all_visible(plotting.block_vs_token(blocks))
    assert len(series) == 4  # token and block, two panels
