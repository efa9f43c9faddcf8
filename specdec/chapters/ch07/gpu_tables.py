"""Chapter 07's view of the GPU run: read the tables `specdec.cli.gpu_bench` wrote, decide
whether they are a GPU measurement, and reduce them to the chapter's small tables.

A folder of GPU tables (`TABLES`, whichever exist) is a GPU measurement (`MEASURED`) only when its
provenance names a CUDA device and the run was not a smoke run; anything else (e.g. ``gpu_bench
--device cpu --smoke``, which checks the code path on tiny configs) is `NOT_GPU`, and an empty or
missing folder is `NONE`.  Nothing is estimated or simulated in place of a missing table.

Example:
    tables = read_gpu_tables("data/results/gpu")    # {} when there are none
    status = status_row(tables)                     # status["real_gpu"] False, status["status"] "none"
"""

from __future__ import annotations

import numpy as np

from specdec.io.paths import resolve
from specdec.io.results import read_table
from specdec.measure.gpu_sections import ALPHAS, BATCHES, COMPILED_K, K_GRID
from specdec.report.formatting import number_list

__all__ = ["TABLES", "NONE", "NOT_GPU", "MEASURED", "read_gpu_tables", "is_gpu_run", "status_row", "status_word",
           "found", "protocol_values", "provenance_rows", "sections", "cost_and_controlled", "batch_throughput",
           "pair_speeds"]

TABLES = ("run_summary", "cost_curve", "controlled", "batch", "embedded", "hub")  # what gpu_bench writes
PAIR_SOURCES = ("embedded", "hub")  # trained pairs: real acceptance
NONE, NOT_GPU, MEASURED = "none", "not from a GPU", "measured"  # the status of the GPU results


def read_gpu_tables(folder) -> dict:
    """{name: DataFrame} of the GPU tables present in ``folder`` (a missing folder gives {})."""
    d = resolve(folder)
    return {name: read_table(d / f"{name}.csv") for name in TABLES if (d / f"{name}.csv").exists()}


def _meta(tables: dict) -> dict:
    return next(iter(tables.values())).attrs["meta"] if tables else {}


def _environment(tables: dict) -> dict:
    return _meta(tables).get("provenance", {}).get("gpu_environment", {})


def is_gpu_run(tables: dict) -> bool:
    """True when the tables come from a CUDA device and not from a smoke run (module docstring)."""
    prov = _meta(tables).get("provenance", {})
    env = prov.get("gpu_environment", {})
    return (bool(tables) and str(env.get("device", "")).startswith("cuda") and not env.get("smoke", False)
            and not prov.get("parameters", {}).get("smoke", False))


def status_row(tables: dict, cuda_here: bool | None = None) -> dict:
    """One row: whether the recomputing machine had CUDA, which GPU tables exist, whether they are a
    GPU measurement, the GPU environment they name, and the status word (`status_word`)."""
    if cuda_here is None:
        import torch

        cuda_here = torch.cuda.is_available()
    env, real = _environment(tables), is_gpu_run(tables)
    row = {"cuda_here": bool(cuda_here), "gpu_tables": " ".join(sorted(tables)) or "none", "real_gpu": real,
           "gpu": str(env.get("gpu", "")), "driver": str(env.get("driver", "")),
           "date_utc": str(env.get("date_utc", "")), "device": str(env.get("device", ""))}
    return {**row, "status": status_word(row)}


def _row(status):
    """A status row from a dict, a table row, or the one-row status table."""
    return status.iloc[0] if hasattr(status, "columns") else status


def status_word(status) -> str:
    """`MEASURED` for a GPU measurement, `NONE` when no GPU table exists, else `NOT_GPU`, from a
    status row's ``real_gpu`` and ``gpu_tables`` (a dict, a table row or the one-row status table,
    as written or read back).  Example: status_word({"real_gpu": False, "gpu_tables": "none"}) -> "none" """
    row = _row(status)
    if str(row["real_gpu"]).strip().lower() in ("true", "1"):
        return MEASURED
    return NONE if str(row["gpu_tables"]).strip() in ("", "none") else NOT_GPU


def found(status) -> set[str]:
    """The names of the GPU tables a status row (or the one-row status table) lists.
    Example: found({"gpu_tables": "batch run_summary"}) -> {"batch", "run_summary"}"""
    return set(str(_row(status)["gpu_tables"]).split()) - {"none"}


def protocol_values() -> dict:
    """The grids `specdec.measure.gpu_sections` sweeps, as the page quotes them (`number_list`): draft
    lengths k, controlled acceptances alpha, batch sizes, and the compiled mode's k.
    Example: protocol_values()["k_grid"] -> "1, 2, 3, 4, 6, 8" """
    return {"k_grid": number_list(K_GRID), "alphas": number_list(ALPHAS), "batches": number_list(BATCHES),
            "compiled_k": number_list(COMPILED_K)}


def provenance_rows(tables: dict) -> list[dict]:
    """(item, value) rows: the GPU environment, the commit, each package version, each of the run's
    parameters and the sha256 of the trained weights it loaded (embedded family, named pair)."""
    prov = _meta(tables).get("provenance", {})
    rows = [{"item": k, "value": str(v)} for k, v in _environment(tables).items()]
    rows.append({"item": "git_commit", "value": str(prov.get("git_commit", ""))})
    rows += [{"item": f"package {k}", "value": str(v)} for k, v in prov.get("packages", {}).items()]
    rows += [{"item": f"parameter {k}", "value": str(v)} for k, v in prov.get("parameters", {}).items()]
    for source in PAIR_SOURCES:  # trained weights the run loaded: their sha256
        if source in tables:
            sha = tables[source].attrs["meta"].get("provenance", {}).get("models_sha256", {})
            rows += [{"item": f"{source} model {f}", "value": str(h)} for f, h in sha.items()]
    return rows


def sections(tables: dict) -> list[dict]:
    """The run's sections: complete, or what was skipped (and why), with the run's wall time."""
    return [{"section": r["section"], "status": r["status"], "wall_s": float(r["wall_s"])}
            for r in tables["run_summary"].to_dict("records")]


def cost_and_controlled(tables: dict) -> list[dict]:
    """The cost and controlled-acceptance table: panel "cost_curve" (x = n, measured = T(n)/T(1),
    per pair) and panel "controlled" (x = set alpha, measured = median tokens/s / the pair's median
    baseline tokens/s, predicted = the extended prediction beside it), per pair and k; c: the
    pair's draft cost."""
    curve, ctrl = tables["cost_curve"], tables["controlled"]
    rows = [dict(panel="cost_curve", pair=r["pair"], x=float(r["n"]), k=None, measured=float(r["ratio"]),
                 predicted=None, c=float(r["c"])) for r in curve.to_dict("records")]
    for pair, g in ctrl.groupby("pair", sort=True):
        base = float(np.median(g.loc[g["k"] == 0, "tokens_per_s"]))
        for (k, a), ga in g[g["k"] != 0].groupby(["k", "alpha_set"], sort=True):
            rows.append(dict(panel="controlled", pair=pair, x=float(a), k=int(k),
                             measured=float(np.median(ga["tokens_per_s"])) / base,
                             predicted=float(ga["predicted_speedup"].iloc[0]), c=None))
    return rows


def batch_throughput(tables: dict) -> list[dict]:
    """Tokens/s over all rows per (pair, k, batch size), sorted; alpha_set: the controlled acceptance."""
    b = tables["batch"].sort_values(["pair", "k", "batch"], kind="stable")
    return [dict(pair=r["pair"], k=int(r["k"]), batch=int(r["batch"]), tokens_per_s=float(r["tokens_per_s_total"]),
                 alpha_set=float(r["alpha_set"])) for r in b.to_dict("records")]


def pair_speeds(tables: dict) -> list[dict]:
    """Trained pairs (embedded family, a named pair): median end-to-end tokens/s and median alpha per
    (pair, temperature, k)."""
    rows = []
    for source in (s for s in PAIR_SOURCES if s in tables):
        for (pair, temp, k), g in tables[source].groupby(["pair", "temperature", "k"], sort=True):
            rows.append(dict(source=source, pair=pair, temperature=float(temp), k=int(k),
                             tokens_per_s=float(np.median(g["tokens_per_s_total"])),
                             alpha_mle=float(g["alpha_mle"].median()), runs=len(g)))  # NaN skipped; all NaN: NaN
    return rows
