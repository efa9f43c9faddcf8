"""A KV cache that appends in place: the lean forward's cache.

Why.  A DynamicCache appends a step's keys and values with ``torch.cat``, which copies every cached
slot of every layer on every forward: O(context) bytes per step and row.  What appending in place
saves is measured, paired, by chapter 10's time breakdown (`specdec.measure.step_split.forward_gain`).  `GrowCache` keeps each layer's keys and values in a buffer with
room to spare, writes a step's slots after the filled ones and hands the forward views of the filled
part: the same numbers in the same order as the concatenation, so attention computes the same
result (tested equal to the DynamicCache path, token for token and logit for logit).

What the engine's cache surgery sees is a DynamicCache (`GrowLayer` is a DynamicLayer): ``keys`` and
``values`` read as (rows, heads, filled, head_dim) tensors, and whatever the engine or transformers
assigns to them is taken as the new content.  An assignment of a leading slice of the buffer (a
DynamicLayer's ``crop``) only moves the fill mark; any other tensor (rows selected, a cache joined or
shifted by `specdec.engine.cache`) becomes the content, and the next append copies it into a buffer
of the layer's own (never writing into a tensor the caller may still hold), with room for twice the
slots (amortised O(1) per slot).  An append whose rows, heads or head size differ from the filled
content's raises: a concatenation would have refused it too.  ``capacity`` is the first
buffer's slot count (the engine passes the prompt plus what the run can append), so a batch-1 run
allocates once.  `specdec.engine.cache.kv_bytes` counts the buffers' bytes, spare room included.

Example: c = GrowCache(64); lean(model)(input_ids=ids, cache=c); c.get_seq_length() == ids.shape[1]
"""

from __future__ import annotations

import torch

__all__ = ["GrowCache", "GrowLayer"]


def _grow_cache_base():
    from transformers import DynamicCache  # the engine owns caches; imported where used

    return DynamicCache


def _layer_base():
    from transformers.cache_utils import DynamicLayer

    return DynamicLayer


class _Buffer:
    """One growable (rows, heads, slots, head_dim) tensor: ``buf`` with its first ``n`` slots filled."""

    __slots__ = ("buf", "n", "owned")

    def __init__(self):
        self.buf, self.n, self.owned = None, 0, False

    def view(self):
        return None if self.buf is None else self.buf[:, :, :self.n]

    def assign(self, value) -> None:
        if value is None:
            self.buf, self.n, self.owned = None, 0, False
        elif (self.buf is not None and value.dim() == 4 and value.data_ptr() == self.buf.data_ptr()
              and value.shape[:2] == self.buf.shape[:2] and value.shape[3] == self.buf.shape[3]
              and value.stride() == self.buf.stride() and value.shape[2] <= self.buf.shape[2]):
            self.n = int(value.shape[2])  # a leading slice of the buffer: a crop
        else:  # another tensor: its content, copied into a buffer of our own at the next append
            self.buf, self.n, self.owned = value, int(value.shape[2]) if value.dim() == 4 else 0, False

    def append(self, x: torch.Tensor, capacity: int) -> torch.Tensor:
        need = self.n + x.shape[2]
        buf = self.buf
        if self.n and (buf.shape[:2] != x.shape[:2] or buf.shape[3] != x.shape[3]):
            raise ValueError(f"cannot append keys or values of shape {tuple(x.shape)} to a cache holding "
                             f"{tuple(buf[:, :, :self.n].shape)}: rows, heads and head size must match")
        if buf is None or not self.owned or buf.shape[:2] != x.shape[:2] or need > buf.shape[2]:
            room = max(need, capacity, 2 * self.n)
            new = x.new_empty(x.shape[0], x.shape[1], room, x.shape[3])
            if self.n:
                new[:, :, :self.n].copy_(buf[:, :, :self.n])
            self.buf, self.owned = new, True
            buf = new
        buf[:, :, self.n:need].copy_(x)
        self.n = need
        return buf[:, :, :need]


class GrowLayer(_layer_base()):
    """A DynamicLayer whose ``update`` writes in place into a buffer (module docstring)."""

    def __init__(self, capacity: int = 0):
        self._k, self._v, self.capacity = _Buffer(), _Buffer(), int(capacity)
        super().__init__()

    keys = property(lambda self: self._k.view(), lambda self, value: self._k.assign(value))
    values = property(lambda self: self._v.view(), lambda self, value: self._v.assign(value))

    def lazy_initialization(self, key_states, value_states) -> None:
        self.device, self.is_initialized = key_states.device, True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        return self._k.append(key_states, self.capacity), self._v.append(value_states, self.capacity)

    def get_seq_length(self) -> int:
        return self._k.n if self.is_initialized else 0

    def allocated_bytes(self) -> int:
        """Bytes of the two buffers, spare slots included."""
        return sum(b.buf.numel() * b.buf.element_size() for b in (self._k, self._v) if b.buf is not None)


class GrowCache(_grow_cache_base()):
    """A DynamicCache whose layers are `GrowLayer` s of a first buffer of ``capacity`` slots."""

    def __init__(self, capacity: int):
        if not (isinstance(capacity, int) and capacity >= 0):
            raise ValueError(f"a GrowCache needs a capacity of 0 or more slots, got {capacity!r}")
        super().__init__()
        self.layer_class_to_replicate = lambda: GrowLayer(capacity)
