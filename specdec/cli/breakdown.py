"""`make breakdown`: chapter 10's time breakdown of the three engines (`specdec.audit.breakdown`),
written as timing tables under ``--out`` (default data/results/breakdown): plain.csv, speculative.csv,
forwards.csv, split.csv, limit.csv, cache.csv.  The chapter renders the committed ones.

Every engine decodes with one thread; vLLM runs in its worker process (`make vllm-env`), llama.cpp on
llama-servers this run starts and always stops (`make llama-env`).  ``--smoke`` runs every path at
tiny sizes (a minute or two; the numbers mean nothing) and leaves vLLM out unless ``--vllm``.

Usage: python -m specdec.cli.breakdown [--out DIR] [--smoke] [--vllm] [--rounds R] [--length N] [--only split]
Example: python -m specdec.cli.breakdown --smoke --out /tmp/breakdown
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from specdec.audit.breakdown import run_all, split_rows
from specdec.io.results import provenance, write_table

DRAFT, SEED, PROMPT_LEN, SPLIT_ROUNDS = "draft-distilled", 0, 8, 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec.cli.breakdown", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/breakdown"))
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks every path, numbers mean nothing")
    ap.add_argument("--vllm", action="store_true", help="include vLLM in a smoke run (always in a full run)")
    ap.add_argument("--rounds", type=int, default=None, help="ABBA rounds per prompt (even; default 4, smoke 2)")
    ap.add_argument("--length", type=int, default=None, help="tokens per timed call (default 128, smoke 8)")
    ap.add_argument("--only", choices=("split",), default=None,
                    help="recompute only this table (split.csv), the others left as they are")
    args = ap.parse_args(argv)
    from specdec.measure.subjects import load_subjects
    from specdec.peers.llama import LlamaEngine
    from specdec.peers.ours import OursEngine
    from specdec.peers.vllm import VLLMEngine
    from specdec.peers.vllm_session import VLLMSession

    torch.set_num_threads(1)
    rounds = args.rounds or (2 if args.smoke else 4)
    length = args.length or (8 if args.smoke else 128)
    n_prompts, ks, batches = (1, (2,), (1, 2)) if args.smoke else (3, (1, 2, 4), (1, 8))
    subjects = load_subjects("cpu", "float32", allow_stand_in=False, seed=SEED)
    prompts = [p.tolist() for p in subjects.prompts(n_prompts, PROMPT_LEN, seed=SEED + 1)]  # chapter 10's speed prompts
    params = {"rounds": rounds, "length": length, "prompts": prompts, "ks": list(ks), "batches": list(batches),
              "draft": DRAFT, "smoke": args.smoke, "split_rounds": SPLIT_ROUNDS,
              **({"only": args.only} if args.only else {})}
    start = time.perf_counter()
    session = VLLMSession(VLLMEngine(threads=1)) if (args.vllm or not args.smoke) else None
    try:
        if args.only == "split":
            out = {"split": split_rows(subjects.target, prompts, batches=batches, length=length, seed=SEED,
                                       session=session, rounds=SPLIT_ROUNDS)}
        else:
            with LlamaEngine(threads=1) as llama, LlamaEngine(threads=1, target=DRAFT) as llama_draft:
                out = run_all({"ours": OursEngine(mode="lean"), "llama": llama}, prompts, target=subjects.target,
                              draft_model=subjects.drafts[DRAFT], draft=DRAFT, ks=ks, batches=batches,
                              length=length, rounds=rounds, seed=SEED, session=session, llama_draft=llama_draft,
                              repeats=5 if args.smoke else 20, split_rounds=SPLIT_ROUNDS)
    finally:
        if session is not None:
            session.close()
    prov = provenance(params, seed=SEED, models=subjects.sha256)
    prov["wall_s"] = round(time.perf_counter() - start, 1)
    for name, rows in out.items():
        write_table(rows if isinstance(rows, list) else [rows], args.out / f"{name}.csv", prov, kind="timing")
    print(f"breakdown written to {args.out} in {prov['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
