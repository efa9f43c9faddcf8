"""The words and the verdict table chapter 10 shows, read from its tables (`specdec.measure.engine_audit`
computes them; this module only counts, picks and words what they hold, as the tests allow).

Example: headline_values(laws, acc, greedy, versions)["controls_words"]
    -> "pass in 4 of 4 tests (ours, hf, vllm)"
"""

from __future__ import annotations

import math

import pandas as pd

from specdec.measure.engine_repro import diagnosis_text
from specdec.report.results import records

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
        out += " Different: " + "; ".join(f"{r['engine']} {r['configuration']} ({int(r['samples'] - r['identical'])}"
                                          f" of {int(r['samples'])} samples, first at token "
                                          f"{int(r['first_difference'])})" for r in diff) + "."
    return out


def verdict_table(laws, acc) -> pd.DataFrame:
    """One row per (engine, configuration, setting): the law test's p-value and power, the TV
    interval as text, acceptance measured against expected, and the verdict in words."""
    a = {(r["engine"], r["configuration"], r["setting"]): r for r in records(acc)}
    out = []
    for r in records(laws):
        x = a.get((r["engine"], r["configuration"], r["setting"]), {})
        tv = "" if r.get("tv") != r.get("tv") or r.get("tv") is None else \
            f"{r['tv']:.3f} [{r['tv_lo']:.3f}, {r['tv_hi']:.3f}]"
        accept = f"{x['measured']:.2f} vs {x['expected_lo']:.2f}-{x['expected_hi']:.2f}" \
            if x.get("status") in ("meets", "misses") else ""
        out.append({"configuration": f"{r['engine']}: {r['configuration']}", "setting": r["setting"],
                    "p_value": r.get("p_value", math.nan), "power": r.get("power", math.nan), "binned TV": tv,
                    "acceptance": accept, "verdict": r["verdict"]})
    return pd.DataFrame(out)


def speed_values(speed) -> dict:
    """Glue values of the speed table: how many comparisons, faster, slower, undecided, not exact."""
    rows = records(speed)
    count = lambda w: sum(r.get("verdict") == w for r in rows)  # noqa: E731
    n = len(rows)
    return {"speed_words": (f"Of {n} timed comparisons, {count('faster')} are faster than the engine's own plain "
                            f"decoding by the whole interval, {count('slower')} slower and {count('undecided')} "
                            f"undecided; {count('not the target' + chr(39) + 's law here')} configurations failed "
                            "the law test and are not read as speedups.") if n else "No comparison was timed."}
