"""`make audit URL="http://host:port [http://host2:port]" MODEL=name TARGET=<folder>`: a deployment's
sampling held to the target's exact law at every position (`specdec.audit.deployment`), from the
reader's own local copy of the served weights.

One URL audits that endpoint; two audit a plain deployment (the control: it tells served numerics
apart from speculation) and a speculative one of the same weights, side by side.  Prompts: the
embedded family's held-out prompts as token ids, or ``--prompt-file`` (`specdec.cli.args`).

Prints one line per endpoint (kind, tokens tested, the server's draft counters, p-value, binned TV,
the minimal detectable TV at power 0.8, the power at ``--eps``, the verdict) and writes
``audit.csv`` and ``identity.csv`` under ``--out`` with their provenance sidecars.

Usage errors are refused before anything is sampled, with exit status 2 and ONE line on stderr: a
malformed or unreachable URL, a server whose rules cannot be pinned, a TARGET that is not a model
folder or not the served weights (``--tie-tol``: the logits by which a served greedy token may
trail the local argmax; raise it for a server in lower precision), a temperature that is not > 0,
top-k < 0, top-p outside (0, 1], counts < 1, a level or eps outside (0, 1), a seed outside
[0, 2**32), a bad prompt file.

Example: make audit URL="http://127.0.0.1:8000 http://127.0.0.1:8001" MODEL=target TARGET=data/models/target
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from specdec.audit.deployment import audit
from specdec.cli.args import Parser, prompts as read_prompts, usage
from specdec.io.results import provenance, write_table
from specdec.peers.contract import check_seed
from specdec.peers.interface import Sampling

__all__ = ["main"]

TOOL = "audit"
SHOWN = ("endpoint", "kind", "tokens", "drafts", "accepted", "p_value", "tv", "mdtv", "power_at_eps", "verdict")


def _check(a) -> Sampling:
    if not (math.isfinite(a.temperature) and a.temperature > 0):
        usage(TOOL, f"--temperature must be a finite number > 0 (the audit tests sampled decoding), got {a.temperature!r}")
    for flag, v in {"--sequences": a.sequences, "--length": a.length, "--prompts": a.prompts,
                    "--prompt-len": a.prompt_len, "--identity-tokens": a.identity_tokens}.items():
        if v < 1:
            usage(TOOL, f"{flag} must be an int >= 1, got {v}")
    for flag, v in {"--alpha": a.alpha, "--eps": a.eps}.items():
        if not 0 < v < 1:
            usage(TOOL, f"{flag} must lie in (0, 1), got {v!r}")
    if not 0 <= a.margin < 1:
        usage(TOOL, f"--margin must lie in [0, 1), got {a.margin!r}")
    if not (math.isfinite(a.tie_tol) and a.tie_tol >= 0):
        usage(TOOL, f"--tie-tol must be a finite number of logits >= 0, got {a.tie_tol!r}")
    if not (math.isfinite(a.timeout) and a.timeout > 0):
        usage(TOOL, f"--timeout must be a finite number of seconds > 0, got {a.timeout!r}")
    if len(a.url) > 2:
        usage(TOOL, f"--url takes one endpoint, or two (the plain control first), got {len(a.url)}")
    try:
        check_seed(a.seed, "--seed")
        return Sampling(a.temperature, top_k=a.top_k or None, top_p=a.top_p)
    except (TypeError, ValueError) as exc:
        usage(TOOL, str(exc))


def main(argv=None) -> list[dict]:
    ap = Parser(TOOL, prog="python -m specdec.cli.audit", description=__doc__.split("\n")[0])
    ap.add_argument("--url", nargs="+", required=True, help="one endpoint, or the plain control then the speculative one")
    ap.add_argument("--name", nargs="*", default=None, help="one name per URL (default: control, speculative)")
    ap.add_argument("--model", required=True, help="the model name the endpoints serve")
    ap.add_argument("--target", required=True, help="a local folder holding the served weights (transformers reads it)")
    ap.add_argument("--out", default="build/audit")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--prompt-file", default=None)
    ap.add_argument("--sequences", type=int, default=64, help="samples per prompt")
    ap.add_argument("--length", type=int, default=32, help="tokens per sample")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=0.05, help="binned TV of u from uniform at which power is stated")
    ap.add_argument("--tie-tol", type=float, default=0.1,
                    help="logits by which a served greedy token may trail the local argmax (a near tie)")
    ap.add_argument("--identity-tokens", type=int, default=8, help="greedy tokens per prompt compared")
    ap.add_argument("--margin", type=float, default=1e-3,
                    help="probability mass within which a token just past the local top-p/top-k cut is a boundary token")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    a = ap.parse_args(argv)
    sampling = _check(a)
    default = ["control", "speculative"] if len(a.url) == 2 else ["endpoint"]
    names = a.name or default
    if len(names) != len(a.url) or len(set(names)) != len(names):
        usage(TOOL, f"--name needs one distinct name per --url: {len(a.url)} URLs, names {names}")
    prompts = read_prompts(TOOL, a.prompt_file, a.prompts, a.prompt_len, a.seed)
    try:
        out = audit(list(zip(names, a.url)), a.target, a.model, prompts, sequences=a.sequences, length=a.length,
                    sampling=sampling, seed=a.seed, alpha=a.alpha, eps=a.eps, timeout_s=a.timeout,
                    tie_tol=a.tie_tol, identity_tokens=a.identity_tokens, margin=a.margin)
    except (TypeError, ValueError) as exc:  # the endpoint's EndpointError is a ValueError
        usage(TOOL, str(exc))
    prov = provenance({k: v for k, v in vars(a).items()}, seed=a.seed)
    folder = Path(a.out)
    write_table(out["rows"], folder / "audit.csv", prov, kind="sampled", keys=["endpoint"])
    write_table([{k: v for k, v in c.items() if k != "first"} for c in out["identity"]], folder / "identity.csv",
                prov, kind="exact", keys=["endpoint", "prompt"])
    print(" | ".join(SHOWN))
    for r in out["rows"]:
        print(" | ".join(f"{r[k]:.4g}" if isinstance(r[k], float) else str(r[k]) for k in SHOWN))
    print(f"wrote audit.csv, identity.csv under {folder}", file=sys.stderr)
    return out["rows"]


if __name__ == "__main__":
    main()
