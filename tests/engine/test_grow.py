"""specdec.engine.modes.grow: the lean forward's in-place cache computes what a DynamicCache computes
(the same numbers, bit for bit), survives every cache surgery of the engine, and a planted fault in it
is caught by the same checks."""

import pytest
import torch

from specdec.engine.cache import drop_leading_holes, join_caches, kv_bytes
from specdec.engine.continuous import Job, serve
from specdec.engine.decode import generate
from specdec.engine.modes.grow import GrowCache, _Buffer
from specdec.engine.modes.lean import LeanGPT2, lean


def _logits(model, cache):
    """A left-padded prefill of two rows, one fed token, three fed tokens with a hole (a rejected
    draft's slot), a crop of the last two slots and one more token, on ``cache``."""
    rows = torch.tensor([[0, 0, 5, 9, 3], [4, 8, 1, 7, 2]])
    m = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    feeds = [(torch.tensor([[6], [11]]), torch.ones(2, 1, dtype=torch.long)),
             (torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[1, 1, 1], [1, 0, 1]])),
             ("crop", 2), (torch.tensor([[9], [10]]), torch.ones(2, 1, dtype=torch.long))]
    out = []
    with torch.inference_mode():
        out.append(model(input_ids=rows, attention_mask=m, position_ids=(m.cumsum(1) - 1).clamp(min=0),
                         cache=cache, use_cache=True).logits)
        for ids, cols in feeds:
            if isinstance(ids, str):  # ("crop", n)
                cache.crop(-cols)
                m = m[:, :-cols]
                continue
            start = m.sum(1, keepdim=True)
            m = torch.cat([m, cols], 1)
            p = start + (cols.cumsum(1) - 1).clamp(min=0)
            out.append(model(input_ids=ids, attention_mask=m, position_ids=p, cache=cache, use_cache=True).logits)
    return out


@pytest.mark.parametrize("capacity", [0, 3, 64])
def test_grow_cache_logits_equal_a_dynamic_caches_bit_for_bit(tiny_pair, capacity):
    """Whatever the first capacity (none, less than the prompt, all the run needs), every forward's logits
    are those of the same forward on a DynamicCache, exactly: the same numbers reach attention."""
    from transformers import DynamicCache

    lm = lean(tiny_pair[0])
    for a, b in zip(_logits(lm, DynamicCache()), _logits(lm, GrowCache(capacity))):
        assert torch.equal(a, b)


def test_the_lean_forward_decodes_on_a_grow_cache_and_tokens_equal_the_dynamic_caches(tiny_pair, monkeypatch):
    """generate (ragged batch of three, k = 3, sampled) and continuous serving give the same tokens on the
    GrowCache the lean forward hands the engine as on a DynamicCache (new_cache removed)."""
    target, draft = tiny_pair
    prompts = [torch.tensor([3, 7, 1]), torch.tensor([4, 8, 1, 7, 2]), torch.tensor([9, 9, 2, 6])]

    def runs():
        g = generate(lean(target), prompts, drafter=lean(draft), k=3, max_new_tokens=20,
                     temperature=1.0, generator=torch.Generator().manual_seed(2))
        jobs = [Job(torch.tensor([3, 7, 1, 9][:n + 1]), 12, 0.0, n) for n in range(3)]
        s = serve(lean(target), jobs, drafter=lean(draft), k=2, max_batch=2, temperature=1.0)
        return [t.tolist() for t in g.tokens], [list(r["tokens"]) for r in s.requests]

    assert isinstance(lean(target).new_cache(8), GrowCache)
    grown = runs()
    monkeypatch.delattr(LeanGPT2, "new_cache")
    assert grown == runs()


def test_surgery_crop_select_drop_join_and_growth_keep_the_content():
    """A crop moves the fill mark in place (no copy); rows selected, leading slots dropped and caches
    joined become the new content; an append past the buffer reallocates with the old slots kept;
    kv_bytes counts the buffers, spare slots included."""
    c = GrowCache(4)
    k1 = torch.randn(2, 1, 3, 2)
    c.update(k1, k1 + 1, 0)
    layer = c.layers[0]
    ptr = layer.keys.data_ptr()
    assert layer.get_seq_length() == 3 and kv_bytes(c) == 2 * (2 * 1 * 4 * 2) * 4
    c.crop(-1)
    assert layer.get_seq_length() == 2 and layer.keys.data_ptr() == ptr and torch.equal(layer.keys, k1[:, :, :2])
    k2 = torch.randn(2, 1, 5, 2)  # 2 + 5 > 4 slots: reallocates, keeps the first 2
    keys, values = c.update(k2, k2 + 1, 0)
    assert torch.equal(keys, torch.cat([k1[:, :, :2], k2], 2)) and torch.equal(values, keys + 1)
    c.batch_select_indices(torch.tensor([1]))
    assert torch.equal(layer.keys, torch.cat([k1[1:, :, :2], k2[1:]], 2))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    assert drop_leading_holes(c, mask).tolist() == [[1, 1, 1, 1, 1]] and torch.equal(layer.keys, k2[1:])
    other = GrowCache(2)
    k3 = torch.randn(1, 1, 2, 2)
    other.update(k3, k3, 0)
    joined = join_caches(c, other, 1, 1)
    assert joined.layers[0].keys.shape == (2, 1, 5, 2) and torch.equal(joined.layers[0].keys[1, :, 3:], k3[0])
    k4 = torch.randn(2, 1, 1, 2)
    assert torch.equal(joined.update(k4, k4, 0)[0][:, :, -1:], k4)


def test_a_planted_fault_in_the_buffer_is_caught(tiny_pair, monkeypatch):
    """Negative control: a buffer that forgets its filled slots when it grows (the classic realloc bug)
    changes the logits, and the equality check above sees it."""
    from transformers import DynamicCache

    def forgetful(self, x, capacity):
        if self.buf is not None and self.n + x.shape[2] > self.buf.shape[2]:
            self.buf, self.n = None, self.n  # drops the content, keeps the count
            new = x.new_zeros(x.shape[0], x.shape[1], self.n + x.shape[2], x.shape[3])
            new[:, :, self.n:] = x
            self.buf, self.n = new, self.n + x.shape[2]
            return new
        return original(self, x, capacity)

    original = _Buffer.append
    monkeypatch.setattr(_Buffer, "append", forgetful)
    lm = lean(tiny_pair[0])
    pairs = list(zip(_logits(lm, DynamicCache()), _logits(lm, GrowCache(5))))
    assert torch.equal(*pairs[0]) and not all(torch.equal(a, b) for a, b in pairs)


@pytest.mark.parametrize("capacity", [-1, 2.5, "8"])
def test_a_bad_capacity_is_named(capacity):
    with pytest.raises(ValueError, match="capacity of 0 or more slots"):
        GrowCache(capacity)


def test_reset_reorder_repeat_and_an_adopted_tensor_left_untouched():
    """transformers' reset, reorder_cache and batch_repeat_interleave act as on a DynamicCache; a tensor
    assigned to a layer is content, never a buffer later appends write into (the caller may hold it)."""
    c = GrowCache(8)
    k = torch.randn(2, 1, 3, 2)
    c.update(k, k, 0)
    layer = c.layers[0]
    layer.reorder_cache(torch.tensor([1, 0]))
    assert torch.equal(layer.keys, k.flip(0))
    layer.batch_repeat_interleave(2)
    assert layer.keys.shape == (4, 1, 3, 2) and torch.equal(layer.keys[1], k[1])
    held = torch.randn(4, 1, 3, 2)
    kept = held.clone()
    layer.keys = layer.values = held
    c.crop(-1)
    x = torch.randn(4, 1, 1, 2)
    keys, _ = c.update(x, x, 0)
    assert torch.equal(held, kept) and torch.equal(keys, torch.cat([kept[:, :, :2], x], 2))
    layer.reset()
    assert layer.keys is None and layer.get_seq_length() == 0


def test_an_append_that_does_not_fit_the_content_is_refused():
    """Rows, heads or head size that differ from what the layer holds raise (a concatenation would too),
    never a silent broadcast of one row over many."""
    c = GrowCache(8)
    one = torch.randn(1, 1, 3, 2)
    c.update(one, one, 0)
    for bad in (torch.randn(3, 1, 1, 2), torch.randn(1, 2, 1, 2), torch.randn(1, 1, 1, 4)):
        with pytest.raises(ValueError, match="rows, heads and head size must match"):
            c.update(bad, bad, 0)
