"""A preallocated KV cache that does the engine's cache surgery in place: the compiled mode's cache.

`SlotCache` is transformers' StaticCache (per layer, keys and values of shape (rows, heads, capacity,
head_dim), written in place at a running slot count) with what the engine's ragged scheme
(`specdec.engine.decode`) asks of a cache besides `update`:

  * ``crop(-n)``: StaticCache's own -- the count goes back by n; the stale slots are overwritten by
    the next write and never attended to in between (the causal mask stops at the query's slot);
  * ``batch_select_indices(rows)``: finished rows leave (a new, smaller buffer);
  * ``drop_leading(n)``: the first n slots go, the rest shift left in place;
  * ``reserve(width)``: capacity for ``width`` slots; growing reallocates (x2; a new buffer shape, so a
    compiled forward compiles once more -- `specdec.engine.modes.compiled` counts graphs).

``length`` is the slot count kept on the host as a Python int (the layers keep theirs as tensors), so
the compiled wrapper checks what the engine feeds against it with no device sync.

Why static: with the buffer's shape fixed, the attention mask padded to the capacity and the write
position a tensor, every decoding step of the same (rows, fed tokens, capacity) has identical
shapes, so ``torch.compile(dynamic=False)`` builds one specialised graph for it and reuses it.

Example: c = SlotCache(model.config, 96); model(input_ids=ids, cache=c, ...); c.crop(-2); c.length
"""

from __future__ import annotations

import torch

__all__ = ["SlotCache"]


def _static_cache():
    from transformers import StaticCache  # the engine owns caches; imported where used

    return StaticCache


class SlotCache(_static_cache()):
    """StaticCache(config, max_cache_len=capacity) with the engine's surgery (module docstring)."""

    def __init__(self, config, capacity: int):
        if not (isinstance(capacity, int) and capacity >= 1):
            raise ValueError(f"a SlotCache needs a capacity of at least 1 slot, got {capacity!r}")
        super().__init__(config=config, max_cache_len=capacity)
        self.length = 0

    @property
    def capacity(self) -> int:
        return int(self.layers[0].max_cache_len)

    @property
    def filled(self) -> bool:
        """Whether the buffers exist (the first forward allocates them, sized from its keys)."""
        return bool(self.layers[0].is_initialized)

    def _full(self):
        return [layer for layer in self.layers if layer.is_initialized]

    def fed(self, s: int) -> None:
        """Record that a forward wrote s slots (the layers counted them on the device)."""
        self.length += s

    def reserve(self, width: int) -> None:
        """Make room for `width` slots: a larger buffer (x2 at least) with the slots so far copied."""
        if width <= self.capacity:
            return
        new = max(width, 2 * self.capacity)
        for layer in self.layers:
            if layer.is_initialized:
                for name in ("keys", "values"):
                    old = getattr(layer, name)
                    buf = old.new_zeros(*old.shape[:2], new, old.shape[3])
                    buf[:, :, :self.length] = old[:, :, :self.length]
                    setattr(layer, name, buf)
            layer.max_cache_len = new

    def crop(self, tokens_to_remove: int) -> None:
        if not (isinstance(tokens_to_remove, int) and -self.length <= tokens_to_remove <= 0):
            raise ValueError(f"a SlotCache crops by a negative count of at most its {self.length} slots, "
                             f"got {tokens_to_remove!r}")
        super().crop(tokens_to_remove)
        self.length += tokens_to_remove

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        for layer in self._full():
            layer.keys, layer.values = layer.keys[indices], layer.values[indices]
            layer.batch_size = int(layer.keys.shape[0])

    def drop_leading(self, n: int) -> None:
        """Drop the first n slots (every row masks them); the others move n slots left, in place."""
        if n <= 0:
            return
        keep = self.length - n
        for layer in self._full():
            for t in (layer.keys, layer.values):
                t[:, :, :keep] = t[:, :, n:self.length].clone()
            layer.cumulative_length.sub_(n)
        self.length = keep
