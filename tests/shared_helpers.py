"""Helpers several test folders share (imported as ``from shared_helpers import ...``: a module name no
conftest.py has, so which folder's conftest pytest loaded first never decides what is imported)."""

import torch


def assert_decodes_like_eager(wrap, pair, max_new_tokens: int):
    """``wrap`` (an execution mode: `lean`, `compiled`) applied to the tiny pair decodes a ragged batch
    of two greedily, plain and at k = 2, token for token as the eager models do; returns the wrapped
    (target, draft)."""
    from specdec.engine.decode import generate
    from specdec.engine.kv import engine_model

    target, draft = pair
    wt, wd = wrap(target), wrap(draft)
    assert engine_model(wt) is wt and wt.config is target.config
    prompts = [torch.tensor([3, 7, 1, 9, 4]), torch.tensor([5, 2, 8])]
    for drafter, wdrafter in ((None, None), (draft, wd)):
        eager = generate(target, prompts, drafter=drafter, k=2, max_new_tokens=max_new_tokens, temperature=0,
                         mode="eager")
        ours = generate(wt, prompts, drafter=wdrafter, k=2, max_new_tokens=max_new_tokens, temperature=0)
        assert [t.tolist() for t in ours.tokens] == [t.tolist() for t in eager.tokens]
    return wt, wd


def serving_jobs(n: int, *, gap: float, cancel=None, seed: int, prompt=(3, 12), budget=(4, 20), seed_base: int = 100):
    """n serving jobs (`specdec.engine.continuous.Job`) for the tiny pair: ragged prompts (lengths in
    `prompt`, half-open) and budgets (in `budget`), arriving `gap` seconds apart, each with its own seed."""
    from specdec.engine.continuous import Job

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        T, L = int(torch.randint(*prompt, (1,), generator=g)), int(torch.randint(*budget, (1,), generator=g))
        out.append(Job(torch.randint(0, 64, (T,), generator=g), L, gap * i, seed=seed_base + i,
                       cancel_after=(cancel or {}).get(i)))
    return out
