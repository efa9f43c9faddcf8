"""Chapter 10's section on `make audit`: the committed table of `make audit-servers`
(`specdec.audit.servers`) as the page's compact table and glued counts.

Example: t = read_table(resolve("data/results/audit/servers.csv")); audit_view(t); audit_values(t)
"""

from __future__ import annotations

import pandas as pd

from specdec.chapters.ch10.values import MISSING, _num, _p

__all__ = ["audit_view", "audit_values"]


def _split(t: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = ["pair", "setting"]
    return t[t["endpoint"] == "control"].set_index(keys), t[t["endpoint"] == "speculative"].set_index(keys)


def audit_view(t: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, setting): the control's verdict, the speculative endpoint's p-value, binned
    TV, the TV it detects at power 0.8, its acceptance (the server's counters), verdict and the
    verdict ("not run" where the row has none: its status in the CSV says why) and the verdict
    predicted before the run."""
    control, spec = _split(t)
    return pd.DataFrame({
        "server": [p for p, _ in spec.index], "setting": [s for _, s in spec.index],
        "control": control["verdict"].reindex(spec.index).fillna(MISSING).to_list(),
        "p": [_p(v) for v in spec["p_value"]], "TV": [_num(v, ".3f") for v in spec["tv"]],
        "TV detected": [_num(v, ".3f") for v in spec["mdtv"]],
        "acceptance": [_num(v, ".2f") for v in spec["acceptance"]],
        "verdict": [v if isinstance(v, str) else "not run" for v in spec["verdict"]],
        "predicted": spec["predicted"].fillna(MISSING).to_list()})


def audit_values(t: pd.DataFrame) -> dict:
    """The counts the section quotes: rows, predictions met (the speculative verdict as predicted
    and the control consistent), controls consistent, the values tested per endpoint, the largest
    detectable TV and the smallest power at the stated TV."""
    control, spec = _split(t)
    ok = control["verdict"].reindex(spec.index) == "consistent"
    return {"audit_n": len(spec), "audit_met": int(((spec["verdict"] == spec["predicted"]) & ok).sum()),
            "audit_controls": int((control["verdict"] == "consistent").sum()), "audit_controls_n": len(control),
            "audit_tokens": int(spec["tokens"].min()), "audit_mdtv": _num(t["mdtv"].max(), ".3f"),
            "audit_eps": _num(t["eps"].max(), ".2f"), "audit_power": _num(t["power_at_eps"].min(), ".2f")}
