"""The whole GPU measurement in one script (chapter 07):

    python -m specdec.cli.gpu_bench --out data/results/gpu [--smoke] [--device cuda]
                                        [--target ID_OR_PATH --draft ID_OR_PATH] [--budget-s 540]

Needs only torch and transformers (the GPU machine has no network, no pandas and no papermill);
writes tidy CSV + JSON tables with provenance (GPU name, driver and CUDA versions, package
versions, date): the sections and their tables are in `specdec.measure.gpu_sections`.

Real-size architectures are built from a config with random weights: a ~8B Llama-style target
with a ~1B draft (Llama 3 shapes, vocabulary 128,256), and GPT-2 medium with a 3M draft.  Every
section checks a wall-clock budget and records what it skipped, so the run ends in time.
Run on CPU with --device cpu --smoke to exercise the code path (tiny configs; not GPU numbers).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import subprocess
import sys
from pathlib import Path

import torch

from specdec.engine.kv import now
from specdec.measure.gpu_sections import ALPHAS, BATCHES, K_GRID, embedded, hub, log, real_size
from specdec.io.paths import RESULTS_DIR
from specdec.io.results import provenance, write_table

__all__ = ["gpu_info", "Budget", "main"]


def _source(module_file: str) -> str:
    """Where a module was imported from: `make gpu`'s wheels (a PYTHONPATH entry) or the environment."""
    here = Path(module_file).resolve()
    for entry in filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)):
        if here.is_relative_to(Path(entry).resolve()):
            return "PYTHONPATH (make gpu's wheels)"
    return "the environment's own"


def gpu_info(device: torch.device) -> dict:
    info = {"device": str(device), "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "cuda_runtime": torch.version.cuda}
    try:
        import transformers

        info["transformers"] = transformers.__version__
        info["transformers_source"] = _source(transformers.__file__)
    except ImportError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["gpu_memory_bytes"] = torch.cuda.get_device_properties(device).total_memory
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            info["driver"] = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "unknown"
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
    return info


class Budget:
    """A wall-clock budget: `ok(what, need)` is False (and records ``what`` as skipped) when fewer
    than ``need`` seconds are left."""

    def __init__(self, seconds: float):
        self.end = now() + seconds
        self.skipped: list[str] = []

    def left(self) -> float:
        return self.end - now()

    def ok(self, what: str, need: float = 0.0) -> bool:
        if self.left() > need:
            return True
        self.skipped.append(what)
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(RESULTS_DIR / "gpu"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny configs: exercises the code path only")
    ap.add_argument("--target", default="")
    ap.add_argument("--draft", default="")
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget for all sections: every "
                    "section checks what is left before it builds or loads a model, so with start-up the whole "
                    "run is designed to end within 8 minutes")
    ap.add_argument("--modes", default="eager,compiled", help="execution modes of the real-size section, in order: "
                    "eager, compiled (torch.compile, specdec.engine.modes.compiled) or both")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not args.modes or any(m not in ("eager", "compiled") for m in args.modes.split(",")):
        ap.error(f"--modes takes eager and/or compiled, comma-separated; got {args.modes!r}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_bench: CUDA is not available on this machine; nothing measured, nothing written.",
              file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    budget = Budget(args.budget_s)
    info = gpu_info(device)
    params = {**vars(args), "dtype": str(dtype), "K_GRID": (1, 2) if args.smoke else K_GRID,
              "ALPHAS": (0.8,) if args.smoke else ALPHAS, "BATCHES": (1, 2) if args.smoke else BATCHES}
    prov = provenance(params, seed=args.seed)
    prov["gpu_environment"] = info
    log(f"start on {info.get('gpu', args.device)}; budget {args.budget_s:.0f} s")
    t0 = now()
    for section in (real_size, embedded, hub if args.target and args.draft else None):
        if section is None:
            continue
        try:
            section(args, device, dtype, budget, prov)
        except Exception as exc:  # report and go on: the run's other tables still get written
            log(f"{section.__name__}: FAILED: {type(exc).__name__}: {exc}")
            budget.skipped.append(f"{section.__name__}: failed with {type(exc).__name__}: {str(exc)[:200]}")
    if (args.target or args.draft) and not (args.target and args.draft):
        budget.skipped.append("hub pair: needs both --target and --draft")
    summary = [{"section": s, "status": "skipped"} for s in budget.skipped] or [{"section": "all", "status": "complete"}]
    for r in summary:
        r["wall_s"] = round(now() - t0, 1)
        r["smoke"] = args.smoke
    write_table(summary, Path(args.out) / "run_summary.csv", prov, kind="timing")
    log(f"done in {now() - t0:.0f} s; skipped: {budget.skipped or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
