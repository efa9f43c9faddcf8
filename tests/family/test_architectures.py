"""specdec.family.architectures: published parameter counts of the real-size shapes, and the one
factory's seeded random weights that leave the global RNG alone."""

import pytest
import torch

from specdec.family.architectures import build_model, llama_config, param_count, real_size_config

TINY_T = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=128)
TINY_D = dict(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=128)


def test_real_size_shapes_have_the_published_parameter_counts():
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        small = AutoModelForCausalLM.from_config(real_size_config("gpt2-small"))
        medium = AutoModelForCausalLM.from_config(real_size_config("gpt2-medium"))
        draft = AutoModelForCausalLM.from_config(real_size_config("draft-3m"))
    assert param_count(small) == 124_439_808  # Hugging Face's count for `gpt2`
    assert param_count(medium) == 354_823_168  # ... and for `gpt2-medium`
    assert 2e6 < param_count(draft) < 5e6
    with pytest.raises(ValueError, match="unknown architecture"):
        real_size_config("gpt5")
    with pytest.raises(ValueError, match="unknown architecture"):
        llama_config("llama-70b")


def test_build_model_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    cfg = real_size_config("draft-3m", **TINY_D)
    a = build_model(cfg, generator=torch.Generator().manual_seed(7))
    b = build_model(cfg, generator=torch.Generator().manual_seed(7))
    c = build_model(cfg, generator=torch.Generator().manual_seed(8))
    assert torch.equal(torch.get_rng_state(), state)
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    assert all(torch.equal(pa[n], pb[n]) for n in pa)
    assert not torch.equal(pa["transformer.wte.weight"], pc["transformer.wte.weight"])
    with pytest.raises(ValueError, match="Generator"):
        build_model(cfg, generator=7)
