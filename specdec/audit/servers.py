"""`make audit-servers`: `make audit` at full size against every real server this project can start
on 127.0.0.1, with the verdicts predicted before the run (chapter 10's section "Your own
deployment" renders the committed table).

Pairs (control first, then the speculative endpoint, k = 2, the embedded pair, one thread each):
  - ours (`specdec.peers.own_server`): plain / exact token verification   -> both consistent;
  - ours: plain / the negative control that keeps every draft              -> inconsistent (must be);
  - llama.cpp's llama-server: plain / probabilistic drafts (rejection)      -> both consistent;
  - vLLM's CPU server: plain / probabilistic drafts, as shipped             -> inconsistent
    (vllm-project/vllm#55005: its rejection sampler reads uninitialised temperatures);
  - vLLM's CPU server: plain / the same, patched (`VLLMServer(patched=True)`) -> both consistent.
Each pair at each setting of ``settings`` (temperature 1; temperature 0.7 with top-p 0.9), the
same prompts, sizes and seed.  A server that cannot start (an environment not built) or an audit
that refuses gives rows whose status says so, never a verdict.  Each row is a test at level 0.01:
over the ~14 rows predicted consistent, one false rejection somewhere has probability up to ~13%
(vLLM's rows have no per-request seed, so they are not reproducible to the token).

Example: rows = run_all(prompts, sequences=64, length=32, seed=0)
"""
from __future__ import annotations

import time
from contextlib import ExitStack

from specdec.audit.deployment import audit
from specdec.family.loader import embedded_dir
from specdec.io.paths import MODELS_DIR
from specdec.peers.interface import Sampling, Speculation

__all__ = ["PAIRS", "SETTINGS", "PREDICTED", "run_all"]

K, DRAFT = 2, "draft-distilled"
SETTINGS = {"temperature 1": Sampling(1.0), "temperature 0.7, top-p 0.9": Sampling(0.7, top_p=0.9)}
PAIRS = ("ours, exact", "ours, every draft kept", "llama.cpp, probabilistic drafts", "vLLM, probabilistic drafts",
         "vLLM, probabilistic drafts, patched")
PREDICTED = {"ours, exact": "consistent", "ours, every draft kept": "inconsistent",
             "llama.cpp, probabilistic drafts": "consistent", "vLLM, probabilistic drafts": "inconsistent",
             "vLLM, probabilistic drafts, patched": "consistent"}


def _servers(stack: ExitStack, pair: str) -> tuple[str, str]:
    """(control URL, speculative URL) of a pair, each server stopped when ``stack`` closes."""
    from specdec.peers.llama import LlamaEngine
    from specdec.peers.own_server import OwnServer
    from specdec.peers.vllm_server import VLLMServer

    if pair.startswith("ours"):
        variant = "always_accept" if "kept" in pair else None
        return (stack.enter_context(OwnServer()).url,
                stack.enter_context(OwnServer(draft=DRAFT, k=K, variant=variant)).url)
    if pair.startswith("llama"):
        engine = stack.enter_context(LlamaEngine())
        spec = Speculation("draft_model", k=K, draft=DRAFT, options=(("draft_sampling", "probabilistic"),))
        return engine.server(None).url, engine.server(spec).url
    spec = Speculation("draft_model", k=K, draft=DRAFT, options=(("draft_sample_method", "probabilistic"),))
    plain = stack.enter_context(VLLMServer(seed=0, startup_timeout_s=300))
    return plain.url, stack.enter_context(VLLMServer(spec, seed=0, patched="patched" in pair, startup_timeout_s=300)).url


def _not_run(pair: str, setting: str, exc: BaseException) -> list[dict]:
    """The control's and the speculative endpoint's rows of a (pair, setting) that did not run."""
    return [{"pair": pair, "setting": setting, "endpoint": e, "status": f"not run: {exc}"[:300]}
            for e in ("control", "speculative")]


def run_all(prompts, *, sequences: int, length: int, seed: int, eps: float = 0.03, pairs=PAIRS,
            settings=tuple(SETTINGS), log=print) -> list[dict]:
    """One row per (pair, setting, endpoint) with the predicted verdict beside the audit's (module
    docstring); the servers of each pair start before its audits and stop after them."""
    target = MODELS_DIR / embedded_dir("target")
    rows = []
    for pair in pairs:
        start = time.perf_counter()
        with ExitStack() as stack:
            try:
                control, speculative = _servers(stack, pair)
            except (RuntimeError, OSError) as exc:  # ServerFailed, an environment not built
                rows += [row for name in settings for row in _not_run(pair, name, exc)]
                continue
            for name in settings:
                try:
                    out = audit([("control", control), ("speculative", speculative)], target, "target", prompts,
                                sequences=sequences, length=length, sampling=SETTINGS[name], seed=seed, eps=eps)
                except (RuntimeError, OSError, ValueError) as exc:  # an endpoint's error, an identity refusal
                    rows += _not_run(pair, name, exc)
                    continue
                for r in out["rows"]:
                    predicted = PREDICTED[pair] if r["endpoint"] == "speculative" else "consistent"
                    rows.append({"pair": pair, "setting": name, **r, "predicted": predicted})
        log(f"{pair}: {time.perf_counter() - start:.0f} s")
    return rows
