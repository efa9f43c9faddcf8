"""Where our engine's plain decoding step spends its time, and how close it is to the machine's limit.

Three measurements of chapter 10's time breakdown (`specdec.audit.breakdown` runs them beside the
other engines'):

  * `step_split`: one generate call (the lean forward, greedy) split by the engine's own step
    timings (`specdec.engine.stats`: target forward vs everything outside it), then a second,
    profiled call (`torch.profiler`, self CPU time per operator) split by `operator_split`: the
    whole call's operator time (the forwards are most of it; prefill and sampling are in it too) in
    matrix products, attention, copies (the KV cache's appends among them) and the other operators,
    and the call's time outside any operator.  `vllm_split` splits a call of vLLM's the same way.
    The profiler adds its own bookkeeping to every operator call, most of it outside the operators'
    self time, so a profiled step is slower than an unprofiled one and its time outside operators
    includes that bookkeeping (both steps are kept: their difference bounds it).
  * `limit`: the bytes of weights one plain step must read (every parameter but the position table,
    of which a step reads one row; tied weights once) and this core's streaming rate: the fastest of
    three one-thread probes over a tensor far larger than the caches (a sum, and a matrix-vector
    product each way round, as a batch-1 forward streams its weights), best of ``repeats``.  Rate /
    bytes is the batch-1 rate of a forward that did nothing but stream its fp32 weights at that
    rate: a reference, not a proof of a ceiling (a kernel with more reads in flight may stream faster,
    and a fraction above 1 says so).
  * `forward_gain`: what each of the lean forward's means of speed gains, the forward with it against
    the same forward without it, paired in ABBA blocks per prompt
    (`specdec.measure.protocol.paired_interval`): its `specdec.engine.modes.grow.GrowCache` against a
    DynamicCache, its C kernel against torch's products, and weights packed end to end against
    weights as torch allocates them; both sides give the same tokens (checked here too).

Example: limit(model)["tokens_per_s"] is the batch-1 ceiling of the machine it ran on.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from specdec.engine.decode import generate
from specdec.engine.modes import kernel
from specdec.engine.modes.lean import lean
from specdec.family.arena import pack_weights
from specdec.measure.protocol import level_verdict, paired_interval

__all__ = ["CHANGES", "GROUPS", "step_split", "operator_split", "vllm_split", "limit", "forward_gain", "weight_bytes"]

CHANGES = ("in-place cache", "kernel", "packed weights")  # the lean forward's means of speed, each timed by `forward_gain`

GROUPS = {"matrix products": ("aten::addmm", "aten::mm", "aten::bmm", "_C::onednn_mm", "specdec::affine",
                              "specdec::affine_t"),
          "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math",
                        "_C::cpu_attention_with_kv_cache", "vllm::unified_attention_with_output", "specdec::attend"),
          "copies": ("aten::copy_", "aten::cat", "_C::cpu_attn_reshape_and_cache", "vllm::unified_kv_cache_update")}
# ours (the lean forward: torch's operators, or its kernel's calls as `specdec.engine.modes.kernel.named`
# records them, the layer norms before products inside them) and vLLM's CPU build (0.32: oneDNN matrix products, its own attention and
# cache-append kernels, each under a vllm:: custom op whose own self time counts in its group)


def _prompts(prompts, batch: int) -> list[torch.Tensor]:
    if not prompts or batch < 1:
        raise ValueError(f"need at least one prompt and batch >= 1, got {len(prompts or [])} prompts, batch {batch}")
    return [torch.tensor([list(p)] * batch) for p in prompts]


def step_split(model, prompts, *, batch: int, length: int) -> dict:
    """Seconds per plain decoding step (greedy, lean forward) of the target forward and of the engine's
    work outside it (medians over ``prompts``' unprofiled calls), a call's milliseconds per step, and
    one profiled call split by `operator_split`."""
    from torch.profiler import ProfilerActivity, profile

    lm, ids = lean(model), _prompts(prompts, batch)
    generate(lm, ids[0], max_new_tokens=4, temperature=0)  # warm
    fwd, out, walls = [], [], []
    for x in ids:
        start = time.perf_counter()
        steps = generate(lm, x, max_new_tokens=length, temperature=0).stats.steps[1:]  # after the prefill step
        walls.append(time.perf_counter() - start)
        fwd.append(np.median([s["t_target"] for s in steps]))
        out.append(np.median([s["t_step"] - s["t_target"] for s in steps]))
    with profile(activities=[ProfilerActivity.CPU]) as prof, kernel.named():
        start = time.perf_counter()
        generate(lm, ids[0], max_new_tokens=length, temperature=0)
        wall = time.perf_counter() - start
    ops = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    return {"engine": "ours", "batch": batch, "length": length, "forward_s": float(np.median(fwd)),
            "outside_s": float(np.median(out)), "ms unprofiled step": 1e3 * float(np.median(walls)) / length,
            **operator_split(ops, wall, length)}


def operator_split(self_us: dict, wall_s: float, steps: int, top: int = 6) -> dict:
    """One profiled call's time per decoding step: ``self_us`` (operator name -> self CPU microseconds,
    as `torch.profiler` totals them, or vLLM's worker's [microseconds, calls]) grouped by GROUPS
    ("other" the rest) as shares of operator time and as milliseconds per step, the call's wall time
    outside any operator (Python, scheduling, input preparation, the profiler's own bookkeeping) per
    step, and the ``top`` operators by self time (name and ms per step: a kernel GROUPS does not
    name shows there).  The same function splits every engine's profile, so their rows compare;
    ``steps`` is the call's decoding steps (its length).  Operator time above the wall time (a
    profile of several threads, whose self times add up) is refused."""
    self_us = {k: float(v[0] if isinstance(v, (list, tuple)) else v) for k, v in self_us.items()}
    if steps < 1 or not wall_s > 0 or not self_us:
        raise ValueError(f"need steps >= 1, wall_s > 0 and a profile, got {steps}, {wall_s}, {len(self_us)} operators")
    total = sum(self_us.values())
    if total / 1e6 > wall_s * 1.01:
        raise ValueError(f"operator time {total / 1e6:.3f} s exceeds the call's {wall_s:.3f} s: not one thread's profile")
    grouped = {g: sum(self_us.get(n, 0.0) for n in names) for g, names in GROUPS.items()}
    grouped["other"] = total - sum(grouped.values())
    out = {f"share {g}": v / total for g, v in grouped.items()}
    out.update({f"ms {g}": v / 1e3 / steps for g, v in grouped.items()})
    out.update({"ms profiled step": 1e3 * wall_s / steps, "ms outside operators": (1e3 * wall_s - total / 1e3) / steps,
                "top operators": "; ".join(f"{n} {v / 1e3 / steps:.2f}" for n, v in
                                           sorted(self_us.items(), key=lambda kv: -kv[1])[:top])})
    return out


def vllm_split(session, prompts, *, batch: int, length: int, seed: int, repeats: int = 3) -> dict:
    """vLLM's plain greedy decoding of ``prompts[0]`` at ``batch`` split as `step_split` splits ours:
    ``repeats`` warm calls timed (a freshly built LLM gets an untimed one first; their median is the
    unprofiled step), then one under torch's profiler in vLLM's worker (its engine core in that
    process, `specdec.peers.vllm`), grouped by `operator_split`.  A failed call or profile raises, naming vLLM's error."""
    from specdec.peers.interface import Sampling

    if repeats < 2:
        raise ValueError(f"repeats must be >= 2 (vLLM's worker warms up a series of two or more), got {repeats}")
    res = session.run_many([([list(prompts[0])], batch, length, Sampling(0.0), None, seed, repeats,
                             {"profile": True})])[0]
    if res.error or not res.provenance.get("profile"):
        raise RuntimeError(f"vLLM's profiled call failed: {res.error or res.provenance.get('profile_error')}")
    prof = res.provenance["profile"]
    return {"engine": "vllm", "batch": batch, "length": length, "forward_s": np.nan,
            "outside_s": np.nan, "ms unprofiled step": 1e3 * float(np.median(res.provenance["generate_each_s"])) / length,
            **operator_split(prof["ops"], prof["wall_s"], length)}


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


def forward_gain(model, prompts, *, change: str, batch: int, length: int, rounds: int, seed: int) -> dict:
    """Time without ``change`` / time with it, for the lean forward's plain greedy decoding of
    ``model``, paired ABBA per prompt (``rounds`` even: rounds / 2 calls a block), with its interval
    and verdict (module docstring); refuses to time runs whose tokens differ.  ``change`` is one of
    CHANGES: "in-place cache" (a DynamicCache without it), "kernel" (torch's products without it,
    `specdec.engine.modes.kernel`), "packed weights" (copies of the weights as torch allocates them
    without it, `specdec.family.arena`; both sides are copies of ``model``; with the kernel its
    products read their own panels, so this times what else reads the weights)."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds must be even and >= 2, got {rounds}")
    if change not in CHANGES:
        raise ValueError(f"change must be one of {CHANGES}, got {change!r}")
    if change == "packed weights":
        without, with_ = lean(copy.deepcopy(model)), lean(pack_weights(copy.deepcopy(model)))
    else:
        without, with_ = lean(model), lean(model)
        if change == "in-place cache":
            without.new_cache = lambda slots: None  # the engine then decodes on a DynamicCache
        else:
            without.products = None  # the lean forward then runs torch's products
    inputs, d, g = _prompts(prompts, batch), [], []
    for m in (without, with_):  # untimed: the first call of each pays one-off costs
        generate(m, inputs[0], max_new_tokens=length, temperature=0)
    for x in inputs:
        blocks, first = [], {}
        for m in (without, with_, with_, without):
            block = []
            for _ in range(rounds // 2):
                start = time.perf_counter()
                res = generate(m, x, max_new_tokens=length, temperature=0)
                block.append(time.perf_counter() - start)
                first.setdefault(m is with_, [t.tolist() for t in res.tokens])
            blocks.append(block)
        if first[True] != first[False]:
            raise RuntimeError(f"with and without the {change} the lean forward gave different tokens: not the same forward")
        d += blocks[0] + blocks[3]  # ABBA: the first block without pairs with the second with, and the reverse
        g += blocks[2] + blocks[1]
    med, lo, hi = paired_interval(np.array(d), np.array(g), seed=seed)
    return {"change": change, "batch": batch, "length": length, "pairs": len(g), "gain": med, "gain_lo": lo,
            "gain_hi": hi, "verdict": level_verdict(lo, hi, len(g))}
