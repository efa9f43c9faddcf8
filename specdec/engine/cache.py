"""Cache surgery for batches whose rows come and go (`specdec.engine.continuous`, and finished rows
in `generate`), on the per-layer key/value tensors (B, heads, slots, head_dim) of a DynamicCache:
`join_caches` left-pads two caches to one length and stacks their rows (the pad slots are masked by
the caller, like any hole), `drop_leading_holes` drops leading slots that every row masks,
`kv_bytes` measures a cache's tensors, and `pad_left` pads a mask, ids or tail the same way.

Example: c = join_caches(a, b, 2, 1)  # a's 2 rows, then b's row, left-padded to the longer cache
"""

from __future__ import annotations

import torch

__all__ = ["kv_bytes", "join_caches", "drop_leading_holes", "pad_left"]


def _layers(cache) -> list:
    """The layers of a DynamicCache that hold keys and values (an unfilled cache has none)."""
    return [layer for layer in getattr(cache, "layers", []) if getattr(layer, "keys", None) is not None
            and layer.keys.numel()]


def kv_bytes(cache) -> int:
    """Bytes held by a cache's key and value tensors (padding and masked holes included, and a
    `specdec.engine.modes.grow.GrowLayer`'s spare slots)."""
    return sum(layer.allocated_bytes() if hasattr(layer, "allocated_bytes") else
               sum(t.numel() * t.element_size() for t in (layer.keys, layer.values)) for layer in _layers(cache))


def _pad_left(x: torch.Tensor, length: int) -> torch.Tensor:
    """(B, H, L, D) -> (B, H, length, D) with zeros in front (slots the mask leaves out)."""
    B, H, L, D = x.shape
    return x if L == length else torch.cat([x.new_zeros(B, H, length - L, D), x], 2)


def join_caches(a, b, rows_a: int, rows_b: int):
    """Cache `a` (rows_a rows) with `b`'s rows_b rows stacked after its own, both left-padded to the
    longer one's slots; returns the joined cache (`a`, changed in place, or `b` when `a` is empty).
    The caller pads the attention masks the same way: a pad slot is a hole like any other."""
    if hasattr(a, "drop_leading") or hasattr(b, "drop_leading"):
        raise ValueError("rows cannot join a preallocated (static compiled) cache: continuous batching needs caches "
                         "that grow")
    la, lb = _layers(a), _layers(b)
    if not lb and not la:
        return a
    length = max(x.keys.shape[2] for x in la[:1] + lb[:1])
    if not la:  # a has no slots: its rows are all padding
        for layer in lb:
            layer.keys = torch.cat([layer.keys.new_zeros(rows_a, *layer.keys.shape[1:]), layer.keys], 0)
            layer.values = torch.cat([layer.values.new_zeros(rows_a, *layer.values.shape[1:]), layer.values], 0)
        return b
    for i, layer in enumerate(la):
        if lb:
            kb, vb = _pad_left(lb[i].keys, length), _pad_left(lb[i].values, length)
        else:
            kb = layer.keys.new_zeros(rows_b, layer.keys.shape[1], length, layer.keys.shape[3])
            vb = layer.values.new_zeros(rows_b, layer.values.shape[1], length, layer.values.shape[3])
        layer.keys = torch.cat([_pad_left(layer.keys, length), kb], 0)
        layer.values = torch.cat([_pad_left(layer.values, length), vb], 0)
    return a


def pad_left(x: torch.Tensor, width: int) -> torch.Tensor:
    """(rows, w) -> (rows, width) with zeros (False) in front: masks, ids and tails of rows that join."""
    return x if x.shape[1] == width else torch.cat([x.new_zeros(x.shape[0], width - x.shape[1]), x], 1)


def drop_leading_holes(cache, mask: torch.Tensor) -> torch.Tensor:
    """Drop the leading slots every row masks (mask (B, L), 1 = valid; e.g. a departed row's longer
    prompt) from the cache and the mask; returns the mask that is left.  One host sync; the kept
    slots are copied, so the dropped ones' memory is freed at once."""
    used = (mask != 0).any(0)
    n = int(torch.where(used.any(), used.long().argmax(), used.new_tensor(used.numel(), dtype=torch.long)))
    if n > 0 and hasattr(cache, "drop_leading"):  # a preallocated cache shifts in place
        cache.drop_leading(n)
    elif n > 0:
        for layer in _layers(cache):
            layer.keys, layer.values = layer.keys[:, :, n:].clone(), layer.values[:, :, n:].clone()
    return mask[:, n:]
