"""specdec.core.frequency: the pooled TV by hand, and the design is the power calculation."""

import numpy as np
import pytest
import torch

from specdec.core.frequency import design, pooled_tv
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import sample_size
from specdec.core.toy import toy_pair

CFG = SamplingConfig(1.2, 3, 0.9)


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


def test_pooled_tv_by_hand():
    # cells 1 and 2 pooled: law [.4, .5] vs ref [.4, .6], plus the law's mass .1 on the impossible cell 3
    assert pooled_tv([0.4, 0.3, 0.2, 0.1], [0.4, 0.2, 0.4, 0.0], np.array([0, 1, 1])) == pytest.approx(0.1)
    # a difference inside a pool is invisible to the pooled test: TV 0.1 on all cells, 0 on the pooled ones
    assert pooled_tv([0.4, 0.3, 0.3, 0.0], [0.4, 0.2, 0.4, 0.0], np.array([0, 1, 1])) == pytest.approx(0.0)
    assert pooled_tv([0.4, 0.3, 0.3, 0.0], [0.4, 0.2, 0.4, 0.0], np.array([0, 1, 2])) == pytest.approx(0.1)


def test_design_is_the_power_calculation(pair):
    d = design(pair[0], 3, CFG, 0.1, 1e-3, 0.99)
    assert 1 < d["cells"] <= 4 ** 3 and d["samples"] == sample_size(0.1, d["cells"], 1e-3, 0.99)
