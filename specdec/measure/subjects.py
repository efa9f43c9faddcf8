"""What the measured chapters decode with: the embedded family as engine-ready target and drafters.

`load_subjects` returns the trained target and drafts from ``data/models/`` through the one loader
(`specdec.family.loader`: sha256-checked, safetensors only, offline) and the n-gram model wrapped
as an engine drafter.  Freshly trained weights whose manifest ``data/models/SHA256SUMS`` is not yet
written are loaded unchecked all the same, and say so in `kind`.  The sha256 of every weight file
used is in `sha256` (and so in each result's provenance).  Only when `allow_stand_in` is set
(SMOKE runs of the notebooks, tests) and the weights are absent does it build tiny random-weight
stand-ins over the same tokenizer, and says so in `kind`: nothing measured on them may be quoted.

Example:
    s = load_subjects(allow_stand_in=True)
    s.kind                        # "embedded" or "stand-in (random weights, SMOKE only)"
    ids = s.prompts(8, 64)        # (8, 64) token ids from the held-out test plays
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specdec.engine.history import NGramDrafter
from specdec.family import loader
from specdec.family.architectures import build_model, real_size_config
from specdec.family.manifest import SUMS, ModelUnavailableError, sha256_file
from specdec.family.tokens import heldout_prompts
from specdec.io.paths import MODELS_DIR

__all__ = ["Subjects", "load_subjects", "DRAFT_NAMES", "STAND_IN"]

DRAFT_NAMES = tuple(n for n in loader.MEMBERS if n != "target")
STAND_IN = "stand-in (random weights, SMOKE only)"


@dataclass
class Subjects:
    kind: str
    target: torch.nn.Module
    drafts: dict  # name -> causal LM or drafter object
    tokenizer: object
    vocab_size: int
    notes: list = field(default_factory=list)
    sha256: dict = field(default_factory=dict)  # file -> sha256 of every weight file used

    def prompts(self, n: int, prompt_len: int, seed: int = 0, split: str = "test") -> torch.Tensor:
        """(n, prompt_len) prompts from the held-out plays of ``split`` (the test plays unless a pilot
        asks for the validation ones, which no measurement uses); deterministic in seed."""
        return heldout_prompts(self.tokenizer, n=n, prompt_len=prompt_len, split=split, seed=seed)


def _ngram(notes: list, sha: dict, checked: bool):
    path = MODELS_DIR / "ngram.safetensors"
    try:
        model = loader.load_ngram() if checked else loader.load_ngram(path)
    except (FileNotFoundError, OSError, ValueError) as exc:  # ModelUnavailableError is a ValueError
        notes.append(f"n-gram drafter unavailable: {type(exc).__name__}: {exc}")
        return None
    sha["ngram.safetensors"] = sha256_file(path)
    return NGramDrafter(model)


def _stand_in(vocab: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    small = dict(vocab_size=vocab, n_positions=512, bos_token_id=0, eos_token_id=0)  # token 0 is <|endoftext|>
    target = build_model(real_size_config("gpt2-small", n_layer=2, n_embd=64, n_head=2, **small), generator=g)
    drafts = {"draft-small": build_model(real_size_config("draft-3m", n_layer=1, n_embd=32, n_head=2, **small),
                                         generator=g),
              "draft-medium": build_model(real_size_config("draft-3m", n_layer=2, n_embd=32, n_head=2, **small),
                                          generator=g)}
    return target, drafts


def load_subjects(device: str = "cpu", dtype="float32", allow_stand_in: bool = False, seed: int = 0) -> Subjects:
    """The embedded family (module docstring) on ``device`` with weights in ``dtype`` (a name such as
    "float32", "bfloat16", "float16", or a torch.dtype: `specdec.family.loader.resolve_dtype`, which
    refuses others by name); stand-ins only if allowed and the weights are absent."""
    dtype = loader.resolve_dtype(dtype, device)
    notes: list = []
    present = [n for n in DRAFT_NAMES if (MODELS_DIR / n / "model.safetensors").is_file()]
    checked = (MODELS_DIR / SUMS).exists() or not (MODELS_DIR / "target" / "model.safetensors").is_file()
    try:
        tok = loader.load_tokenizer("embedded", checked=checked)
        target = loader.load_model("target", dtype=dtype, device=device, checked=checked)
        drafts = {n: loader.load_model(n, dtype=dtype, device=device, checked=checked) for n in present}
        kind = "embedded" if checked else "embedded (no SHA256SUMS yet: unchecked, file hashes recorded)"
        sha = {f"{n}/{f}": h for n, m in {"target": target, **drafts}.items() for f, h in m.weights_sha256.items()}
    except (ModelUnavailableError, FileNotFoundError) as exc:
        if not allow_stand_in:
            raise
        tok = loader.load_tokenizer("embedded", checked=False)
        target, drafts = _stand_in(int(len(tok)), seed)
        kind, sha = STAND_IN, {}
        notes.append(f"embedded weights unavailable ({exc}): tiny random-weight stand-ins, for SMOKE runs only")
    V = int(target.config.vocab_size)
    ng = _ngram(notes, sha, (MODELS_DIR / SUMS).exists())  # checked whenever there is a manifest to check
    if ng is not None and ng.vocab_size == V:
        drafts = {"ngram": ng, **drafts}
    for name, d in drafts.items():
        dv = getattr(d, "vocab_size", None) or int(d.config.vocab_size)
        if dv != V:
            raise ValueError(f"draft {name!r} has vocabulary {dv}, the target {V}")
    return Subjects(kind=kind, target=target, drafts=drafts, tokenizer=tok, vocab_size=V, notes=notes, sha256=sha)
