"""Chapter 10's section on `make audit`: the committed table of `make audit-servers`
(`specdec.audit.servers`) as the page's compact table and glued counts.

Example: t = read_table(resolve("data/results/audit/servers.csv")); audit_view(t); audit_values(t)
"""

from __future__ import annotations

import pandas as pd

from specdec.chapters.ch10.values import MISSING, _num, _p, _pair

__all__ = ["audit_view", "audit_values"]


def _split(t: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return t[t["endpoint"] == "control"], t[t["endpoint"] == "speculative"]


def _verdict(v) -> str:
    return v if isinstance(v, str) else "not run"  # its status in the CSV says why


def audit_view(t: pd.DataFrame) -> pd.DataFrame:
    """One row per server pair, its settings in one cell (the chapter's convention, temperature 1
    first): the control's verdict, the speculative endpoint's p-value, acceptance (the server's
    counters), tokens left out at the nucleus boundary, verdict, and the verdict predicted before
    the run."""
    control, spec = _split(t)
    return pd.DataFrame([{"server": pair, "control": _pair(control.loc[control["pair"] == pair, "verdict"], _verdict),
                          "p": _pair(g["p_value"], _p), "acceptance": _pair(g["acceptance"], lambda v: _num(v, ".2f")),
                          "boundary": _pair(g["boundary"], lambda v: _num(v, ".0f")),
                          "verdict": _pair(g["verdict"], _verdict),
                          "predicted": _pair(g["predicted"], lambda v: v if isinstance(v, str) else MISSING)}
                         for pair, g in spec.groupby("pair", sort=False)])


def audit_values(t: pd.DataFrame) -> dict:
    """The counts the section quotes: rows, predictions met (the speculative verdict as predicted
    and its control consistent), controls consistent, the values sampled per endpoint, the largest
    binned TV a row detects at power 0.8, the boundary margin."""
    control, spec = _split(t)
    keys = ["pair", "setting"]
    ok = control.set_index(keys)["verdict"].reindex(spec.set_index(keys).index).to_numpy() == "consistent"
    return {"audit_n": len(spec), "audit_met": int(((spec["verdict"] == spec["predicted"]).to_numpy() & ok).sum()),
            "audit_controls": int((control["verdict"] == "consistent").sum()), "audit_controls_n": len(control),
            "audit_tokens": int(spec["tokens"].max()), "audit_mdtv": _num(t["mdtv"].max(), ".3f"),
            "audit_margin": _num(t["margin"].max(), "g")}
