"""Hugging Face's own decoding as the reference: plain `generate` and assisted generation.

Pinned so that it decodes what our engine decodes: num_assistant_tokens=k with the "constant"
schedule and assistant_confidence_threshold=0 -- set on the ASSISTANT's generation_config, because
transformers 5.24's candidate generator reads them from there (values passed to generate() alone
left it at 1 draft per step, counted with forward hooks) -- top_k explicit (generate's default is
50; 0 disables it), and no stop token (HF fills an unset eos from the model's config and stops
there; seen: runs of 1-5 tokens instead of 6 at T = 1).  HF assisted generation takes batch size
1 only.  ``compiled=True`` is HF's own graph-compiled mode: a static cache with ``compile_config``
(``_compile_all_devices``, which HF needs off CUDA), both documented by transformers for
`generate`.  It compiles the target's forward only: for assisted generation transformers 5.24
clears compile_config and the cache implementation on the assistant (candidate_generator.py), so
the draft runs eager.  `make bench` compares each engine with the other in the same mode and says so.

Example: tokens, row = hf_assisted(target, draft, ids[:1], k=4, max_new_tokens=64, temperature=1.0, seed=0)
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass

import torch

from specdec.engine.kv import now
from specdec.peers.contract import check_request
from specdec.peers.interface import Continuations, Sampling, Speculation, stream_seed
from specdec.peers.ours import FamilyEngine

__all__ = ["hf_assisted", "pin_assistant", "no_stop_token", "HFEngine", "HF_METHODS", "record_candidates",
           "steps_from_candidates"]


@contextlib.contextmanager
def no_stop_token(*models):
    """Within the block the models have no eos token (module docstring); restored afterwards."""
    gcs = [getattr(m, "inner", m).generation_config for m in models
           if m is not None and getattr(getattr(m, "inner", m), "generation_config", None) is not None]
    saved = [gc.eos_token_id for gc in gcs]
    for gc in gcs:
        gc.eos_token_id = None
    try:
        yield
    finally:
        for gc, eos in zip(gcs, saved):
            gc.eos_token_id = eos


@contextlib.contextmanager
def record_candidates(log: list):
    """Within the block every candidate list HF's assistant or prompt lookup proposes is appended to
    ``log`` (the new candidate token ids of each verification step, [] when it proposed none): what
    HF drafted, read from HF's own candidate generators (their ``get_candidates`` wrapped, then restored)."""
    from transformers.generation import candidate_generator as cg

    classes = (cg.AssistedCandidateGenerator, cg.PromptLookupCandidateGenerator)
    saved = [c.__dict__["get_candidates"] for c in classes]

    def wrap(original):
        def get_candidates(self, input_ids, **kwargs):
            ids, logits = original(self, input_ids, **kwargs)
            log.append(ids[0, input_ids.shape[1]:].tolist())
            return ids, logits
        return get_candidates

    for c, original in zip(classes, saved):
        c.get_candidates = wrap(original)
    try:
        yield
    finally:
        for c, original in zip(classes, saved):
            c.get_candidates = original


def steps_from_candidates(candidates: list[list[int]], tokens: list[int]) -> list[tuple[int, int]] | None:
    """(drafted, accepted) of each verification step of one assisted call from its candidate lists
    and its new tokens: a candidate is kept iff the step emitted it (a rejected draft is never
    emitted: the residual [p - q]+ and the match rule both put no mass on it), and a step emits its
    kept candidates and one more token.  None when the lists do not account for the tokens."""
    out, t = [], 0
    for c in candidates:
        if t >= len(tokens):
            break
        a = 0
        while a < len(c) and t + a < len(tokens) and tokens[t + a] == c[a]:
            a += 1
        out.append((len(c), a))
        t += a + 1
    return out if t >= len(tokens) else None


PINNED = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


@contextlib.contextmanager
def pin_assistant(draft, k: int):
    """Within the block, HF's draft length is pinned to k on the assistant itself (module
    docstring); the assistant's own settings are restored afterwards (the caller's model is left
    as it was).  Example: with pin_assistant(draft, 4): target.generate(..., assistant_model=draft)"""
    gc = getattr(draft, "inner", draft).generation_config
    saved = {name: getattr(gc, name, None) for name in PINNED}
    gc.num_assistant_tokens, gc.num_assistant_tokens_schedule, gc.assistant_confidence_threshold = k, "constant", 0.0
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(gc, name, value)


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' own warnings (assisted generation passes both a config and arguments to itself,
    which 5.24 warns about on every call) are silenced for the call, then the level is restored."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def hf_assisted(target, draft, input_ids, *, k: int, max_new_tokens: int, temperature: float, seed: int,
                top_k: int | None = None, top_p: float | None = None, compiled: bool = False,
                lookup_ngram: int = 0, candidates: list | None = None) -> tuple[torch.Tensor, dict]:
    """Hugging Face assisted generation with k pinned (batch 1), or HF's plain `generate` for
    k = 0 (any batch of equal-length prompts), as a side-by-side reference.  ``lookup_ngram`` > 0
    (with draft None) is HF's prompt lookup instead of a draft model: ``prompt_lookup_num_tokens=k``
    with n-grams of at most ``lookup_ngram`` tokens (``max_matching_ngram_size``), batch 1.

    Pinned as the module docstring says, for the call only: the models' own generation configs are
    restored afterwards.  HF's sampler draws from the global RNG, so it runs inside
    `torch.random.fork_rng` seeded with `seed`: the caller's global state is restored afterwards.
    Returns (new tokens (B, N), row) with tokens (all rows), total_s and tokens_per_s over the
    whole call (HF exposes no per-token timing), and steps: the target's forward calls, counted by a
    forward hook for the call (one per token in plain generate, one per verification step in
    assisted generation, the prompt's included; the hook adds about a microsecond a call; NaN when
    the draft is the target itself, whose draft forwards the hook could not tell apart).
    ``candidates``: a list that receives each verification step's candidate ids (`record_candidates`).
    """
    if lookup_ngram and (draft is not None or k < 1):
        raise ValueError("prompt lookup (lookup_ngram > 0) takes no draft model and k >= 1")
    if input_ids.dim() != 2 or (k > 0 and input_ids.shape[0] != 1):
        raise ValueError("HF assisted generation takes batch size 1: input_ids (1, T); plain generate (k = 0) "
                         "takes (B, T)")
    inner = lambda m: getattr(m, "inner", m)  # noqa: E731  (unwrap an engine KVCompat)
    tgt = inner(target)
    device = next(tgt.parameters()).device
    kw = dict(max_new_tokens=max_new_tokens, pad_token_id=0)
    if temperature == 0:
        kw.update(do_sample=False)
    else:
        kw.update(do_sample=True, temperature=temperature, top_p=top_p if top_p is not None else 1.0,
                  top_k=top_k if top_k is not None else 0)
    extra = {}
    if lookup_ngram:
        kw.update(prompt_lookup_num_tokens=k, max_matching_ngram_size=lookup_ngram)
    elif k > 0:
        kw.update(num_assistant_tokens=k, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
        extra["assistant_model"] = inner(draft)
    gc = copy.deepcopy(tgt.generation_config)
    gc.update(**kw)
    if compiled:  # HF's compiled mode (module docstring)
        from transformers import CompileConfig

        gc.cache_implementation, gc.compile_config = "static", CompileConfig()
        gc.compile_config._compile_all_devices = True
    gc.eos_token_id = None  # no stop token, as in the engine runs: exactly max_new_tokens
    devs = [device] if device.type == "cuda" else []
    pinned = pin_assistant(draft, k) if k > 0 and draft is not None else contextlib.nullcontext()
    calls = [0]
    record = record_candidates(candidates) if candidates is not None else contextlib.nullcontext()
    with torch.random.fork_rng(devices=devs), torch.inference_mode(), pinned, _quiet_transformers(), record, \
            no_stop_token(tgt, draft if k > 0 and draft is not None else None):
        torch.manual_seed(seed)
        hook = tgt.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        try:
            t0 = now(device)
            out = tgt.generate(input_ids.to(device), attention_mask=torch.ones_like(input_ids).to(device),
                               generation_config=gc, **extra)
            total = now(device) - t0
        finally:
            hook.remove()
    new = out[:, input_ids.shape[1]:].cpu()
    # the target as its own draft: its draft forwards would count too
    steps = float("nan") if k > 0 and draft is not None and inner(draft) is tgt else calls[0]
    return new, {"tokens": int(new.numel()), "steps": steps, "total_s": total, "tokens_per_s": new.numel() / total}


HF_METHODS = ("none", "draft_model", "prompt_lookup")


@dataclass
class HFEngine(FamilyEngine):
    """Hugging Face's `generate` behind `specdec.peers.Engine`, through `hf_assisted`.

    Methods: None / "none" = plain `generate`, one batch of `n` copies per prompt, seeded with
    `stream_seed(seed, prompt index)`; "draft_model" = assisted generation with the family member `spec.draft`
    and k pinned; "prompt_lookup" = HF's prompt lookup (option "max_matching_ngram_size", HF's
    default 2).  Assisted generation takes batch 1, so sample j of prompt i is its own call seeded
    with `stream_seed(seed, i, j)` (requests with other seeds share no call).  HF's assistant samples its
    drafts with the target's own settings
    (greedy at temperature 0, sampled otherwise, verified by `_speculative_sampling`); prompt
    lookup's drafts are kept while they match the target's own choice.  HF reports no acceptance:
    the counters are the target's forwards (`num_steps`, one per verification step) and tokens.
    Arguments are checked first by `specdec.peers.contract.check_request` against the target's
    vocabulary and context (max_matching_ngram_size an int >= 1); top_k 0 and None both reach
    `generate` as 0, its own "no top-k truncation".
    """
    name: str = "hf"

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        vocab, context = self.limits()
        prompts, n, max_new_tokens, seed, method, options = check_request(
            prompts, n, max_new_tokens, sampling, spec, seed, vocab_size=vocab, context=context, methods=HF_METHODS,
            drafted=("draft_model",), options={"prompt_lookup": ("max_matching_ngram_size",)})
        target = self.model(self.target)
        draft = self.model(spec.draft) if method == "draft_model" else None
        kw = dict(max_new_tokens=max_new_tokens, temperature=sampling.temperature, top_k=sampling.top_k,
                  top_p=sampling.top_p, lookup_ngram=int(options.get("max_matching_ngram_size", 2))
                  if method == "prompt_lookup" else 0)
        tokens, steps, counters = [], [], {"num_steps": 0, "num_tokens": 0}
        start = time.perf_counter()
        for i, prompt in enumerate(prompts):
            ids = torch.tensor([prompt], dtype=torch.long)  # (1, T)
            if method == "none":
                calls = [(ids.repeat(n, 1), stream_seed(seed, i))]
            else:
                calls = [(ids, stream_seed(seed, i, j)) for j in range(n)]
            rows, row_steps = [], []
            for batch, s in calls:
                log = [] if method != "none" else None
                new, row = hf_assisted(target, draft, batch, k=spec.k if method != "none" else 0, seed=s,
                                       candidates=log, **kw)
                rows += new.tolist()
                if log is not None:
                    row_steps.append(steps_from_candidates(log, new[0].tolist()))
                counters["num_steps"] += row["steps"]
                counters["num_tokens"] += row["tokens"]
            tokens.append(rows)
            steps.append(row_steps)
        import transformers

        provenance = {"engine": self.name, "method": method, "k": spec.k if method != "none" else 0,
                      "draft": spec.draft if draft is not None else None, "options": options,
                      "target": self.target, "sampling": vars(sampling), "n": n, "seed": seed,
                      "device": self.device, "dtype": self.dtype, "torch": torch.__version__,
                      "transformers": transformers.__version__, "wall_s": time.perf_counter() - start}
        return Continuations(tokens, counters, provenance, steps=steps if method != "none" else None)
