"""Optional forwards of the engine (lean, compiled, its preallocated cache): never needed for
correctness, each tested to give the eager engine's tokens.

`forward_for(model, mode)` is how `specdec.engine.decode.generate` picks the forward it runs:

    "auto"   (generate's default) the lean forward where it runs the model (a GPT-2 causal LM given
             as itself, in eval mode, without forward hooks), else the model as given -- so a plain
             call gets the engine's fastest exact forward without asking for it
    "lean"   the lean forward, or a ValueError naming why it cannot run the model
    "eager"  the model as given (Hugging Face's own forward): what a measurement names when it
             times the modules as written

A model already wrapped by a mode (``lean(m)``, ``compiled(m)``: a `specdec.engine.kv.KVCompat`) runs
as given in "auto" and "eager", and is refused by "lean" unless it is a lean one.  Anything that is
not a torch module (a drafter object) is returned as given: its own forward is its business.

Example: forward_for(gpt2_model, "auto") is a LeanGPT2; forward_for(gpt2_model, "eager") is gpt2_model.
"""

from __future__ import annotations

import torch

from specdec.engine.kv import KVCompat
from specdec.engine.modes.lean import LeanGPT2, lean, refusal

__all__ = ["MODES", "forward_for", "mode_of"]

MODES = ("auto", "lean", "eager")


def forward_for(model, mode: str):
    """The forward `generate` runs for ``model`` in ``mode`` (module docstring)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if model is None or not isinstance(model, torch.nn.Module) or mode == "eager":
        return model
    if isinstance(model, KVCompat):
        if mode == "lean" and not isinstance(model, LeanGPT2):
            raise ValueError(f"mode='lean' takes the model itself, got a {type(model).__name__} wrapper")
        return model
    if mode == "auto":
        return model if refusal(model) is not None or _bypassed(model) is not None else lean(model)
    return lean(model)


def mode_of(model) -> str:
    """The forward ``model`` runs: its ``mode`` ("lean", "compiled", "eager") when it is an engine
    wrapper (`specdec.engine.kv.KVCompat`), else "eager" (the model's own)."""
    return model.mode if isinstance(model, KVCompat) else "eager"


def _bypassed(model) -> str | None:
    """What the lean forward would silently skip in ``model``, or None: forward hooks on any of its
    modules (the lean forward calls no module) or training mode (it applies no dropout)."""
    if model.training:
        return "the model is in training mode (the lean forward applies no dropout)"
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return "a module has forward hooks (the lean forward calls no module)"
    return None
