"""Chapter 09's workload on vLLM's real server (part of `make engines`; chapter 09 renders the committed
tables): vLLM's plain server as the baseline and each named configuration of chapter 10's plan, each
its own `VLLMServer` on 127.0.0.1 (one thread), measured by `make serve-bench`'s sweep
(`specdec.cli.serve_bench.bench`) with chapter 09's workload, rates and rounds.

Every server is started before the sweep and stopped after it, whichever failed
(`specdec.audit.serving.started`); a configuration chapter 10's law test rejected (or did not test)
runs under a name that says so and gets no faster/slower verdict (`specdec.audit.serving`).  A usage
error (a label the plan lacks, a workload flag out of range) exits with status 2 before any server
starts.

Writes under ``--out``: ``runs.csv``, ``speedups.csv``, ``break_even.csv`` (as `make serve-bench`)
and ``servers.csv`` (one row per server: its policy name, law status, version, KV cache, start-up
seconds, command; the wall seconds of the whole part), each with its provenance sidecar, whose
parameters chapter 09 checks against its own workload.

Example: python -m specdec.cli.serving_vllm --out data/results/serving_vllm
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from specdec.audit.serving import labelled, labelled_configs, started
from specdec.cli.args import Parser, prompts as read_prompts, usage
from specdec.cli.serve_bench import add_workload, bench, check_workload, sweep_args
from specdec.family.tokens import prompt_checksum
from specdec.io.results import provenance, write_table
from specdec.measure.server_runs import NONE
from specdec.peers.vllm_server import VLLMServer

__all__ = ["main", "parser", "CONFIGS", "RATES", "REPEATS"]

CONFIGS = ["n-gram prompt lookup, k = 2", "draft model, k = 2 (defaults)"]  # labels of chapter 10's plan
RATES, REPEATS = [4.0, 16.0, 64.0, 256.0], 6  # arrival rates (requests/s); rounds, ABBA (6 pairs reach 95%)


def parser() -> Parser:
    """The command line's flags: its own, then `make serve-bench`'s workload with chapter 09's rates and rounds."""
    ap = Parser("serving-vllm", prog="python -m specdec.cli.serving_vllm", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/serving_vllm"))
    ap.add_argument("--configs", nargs="+", default=CONFIGS, help="labels of chapter 10's vLLM configurations")
    ap.add_argument("--k", type=int, default=2, help="drafts per step of those configurations")
    ap.add_argument("--draft", default="draft-distilled", help="their draft model")
    ap.add_argument("--startup-timeout", type=float, default=240.0, help="seconds a server may take to answer")
    add_workload(ap, rates=RATES, repeats=REPEATS)
    return ap


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    check_workload("serving-vllm", a)
    try:
        cfgs = labelled_configs(a.configs, a.k, a.draft, a.temperature)
    except ValueError as exc:
        usage("serving-vllm", str(exc))
    prompts = read_prompts("serving-vllm", None, a.prompts, a.prompt_len, a.seed)
    params = {**vars(a), "out": str(a.out), "checksum": prompt_checksum(torch.tensor(prompts))}
    start = time.perf_counter()
    servers = {NONE: VLLMServer(seed=a.seed, startup_timeout_s=a.startup_timeout),
               **{name: VLLMServer(cfg.spec, seed=a.seed, startup_timeout_s=a.startup_timeout)
                  for name, (cfg, _) in cfgs.items()}}
    with started(servers):
        bench({n: (s.url, s.model) for n, s in servers.items()}, prompts, a.out, params,
              relabel=lambda rows: labelled(rows, cfgs), log=lambda m: print(m, flush=True), **sweep_args(a))
    wall = time.perf_counter() - start
    status = {name: st for name, (_, st) in cfgs.items()}
    rows = [{"policy": n, "law": status.get(n, "control"), "version": s.provenance.get("version"),
             "kv_cache_gib": s.kv_cache_gib, "startup_s": s.provenance.get("startup_s"),
             "command": s.provenance.get("command"), "wall_s": wall} for n, s in servers.items()]
    write_table(rows, a.out / "servers.csv", provenance(params, seed=a.seed), kind="timing", keys=["policy"])
    print(f"wrote runs, speedups, break_even, servers under {a.out} ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
