"""The frame every chapter (notebook) runs in: its parameters, its results folder, recompute or render.

A chapter opens with ONE parameters cell of literals (papermill injects overrides after it), then

    ch = Chapter(globals())          # collects the UPPERCASE literals defined so far
    P = ch.P                         # the effective parameters (SMOKE sizes applied)

Parameters.  Every UPPERCASE name bound to a literal (number, string, bool, None, or a list / tuple /
dict of them) when the frame is built is a parameter; they are recorded in every table's provenance,
so nothing is listed by hand.  ``SMOKE_SIZES`` (a dict in the parameters cell) names the values
that SMOKE replaces: with ``SMOKE = True``, ``P.N = SMOKE_SIZES["N"]``; the notebook never reassigns.

Recompute or render.  ``RECOMPUTE = True`` computes each table (``ch.table(name, compute)`` calls
``compute()`` and writes its rows with provenance, `specdec.io.results.write_table`) and
records the parameters in ``chapter.json``; ``RECOMPUTE = False`` (the default, and what `make book`
uses) calls nothing and reads the committed tables, and ``P`` is then the parameters of the run that
made them, so prose glued from ``P`` always describes the data shown.  Either way the chapter then
reads its tables back (typed DataFrames) and draws and glues from them: both modes render the same.

Paths are resolved from the repository root (`specdec.io.paths.resolve`), so a chapter run by
hand from ``notebooks/`` writes and reads the same folders as `make reproduce`.

Example:
    ch = Chapter({"RESULTS_DIR": "data/results/03_cost_model", "RECOMPUTE": False, "C": 0.1})
    ch.P.C -> 0.1 from the committed run;  ch.table("break_even_alpha") -> DataFrame
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from specdec.io.paths import RESULTS_DIR as RESULTS_ROOT
from specdec.io.paths import resolve
from specdec.io.results import atomic_write, provenance, read_table, save_figure, write_table

__all__ = ["Chapter", "Params", "collect_parameters", "as_text"]

CHAPTER_FILE = "chapter.json"
VALUES_FILE = "values.json"
RUN_FILE = "run.json"  # written by notebooks/run.py after a recompute: wall time, hardware, commit
FORMAT_VERSION = 1


def _literal(v) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_literal(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _literal(x) for k, x in v.items())
    return False


def collect_parameters(ns: dict) -> dict:
    """The UPPERCASE literal names of a namespace (a notebook's globals), in definition order."""
    return {k: v for k, v in ns.items() if k.isupper() and not k.startswith("_") and _literal(v)}


class Params:
    """Read-only attribute access to a chapter's parameters: ``P.K``; ``P.as_dict()``."""

    def __init__(self, values: dict):
        object.__setattr__(self, "_v", dict(values))

    def __getattr__(self, name):
        try:
            return self._v[name]
        except KeyError:
            raise AttributeError(f"no parameter {name!r}; the chapter has {sorted(self._v)}") from None

    def __setattr__(self, name, value):
        raise AttributeError("parameters are read-only: set them in the parameters cell")

    def as_dict(self) -> dict:
        return dict(self._v)


def as_text(v) -> str:
    """A parameter or value as prose: lists joined by commas, None as 'none', floats as written."""
    if isinstance(v, (list, tuple)):
        return ", ".join(as_text(x) for x in v)
    if v is None:
        return "none"
    return str(v)


class Chapter:
    """A chapter's parameters, results folder and mode (module docstring)."""

    def __init__(self, ns: dict):
        declared = collect_parameters(ns)
        if "RESULTS_DIR" not in declared:
            raise ValueError("a chapter's parameters cell must set RESULTS_DIR")
        self.recompute = bool(declared.get("RECOMPUTE", False))
        self.dir = resolve(declared["RESULTS_DIR"])
        self.name = self.dir.name
        self.models: dict = {}
        self._values: dict = {}
        if self.recompute:
            smoke_sizes = declared.pop("SMOKE_SIZES", {}) or {}
            unknown = set(smoke_sizes) - set(declared)
            if unknown:
                raise ValueError(f"SMOKE_SIZES names {sorted(unknown)}, which are not parameters of this chapter")
            if declared.get("SMOKE"):
                declared.update(smoke_sizes)
            self.P = Params(declared)
            self._write_chapter_file()
        else:
            self.P = Params(self._committed()["parameters"])

    # -- files ----------------------------------------------------------------------------------
    def _committed(self) -> dict:
        path = self.dir / CHAPTER_FILE
        if not path.exists():
            raise FileNotFoundError(f"no committed results for {self.name} in {self.dir}: run the chapter with "
                                    "RECOMPUTE=True (`make reproduce`) first")
        meta = json.loads(path.read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: format_version {meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        self.models = meta.get("models_sha256", {})
        return meta

    def _write_chapter_file(self) -> None:
        meta = {"format_version": FORMAT_VERSION, "chapter": self.name, "parameters": self.P.as_dict(),
                "models_sha256": self.models, "provenance": self.provenance()}
        atomic_write(self.dir / CHAPTER_FILE, lambda f: json.dump(meta, f, indent=2, default=str))

    def provenance(self) -> dict:
        """What produced the chapter's tables: its parameters, the models' sha256, and the setup values
        recorded so far with `values` (e.g. the prompts' checksum, the draft used)."""
        p = self.P.as_dict()
        return {**provenance(p, seed=p.get("SEED"), models=self.models), "values": dict(self._values)}

    def use_models(self, sha256: dict) -> None:
        """Record the sha256 of the model files this chapter's results depend on."""
        self.models.update(sha256)
        if self.recompute:
            self._write_chapter_file()

    # -- tables, values, figures -----------------------------------------------------------------
    def table(self, name: str, compute=None, kind: str = "exact", **meta):
        """The chapter's table ``name`` as a DataFrame; computed by ``compute()`` (rows: a list of
        dicts or a DataFrame) and written first when recomputing.  kind: exact / sampled / timing."""
        path = self.dir / f"{name}.csv"
        if self.recompute:
            if compute is None:
                raise ValueError(f"table {name!r}: nothing to compute it with")
            write_table(compute(), path, self.provenance(), kind=kind, **meta)
        return read_table(path)

    def values(self, name: str, compute=None) -> dict:
        """Scalars that no table holds (``compute() -> dict``), stored in values.json under ``name``."""
        path = self.dir / VALUES_FILE
        if self.recompute:
            if compute is None:
                raise ValueError(f"values {name!r}: nothing to compute them with")
            self._values[name] = dict(compute())
            blob = {"format_version": FORMAT_VERSION, "values": self._values, "provenance": self.provenance()}
            atomic_write(path, lambda f: json.dump(blob, f, indent=2, default=str))
            return dict(self._values[name])
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run the chapter with RECOMPUTE=True first")
        stored = json.loads(path.read_text())["values"]
        if name not in stored:
            raise KeyError(f"{path} holds no values {name!r} (it has {sorted(stored)})")
        return stored[name]

    def figure(self, fig, name: str, caption: str | None = None, data: str | None = None):
        """Glue ``fig`` under ``fig_<name>`` for a numbered figure in the page; when recomputing also
        save it as ``<results>/<name>.png``.  The chapter places it with a MyST directive whose
        caption states the finding and links the data file behind it (a test checks both)::

            ```{glue:figure} fig_<name>
            :name: fig-<name>

            What the figure shows. {download}`Data (CSV) <../data/results/NN_chapter/<table>.csv>`
            ```

        A figure drawn only when its data exist (chapter 07) is placed from the code instead:
        ``caption`` (computed from the data) and ``data`` (the CSV's path from the repository root)
        return that directive as MyST Markdown to display.

        A series that draws nothing (e.g. hollow markers without an edge colour) is an error, not a
        silent gap in a figure."""
        import matplotlib.pyplot as plt
        from myst_nb import glue

        from specdec.report.plotting.style import visible_series

        hidden = [(kind, label) for kind, label, seen in visible_series(fig) if not seen]
        if hidden:
            plt.close(fig)
            raise ValueError(f"figure {name!r} has series that draw nothing (give them a colour): {hidden}")
        if self.recompute:
            save_figure(fig, self.dir / name)
        glue(f"fig_{name}", fig, display=False)
        plt.close(fig)
        if caption is None:
            return None
        from IPython.display import Markdown

        if not data:
            raise ValueError(f"figure {name!r}: a caption placed from the code names its data file")
        return Markdown(f"```{{glue:figure}} fig_{name}\n:name: fig-{name.replace('_', '-')}\n\n{caption}\n"
                        f"{{download}}`Data (CSV) <../{data}>`\n```\n")

    # -- glue and the closing box ------------------------------------------------------------------
    def glue(self, **values) -> None:
        """myst-nb glue for each value (display=False).  A string is glued as its repr, which
        {glue:text} turns back into the string (myst-nb literal-evaluates it); numpy scalars as
        Python numbers; NaN as "n/a"."""
        from myst_nb import glue

        for k, v in values.items():
            if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy scalars glue as their value
                v = v.item()
            if isinstance(v, float) and math.isnan(v):
                v = "n/a"
            glue(k, v, display=False)

    def glue_parameters(self) -> None:
        """Glue every parameter under its own UPPERCASE name (lists as comma-joined text), and the
        machine the shown results were computed on as ``measured_on`` (`machine_text`)."""
        self.glue(**{k: (as_text(v) if isinstance(v, (list, tuple, type(None))) else v)
                     for k, v in self.P.as_dict().items() if not isinstance(v, dict)})
        self.glue(measured_on=self.machine_text())

    def machine_text(self) -> str:
        """Hardware and software of the run whose results the page shows, from its provenance.

        Example: "Intel(R) Xeon(R) Processor, 2 cores (x86_64), 1 torch thread; Python 3.11.7,
        torch 2.13.0+cpu, transformers 5.24.0; commit <its short hash>"
        """
        prov = self.provenance() if self.recompute else self._committed().get("provenance", {})
        hw, pk = prov.get("hardware", {}), prov.get("packages", {})
        threads = hw.get("torch_threads")
        commit = str(prov.get("git_commit", "unknown"))
        commit = commit[:12] + (" with uncommitted changes" if commit.endswith("+dirty") else "")
        return (f"{hw.get('cpu') or 'an unnamed CPU'}, {hw.get('cpu_count', '?')} cores ({hw.get('machine', '?')}), "
                f"{threads} torch thread{'' if threads == 1 else 's'}; Python {prov.get('python', '?')}, "
                f"torch {pk.get('torch', '?')}, transformers {pk.get('transformers', '?')}; commit {commit}")

    def run_record(self) -> dict:
        """What notebooks/run.py recorded about the last recompute of this chapter ({} if none)."""
        path = self.dir / RUN_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def glue_run_record(self) -> None:
        """Glue the recorded recompute of this chapter for the page's closing box (whose sentence is
        the notebook's): ``run_wall`` ("812 s"), ``run_cpu`` ("Some CPU, 2 cores"), ``run_date``
        (YYYY-MM-DD) and ``run_commit`` (12 hex digits, "+dirty" kept when the tree had uncommitted
        changes); each reads "not recorded" until notebooks/run.py has recorded a recompute."""
        rec = self.run_record()
        if not rec:
            self.glue(**dict.fromkeys(("run_wall", "run_cpu", "run_date", "run_commit"), "not recorded"))
            return
        hw = rec.get("hardware", {})
        commit = str(rec.get("commit", ""))
        self.glue(run_wall=f"{rec['wall_s']:.0f} s", run_date=rec.get("date", "")[:10] or "not recorded",
                  run_cpu=f"{hw.get('cpu', 'an unknown CPU')}, {hw.get('cpu_count', '?')} cores",
                  run_commit=commit.removesuffix("+dirty")[:12] + ("+dirty" if commit.endswith("+dirty") else ""))


def chapter_dirs(root: Path = RESULTS_ROOT) -> list[Path]:
    """The results folders of the chapters (those holding a chapter.json), in order."""
    return sorted(p.parent for p in Path(root).glob(f"*/{CHAPTER_FILE}"))
