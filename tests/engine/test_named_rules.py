"""The engine reaches a verification rule other than its own only when a caller passes it, and its
statistics then say whether the run kept the target's law: lossless rules that declare it, every
other verifier (approximate rules, the controlled-acceptance instrumentation) not."""

import pytest
import torch

from specdec.core.rules import alternatives
from specdec.core.rules import approximate
from specdec.engine.decode import generate
from specdec.measure.controlled import ControlledAcceptance


@pytest.mark.parametrize("verifier, lossless, name", [
    (None, True, "token"), (alternatives.MATCH, True, "match"), (approximate.typical(), False, "typical ε=0.09 δ=0.3"),
    (approximate.relaxed(0.5), False, "relaxed λ=0.5, standard residual"), (ControlledAcceptance(0.5), False, None)])
def test_run_statistics_say_whether_the_law_was_kept(tiny_pair, verifier, lossless, name):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(0))
    res = generate(target, ids, drafter=draft, k=3, max_new_tokens=10, generator=torch.Generator().manual_seed(1),
                   verifier=verifier)
    s = res.summary()
    assert s["lossless"] is lossless
    if name is not None:
        assert s["verifier"] == name
    assert all(len(t) == 10 for t in res.tokens)


def test_plain_and_default_runs_are_lossless(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))
    assert generate(target, ids, max_new_tokens=4).summary()["verifier"] == "autoregressive"
    s = generate(target, ids, drafter=draft, k=2, method="block", max_new_tokens=4).summary()
    assert s["lossless"] is True and s["verifier"] == "block"


def test_a_rule_sees_the_engine_p_and_q_and_greedy_runs_use_it(tiny_pair):
    """At temperature 0 the engine normally verifies greedily; a named rule still decides (typical
    acceptance keeps one-hot drafts that are the target's argmax, so the output is greedy)."""
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(2))
    plain = generate(target, ids, max_new_tokens=8, temperature=0).tokens[0]
    typ = generate(target, ids, drafter=draft, k=3, max_new_tokens=8, temperature=0, verifier=approximate.typical())
    assert torch.equal(typ.tokens[0], plain) and typ.summary()["lossless"] is False
