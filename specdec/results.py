"""Tidy result tables and figures with provenance, written atomically.

Every table is a CSV (one row per measurement) with a JSON sidecar `<name>.json` holding
`format_version`, the column names and the provenance: git commit, package versions, hardware,
parameters, seed, timestamp.  `read_table` checks the version.  Figures are saved as PNG with the
data behind them written next to them under the same name.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

FORMAT_VERSION = 1
_PACKAGES = ("numpy", "scipy", "torch", "transformers", "tokenizers", "matplotlib")


def _git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def hardware() -> dict:
    """CPU model, core count, and the CUDA device when there is one."""
    info = {"machine": platform.machine(), "cpu_count": os.cpu_count(), "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["cuda"] = torch.version.cuda
    except ImportError:
        pass
    return info


def provenance(params: dict | None = None, seed: int | None = None) -> dict:
    """What produced a result: commit, versions, hardware, parameters, seed, UTC timestamp."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "git_commit": _git_commit(Path(__file__).resolve().parent),
        "python": platform.python_version(),
        "packages": versions,
        "hardware": hardware(),
        "parameters": dict(params or {}),
        "seed": seed,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def atomic_write(path: Path, write) -> None:
    """Create ``path`` through a temporary file in its folder: readers never see a half-written file.

    Example: atomic_write(Path("out/a.txt"), lambda f: f.write("hello\\n"))
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_table(rows: list[dict], path, prov: dict) -> Path:
    """Write `rows` (dicts with the same keys) to `path` (.csv) and its `.json` sidecar.

    Example: write_table([{"alpha": 0.8, "k": 4, "S": 2.40}], "out/s.csv", provenance())
    """
    path = Path(path).with_suffix(".csv")
    if not rows:
        raise ValueError(f"no rows to write to {path}")
    columns = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != columns:
            raise ValueError(f"row {i} has columns {list(row)}, expected {columns}")

    def write_csv(f):
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)

    atomic_write(path, write_csv)
    meta = {"format_version": FORMAT_VERSION, "columns": columns, "n_rows": len(rows), "provenance": prov}
    atomic_write(path.with_suffix(".json"), lambda f: json.dump(meta, f, indent=2, default=str))
    return path


def read_table(path) -> tuple[list[dict], dict]:
    """Read a table written by `write_table`; returns (rows with values as strings, metadata)."""
    path = Path(path).with_suffix(".csv")
    meta_path = path.with_suffix(".json")
    if not path.exists() or not meta_path.exists():
        raise FileNotFoundError(f"result table {path} (or its sidecar {meta_path.name}) is missing")
    meta = json.loads(meta_path.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: format_version {meta.get('format_version')!r}, "
                         f"this code reads version {FORMAT_VERSION}")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and list(rows[0]) != meta["columns"]:
        raise ValueError(f"{path}: columns {list(rows[0])} do not match its sidecar {meta['columns']}")
    return rows, meta


def save_figure(fig, path, rows: list[dict], prov: dict) -> Path:
    """Save `fig` as `path` (.png) and the data it plots as the table next to it (.csv/.json)."""
    path = Path(path).with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata={"Software": None})
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    write_table(rows, path.with_suffix(".csv"), prov)
    return path
