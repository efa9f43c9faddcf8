"""The measured verification cost curve T(n) of a model: the hardware side of the cost model.

The idealized model (seed, eq. 3; `specdec.core.cost`) charges one unit for a verification
whatever k is.  Measured, a target forward that appends n new tokens to a cached context of
length T0 costs T(n) seconds, so a speculative step costs T(k+1) + k T_d(1) and plain decoding
T(1) per token; `specdec.core.cost.extended_speedup` turns the curve into a prediction.

When decoding is bound by per-call overhead or by reading the weights once (memory traffic),
T(k+1) ~ T(1) and the idealized unit cost holds; when it is compute bound, T grows with n.

Example:
    model = build_model(real_size_config("gpt2-small"), generator=torch.Generator().manual_seed(0))
    rows = cost_curve(model, [1, 2, 5], context=64, repeats=5, generator=torch.Generator().manual_seed(1))
    curve = {r["n"]: r["median_s"] for r in rows};  extended_speedup(0.8, 4, curve, c=0.05)
"""

from __future__ import annotations

import torch

from specdec.core.stats import spread
from specdec.engine.kv import context_length, engine_model, new_cache, now

__all__ = ["cost_curve", "one_token_forward"]


def _prefilled(model, batch: int, context: int, extra: int, generator: torch.Generator):
    """(model, ids (B, context + extra), cache holding the first `context` ids, all-ones attention
    mask (B, context + extra)) for timed appends.  The cache is the one the engine would give the
    model (`specdec.engine.kv.new_cache`: a compiled model's preallocated one), and every call gets
    the mask's first context + n columns, as the engine passes its mask at every step."""
    model = engine_model(model)
    device = next(model.parameters()).device
    V = int(model.config.vocab_size)
    n_ctx = context_length(model)
    if n_ctx is not None and context + extra > n_ctx:
        raise ValueError(f"context {context} + n {extra} exceeds the model's {n_ctx} positions")
    ids = torch.randint(0, V, (batch, context + extra), generator=generator,
                        device=generator.device).to(device)  # (B, T0 + n_max)
    cache, mask = new_cache(model, context + extra), torch.ones_like(ids)
    model(input_ids=ids[:, :context], attention_mask=mask[:, :context], cache=cache, use_cache=True, logits_to_keep=1)
    return model, ids, cache, mask


@torch.inference_mode()
def one_token_forward(model, *, context: int, batch: int, generator: torch.Generator):
    """A callable that runs one untimed forward of ``model`` appending 1 token to its own cached
    context (then cropped back): what a decoding loop does between two target forwards when a draft
    runs in between (`cost_curve(..., between=...)`)."""
    model, ids, cache, mask = _prefilled(model, batch, context, 1, generator)
    pos = torch.full((batch, 1), context, device=ids.device)

    @torch.inference_mode()
    def run() -> None:
        model(input_ids=ids[:, context:context + 1], attention_mask=mask, position_ids=pos, cache=cache, use_cache=True)
        cache.crop(-1)
    return run


@torch.inference_mode()
def cost_curve(model, n_values, *, context: int, batch: int = 1, repeats: int = 10, warmup: int = 2,
               generator: torch.Generator, between=None, blocked: bool = False) -> list[dict]:
    """T(n): seconds of one forward appending n tokens to a cached context of `context` tokens.

    A random context (ids from `generator`) is prefilled once into the model's cache; each timed call
    appends n tokens and the cache is cropped back.  ``between`` (a callable, untimed) runs before
    every timed call: e.g. another model's forward (`one_token_forward`), so the timed forward
    starts as it does inside a speculative loop, with the other model's data in the caches.  n
    values are interleaved within each repeat (round-robin), so slow drift spreads over all of them;
    ``blocked``: each n runs its warm-up and repeats back to back instead, as a decoding loop repeats
    one shape (on a 2-core CPU switching shapes every call made T(1) about 10% slower).  One row
    per n with the spread of the repeats (seconds) and ratio = median T(n) / median T(1)
    when n = 1 was measured.
    """
    ns = [int(n) for n in n_values]
    if not ns or min(ns) < 1 or context < 1 or batch < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need n >= 1, context >= 1, batch >= 1, repeats >= 1, warmup >= 0; got {n_values}, "
                         f"{context}, {batch}, {repeats}, {warmup}")
    model, ids, cache, mask = _prefilled(model, batch, context, max(ns), generator)
    device = ids.device
    times: dict[int, list[float]] = {n: [] for n in ns}
    order = [(r, n) for n in ns for r in range(warmup + repeats)] if blocked else \
        [(r, n) for r in range(warmup + repeats) for n in ns]
    for r, n in order:
        pos = torch.arange(context, context + n, device=device)[None].expand(batch, n)
        if between is not None:
            between()
        t0 = now(device)
        model(input_ids=ids[:, context:context + n], attention_mask=mask[:, :context + n], position_ids=pos, cache=cache,
              use_cache=True)
        t1 = now(device)
        cache.crop(-n)
        if r >= warmup:
            times[n].append(t1 - t0)
    rows = []
    for n in ns:
        s = spread(times[n])
        rows.append({"n": n, "batch": batch, "context": context, "repeats": s["n"], "median_s": s["median"],
                     "q1_s": s["q1"], "q3_s": s["q3"], "min_s": s["min"], "max_s": s["max"]})
    if 1 in times:
        t1 = next(r["median_s"] for r in rows if r["n"] == 1)
        for r in rows:
            r["ratio"] = r["median_s"] / t1
    return rows
