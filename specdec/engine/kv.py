"""The engine's view of a causal LM: the KV-cache keyword, the context length, a synchronized clock.

Cache surgery for batches whose rows come and go (`specdec.engine.continuous`), on the per-layer
key/value tensors (B, heads, slots, head_dim) of a DynamicCache: `join_caches` left-pads two caches
to one length and stacks their rows (the pad slots are masked by the caller, like any hole),
`trim_left` drops leading slots that every row masks, and `kv_bytes` measures a cache's tensors.

The engine calls ``model(..., cache=DynamicCache)`` (transformers 5.24).  Older releases (e.g.
5.17 on the GPU machine) name that keyword ``past_key_values``.  `engine_model` reads the model's
``forward`` signature once (`inspect.signature`) and, only when needed, wraps it in `KVCompat`,
which renames the keyword; a model that already takes ``cache`` is returned as it is.

`now` is the one clock of the project: ``time.perf_counter`` after a CUDA synchronize on a GPU,
so a timing covers the kernels it launched, not just their launch.

Example: engine_model(model)(input_ids=ids, cache=c) calls model(input_ids=ids, past_key_values=c)
on a transformers release whose forward has no `cache` parameter.
"""

from __future__ import annotations

import inspect
import time

import torch

__all__ = ["kv_keyword", "KVCompat", "engine_model", "context_length", "now", "kv_bytes", "join_caches", "trim_left",
           "leading_holes", "pad_left"]


def kv_keyword(model) -> str:
    """'cache' or 'past_key_values': the name `model.forward` (or a plain callable) takes its KV cache under."""
    try:
        params = inspect.signature(getattr(model, "forward", model)).parameters
    except (TypeError, ValueError):  # no inspectable signature: the engine's own keyword
        return "cache"
    if "cache" in params:
        return "cache"
    if "past_key_values" in params:
        return "past_key_values"
    return "cache"  # **kwargs only: the engine's own keyword


class KVCompat(torch.nn.Module):
    """A causal LM whose forward accepts the engine's ``cache=`` keyword whatever its release calls it."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.kv_name = kv_keyword(model)

    @property
    def config(self):
        return self.inner.config

    def forward(self, **kw):
        if self.kv_name != "cache" and "cache" in kw:
            kw[self.kv_name] = kw.pop("cache")
        return self.inner(**kw)


def engine_model(model):
    """``model`` if its forward takes ``cache=`` (or is already wrapped), else KVCompat(model)."""
    if isinstance(model, KVCompat) or kv_keyword(model) == "cache":
        return model
    return KVCompat(model)


def context_length(model) -> int | None:
    """The model's maximum number of positions (GPT-2: n_positions), or None when unbounded."""
    cfg = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def now(device: torch.device | str | None = None) -> float:
    """Seconds (``time.perf_counter``), after synchronizing ``device`` when it is a CUDA device."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _layers(cache) -> list:
    """The layers of a DynamicCache that hold keys and values (an unfilled cache has none)."""
    return [layer for layer in getattr(cache, "layers", []) if getattr(layer, "keys", None) is not None
            and layer.keys.numel()]


def kv_bytes(cache) -> int:
    """Bytes held by a cache's key and value tensors (padding and masked holes included)."""
    return sum(t.numel() * t.element_size() for layer in _layers(cache) for t in (layer.keys, layer.values))


def _pad_left(x: torch.Tensor, length: int) -> torch.Tensor:
    """(B, H, L, D) -> (B, H, length, D) with zeros in front (slots the mask leaves out)."""
    B, H, L, D = x.shape
    return x if L == length else torch.cat([x.new_zeros(B, H, length - L, D), x], 2)


def join_caches(a, b, rows_a: int, rows_b: int):
    """Cache `a` (rows_a rows) with `b`'s rows_b rows stacked after its own, both left-padded to the
    longer one's slots; returns the joined cache (`a`, changed in place, or `b` when `a` is empty).
    The caller pads the attention masks the same way: a pad slot is a hole like any other."""
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


def leading_holes(mask: torch.Tensor) -> int:
    """How many leading slots every row masks (mask (B, L), 1 = valid); one host sync."""
    used = (mask != 0).any(0)
    return int(torch.where(used.any(), used.long().argmax(), used.new_tensor(used.numel(), dtype=torch.long)))


def pad_left(x: torch.Tensor, width: int) -> torch.Tensor:
    """(rows, w) -> (rows, width) with zeros (False) in front: masks, ids and tails of rows that join."""
    return x if x.shape[1] == width else torch.cat([x.new_zeros(x.shape[0], width - x.shape[1]), x], 1)


def trim_left(cache, n: int) -> None:
    """Drop the first n slots of every row (slots every row masks: `leading_holes`)."""
    if n > 0:
        for layer in _layers(cache):
            layer.keys, layer.values = layer.keys[:, :, n:].clone(), layer.values[:, :, n:].clone()  # frees the rest
