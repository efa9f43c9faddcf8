"""Which verification step emitted each token of a sample, from an engine's per-sample step record.

A record (`specdec.peers.interface.Continuations.steps`, one per sample) lists, in order, the
(drafted, accepted) pair of verification steps: every decode step where the engine reports all of
them (ours: `steps_of`), only the steps that carried drafts where it reports those (vLLM's
per-request metrics).  A step emits its accepted drafts and one more token (the replacement at the
first rejection, or the bonus), so it covers ``accepted + 1`` tokens.  The tokens are aligned with
the steps when the listed steps cover every token that follows the prefill token (if the engine
samples the first token at prefill, as vLLM and Hugging Face do): then no undrafted step can hide
between them.  Otherwise only counts are known.

`token_steps` gives, per token, its in-step index (1 = the first position of its step; the last
listed step may be cut by max_new_tokens) and whether its step carried a draft; 0 / False where
unknown.  `drafted_tokens` counts the tokens emitted by steps that carried drafts.

Example: token_steps([(2, 1), (2, 0)], L=4, prefill=True) -> index [0, 1, 2, 1], drafted [F, T, T, T]
(token 1 from prefill; step 1 kept one draft and replaced the second; step 2 replaced its first).
"""

from __future__ import annotations

import numpy as np

__all__ = ["token_steps", "drafted_tokens", "steps_of", "aligned"]


def _check(record, L: int) -> list[tuple[int, int]]:
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L (tokens per sample) must be an int >= 1, got {L!r}")
    out = []
    for pair in record:
        d, a = (int(x) for x in pair)
        if d < 0 or not 0 <= a <= d:
            raise ValueError(f"a step is (drafted >= 0, 0 <= accepted <= drafted), got {tuple(pair)!r}")
        out.append((d, a))
    return out


def aligned(record, L: int, prefill: bool, complete: bool = False) -> bool:
    """True when the listed steps (``complete``: every decode step is listed) cover every token
    after the prefill one, so that the token of each step is known (module docstring)."""
    if record is None:
        return False
    steps = _check(record, L)
    return complete or sum(a + 1 for _, a in steps) >= L - int(prefill)


def token_steps(record, L: int, prefill: bool, complete: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(index (L,) int, drafted (L,) bool) of one sample (module docstring); zeros where not aligned."""
    index, drafted = np.zeros(L, dtype=np.int64), np.zeros(L, dtype=bool)
    if not aligned(record, L, prefill, complete):
        return index, drafted
    t = int(prefill)
    for d, a in _check(record, L):
        for i in range(a + 1):
            if t >= L:
                break
            index[t], drafted[t] = i + 1, d > 0
            t += 1
    return index, drafted


def drafted_tokens(record, L: int, prefill: bool) -> int:
    """Tokens of one sample emitted by steps that carried drafts (at most L - prefill)."""
    if record is None:
        raise ValueError("no step record for this sample: the engine does not report its steps")
    return min(sum(a + 1 for d, a in _check(record, L) if d > 0), L - int(prefill))


def steps_of(stats, rows: int) -> list[list[tuple[int, int]]]:
    """Per row of one `specdec.engine.generate` call, (drafted, accepted) of every decode step
    (ours feeds the prompt with its first step: every token comes from a listed step)."""
    out = [[] for _ in range(rows)]
    for s, (rows_a, kept) in zip(stats.steps, stats.accepted):
        for r, a in zip(rows_a, kept):
            out[int(r)].append((int(s["k"]), int(a)))
    return out
