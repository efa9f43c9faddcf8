"""Where things live in the repository: the one definition of every path the project reads or writes.

Every path is absolute, resolved from this file's location, so code (and a notebook opened in
JupyterLab, whose kernel starts in ``notebooks/``) finds the same files whatever the working
directory.  A relative path handed in by a user or a notebook parameter is taken relative to the
repository root, never to the current directory (`resolve`).

Example: resolve("data/results/03_cost_model") == ROOT / "data" / "results" / "03_cost_model"
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "DATA", "CORPUS_DIR", "CACHE_DIR", "MODELS_DIR", "CHECKPOINTS_DIR", "RESULTS_DIR", "RERUNS_DIR",
           "CHAPTERS", "OWN_TARGETS", "BUILD_DIR", "resolve"]

ROOT = Path(__file__).resolve().parents[2]   # the repository: specdec/io/paths.py -> ../../
DATA = ROOT / "data"
CORPUS_DIR = DATA / "corpus"                  # committed held-out text and its manifest
CACHE_DIR = DATA / "cache"                    # downloads and the train text (not committed)
MODELS_DIR = DATA / "models"                  # the embedded family, tokenizer, SHA256SUMS, card
CHECKPOINTS_DIR = DATA / "checkpoints"        # training state for resuming (not committed)
RESULTS_DIR = DATA / "results"                # the small committed results the book renders from
RERUNS_DIR = DATA / "reruns"                  # re-runs of a measured chapter in fresh processes (small tables)
CHAPTERS = {"one": "01_acceptance_and_residual", "seq": "02_distribution_tests", "cost": "03_cost_model",
            "family": "04_model_family", "acc": "05_measured_acceptance", "dec": "06_measured_decoding",
            "gpu": "07_gpu_decoding", "alt": "08_alternatives", "serve": "09_serving", "eng": "10_engines"}  # results folder by short name
# chapters that `make reproduce` renders from their committed results instead of recomputing: each has
# a make target of its own (a campaign longer than make reproduce's whole budget; the page says which)
OWN_TARGETS = {CHAPTERS["eng"]: "make engines"}
BUILD_DIR = ROOT / "build"                    # executed notebooks, the book (not committed)


def resolve(path) -> Path:
    """An absolute path: ``path`` itself if absolute, else ``ROOT / path`` (never the working directory).

    Example: resolve("/tmp/x") == Path("/tmp/x");  resolve("data/results") == RESULTS_DIR
    """
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p
