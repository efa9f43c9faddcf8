"""specdec.measure.hf: Hugging Face generate and assisted generation, pinned, reproduce the engine's
greedy output and leave the global RNG alone."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.measure.hf import hf_assisted

def test_hf_assisted_greedy_matches_the_engine(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(4))
    ours = generate(target, ids, max_new_tokens=16, temperature=0).tokens[0]
    state = torch.get_rng_state()
    for k in (0, 3):
        theirs, row = hf_assisted(target, draft, ids, k=k, max_new_tokens=16, temperature=0, seed=0)
        assert theirs.tolist() == ours.tolist() and row["tokens"] == 16
    hf_assisted(target, draft, ids, k=3, max_new_tokens=8, temperature=1.0, seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(ValueError, match="batch size 1"):
        hf_assisted(target, draft, ids.repeat(2, 1), k=3, max_new_tokens=4, temperature=0, seed=0)
