"""A causal LM whose forward runs through `torch.compile`: the engine's graph-compiled execution mode.

The engine itself has no compile branch: ``generate(compiled(target), ids, drafter=compiled(draft))``
is the same algorithm with a compiled forward, because the engine and `ModelDrafter` only call
``model(...)``, read ``model.config`` and its parameters.  Outputs are the same law; only the forward's
kernels differ (fp32 rounding, like any change of batch shape).

Why dynamic shapes and the ordinary DynamicCache rather than a static cache: the engine's cache is
ragged (masked holes, crops of rejected drafts, rows that leave), which a static cache does not
hold; with ``dynamic=True`` one graph serves every cache length and feed length above 1 (PyTorch
specializes sizes 0 and 1, so the first step, a one-token step and a batch of one are graphs of
their own, compiled on first use).  Measured on this CPU (embedded target, 1 thread, 64 tokens):
per forward 4.9 -> 3.5 ms at one token and 6.1 -> 4.3 ms at five, the first calls compiling for
about 30 s; `make bench` times both modes against Hugging Face's own compiled mode (static cache),
after untimed warm-up rounds.

Recompiles: guards on the cache's strides (a cropped cache is a view) and the two models sharing one
forward function (transformers' ``generic.wrapper``) exceed PyTorch's default of 8 compiled
variants per function, after which it silently runs eager.  `compiled` raises
``torch._dynamo.config.recompile_limit`` to at least RECOMPILE_LIMIT and makes hitting it an error
(``fail_on_recompile_limit_hit``; both process-wide settings) instead of a silent fall-back, and
`graph_count` lets a caller check that timed runs compiled nothing new.

Example: generate(compiled(target), ids, drafter=compiled(draft), k=2, max_new_tokens=64,
temperature=0).tokens[0] equals the eager run's tokens (tested on a tiny model).
"""

from __future__ import annotations

import torch

from specdec.engine.kv import KVCompat

__all__ = ["CompiledModel", "compiled", "graph_count", "RECOMPILE_LIMIT"]

RECOMPILE_LIMIT = 64


class CompiledModel(KVCompat):
    """``model`` (an ``nn.Module`` causal LM) with its forward compiled, taking the engine's
    ``cache=`` keyword whatever its transformers release calls it (`KVCompat`)."""

    def __init__(self, model, *, dynamic: bool = True):
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"compiled() needs a torch.nn.Module causal LM, got {type(model).__name__}")
        if isinstance(model, CompiledModel):
            raise ValueError("this model is already compiled")
        super().__init__(model.inner if isinstance(model, KVCompat) else model)
        self._fwd = torch.compile(self.inner.forward, dynamic=dynamic)

    def _call(self, **kw):
        return self._fwd(**kw)


def compiled(model, *, dynamic: bool = True) -> CompiledModel:
    """`CompiledModel(model)`, after raising PyTorch's recompile limit to RECOMPILE_LIMIT (module docstring)."""
    import torch._dynamo

    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
    cfg.fail_on_recompile_limit_hit = True  # never a silent fall-back to eager inside a "compiled" run
    return CompiledModel(model, dynamic=dynamic)


def graph_count() -> int:
    """How many graphs `torch.compile` has compiled in this process so far (0 before any)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
