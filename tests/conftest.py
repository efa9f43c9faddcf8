"""Shared test setup: the repository root on sys.path, one torch thread, and a tiny seeded pair."""

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


def assert_decodes_like_eager(wrap, pair, max_new_tokens: int):
    """``wrap`` (an execution mode: `lean`, `compiled`) applied to the tiny pair decodes a ragged batch
    of two greedily, plain and at k = 2, token for token as the eager models do; returns the wrapped
    (target, draft)."""
    from specdec.engine.decode import generate
    from specdec.engine.kv import engine_model

    target, draft = pair
    wt, wd = wrap(target), wrap(draft)
    assert engine_model(wt) is wt and wt.config is target.config
    prompts = [torch.tensor([3, 7, 1, 9, 4]), torch.tensor([5, 2, 8])]
    for drafter, wdrafter in ((None, None), (draft, wd)):
        eager = generate(target, prompts, drafter=drafter, k=2, max_new_tokens=max_new_tokens, temperature=0,
                         mode="eager")
        ours = generate(wt, prompts, drafter=wdrafter, k=2, max_new_tokens=max_new_tokens, temperature=0)
        assert [t.tolist() for t in ours.tokens] == [t.tolist() for t in eager.tokens]
    return wt, wd


def serving_jobs(n: int, *, gap: float, cancel=None, seed: int, prompt=(3, 12), budget=(4, 20), seed_base: int = 100):
    """n serving jobs (`specdec.engine.continuous.Job`) for the tiny pair: ragged prompts (lengths in
    `prompt`, half-open) and budgets (in `budget`), arriving `gap` seconds apart, each with its own seed."""
    from specdec.engine.continuous import Job

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        T, L = int(torch.randint(*prompt, (1,), generator=g)), int(torch.randint(*budget, (1,), generator=g))
        out.append(Job(torch.randint(0, 64, (T,), generator=g), L, gap * i, seed=seed_base + i,
                       cancel_after=(cancel or {}).get(i)))
    return out
