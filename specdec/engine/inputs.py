"""Checking what `generate` is given, with an error that names the problem: prompts, knobs, the
drafter, stop tokens, a schedule's k; and the memory figure of a run.

Example: prompts_of([torch.tensor([1, 2]), torch.tensor([3])], 10, "cpu")
         -> (tensor([[1, 2], [0, 3]]), tensor([[1, 1], [0, 1]]))   (left-padded ids, mask)
"""

from __future__ import annotations

import resource

import torch

from specdec.engine.kv import context_length

__all__ = ["prompts_of", "prompt_positions", "check_arguments", "peak_memory", "stop_tokens", "clip_k"]


def prompts_of(input_ids, vocab: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(T,), (B, T) or a list of 1-D tensors -> left-padded ids (B, T) and mask (B, T)."""
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() not in (1, 2):
            raise ValueError(f"input_ids must be (T,) or (B, T), got shape {tuple(input_ids.shape)}")
        if input_ids.numel() == 0:
            raise ValueError(f"empty prompt: input_ids has shape {tuple(input_ids.shape)}")
        rows = list(input_ids.reshape(-1, input_ids.shape[-1]))
    elif isinstance(input_ids, (list, tuple)) and all(isinstance(r, torch.Tensor) and r.dim() == 1 for r in input_ids):
        rows = list(input_ids)
    else:
        raise ValueError("input_ids must be a tensor (T,) / (B, T) or a list of 1-D tensors")
    if not rows or any(r.numel() == 0 for r in rows):
        raise ValueError("empty prompt: every row needs at least one token")
    if any(r.is_floating_point() or r.dtype == torch.bool for r in rows):
        raise ValueError("input_ids must be integer token ids")
    lo, hi = min(int(r.min()) for r in rows), max(int(r.max()) for r in rows)
    if lo < 0 or hi >= vocab:
        raise ValueError(f"token ids must lie in [0, {vocab}), got range [{lo}, {hi}]")
    T = max(r.numel() for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long, device=device)
    mask = torch.zeros(len(rows), T, dtype=torch.long, device=device)
    for b, r in enumerate(rows):
        ids[b, T - r.numel():] = r.to(device)
        mask[b, T - r.numel():] = 1
    return ids, mask


def prompt_positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of left-padded prompt slots (mask (B, T), 1 = real): each real token's index among
    its row's real tokens, 0 on padding.  Example: [[0, 1, 1]] -> [[0, 0, 1]]."""
    return (mask.cumsum(1) - 1).clamp(min=0)


def check_arguments(target, drafter, ids, method, max_new_tokens, verifier, cancel):
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if method not in ("token", "block"):
        raise ValueError(f"method must be 'token' or 'block', got {method!r}")
    if verifier is not None and (drafter is None or not callable(verifier)):
        raise ValueError(f"verifier must be a callable like `verify`, and needs a drafter; got {verifier!r}")
    if cancel is not None and not (hasattr(cancel, "is_set") or callable(cancel)):
        raise ValueError("cancel must be a threading.Event, a callable returning bool, or None")
    V = int(target.config.vocab_size)
    if drafter is not None and drafter.vocab_size != V:
        raise ValueError(f"drafter vocabulary ({drafter.vocab_size}) differs from the target's ({V})")
    T = ids.shape[1]
    for name, m in (("target", target), ("drafter", getattr(drafter, "model", None))):
        n_ctx = context_length(m) if m is not None else None
        if n_ctx is not None and T > n_ctx:
            raise ValueError(f"prompt of {T} tokens is longer than the {name}'s context ({n_ctx})")
        if n_ctx is not None and T + max_new_tokens > n_ctx:
            raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) exceeds the {name}'s "
                             f"context ({n_ctx})")


def peak_memory(device) -> tuple[int, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_rss_peak"


def stop_tokens(stop_token_ids, V: int, device) -> torch.Tensor:
    try:
        stop_set = sorted({int(s) for s in stop_token_ids})
    except (TypeError, ValueError):
        raise ValueError(f"stop_token_ids must be an iterable of token ids, got {stop_token_ids!r}") from None
    if stop_set and (stop_set[0] < 0 or stop_set[-1] >= V):
        raise ValueError(f"stop_token_ids must lie in [0, {V}), got {stop_set}")
    return torch.tensor(stop_set, dtype=torch.long, device=device)


def clip_k(k, max_rem: int) -> int:
    """A schedule's k, checked, clipped to the largest remaining budget minus one."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"a draft-length schedule must return an integer >= 0, got {k!r}")
    return min(k, max_rem - 1)
