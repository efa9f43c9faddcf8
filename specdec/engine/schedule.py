"""Draft-length schedules: the pilot-then-commit dynamic-k rule of chapter 06.

The rule, stated before any result:
    1. decode the first `pilot_tokens` tokens with k = `pilot_k`;
    2. alpha_hat = the maximum-likelihood constant alpha of the pilot's accepted-length histogram
       (`specdec.core.acceptance.fit_alpha`, steps with the full k only);
    3. k* = argmax over k in 0..k_max of cost.speedup(alpha_hat, k, c, T(k+1)/T(1)) with c and T
       measured beforehand (`specdec.core.cost.optimal_k` with the curve); k* = 0: stop drafting;
    4. decode the rest with k* (a second `generate` call: the prompt plus the pilot's tokens are
       prefilled again, and that cost is counted).

Example:
    tokens, s = generate_dynamic_k(target, ids, drafter=draft, max_new_tokens=64, pilot_tokens=16,
                                   pilot_k=4, c=0.15, curve={1: 1.0, ..., 9: 1.9}, k_max=8)
    s["k_chosen"], s["alpha_pilot"]
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.cost import optimal_k
from specdec.engine.decode import generate
from specdec.engine.kv import now
from specdec.engine.stats import STEP_KEYS, latency_summary

__all__ = ["generate_dynamic_k"]


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
    t0 = now()
    r1 = generate(target, input_ids, drafter=drafter, k=pilot_k, max_new_tokens=pilot_tokens, **kw)
    alpha, _ = r1.stats.alpha_mle(pilot_k)
    k_star = optimal_k(alpha, c, k_max, curve=curve) if np.isfinite(alpha) else pilot_k
    ids2 = torch.cat([input_ids, torch.stack([t.to(input_ids.device) for t in r1.tokens])], 1)  # (B, T + P)
    t_mid = now() - t0
    d2 = make_drafter() if make_drafter is not None else drafter
    r2 = generate(target, ids2, drafter=d2 if k_star > 0 else None, k=max(k_star, 1),
                  max_new_tokens=max_new_tokens - pilot_tokens, **kw)
    total = now() - t0
    s1, s2 = r1.stats.summary(), r2.stats.summary()
    tokens = [torch.cat([a, b]) for a, b in zip(r1.tokens, r2.tokens)]
    out = {k: s1[k] + s2[k] for k in ("steps", "tokens", *STEP_KEYS, "prefill_s")}
    out.update(total_s=total, mean_accepted=float("nan"),
               peak_memory_bytes=max(s1["peak_memory_bytes"], s2["peak_memory_bytes"]),
               memory_kind=s1["memory_kind"])
    rows = _concat_token_rows(r1.stats.token_rows(), r2.stats.token_rows(), t_mid)
    out.update(latency_summary(rows, s1["ttft_s"], total, out["tokens"], len(tokens)))
    out.update(k_chosen=k_star, alpha_pilot=alpha)
    return tokens, out
