"""The front page's verdict box, scope line, the headline stated before the lean runs, null results with the effects
they cannot exclude, the cost regimes in words, and the short table beside published results -- all
read from the chapters' committed tables under ``root`` (nothing here measures).

  * `verdicts`: what is proved (exact laws, the alpha > c corollary, Var(L)), what is measured and how
    well it replicated, and what is not measured;
  * `reference`: chapter 06's reference configuration, stated before the lean runs (k = K_REF, temperature 1,
    batch 1, the longest output), the headline, rather than the best of many (the winner's curse);
  * `replicated`: chapter 06's primary comparisons pooled over its runs in fresh processes
    (`specdec.chapters.ch06.replication`), the reference configuration's pooled interval among them;
  * `null_results`: each undecided comparison family with the range of effects its interval allows,
    and the pairs a design would need to detect a stated effect;
  * `regime_words`: T(2)/T(1) per model shape, to say what separates this CPU from an accelerator;
  * `published_short`: one published row per method family and this report's reference row.

Example: reference(root)["ref_speedup"] -> the median speedup of k=2, batch 1, 128 tokens, temperature 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from specdec.io.paths import CHAPTERS, RERUNS_DIR, RESULTS_DIR
from specdec.io.results import read_table, records
from specdec.chapters.ch06 import replication
from specdec.measure.replication import free_level
from specdec.report.robustness import rerun_agreements

__all__ = ["verdicts", "reference", "null_results", "pairs_to_detect", "regime_words", "published_short",
           "SOURCE_LABELS", "engines_values"]

SOURCE_LABELS = {"leviathan2023fast": "Leviathan et al. 2023", "chen2023accelerating": "Chen et al. 2023",
                 "sun2025block": "Sun et al. 2025", "xia2024unlocking": "Xia et al. 2024 (Spec-Bench)",
                 "li2024eagle": "Li et al. 2024", "cai2024medusa": "Cai et al. 2024"}
# one published row per method family: (source, method as the source names it, its first such row)
FAMILIES = (("leviathan2023fast", "speculative decoding (token verification)"),
            ("chen2023accelerating", "speculative sampling (token verification)"),
            ("sun2025block", "block verification"), ("xia2024unlocking", "EAGLE"),
            ("xia2024unlocking", "Medusa"), ("xia2024unlocking", "prompt lookup decoding (PLD)"))


def _t(root: Path, chapter: str, name: str):
    return read_table(Path(root) / CHAPTERS[chapter] / f"{name}.csv")


def _params(root: Path, chapter: str) -> dict:
    return json.loads((Path(root) / CHAPTERS[chapter] / "chapter.json").read_text())["parameters"]


def verdicts(root: Path = RESULTS_DIR, reruns: Path = RERUNS_DIR) -> dict:
    """The verdict box's values: the corollary check of chapter 03 (alpha grid points where the
    idealized model's "some k pays" disagrees with alpha > c, and the k = 1 break-even's largest
    distance from c), Var(L)'s closed form against the exact law, and chapter 06's replication
    (verdicts agreeing with each committed re-run, `specdec.report.robustness.rerun_agreements`)."""
    cor = _t(root, "cost", "corollary_check")
    el = _t(root, "cost", "expected_tokens_check")
    s = _t(root, "dec", "summary")
    ag = [a for _, _, a in rerun_agreements(s, Path(reruns) / CHAPTERS["dec"])]
    return {**engines_values(root), "cor_disagree": int(cor["n_disagree"].sum()), "cor_points": int(cor["n_alphas"].sum()),
            "cor_gap": float(cor["break_even_gap"].abs().max()),
            "var_err": float((el["var_closed_form"] - el["var_from_law"]).abs().max()),
            "var_configs": int(len(el)), "rep_runs": len(ag),
            "rep_agree": ", ".join(str(a["words_agree"]) for a in ag) or "none",
            "rep_overlap": ", ".join(str(a["overlap"]) for a in ag) or "none",
            "rep_words_n": ", ".join(str(a["words_n"]) for a in ag) or "none",
            "rep_n": int(ag[0]["n"]) if ag else 0}


def engines_values(root: Path = RESULTS_DIR) -> dict:
    """Chapter 10's law tests as counts for the verdict box (rows that tested what they name only:
    a configuration the build ignored, or that did not run, is not counted): vLLM's shipped sampled
    speculative rows rejected of tested, its patched rows passed of tested, the other engines'
    speculative rows passed, the positive controls passed, the negative controls rejected, the
    configurations the build ignored, vLLM's speculative greedy configurations equal to its plain
    greedy decoding, and vLLM's version."""
    path = Path(root) / CHAPTERS["eng"] / "laws.csv"
    rows = records(read_table(path))
    done = [r for r in rows if r["status"] in ("pass", "reject")]

    def count(keep, status):
        sel = [r for r in done if keep(r)]
        return sum(r["status"] == status for r in sel), len(sel)

    vllm_spec = lambda r: r["engine"] == "vllm" and r["role"] == "speculative"  # noqa: E731
    shipped = count(lambda r: vllm_spec(r) and not r["patched"], "reject")
    patched = count(lambda r: vllm_spec(r) and r["patched"], "pass")
    others = count(lambda r: r["engine"] != "vllm" and r["role"] == "speculative", "pass")
    controls = count(lambda r: r["role"] == "control", "pass")
    negatives = count(lambda r: r["role"] == "negative control", "reject")
    greedy = [r for r in records(read_table(Path(root) / CHAPTERS["eng"] / "greedy.csv"))
              if r["engine"] == "vllm" and r.get("samples") == r.get("samples")]
    versions = json.loads((Path(root) / CHAPTERS["eng"] / "values.json").read_text())["values"]["versions"]
    return {"engines_shipped_rejected": shipped[0], "engines_shipped_n": shipped[1],
            "engines_patched_pass": patched[0], "engines_patched_n": patched[1],
            "engines_others_pass": others[0], "engines_others_n": others[1],
            "engines_controls_pass": controls[0], "engines_controls_n": controls[1],
            "engines_negatives_rejected": negatives[0], "engines_negatives_n": negatives[1],
            "engines_ignored": len({r["configuration"] for r in rows if r["status"] == "ignored by this build"}),
            "engines_vllm": versions["vllm"], "engines_vllm_greedy_n": len(greedy),
            "engines_vllm_greedy_same": sum(r["identical"] == r["samples"] for r in greedy)}


def reference(root: Path = RESULTS_DIR) -> dict:
    """Chapter 06's reference configuration, stated before the lean runs (after exploratory eager
    runs): k = K_REF drafts, temperature 1, batch 1, the longest output length; its speedup with
    interval and words, acceptance, tokens per step."""
    p = _params(root, "dec")
    s = _t(root, "dec", "summary")
    k, L = int(p["K_REF"]), int(max(p["OUTPUT_LENS"]))
    sel = s[(s["config"] == f"k={k}") & (s["temperature"] == 1.0) & (s["batch"] == 1) & (s["output_len"] == L)]
    if len(sel) != 1:
        raise ValueError(f"chapter 06's summary has {len(sel)} rows for its reference configuration k={k}, temperature 1, "
                         f"batch 1, {L} tokens (one expected)")
    r = sel.iloc[0]
    return {"ref_k": k, "ref_len": L, "ref_speedup": float(r["speedup"]), "ref_lo": float(r["speedup_lo"]),
            "ref_hi": float(r["speedup_hi"]), "ref_verdict": str(r["verdict"]), "ref_alpha": float(r["alpha_mle"]),
            "ref_tokens_per_step": float(r["tokens_per_step"]), "ref_runs": int(r["runs"])}


def replicated(root: Path = RESULTS_DIR, reruns: Path = RERUNS_DIR) -> dict:
    """Chapter 06's primary comparisons pooled over the committed run and its compatible re-runs:
    how many runs, how many primary comparisons were faster / slower at the (nominal) simultaneous
    level, the level those runs carry without assumptions (`free_level`), and
    the reference configuration's pooled median and simultaneous interval (rep_ref_*; NaN and
    "not a primary comparison" when PRIMARY does not hold it)."""
    p = _params(root, "dec")
    runs, _ = replication.pooled_runs(Path(root) / CHAPTERS["dec"], Path(reruns) / CHAPTERS["dec"])
    table = replication.pooled_table(runs, p["PRIMARY"], seed=int(p["SEED"]))
    prim = [r for r in table if r["role"] == "primary"]
    ref = replication.setting([p["K_REF"], 1.0, max(p["OUTPUT_LENS"]), 1])
    hit = [r for r in prim if (r["temperature"], r["output_len"], r["batch"], r["config"]) == ref]
    r = hit[0] if hit else {"speedup": math.nan, "lo_sim": math.nan, "hi_sim": math.nan,
                            "verdict_sim": "not a primary comparison"}
    return {"rep_pooled_runs": int(prim[0]["runs"]), "rep_n_primary": len(prim),
            "rep_primary_faster": sum(x["verdict_sim"] == "faster" for x in prim),
            "rep_primary_slower": sum(x["verdict_sim"] == "slower" for x in prim),
            "rep_level": float(prim[0]["level_sim"]), "rep_free_level": free_level(int(prim[0]["runs"])),
            "rep_ref": float(r["speedup"]), "rep_ref_lo": float(r["lo_sim"]),
            "rep_ref_hi": float(r["hi_sim"]), "rep_ref_words": str(r["verdict_sim"])}


def pairs_to_detect(n: int, lo: float, hi: float, effect: float) -> int:
    """Pairs a design like this one would need for its 95% interval's half-width to shrink to
    ``effect`` (so that a true effect of that size is resolved about half the time, and excluded from
    "undecided" at larger n): n ((hi - lo) / 2 / effect)^2, the interval shrinking as 1 / sqrt(n).
    Example: n = 12, interval [0.9, 1.1], effect 0.05 -> 48."""
    if not (n > 0 and hi > lo and effect > 0):
        raise ValueError(f"need n > 0, hi > lo and effect > 0 (got n={n}, lo={lo}, hi={hi}, effect={effect})")
    return int(math.ceil(n * ((hi - lo) / 2 / effect) ** 2))


def _allows(lo: float, hi: float) -> str:
    return f"{100 * (lo - 1):+.0f}% to {100 * (hi - 1):+.0f}%"


def null_results(root: Path = RESULTS_DIR, effect: float = 0.07) -> dict:
    """Each undecided headline comparison with the range of effects its interval still allows:
    block against token verification (chapter 05; and the pairs needed to resolve ``effect``, the low
    end of Sun et al.'s reported wall-clock gain), and serving at the lightest load (chapter 09)."""
    bt = _t(root, "acc", "block_vs_token")
    und = bt[~bt["words"].isin(["faster", "slower", "higher", "lower"])]
    lo, hi = (float(und["lo"].min()), float(und["hi"].max())) if len(und) else (math.nan, math.nan)
    n = int(np.median(und["prompts"])) if len(und) else 0
    out = {"bt_undecided": int(len(und)), "bt_n": int(len(bt)), "bt_allows": _allows(lo, hi) if len(und) else "",
           "bt_effect": effect, "bt_pairs_needed": int(np.median([pairs_to_detect(n, r["lo"], r["hi"], effect)
                                                                   for r in records(und)])) if len(und) else 0,
           "bt_prompts": n}
    sp = _t(root, "serve", "speedup")
    light = sp[sp["rate"] == sp["rate"].min()]
    out["serve_light"] = "; ".join(f"{r['policy']} {r['verdict']}, allows {_allows(r['latency_lo'], r['latency_hi'])}"
                                   for r in records(light))
    return out


def regime_words(root: Path = RESULTS_DIR) -> str:
    """T(2)/T(1), the cost of verifying two tokens over one, per model shape on this machine (chapter
    06's regimes): the quantity that separates a memory-bound accelerator (about 1) from this CPU."""
    reg = _t(root, "dec", "regimes").drop_duplicates("pair")
    return "; ".join(f"{r['pair'].split(' + ')[0]} {r['t2_ratio']:.2f}" for r in records(reg))


def published_short(published, root: Path = RESULTS_DIR) -> list[dict]:
    """One row per method family (`FAMILIES`, the first row of each in ``published``) with the source
    as an author-year label, then this report's reference configuration (stated before the lean runs); speedup first."""
    rows = []
    for source, method in FAMILIES:
        hit = [r for r in records(published) if r["source"] == source and r["method"] == method]
        if not hit:
            raise ValueError(f"no published row for {method!r} from {source}")
        r = hit[0]
        rows.append({"speedup": f"{r['speedup']:.2f}", "source": SOURCE_LABELS[source], "method": method,
                     "setting": f"{r['target']}; {r['hardware']}" if r["hardware"] == r["hardware"] and r["hardware"]
                     else str(r["target"]),
                     "k": "" if r["k"] != r["k"] or r["k"] is None else f"{int(r['k'])}",
                     "acceptance": "" if r["acceptance"] != r["acceptance"] or r["acceptance"] is None
                     else f"{r['acceptance']:.2f}"})
    ref, prm = reference(root), _params(root, "dec")
    target = _t(root, "family", "perplexity").set_index("model").loc["target", "params"]
    rows.append({"speedup": f"{ref['ref_speedup']:.2f} [{ref['ref_lo']:.2f}, {ref['ref_hi']:.2f}]",
                 "source": "this report (chapter 06, stated before the lean runs)", "method": "speculative sampling",
                 "setting": f"embedded GPT-2 ({float(target) / 1e6:.1f}M); CPU, {prm['THREADS']} thread",
                 "k": str(ref["ref_k"]), "acceptance": f"{ref['ref_alpha']:.2f}"})
    return rows
