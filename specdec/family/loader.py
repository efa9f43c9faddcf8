"""The one loader: every model, tokenizer and n-gram file the project opens comes through here.

Names.  The embedded family's members are named as in the model card and every results table:
``target``, ``draft-small``, ``draft-medium``, ``draft-distilled``; ``embedded`` is the target
(the family as a whole in `load_pair`), and ``embedded-small`` / ``-medium`` / ``-distilled`` /
``-target`` are accepted aliases.  Any other name is a local directory or a Hugging Face hub id;
a name that looks embedded but is not one (e.g. ``draft-large``) is refused with the valid list.

Safety rules, whatever the source: ``trust_remote_code`` is never set (no code that comes with a
model runs), weights load from safetensors only (a pickle checkpoint is refused: unpickling can
execute arbitrary code), an unreachable hub id fails fast with a message naming the id and how to
point at a local copy, and embedded files are checked against ``data/models/SHA256SUMS``
(`specdec.family.manifest`) unless ``checked=False`` (freshly trained weights, before the card
writes the manifest).  Every loaded model carries ``model.weights_sha256`` ({file: sha256}) for
the provenance of the results made with it.

Speculative decoding needs the draft's token ids to mean the target's tokens: `check_compatible`
raises when vocabulary sizes or mappings differ (e.g. Qwen2.5-0.5B has 151,936 logits and
Qwen2.5-7B 152,064: decoding would index the wrong tokens).

Example:
    >>> pair = load_pair()                      # embedded target + draft-small, CPU fp32
    >>> pair.target.config.n_layer, pair.draft.config.n_layer
    (8, 2)
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import NamedTuple

import torch

from specdec.family.arena import pack_weights
from specdec.family.manifest import ModelUnavailableError, sha256_file, verify_dir, verify_file
from specdec.io.paths import MODELS_DIR

__all__ = ["MEMBERS", "Pair", "ModelUnavailableError", "embedded_dir", "resolve_dtype", "refuse_pickle",
           "load_model", "load_tokenizer", "load_ngram", "load_pair", "check_compatible"]

MEMBERS = ("target", "draft-small", "draft-medium", "draft-distilled")   # the card's names
ALIASES = {"embedded": "target", "embedded-target": "target", "embedded-small": "draft-small",
           "embedded-medium": "draft-medium", "embedded-distilled": "draft-distilled"}
DEFAULT_DRAFT = {"embedded": "draft-small", "target": "draft-small"}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


class Pair(NamedTuple):
    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object


def embedded_dir(name: str) -> str | None:
    """The family member a name stands for ('target', 'draft-small', ...), None for other names.

    Raises ValueError for a name that looks like an embedded one but is not (lists the valid ones).
    Example: embedded_dir("embedded-distilled") -> "draft-distilled";  embedded_dir("gpt2") -> None
    """
    name = str(name)
    if name in MEMBERS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    if (name.startswith("embedded") or name.startswith("draft-")) and not Path(name).exists():
        raise ValueError(f"unknown embedded model {name!r}; the embedded family has "
                         f"{', '.join(MEMBERS)} (aliases: {', '.join(ALIASES)})")
    return None


def resolve_dtype(dtype, device: str) -> torch.dtype:
    """None -> fp32 on CPU, bf16 on CUDA; strings 'float32'/'bf16'/... or a torch.dtype."""
    if dtype is None:
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in _DTYPES:
        return _DTYPES[dtype]
    raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)} or a torch.dtype")


def refuse_pickle(d: Path) -> None:
    """A local directory must carry ``*.safetensors``; pickle-only checkpoints are refused."""
    d = Path(d)
    if any(d.glob("*.safetensors")):
        return
    pickles = sorted(p.name for p in d.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ModelUnavailableError(
            f"{d} holds only pickle checkpoints ({', '.join(pickles)}): loading them can execute "
            "arbitrary code, so they are refused. Convert them to safetensors first.")
    raise ModelUnavailableError(f"{d} holds no *.safetensors weights")


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    host = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _offline_error(name: str, why: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"cannot load {name!r}: {why}. Point at a local copy instead: download it where the hub is "
        f"reachable (`huggingface-cli download {name} --local-dir DIR`) and pass DIR, or use 'embedded'.")


def _from_pretrained(cls, name: str, **kw):
    """``cls.from_pretrained`` for a local dir or hub id, with the safety rules of this module, and
    without transformers' loading progress bar (a library never shows one)."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return _from_pretrained_quiet(cls, name, **kw)
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _from_pretrained_quiet(cls, name: str, **kw):
    kw = {**kw, "trust_remote_code": False}
    path = Path(name)
    if path.is_dir():
        return cls.from_pretrained(str(path), local_files_only=True, **kw)
    try:                                    # already in the local Hugging Face cache?
        return cls.from_pretrained(name, local_files_only=True, **kw)
    except (OSError, ValueError):
        pass
    if not _hub_reachable():
        raise _offline_error(name, "it is not a local directory, not in the Hugging Face cache, and "
                             "the hub is unreachable (offline)") from None
    try:
        return cls.from_pretrained(name, **kw)
    except OSError as exc:
        raise _offline_error(name, f"the hub refused or lacks it ({str(exc).splitlines()[0][:200]})") from None


def _weights_sha256(d: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(Path(d).glob("*.safetensors"))}


def _hub_weights_sha256(repo_id: str) -> dict[str, str]:
    """sha256 of a hub model's safetensors files as found in the local Hugging Face cache (one file,
    or the shards its index names); {} if they are not there."""
    import json

    from huggingface_hub import try_to_load_from_cache

    single = try_to_load_from_cache(repo_id, "model.safetensors")
    if isinstance(single, str):
        return {"model.safetensors": sha256_file(Path(single))}
    index = try_to_load_from_cache(repo_id, "model.safetensors.index.json")
    if not isinstance(index, str):
        return {}
    shards = sorted(set(json.loads(Path(index).read_text()).get("weight_map", {}).values()))
    paths = {name: try_to_load_from_cache(repo_id, name) for name in shards}
    return {name: sha256_file(Path(p)) for name, p in paths.items() if isinstance(p, str)}


# transformers builds a model on the meta device under process-wide patches (default device, init
# functions): two threads loading at once can see each other's patches and fail ("Cannot copy out
# of meta tensor"), so loads are serialised.
_LOADING = threading.Lock()


def load_model(name: str, *, dtype=None, device: str = "cpu", checked: bool = True, root: Path | None = None):
    """One causal LM by embedded name, local directory, or hub id; eval mode on ``device``, with
    ``model.weights_sha256`` set.  ``checked=False`` skips the manifest (fresh weights only).
    Thread-safe: one load at a time in a process (``_LOADING``)."""
    with _LOADING:
        return _load_model(name, dtype=dtype, device=device, checked=checked, root=root)


def _load_model(name: str, *, dtype, device: str, checked: bool, root: Path | None):
    from transformers import AutoModelForCausalLM

    root = Path(root or MODELS_DIR)
    dt = resolve_dtype(dtype, device)
    member = embedded_dir(name)
    digests = None
    if member is not None:
        d = root / member
        if checked:
            digests = {Path(k).name: v for k, v in verify_dir(d, root).items() if k.endswith(".safetensors")}
        elif not d.is_dir():
            raise ModelUnavailableError(f"{d} is missing (git checkout data/models, or `make models`)")
        name = str(d)
    if Path(name).is_dir():
        refuse_pickle(Path(name))
    try:
        model = _from_pretrained(AutoModelForCausalLM, name, dtype=dt, use_safetensors=True)
    except OSError as exc:                  # e.g. a hub repo with only pytorch_model.bin
        raise ModelUnavailableError(f"cannot load {name!r} from safetensors: {str(exc).splitlines()[0][:300]}") from None
    if digests is None:
        digests = _weights_sha256(Path(name)) if Path(name).is_dir() else _hub_weights_sha256(name)
    model = model.to(device).eval()
    if torch.device(device).type == "cpu":
        pack_weights(model)  # end to end, huge-page-advised (`specdec.family.arena`): what torch's products stream
    model.weights_sha256 = digests
    return model


def load_tokenizer(name: str = "embedded", *, checked: bool = True, root: Path | None = None):
    """The tokenizer of the embedded family (sha256-checked unless ``checked=False``), of a local
    directory or of a hub id."""
    from transformers import AutoTokenizer

    root = Path(root or MODELS_DIR)
    if embedded_dir(name) is not None:
        if not (root / "tokenizer.json").exists():
            raise FileNotFoundError(f"{root / 'tokenizer.json'} is missing; run `make models` to train it")
        if checked:
            for f in ("tokenizer.json", "tokenizer_config.json"):
                verify_file(root / f, root)
        return AutoTokenizer.from_pretrained(str(root), local_files_only=True)
    return _from_pretrained(AutoTokenizer, name)


def load_ngram(path=None, *, root: Path | None = None):
    """The embedded n-gram model (`specdec.family.ngram.NGramModel`), sha256-checked; or the file
    at ``path`` (unchecked: e.g. one just trained)."""
    from specdec.family.ngram import NGramModel

    if path is None:
        root = Path(root or MODELS_DIR)
        path = root / "ngram.safetensors"
        verify_file(path, root)
    return NGramModel.load(path)


def check_compatible(target, draft, target_tok=None, draft_tok=None) -> None:
    """Raise ValueError unless target and draft share the vocabulary (size, and mapping if given)."""
    vt, vd = int(target.config.vocab_size), int(draft.config.vocab_size)
    if vt != vd:
        raise ValueError(f"target and draft vocabularies differ: {vt} vs {vd} logits per position; "
                         "speculative decoding needs the same token ids (pick a draft from the same family)")
    if target_tok is not None and draft_tok is not None and target_tok.get_vocab() != draft_tok.get_vocab():
        raise ValueError("target and draft tokenizers map tokens to different ids; "
                         "pick a draft that shares the target's tokenizer")


def load_pair(target: str = "embedded", draft: str | None = None, *, dtype=None, device: str = "cpu") -> Pair:
    """(target, draft, tokenizer), vocabulary-checked. ``draft=None``: the family's default draft
    ('embedded' -> 'draft-small'); a non-embedded target needs an explicit draft."""
    if draft is None:
        if target not in DEFAULT_DRAFT:
            raise ValueError(f"no default draft for {target!r}: pass draft= (a smaller model of the same family)")
        draft = DEFAULT_DRAFT[target]
    tok = load_tokenizer(target)
    t = load_model(target, dtype=dtype, device=device)
    d = load_model(draft, dtype=dtype, device=device)
    both_embedded = embedded_dir(target) is not None and embedded_dir(draft) is not None
    check_compatible(t, d, tok, None if both_embedded else load_tokenizer(draft))
    return Pair(t, d, tok)
