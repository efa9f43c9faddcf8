"""Execute the numbered notebooks in order with papermill, resuming where a run stopped.

    python notebooks/run.py --out build/notebooks [--only 03] [--force] [NAME=VALUE ...]

Each notebook `notebooks/NN_*.ipynb` is executed into `<out>/NN_*.ipynb` with cwd = repository
root.  NAME=VALUE pairs set parameters; each notebook receives only the ones its `parameters`
cell declares (values are parsed as Python literals where possible, else kept as strings; an
empty value leaves the notebook's default).  `make reproduce` passes RECOMPUTE=True (compute and
write the chapter's tables), `make book` RECOMPUTE=False (render the committed tables).  A recompute
of every chapter (no ``--only``) leaves out the chapters of `specdec.io.paths.OWN_TARGETS`: each is
recomputed by a make target of its own (``--only`` names it), and rendered from its committed tables.

A notebook is skipped when its executed copy carries the key of the current run: sha256 over the
notebook, every file of the `specdec` library, the model manifest, the corpus, the GPU results,
the parameters, and -- when it renders instead of recomputing -- its own results folder.  A changed
notebook, library, parameter or committed table re-runs it; a deleted or half-written output
re-runs it (outputs are written to a temp file, then renamed).

Renders (RECOMPUTE=False, as `make book`) share one kernel (`SharedKernel`): its start and the
library's imports are paid once, and each chapter starts from an emptied namespace.  A recompute
runs in a kernel of its own.

After a successful recompute the runner records the chapter's wall time, hardware and commit in
`<results>/run.json` (the "reproduce this chapter" box and the reproduction page read it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from specdec.io.paths import BUILD_DIR, OWN_TARGETS, resolve  # noqa: E402
from specdec.io.results import atomic_write, provenance  # noqa: E402

KEY_INPUTS = ("specdec", "data/models/SHA256SUMS", "data/corpus", "data/results/gpu",  # what notebooks read
              "data/results/bench")


def _digest_tree(h: "hashlib._Hash", path: Path) -> None:
    if path.is_file():
        h.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
        h.update(path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.name != "run.json":
                _digest_tree(h, p)


def defaults(notebook: Path) -> dict:
    """The parameters a notebook declares, with their default values."""
    import papermill

    out = {}
    for name, info in papermill.inspect_notebook(str(notebook)).items():
        try:
            out[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            out[name] = info["default"]
    return out


def declared_parameters(notebook: Path) -> set[str]:
    return set(defaults(notebook))


def run_key(notebook: Path, params: dict) -> str:
    """The hash an executed copy must carry to count as up to date."""
    h = hashlib.sha256()
    h.update(notebook.read_bytes())
    for rel in KEY_INPUTS:
        _digest_tree(h, ROOT / rel)
    effective = {**defaults(notebook), **params}
    if not effective.get("RECOMPUTE", False) and "RESULTS_DIR" in effective:
        _digest_tree(h, resolve(effective["RESULTS_DIR"]))  # rendering reads the committed tables
    if "RESULTS_ROOT" in effective:  # the reproduction chapter reads every other chapter's results
        own = resolve(effective.get("RESULTS_DIR", ""))
        for d in sorted(resolve(effective["RESULTS_ROOT"]).glob("*/")):
            if d != own:
                _digest_tree(h, d)
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()


def parse_assignments(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise SystemExit(f"parameter {pair!r} is not NAME=VALUE")
        if value == "":
            continue
        try:
            params[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[name] = value
    return params


def stored_key(executed: Path) -> str | None:
    if not executed.exists():
        return None
    try:
        meta = json.loads(executed.read_text())["metadata"]
    except (ValueError, KeyError):
        return None
    return meta.get("specdec", {}).get("run_key")


def _kernel_environment() -> None:
    """What every chapter's kernel inherits: no progress bars in the book."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no weight-loading bars in the book
    os.environ.setdefault("TQDM_DISABLE", "1")
    # tqdm.auto warns at import in a kernel without ipywidgets, printing a local path (the category
    # cannot be named here: -W/PYTHONWARNINGS import no third-party module, so match the message)
    os.environ.setdefault("PYTHONWARNINGS", "ignore:IProgress not found")


# Run first in a shared kernel before each chapter (and removed from its executed copy): what a
# fresh kernel would show the chapter -- an empty namespace, no open figure, pandas' default
# options, the repository as working directory.  Imported modules stay (that is the saving).
_FRESH = """%reset -f
def _fresh():
    import os, warnings
    import matplotlib.pyplot as plt
    import pandas as pd
    os.chdir({cwd!r})
    plt.close("all")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.reset_option("all")
_fresh()
del _fresh"""


class SharedKernel:
    """One Jupyter kernel that renders several chapters in turn (a context manager; the kernel is
    shut down on exit, whatever happened): its start and the library's imports are paid once instead
    of once per chapter.  Before each chapter `_FRESH` resets what a chapter can change; what it
    cannot (a process-wide peak memory, a warning shown once per process) a shared kernel carries
    over, so `make reproduce`'s recomputes each get a kernel of their own (the tests' SMOKE recomputes,
    whose numbers mean nothing, share one per worker).  Every cell has ``cell_timeout`` seconds
    (then it is interrupted); after any failure the kernel is restarted, so the next chapter starts
    in a fresh one."""

    def __init__(self, cwd: Path = ROOT, cell_timeout: int = 600):
        self.cwd, self.cell_timeout, self.km = cwd, cell_timeout, None

    def __enter__(self) -> "SharedKernel":
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        _kernel_environment()
        self.km = AsyncKernelManager(kernel_name="python3")
        run_sync(self.km.start_kernel)(cwd=str(self.cwd))
        return self

    def __exit__(self, *exc) -> None:
        from jupyter_core.utils import run_sync

        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            finally:
                self.km = None

    def run(self, nb) -> None:
        """Execute ``nb`` (a parameterized notebook node) in place; raises nbclient's
        CellExecutionError (with the failing cell's traceback) on an error."""
        import nbformat
        from jupyter_core.utils import run_sync
        from nbclient import NotebookClient

        if not run_sync(self.km.is_alive)():
            run_sync(self.km.restart_kernel)(now=True)
        nb.cells.insert(0, nbformat.v4.new_code_cell(_FRESH.format(cwd=str(self.cwd))))
        client = NotebookClient(nb, km=self.km, timeout=self.cell_timeout, kernel_name="python3",
                                interrupt_on_timeout=True, resources={"metadata": {"path": str(self.cwd)}})
        try:
            client.execute()
        except BaseException:
            run_sync(self.km.restart_kernel)(now=True)  # a stuck or broken state never reaches the next chapter
            raise
        finally:
            del nb.cells[0]
            if client.kc is not None:
                client.kc.stop_channels()


def execute(notebook: Path, out: Path, params: dict, key: str, cwd: Path = ROOT,
            kernel: SharedKernel | None = None) -> None:
    """Execute ``notebook`` with ``params`` into ``out`` (atomically), stamped with ``key``: by
    papermill in a kernel of its own, or in ``kernel`` (a `SharedKernel`, for renders)."""
    import nbformat
    import papermill

    tmp = out.with_name(f".partial.{out.name}")
    _kernel_environment()
    if kernel is not None and Path(cwd) != kernel.cwd:
        raise ValueError(f"a shared kernel runs in {kernel.cwd}, not in the cwd {cwd} asked for")
    if kernel is None:
        papermill.execute_notebook(
            str(notebook), str(tmp), parameters=params, kernel_name="python3", cwd=str(cwd),
            progress_bar=False, log_output=False, request_save_on_cell_execute=False,
        )
        nb = nbformat.read(tmp, as_version=4)
    else:
        from papermill.iorw import load_notebook_node
        from papermill.parameterize import parameterize_notebook

        nb = parameterize_notebook(load_notebook_node(str(notebook)), params, kernel_name="python3")
        kernel.run(nb)
    nb.metadata["specdec"] = {"run_key": key, "parameters": params}
    nbformat.write(nb, tmp)
    os.replace(tmp, out)


def record_run(notebook: Path, params: dict, wall_s: float) -> None:
    """Write <results>/run.json after a recompute (module docstring)."""
    effective = {**defaults(notebook), **params}
    if not effective.get("RECOMPUTE") or "RESULTS_DIR" not in effective:
        return
    prov = provenance(effective)
    rec = {"chapter": notebook.stem, "wall_s": round(wall_s, 1), "date": prov["timestamp"],
           "commit": prov["git_commit"], "hardware": prov["hardware"], "load_average": prov["load_average"],
           "smoke": bool(effective.get("SMOKE")), "parameters": params}
    atomic_write(resolve(effective["RESULTS_DIR"]) / "run.json", lambda f: json.dump(rec, f, indent=2))


def select(only: str, recompute: bool) -> tuple[list[Path], list[Path]]:
    """(the notebooks to run, in order; those left to their own make target): the notebooks whose
    name starts with ``only``; a recompute of them all (``only`` empty) leaves out `OWN_TARGETS`'
    chapters.  A prefix no notebook has is an error naming it."""
    notebooks = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if p.name.startswith(only))
    if not notebooks:
        raise SystemExit(f"no notebooks/NN_*.ipynb match {only!r}")
    left = [nb for nb in notebooks if recompute and not only and nb.stem in OWN_TARGETS]
    return [nb for nb in notebooks if nb not in left], left


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for the executed copies")
    ap.add_argument("--only", default="", help="run only notebooks whose name starts with this")
    ap.add_argument("--force", action="store_true", help="re-run even when up to date")
    ap.add_argument("assignments", nargs="*", metavar="NAME=VALUE")
    args = ap.parse_args(argv)

    given, smoke_root = parse_assignments(args.assignments), None
    if given.get("SMOKE") and given.get("RECOMPUTE") and "RESULTS_DIR" not in given:
        smoke_root = BUILD_DIR / "smoke-results"  # SMOKE sizes never overwrite the committed results
        print(f"SMOKE: results go to {smoke_root}, not data/results", flush=True)
    notebooks, left = select(args.only, bool(given.get("RECOMPUTE")))
    for nb in left:
        print(f"{nb.name}: recomputed by `{OWN_TARGETS[nb.stem]}`, not here (rendered from its committed tables)",
              flush=True)
    out_dir = resolve(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        # renders share one kernel, started only when a chapter needs it; a recompute gets its own
        kernel = None if given.get("RECOMPUTE") else _Lazy(stack)
        return _run_all(notebooks, out_dir, given, args.force, kernel, smoke_root)


class _Lazy:
    """A `SharedKernel` entered on ``stack`` the first time a chapter asks for it."""

    def __init__(self, stack: contextlib.ExitStack):
        self.stack, self.kernel = stack, None

    def get(self) -> SharedKernel:
        if self.kernel is None:
            self.kernel = self.stack.enter_context(SharedKernel())
        return self.kernel


def _run_all(notebooks, out_dir: Path, given: dict, force: bool, kernel: "_Lazy | None", smoke_root) -> int:
    for i, nb in enumerate(notebooks, 1):
        params = {k: v for k, v in given.items() if k in declared_parameters(nb)}
        if given.get("SMOKE") and given.get("RECOMPUTE") and "RESULTS_DIR" not in given:
            params["RESULTS_DIR"] = str(smoke_root / nb.stem)
            if "RESULTS_ROOT" in declared_parameters(nb):
                params["RESULTS_ROOT"] = str(smoke_root)
        out = out_dir / nb.name
        key = run_key(nb, params)
        tag = f"[{i}/{len(notebooks)}] {nb.name}"
        if not force and stored_key(out) == key:
            print(f"{tag}: up to date, skipped", flush=True)
            continue
        print(f"{tag}: running with {params or 'its defaults'} ...", flush=True)
        t0 = time.perf_counter()
        try:
            execute(nb, out, params, key, kernel=kernel.get() if kernel is not None else None)
        except Exception as exc:  # papermill raises PapermillExecutionError with the cell's traceback
            print(f"{tag}: FAILED after {time.perf_counter() - t0:.0f} s\n{exc}", file=sys.stderr, flush=True)
            return 1
        wall = time.perf_counter() - t0
        record_run(nb, params, wall)
        print(f"{tag}: done in {wall:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
