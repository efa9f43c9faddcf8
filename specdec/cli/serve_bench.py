"""`make serve-bench URL=... MODEL=...`: chapter 09's workload against any OpenAI-compatible
deployment (a multi-GPU vLLM or SGLang cluster behind one URL), with the same protocol and tables.

Give one URL to measure a deployment, or several (space-separated in URL, one NAMES entry each) to
compare them: the first is the baseline, every other is paired with it per (rate, round)
(`specdec.measure.server_runs`, ABBA over rounds), and the speedup and break-even tables follow.
Prompts: the embedded family's held-out prompts as token ids (valid ids for any vocabulary of at
least the embedded one's size; the text they spell in another tokenizer is not the same), or
``--prompt-file``: a JSON list of token-id lists in the deployed model's own vocabulary.

Writes under ``--out``: ``runs.csv`` (one row per endpoint, rate and round: which endpoint, the
outcomes, tokens/s, goodput, TTFT / per-chunk ITL / TPOT / end-to-end percentiles, the server's
counters), and with two or more endpoints ``speedups.csv`` and ``break_even.csv``; each with its
provenance sidecar (the URLs, the versions the servers report, the parameters).

Usage errors are refused before anything is sent, with exit status 2 and ONE line on stderr (no
traceback): a malformed URL (`specdec.peers.openai_client.check_url`), an endpoint that does not
answer (nothing listens there, the connection fails, an HTTP error), a temperature that is not a
finite number >= 0, rates, SLOs or a timeout that are not finite numbers > 0, counts < 1, a long
share outside [0, 1], a seed outside [0, 2**32), and a prompt file that is missing, unreadable, not
JSON, or not a non-empty list of non-empty lists of int ids >= 0 (bools refused;
`specdec.peers.contract.check_prompts`: the deployed model judges the ids against its vocabulary).

Example: make serve-bench URL="http://10.0.0.5:8000 http://10.0.0.6:8000" NAMES="plain ngram" MODEL=llama
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import NoReturn

from specdec.cli.args import Parser, prompts as read_prompts, usage
from specdec.measure.server_runs import NONE, server_sweep
from specdec.measure.serving_runs import break_even_rows, speedups
from specdec.peers.contract import check_seed
from specdec.peers.openai_client import check_url, endpoint_info, reachable
from specdec.io.results import provenance, write_table

__all__ = ["main", "bench", "add_workload", "check_workload", "sweep_args", "WORKLOAD"]


def bench(endpoints: dict, prompts, out: Path, params: dict, relabel=None, **sweep) -> dict:
    """Run `server_sweep` over ``endpoints`` (name -> (url, model), the first the baseline) and write
    the tables (module docstring); returns {name: rows}.  ``relabel`` (speedup rows -> rows), when
    given, rewrites the speedup rows before they are written (verdicts a caller withholds)."""
    names = list(endpoints)
    renamed = {NONE if i == 0 else n: e for i, (n, e) in enumerate(endpoints.items())}
    rows = server_sweep(renamed, prompts, **sweep)
    for r in rows:
        r["endpoint_name"] = names[0] if r["policy"] == NONE else r["policy"]
    prov = provenance({**params, "endpoints": [endpoint_info(u) for u, _ in endpoints.values()]}, seed=sweep["seed"])
    keep = [{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in rows]
    tables = {"runs": keep}
    write_table(keep, out / "runs.csv", prov, kind="timing", keys=["policy", "rate", "repeat"])
    if len(endpoints) > 1:
        tables["speedups"] = (relabel or list)(speedups(rows, seed=sweep["seed"]))
        tables["break_even"] = break_even_rows(rows, seed=sweep["seed"])
        write_table(tables["speedups"], out / "speedups.csv", prov, kind="timing", keys=["policy", "rate"],
                    intervals=[["latency_speedup", "latency_lo", "latency_hi"]])
        write_table(tables["break_even"], out / "break_even.csv", prov, kind="timing", keys=["policy"],
                    intervals=[["break_even_rate", "lo", "hi"]])
    return tables


# the workload's flags and defaults (chapter 09's sizes; its own rates and rounds): flag -> (type, default)
WORKLOAD = {"--rates": (float, [1.0, 4.0, 16.0, 64.0]), "--repeats": (int, 4), "--requests": (int, 16),
            "--short-len": (int, 16), "--long-len": (int, 64), "--long-share": (float, 0.25),
            "--temperature": (float, 1.0), "--ttft-slo": (float, 0.2), "--tpot-slo": (float, 0.02),
            "--timeout": (float, 60.0), "--prompts": (int, 8), "--prompt-len": (int, 64), "--seed": (int, 9)}


def add_workload(ap, **defaults) -> None:
    """The workload's flags (`WORKLOAD`) on ``ap``, a default replaced by ``defaults`` (by dest name)."""
    for flag, (kind, default) in WORKLOAD.items():
        dest = flag[2:].replace("-", "_")
        ap.add_argument(flag, type=kind, nargs="+" if isinstance(default, list) else None,
                        default=defaults.get(dest, default),
                        help="seconds per request, then it counts as a timeout" if flag == "--timeout" else None)


def sweep_args(a) -> dict:
    """The keyword arguments of `server_sweep` from parsed workload flags."""
    return dict(rates=a.rates, repeats=a.repeats, n_requests=a.requests, short_len=a.short_len, long_len=a.long_len,
                long_share=a.long_share, temperature=a.temperature, ttft_slo=a.ttft_slo, tpot_slo=a.tpot_slo,
                seed=a.seed, timeout_s=a.timeout)


def check_workload(tool: str, a) -> None:
    """Every workload flag in range (module docstring), else ``tool``'s usage error naming it."""
    positive = {"--rates": a.rates, "--ttft-slo": [a.ttft_slo], "--tpot-slo": [a.tpot_slo], "--timeout": [a.timeout]}
    for flag, values in positive.items():
        for v in values:
            if not (math.isfinite(v) and v > 0):
                usage(tool, f"{flag} must be a finite number > 0, got {v!r}")
    if not (math.isfinite(a.temperature) and a.temperature >= 0):
        usage(tool, f"--temperature must be a finite number >= 0, got {a.temperature!r}")
    if not 0 <= a.long_share <= 1:
        usage(tool, f"--long-share must be a fraction in [0, 1], got {a.long_share!r}")
    counts = {"--repeats": a.repeats, "--requests": a.requests, "--short-len": a.short_len, "--long-len": a.long_len,
              "--prompts": a.prompts, "--prompt-len": a.prompt_len}
    for flag, v in counts.items():
        if v < 1:
            usage(tool, f"{flag} must be an int >= 1, got {v}")
    try:
        check_seed(a.seed, "--seed")
    except ValueError as exc:
        usage(tool, str(exc))


def _usage(message: str) -> NoReturn:
    usage("serve-bench", message)


def main(argv=None) -> None:
    ap = Parser("serve-bench", prog="python -m specdec.cli.serve_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--url", nargs="+", required=True, help="endpoint base URLs; the first is the baseline")
    ap.add_argument("--name", nargs="*", default=None, help="one name per URL (default endpoint-1, ...)")
    ap.add_argument("--model", required=True, help="the model name the endpoints serve")
    ap.add_argument("--out", default="data/results/serve-bench")
    add_workload(ap)
    ap.add_argument("--prompt-file", default=None)
    a = ap.parse_args(argv)
    check_workload("serve-bench", a)
    for url in a.url:
        try:
            check_url(url)
        except (TypeError, ValueError) as exc:
            _usage(f"--url: {exc}")
    names = a.name or [f"endpoint-{i + 1}" for i in range(len(a.url))]
    if len(names) != len(a.url) or len(set(names)) != len(names):
        _usage(f"--name needs one distinct name per --url: {len(a.url)} URLs, names {names}")
    prompts = read_prompts("serve-bench", a.prompt_file, a.prompts, a.prompt_len, a.seed)
    for url in a.url:
        why = reachable(url)
        if why is not None:
            _usage(f"{url} does not answer GET /v1/models: {why}; is the server running?")
    endpoints = {n: (check_url(u), a.model) for n, u in zip(names, a.url)}
    tables = bench(endpoints, prompts, Path(a.out), vars(a), log=lambda m: print(m, flush=True), **sweep_args(a))
    print(f"wrote {', '.join(tables)} under {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
