"""What the measured chapters (05, 06) decode with: the embedded model family and its prompts.

`measured_family` returns the trained target and drafts from ``data/models/`` through
`specdec.models.load_model` (sha256-checked, safetensors only, offline) and the n-gram drafter of
`specdec.models.load_ngram`, each wrapped for the engine.  Freshly trained weights whose manifest
``data/models/SHA256SUMS`` is not yet written are loaded from safetensors all the same, and the
sha256 of every file loaded is put in `notes` (and so into each result's provenance).  Only when `allow_stand_in` is set (SMOKE runs
of the notebooks, tests) and the weights are absent does it build tiny random-weight stand-ins over
the same tokenizer, and says so in `kind`: nothing measured on them may be quoted as a result.

Prompts are cut from the held-out test plays (`specdec.corpus.heldout_prompts`) and identified by
a sha256 over their token ids, so every table says exactly which inputs produced it.

Example:
    fam = measured_family(allow_stand_in=True)
    fam.kind                      # "embedded" or "stand-in (random weights, SMOKE only)"
    ids = fam.prompts(8, 64)      # (8, 64) token ids;  prompt_checksum(ids) -> "3f2a..."
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specdec.instrument import KVCompat

__all__ = ["Family", "measured_family", "prompt_checksum", "DRAFT_NAMES"]

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
DRAFT_NAMES = ("draft-small", "draft-medium", "draft-distilled")
STAND_IN = "stand-in (random weights, SMOKE only)"


def prompt_checksum(ids: torch.Tensor) -> str:
    """sha256 of the prompts' token ids as little-endian int64, shape included (first 16 hex).

    Example: prompt_checksum(torch.tensor([[1, 2]])) is the same on every machine and run.
    """
    a = ids.detach().to("cpu", torch.int64).contiguous()
    h = hashlib.sha256(str(tuple(a.shape)).encode())
    h.update(a.numpy().astype("<i8").tobytes())
    return h.hexdigest()[:16]


@dataclass
class Family:
    kind: str
    target: torch.nn.Module
    drafts: dict  # name -> causal LM or drafter object
    tokenizer: object
    vocab_size: int
    notes: list = field(default_factory=list)

    def prompts(self, n: int, prompt_len: int, seed: int = 0) -> torch.Tensor:
        """(n, prompt_len) prompts from the held-out test plays (deterministic in seed)."""
        from specdec.corpus import heldout_prompts

        return heldout_prompts(self.tokenizer, n=n, prompt_len=prompt_len, split="test", seed=seed)


def _unverified(d: Path, dtype, device, notes: list):
    from transformers import AutoModelForCausalLM

    from specdec.corpus import sha256_file as _sha256
    from specdec.models import refuse_pickle

    refuse_pickle(d)
    notes.append(f"{d.name}/model.safetensors sha256 {_sha256(d / 'model.safetensors')}")
    m = AutoModelForCausalLM.from_pretrained(str(d), dtype=dtype, local_files_only=True, use_safetensors=True)
    return KVCompat(m.to(device).eval())


def _ngram(notes: list):
    from specdec.drafters import NGramDrafter
    from specdec.corpus import sha256_file as _sha256
    from specdec.models import SUMS, load_ngram
    from specdec.ngram import NGramModel

    path = MODELS_DIR / "ngram.safetensors"
    try:
        if path.is_file() and not (MODELS_DIR / SUMS).exists():  # manifest not yet written
            notes.append(f"ngram.safetensors sha256 {_sha256(path)}")
            return NGramDrafter(NGramModel.load(path))
        return NGramDrafter(load_ngram())
    except (FileNotFoundError, OSError, ValueError) as exc:  # ModelUnavailableError is a ValueError
        notes.append(f"n-gram drafter unavailable: {type(exc).__name__}: {exc}")
        return None


def _stand_in(vocab: int, seed: int):
    from specdec.costcurve import random_model, real_size_config

    g = torch.Generator().manual_seed(seed)
    small = dict(vocab_size=vocab, n_positions=512)
    target = random_model(real_size_config("gpt2-small", n_layer=2, n_embd=64, n_head=2, **small), g)
    drafts = {"draft-small": random_model(real_size_config("draft-3m", n_layer=1, n_embd=32, n_head=2, **small), g),
              "draft-medium": random_model(real_size_config("draft-3m", n_layer=2, n_embd=32, n_head=2, **small), g)}
    return target, drafts


def measured_family(device: str = "cpu", dtype=torch.float32, allow_stand_in: bool = False,
                    seed: int = 0) -> Family:
    """The embedded family (module docstring); stand-ins only if allowed and the weights are absent."""
    from specdec import corpus, models

    notes: list = []
    present = [n for n in DRAFT_NAMES if (MODELS_DIR / n / "model.safetensors").is_file()]
    try:
        if (MODELS_DIR / models.SUMS).exists() or not (MODELS_DIR / "target" / "model.safetensors").is_file():
            tok = models.load_tokenizer("embedded")
            target = KVCompat(models.load_model("embedded", dtype=dtype, device=device))
            drafts = {n: KVCompat(models.load_model("embedded-" + n.split("-", 1)[1], dtype=dtype, device=device))
                      for n in present}
            kind = "embedded"
        else:  # freshly trained, manifest not yet written: load, and record each file's sha256 instead
            tok = corpus.load_tokenizer()
            target = _unverified(MODELS_DIR / "target", dtype, device, notes)
            drafts = {n: _unverified(MODELS_DIR / n, dtype, device, notes) for n in present}
            kind = "embedded (no SHA256SUMS yet; file hashes in the notes)"
    except (models.ModelUnavailableError, FileNotFoundError) as exc:
        if not allow_stand_in:
            raise
        tok = corpus.load_tokenizer()
        target, drafts = _stand_in(int(len(tok)), seed)
        kind = STAND_IN
        notes.append(f"embedded weights unavailable ({exc}): tiny random-weight stand-ins, for SMOKE runs only")
    V = int(target.config.vocab_size)
    ng = _ngram(notes)
    if ng is not None and ng.vocab_size == V:
        drafts = {"ngram": ng, **drafts}
    for name, d in drafts.items():
        dv = getattr(d, "vocab_size", None) or int(d.config.vocab_size)
        if dv != V:
            raise ValueError(f"draft {name!r} has vocabulary {dv}, the target {V}")
    return Family(kind=kind, target=target, drafts=drafts, tokenizer=tok, vocab_size=V, notes=notes)
