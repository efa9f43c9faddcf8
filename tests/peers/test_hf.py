"""specdec.peers.hf: Hugging Face generate and assisted generation, pinned, reproduce the engine's
greedy output and leave the global RNG alone."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.peers.hf import hf_assisted

def test_hf_assisted_greedy_matches_the_engine(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(4))
    ours = generate(target, ids, max_new_tokens=16, temperature=0).tokens[0]
    state = torch.get_rng_state()
    for k in (0, 3):
        theirs, row = hf_assisted(target, draft, ids, k=k, max_new_tokens=16, temperature=0, seed=0)
        assert theirs[0].tolist() == ours.tolist() and row["tokens"] == 16
        # the target's forwards: one per token plainly, one per verification step assisted; greedy,
        # where both engines keep the same drafts, as many steps as ours (what vs_hf_per_step needs)
        assert row["steps"] == generate(target, ids, drafter=draft if k else None, k=max(k, 1), max_new_tokens=16,
                                        temperature=0).summary()["steps"]
        assert row["steps"] == 16 if k == 0 else row["steps"] < 16
    import copy

    _, row = hf_assisted(target, copy.deepcopy(target), ids, k=3, max_new_tokens=16, temperature=0, seed=0)
    assert row["steps"] == 4  # a copy of the target drafting: every draft kept, 4 tokens a step
    _, row = hf_assisted(target, target, ids, k=3, max_new_tokens=16, temperature=0, seed=0)
    assert row["steps"] != row["steps"]  # the target as its own draft: its forwards cannot be told apart, NaN
    hf_assisted(target, draft, ids, k=3, max_new_tokens=8, temperature=1.0, seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(ValueError, match="batch size 1"):
        hf_assisted(target, draft, ids.repeat(2, 1), k=3, max_new_tokens=4, temperature=0, seed=0)


def test_assisted_generation_really_drafts_k_tokens_per_step_and_restores_the_models(tiny_pair):
    """transformers 5.24 reads the draft length from the ASSISTANT's generation_config: unpinned, it
    drafted 1 token per step whatever k was asked.  Counted with forward hooks: k draft forwards per
    target forward, less at most 1 + 2 + ... + k where the budget cuts the last drafts (unpinned, the
    count is about one per target forward); both models' configs restored."""
    target, draft = tiny_pair
    calls = {"t": 0, "d": 0}
    hooks = [target.register_forward_hook(lambda *a: calls.__setitem__("t", calls["t"] + 1)),
             draft.register_forward_hook(lambda *a: calls.__setitem__("d", calls["d"] + 1))]
    before = (draft.generation_config.to_dict(), target.generation_config.to_dict())
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(4))
    try:
        for k in (1, 3, 5):
            calls.update(t=0, d=0)
            hf_assisted(target, draft, ids, k=k, max_new_tokens=30, temperature=0, seed=0)
            assert k * calls["t"] - k * (k + 1) // 2 <= calls["d"] <= k * calls["t"], (k, calls)
    finally:
        for h in hooks:
            h.remove()
    assert (draft.generation_config.to_dict(), target.generation_config.to_dict()) == before


def test_plain_generate_takes_a_batch_and_matches_the_engine(tiny_pair):
    target, _ = tiny_pair
    ids = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(5))
    ours = generate(target, ids, max_new_tokens=10, temperature=0).tokens
    theirs, row = hf_assisted(target, None, ids, k=0, max_new_tokens=10, temperature=0, seed=0)
    assert theirs.shape == (3, 10) and row["tokens"] == 30
    assert [t.tolist() for t in ours] == theirs.tolist()


def test_hf_compiled_mode_really_compiles_and_decodes_the_same_tokens(tiny_pair):
    """HF's compiled mode (static cache + compile_config): plain and assisted greedy output equal the
    engine's, and torch.compile really ran (off CUDA, HF skips compiling silently without
    ``_compile_all_devices``: the graph count would not move); the model's own config is untouched."""
    from specdec.engine.modes.compiled import graph_count

    target, draft = tiny_pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(6))
    ours = generate(target, ids, max_new_tokens=12, temperature=0).tokens[0].tolist()
    cfg = target.generation_config.to_dict()
    for k in (0, 2):  # each compiles its own graphs (assisted generation: the target's verification shapes)
        before = graph_count()
        theirs, row = hf_assisted(target, draft, ids, k=k, max_new_tokens=12, temperature=0, seed=0, compiled=True)
        assert theirs[0].tolist() == ours and row["tokens"] == 12
        assert row["steps"] == generate(target, ids, drafter=draft if k else None, k=max(k, 1), max_new_tokens=12,
                                        temperature=0).summary()["steps"]  # the hook counts compiled calls too
        assert graph_count() > before, k
    assert target.generation_config.to_dict() == cfg and target.generation_config.cache_implementation is None
