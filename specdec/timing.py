"""Repeated, timed decoding runs: summaries of one run, the dynamic-k rule, and Hugging Face
assisted generation through the same summary.

A run's summary (`summarize`) holds, from the engine's `DecodeStats`:
    ttft_s            time to first token (prefill + first step), the earliest row's
    tokens_per_s      steady state: tokens after each row's first / (total - ttft)
    lat_p50/p95/p99_s per-token latency over all rows, first tokens excluded; tokens emitted by one
                      speculative step arrive together, so their latency after the first is 0
    peak_memory_bytes process RSS peak on CPU (monotone over a process: an upper bound only),
                      cuda max_memory_allocated on GPU
    t_draft, t_target, t_accept, t_rollback, t_other, prefill_s   the engine's breakdown (s)

The dynamic-k rule (pilot and commit), stated before any result:
    1. decode the first `pilot_tokens` tokens with k = `pilot_k`;
    2. alpha_hat = the maximum-likelihood constant alpha of the pilot's accepted-length histogram
       (`specdec.measure.fit_alpha`, steps with the full k only);
    3. k* = argmax over k in 0..k_max of cost.speedup(alpha_hat, k, c, T(k+1)/T(1)) with c and T
       measured beforehand; k* = 0 means: stop drafting;
    4. decode the rest with k* (a second `generate` call: the prompt plus the pilot's tokens are
       prefilled again, and that cost is counted).

Example:
    s = summarize(generate(target, ids, max_new_tokens=32, temperature=0))
    s["tokens_per_s"], s["lat_p50_s"]
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from specdec.cost import speedup
from specdec.decode import generate
from specdec.measure import accepted_length_counts, fit_alpha

__all__ = ["summarize", "run_alpha", "choose_k", "generate_dynamic_k", "hf_assisted"]


def _latency_summary(token_rows: list[dict], ttft: float | None, total: float, tokens: int, rows: int) -> dict:
    lat = np.array([r["latency_s"] for r in token_rows if r["index"] > 0], dtype=np.float64)
    p50, p95, p99 = (np.percentile(lat, [50, 95, 99]).tolist() if lat.size else [float("nan")] * 3)
    steady = tokens - rows
    dur = total - (ttft or 0.0)
    return {"ttft_s": ttft, "tokens_per_s": steady / dur if steady > 0 and dur > 0 else float("nan"),
            "lat_p50_s": p50, "lat_p95_s": p95, "lat_p99_s": p99}


def summarize(result) -> dict:
    """A flat dict of one `generate` result's timings (module docstring); one tidy row."""
    st = result.stats
    s = st.summary()
    out = {k: s[k] for k in ("steps", "tokens", "t_draft", "t_draft_forward", "t_target", "t_accept",
                             "t_rollback", "t_other", "t_step", "prefill_s", "total_s", "mean_accepted",
                             "peak_memory_bytes", "memory_kind")}
    out.update(_latency_summary(st.token_rows(), s["ttft_s"], s["total_s"], s["tokens"], len(result.tokens)))
    return out


def run_alpha(stats, k: int) -> tuple[float, int]:
    """(MLE constant alpha, steps used) from the steps of one run that drafted the full k."""
    n = [r["accepted"] for r in stats.accept_rows() if r["k"] == k]
    if not n:
        return float("nan"), 0
    return fit_alpha(accepted_length_counts(np.array(n, dtype=np.int64), k)), len(n)


def choose_k(alpha: float, c: float, curve: dict, k_max: int) -> int:
    """argmax over k in 0..k_max of speedup(alpha, k, c, T(k+1)/T(1)); ties to the smaller k.

    curve: {n: seconds} holding 1..k_max+1.  Example: choose_k(0.0, 0.2, {1: 1, 2: 1.1}, 1) -> 0
    """
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite to choose k, got {alpha!r}")
    missing = [n for n in range(1, k_max + 2) if n not in curve]
    if missing:
        raise ValueError(f"cost curve lacks T(n) for n = {missing}")
    s = [1.0] + [speedup(alpha, k, c, verify_cost=curve[k + 1] / curve[1]) for k in range(1, k_max + 1)]
    return int(np.argmax(np.array(s) >= max(s) - 1e-12))


def _concat_token_rows(first: list[dict], second: list[dict], offset: float) -> list[dict]:
    last = {}
    for r in first:
        last[r["row"]] = (r["index"], r["time_s"])
    out = list(first)
    for r in second:
        i0, t_prev = last.get(r["row"], (-1, 0.0))
        t = r["time_s"] + offset
        out.append({"row": r["row"], "index": i0 + 1 + r["index"], "time_s": t,
                    "latency_s": t - t_prev if r["index"] == 0 else r["latency_s"]})
    return out


def generate_dynamic_k(target, input_ids, *, drafter, max_new_tokens: int, pilot_tokens: int, pilot_k: int,
                       c: float, curve: dict, k_max: int, make_drafter=None, **kw) -> tuple[list, dict]:
    """The dynamic-k rule (module docstring).  Returns (tokens per row, summary with `k_chosen`,
    `alpha_pilot`).  `kw` goes to both `generate` calls (temperature, generator, ...); input_ids
    is (B, T) with equal-length rows.  `make_drafter()`, if given, gives a fresh drafter for the
    second call (the engine re-begins drafters, so the same one is fine for model drafters)."""
    if not (0 < pilot_tokens < max_new_tokens):
        raise ValueError(f"need 0 < pilot_tokens < max_new_tokens, got {pilot_tokens}, {max_new_tokens}")
    t0 = time.perf_counter()
    r1 = generate(target, input_ids, drafter=drafter, k=pilot_k, max_new_tokens=pilot_tokens, **kw)
    alpha, _ = run_alpha(r1.stats, pilot_k)
    k_star = choose_k(alpha, c, curve, k_max) if np.isfinite(alpha) else pilot_k
    ids2 = torch.cat([input_ids, torch.stack([t.to(input_ids.device) for t in r1.tokens])], 1)  # (B, T + P)
    t_mid = time.perf_counter() - t0
    d2 = make_drafter() if make_drafter is not None else drafter
    r2 = generate(target, ids2, drafter=d2 if k_star > 0 else None, k=max(k_star, 1),
                  max_new_tokens=max_new_tokens - pilot_tokens, **kw)
    total = time.perf_counter() - t0
    s1, s2 = r1.stats.summary(), r2.stats.summary()
    tokens = [torch.cat([a, b]) for a, b in zip(r1.tokens, r2.tokens)]
    keys = ("steps", "tokens", "t_draft", "t_draft_forward", "t_target", "t_accept", "t_rollback", "t_other",
            "t_step", "prefill_s")
    out = {k: s1[k] + s2[k] for k in keys}
    out.update(total_s=total, mean_accepted=float("nan"),
               peak_memory_bytes=max(s1["peak_memory_bytes"], s2["peak_memory_bytes"]),
               memory_kind=s1["memory_kind"])
    rows = _concat_token_rows(r1.stats.token_rows(), r2.stats.token_rows(), t_mid)
    out.update(_latency_summary(rows, s1["ttft_s"], total, out["tokens"], len(tokens)))
    out.update(k_chosen=k_star, alpha_pilot=alpha)
    return tokens, out


def hf_assisted(target, draft, input_ids, *, k: int, max_new_tokens: int, temperature: float, seed: int,
                top_k: int | None = None) -> tuple[torch.Tensor, dict]:
    """Hugging Face assisted generation (batch 1) with k pinned, as a side-by-side reference.

    Pinned: num_assistant_tokens=k, schedule "constant", assistant_confidence_threshold=0, top_k
    explicit (generate's default is 50; 0 disables it), eos_token_id None (no stop token).  HF's sampler draws from the
    global RNG, so it runs inside `torch.random.fork_rng` seeded with `seed`: the caller's global
    state is restored afterwards.  k = 0 runs HF's plain generate.  Returns (new tokens (N,), row)
    with total_s and tokens_per_s over the whole call (HF exposes no per-token timing).
    """
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError("HF assisted generation takes batch size 1: input_ids (1, T)")
    inner = lambda m: getattr(m, "inner", m)  # noqa: E731  (unwrap KVCompat)
    tgt = inner(target)
    device = next(tgt.parameters()).device
    kw = dict(max_new_tokens=max_new_tokens, pad_token_id=0)
    if temperature == 0:
        kw.update(do_sample=False)
    else:
        kw.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=top_k if top_k is not None else 0)
    extra = {}
    if k > 0:
        kw.update(num_assistant_tokens=k, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
        extra["assistant_model"] = inner(draft)
    gc = copy.deepcopy(tgt.generation_config)
    gc.update(**kw)
    gc.eos_token_id = None  # no stop token, as in the engine runs: exactly max_new_tokens
    devs = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devs), torch.inference_mode():
        torch.manual_seed(seed)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = tgt.generate(input_ids.to(device), attention_mask=torch.ones_like(input_ids).to(device),
                           generation_config=gc, **extra)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        total = time.perf_counter() - t0
    new = out[0, input_ids.shape[1]:].cpu()
    return new, {"tokens": int(new.numel()), "total_s": total, "tokens_per_s": new.numel() / total}
