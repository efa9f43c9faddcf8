"""The load-aware draft length (`specdec.engine.schedule.LoadAware`): its written rule on histories,
and in the engine, where it sees the running batch of each step."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.engine.schedule import History, LoadAware


def test_rule_on_histories():
    rule = LoadAware(4, max_batch=4, min_alpha=0.3, min_judged=10, k_small=2, small_above=2)
    assert rule(History(running=8)) == 0  # 1. batch above max_batch: no drafts
    assert rule(History(running=1)) == 4
    assert rule(History(running=3)) == 2  # 3. shortened above small_above
    assert rule(History(running=1, accepted=2, stopped=9)) == 0  # 2. alpha 2/11 < 0.3 after 11 judged
    assert rule(History(running=1, accepted=2, stopped=5)) == 4  # only 7 judged: not yet
    assert rule(History(running=1, accepted=8, stopped=4)) == 4  # alpha 2/3


def test_drafting_stops_only_above_max_batch_not_at_it():
    """Rule 1 says "while the running batch exceeds max_batch": at running == max_batch the rule
    still drafts; one more row turns it off.  The same boundary for the shortening (rule 3): k_small
    only above small_above.  In the engine: 2 rows with max_batch = 2 draft every step."""
    rule = LoadAware(4, max_batch=3)
    assert [rule(History(running=r)) for r in (1, 2, 3, 4, 5)] == [4, 4, 4, 0, 0]
    short = LoadAware(4, max_batch=3, k_small=2, small_above=2)
    assert [short(History(running=r)) for r in (1, 2, 3, 4)] == [4, 4, 2, 0]


def test_engine_drafts_at_exactly_max_batch(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(0))
    res = generate(target, ids, drafter=draft, k=LoadAware(3, max_batch=2), max_new_tokens=8,
                   generator=torch.Generator().manual_seed(1))
    assert res.stats.steps[0]["active"] == 2 and res.stats.steps[0]["k"] == 3


@pytest.mark.parametrize("kw", [dict(k=0, max_batch=1), dict(k=2, max_batch=0), dict(k=2, max_batch=1, min_alpha=1.5),
                                dict(k=2, max_batch=1, k_small=3, small_above=1), dict(k=2, max_batch=1, k_small=1),
                                dict(k=2, max_batch=1, min_judged=0), dict(k=True, max_batch=1)])
def test_bad_parameters_are_named(kw):
    with pytest.raises(ValueError):
        LoadAware(**kw)


def test_engine_turns_speculation_off_above_the_batch_limit_and_on_below_it(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (4, 6), generator=torch.Generator().manual_seed(0))
    res = generate(target, ids, drafter=draft, k=LoadAware(3, max_batch=2), max_new_tokens=8,
                   generator=torch.Generator().manual_seed(1))
    assert all(s["k"] == 0 for s in res.stats.steps)  # 4 rows > 2 for the whole run: plain decoding
    one = generate(target, ids[:1], drafter=draft, k=LoadAware(3, max_batch=2), max_new_tokens=8,
                   generator=torch.Generator().manual_seed(1))
    assert one.stats.steps[0]["k"] == 3 and all(len(t) == 8 for t in one.tokens)
