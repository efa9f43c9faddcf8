"""Does vLLM's CPU stand-in for `expand_kernel` write its output?  (vllm-project/vllm#55005)

    python kernel_check.py [--json RESULT.json]

Registers the CPU platform's Triton-kernel overrides (as vLLM's worker does at start-up, through
`current_platform.register_triton_kernel_overrides()`), then calls
`vllm.v1.sample.rejection_sampler.expand_batch_to_tokens` on a two-request batch with
``cu_num_tokens`` = int32 [2, 4] and inputs float32 [0.7, 1.0], int32 [50, 20] and int64 [50, 20].
The correct expansion repeats each request's value over its tokens: [a, a, b, b].  The rejection
sampler expands the per-request temperature (float32), top-k (int32) and top-p (float32) this way
before it computes the target's law at the drafted positions.

Prints vLLM's version, whether Triton is in use, and for each dtype the input, the output and
whether the output equals the correct expansion.  With ``--json PATH`` it also writes

    {"vllm": version, "has_triton": bool, "platform": name,
     "cases": [{"dtype", "input", "output", "expected", "correct"}], "affected": bool}

(``affected``: some case is wrong; non-finite outputs are written as the strings "nan", "inf",
"-inf").  Exit status 0 whenever the check ran, affected or not; 2 when it could not run (vLLM,
torch or the CPU override API missing), with the reason on stderr.

The wrong outputs are uninitialised memory: their values differ from run to run and from machine to
machine, and by chance one of them could equal the correct expansion.  Needs only vllm and torch.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings

CASES = (("float32", [0.7, 1.0]), ("int32", [50, 20]), ("int64", [50, 20]))
CU_NUM_TOKENS = [2, 4]


def _plain(values) -> list:
    """JSON-safe numbers: non-finite floats become "nan", "inf", "-inf"."""
    out = []
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            out.append("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        else:
            out.append(v)
    return out


def _show(values) -> str:
    """Values as a float32 user would write them (7 significant digits), integers as they are."""
    return "[" + ", ".join(f"{v:.7g}" if isinstance(v, float) else str(v) for v in values) + "]"


def check() -> dict:
    """Run the three cases; the result dict described in the module docstring."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # vLLM's override registration scans every loaded module; torch answers one attribute with a
    # FutureWarning that says nothing about this check
    warnings.filterwarnings("ignore", message=".*torch.distributed.reduce_op.*", category=FutureWarning)
    import torch
    import vllm
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON
    from vllm.v1.sample import rejection_sampler

    register = getattr(current_platform, "register_triton_kernel_overrides", None)
    if register is None:
        raise RuntimeError(f"vLLM {vllm.__version__}: the platform has no register_triton_kernel_overrides")
    register()
    cu = torch.tensor(CU_NUM_TOKENS, dtype=torch.int32)
    counts = [CU_NUM_TOKENS[0]] + [b - a for a, b in zip(CU_NUM_TOKENS, CU_NUM_TOKENS[1:])]
    cases = []
    for name, values in CASES:
        x = torch.tensor(values, dtype=getattr(torch, name))
        out = rejection_sampler.expand_batch_to_tokens(x, cu, CU_NUM_TOKENS[-1])
        expected = x.repeat_interleave(torch.tensor(counts))
        correct = bool(out.dtype == x.dtype and out.shape == expected.shape and torch.equal(out, expected))
        cases.append({"dtype": name, "input": x.tolist(), "output": _plain(out.tolist()),
                      "expected": expected.tolist(), "correct": correct})
    return {"vllm": vllm.__version__, "has_triton": bool(HAS_TRITON),
            "platform": type(current_platform).__name__, "cases": cases,
            "affected": not all(c["correct"] for c in cases)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    args = parser.parse_args(argv)
    try:
        result = check()
    except Exception as exc:  # the check could not run: say why, exit non-zero
        print(f"kernel_check could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"vLLM {result['vllm']} on {result['platform']}; Triton in use: {result['has_triton']}")
    print(f"expand_batch_to_tokens(x, cu_num_tokens=int32 {CU_NUM_TOKENS}, num_tokens={CU_NUM_TOKENS[-1]}):")
    for c in result["cases"]:
        print(f"  {c['dtype']:>7} {_show(c['input'])} -> {_show(c['output'])}  "
              f"{'correct' if c['correct'] else 'WRONG (expected ' + _show(c['expected']) + ')'}")
    print("AFFECTED: the expansion is wrong for " +
          ", ".join(c["dtype"] for c in result["cases"] if not c["correct"])
          if result["affected"] else "not affected: every expansion is correct")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
