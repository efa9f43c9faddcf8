"""specdec.measure.controlled: the controlled-acceptance instrumentation accepts each draft with
probability alpha (a truncated-geometric accepted length), whatever p and q are."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.measure.controlled import ControlledAcceptance


def test_acceptance_rate_is_the_set_alpha(tiny_pair):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (5, 10), generator=torch.Generator().manual_seed(7))
    for alpha in (0.0, 0.5, 1.0):
        out = generate(target, prompts, drafter=draft, k=4, max_new_tokens=40, temperature=1.0,
                       generator=torch.Generator().manual_seed(1), verifier=ControlledAcceptance(alpha))
        pos = out.stats.acceptance_by_position()
        rate = pos[0]["accepted"] / pos[0]["proposed"]
        if alpha in (0.0, 1.0):
            assert rate == alpha
        else:  # ~60 first-position trials: 0.5 +- 4 sd
            assert abs(rate - alpha) < 4 * (alpha * (1 - alpha) / pos[0]["proposed"]) ** 0.5
        assert all(len(t) == 40 for t in out.tokens)


@pytest.mark.parametrize("alpha", [1.5, -0.1, "0.5", True])
def test_bad_alpha_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        ControlledAcceptance(alpha)
