"""Chapter 07's view of the GPU run: read the tables `specdec.cli.gpu_bench` wrote, decide
whether they are a GPU measurement, and reduce them to the chapter's small tables.

A folder of GPU tables (``run_summary``, ``cost_curve``, ``controlled``, ``batch``, ``embedded``,
``hub``: whichever exist) is a GPU measurement only when its provenance names a CUDA device and the
run was not a smoke run; anything else (e.g. ``gpu_bench --device cpu --smoke``, which checks the
code path on tiny configs) is labelled "NOT from a GPU", and an empty or missing folder says so.
Nothing is estimated or simulated in place of a missing table.

Example:
    tables = read_gpu_tables("data/results/gpu")          # {} when there are none
    status = status_row(tables, "data/results/gpu")       # status["real_gpu"], status["status"] (a sentence)
"""

from __future__ import annotations

import numpy as np

from specdec.io.paths import resolve
from specdec.io.results import read_table, records

__all__ = ["TABLES", "read_gpu_tables", "is_gpu_run", "status_row", "provenance_rows", "sections",
           "cost_and_controlled", "batch_throughput", "pair_speeds", "cost_caption", "throughput_caption"]

TABLES = ("run_summary", "cost_curve", "controlled", "batch", "embedded", "hub")  # what gpu_bench writes
PAIR_SOURCES = ("embedded", "hub")  # trained pairs: real acceptance


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


def status_row(tables: dict, folder: str, cuda_here: bool | None = None) -> dict:
    """One row: whether the recomputing machine had CUDA, which GPU tables exist, whether they are a
    GPU measurement, the GPU environment they name, a label for figures and the status sentence."""
    if cuda_here is None:
        import torch

        cuda_here = torch.cuda.is_available()
    prov, env, real = _meta(tables).get("provenance", {}), _environment(tables), is_gpu_run(tables)
    here = ("This chapter was recomputed on a machine with a CUDA device" if cuda_here
            else "This chapter was recomputed on a machine without a CUDA device")
    if not tables:
        status = (f"{here}; the GPU measurement did not run here, and no GPU results are committed under "
                  f"{folder}/. There is nothing to show: no GPU numbers appear in this report.")
        label = "no GPU tables"
    elif not real:
        status = (f"{here}. The tables under {folder}/ come from a code-path check (device "
                  f"{env.get('device', 'unknown')!r}, smoke run), NOT from a GPU: the figures below only exercise "
                  "the chapter.")
        label = f"device {env.get('device', 'unknown')}, smoke run: NOT from a GPU"
    else:
        status = (f"{here}; the GPU measurement did not run as part of it. Shown: the committed results measured on "
                  f"{env.get('gpu')} (driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}, torch "
                  f"{env.get('torch')}, transformers {env.get('transformers')}) on {env.get('date_utc')}, commit "
                  f"{prov.get('git_commit')}.")
        label = f"{env.get('gpu')}, {env.get('date_utc', '')[:10]}"
    return {"cuda_here": bool(cuda_here), "gpu_tables": " ".join(sorted(tables)) or "none", "real_gpu": real,
            "gpu": str(env.get("gpu", "")), "driver": str(env.get("driver", "")),
            "date_utc": str(env.get("date_utc", "")), "device": str(env.get("device", "")), "label": label,
            "status": status}


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
    """The figure's table: panel "cost_curve" (x = n, measured = T(n)/T(1), per pair) and panel
    "controlled" (x = set alpha, measured = median tokens/s / the pair's median baseline tokens/s,
    predicted = the extended prediction beside it), per pair and k; c: the pair's draft cost."""
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
    for source in PAIR_SOURCES:
        if source not in tables:
            continue
        for (pair, temp, k), g in tables[source].groupby(["pair", "temperature", "k"], sort=True):
            a = g["alpha_mle"].dropna()
            rows.append(dict(source=source, pair=pair, temperature=float(temp), k=int(k),
                             tokens_per_s=float(np.median(g["tokens_per_s_total"])),
                             alpha_mle=float(np.median(a)) if len(a) else float("nan"), runs=len(g)))
    return rows


def cost_caption(rows, label: str) -> str:
    """The finding of the cost/controlled figure (rows: `cost_and_controlled`): per pair T(2)/T(1),
    and the best controlled speedup with where it was measured.

    Example: -> "On H200: verifying 2 tokens costs 1.02 times one for llama; best controlled speedup
    2.31x (llama, k = 4, alpha 0.9; extended prediction 2.40x)."
    """
    rows = records(rows)
    ratios = "; ".join(f"verifying 2 tokens costs {r['measured']:.2f} times one for {r['pair']}"
                       for r in rows if r["panel"] == "cost_curve" and r["x"] == 2.0)
    ctrl = [r for r in rows if r["panel"] == "controlled"]
    text = f"On {label}: {ratios or 'no 2-token verification measured'}"
    if ctrl:
        b = max(ctrl, key=lambda r: r["measured"])
        text += (f"; best controlled speedup {b['measured']:.2f}x ({b['pair']}, k = {b['k']}, alpha {b['x']:g}; "
                 f"extended prediction {b['predicted']:.2f}x)")
    return text + "."


def throughput_caption(rows, label: str) -> str:
    """The finding of the batch figure (rows: `batch_throughput`): per pair, plain decoding's and the
    best speculative configuration's tokens/s at the largest batch measured.

    Example: -> "On H200, at batch 64: llama plain 5120 tokens/s, best speculative 6100 (k = 2)."
    """
    rows = records(rows)
    if not rows:
        return f"On {label}: no batch runs."
    top = max(r["batch"] for r in rows)
    parts = []
    for pair in sorted({r["pair"] for r in rows}):
        at = [r for r in rows if r["pair"] == pair and r["batch"] == top]
        plain = [r["tokens_per_s"] for r in at if r["k"] == 0]
        spec = [r for r in at if r["k"] != 0]
        best = max(spec, key=lambda r: r["tokens_per_s"]) if spec else None
        parts.append(f"{pair} plain {plain[0]:.0f} tokens/s" if plain else f"{pair} plain not measured")
        if best:
            parts[-1] += f", best speculative {best['tokens_per_s']:.0f} (k = {best['k']})"
    return f"On {label}, at batch {top}: " + "; ".join(parts) + "."
