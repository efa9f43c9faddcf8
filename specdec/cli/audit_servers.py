"""`make audit-servers`: `make audit` at full size against every server this project starts on
127.0.0.1 (`specdec.audit.servers`: ours, llama-server, vLLM's CPU server shipped and patched),
written to ``--out``/servers.csv (default data/results/audit) with its provenance; chapter 10
renders the committed table.  ~10 minutes on 2 cores; ``--smoke`` runs every path at tiny sizes.

Usage: python -m specdec.cli.audit_servers [--out DIR] [--smoke] [--pairs NAME ...]
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from specdec.audit.servers import PAIRS, run_all
from specdec.io.results import provenance, write_table

__all__ = ["main"]

SEED, PROMPT_LEN = 0, 8


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m specdec.cli.audit_servers", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/audit"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks every path, verdicts mean little")
    ap.add_argument("--pairs", nargs="*", choices=PAIRS, default=list(PAIRS))
    args = ap.parse_args(argv)
    import torch

    from specdec.measure.subjects import load_subjects

    torch.set_num_threads(1)
    prompts_n, sequences, length = (2, 8, 8) if args.smoke else (8, 32, 32)
    subjects = load_subjects("cpu", "float32", allow_stand_in=False, seed=SEED)
    prompts = [p.tolist() for p in subjects.prompts(prompts_n, PROMPT_LEN, seed=SEED + 48)]
    start = time.perf_counter()
    rows = run_all(prompts, sequences=sequences, length=length, seed=SEED, pairs=args.pairs)
    columns = list(max(rows, key=len))
    rows = [{c: r.get(c, math.nan) for c in columns} for r in rows]
    params = {"prompts": prompts, "sequences": sequences, "length": length, "pairs": args.pairs, "smoke": args.smoke,
              "wall_s": round(time.perf_counter() - start, 1)}
    write_table(rows, args.out / "servers.csv", provenance(params, seed=SEED, models=subjects.sha256), kind="sampled",
                keys=["pair", "setting", "endpoint"])
    print(f"wrote {args.out / 'servers.csv'} ({params['wall_s']} s)")
    return rows


if __name__ == "__main__":
    main()
