"""specdec.engine.modes.slots: the preallocated cache does the engine's surgery exactly as the growing one.

The compiled wrapper's forward is swapped for the eager one here (``_fwd``), so these tests pin the
cache and mask logic alone; tests/engine/test_compiled.py runs the compiled graphs."""

import pytest
import torch

from specdec.engine.cache import drop_leading_holes, join_caches
from specdec.engine.modes.compiled import CompiledModel
from specdec.engine.decode import generate
from specdec.engine.modes.slots import SlotCache


def _eager_slots(model, capacity=None):
    """A CompiledModel whose forward runs eager: the static-slot path without compiling; with
    `capacity`, every cache it makes starts that small (so the engine's runs must grow it)."""
    m = CompiledModel(model)
    m._fwd = m.inner.forward
    if capacity is not None:
        m.new_cache = lambda slots: SlotCache(m.inner.config, capacity)
    return m


def test_slot_cache_surgery_gives_the_logits_of_the_growing_cache(tiny_pair):
    """Two left-padded rows: prompt, 3 tokens, crop 2, a masked hole, 2 tokens, one row leaves, the
    leading slot nobody uses is dropped, 1 token.  At every forward the logits through a SlotCache
    (starting at 5 slots, so it must grow) equal those through a DynamicCache, and the host's slot
    count matches the layers' own."""
    from transformers import DynamicCache

    target = tiny_pair[0]
    slots, dyn, sm = SlotCache(target.config, 5), DynamicCache(), _eager_slots(target)
    g = torch.Generator().manual_seed(0)

    def both(ids, mask, pos):
        with torch.inference_mode():
            a = target(input_ids=ids, attention_mask=mask, position_ids=pos, cache=dyn, use_cache=True).logits
            b = sm(input_ids=ids, attention_mask=mask, position_ids=pos, cache=slots, use_cache=True).logits
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), (a - b).abs().max()
        assert slots.length == int(slots.layers[0].cumulative_length) == mask.shape[1]

    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    both(torch.randint(0, 64, (2, 4), generator=g), mask, torch.tensor([[0, 0, 1, 2], [0, 1, 2, 3]]))
    mask = torch.cat([mask, torch.ones(2, 3, dtype=torch.long)], 1)
    both(torch.randint(0, 64, (2, 3), generator=g), mask, torch.tensor([[3, 4, 5], [4, 5, 6]]))
    assert slots.capacity >= 7
    dyn.crop(-2), slots.crop(-2)
    mask = mask[:, :-2].clone()
    mask[1, -1] = 0  # row 1 rejected its last kept slot: a hole
    mask = torch.cat([mask, torch.ones(2, 2, dtype=torch.long)], 1)
    both(torch.randint(0, 64, (2, 2), generator=g), mask, torch.tensor([[4, 5], [4, 5]]))
    keep = torch.tensor([0])
    dyn.batch_select_indices(keep), slots.batch_select_indices(keep)
    mask = mask[keep]
    m_dyn, m_slots = drop_leading_holes(dyn, mask), drop_leading_holes(slots, mask)
    assert torch.equal(m_dyn, m_slots) and m_slots.shape[1] == mask.shape[1] - 1 == slots.length
    mask = torch.cat([m_slots, torch.ones(1, 1, dtype=torch.long)], 1)
    both(torch.randint(0, 64, (1, 1), generator=g), mask, torch.tensor([[6]]))
    assert slots.layers[0].keys.shape[0] == 1 and slots.batch_size == 1


def test_the_engine_on_a_growing_slot_cache_decodes_what_it_decodes_on_a_dynamic_one(tiny_pair):
    """Ragged prompts, sampled speculative decoding with per-row generators (rows accept different
    counts: masked holes), a stop token (rows leave at different steps), caches that start at 3
    slots: token for token the eager engine's run, target and draft both on SlotCaches."""
    from specdec.core.sampling import RowGenerators

    target, draft = tiny_pair
    prompts = [torch.tensor([3, 7, 1, 9, 4]), torch.tensor([5, 2, 8]), torch.tensor([11, 12])]

    def run(t, d):
        gens = RowGenerators([torch.Generator().manual_seed(10 + i) for i in range(3)])
        return generate(t, prompts, drafter=d, k=3, max_new_tokens=24, temperature=1.0, stop_token_ids=[9],
                        generator=gens, mode="eager")  # the models as given: only the cache differs

    eager = run(target, draft)
    slots = run(_eager_slots(target, 3), _eager_slots(draft, 3))
    assert [t.tolist() for t in slots.tokens] == [t.tolist() for t in eager.tokens]
    assert slots.finish == eager.finish
    lengths = {len(t) for t in eager.tokens}
    assert len(lengths) > 1, "the rows should leave at different steps (a stop token), or this tests less"
    assert slots.stats.kv_slots == eager.stats.kv_slots > 3


def test_slot_cache_refuses_what_it_cannot_do(tiny_pair):
    from transformers import DynamicCache

    cfg = tiny_pair[0].config
    with pytest.raises(ValueError, match="capacity of at least 1"):
        SlotCache(cfg, 0)
    c = SlotCache(cfg, 4)
    for bad in (1, -1):  # crop forward, or further back than it holds
        with pytest.raises(ValueError, match="negative count of at most its 0 slots"):
            c.crop(bad)
    with pytest.raises(ValueError, match="continuous batching needs caches that grow"):
        join_caches(c, DynamicCache(), 1, 1)
    with pytest.raises(ValueError, match="continuous batching needs caches that grow"):
        join_caches(DynamicCache(), c, 1, 1)
