"""Chapter 02's benchmark: how many verified steps per second `specdec.core.verify.verify` handles.

A verified step is one batch row: k drafts checked and one token emitted, so a call on B rows does
B steps.  For each shape (B, k, V) and method, random float32 p (B, k+1, V) and q (B, k, V) (as an
engine holds them) and drafts from q are built once from a generator seeded ``seed``; one warm-up
call, then ``reps`` timed calls with the project's one clock (`specdec.engine.kv.now`); the median
is reported.  Timings depend on the machine and its load: a floor, not a constant.

Example: verify_speed_rows([[1000, 4, 10]], reps=3, seed=0)[0].keys()
    -> batch, k, vocab, method, ms_per_call, steps_per_second, torch_threads
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.verify import verify
from specdec.engine.kv import now

__all__ = ["time_verify", "verify_speed_rows"]


def time_verify(B: int, k: int, V: int, method: str, reps: int, seed: int) -> float:
    """Median seconds of one `verify` call on B rows, k drafts, vocabulary V (module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(B, k + 1, V, generator=gen), -1)  # (B, k+1, V) float32
    q = torch.softmax(torch.randn(B, k, V, generator=gen), -1)  # (B, k, V)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=gen).view(B, k)  # (B, k)
    verify(d, q, p, method=method, generator=gen)  # warm-up
    times = []
    for _ in range(reps):
        t = now()
        verify(d, q, p, method=method, generator=gen)
        times.append(now() - t)
    return float(np.median(times))


def verify_speed_rows(shapes, reps: int, seed: int, methods=("token", "block")) -> list[dict]:
    """One row per shape [B, k, V] and method: median ms per call and verified steps per second."""
    rows = []
    for B, k, V in shapes:
        for method in methods:
            sec = time_verify(B, k, V, method, reps, seed)
            rows.append(dict(batch=B, k=k, vocab=V, method=method, ms_per_call=1e3 * sec, steps_per_second=B / sec,
                             torch_threads=torch.get_num_threads()))
    return rows
