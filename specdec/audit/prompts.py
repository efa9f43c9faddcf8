"""Prompts on which every drafter drafts: held-out windows chosen by an exact criterion, stated
before any engine runs.

A draft model drafts at every step, but a lookup drafter (vLLM's n-gram, Hugging Face's prompt
lookup) drafts only when the context's last tokens recur earlier in it: for x2 that means x1 must
already be in the prompt.  On random short prompts that is rare (chapter 10 once verified a few of
350 samples per prompt), so a pass said little.  Among ``candidates`` (held-out windows), a prompt
qualifies when, at every sampling setting, (i) ``drafts`` = P(x1 in the prompt) >= ``min_drafts``,
x1 ~ the target's processed p1, and (ii) ``spread`` = E[1 - max_y p2(y | x1) | x1 in the prompt]
>= ``min_spread`` -- x2's law is not nearly deterministic, so a fault at the verified position has
mass to move (a prompt whose continuation is forced would pass any rule).  Both are exact (p1 from
one forward, p2 from `specdec.peers.laws.enumerate_prompt`).  The ``count`` qualifying prompts of
largest min-over-settings ``drafts`` are chosen (ties: candidate order); fewer qualifying is an error.

Example: choose(target, windows, [SamplingConfig(1.0)], count=2)["prompts"] -> two lists of ids
"""

from __future__ import annotations

import torch

from specdec.core.sampling import SamplingConfig
from specdec.peers.laws import enumerate_prompt

__all__ = ["choose"]


@torch.inference_mode()
def _p1(target, candidates: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    z = torch.cat([target(input_ids=candidates[i:i + 256]).logits[:, -1].double()
                   for i in range(0, candidates.shape[0], 256)])
    return cfg(z)  # (m, V)


def choose(target, candidates, settings: list[SamplingConfig], *, count: int, min_drafts: float = 0.9,
           min_spread: float = 0.5, shortlist: int = 40) -> dict:
    """{"prompts": the chosen id lists, "chosen": their rows, "rows": per examined candidate its
    index, drafts and spread per setting and whether it qualifies} (module docstring);
    ``shortlist``: how many candidates of largest ``drafts`` are enumerated for the spread."""
    ids = torch.as_tensor(candidates, dtype=torch.long)
    if ids.dim() != 2 or ids.shape[0] < 1 or ids.shape[1] < 2:
        raise ValueError(f"candidates must be (m >= 1, length >= 2) token ids, got shape {tuple(ids.shape)}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an int >= 1, got {count!r}")
    if not settings or any(s.greedy for s in settings):
        raise ValueError("settings must be sampled (T > 0) configurations, at least one")
    V = int(target.config.vocab_size)
    in_prompt = torch.zeros(ids.shape[0], V, dtype=torch.bool).scatter_(1, ids, True)
    drafts = torch.stack([(_p1(target, ids, s) * in_prompt).sum(1) for s in settings], 1)  # (m, settings)
    order = torch.argsort(-drafts.min(1).values, stable=True)[:shortlist]
    rows, chosen, picked = [], [], []
    for i in order.tolist():
        row = {"candidate": i, "drafts": drafts[i].tolist(), "spread": []}
        for s in settings:
            ctx = enumerate_prompt(target, None, ids[i].tolist(), s)
            p1 = s(ctx.target1.unsqueeze(0))[0].double()[ctx.support]
            w = p1 * in_prompt[i][ctx.support].double()
            top = s(ctx.target2).double().max(1).values
            row["spread"].append(float((w * (1 - top)).sum() / w.sum()) if w.sum() > 0 else 0.0)
        row["qualifies"] = min(row["drafts"]) >= min_drafts and min(row["spread"]) >= min_spread
        rows.append(row)
        if row["qualifies"] and len(chosen) < count:
            chosen.append(ids[i].tolist())
            picked.append(row)
        if len(chosen) == count:
            break
    if len(chosen) < count:
        raise ValueError(f"only {len(chosen)} of {len(rows)} shortlisted candidates qualify (drafts >= {min_drafts}, "
                         f"spread >= {min_spread} at every setting); {count} are needed: give more candidates")
    return {"prompts": chosen, "chosen": picked, "rows": rows}
