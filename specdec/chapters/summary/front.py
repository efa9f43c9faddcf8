"""The front page's verdicts and its figure's data, read from the chapters' committed tables under
``root`` (nothing here measures, nothing here writes a sentence: numbers, verdict words and labels).

The headline is chapter 06's reference setting, stated before the lean runs (k = K_REF, temperature 1,
batch 1, the longest output), not the best of many (the winner's curse), pooled over its runs in fresh
processes (`specdec.measure.replication`).  The figure prices each pair's costs where they were timed:
the embedded pair's as the decoding loop runs its forwards (`specdec.measure.prediction.regime_inputs`:
the target right after a draft forward, the draft's first forward after a verification: what the loop
pays, unlike chapter 06's curve timed back to back), each real-size shape's from its own cost curve.

Example: reference(root)["ref_speedup"] -> the median speedup of k=2, batch 1, 128 tokens, temperature 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdec.chapters.summary.findings import chapter_parameters, chapter_table
from specdec.io.paths import CHAPTERS, RERUNS_DIR, RESULTS_DIR
from specdec.io.results import read_table, records
from specdec.measure.prediction import regime_costs
from specdec.measure.replication import free_level, pooled_runs, pooled_table
from specdec.report.formatting import config_text
from specdec.report.robustness import rerun_agreements

__all__ = ["engines_values", "reference", "primary_rows", "replicated", "rerun_rows", "regimes",
           "regime_values"]


def engines_values(root: Path = RESULTS_DIR) -> dict:
    """Chapter 10's law tests as counts (of the rows that tested what they name: one the build ignored,
    or that did not run, is not counted): vLLM's shipped sampled speculative rows rejected, its patched
    rows passed, ours and Hugging Face's speculative rows passed, llama.cpp's passed (and its package
    version), the positive controls passed, the negative controls rejected, the configurations the
    build ignored, vLLM's speculative greedy configurations equal to its plain greedy, vLLM's version."""
    path = Path(root) / CHAPTERS["eng"]
    rows = records(read_table(path / "laws.csv"))
    done = [r for r in rows if r["status"] in ("pass", "reject")]

    def count(passed: str, n: str, status: str, keep) -> dict:
        """{passed: the rows ``keep`` selects with ``status``, n: the rows it selects} (literal glue names)."""
        sel = [r for r in done if keep(r)]
        return {passed: sum(r["status"] == status for r in sel), n: len(sel)}

    vllm_spec = lambda r: r["engine"] == "vllm" and r["role"] == "speculative"  # noqa: E731
    greedy = [r for r in records(read_table(path / "greedy.csv"))
              if r["engine"] == "vllm" and r.get("samples") == r.get("samples")]
    versions = json.loads((path / "values.json").read_text())["values"]["versions"]
    return {**count("engines_shipped_rejected", "engines_shipped_n", "reject",
                    lambda r: vllm_spec(r) and not r["patched"]),
            **count("engines_patched_pass", "engines_patched_n", "pass", lambda r: vllm_spec(r) and r["patched"]),
            **count("engines_others_pass", "engines_others_n", "pass",
                    lambda r: r["engine"] in ("ours", "hf") and r["role"] == "speculative"),
            **count("engines_llama_pass", "engines_llama_n", "pass",
                    lambda r: r["engine"] == "llama" and r["role"] == "speculative"),
            "engines_llama": versions.get("llama_package_version", "not run"),
            **count("engines_controls_pass", "engines_controls_n", "pass", lambda r: r["role"] == "control"),
            **count("engines_negatives_rejected", "engines_negatives_n", "reject",
                    lambda r: r["role"] == "negative control"),
            "engines_ignored": len({r["configuration"] for r in rows if r["status"] == "ignored by this build"}),
            "engines_vllm": versions["vllm"], "engines_vllm_greedy_n": len(greedy),
            "engines_vllm_greedy_same": sum(r["identical"] == r["samples"] for r in greedy)}


def reference(root: Path = RESULTS_DIR, primary=None) -> dict:
    """Chapter 06's reference setting, stated before the lean runs (after exploratory eager runs):
    k = K_REF drafts, temperature 1, batch 1, the longest output length; its speedup with interval and
    verdict in the committed run, and its acceptance while decoding.  With ``primary`` (`primary_rows`,
    a DataFrame or rows) also its pooled median, simultaneous interval and verdict (``ref_pooled*``);
    a reference that is not one primary comparison is an error."""
    p = chapter_parameters(root, "dec")
    s = chapter_table(root, "dec", "summary")
    k, L = int(p["K_REF"]), int(max(p["OUTPUT_LENS"]))
    sel = s[(s["config"] == f"k={k}") & (s["temperature"] == 1.0) & (s["batch"] == 1) & (s["output_len"] == L)]
    if len(sel) != 1:
        raise ValueError(f"chapter 06's summary has {len(sel)} rows for its reference configuration k={k}, temperature 1, "
                         f"batch 1, {L} tokens (one expected)")
    r = records(sel)[0]
    out = {"ref_k": k, "ref_len": L, "ref_speedup": float(r["speedup"]), "ref_lo": float(r["speedup_lo"]),
           "ref_hi": float(r["speedup_hi"]), "ref_verdict": str(r["verdict"]), "ref_alpha": float(r["alpha_mle"])}
    if primary is None:
        return out
    label = config_text({"config": f"k={k}", "batch": 1, "output_len": L, "temperature": 1.0})
    pooled = [p for p in records(primary) if p["setting"] == label]
    if len(pooled) != 1:
        raise ValueError(f"the primary comparisons hold {len(pooled)} rows for the reference setting {label!r} (one expected)")
    p = pooled[0]
    return {**out, "ref_pooled": float(p["speedup"]), "ref_pooled_lo": float(p["lo_sim"]),
            "ref_pooled_hi": float(p["hi_sim"]), "ref_pooled_verdict": str(p["verdict_sim"])}


def primary_rows(root: Path = RESULTS_DIR, reruns: Path = RERUNS_DIR) -> list[dict]:
    """Chapter 06's primary comparisons (its PRIMARY, stated before the lean runs) pooled over the
    committed run and its compatible re-runs: per comparison the setting (a label), runs, pooled
    median speedup, simultaneous interval, its level and verdict."""
    p = chapter_parameters(root, "dec")
    runs, _ = pooled_runs(Path(root) / CHAPTERS["dec"], Path(reruns) / CHAPTERS["dec"])
    table = pooled_table(runs, p["PRIMARY"], seed=int(p["SEED"]))
    return [{"setting": config_text(r), "runs": int(r["runs"]), "speedup": float(r["speedup"]),
             "lo_sim": float(r["lo_sim"]), "hi_sim": float(r["hi_sim"]), "level_sim": float(r["level_sim"]),
             "verdict_sim": str(r["verdict_sim"])} for r in table if r["role"] == "primary"]


def replicated(primary) -> dict:
    """From `primary_rows` (a DataFrame or rows): how many runs were pooled (R), how many primary
    comparisons, how many faster / slower at the nominal simultaneous level, that level, and the
    level R runs carry without assumptions about how runs vary (`free_level`)."""
    rows = records(primary)
    if not rows:
        raise ValueError("no primary comparison to summarize")
    runs = int(rows[0]["runs"])
    return {"rep_runs": runs, "rep_n_primary": len(rows),
            "rep_primary_faster": sum(r["verdict_sim"] == "faster" for r in rows),
            "rep_primary_slower": sum(r["verdict_sim"] == "slower" for r in rows),
            "rep_level": float(rows[0]["level_sim"]), "rep_free_level": free_level(runs)}


def rerun_rows(root: Path = RESULTS_DIR, reruns: Path = RERUNS_DIR) -> list[dict]:
    """The committed chapter 06 against each committed re-run (numbered in folder-name order): its
    shared settings, how many 95% intervals overlap, on how many settings both runs could give a
    verdict word (a setting both refuse, too few pairs, can never agree) and on how many of those
    the words agree."""
    s = chapter_table(root, "dec", "summary")
    return [{"rerun": i, "settings": a["n"], "overlap": a["overlap"], "stated": a["words_n"], "agree": a["words_agree"]}
            for i, (_, _, a) in enumerate(rerun_agreements(s, Path(reruns) / CHAPTERS["dec"]), 1)]


def regimes(root: Path = RESULTS_DIR) -> tuple:
    """(curves, points): chapter 06's committed ``regimes`` (per pair the best speed ratio over k at
    each alpha, with T(2)/T(1), c and the break-even alpha) and ``regime_points`` (the measured
    settings placed on them), as `specdec.report.plotting.regimes` draws them."""
    return chapter_table(root, "dec", "regimes"), chapter_table(root, "dec", "regime_points")


def regime_values(table) -> dict:
    """From a ``regimes`` table or its `specdec.measure.prediction.regime_costs`: the embedded
    pair's (the pair named "embedded ...") T(2)/T(1), c and break-even alpha, and the largest
    T(2)/T(1) and break-even alpha of any pair."""
    rows = regime_costs(table)
    emb = [r for r in rows if str(r["pair"]).startswith("embedded")]
    if len(emb) != 1:
        raise ValueError(f"the regimes table has {len(emb)} embedded pairs (one expected)")
    return {"t2_embedded": emb[0]["t2_ratio"], "c_embedded": emb[0]["c"], "be_embedded": emb[0]["break_even"],
            "be_max": max(r["break_even"] for r in rows), "t2_max": max(r["t2_ratio"] for r in rows)}
