"""How numbers read on a page: p-values that underflow, exact fractions, and tables of both.

A p-value that underflows float64 is not zero: it is below the smallest positive double, so it is
printed as "< 1e-300" rather than "0".  An exact rational (e.g. the 10/9 accepted drafts of a worked
example) is printed as a fraction, not as "1.111111".

A table whose cells hold sentences reads better as a Markdown table (cells wrap) than as a DataFrame
(pandas cuts long cells with "..."): `markdown_table`.

Example: p_value_text(0.0) -> "< 1e-300";  p_value_text(0.0123) -> "0.012";  p_value_text(3e-12) -> "3e-12"
         fraction_text(10 / 9) -> "10/9";  fraction_text(2.0) -> "2"
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["p_value_text", "fraction_text", "with_p_values", "markdown_table", "config_text", "temperature_text"]

FLOOR = 1e-300  # below this a double p-value has lost all meaning (the smallest normal is 2.2e-308)


def config_text(r) -> str:
    """A measured configuration (a row with config, batch, output_len, temperature) in words.
    Example: config_text({"config": "k=2", "batch": 1, "output_len": 256, "temperature": 0.0})
      -> "k=2, batch 1, 256 tokens, greedy" """
    temp = temperature_text(r["temperature"], "temperature ")
    return f"{r['config']}, batch {r['batch']}, {r['output_len']} tokens, {temp}"


def temperature_text(t: float, label: str = "T = ") -> str:
    """A sampling temperature in words, "greedy" at 0.  Example: temperature_text(0.0) -> "greedy";
    temperature_text(1.0) -> "T = 1"; temperature_text(1.0, "temperature ") -> "temperature 1" """
    return "greedy" if t == 0 else f"{label}{t:g}"


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

    Example: markdown_table(pd.DataFrame({"a": [1.0, float("nan")], "b": ["x|y", "z"]}))
             -> "| a | b |\n|---|---|\n| 1 | x\\|y |\n|  | z |"
    """
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, float):
            return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.{digits}g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
