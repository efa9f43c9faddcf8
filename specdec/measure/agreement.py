"""Agreement of a draft with the target on REAL text (teacher forcing), before any decoding.

For a context c the probability that speculative sampling accepts a draft token is
beta(c) = sum_x min(p(x|c), q(x|c)) = 1 - TV(p, q) (Leviathan et al. 2023, section 3.1), with p and
q processed by the same sampling rules; at temperature 0 it is greedy agreement.  Here both models
read the true prefix of held-out text, so beta is measured on text, not on what the target itself
generates (chapter 05 measures that).

Example: teacher_forced_beta(target, draft, ids, SamplingConfig(1.0), start=64).mean()
"""

from __future__ import annotations

import torch

from specdec.core.acceptance import context_beta

__all__ = ["teacher_forced_beta", "teacher_forced_logits", "logits_beta"]


@torch.inference_mode()
def teacher_forced_beta(target, draft, ids: torch.Tensor, sampling, start: int) -> torch.Tensor:
    """beta = sum_x min(p, q) at every position of REAL text, not of generated text.

    ids (B, T): prompt + real continuation; both models see the true prefix (teacher forcing) and
    their logits are processed with `sampling`.  Returns (B, T - start): beta of predicting token
    t from ids[:, :t] for t = start..T-1.  At temperature 0 this is greedy agreement (1 where both
    argmaxes agree).  `draft` is a causal LM or an NGramDrafter (its model scores each window).
    Example: teacher_forced_beta(t, d, ids, SamplingConfig(1.0), start=64).mean() -> acceptance on real text
    """
    return logits_beta(teacher_forced_logits(target, ids, start), teacher_forced_logits(draft, ids, start), sampling)


@torch.inference_mode()
def teacher_forced_logits(model, ids: torch.Tensor, start: int) -> torch.Tensor:
    """The raw logits (B, T - start, V) with which ``model`` (a causal LM or an NGramDrafter) predicts
    ids[:, t] from ids[:, :t] for t = start..T-1: one forward, reusable under several sampling rules."""
    if ids.dim() != 2 or not (1 <= start < ids.shape[1]):
        raise ValueError(f"need ids (B, T) and 1 <= start < T, got shape {tuple(ids.shape)}, start {start}")
    ngram = getattr(model, "model", None)
    if ngram is not None and hasattr(ngram, "logits") and not isinstance(ngram, torch.nn.Module):
        W = model.context
        B, T = ids.shape
        win = torch.stack([ids[:, t - W:t] for t in range(start, T)], 1).reshape(-1, W)  # (B*(T-start), W)
        return ngram.logits(win.cpu()).to(ids.device).reshape(B, T - start, -1)
    return model(input_ids=ids).logits[:, start - 1:-1]


def logits_beta(target_logits: torch.Tensor, draft_logits: torch.Tensor, sampling) -> torch.Tensor:
    """beta = sum_x min(p, q) per position, p and q the two logits (..., V) processed by `sampling`."""
    p = sampling.process(target_logits)
    return context_beta(p, sampling.process(draft_logits.to(p.device)).to(p.dtype))
