"""`make surface`: the controlled-acceptance surface at real sizes (`specdec.measure.surface`), timed on
its own because it is longer than its share of `make reproduce`'s budget; chapter 06 renders the
committed tables (its section "Real-size shapes under controlled acceptance" and the synthesis
figure's real-size curves).

Writes under ``--out``: ``cost_curve.csv`` (T(n) of every shape, per batch, with the draft's T_d(1)
and c), ``controlled.csv`` (one row per run), ``speedup_vs_alpha.csv`` (one row per point with its
interval and the predictions) and ``shapes.csv`` (the draft's parameter count), each with its
provenance sidecar; the parameters below are in it, and the wall seconds.

Example: python -m specdec.cli.surface --out data/results/surface   (--smoke: tiny shapes, every path)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from specdec.io.results import provenance, write_table
from specdec.measure.surface import controlled_runs, speedup_vs_alpha

__all__ = ["main", "PARAMS", "SMOKE"]

# the surface's design: shapes, the set acceptance rates, k, batches, sizes of each run and curve, the
# contention rule (a run below MIN_SHARE of a CPU is re-run at most MAX_RERUNS times), the seed
PARAMS = {"targets": ["gpt2-small"], "curve_only": ["gpt2-medium"], "draft": "draft-3m", "alphas": [0.5, 0.7, 0.9],
          "ks": [1, 2, 4, 6, 8], "batches": [1, 4], "new_tokens": 12, "context": 64, "curve_n": list(range(1, 10)),
          "curve_repeats": 3, "pilot_rounds": 2, "repeats": 6, "min_share": 0.9, "max_reruns": 2, "mode": "lean",
          "seed": 1, "target_sizes": {}, "draft_sizes": {}}
SMOKE = {"alphas": [0.7], "ks": [1, 2], "new_tokens": 6, "curve_n": [1, 2, 3], "batches": [1, 2], "repeats": 2,
         "pilot_rounds": 1, "draft_sizes": {"n_layer": 1, "n_embd": 32},
         "target_sizes": {"n_layer": 2, "n_embd": 64, "n_head": 2}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec.cli.surface", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data/results/surface"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes and sizes: checks every path, numbers mean nothing")
    args = ap.parse_args(argv)
    P = {**PARAMS, **(SMOKE if args.smoke else {}), "smoke": args.smoke}
    torch.set_num_threads(1)  # one thread, as every timing of chapter 06
    start = time.perf_counter()
    out = controlled_runs(P["targets"], P["draft"], P["alphas"], P["ks"], new_tokens=P["new_tokens"],
                          context=P["context"], n_values=P["curve_n"], curve_repeats=P["curve_repeats"],
                          repeats=P["repeats"], temperature=1.0, batches=P["batches"], curve_only=P["curve_only"],
                          generator=torch.Generator().manual_seed(P["seed"]), target_sizes=P["target_sizes"],
                          draft_sizes=P["draft_sizes"], min_share=P["min_share"], pilot_rounds=P["pilot_rounds"],
                          max_reruns=P["max_reruns"], mode=P["mode"])
    prov = provenance(P, seed=P["seed"])
    prov["wall_s"] = round(time.perf_counter() - start, 1)
    write_table(out["cost_curve"], args.out / "cost_curve.csv", prov, kind="timing")
    write_table(out["controlled"], args.out / "controlled.csv", prov, kind="timing")
    write_table(speedup_vs_alpha(out["controlled"]), args.out / "speedup_vs_alpha.csv", prov, kind="timing",
                keys=["target", "batch", "k", "alpha_set"], intervals=[["speedup_median", "speedup_lo", "speedup_hi"]])
    write_table([{"draft": P["draft"], "draft_params": out["draft_params"]}], args.out / "shapes.csv", prov)
    print(f"surface written to {args.out} in {prov['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
