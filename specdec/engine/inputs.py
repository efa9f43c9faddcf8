"""Checking what `generate` is given, with an error that names the problem: prompts, knobs, the
drafter, stop tokens, the generator, a schedule's k; the cap on the draft length; and the memory
figure of a run.

Every argument is checked before the first forward, in one of these functions (`serve` calls the
same ones, and names the job), so a bad value is refused up front whatever the path it would take
(greedy or sampled, plain or speculative) -- never truncated to a valid one (1.5 is not token 1) and
never left to fail mid-run.  An integer argument is an int (or a numpy / 0-d torch integer), never a
bool or a float with an integral value.

Example: prompts_of([torch.tensor([1, 2]), torch.tensor([3])], 10, "cpu")
         -> (tensor([[1, 2], [0, 3]]), tensor([[1, 1], [0, 1]]))   (left-padded ids, mask)
"""

from __future__ import annotations

import operator
import resource

import torch

from specdec.core.sampling import RowGenerators
from specdec.engine.kv import context_length

__all__ = ["prompts_of", "prompt_positions", "check_arguments", "check_generator", "peak_memory", "stop_tokens",
           "clip_k", "next_k_cap", "K_UNCAPPED", "as_int"]

K_UNCAPPED = 8  # a draft length never capped: the largest k the chapters use


def as_int(x):
    """x as a Python int if it is an integer (int, numpy integer, 0-d integer tensor), else None:
    bools, floats (1.5, and 1.0 too) and strings are not integers here."""
    if isinstance(x, bool) or (isinstance(x, torch.Tensor) and x.dtype == torch.bool):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


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


def check_generator(generator, rows: int) -> None:
    """Raise TypeError unless ``generator`` is None, a torch.Generator, or a `RowGenerators` with one
    generator per row: checked up front, at every temperature (greedy decoding draws nothing, but a
    wrong argument is still wrong)."""
    if generator is None or isinstance(generator, torch.Generator):
        return
    if not isinstance(generator, RowGenerators):
        raise TypeError(f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(42)), a "
                        f"RowGenerators or None, got {type(generator).__name__} {generator!r}")
    if len(generator) != rows:
        raise TypeError(f"a RowGenerators needs one generator per row: {len(generator)} for {rows} rows")


def stop_tokens(stop_token_ids, V: int, device) -> torch.Tensor:
    """The stop token ids as a sorted (S,) tensor; each must be an integer id in [0, V) (`as_int`):
    ValueError naming the first bad one otherwise."""
    if isinstance(stop_token_ids, (str, bytes)) or not hasattr(stop_token_ids, "__iter__"):
        raise ValueError(f"stop_token_ids must be an iterable of token ids, got {stop_token_ids!r}")
    ids = list(stop_token_ids)
    bad = [s for s in ids if as_int(s) is None]
    if bad:
        raise ValueError(f"stop_token_ids must be integer token ids; {bad[0]!r} ({type(bad[0]).__name__}) "
                         "is not one")
    stop_set = sorted({as_int(s) for s in ids})
    if stop_set and (stop_set[0] < 0 or stop_set[-1] >= V):
        raise ValueError(f"stop_token_ids must lie in [0, {V}), got {stop_set}")
    return torch.tensor(stop_set, dtype=torch.long, device=device)


def clip_k(k, max_rem: int, cap: int = K_UNCAPPED) -> int:
    """A schedule's k, checked, clipped to the largest remaining budget minus one and to ``cap``
    (`next_k_cap`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"a draft-length schedule must return an integer >= 0, got {k!r}")
    return min(k, max_rem - 1, cap)


def next_k_cap(n_max: int) -> int:
    """The cap on the next step's draft length, after a drafting step whose longest accepted run
    was n_max drafts: max(K_UNCAPPED, 2 (n_max + 1)).

    Why: a draft is worth something only when every draft before it is accepted, so drafting far
    beyond the longest run the drafter has just achieved cannot pay -- k = 1000 with a drafter that
    is accepted a few tokens at a time would make each step draft hundreds of tokens for a few kept.
    The cap doubles what the last step earned (a slow start: a drafter accepted all the way grows
    its drafts 8, 18, 38, ... up to the requested k) and never binds at or below K_UNCAPPED, so
    k <= 8 runs exactly as requested.  The bound it gives: a step drafts at most 8 + 2 e tokens
    per row, e the tokens the longest row got from the step before; so a one-row run drafts at
    most 10 times the tokens it emits (it has at most as many steps as tokens).
    Example: next_k_cap(0) -> 8; next_k_cap(5) -> 12."""
    return max(K_UNCAPPED, 2 * (n_max + 1))
