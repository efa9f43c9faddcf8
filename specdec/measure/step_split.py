"""Where our engine's plain decoding step spends its time, and how close it is to the machine's limit.

Three measurements of chapter 10's time breakdown (`specdec.audit.breakdown` runs them beside the
other engines'):

  * `step_split`: one generate call (the lean forward, greedy) split by the engine's own step
    timings (`specdec.engine.stats`: target forward vs everything outside it), then a second,
    profiled call (`torch.profiler`, self CPU time per operator) splitting the whole call's operator
    time (the forwards are most of it; prefill and sampling are in it too) into matrix products
    (addmm, mm), attention (the scaled-dot-product kernels), copies (the KV cache's appends among
    them) and the other operators.  The profiler adds a few microseconds per operator, so its shares
    are of profiled operator time, never seconds of the unprofiled run.
  * `limit`: the bytes of weights one plain step must read (every parameter but the position table,
    of which a step reads one row; tied weights once) and this core's streaming rate: the fastest of
    three one-thread probes over a tensor far larger than the caches (a sum, and a matrix-vector
    product each way round, as a batch-1 forward streams its weights), best of ``repeats``.  Rate /
    bytes is the batch-1 rate of a forward that did nothing but stream its fp32 weights at that
    rate: a reference, not a proof of a ceiling (a kernel with more reads in flight may stream faster,
    and a fraction above 1 says so).
  * `cache_gain`: the lean forward on its `specdec.engine.modes.grow.GrowCache` against the same
    forward on a DynamicCache (the cache it used before), paired in ABBA blocks per prompt
    (`specdec.measure.protocol.paired_interval`); the two give the same tokens (checked here too).

Example: limit(model)["tokens_per_s"] is the batch-1 ceiling of the machine it ran on.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from specdec.engine.decode import generate
from specdec.engine.modes.lean import lean
from specdec.measure.protocol import level_verdict, paired_interval

__all__ = ["GROUPS", "step_split", "limit", "cache_gain", "weight_bytes"]

GROUPS = {"matrix products": ("aten::addmm", "aten::mm", "aten::bmm"),
          "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math"),
          "copies": ("aten::copy_", "aten::cat")}


def _prompts(prompts, batch: int) -> list[torch.Tensor]:
    if not prompts or batch < 1:
        raise ValueError(f"need at least one prompt and batch >= 1, got {len(prompts or [])} prompts, batch {batch}")
    return [torch.tensor([list(p)] * batch) for p in prompts]


def step_split(model, prompts, *, batch: int, length: int) -> dict:
    """Seconds per plain decoding step (greedy, lean forward) of the target forward and of the engine's
    work outside it (medians over ``prompts``' unprofiled calls), and the shares of one profiled
    call's operator time by GROUPS ("other" the rest)."""
    from torch.profiler import ProfilerActivity, profile

    lm, ids = lean(model), _prompts(prompts, batch)
    generate(lm, ids[0], max_new_tokens=4, temperature=0)  # warm
    fwd, out = [], []
    for x in ids:
        steps = generate(lm, x, max_new_tokens=length, temperature=0).stats.steps[1:]  # after the prefill step
        fwd.append(np.median([s["t_target"] for s in steps]))
        out.append(np.median([s["t_step"] - s["t_target"] for s in steps]))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        generate(lm, ids[0], max_new_tokens=length, temperature=0)
    self_us = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(self_us.values())
    shares = {g: sum(self_us.get(n, 0.0) for n in names) / total for g, names in GROUPS.items()}
    shares["other"] = 1.0 - sum(shares.values())
    return {"batch": batch, "length": length, "forward_s": float(np.median(fwd)), "outside_s": float(np.median(out)),
            **{f"share {g}": v for g, v in shares.items()}}


def weight_bytes(model) -> int:
    """Bytes of the parameters one plain decoding step reads (module docstring)."""
    skip = {id(m.weight) for name, m in model.named_modules() if name.endswith("wpe")}
    return sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in skip)


def limit(model, *, size_mb: int = 512, repeats: int = 5) -> dict:
    """This core's streaming rate (bytes/s: the fastest of the probes of the module docstring over
    ``size_mb`` MB, best of ``repeats`` each) and the batch-1 rate it implies for ``model``'s fp32
    weights."""
    if size_mb < 64 or repeats < 1:
        raise ValueError(f"size_mb must be >= 64 (far beyond the caches) and repeats >= 1, got {size_mb}, {repeats}")
    x = torch.ones(size_mb * (1 << 20) // 4)
    w = x.view(-1, 4096)
    v, u = torch.ones(4096), torch.ones(w.shape[0])
    best = float("inf")
    for _ in range(repeats + 1):
        for probe in (x.sum, lambda: torch.mv(w, v), lambda: u @ w):
            start = time.perf_counter()
            probe()
            best = min(best, time.perf_counter() - start)
    bw, nbytes = x.numel() * 4 / best, weight_bytes(model)
    return {"bandwidth_bytes_per_s": bw, "weight_bytes": nbytes, "tokens_per_s": bw / nbytes,
            "threads": torch.get_num_threads()}


def cache_gain(model, prompts, *, batch: int, length: int, rounds: int, seed: int) -> dict:
    """DynamicCache time / GrowCache time of the lean forward's plain greedy decoding, paired ABBA per
    prompt (``rounds`` even: rounds / 2 calls a block), with its interval and verdict; refuses to
    time runs whose tokens differ."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2, got {rounds}")
    grow, dynamic = lean(model), lean(model)
    dynamic.new_cache = lambda slots: None  # the engine then decodes on a DynamicCache
    inputs, d, g = _prompts(prompts, batch), [], []
    for m in (dynamic, grow):  # untimed: the first call of each pays one-off costs
        generate(m, inputs[0], max_new_tokens=length, temperature=0)
    for x in inputs:
        blocks, first = [], {}
        for m in (dynamic, grow, grow, dynamic):
            block = []
            for _ in range(rounds // 2):
                start = time.perf_counter()
                res = generate(m, x, max_new_tokens=length, temperature=0)
                block.append(time.perf_counter() - start)
                first.setdefault(m is grow, [t.tolist() for t in res.tokens])
            blocks.append(block)
        if first[True] != first[False]:
            raise RuntimeError("the GrowCache and the DynamicCache gave different tokens: not the same forward")
        d += blocks[0] + blocks[3]  # ABBA: dynamic's first block pairs with grow's second, and the reverse
        g += blocks[2] + blocks[1]
    med, lo, hi = paired_interval(np.array(d), np.array(g), seed=seed)
    return {"batch": batch, "length": length, "pairs": len(g), "gain": med, "gain_lo": lo, "gain_hi": hi,
            "verdict": level_verdict(lo, hi, len(g))}
