"""The measured cost curve of a target, the draft cost c, and the extended speedup prediction.

The idealized model (seed, eq. 3; `specdec.cost`) charges one unit for a verification whatever k
is.  Measured, a target forward that appends n new tokens to a cached context of length T0 costs
T(n) seconds, so a speculative step costs T(k+1) + k T_d(1) and plain decoding T(1) per token:

    c = T_d(1) / T(1),      S_ext = E[L] / (T(k+1)/T(1) + k c)   (= cost.speedup with
                                                                   verify_cost = T(k+1)/T(1))

When decoding is bound by per-call overhead or by reading the weights once (memory traffic),
T(k+1) ~ T(1) and the idealized unit cost holds; when it is compute bound, T grows with n.

Real-size architectures for that question are built from a config with random weights (no
download): GPT-2 small / medium shaped targets and a few-million-parameter draft over the same
50,257-token vocabulary.  Random weights are fine for timing, never for acceptance or quality.

Example:
    model = random_model(REAL_SIZE["gpt2-small"], torch.Generator().manual_seed(0))
    rows = cost_curve(model, [1, 2, 5], context=64, repeats=5, generator=torch.Generator().manual_seed(1))
    c = rows[0]["median_s"] ...;  extended_speedup(0.8, 4, {r["n"]: r["median_s"] for r in rows}, c=0.05)
"""

from __future__ import annotations

import time

import numpy as np
import torch

from specdec.cost import speedup
from specdec.instrument import KVCompat

__all__ = ["REAL_SIZE", "real_size_config", "random_model", "param_count", "cost_curve", "draft_cost",
           "extended_speedup", "spread"]

# name -> GPT2Config keyword arguments.  Vocabulary 50257 and 1024 positions as GPT-2.
REAL_SIZE = {
    "gpt2-small": dict(n_layer=12, n_embd=768, n_head=12),     # ~124M parameters (Radford et al. 2019)
    "gpt2-medium": dict(n_layer=24, n_embd=1024, n_head=16),   # ~355M
    "draft-3m": dict(n_layer=2, n_embd=64, n_head=2),          # ~3.3M, almost all embedding
}


def real_size_config(name: str, **over):
    """A GPT2Config for REAL_SIZE[name] (dropout off), with overrides (e.g. tiny sizes for tests)."""
    from transformers import GPT2Config

    if name not in REAL_SIZE:
        raise ValueError(f"unknown architecture {name!r}; expected one of {sorted(REAL_SIZE)}")
    kw = dict(vocab_size=50257, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
              bos_token_id=50256, eos_token_id=50256, **REAL_SIZE[name])
    kw.update(over)
    return GPT2Config(**kw)


def random_model(config, generator: torch.Generator, dtype=torch.float32, device="cpu"):
    """A causal LM built from `config` with every matrix drawn N(0, 0.02^2) from `generator`.

    The constructor's own initialisation runs under `torch.random.fork_rng`, so the caller's global
    RNG state is untouched; all weights that matter are then redrawn from `generator` (on the
    generator's device), biases stay 0 and norms 1.  Returned in eval mode, KV-keyword shimmed.
    Example: random_model(real_size_config("draft-3m"), torch.Generator().manual_seed(0))
    """
    from transformers import AutoModelForCausalLM

    if not isinstance(generator, torch.Generator):
        raise ValueError("random_model needs an explicit torch.Generator")
    devs = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devs), torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    std = float(getattr(config, "initializer_range", 0.02))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                w = torch.randn(p.shape, generator=generator, device=generator.device, dtype=torch.float32)
                p.copy_((w * std).to(device=p.device, dtype=p.dtype))
    return KVCompat(model.eval())


def param_count(model) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def spread(values) -> dict:
    """median, quartiles, min, max and count of a list of timings.

    Example: spread([1, 2, 3, 4]) -> {'median': 2.5, 'q1': 1.75, 'q3': 3.25, 'min': 1.0, 'max': 4.0, 'n': 4}
    """
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError("need at least one finite value")
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "q1": float(q1), "q3": float(q3), "min": float(a.min()),
            "max": float(a.max()), "n": int(a.size)}


def _sync(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@torch.inference_mode()
def cost_curve(model, n_values, *, context: int, batch: int = 1, repeats: int = 10, warmup: int = 2,
               generator: torch.Generator) -> list[dict]:
    """T(n): seconds of one forward appending n tokens to a cached context of `context` tokens.

    A random context (ids from `generator`) is prefilled once into a DynamicCache; each timed call
    appends n tokens and the cache is cropped back.  n values are interleaved within each repeat
    (round-robin), so slow drift of the machine spreads over all of them.  One row per n with the
    spread of the repeats (seconds) and ratio = median T(n) / median T(1) when n = 1 was measured.
    """
    from transformers import DynamicCache

    ns = [int(n) for n in n_values]
    if not ns or min(ns) < 1 or context < 1 or batch < 1 or repeats < 1 or warmup < 0:
        raise ValueError(f"need n >= 1, context >= 1, batch >= 1, repeats >= 1, warmup >= 0; got {n_values}, "
                         f"{context}, {batch}, {repeats}, {warmup}")
    model = model if isinstance(model, KVCompat) else KVCompat(model)
    device = next(model.parameters()).device
    V = int(model.config.vocab_size)
    n_ctx = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None)
    if n_ctx is not None and context + max(ns) > n_ctx:
        raise ValueError(f"context {context} + n {max(ns)} exceeds the model's {n_ctx} positions")
    ids = torch.randint(0, V, (batch, context + max(ns)), generator=generator,
                        device=generator.device).to(device)  # (B, T0 + n_max)
    cache = DynamicCache()
    model(input_ids=ids[:, :context], cache=cache, use_cache=True, logits_to_keep=1)
    times: dict[int, list[float]] = {n: [] for n in ns}
    for r in range(warmup + repeats):
        for n in ns:
            pos = torch.arange(context, context + n, device=device)[None].expand(batch, n)
            t0 = _sync(device)
            model(input_ids=ids[:, context:context + n], position_ids=pos, cache=cache, use_cache=True)
            t1 = _sync(device)
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


def draft_cost(draft_t1: float, target_t1: float) -> float:
    """c = T_d(1) / T(1): one draft token in units of one plain target step.

    Example: draft_cost(0.001, 0.005) -> 0.2
    """
    if not (np.isfinite(draft_t1) and np.isfinite(target_t1)) or draft_t1 < 0 or target_t1 <= 0:
        raise ValueError(f"need draft time >= 0 and target time > 0, got {draft_t1!r}, {target_t1!r}")
    return float(draft_t1) / float(target_t1)


def extended_speedup(alpha, k: int, curve: dict, c: float) -> float:
    """S_ext = E[L] / (T(k+1)/T(1) + k c) from a measured curve {n: seconds} holding 1 and k+1.

    Example: extended_speedup(0.8, 4, {1: 1.0, 5: 1.5}, 0.1) -> 3.3616 / 1.9 = 1.769...
    """
    if 1 not in curve or (k + 1) not in curve:
        raise ValueError(f"the cost curve needs T(1) and T({k + 1}); it has n = {sorted(curve)}")
    return speedup(alpha, k, c, verify_cost=curve[k + 1] / curve[1])
