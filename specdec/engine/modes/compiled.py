"""A causal LM whose forward runs through `torch.compile` on static shapes: the engine's compiled mode.

The engine itself has no compile branch: ``generate(compiled(target), ids, drafter=compiled(draft))``
is the same algorithm with a compiled forward, because the engine and `ModelDrafter` only call
``model(...)``, read ``model.config`` and its parameters, and take their caches from
`specdec.engine.kv.new_cache`, which asks the model first.  Outputs are the same law; only the
forward's kernels differ (fp32 rounding, like any change of batch shape).

Static shapes.  `CompiledModel.new_cache` hands out a preallocated `specdec.engine.modes.slots.SlotCache`
(transformers' StaticCache plus the engine's crop / row selection / leading-slot drop in place), and
every call pads the engine's attention mask (one column per slot, holes masked) with zeros up to the
cache's capacity.  A decoding step of a given (rows, fed tokens, capacity) then has one set of
shapes, so ``torch.compile(dynamic=False)`` specialises one graph for it, compiled on first use: one
for plain decoding, one for verifying k drafts, one or two for the draft's own steps, and one per
shorter feed when the budget clips k at the end.  The capacity is prompt + max_new_tokens + k (twice
that ahead for a speculative batch of several rows, whose rejected-draft holes take slots), so
another prompt length, budget, k or batch size compiles its own graphs.  The first call on a fresh
cache (the prompt, whose length varies) runs eager, as Hugging Face's compiled generate runs its
prefill.  A cache that must grow anyway reallocates (x2), and the next step compiles its new shape
once; never at batch 1, whose cache holds all the budget can fill.  Why static: a dynamic-shape
graph keeps guards and symbolic sizes on every step, which on a small model cost as much as the
compiled kernels save; `make bench` measures this mode against Hugging Face's compiled generate
(paired, with intervals) and the book shows its committed numbers.

Dynamic shapes (``compiled(model, static=False)``): ``torch.compile(dynamic=True)`` on the engine's
growing DynamicCache, the previous design, kept for sweeps over many shapes.  Static shapes compile
a graph per (rows, fed tokens, capacity): a sweep like the GPU run's (controlled acceptance at batch
1, then batches 1-32 at k = 0 and 4, 64 tokens) compiled 88 graphs on tiny models here, and a second
pass at batches 16 and 32 compiled 21 more (which rows hold which holes moves the clipped last
steps' shapes); dynamic shapes compiled 24, all by batch 2, and none on a second pass -- what a GPU
budget of minutes can afford (`specdec.measure.gpu_sections` uses them; `make bench` static ones).

Recompiles: PyTorch's default of 8 compiled variants per function is low for models sharing
transformers' forward wrapper (every model's forward goes through the same decorator's code) at
many static shapes, after which it silently runs eager.  `compiled` raises
``torch._dynamo.config.recompile_limit`` to at least RECOMPILE_LIMIT (and the process-wide
``accumulated_recompile_limit`` to 4x that) and makes hitting a limit an error
(``fail_on_recompile_limit_hit``; process-wide settings) instead of a silent fall-back, and
`graph_count` lets a caller check that timed runs compiled nothing new.

Example: generate(compiled(target), ids, drafter=compiled(draft), k=2, max_new_tokens=64,
temperature=0).tokens[0] equals the eager run's tokens (tested on a tiny model).
"""

from __future__ import annotations

import torch

from specdec.engine.kv import KVCompat
from specdec.engine.modes.slots import SlotCache

__all__ = ["CompiledModel", "compiled", "graph_count", "RECOMPILE_LIMIT"]

RECOMPILE_LIMIT = 256


class CompiledModel(KVCompat):
    """``model`` (an ``nn.Module`` causal LM) with its forward compiled on static shapes, taking the
    engine's ``cache=`` keyword whatever its transformers release calls it (`KVCompat`)."""

    mode = "compiled"

    def __init__(self, model, *, static: bool = True, backend: str = "inductor"):
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"compiled() needs a torch.nn.Module causal LM, got {type(model).__name__}")
        if isinstance(model, CompiledModel):
            raise ValueError("this model is already compiled")
        if type(model).__name__ == "LeanGPT2":  # its forward is its own: compiling .inner would drop it
            raise ValueError("compiled() takes the model itself, not a lean() wrapper")
        super().__init__(model.inner if isinstance(model, KVCompat) else model)
        self.static = bool(static)
        self._fwd = torch.compile(self.inner.forward, dynamic=not self.static, backend=backend)

    def new_cache(self, slots: int) -> SlotCache | None:
        """A preallocated cache of `slots` slots (it grows if a ragged batch needs more); None with
        dynamic shapes (the engine's growing cache then)."""
        return SlotCache(self.inner.config, slots) if self.static else None

    def _call(self, **kw):
        cache = kw.get(self.kv_name)
        if not self.static:
            return self._fwd(**kw)
        if cache is None:  # no cache: a one-off forward, eager
            return self.inner(**kw)
        if not isinstance(cache, SlotCache):
            raise ValueError(f"a compiled model decodes on the SlotCache its new_cache() returns, got "
                             f"{type(cache).__name__}")
        mask, s = kw.get("attention_mask"), kw["input_ids"].shape[1]
        if mask is None or mask.dim() != 2 or mask.shape[1] != cache.length + s:
            raise ValueError(f"a compiled model needs the 2-D attention mask of every slot: {cache.length} cached + "
                             f"{s} fed, got {None if mask is None else tuple(mask.shape)}")
        cache.reserve(mask.shape[1])
        kw["attention_mask"] = torch.nn.functional.pad(mask, (0, cache.capacity - mask.shape[1]))
        fwd = self._fwd if cache.filled else self.inner  # the prompt (any length) runs eager
        out = fwd(**kw)
        cache.fed(s)
        return out


def compiled(model, *, static: bool = True, backend: str = "inductor") -> CompiledModel:
    """`CompiledModel(model)` (``static=False``: dynamic shapes), after raising PyTorch's recompile
    limits (module docstring).  ``backend`` is torch.compile's: "inductor" (its kernels: C++ on a
    CPU, Triton on a GPU) or e.g. "aot_eager" (the same traced graphs and guards run by eager
    kernels, which checks the engine's side of a compiled forward without generating kernels)."""
    import torch._dynamo

    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
    cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)
    cfg.fail_on_recompile_limit_hit = True  # never a silent fall-back to eager inside a "compiled" run
    return CompiledModel(model, static=static, backend=backend)


def graph_count() -> int:
    """How many graphs `torch.compile` has compiled in this process so far (0 before any)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
