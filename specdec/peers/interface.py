"""The one interface every engine adapter implements (ours, Hugging Face, vLLM).

An adapter continues token-id prompts `n` times each under one `Sampling` (the processed
distribution p the tokens must follow: temperature, then top-k, then top-p) and one `Speculation`
(None or method "none" is the engine's own plain decoding, the control). It returns the generated
ids and the engine's own counters; a configuration that could not run (a timeout, a method the
installed engine lacks) returns a `Continuations` whose `error` says why instead of raising, so a
table of configurations always has one row per configuration.

Example: `engine.continue_prompts([[464, 3290]], n=2, max_new_tokens=3, sampling=Sampling(1.0),
spec=Speculation("draft_model", k=2, draft="draft-distilled"), seed=0).tokens` -> `[[[a, b, c],
[d, e, f]]]`, one list per prompt, one list of `max_new_tokens` ids per sample.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Sampling:
    """The sampling rules in force; p and q are the distributions AFTER these rules."""
    temperature: float  # 0 = greedy (argmax)
    top_k: int | None = None  # None = no top-k truncation
    top_p: float | None = None  # None = no nucleus truncation


@dataclass(frozen=True)
class Speculation:
    """A speculative configuration; `None` or method "none" is the engine's plain decoding."""
    method: str  # "none" | "draft_model" | "ngram" | "suffix" | "token" | "block" | "prompt_lookup" ...
    k: int = 0  # num_speculative_tokens (drafts proposed per step)
    draft: str | None = None  # family member name of the draft model, e.g. "draft-distilled"
    options: tuple[tuple[str, object], ...] = ()  # engine-specific, e.g. (("draft_sample_method", "probabilistic"),)


@dataclass
class Continuations:
    """What an engine returned for one configuration."""
    tokens: list[list[list[int]]]  # [prompt][sample] -> generated token ids
    counters: dict  # the engine's own counters (e.g. vLLM spec_decode_*, per position included)
    provenance: dict  # engine name, versions, configuration, wall time
    error: str | None = None  # set when the row failed (timeout, method not available): why


class Engine(Protocol):
    """An engine adapter: `name` for tables, `continue_prompts` for the work."""
    name: str

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        ...
