"""The one interface every engine adapter implements (ours, Hugging Face, vLLM).

An adapter continues token-id prompts `n` times each under one `Sampling` (the processed
distribution p the tokens must follow: temperature, then top-k, then top-p) and one `Speculation`
(None or method "none" is the engine's own plain decoding, the control). It returns the generated
ids and the engine's own counters; a configuration that could not run (a timeout, a method the
installed engine lacks) returns a `Continuations` whose `error` says why instead of raising, so a
table of configurations always has one row per configuration.

Arguments are checked before an engine is touched, by one contract: `Sampling` and `Speculation`
check their own fields when built (below), and every adapter passes the request through
`specdec.peers.contract.check_request` (prompts, ids, counts, seed, context, method, options).  A
refusal raises: TypeError for a value of the wrong type, ValueError for one out of range, each
message naming the argument, the value and the rule.

Example: `engine.continue_prompts([[464, 3290]], n=2, max_new_tokens=3, sampling=Sampling(1.0),
spec=Speculation("draft_model", k=2, draft="draft-distilled"), seed=0).tokens` -> `[[[a, b, c],
[d, e, f]]]`, one list per prompt, one list of `max_new_tokens` ids per sample.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Sampling", "Speculation", "Continuations", "Engine", "as_int", "as_real", "stream_seed"]


def stream_seed(seed: int, *index: int) -> int:
    """The seed of one random stream of a request (prompt ``index``, or prompt and sample), derived
    from the request's ``seed`` by numpy's SeedSequence: requests with different seeds share no
    stream (``seed + index`` would: seed 10's second prompt would be seed 11's first).
    Example: stream_seed(10, 1) != stream_seed(11, 0)."""
    import numpy as np

    return int(np.random.SeedSequence([int(seed), *map(int, index)]).generate_state(1, dtype=np.uint64)[0] >> 1)


def as_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int, refused unless it is a Python or numpy integer (not a bool, not a
    float: 1.5 or even 2.0 is no count) in [low, high) (either end open when None).
    Example: as_int("k", numpy.int64(2), low=1) -> 2;  as_int("k", 2.5, low=1) -> TypeError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int{_range(low, high)}, got {value!r} ({type(value).__name__})")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v >= high):
        raise ValueError(f"{name} must be an int{_range(low, high)}, got {v}")
    return v


def as_real(name: str, value, rule: str, ok=lambda v: True) -> float:
    """``value`` as a Python float, refused unless it is a finite int or float (not a bool) for
    which ``ok`` holds; ``rule`` words ``ok`` for the message.
    Example: as_real("temperature", -1.0, ">= 0", lambda v: v >= 0) -> ValueError naming -1.0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite number {rule}, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not (math.isfinite(v) and ok(v)):
        raise ValueError(f"{name} must be a finite number {rule}, got {v!r}")
    return v


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high})"
    return f" >= {low}" if low is not None else f" < {high}" if high is not None else ""


@dataclass(frozen=True)
class Sampling:
    """The sampling rules in force; p and q are the distributions AFTER these rules.

    Checked when built, and stored as Python numbers (a numpy scalar is converted): temperature a
    finite number >= 0; top_k None or an int >= 0; top_p None or a number in (0, 1].  top_k 0 and
    None mean the same, no top-k truncation, in every adapter (each maps it to its engine's own
    "off": ours None, Hugging Face's generate 0, vLLM 0).
    """
    temperature: float  # 0 = greedy (argmax)
    top_k: int | None = None  # None (or 0) = no top-k truncation
    top_p: float | None = None  # None = no nucleus truncation

    def __post_init__(self):
        object.__setattr__(self, "temperature", as_real("temperature", self.temperature, ">= 0", lambda v: v >= 0))
        if self.top_k is not None:
            object.__setattr__(self, "top_k", as_int("top_k", self.top_k, low=0))
        if self.top_p is not None:
            object.__setattr__(self, "top_p", as_real("top_p", self.top_p, "in (0, 1]", lambda v: 0 < v <= 1))


@dataclass(frozen=True)
class Speculation:
    """A speculative configuration; `None` or method "none" is the engine's plain decoding.

    Checked when built: method a non-empty str; k an int (not 2.5, not a bool), >= 1 for every
    method but "none"; draft None or a non-empty name; options (name, value) pairs with distinct
    str names (a dict or a list of pairs is accepted and stored as a tuple of pairs).  Which methods
    and options an engine takes, and the options' ranges, are the contract's (`check_request`).
    """
    method: str  # "none" | "draft_model" | "ngram" | "suffix" | "token" | "block" | "prompt_lookup" ...
    k: int = 0  # num_speculative_tokens (drafts proposed per step)
    draft: str | None = None  # family member name of the draft model, e.g. "draft-distilled"
    options: tuple[tuple[str, object], ...] = ()  # engine-specific, e.g. (("draft_sample_method", "probabilistic"),)

    def __post_init__(self):
        if not isinstance(self.method, str) or not self.method:
            raise TypeError(f"Speculation method must be a non-empty str such as 'draft_model', got {self.method!r}")
        k = as_int("Speculation k", self.k, low=0)
        if self.method != "none" and k < 1:
            raise ValueError(f"speculation {self.method!r} needs k >= 1 drafted tokens, got k={k}")
        object.__setattr__(self, "k", k)
        if self.draft is not None and (not isinstance(self.draft, str) or not self.draft):
            raise TypeError(f"Speculation draft must be None or a model name such as 'draft-distilled', "
                            f"got {self.draft!r}")
        opts = list(self.options.items()) if isinstance(self.options, dict) else self.options
        if not isinstance(opts, (tuple, list)) or not all(
                isinstance(o, (tuple, list)) and len(o) == 2 and isinstance(o[0], str) for o in opts):
            raise TypeError(f"Speculation options must be (name, value) pairs with str names, got {self.options!r}")
        names = [o[0] for o in opts]
        if len(set(names)) != len(names):
            raise ValueError(f"Speculation options name an option twice: {names}")
        object.__setattr__(self, "options", tuple((name, value) for name, value in opts))


@dataclass
class Continuations:
    """What an engine returned for one configuration."""
    tokens: list[list[list[int]]]  # [prompt][sample] -> generated token ids
    counters: dict  # the engine's own counters (e.g. vLLM spec_decode_*, per position included)
    provenance: dict  # engine name, versions, configuration, wall time
    error: str | None = None  # set when the row failed (timeout, method not available): why
    # [prompt][sample] -> [(drafted, accepted), ...] of its verification steps in order, where the engine
    # reports them per sample (`specdec.peers.steps`: all steps for ours and Hugging Face, those that
    # carried drafts for vLLM); None where it does not
    steps: list | None = None


class Engine(Protocol):
    """An engine adapter: `name` for tables, `continue_prompts` for the work (arguments checked
    by `specdec.peers.contract.check_request` before the engine is touched)."""
    name: str

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        ...
