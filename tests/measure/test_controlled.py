"""specdec.measure.controlled: the controlled-acceptance instrumentation accepts each draft with
probability alpha (a truncated-geometric accepted length), whatever p and q are."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.measure.controlled import ControlledAcceptance, controlled_steps


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


@pytest.mark.parametrize("alpha,k,batch,new", [(0.5, 2, 1, 12), (0.9, 4, 3, 11), (0.3, 1, 4, 7), (0.8, 9, 2, 40),
                                                (1.0, 3, 2, 6)])
def test_a_seeded_instruments_steps_are_computed_without_a_model(tiny_pair, alpha, k, batch, new):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (batch, 10), generator=torch.Generator().manual_seed(3))
    out = generate(target, prompts, drafter=draft, k=k, max_new_tokens=new, temperature=1.0,
                   generator=torch.Generator().manual_seed(1), verifier=ControlledAcceptance(alpha, seed=11))
    ran = [(s["k"], s["active"], s["emitted"]) for s in out.stats.steps]
    assert controlled_steps(alpha, k, batch, new, seed=11) == ran  # k = 9: the engine's cap binds too
    assert controlled_steps(alpha, k, batch, new, seed=12) != ran or alpha == 1.0  # the seed decides them


def test_a_seeded_instrument_draws_apart_from_the_runs_generator(tiny_pair):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(3))
    runs = [generate(target, prompts, drafter=draft, k=3, max_new_tokens=16, temperature=1.0,
                     generator=torch.Generator().manual_seed(g), verifier=ControlledAcceptance(0.6, seed=5))
            for g in (1, 2)]
    assert [s["emitted"] for s in runs[0].stats.steps] == [s["emitted"] for s in runs[1].stats.steps]
    assert runs[0].tokens[0].tolist() != runs[1].tokens[0].tolist()  # the tokens still follow the run's generator
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            ControlledAcceptance(0.5, seed=bad)
    with pytest.raises(ValueError, match=">= 1"):
        controlled_steps(0.5, 0, 1, 4, seed=0)
