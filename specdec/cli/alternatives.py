"""`make alternatives`: chapter 08's measured runs (`specdec.measure.alternatives`) -- the lossless
alternatives and one setting of each approximate rule on the embedded pair, timed against plain
decoding -- on their own, because they are longer than their share of `make reproduce`'s budget;
chapter 08 renders the committed tables and checks that they ran its prompts and rules.

Writes under ``--out``: ``runs.csv`` (one row per run), ``speedup.csv`` (per temperature and
algorithm: the paired speedup over plain decoding with its interval and verdicts),
``acceptance.csv`` (per draft position) and ``quality.csv`` (NLL and distinct n-gram changes), each
with its provenance sidecar; the parameters below are in it, with the prompts' checksum, the models'
sha256 and the wall seconds.

Example: python -m specdec.cli.alternatives --out data/results/alternatives   (--smoke: every path, tiny sizes)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from specdec.family.tokens import prompt_checksum
from specdec.io.results import provenance, write_table
from specdec.measure import alternatives as alt
from specdec.measure.subjects import load_subjects

__all__ = ["main", "PARAMS", "SMOKE"]

# the runs' design (chapter 08 checks the shared ones against its own parameters): the draft, the
# prompts (count, length, seed: chapter 08's), k, the relaxed rule's lambda and the top-K rule's K,
# tokens per run, temperatures, rounds, one torch thread, the weights' dtype
PARAMS = {"draft": "draft-distilled", "prompts": 8, "prompt_len": 64, "seed": 8, "k": 4, "lambda": 0.5, "top_k": 2,
          "new_tokens": 64, "temperatures": [1.0, 0.7], "repeats": 2, "threads": 1, "dtype": "float32"}
SMOKE = {"prompts": 2, "new_tokens": 8, "temperatures": [1.0], "repeats": 1}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec.cli.alternatives", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/alternatives"))
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes (random-weight stand-ins where the weights are absent): every path, numbers mean nothing")
    args = ap.parse_args(argv)
    P = {**PARAMS, **(SMOKE if args.smoke else {}), "smoke": args.smoke}
    torch.set_num_threads(P["threads"])
    start = time.perf_counter()
    subjects = load_subjects("cpu", P["dtype"], allow_stand_in=args.smoke, seed=P["seed"])
    prompts = subjects.prompts(P["prompts"], P["prompt_len"], seed=P["seed"])
    P["checksum"], P["models"] = prompt_checksum(prompts), subjects.kind
    rows = alt.alternative_runs(subjects.target, subjects.drafts[P["draft"]], prompts,
                                alt.measured_rules(P["lambda"], P["top_k"]), k=P["k"], output_len=P["new_tokens"],
                                temperatures=P["temperatures"], repeats=P["repeats"], seed=P["seed"], block=True)
    prov = provenance(P, seed=P["seed"], models=subjects.sha256)
    prov["wall_s"] = round(time.perf_counter() - start, 1)
    write_table(rows, args.out / "runs.csv", prov, kind="timing")
    write_table(alt.speedup_rows(rows), args.out / "speedup.csv", prov, kind="timing")
    write_table(alt.acceptance_rows(rows, P["k"]), args.out / "acceptance.csv", prov, kind="sampled",
                intervals=[["conditional", "conditional_lo_prompts", "conditional_hi_prompts"]])
    write_table(alt.quality_rows(rows), args.out / "quality.csv", prov, kind="sampled",
                intervals=[["nll_diff", "nll_diff_lo", "nll_diff_hi"]])
    print(f"chapter 08's measured runs written to {args.out} in {prov['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
