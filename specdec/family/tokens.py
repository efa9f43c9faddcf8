"""Tokens: the byte-level BPE tokenizer, encodings of the corpus splits, and held-out prompts.

The tokenizer is GPT-2's byte-level BPE (Radford et al. 2019) with a vocabulary of 2048, trained
on the train split; ``<|endoftext|>`` (id 0) joins works and is eos/bos/pad.  The tokenizer file
itself is loaded by `specdec.family.loader.load_tokenizer`.  Encoding the train split takes a
while, so `token_ids` caches it in ``data/cache`` keyed on the tokenizer and the text's sha256.

Prompts are cut from the held-out test plays and identified by `prompt_checksum`, a sha256 over
their token ids, so every table says exactly which inputs produced it.

Example:
    >>> heldout_prompts(load_tokenizer(), n=2, prompt_len=8).shape
    torch.Size([2, 8])
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from specdec.family.corpus import EOT, load_text
from specdec.io.paths import CACHE_DIR
from specdec.io.results import atomic_path

__all__ = ["train_tokenizer", "encode", "encode_split", "token_ids", "heldout_prompts", "prompt_checksum"]


def train_tokenizer(text: str, vocab_size: int = 2048):
    """Byte-level BPE (GPT-2 style: Radford et al. 2019) trained on ``text``; returns a
    ``PreTrainedTokenizerFast`` with ``<|endoftext|>`` as eos/bos/pad token (id 0).

    Example: train_tokenizer("to be or not to be", 300).vocab_size -> 257..300 (bytes + merges + EOT).
    """
    if vocab_size < 258:
        raise ValueError(f"vocab_size must be >= 258 (256 bytes + EOT + one merge), got {vocab_size}")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    chunks = [c for c in text.split("\n\n") if c]   # paragraph chunks: a deterministic iterator
    tok.train_from_iterator(chunks, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT, pad_token=EOT,
                                   unk_token=None)


def encode(tokenizer, text: str) -> torch.Tensor:
    """Token ids of ``text`` as a 1-D LongTensor (N,), no special tokens added."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.long)


def encode_split(tokenizer, split: str) -> torch.Tensor:
    """1-D LongTensor (N,) of a whole split's token ids."""
    return encode(tokenizer, load_text(split))


def heldout_prompts(tokenizer, n: int, prompt_len: int, split: str = "test", seed: int = 0,
                    room: int = 256) -> torch.Tensor:
    """(n, prompt_len) LongTensor of prompts cut from held-out plays, deterministic in ``seed``.

    Start offsets are drawn without replacement from ``numpy.random.default_rng(seed)`` over
    positions that leave ``room`` tokens of real text after the prompt (for reference
    continuations); returned in increasing order of offset.

    Example: heldout_prompts(tok, 4, 64) -> tensor of shape (4, 64), same every call.
    """
    if split not in ("validation", "test"):
        raise ValueError(f"heldout_prompts takes a held-out split ('validation' or 'test'), got {split!r}")
    if n < 1 or prompt_len < 1 or room < 0:
        raise ValueError(f"need n >= 1, prompt_len >= 1, room >= 0; got n={n}, prompt_len={prompt_len}, room={room}")
    ids = encode_split(tokenizer, split)                   # (N,)
    span = ids.numel() - prompt_len - room
    if span < n:
        raise ValueError(f"split {split!r} has {ids.numel()} tokens: too few for {n} prompts of "
                         f"{prompt_len} tokens with room {room}")
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.choice(span, size=n, replace=False))
    return torch.stack([ids[s:s + prompt_len] for s in starts.tolist()])  # (n, prompt_len)


def token_ids(tokenizer, split: str) -> torch.Tensor:
    """`encode_split`, cached in data/cache under a key of the tokenizer's and the text's sha256."""
    text = load_text(split)
    key = hashlib.sha256((tokenizer.backend_tokenizer.to_str() + text).encode()).hexdigest()[:16]
    path = CACHE_DIR / f"{split}-{key}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    ids = encode(tokenizer, text)
    with atomic_path(path) as tmp:
        torch.save(ids, tmp)
    return ids


def prompt_checksum(ids: torch.Tensor) -> str:
    """sha256 of the prompts' token ids as little-endian int64, shape included (first 16 hex).

    Example: prompt_checksum(torch.tensor([[1, 2]])) is the same on every machine and run.
    """
    a = ids.detach().to("cpu", torch.int64).contiguous()
    h = hashlib.sha256(str(tuple(a.shape)).encode())
    h.update(a.numpy().astype("<i8").tobytes())
    return h.hexdigest()[:16]
