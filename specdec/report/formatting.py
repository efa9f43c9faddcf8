"""How numbers read on a page: p-values that underflow, exact fractions, and tables of both.

A p-value that underflows float64 is not zero: it is below the smallest positive double, so it is
printed as "< 1e-300" rather than "0".  An exact rational (e.g. the 10/9 accepted drafts of a worked
example) is printed as a fraction, not as "1.111111".

A table whose cells hold sentences reads better as a Markdown table (cells wrap) than as a DataFrame
(pandas cuts long cells with "..."): `markdown_table`.  Every table a chapter shows goes through
`show` (`table_text` is its pure core): chosen columns under human headers (the shared `GLOSSARY`,
or the chapter's own), no index, no raw snake_case header, and a table too wide or too long to read
replaced by a link to its CSV instead of being cut.

Example: p_value_text(0.0) -> "< 1e-300";  p_value_text(0.0123) -> "0.012";  p_value_text(3e-12) -> "3e-12"
         fraction_text(10 / 9) -> "10/9";  fraction_text(2.0) -> "2"
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["estimate_cell", "p_value_text", "fraction_text", "with_p_values", "markdown_table", "config_text",
           "config_label", "temperature_text", "GLOSSARY", "MAX_COLUMNS", "MAX_ROWS", "header", "table_text", "show",
           "counted", "number_list", "interval_column", "detect_text", "FORMATS", "P_VALUES"]

FLOOR = 1e-300  # below this a double p-value has lost all meaning (the smallest normal is 2.2e-308)


def config_text(r) -> str:
    """A measured configuration (a row with config, batch, output_len, temperature) in words.
    Example: config_text({"config": "k=2", "batch": 1, "output_len": 256, "temperature": 0.0})
      -> "k=2, batch 1, 256 tokens, greedy" """
    temp = temperature_text(r["temperature"], "temperature ")
    return f"{r['config']}, batch {r['batch']}, {r['output_len']} tokens, {temp}"


def config_label(c) -> str:
    """A sampling setting (a `specdec.core.sampling.SamplingConfig`) as text (tau: temperature).
    Example: config_label(SamplingConfig(1.2, 3, 0.8)) -> "τ=1.2, top-k 3, top-p 0.8"."""
    return (f"τ={c.temperature:g}" + (f", top-k {c.top_k}" if c.top_k else "")
            + (f", top-p {c.top_p:g}" if c.top_p else ""))


def temperature_text(t: float, label: str = "temperature ") -> str:
    """A sampling temperature in words, "greedy" at 0 (never "T", the book's name for a forward's
    time).  Example: temperature_text(0.0) -> "greedy"; temperature_text(1.0) -> "temperature 1" """
    return "greedy" if t == 0 else f"{label}{t:g}"


def counted(n, noun: str, plural: str | None = None) -> str:
    """A count with its noun in the right number, never "thread(s)".  Example: counted(1, "thread")
    -> "1 thread"; counted(2, "thread") -> "2 threads"; counted(3, "re-run") -> "3 re-runs";
    counted(0, "query", "queries") -> "0 queries" """
    n = int(n)
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def number_list(values) -> str:
    """Numbers as a reader reads a list of them, comma-joined, integers without a decimal point.
    Example: number_list([1.0, 4.0, 0.5]) -> "1, 4, 0.5" """
    return ", ".join(f"{float(v):g}" for v in values)


def detect_text(n) -> str:
    """A sample size that detects a difference, as a reader reads it: 0 (no size does: the laws are
    equal) is "never", below ten million with thousands separators, above in powers of ten.
    Example: detect_text(0) -> "never"; detect_text(1279) -> "1,279"; detect_text(2.6e16) -> "2.6e+16" """
    n = float(n)
    if n != n:
        return ""
    return "never" if n == 0 else f"{int(n):,}" if n < 1e7 else f"{n:.1e}"


def interval_column(frame, lo: str, hi: str, digits: int = 3) -> list[str]:
    """Columns ``lo`` and ``hi`` of DataFrame ``frame`` as one column of interval texts, so that a
    table shows an estimate's interval in one column, not two.  A missing bound reads "n/a"; a row
    with neither bound (nothing was measured) is blank.
    Example: interval_column(pd.DataFrame({"lo": [0.9], "hi": [1.1]}), "lo", "hi") -> ["[0.900, 1.100]"]"""
    def missing(v) -> bool:
        return v is None or v != v

    def bound(v) -> str:
        return "n/a" if missing(v) else f"{float(v):.{digits}f}"

    return ["" if missing(a) and missing(b) else f"[{bound(a)}, {bound(b)}]" for a, b in zip(frame[lo], frame[hi])]


def estimate_cell(mid, lo, hi, digits: int = 2, signed: bool = False) -> str:
    """An estimate with its interval as one table cell; blank when nothing was measured.
    Example: estimate_cell(2, 1, 3, digits=0) -> "2 [1, 3]"; with signed, "+2 [+1, +3]"."""
    if mid != mid:
        return ""
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{f.format(mid)} [{f.format(lo)}, {f.format(hi)}]"


def p_value_text(p: float, digits: int = 2) -> str:
    """A p-value as text: "< 1e-300" at or below FLOOR, scientific below 0.001, else ``digits`` significant."""
    p = float(p)
    if math.isnan(p) or not 0.0 <= p <= 1.0:
        raise ValueError(f"a p-value lies in [0, 1], got {p}")
    if p <= FLOOR:
        return "< 1e-300"
    if p < 1e-3:
        return f"{p:.{max(digits - 1, 0)}e}".replace("e-0", "e-")
    return f"{p:.{digits}g}"


def fraction_text(x: float, max_denominator: int = 1000, tol: float = 1e-9) -> str:
    """``x`` as the fraction a/b (b <= max_denominator) it equals to ``tol``; a ValueError if none does."""
    frac = Fraction(float(x)).limit_denominator(max_denominator)
    if abs(float(frac) - float(x)) > tol * max(1.0, abs(float(x))):
        raise ValueError(f"{x!r} is no fraction with denominator <= {max_denominator}")
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


def with_p_values(df, columns=("p_value",)):
    """A copy of DataFrame ``df`` for display with each named p-value column as text (p_value_text;
    a missing p-value, NaN, reads "n/a": no test was run)."""
    out = df.copy()
    for col in columns:
        if col in out:
            out[col] = ["n/a" if v != v else p_value_text(v) for v in out[col]]
    return out


def markdown_table(df, digits: int = 3) -> str:
    """A pipe table of DataFrame ``df`` (index not shown): floats to ``digits`` significant digits,
    integral floats as integers, NaN and None as blank, "|" in text escaped.

    Booleans read "yes" and "no".

    Example: markdown_table(pd.DataFrame({"a": [1.0, float("nan")], "b": ["x|y", "z"]}))
             -> "| a | b |\n|---|---|\n| 1 | x\\|y |\n|  | z |"
    """
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, bool) or type(v).__name__ == "bool_":  # numpy's bool too: a reader reads yes/no
            return "yes" if v else "no"
        if isinstance(v, float):
            return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.{digits}g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


# -- tables a reader can read ----------------------------------------------------------------------
MAX_COLUMNS = 7   # wider than this a table no longer fits a page's text column
MAX_ROWS = 40     # longer than this a reader wants the CSV, not a scroll

# The headers every chapter shares: one name for one quantity on every page.
GLOSSARY = {
    "k": "$k$", "c": "$c$", "alpha": r"$\alpha$", "beta": r"$\beta$", "n": "$n$", "p": "$p$", "q": "$q$",
    "alpha_mle": r"$\alpha$ (fitted)", "alpha_lo": r"$\alpha$ low", "alpha_hi": r"$\alpha$ high",
    "beta_mean": r"mean $\beta$", "beta_real_text": r"$\beta$ on real text", "mean_beta": r"mean $\beta$",
    "temperature": "temperature", "top_p": "top-$p$", "batch": "batch", "output_len": "tokens per request",
    "draft": "draft", "target": "target", "model": "model", "config": "configuration", "method": "method",
    "algorithm": "algorithm", "family": "family", "policy": "policy", "rule": "rule", "path": "precision path",
    "case": "case", "variant": "variant", "bug": "bug", "pair": "pair", "prompt": "prompt", "prompts": "prompts",
    "position": "position", "positions": "positions", "dtype": "dtype", "mode": "mode",
    "steps": "steps", "tokens": "tokens", "samples": "samples", "runs": "runs", "reruns": "re-runs",
    "pairs": "pairs", "rate": "requests/s", "requests": "requests", "verdict": "verdict", "words": "verdict",
    "verdict_sim": "verdict (simultaneous)", "words_sim": "verdict (simultaneous)",
    "speedup": "speedup", "speedup_median": "speedup (median)", "speedup_lo": "speedup low",
    "speedup_hi": "speedup high", "speedup_lo_sim": "speedup low (simultaneous)",
    "speedup_hi_sim": "speedup high (simultaneous)", "half_width": "interval half-width",
    "lo": "low", "hi": "high", "lo_sim": "low (simultaneous)", "hi_sim": "high (simultaneous)",
    "median": "median", "ratio": "ratio", "gain": "gain",
    "tokens_per_step": "tokens per step", "tokens_per_s": "tokens/s", "mean_accepted": "mean accepted drafts",
    "expected_tokens": "expected tokens per step", "expected_accepted": "expected accepted drafts",
    "predicted": "predicted", "rule_predicted": "predicted by the rule", "chosen": "chosen",
    "k_best": "best $k$", "k_chosen": "chosen $k$", "k_max": "largest $k$", "k_mean": "mean $k$",
    "wall_s": "wall time (s)", "median_s": "median (s)", "ttft_ms": "first token (ms)",
    "lat_p95_ms": "latency p95 (ms)", "cpu_share": "CPU share", "load_1m": "load (1 min)",
    "p_value": "p-value", "chi2": "$X^2$", "df": "degrees of freedom", "tv": "TV", "kl": "KL",
    "tv_low": "TV low", "tv_high": "TV high", "exact_tv": "exact TV", "max_abs_error": "largest error",
    "detect_N": "samples to detect", "lossless": "lossless", "identical": "identical",
    "nll": "NLL", "distinct_2": "distinct 2-grams", "params": "parameters",
    "val_ppl": "validation perplexity", "test_ppl": "test perplexity", "tokens_seen": "training tokens",
    "architecture": "architecture", "status": "status", "chapter": "chapter", "commit": "commit", "date": "date",
    "speedup_ci": "speedup, 95% interval", "nll_diff_ci": "NLL change, 95% interval",
    "distinct_2_diff_ci": "distinct 2-grams change, 95% interval",
    # exactness and precision (chapters 01, 02, 08)
    "detect_samples": "samples to detect", "detect_same_precision": "samples to detect",
    "tv_exact": "TV from the exact target", "tv_same_precision": "TV from the same-precision target",
    "tv_same": "TV from the same-precision target", "row_total_deviation": "largest row-sum error",
    "row_sum_dev_max": "largest row-sum error", "tv_exact_median": "TV from exact (median)",
    "tv_exact_max": "TV from exact (max)", "tv_same_median": "TV from same precision (median)",
    "tv_same_max": "TV from same precision (max)", "p_vs_computed_law": "p-value against its computed law",
    "p_vs_same_precision": "p-value against the same-precision target", "tv_median": "TV (median)",
    "tv_max": "TV (max)", "accept_first": "first draft kept", "drafts": "drafts $n$",
    "rrs": "recursive rejection", "optimal": "optimal (subset formula)", "optimal_lp": "optimal (linear program)",
    "single_draft": "one draft", "vocabulary": "vocabulary", "distinct_2_diff": "distinct 2-grams change",
    "nll_diff": "NLL change", "context": "context",
}


P_VALUES = ("p_value", "min_p", "p_vs_computed_law", "p_vs_same_precision")  # columns shown as p-value text


def header(name, columns: dict | None = None) -> str:
    """The header a column ``name`` shows: ``columns[name]`` if given, else `GLOSSARY`'s, else a
    single lowercase word as itself.  A snake_case name with no header is an error: a raw column
    name is no header for a reader.  Example: header("tokens_per_step") -> "tokens per step";
    header("draft") -> "draft"; header("x_y") -> ValueError."""
    if columns and columns.get(name) is not None:
        return str(columns[name])
    if name in GLOSSARY:
        return GLOSSARY[name]
    if "_" in str(name):
        raise ValueError(f"column {name!r} has no human header: pass columns={{{name!r}: '...'}} "
                         "or add it to formatting.GLOSSARY")
    return str(name)


def _csv_link(csv, rows: int, cols: int, shown: bool) -> str:
    from pathlib import Path

    from specdec.io.paths import ROOT

    path = Path(csv)
    if path.is_absolute():
        try:
            path = path.relative_to(ROOT)
        except ValueError:  # a run written elsewhere (SMOKE, tests): the page links the committed table's place
            path = Path("data/results") / path.parent.name / path.name
    if shown:  # under the table, as under a figure
        return f"{{download}}`Data (CSV) <../{path.as_posix()}>`"
    size = f"{rows} row{'' if rows == 1 else 's'}, {cols} column{'' if cols == 1 else 's'}"
    return f"{{download}}`Full table: {path.name} ({size}) <../{path.as_posix()}>`"


def table_text(frame, columns=None, *, csv=None, digits: int = 3, formats: dict | None = None,
               p_values=P_VALUES, max_columns: int = MAX_COLUMNS, max_rows: int = MAX_ROWS) -> str:
    """The MyST Markdown of a table a reader can read, from DataFrame ``frame`` (not changed).

    - ``columns``: which columns, in order: a list (headers from `GLOSSARY`) or a dict raw -> header
      (None: the glossary's); by default every column.  A named index (e.g. a groupby's) becomes
      columns first; an unnamed one is dropped, never shown.
    - numbers to ``digits`` significant digits (`markdown_table`), the ``p_values`` columns as text
      (`p_value_text`), detecting sample sizes as `detect_text` (`FORMATS`), and ``formats``: raw
      column -> format string or callable for columns that need their own (it overrides `FORMATS`).
    - ``csv``: the committed table's path from the repository root (or absolute inside it): linked
      under the table; if the selection is wider than ``max_columns`` or longer than ``max_rows``
      only the link is shown (a reader gets the whole table, not a cut one).  Without ``csv`` such
      a table is an error.

    Example: table_text(pd.DataFrame({"k": [1, 2], "speedup": [1.23456, 0.9]}))
             -> "| $k$ | speedup |\n|---|---|\n| 1 | 1.23 |\n| 2 | 0.9 |"
    """
    df = frame.reset_index() if any(n is not None for n in frame.index.names) else frame
    if columns is None:
        names, given = list(df.columns), {}
    elif isinstance(columns, dict):
        names, given = list(columns), dict(columns)
    else:
        names, given = list(columns), {}
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ValueError(f"no column {missing} in the table (it has {list(df.columns)})")
    heads = [header(c, given) for c in names]
    rows, cols = len(df), len(names)
    if cols > max_columns or rows > max_rows:
        if csv is None:
            raise ValueError(f"a table of {rows} rows x {cols} columns is too large to read (at most {max_rows} x "
                             f"{max_columns}): choose columns or rows, or pass csv= to link the full table")
        return _csv_link(csv, len(frame), len(frame.columns), shown=False)
    out = with_p_values(df[names], [c for c in p_values if c in names])
    for col, fmt in {**{c: f for c, f in FORMATS.items() if c in names}, **(formats or {})}.items():
        out[col] = [("" if v is None or v != v else fmt(v) if callable(fmt) else fmt.format(v)) for v in out[col]]
    out.columns = heads
    text = markdown_table(out, digits)
    return text if csv is None else text + "\n\n" + _csv_link(csv, len(frame), len(frame.columns), shown=True)


def show(frame, columns=None, **options):
    """`table_text` as Markdown for a notebook cell to display (the same arguments)."""
    from IPython.display import Markdown

    return Markdown(table_text(frame, columns, **options))


FORMATS = {"detect_N": detect_text, "detect_samples": detect_text, "detect_same_precision": detect_text,
           "detect_exact": detect_text}  # how a column of this name reads on every page
