"""The audit's plan (chapter 10 runs it): which configuration of which engine is held to the target's law, and the
negative controls the tests must reject.

Protocol, stated before any result (the chapter states it again in its own words):
  1. Configurations (`plan`): each engine's (ours, Hugging Face, vLLM, llama.cpp) plain decoding (the positive control: if it fails, the
     fault is the engine's sampler, not speculation); each speculative configuration the installed
     engine exposes; for every sampled vLLM configuration the same configuration *patched* (vLLM's
     `expand_batch_to_tokens` replaced by the project's dtype-preserving one, `peers.vllm_patch`:
     never a default, named "patched" wherever it appears); and our engine with named wrong
     verification rules, the negative controls, which the tests must reject.
  2. What ran is read from the running engine (vLLM: `peers.vllm_patch.what_ran`): a requested
     option the build ignores makes its row "ignored by this build", never a verdict.
  3. The law of the first two tokens (`specdec.audit.law`), every position of long outputs
     (`specdec.audit.pit_rows`), acceptance against its exact expectation, greedy equality.

The planted fault "temperature misapplied at drafted positions" (`TemperedAtDrafts`) verifies
exactly but against the target's law at another temperature at every drafted position (the bonus
token keeps the right one): the kind of fault vLLM's CPU expand causes, at a known size.

Example: [c.label for c in plan(2, "draft-distilled") if c.engine == "vllm"][:2]
    -> ["plain decoding", "draft model, k = 2 (defaults)"]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.rules.variants import VARIANTS
from specdec.core.sampling import SamplingConfig
from specdec.core.verify import verify
from specdec.engine.decode import generate
from specdec.peers.interface import Continuations, Sampling, Speculation, stream_seed
from specdec.peers.steps import steps_of

__all__ = ["Config", "SETTINGS", "plan", "NegativeControl", "TemperedAtDrafts", "with_verifier", "config_cfg",
           "PATCHED", "TEMPERED"]

SETTINGS = {"greedy": Sampling(0.0), "temperature 1": Sampling(1.0),
            "temperature 0.7, top-p 0.9": Sampling(0.7, top_p=0.9)}
PATCHED = ", patched"  # the suffix of every patched configuration's label
TEMPERED = "tempered_at_drafts"  # the planted fault's variant name


@dataclass(frozen=True)
class Config:
    """One row of the audit: which engine, what it runs, and what the row is for."""
    engine: str  # "ours" | "hf" | "vllm" | "llama"
    label: str  # the configuration in words
    spec: Speculation | None  # None: the engine's plain decoding
    role: str  # "control" (plain decoding), "speculative", "negative control" (must fail)
    rule: str | None = None  # the documented rule of its acceptance expectation ("sampled", "argmax"); vLLM: what ran
    variant: str | None = None  # a negative control's wrong rule (`VARIANTS` name or TEMPERED)
    patched: bool = False  # vLLM with the project's expand (`peers.vllm_patch`)


def plan(k: int, draft: str) -> list[Config]:
    """Every configuration the chapter runs (module docstring, item 1), in table order."""
    dm = lambda *opts: Speculation("draft_model", k=k, draft=draft, options=tuple(opts))  # noqa: E731
    vllm = [("draft model, k = %d (defaults)" % k, dm()),
            ("draft model, k = %d, probabilistic drafts" % k, dm(("draft_sample_method", "probabilistic"))),
            ("n-gram prompt lookup, k = %d" % k, Speculation("ngram", k=k))]
    block = Config("vllm", f"draft model, k = {k}, probabilistic drafts, block rejection",
                   dm(("draft_sample_method", "probabilistic"), ("rejection_sample_method", "block")), "speculative")
    return [
        Config("ours", "plain decoding", None, "control"),
        Config("ours", f"token verification, k = {k}", Speculation("token", k=k, draft=draft), "speculative", "sampled"),
        Config("ours", f"block verification, k = {k}", Speculation("block", k=k, draft=draft), "speculative"),
        Config("ours", "wrong rule: every draft kept", Speculation("token", k=k, draft=draft), "negative control",
               variant="always_accept"),
        Config("ours", "wrong rule: residual omitted", Speculation("token", k=k, draft=draft), "negative control",
               variant="resample_from_p"),
        Config("ours", "wrong rule: temperature x1.25 at drafted positions", Speculation("token", k=k, draft=draft),
               "negative control", variant=TEMPERED),
        Config("hf", "plain generate", None, "control"),
        Config("hf", f"assisted generation, k = {k}", Speculation("draft_model", k=k, draft=draft), "speculative"),
        Config("hf", "prompt lookup", Speculation("prompt_lookup", k=k), "speculative"),
        Config("vllm", "plain decoding", None, "control"),
        *[Config("vllm", label + suffix, spec, "speculative", patched=bool(suffix))
          for label, spec in vllm for suffix in ("", PATCHED)],
        block,
        Config("llama", "plain decoding", None, "control"),
        Config("llama", f"draft model, k = {k}, greedy drafts (sample-and-match)", dm(("draft_sampling", "greedy")),
               "speculative", "argmax"),
        Config("llama", f"draft model, k = {k}, probabilistic drafts (rejection)",
               dm(("draft_sampling", "probabilistic")), "speculative", "sampled"),
        Config("llama", f"n-gram prompt lookup (ngram-simple), k = {k}", Speculation("ngram", k=k), "speculative"),
    ]


def config_cfg(s: Sampling) -> SamplingConfig:
    """The core's sampling configuration for an interface `Sampling` (top-k 0 is no top-k)."""
    return SamplingConfig(s.temperature, top_k=s.top_k or None, top_p=s.top_p)


@dataclass(frozen=True)
class TemperedAtDrafts:
    """A verifier (`specdec.core.verify.verify`'s signature) that verifies exactly against p^(1 /
    factor), renormalized, at the k drafted positions -- the target's law at ``factor`` times its
    temperature -- and keeps p at the bonus position.  A planted fault, never a rule."""
    factor: float = 1.25

    def __call__(self, d, q, p, *, method: str = "token", generator=None):
        k = d.shape[1]
        hot = p[:, :k].to(torch.float64).pow(1.0 / self.factor)  # (B, k, V); zeros stay zero
        hot = hot / hot.sum(-1, keepdim=True)
        return verify(d, q, torch.cat([hot.to(p.dtype), p[:, k:]], 1), method=method, generator=generator)


def with_verifier(target, draft, verifier, prompts, n: int, max_new_tokens: int, sampling: Sampling,
                  spec: Speculation, seed: int, provenance: dict) -> Continuations:
    """`OursEngine.continue_prompts` with a verifier a caller names (one batch of n copies per
    prompt, seeded `stream_seed` (seed, prompt index)), every decode step listed in ``steps``."""
    tokens, steps = [], []
    cfg = config_cfg(sampling)
    for i, p in enumerate(prompts):
        res = generate(target, torch.tensor([list(p)] * n), drafter=draft, k=spec.k, max_new_tokens=max_new_tokens,
                       temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p,
                       generator=torch.Generator().manual_seed(stream_seed(seed, i)), verifier=verifier, mode="lean")
        tokens.append([t.tolist() for t in res.tokens])
        steps.append(steps_of(res.stats, len(res.tokens)))
    return Continuations(tokens, {}, {**provenance, "seed": seed}, steps=steps)


@dataclass
class NegativeControl:
    """Our engine with a named wrong verifier (`specdec.core.rules.variants`, or TEMPERED): the
    negative control the tests must reject.  Same interface as `specdec.peers.ours.OursEngine`."""
    target: object
    draft: object
    variant: str
    name: str = "ours (wrong rule)"

    def continue_prompts(self, prompts, n: int, max_new_tokens: int, sampling: Sampling, spec: Speculation,
                         seed: int) -> Continuations:
        if self.variant == TEMPERED:
            verifier = TemperedAtDrafts()
        elif self.variant in VARIANTS:
            verifier = VARIANTS[self.variant].sampled
        else:
            raise ValueError(f"unknown wrong variant {self.variant!r}; known: {', '.join([*VARIANTS, TEMPERED])}")
        return with_verifier(self.target, self.draft, verifier, prompts, n, max_new_tokens,
                             sampling, spec, seed, {"engine": self.name, "variant": self.variant})
