"""Chapter 09's workload on vLLM's real server: plain decoding and each speculative configuration,
each its own `specdec.peers.vllm_server.VLLMServer` on 127.0.0.1, measured by
`specdec.measure.server_runs.server_sweep` and read by `serving_runs.speedups` / `break_even`
exactly as our engine's runs are.

Protocol, stated before any result: every server of the run is started first (all at once, each
one thread, its log kept) and stopped in a ``finally``; the plain server is the baseline.  The
configurations are chapter 10's (`engine_audit.plan`, by label), and each carries chapter 10's
verdict at the chapter's sampling setting (`law_status`, read from its committed laws table): one
whose law test rejected is run only under a label saying "not the target's law here", and its
rows' verdicts say so instead of faster or slower.
"""
from __future__ import annotations

import csv
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from specdec.measure.engine_audit import Config, plan
from specdec.measure.server_runs import NONE, server_sweep
from specdec.peers.vllm_server import VLLMServer
from specdec.report.robustness import NOT_EXACT

__all__ = ["configs", "law_status", "policy_name", "serve", "labelled"]


def configs(labels, k: int, draft: str) -> list[Config]:
    """Chapter 10's vLLM configurations with these labels, in the given order (a label the plan
    lacks is an error that lists the plan's)."""
    by = {c.label: c for c in plan(k, draft) if c.engine == "vllm" and c.role == "speculative"}
    missing = [x for x in labels if x not in by]
    if missing:
        raise ValueError(f"not vLLM configurations of chapter 10's plan: {missing}; it has {sorted(by)}")
    return [by[x] for x in labels]


def law_status(laws_csv: Path, cfgs: list[Config], setting: str) -> dict:
    """label -> chapter 10's law-test status ("pass", "reject", ...) at ``setting``; "not tested"
    where the table has no such row (or the table is missing)."""
    rows = list(csv.DictReader(open(laws_csv))) if Path(laws_csv).exists() else []
    got = {r["configuration"]: r["status"] for r in rows if r["engine"] == "vllm" and r["setting"] == setting}
    return {c.label: got.get(c.label, "not tested") for c in cfgs}


def policy_name(cfg: Config, status: str) -> str:
    return f"vLLM {cfg.label}" + (f" ({NOT_EXACT})" if status == "reject" else "")


def serve(cfgs: list[Config], status: dict, prompts, *, seed: int, threads: int = 1, startup_timeout_s: float = 240.0,
          log_dir: Path | None = None, **sweep) -> tuple[list[dict], list[dict]]:
    """(rows of `server_sweep` with ``engine`` "vllm", one provenance dict per server) for plain
    decoding (policy `NONE`) and every configuration (`policy_name`)."""
    specs = {NONE: None, **{policy_name(c, status[c.label]): c.spec for c in cfgs}}
    with ExitStack() as stack:
        servers = {name: VLLMServer(spec, seed=seed, threads=threads, startup_timeout_s=startup_timeout_s,
                                    log_dir=log_dir) for name, spec in specs.items()}
        for s in servers.values():
            stack.callback(s.stop)  # every server stopped, whichever failed to start
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            for f in [pool.submit(s.__enter__) for s in servers.values()]:
                f.result()
        rows = server_sweep({n: (s.url, s.model) for n, s in servers.items()}, prompts, seed=seed, **sweep)
    provs = [{"policy": n, **s.provenance} for n, s in servers.items()]
    return [{"engine": "vllm", **r} for r in rows], provs


def labelled(speed: list[dict], status_by_policy: dict) -> list[dict]:
    """The speedup rows, a configuration outside the target's law read as such, never as faster."""
    return [{**r, "verdict": NOT_EXACT, "verdict_sim": NOT_EXACT} if status_by_policy.get(r["policy"]) == "reject"
            else r for r in speed]
