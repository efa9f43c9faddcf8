"""Our engine (`specdec.engine.generate`) behind `specdec.peers.Engine`: the reference the others
are held beside, run through the same interface.

Methods: None / "none" = autoregressive decoding (the control); "token" = token-wise verification
(Leviathan et al. 2023, Chen et al. 2023); "block" = block verification (Sun et al. 2025); both
with the family member `spec.draft` drafting `spec.k` tokens a step.  Each prompt is decoded as
ONE batch of `n` copies from a `torch.Generator` seeded with `stream_seed(seed, prompt index)`, no stop token,
so every sample has exactly `max_new_tokens` ids.  ``mode="lean"`` runs both models through
`specdec.engine.modes.lean` (the same law, the engine's fastest exact forward on a CPU).
Arguments are checked first by `specdec.peers.contract.check_request` against the target's
vocabulary and context; top_k 0 (no truncation) is passed to the engine as None, its own "off".

Counters, named as vLLM names its own so the two read alike (`specdec.engine.stats.DecodeStats`):
num_drafts = (row, step) pairs that drafted, num_draft_tokens = drafts proposed, num_accepted_tokens
= drafts accepted, num_accepted_tokens_per_pos = [accepted at position 1, 2, ...] (accepted at i
iff a step accepted i or more), num_draft_tokens_per_pos likewise, and num_steps = target forwards
(verification steps) summed over prompts.

Example: OursEngine().continue_prompts([[5, 6, 7]], n=4, max_new_tokens=3, sampling=Sampling(1.0),
spec=Speculation("token", k=2, draft="draft-distilled"), seed=0).tokens -> 1 prompt x 4 samples x 3 ids.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from specdec.engine.decode import generate
from specdec.engine.modes.lean import lean
from specdec.family.loader import load_model
from specdec.peers.contract import check_request, config_limits
from specdec.peers.interface import Continuations, Sampling, Speculation, stream_seed
from specdec.peers.steps import steps_of

__all__ = ["METHODS", "FamilyEngine", "OursEngine"]

METHODS = ("none", "token", "block")


@dataclass
class FamilyEngine:
    """An engine run in this process on the embedded family (CPU, float32 unless told)."""
    target: str = "target"
    device: str = "cpu"
    dtype: str = "float32"
    _models: dict = field(default_factory=dict, repr=False)

    def model(self, member: str):
        """A family member, loaded once through the project's loader."""
        if member not in self._models:
            self._models[member] = load_model(member, dtype=self.dtype, device=self.device)
        return self._models[member]

    def limits(self) -> tuple[int, int | None]:
        """(vocabulary size V, context in positions) of the target, from its config: what the
        contract checks token ids and lengths against (`specdec.peers.contract.check_request`)."""
        return config_limits(FamilyEngine.model(self, self.target).config.to_dict())


@dataclass
class OursEngine(FamilyEngine):
    """`specdec.engine.generate` on the embedded family, eager (Hugging Face's modules) or lean."""
    name: str = "ours"
    mode: str = "eager"  # "eager" | "lean"

    def model(self, member: str):
        if self.mode not in ("eager", "lean"):
            raise ValueError(f"mode must be 'eager' or 'lean', got {self.mode!r}")
        m = super().model(member)
        if self.mode == "eager":
            return m
        key = ("lean", member)
        if key not in self._models:
            self._models[key] = lean(m)
        return self._models[key]

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        vocab, context = self.limits()
        req = check_request(prompts, n, max_new_tokens, sampling, spec, seed, vocab_size=vocab, context=context,
                            methods=METHODS, drafted=("token", "block"), options={})
        prompts, n, max_new_tokens, seed, method, _ = req  # checked, as Python values
        target = self.model(self.target)
        drafter = None if method == "none" else self.model(spec.draft)
        tokens, steps, counters = [], [], {"num_steps": 0, "num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0,
                                "num_accepted_tokens_per_pos": [0] * (spec.k if drafter is not None else 0),
                                "num_draft_tokens_per_pos": [0] * (spec.k if drafter is not None else 0)}
        start = time.perf_counter()
        for i, prompt in enumerate(prompts):
            ids = torch.tensor([prompt] * n, dtype=torch.long, device=self.device)  # (n, T)
            gen = torch.Generator(self.device).manual_seed(stream_seed(seed, i))
            res = generate(target, ids, drafter=drafter, k=spec.k if drafter is not None else 1,
                           method=method if drafter is not None else "token", max_new_tokens=max_new_tokens,
                           temperature=sampling.temperature, top_k=sampling.top_k or None, top_p=sampling.top_p,
                           generator=gen, mode=self.mode)
            tokens.append([t.tolist() for t in res.tokens])
            steps.append(steps_of(res.stats, len(res.tokens)))
            _count(res.stats, counters)
        provenance = {"engine": self.name, "method": method, "k": spec.k if drafter is not None else 0,
                      "draft": spec.draft if drafter is not None else None, "target": self.target,
                      "sampling": vars(sampling), "n": n, "seed": seed, "device": self.device, "dtype": self.dtype,
                      "mode": self.mode,
                      "torch": torch.__version__, "wall_s": time.perf_counter() - start}
        return Continuations(tokens, counters, provenance, steps=steps)  # every decode step listed


def _count(stats, counters: dict) -> None:
    """Add one `generate` call's acceptance to the vLLM-named counters (module docstring)."""
    counters["num_steps"] += len(stats.steps)
    rows = [r for r in stats.accept_rows() if r["k"] > 0]
    counters["num_drafts"] += len(rows)
    counters["num_draft_tokens"] += sum(r["k"] for r in rows)
    counters["num_accepted_tokens"] += sum(r["accepted"] for r in rows)
    for pos in stats.acceptance_by_position():
        i = pos["position"] - 1
        counters["num_accepted_tokens_per_pos"][i] += pos["accepted"]
        counters["num_draft_tokens_per_pos"][i] += pos["proposed"]
