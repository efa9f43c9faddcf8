"""The checksum manifest of the embedded family: ``data/models/SHA256SUMS`` (``sha256sum`` format).

Every embedded file the loader opens is checked against it first, so altered or half-downloaded
weights are refused with a message that says how to restore them.  The manifest is written by the
model card (`specdec.family.card`) after training and lists every file under ``data/models``
except itself and the card's README.

Example: verify_file(MODELS_DIR / "target" / "model.safetensors") raises ModelUnavailableError if
its sha256 differs from the line for "target/model.safetensors".
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from specdec.io.paths import MODELS_DIR
from specdec.io.results import atomic_write

__all__ = ["SUMS", "ModelUnavailableError", "sha256_file", "read_sums", "write_sums", "verify_file", "verify_dir"]

SUMS = "SHA256SUMS"


class ModelUnavailableError(ValueError):
    """Weights that cannot be had: missing, altered, refused (pickle) or unreachable (offline)."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_sums(root: Path | None = None) -> dict[str, str]:
    """{relative path: sha256} from ``root/SHA256SUMS``."""
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
    """Write ``SHA256SUMS`` for every file under ``root`` except itself and the card (README.md)."""
    root = Path(root or MODELS_DIR)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in (SUMS, "README.md"))
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}" for p in files]
    return atomic_write(root / SUMS, lambda f: f.write("\n".join(lines) + "\n"))


def verify_file(path: Path, root: Path | None = None) -> str:
    """The file's sha256, after checking it against the manifest (ModelUnavailableError if it is
    missing, unlisted or altered)."""
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
    return got


def verify_dir(d: Path, root: Path | None = None) -> dict[str, str]:
    """Check every manifest entry under directory ``d`` (at least one); {relative path: sha256}."""
    d, root = Path(d), Path(root or MODELS_DIR)
    prefix = d.relative_to(root).as_posix() + "/"
    names = [n for n in read_sums(root) if n.startswith(prefix)]
    if not names:
        raise ModelUnavailableError(f"no files of {d} are listed in {root / SUMS}: the embedded model "
                                    "is not installed (git checkout data/models, or `make models`)")
    return {n: verify_file(root / n, root) for n in names}
