"""Tidy result tables with provenance, typed on the way back, and the one atomic writer.

Every table is a CSV (one row per measurement) with a JSON sidecar ``<name>.json`` holding
``format_version``, the columns with their types, what kind of result it is (``exact``, ``sampled``
or ``timing``: how a re-run is compared with it, see `specdec.report.reproduction.status`), and the
provenance: git commit, package versions, hardware, load, parameters, seed, models' sha256, time.

Writing needs only the standard library (rows as a list of dicts; the GPU machine has no pandas);
`read_table` returns a pandas DataFrame with every column in the type it was written with, so a
number comes back as a number (the CSV round trip is typed by the sidecar, not guessed).

Every file the project writes goes through `atomic_path` (temp file in the same folder, then
``os.replace``): a reader never sees a half-written file, and an interrupted run leaves the old one.

Example:
    write_table([{"alpha": 0.8, "k": 4, "S": 2.40}], "out/s.csv", provenance({"c": 0.1}))
    read_table("out/s.csv").dtypes  ->  alpha float64, k int64, S float64
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from specdec.io.paths import ROOT, resolve

__all__ = ["FORMAT_VERSION", "KINDS", "atomic_path", "atomic_write", "hardware", "provenance", "write_table",
           "read_table", "read_tables", "read_meta", "save_figure", "records", "run_differences"]

FORMAT_VERSION = 2  # 2: column types and the result kind in the sidecar
READABLE_VERSIONS = (1, 2)  # 1: untyped (pandas infers the types), still read for comparisons
KINDS = ("exact", "sampled", "timing")
_PACKAGES = ("numpy", "scipy", "pandas", "torch", "transformers", "tokenizers", "matplotlib")


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on error it is removed.

    For writers that want a file name (``torch.save``, ``savefig``, safetensors).
    Example: with atomic_path("out/w.pt") as tmp: torch.save(state, tmp)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600: give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path, write, mode: str = "w") -> Path:
    """Create ``path`` by ``write(file)`` through `atomic_path` (text mode unless mode="wb").

    Example: atomic_write(Path("out/a.txt"), lambda f: f.write("hello\\n"))
    """
    with atomic_path(path) as tmp:
        with open(tmp, mode, **({} if "b" in mode else {"newline": ""})) as f:
            write(f)
    return Path(path)


def _git_commit(cwd: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        # the results being written are not a change to the code that wrote them
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)data/results", ":(exclude)data/reruns"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def hardware() -> dict:
    """CPU model, core count, torch threads, and the CUDA device when there is one."""
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


def provenance(params: dict | None = None, seed: int | None = None, models: dict | None = None) -> dict:
    """What produced a result: commit, versions, hardware, load average, parameters, seed, the
    sha256 of every model file used (``models``: {name: sha256}), UTC timestamp."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "git_commit": _git_commit(ROOT),
        "python": platform.python_version(),
        "packages": versions,
        "hardware": hardware(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "parameters": dict(params or {}),
        "seed": seed,
        "models_sha256": dict(models or {}),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def records(rows) -> list[dict]:
    """A list of dicts, from a list of dicts or a pandas DataFrame (numpy scalars made Python)."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows.to_dict("records")]
    return list(rows)


def _dtype(values) -> str:
    """The column type: bool, int64, Int64 (ints with gaps), float64, or str."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    gaps = len(present) < len(values)
    if present and all(isinstance(v, bool) for v in present):
        return "str" if gaps else "bool"
    if any(isinstance(v, bool) for v in present):
        return "str"
    if present and all(isinstance(v, int) for v in present):
        return "Int64" if gaps else "int64"  # a gap (None or NaN) in an integer column
    if all(isinstance(v, (int, float)) for v in present):
        return "float64"
    return "str"


def write_table(rows, path, prov: dict, kind: str = "exact", **meta) -> Path:
    """Write ``rows`` (dicts with the same keys, or a DataFrame) to ``path`` (.csv) and its sidecar.

    kind: "exact" (deterministic: a re-run must match to rounding), "sampled" (seeded Monte Carlo:
    a re-run on another machine must agree within the stated intervals) or "timing" (reported as
    ratios, never asserted).  ``meta`` is stored in the sidecar too (e.g. ``intervals`` naming
    [estimate, low, high] column triples, ``keys`` naming the columns that identify a row).

    Example: write_table([{"alpha": 0.8, "k": 4, "S": 2.40}], "out/s.csv", provenance())
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    path = resolve(path).with_suffix(".csv")
    rows = records(rows)
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
    sidecar = {"format_version": FORMAT_VERSION, "columns": columns,
               "dtypes": {c: _dtype([r[c] for r in rows]) for c in columns}, "n_rows": len(rows),
               "kind": kind, **meta, "provenance": prov}
    atomic_write(path.with_suffix(".json"), lambda f: json.dump(sidecar, f, indent=2, default=str))
    return path


def read_meta(path) -> dict:
    """The sidecar of a table (format version checked)."""
    meta_path = resolve(path).with_suffix(".json")
    if not meta_path.exists():
        raise FileNotFoundError(f"result table sidecar {meta_path} is missing")
    meta = json.loads(meta_path.read_text())
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{meta_path}: format_version {meta.get('format_version')!r}, "
                         f"this code reads versions {READABLE_VERSIONS}; re-run the chapter that writes it")
    return meta


def read_table(path):
    """A table written by `write_table` as a pandas DataFrame, each column in its written type;
    the sidecar is in ``df.attrs["meta"]``.  Missing file or sidecar, another format version or
    columns that disagree with the sidecar raise."""
    import pandas as pd

    path = resolve(path).with_suffix(".csv")
    if not path.exists():
        raise FileNotFoundError(f"result table {path} is missing")
    meta = read_meta(path)
    if meta["format_version"] == 1:  # no column types recorded: let pandas infer them
        df = pd.read_csv(path)
        df.attrs["meta"] = meta
        return df
    types = {c: ("object" if t == "str" else t) for c, t in meta["dtypes"].items() if t not in ("bool",)}
    df = pd.read_csv(path, dtype=types, keep_default_na=False, na_values={c: ["", "nan", "NaN"] for c, t in
                                                                          meta["dtypes"].items() if t != "str"})
    for c, t in meta["dtypes"].items():
        if t == "bool":
            df[c] = df[c].map({"True": True, "False": False, True: True, False: False}).astype(bool)
    if list(df.columns) != meta["columns"]:
        raise ValueError(f"{path}: columns {list(df.columns)} do not match its sidecar {meta['columns']}")
    df.attrs["meta"] = meta
    return df


def read_tables(folder, names) -> dict:
    """{name: `read_table`} of the tables ``names`` in ``folder`` (a command's results folder)."""
    return {name: read_table(Path(folder) / f"{name}.csv") for name in names}


def run_differences(ran: dict, ours: dict, shared: dict, checksum: str) -> dict:
    """Where a command's committed run (``ran``: its provenance's parameters) differs from the chapter
    that renders it: {its name: (its value, ours)} over ``shared`` ({its name: the chapter's
    parameter name in ``ours``; a name either lacks reads None), the prompts' ``checksum`` and a
    ``--smoke`` run.
    Example: run_differences({"k": 4, "checksum": "ab"}, {"K": 2}, {"k": "K"}, "ab") -> {"k": (4, 2)}"""
    differ = {k: (ran.get(k), ours.get(mine)) for k, mine in shared.items() if ran.get(k) != ours.get(mine)}
    if ran.get("checksum") != checksum:
        differ["checksum"] = (ran.get("checksum"), checksum)
    if ran.get("smoke"):
        differ["smoke"] = (True, False)
    return differ


def save_figure(fig, path) -> Path:
    """Save ``fig`` as ``path`` (.png), atomically, with no timestamp in the file."""
    path = resolve(path).with_suffix(".png")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return path
