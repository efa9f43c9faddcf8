"""The engine's view of a causal LM: the KV-cache keyword, the context length, a synchronized clock.

Cache surgery (rows that join and leave a batch) is in `specdec.engine.cache`; `new_cache` gives the
cache a model decodes on (a compiled model preallocates its own).

The engine calls ``model(..., cache=DynamicCache)`` (transformers 5.24).  Older releases (e.g.
5.17 on the GPU machine) name that keyword ``past_key_values``.  `engine_model` reads the model's
``forward`` signature once (`inspect.signature`) and, only when needed, wraps it in `KVCompat`,
which renames the keyword; a model that already takes ``cache`` is returned as it is.

`steps` is the engine's arange, made once per length and device (a decoding step reuses a few small
ones many times).  `now` is the one clock of the project: ``time.perf_counter`` after a CUDA
synchronize on a GPU, so a timing covers the kernels it launched, not just their launch.

Example: engine_model(model)(input_ids=ids, cache=c) calls model(input_ids=ids, past_key_values=c)
on a transformers release whose forward has no `cache` parameter.
"""

from __future__ import annotations

import inspect
import time

import torch

__all__ = ["kv_keyword", "KVCompat", "engine_model", "new_cache", "context_length", "steps", "now"]


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
    """A causal LM whose forward accepts the engine's ``cache=`` keyword whatever its release calls it.
    ``mode``: the forward it runs (`specdec.engine.modes`); a subclass with another forward says so."""

    mode = "eager"

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
        return self._call(**kw)

    def _call(self, **kw):  # the wrapped model's forward (`specdec.engine.modes.compiled` runs a compiled one)
        return self.inner(**kw)


def engine_model(model):
    """``model`` if its forward takes ``cache=`` (or is already wrapped), else KVCompat(model)."""
    if isinstance(model, KVCompat) or kv_keyword(model) == "cache":
        return model
    return KVCompat(model)


def new_cache(model, slots: int):
    """The KV cache `model` decodes on: what its own ``new_cache(slots)`` returns when it has one and
    that is not None (a compiled model's preallocated `specdec.engine.modes.slots.SlotCache`, `slots` its
    first capacity), else an empty DynamicCache (transformers 5.24), which grows as it goes."""
    made = model.new_cache(slots) if hasattr(model, "new_cache") else None
    if made is not None:
        return made
    from transformers import DynamicCache  # the engine owns caches; imported where used

    return DynamicCache()


def context_length(model) -> int | None:
    """The model's maximum number of positions (GPT-2: n_positions), or None when unbounded."""
    cfg = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


_STEPS: dict = {}


def steps(n: int, device, start: int = 0, column: bool = False) -> torch.Tensor:
    """arange(start, start + n) on ``device`` (a column (n, 1) if ``column``), made once and shared:
    never written to by its callers."""
    key = (n, start, column, str(device))
    if key not in _STEPS:
        with torch.inference_mode(False):  # a normal tensor, usable in and out of inference mode
            r = torch.arange(start, start + n, device=device)
        _STEPS[key] = r[:, None] if column else r
    return _STEPS[key]


def now(device: torch.device | str | None = None) -> float:
    """Seconds (``time.perf_counter``), after synchronizing ``device`` when it is a CUDA device."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()

