"""A CPU model's weights laid end to end in memory advised for huge pages: how `load_model` places them.

Why.  A decoding step at batch 1 reads every weight once, so its speed is how fast the weights stream
from memory.  Scattered over 4 KiB pages, that stream pays a TLB miss every 4 KiB and the CPU's
hardware prefetchers stop at every page boundary; laid end to end in one anonymous mapping advised for
transparent huge pages (``madvise(MADV_HUGEPAGE)``, 2 MiB pages where the kernel grants them) it
flows on.  The lean forward's C kernel streams its own packed copy instead
(`specdec.engine.modes.kernel`), so on the default path the arena serves the embeddings, biases and
norms, and every forward on torch's products.  What it gains is measured, paired, by chapter 10's
time breakdown (`specdec.measure.step_split.forward_gain`).  Values are copied unchanged, so every forward computes
the same numbers.

Each parameter keeps a storage of its own (a separate view of the mapping), so code that finds
shared weights by storage (saving with safetensors, Hugging Face's tied-weight checks) sees exactly the
sharing the model had: tied parameters are one parameter, placed once.  The mapping lives as long as
any of its views.  Where huge pages are not offered (another OS, THP disabled) the weights are still
end to end in ordinary pages.

Example: m = pack_weights(model) -> the same model; m.transformer.h[0].attn.c_attn.weight now lives in
the arena, equal to what it was.
"""

from __future__ import annotations

import mmap

import numpy as np
import torch

__all__ = ["pack_weights", "ALIGN"]

ALIGN = 64      # bytes: every parameter starts on a cache line
HUGE = 2 << 20  # a transparent huge page on x86-64 and arm64


def pack_weights(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` (on the CPU) with every parameter's data moved, in registration order, into one
    huge-page-advised mapping (module docstring); returned for chaining.  A model with a parameter
    off the CPU is refused: the arena is host memory."""
    params = list(model.parameters())  # each tied parameter once
    off = next((p.device for p in params if p.device.type != "cpu"), None)
    if off is not None:
        raise ValueError(f"pack_weights places CPU weights; a parameter is on {off}")
    offsets, total = [], 0
    for p in params:
        offsets.append(total)
        total += -(-p.numel() * p.element_size() // ALIGN) * ALIGN
    if not total:
        return model
    area = mmap.mmap(-1, total + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        area.madvise(mmap.MADV_HUGEPAGE)
    raw = np.frombuffer(area, dtype=np.uint8)
    start = -raw.ctypes.data % HUGE  # the first parameter on a huge-page boundary
    with torch.no_grad():
        for p, at in zip(params, offsets):
            n = p.numel() * p.element_size()
            home = torch.from_numpy(raw[start + at:start + at + n]).view(p.dtype).view(p.shape)
            home.copy_(p.data)
            p.data = home
    return model
