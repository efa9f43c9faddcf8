"""Loaded by every Python process of a vLLM server that `specdec.peers.vllm_server.VLLMServer`
starts with ``patched=True`` (this folder first on PYTHONPATH, SPECDEC_VLLM_PATCH=1): when vLLM's
``vllm.v1.sample.rejection_sampler`` is imported -- in the API process or the engine core it
spawns -- its ``expand_batch_to_tokens`` is replaced by the project's dtype-keeping expand
(`vllm_patch.expand_keep_dtype`, loaded by path), and one line is written to stderr (the server's
log), which the server's start-up checks.  Nothing else changes.  Without SPECDEC_VLLM_PATCH=1 it does
nothing.  A labelled, patched configuration: never a default.
"""
import importlib.abc
import importlib.util
import os
import sys

MODULE = "vllm.v1.sample.rejection_sampler"
MARK = "specdec: vLLM's expand_batch_to_tokens patched (dtype kept) in process"
USED = "specdec: the patched expand_batch_to_tokens ran in process"


def _expand():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vllm_patch.py")
    spec = importlib.util.spec_from_file_location("specdec_vllm_patch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ran = []

    def expand(*args, **kwargs):
        if not ran:  # once per process: the log shows that the patch was called, not only installed
            ran.append(True)
            print(f"{USED} {os.getpid()}", file=sys.stderr, flush=True)
        return module.expand_keep_dtype(*args, **kwargs)

    return expand


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.expand_batch_to_tokens = _expand()
            print(f"{MARK} {os.getpid()}", file=sys.stderr, flush=True)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("SPECDEC_VLLM_PATCH") == "1":
    sys.meta_path.insert(0, _Finder())
