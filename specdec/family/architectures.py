"""Model shapes and the one model factory.

Shapes, all built from a Hugging Face config with no download:
  * the embedded family: GPT-2 blocks (Radford et al. 2019) over the project's 2048-token BPE,
    512 positions, tied embeddings (`gpt2_config`; the trained sizes are in `specdec.family.make`);
  * real-size GPT-2 shapes over GPT-2's 50,257-token vocabulary (`REAL_SIZE`: small ~124M,
    medium ~355M, and a ~3M draft), for timing on this CPU;
  * Llama 3 shapes (Grattafiori et al. 2024; `LLAMA`: 8B target, 3.2-1B draft), for the GPU.

`build_model` is the only place a model is constructed.  Without a generator it initialises as
Hugging Face does, from the global RNG (training seeds it under `torch.random.fork_rng`); with a
generator, every matrix is redrawn N(0, initializer_range^2) from it, so random-weight models for
timing are reproducible without touching global state.  Random weights are fine for timing, never
for acceptance or quality.

Example: build_model(real_size_config("draft-3m"), generator=torch.Generator().manual_seed(0))
"""

from __future__ import annotations

import torch

__all__ = ["REAL_SIZE", "LLAMA", "gpt2_config", "real_size_config", "llama_config", "build_model", "param_count"]

# name -> GPT2Config keyword arguments.  Vocabulary 50257 and 1024 positions as GPT-2.
REAL_SIZE = {
    "gpt2-small": dict(n_layer=12, n_embd=768, n_head=12),     # ~124M parameters (Radford et al. 2019)
    "gpt2-medium": dict(n_layer=24, n_embd=1024, n_head=16),   # ~355M
    "draft-3m": dict(n_layer=2, n_embd=64, n_head=2),          # ~3.3M, almost all embedding
}
LLAMA = {  # Llama 3 8B / 3.2 1B shapes (Grattafiori et al. 2024), vocabulary 128,256
    "llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=8),
    "llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8, tie_word_embeddings=True),
}
_LLAMA_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=512)


def gpt2_config(*, n_layer: int, n_embd: int, n_head: int, vocab_size: int = 2048, n_positions: int = 512,
                dropout: float = 0.0, **over):
    """A GPT2Config in the embedded family's convention: token 0 (``<|endoftext|>``) is bos, eos and
    pad; tied embeddings; one dropout rate for residual, embedding and attention."""
    from transformers import GPT2Config

    kw = dict(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
              resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout, bos_token_id=0, eos_token_id=0,
              pad_token_id=0, tie_word_embeddings=True)
    kw.update(over)
    return GPT2Config(**kw)


def real_size_config(name: str, **over):
    """A GPT2Config for REAL_SIZE[name] (dropout off), with overrides (e.g. tiny sizes for tests)."""
    from transformers import GPT2Config

    if name not in REAL_SIZE:
        raise ValueError(f"unknown architecture {name!r}; expected one of {sorted(REAL_SIZE)}")
    kw = dict(vocab_size=50257, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
              bos_token_id=50256, eos_token_id=50256, **REAL_SIZE[name])
    kw.update(over)
    return GPT2Config(**kw)


def llama_config(name: str, tiny: bool = False):
    """A LlamaConfig for LLAMA[name]; ``tiny`` keeps the family but shrinks it to seconds on a CPU
    (a code-path check, never a measurement)."""
    from transformers import LlamaConfig

    if name not in LLAMA:
        raise ValueError(f"unknown architecture {name!r}; expected one of {sorted(LLAMA)}")
    kw = dict(_LLAMA_TINY) if tiny else dict(LLAMA[name], vocab_size=128256)
    if tiny and name == "llama-1b":
        kw.update(num_hidden_layers=1)
    return LlamaConfig(max_position_embeddings=2048, rope_theta=500000.0, bos_token_id=0, eos_token_id=0, **kw)


def build_model(config, *, generator: torch.Generator | None = None, dtype=torch.float32, device="cpu"):
    """A causal LM built from ``config`` (module docstring), in eval mode when a generator is given.

    generator=None: Hugging Face's own initialisation from the global RNG (on the CPU in float32,
    then moved to ``device`` / ``dtype``), in training mode: what `specdec.family.train` seeds and trains.  A generator: constructed under
    `torch.random.fork_rng` (the caller's global RNG state is untouched) directly on ``device`` in
    ``dtype``, every matrix redrawn from the generator (on its device), biases 0 and norms 1.
    """
    from transformers import AutoModelForCausalLM

    if generator is None:  # initialised on the CPU in float32 from the global RNG, then moved
        return AutoModelForCausalLM.from_config(config).to(device=device, dtype=dtype)
    if not isinstance(generator, torch.Generator):
        raise ValueError("build_model needs a torch.Generator (or None for Hugging Face's own init)")
    devs = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devs), torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    std = float(getattr(config, "initializer_range", 0.02))
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                w = torch.randn(p.shape, generator=generator, device=generator.device, dtype=torch.float32)
                p.copy_((w * std).to(device=p.device, dtype=p.dtype))
    return model.eval()


def param_count(model) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
