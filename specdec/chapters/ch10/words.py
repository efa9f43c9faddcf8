"""The words and the verdict table chapter 10 shows, read from its tables (`specdec.chapters.ch10.audit`
computes them; this module only counts, picks and words what they hold, as the tests allow).

Example: headline_values(laws, acc, greedy, versions)["controls_words"]
    -> "pass in 4 of 4 tests (ours, hf, vllm)"
"""

from __future__ import annotations

import math

import pandas as pd

from specdec.chapters.ch10.repro import diagnosis_text
from specdec.chapters.ch10.speed import INSTRUMENT, NOT_EXACT
from specdec.io.results import records

__all__ = ["headline_values", "verdict_table", "speed_values", "versions_text", "engine_versions"]


def engine_versions(results: dict) -> dict:
    """Per engine that ran, the versions it ran with: vLLM's as its worker reported them (its own
    environment), ours and Hugging Face's from this environment."""
    import torch
    import transformers

    here = {"torch": torch.__version__, "transformers": transformers.__version__}
    out = {}
    for (cfg, _), res in results.items():
        if cfg.engine not in out:
            out[cfg.engine] = dict(res.provenance.get("versions") or {}) if cfg.engine == "vllm" else dict(here)
    return out


def versions_text(versions: dict) -> str:
    """Each engine's versions in one phrase: "vllm: vllm 0.32.0, torch 2.13.0+cpu; hf: ..."."""
    return "; ".join(f"{engine}: " + ", ".join(f"{k} {v}" for k, v in sorted(vs.items()) if v and k != "python")
                     for engine, vs in versions.items() if vs)


def _tests(rows: list[dict]) -> tuple[int, int]:
    done = [r for r in rows if r.get("status") in ("pass", "reject")]
    return sum(r["status"] == "pass" for r in done), len(done)


def _role_words(rows: list[dict], want_pass: bool) -> str:
    ok, n = _tests(rows)
    if not n:
        return "none ran"
    engines = ", ".join(dict.fromkeys(r["engine"] for r in rows if r.get("status") in ("pass", "reject")))
    if want_pass:
        return f"pass in {ok} of {n} tests ({engines})"
    return f"are rejected in {n - ok} of {n} tests" + (", as they must be" if ok == 0 else
                                                        f"; {ok} passed, so the test missed a wrong rule there")


def _instrument_words(rows: list[dict]) -> str:
    if any(r.get("status") in ("pass", "reject") for r in rows):
        return _role_words(rows, False)
    why = sorted({str(r.get("verdict")) for r in rows if r.get("status") == "not run"})
    return "not run here: " + "; ".join(why) if why else "not in this run"


def headline_values(laws, acc, greedy, versions: dict, alpha: float) -> dict:
    """Glue values: each role's pass counts in words, the rejections chance alone gives over the
    tests at level ``alpha``, every rejected speculative configuration with its diagnosis
    paragraph, acceptance and greedy in words, the versions."""
    rows = records(laws)
    role = lambda r: [x for x in rows if x["role"] == r]  # noqa: E731
    spec = role("speculative")
    rejected = [r for r in spec if r.get("status") == "reject"]
    refused = [r for r in spec if r.get("status") == "not run"]
    ok, n = _tests(spec)
    words = f"{ok} of {n} (configuration, setting) tests consistent with the target law at their stated power"
    if rejected:
        names = sorted({f"{r['engine']} {r['configuration']}" for r in rejected})
        words += f"; rejected: {'; '.join(names)}"
    if refused:
        words += "; not run: " + "; ".join(f"{r['engine']} {r['configuration']} ({r['verdict']})" for r in refused)
    accr = {(a["engine"], a["configuration"], a["setting"]): a for a in records(acc)}
    diag = [diagnosis_text(r, accr.get((r["engine"], r["configuration"], r["setting"])),
                           versions_text({r["engine"]: versions.get(r["engine"], {})}).split(": ", 1)[-1])
            for r in rejected]
    n_tests = sum(r.get("status") in ("pass", "reject") for r in rows)
    return {"n_law_rows": len(rows), "n_tests": n_tests, "expected_false": n_tests * alpha, "controls_words": _role_words(role("control"), True),
            "negatives_words": _role_words(role("negative control"), False), "speculative_words": words,
            "instruments_words": _instrument_words(role("instrument")),
            "diagnoses": "\n\n".join(f"**Rejected.** {d}" for d in diag) or
                         "No speculative configuration was rejected by the law test.",
            "acceptance_words": _acceptance_words(records(acc)), "greedy_words": _greedy_words(records(greedy)),
            "versions_text": versions_text(versions)}


def _acceptance_words(rows: list[dict]) -> str:
    measured = [r for r in rows if r.get("status") in ("meets", "misses")]
    if not measured:
        return "No configuration's counters could be held to an exact expectation."
    miss = [r for r in measured if r["status"] == "misses"]
    out = f"{len(measured) - len(miss)} of {len(measured)} measured acceptances lie within 4 standard errors of " \
          "the exact expectation of their documented rule."
    if miss:
        out += " Missed: " + "; ".join(f"{r['engine']} {r['configuration']} at {r['setting']}, {r['measured']:.3f} "
                                       f"against {r['expected_lo']:.3f}-{r['expected_hi']:.3f} (z = {r['z']:.1f})"
                                       for r in miss) + "."
    return out


def _greedy_words(rows: list[dict]) -> str:
    done = [r for r in rows if not pd.isna(r.get("samples")) and r.get("samples")]
    if not done:
        return "No greedy comparison ran."
    same = [r for r in done if r["identical"] == r["samples"]]
    out = f"{len(same)} of {len(done)} speculative configurations decode greedily exactly what their engine's " \
          "plain greedy decoding does."
    diff = [r for r in done if r["identical"] < r["samples"]]
    if diff:
        def why(r):
            if pd.isna(r.get("against_speculation")):
                return "not classified"
            return (f"{int(r['against_speculation'])} against speculation, {int(r['plain_not_reproducible'])} where "
                    "plain decoding itself emits the other token at that prefix")
        out += " Different: " + "; ".join(f"{r['engine']} {r['configuration']} ({int(r['samples'] - r['identical'])}"
                                          f" of {int(r['samples'])} samples, first at token "
                                          f"{int(r['first_difference'])}: {why(r)})" for r in diff) + "."
    return out


def verdict_table(laws, acc, speed=None) -> pd.DataFrame:
    """One row per (engine, configuration, setting): the law test's p-value and power, the TV
    interval as text, acceptance measured against expected, the speedup over the engine's own
    plain decoding at batch 1 where it was timed, and the verdict in words."""
    a = {(r["engine"], r["configuration"], r["setting"]): r for r in records(acc)}
    sp = {(r["engine"], r["configuration"], r["setting"]): r for r in records(speed)
          if r.get("batch") == 1 and not pd.isna(r.get("speedup"))} if speed is not None else {}
    out = []
    for r in records(laws):
        key = (r["engine"], r["configuration"], r["setting"])
        x, t = a.get(key, {}), sp.get(key)
        tv = "" if r.get("tv") != r.get("tv") or r.get("tv") is None else \
            f"{r['tv']:.3f} [{r['tv_lo']:.3f}, {r['tv_hi']:.3f}]"
        accept = f"{x['measured']:.2f} vs {x['expected_lo']:.2f}-{x['expected_hi']:.2f}" \
            if x.get("status") in ("meets", "misses") else ""
        speedup = "" if t is None else f"{t['speedup']:.2f} [{t['speedup_lo']:.2f}, {t['speedup_hi']:.2f}] ({t['verdict']})"
        out.append({"configuration": f"{r['engine']}: {r['configuration']}", "setting": r["setting"],
                    "p_value": r.get("p_value", math.nan), "power": r.get("power", math.nan), "binned TV": tv,
                    "acceptance": accept, "speedup, batch 1": speedup, "verdict": r["verdict"]})
    return pd.DataFrame(out)


def _interval(r: dict, col: str = "speedup") -> str:
    lo, hi = ("speedup_lo", "speedup_hi") if col == "speedup" else ("relative_lo", "relative_hi")
    return f"{r[col]:.2f}x [{r[lo]:.2f}, {r[hi]:.2f}]"


def _is_instrument(r: dict) -> bool:
    """An instrument's row: its exactness column says so, or (a row that could not be timed) its
    label, which `specdec.chapters.ch10.audit.synthetic` and `engine_speed.controlled` end so."""
    return r.get("law") == INSTRUMENT or str(r.get("configuration", "")).endswith("(an instrument)")


def _ceiling(r: dict) -> str:
    name = f"{r['engine']} {r['configuration'].split(', ', 2)[-1].removesuffix(' (an instrument)')}"
    return f"{name}: {_interval(r)}" if not pd.isna(r.get("speedup")) else f"{name}: {r['verdict']}"


def speed_values(speed, plain=None) -> dict:
    """Glue values of the speed tables: how many comparisons are faster, slower, undecided or not
    the target's law, each engine's best exact speedup with its interval, and (``plain``) the
    engines' plain decoding against the reference."""
    every = records(speed)
    rows = [r for r in every if not _is_instrument(r)]
    count = lambda w: sum(r.get("verdict") == w for r in rows)  # noqa: E731
    n = len(rows)
    if not n:
        return {"speed_words": "No comparison was timed.", "plain_words": "No plain decoding was timed.",
                "ceiling_words": "No instrument was timed."}
    untimed = sum(str(r.get("verdict")).startswith("not timed") for r in rows)
    unread = [r for r in rows if r.get("verdict") == NOT_EXACT]
    skipped = sum(pd.isna(r.get("speedup")) for r in unread)
    words = (f"Of {n} comparisons, {count('faster')} are faster than the engine's own plain decoding by the "
             f"whole interval, {count('slower')} slower and {count('undecided')} undecided; "
             f"{len(unread)} are {NOT_EXACT} and are not read as speedups"
             + (f" ({skipped} of them not timed: their law test failed)" if skipped else "") + "."
             + (f" {untimed} could not be timed (the table says why)." if untimed else ""))
    best = []
    for engine in dict.fromkeys(r["engine"] for r in rows):
        ok = [r for r in rows if r["engine"] == engine and r.get("verdict") in ("faster", "slower", "undecided")]
        if ok:
            b = max(ok, key=lambda r: r["speedup_lo"])
            best.append(f"{engine}: {b['configuration']}, {b['setting']}, batch {int(b['batch'])}, "
                        f"{_interval(b)} ({b['verdict']})")
    out = {"speed_words": words + (" The best exact comparison of each engine (highest lower end): "
                                   + "; ".join(best) + "." if best else ""),
           "ceiling_words": "; ".join(_ceiling(r) for r in every if _is_instrument(r)) or "No instrument was timed."}
    if plain is not None:
        prow = records(plain)
        out["plain_words"] = "; ".join(
            f"{r['engine']} {r['setting']}, batch {int(r['batch'])}: {_interval(r, 'relative_speed')} ({r['verdict']})"
            for r in prow if not pd.isna(r.get("relative_speed"))) or "No plain decoding was timed."
    return out
