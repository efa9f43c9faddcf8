"""Loading a (target, draft, tokenizer) triple: the embedded family or any Hugging Face pair.

``load_pair("embedded")`` loads the project's own family from ``data/models/`` after checking every
file against ``data/models/SHA256SUMS``; any other name is a local directory or a Hugging Face hub
id, loaded with ``AutoModelForCausalLM`` / ``AutoTokenizer``. Safety rules, whatever the source:
``trust_remote_code`` is never set (no code that comes with a model runs), weights load from
safetensors only (a pickle checkpoint is refused: unpickling can execute arbitrary code), and an
unreachable hub id fails fast with a message naming the id and how to point at a local copy.

Speculative decoding needs the draft's token ids to mean the target's tokens: ``check_compatible``
raises when vocabulary sizes or mappings differ (e.g. Qwen2.5-0.5B has 151,936 logits and
Qwen2.5-7B 152,064: decoding would index the wrong tokens).

Example:
    >>> pair = load_pair()                      # embedded target + embedded-small draft, CPU fp32
    >>> pair.target.config.n_layer, pair.draft.config.n_layer
    (6, 2)
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import NamedTuple

import torch

from specdec.corpus import sha256_file

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
SUMS = "SHA256SUMS"
EMBEDDED = {"embedded": "target", "embedded-target": "target", "embedded-small": "draft-small",
            "embedded-medium": "draft-medium", "embedded-distilled": "draft-distilled"}
DEFAULT_DRAFT = {"embedded": "embedded-small"}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


class Pair(NamedTuple):
    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object


class ModelUnavailableError(ValueError):
    """Weights that cannot be had: missing, altered, refused (pickle) or unreachable (offline)."""


def read_sums(root: Path | None = None) -> dict[str, str]:
    """{relative path: sha256} from ``root/SHA256SUMS`` (``sha256sum`` format)."""
    path = Path(root or MODELS_DIR) / SUMS
    if not path.exists():
        raise ModelUnavailableError(f"{path} is missing: the embedded weights are not installed "
                                    "(git checkout data/models, or `make models`)")
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


def write_sums(root: Path | None = None) -> Path:
    """Write ``SHA256SUMS`` for every file under ``root`` except itself and the card."""
    root = Path(root or MODELS_DIR)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in (SUMS, "README.md"))
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}" for p in files]
    (root / SUMS).write_text("\n".join(lines) + "\n")
    return root / SUMS


def verify_file(path: Path, root: Path | None = None) -> None:
    """Raise ``ModelUnavailableError`` when ``path`` is missing or its sha256 differs from the manifest."""
    path, root = Path(path), Path(root or MODELS_DIR)
    rel = path.relative_to(root).as_posix()
    expected = read_sums(root).get(rel)
    if expected is None:
        raise ModelUnavailableError(f"{rel} is not listed in {root / SUMS}")
    if not path.exists():
        raise ModelUnavailableError(f"{path} is missing (git checkout data/models, or `make models`)")
    got = sha256_file(path)
    if got != expected:
        raise ModelUnavailableError(f"{path} has been altered: sha256 {got[:16]}... but {SUMS} says "
                                    f"{expected[:16]}...; restore it with `git checkout {path}`")


def verify_dir(d: Path, root: Path | None = None) -> None:
    """Check every manifest entry under directory ``d`` (and that there is at least one)."""
    d, root = Path(d), Path(root or MODELS_DIR)
    prefix = d.relative_to(root).as_posix() + "/"
    names = [n for n in read_sums(root) if n.startswith(prefix)]
    if not names:
        raise ModelUnavailableError(f"no files of {d} are listed in {root / SUMS}: the embedded model "
                                    "is not installed (git checkout data/models, or `make models`)")
    for n in names:
        verify_file(root / n, root)


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
    """``cls.from_pretrained`` for a local dir or hub id, with the safety rules of this module."""
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


def load_model(name: str, *, dtype=None, device: str = "cpu"):
    """One causal LM by embedded name, local directory, or hub id; eval mode on ``device``."""
    from transformers import AutoModelForCausalLM

    dt = resolve_dtype(dtype, device)
    if name in EMBEDDED:
        d = MODELS_DIR / EMBEDDED[name]
        verify_dir(d)
        name = str(d)
    if Path(name).is_dir():
        refuse_pickle(Path(name))
    try:
        model = _from_pretrained(AutoModelForCausalLM, name, dtype=dt, use_safetensors=True)
    except OSError as exc:                  # e.g. a hub repo with only pytorch_model.bin
        raise ModelUnavailableError(f"cannot load {name!r} from safetensors: {str(exc).splitlines()[0][:300]}") from None
    return model.to(device).eval()


def load_tokenizer(name: str):
    """The tokenizer of an embedded name (sha256-checked), local directory or hub id."""
    from transformers import AutoTokenizer

    if name in EMBEDDED:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            verify_file(MODELS_DIR / f)
        return AutoTokenizer.from_pretrained(str(MODELS_DIR), local_files_only=True)
    return _from_pretrained(AutoTokenizer, name)


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
    ('embedded' -> 'embedded-small'); a non-embedded target needs an explicit draft."""
    if draft is None:
        if target not in DEFAULT_DRAFT:
            raise ValueError(f"no default draft for {target!r}: pass draft= (a smaller model of the same family)")
        draft = DEFAULT_DRAFT[target]
    tok = load_tokenizer(target)
    t = load_model(target, dtype=dtype, device=device)
    d = load_model(draft, dtype=dtype, device=device)
    same_source = (target in EMBEDDED) == (draft in EMBEDDED) and target in EMBEDDED
    check_compatible(t, d, tok, None if same_source else load_tokenizer(draft))
    return Pair(t, d, tok)


def load_ngram(path=None):
    """The embedded n-gram drafter (``specdec.ngram.NGramModel``), sha256-checked."""
    from specdec.ngram import load_ngram as _load

    return _load(path)
