"""Shared test setup: the repository root on sys.path, one torch thread, and a tiny seeded pair (the
helpers several folders import are in shared_helpers.py)."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

torch.set_num_threads(1)  # small tensors on a shared 2-core machine: one thread is several times faster than two

# Longest first.  pytest-xdist hands tests to its workers in collection order, so a long test
# collected last runs alone at the end while the other worker idles.  These start first, in this
# order: the book's group (every chapter rendered, the book built and checked: one worker), the
# chapters' SMOKE recomputes, vLLM's server and engine, the upstream reproducers, chapter 10's stages,
# the compiled mode, the greedy matrix.
FIRST = ("test_notebook_recomputes_in_smoke_mode[10", "test_notebook_recomputes_in_smoke_mode[09",
         "test_notebook_recomputes_in_smoke_mode[06", "test_vllm_server.py", "test_engines_vllm.py",
         "test_upstream_reproducers.py", "test_engine_stages.py",
         "test_compiled.py", "test_notebook_recomputes_in_smoke_mode", "test_greedy_matrix_batched",
         "test_gpu_bench.py", "test_a_chapter_run_from_the_notebooks_folder")


def _rank(item) -> int:
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args and group.args[0] == "book":
        return 0
    return next((i + 1 for i, key in enumerate(FIRST) if key in item.nodeid), len(FIRST) + 1)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: collection order within a rank

TINY_TARGET = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=128)
TINY_DRAFT = dict(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=128)


@pytest.fixture(scope="module")
def tiny_pair():
    """A seeded random-weight GPT-2 target (2 x 32) and draft (1 x 16) over 64 tokens, 128 positions:
    for properties of the engine and the measurement code, never of a model."""
    from specdec.family.architectures import build_model, real_size_config

    g = torch.Generator().manual_seed(0)
    return (build_model(real_size_config("gpt2-small", **TINY_TARGET), generator=g),
            build_model(real_size_config("draft-3m", **TINY_DRAFT), generator=g))
