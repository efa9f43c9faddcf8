"""The report's front page, computed from the chapters' committed tables: headline numbers, the
"when does it pay" guide, the comparison with published results, and the numbers the limitations
quote.  Nothing here measures; every function reads the tables the chapters wrote under ``root``
(`specdec.io.paths.RESULTS_DIR` by default), so the summary updates itself when they change.

  * `exactness`: the largest exact-law error (chapters 01, 02), the frequency tests of the correct
    algorithms, and the wrong variants caught;
  * `acceptance_by_draft`: per draft, teacher-forced beta (04) and measured alpha with its interval (05);
  * `speed`: chapter 06's counts of faster / slower / undecided, best and median speedups, the cost
    model's hit rate, the real-size surface, whether GPU numbers exist (07), and `fastest_plain`:
    `make bench`'s check against Hugging Face's compiled plain decoding (its own folder,
    ``data/results/bench`` by default; `fastest_plain_values` is shared with chapter 06);
  * `guide_rows`: the decision guide's evidence (alpha against c, T(2)/T(1), batch, output length,
    approximate rules, serving load, and whether another engine keeps the law);
  * `comparison_rows`: published rows beside this report's own (marked as whose);
  * `scope`: model scale, machine, lengths, batches, temperatures, prompts, tests and re-runs, for
    the limitations.

Example: speed()["n_faster"] -> 7 (of speed()["n_spec"] -> 30) for the committed chapter 06.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specdec.report.formatting import temperature_text
from specdec.io.paths import CHAPTERS, RESULTS_DIR, RERUNS_DIR
from specdec.io.results import read_table, records
from specdec.report.robustness import INSTRUMENT, STATEMENTS, multiplicity_words, rerun_values
from specdec.chapters.ch09.words import break_even_text

__all__ = ["exactness", "acceptance_by_draft", "speed", "fastest_plain", "fastest_plain_values", "guide_rows",
           "comparison_rows", "scope"]


def _t(root: Path, chapter: str, name: str):
    return read_table(Path(root) / CHAPTERS[chapter] / f"{name}.csv")


def _values(root: Path, chapter: str) -> dict:
    return json.loads((Path(root) / CHAPTERS[chapter] / "values.json").read_text())["values"]


def _chapter(root: Path, chapter: str) -> dict:
    """The chapter's chapter.json: its parameters and the provenance of its run."""
    return json.loads((Path(root) / CHAPTERS[chapter] / "chapter.json").read_text())


def _params(root: Path, chapter: str) -> dict:
    return _chapter(root, chapter)["parameters"]


def exactness(root: Path = RESULTS_DIR) -> dict:
    """Largest |law - p| over chapter 01's random pairs and chapter 02's exact grid; the correct
    algorithms' frequency tests (count, smallest p-value); wrong variants caught out of those tried;
    greedy argmax flips between one-token and verification forwards (chapter 01), float32 and bfloat16."""
    grid = _t(root, "seq", "exact_grid")
    freq = _t(root, "seq", "frequency_tests")
    correct = freq[freq["bug"] == "(correct)"]
    wrong = freq[freq["bug"] != "(correct)"]
    ties = _t(root, "one", "greedy_summary")
    flips = {dt: (int(g["flips"].sum()), int(g["positions"].sum())) for dt, g in ties.groupby("dtype")}
    return {"greedy_flips_f32": flips["float32"][0], "greedy_compared_f32": flips["float32"][1],
            "greedy_flips_bf16": flips["bfloat16"][0], "greedy_compared_bf16": flips["bfloat16"][1],
            "one_step_err": float(_values(root, "one")["many_pairs"]["err_random"]),
            "law_err": float(grid["max_abs_error"].max()), "law_configs": int(len(grid)),
            "n_correct_tests": int(len(correct)), "correct_min_p": float(correct["p_value"].min()),
            "correct_samples": int(correct["samples"].min()),
            "n_variants": int(len(wrong)), "n_caught": int((wrong["verdict"] == "caught").sum())}


def acceptance_by_draft(root: Path = RESULTS_DIR, temperature: float = 1.0) -> list[dict]:
    """Per draft at ``temperature``: beta on real text (04) and the alpha measured while decoding
    with token verification (05), with its interval."""
    beta = _t(root, "family", "beta")
    alpha = _t(root, "acc", "alpha_vs_temperature")
    alpha = alpha[(alpha["method"] == "token") & (alpha["top_p"] == 1.0) & (alpha["temperature"] == temperature)]
    b = {r["draft"]: r["beta"] for r in records(beta[beta["temperature"] == temperature])}
    return [{"draft": r["draft"], "beta_real_text": b.get(r["draft"], float("nan")), "alpha": r["alpha_mle"],
             "alpha_lo": r["lo"], "alpha_hi": r["hi"]} for r in records(alpha)]


def speed(root: Path = RESULTS_DIR, bench: Path = RESULTS_DIR / "bench") -> dict:
    """Chapter 06's headline: counts by verdict, best and median speedup, the cost model's hit
    rate, the fastest drafter, the real-size surface; chapter 07's GPU status; `make bench`'s check
    against the fastest plain decoding (`fastest_plain`, from its own folder ``bench``)."""
    s = _t(root, "dec", "summary")
    spec = s[s["config"] != "baseline"]
    best = spec.loc[spec["speedup"].idxmax()]
    pred = _t(root, "dec", "prediction")
    real = _t(root, "dec", "real_size_speedup_vs_alpha")
    rbest = real.loc[real["speedup_median"].idxmax()]
    drafts = _t(root, "dec", "draft_summary")
    d = drafts.loc[drafts["speedup"].idxmax()]
    status = _t(root, "gpu", "status").iloc[0]
    temp = temperature_text(best["temperature"], "temperature ")
    return {"n_spec": int(len(spec)), "n_faster": int((spec["verdict"] == "faster").sum()),
            "n_slower": int((spec["verdict"] == "slower").sum()),
            "n_undecided": int((~spec["verdict"].isin(["faster", "slower"])).sum()),
            "best_speedup": float(best["speedup"]), "best_lo": float(best["speedup_lo"]),
            "best_hi": float(best["speedup_hi"]), "best_verdict": str(best["verdict"]),
            "best_config": f"{best['config']}, batch {best['batch']}, {best['output_len']} tokens, {temp}",
            "median_speedup": float(spec["speedup"].median()), "min_speedup": float(spec["speedup"].min()),
            "half_width_median": float(spec["half_width"].median()),
            "n_pred": int(len(pred)), "n_pred_within": int(pred["within"].astype(bool).sum()),
            "ratio_min": float(pred["ratio"].min()), "ratio_max": float(pred["ratio"].max()),
            "best_drafter": str(d["draft"]), "best_drafter_speedup": float(d["speedup"]),
            "best_drafter_lo": float(d["speedup_lo"]), "best_drafter_hi": float(d["speedup_hi"]),
            "real_name": str(rbest["target"]), "real_points": int(len(real)),
            "real_faster": int((real["verdict"] == "faster").sum()),
            "real_slower": int((real["verdict"] == "slower").sum()), "real_best": float(rbest["speedup_median"]),
            "real_best_lo": float(rbest["speedup_lo"]), "real_best_hi": float(rbest["speedup_hi"]),
            "real_best_at": f"batch {rbest['batch']}, k = {rbest['k']}, alpha {rbest['alpha_set']:g}",
            "gpu_exists": bool(status["real_gpu"]), "gpu_status": str(status["status"]), **fastest_plain(bench)}


# per mode, the glue names of our greedy batch-1 baseline's median and interval ends (`fastest_plain_values`)
FAST_BASE_KEYS = {"eager": ("fast_base", "fast_base_lo", "fast_base_hi"),
                  "lean": ("fast_lbase", "fast_lbase_lo", "fast_lbase_hi"),
                  "compiled": ("fast_cbase", "fast_cbase_lo", "fast_cbase_hi")}


def fastest_plain_values(rows) -> dict:
    """From `make bench`'s comparison rows: every setting of ours (plain and speculative, in every
    execution mode) against Hugging Face's compiled plain `generate`, its fastest plain decoding measured
    -- how many settings, faster (by each interval, and by the simultaneous ones), slower, the best
    median and its setting -- and our greedy batch-1 baselines' ratios with their intervals
    (``fast_base``: eager, the baseline chapter 06's speedups are over; ``fast_lbase`` lean and
    ``fast_cbase`` compiled, when the bench ran those modes).  A table without the eager check is an
    error."""
    fast = [{"mode": "eager", **r} for r in records(rows) if r["comparison"] == "vs_hf_compiled_ar"]
    out = {}
    for mode, keys in FAST_BASE_KEYS.items():
        base = [r for r in fast if (r["mode"], r["k"], r["batch"], r["temperature"]) == (mode, 0, 1, 0.0)]
        if not base and mode != "eager":
            continue
        if not base:
            raise ValueError(f"the bench table has no check against Hugging Face's compiled generate (vs_hf_compiled_ar, "
                             f"{mode} greedy batch 1): re-run make bench")
        out.update(zip(keys, (float(base[0]["median"]), float(base[0]["lo"]), float(base[0]["hi"])), strict=True))
    top = max(fast, key=lambda r: r["median"])
    return {"fast_n": len(fast), "fast_faster": sum(r["verdict"] == "faster" for r in fast),
            "fast_faster_sim": sum(r.get("verdict_sim") == "faster" for r in fast),
            "fast_slower": sum(r["verdict"] == "slower" for r in fast), **out, "fast_max": float(top["median"]),
            "fast_best_config": (f"{'plain' if top['k'] == 0 else 'k=' + str(top['k'])}, {top['mode']}, "
                                 f"batch {top['batch']}, {temperature_text(top['temperature'])}")}


def fastest_plain(bench: Path = RESULTS_DIR / "bench") -> dict:
    """`fastest_plain_values` of the bench table committed under ``bench`` (a missing table is an error)."""
    return fastest_plain_values(read_table(Path(bench) / "bench_comparisons.csv"))


def _median_by(spec, col: str, temperature: float = 1.0) -> dict:
    sub = spec[spec["temperature"] == temperature]
    return {v: float(g["speedup"].median()) for v, g in sub.groupby(col)}


def guide_rows(root: Path = RESULTS_DIR) -> list[dict]:
    """The decision guide's evidence, one row per rule of thumb, each with this report's numbers."""
    regimes = _t(root, "dec", "regimes").drop_duplicates("pair")
    drafts = _t(root, "dec", "draft_summary").dropna(subset=["c"])
    s = _t(root, "dec", "summary")
    spec = s[(s["config"] != "baseline") & (s["config"] != "dynamic")]
    by_b, by_len = _median_by(spec, "batch"), _median_by(spec, "output_len")
    greedy = float(spec.loc[spec["temperature"] == 0, "speedup"].median())
    pairs = "; ".join(f"{r['pair']}: T(2)/T(1) {r['t2_ratio']:.2f}, c in the loop {r['c']:.3f}, break-even alpha "
                      f"{r['break_even']:.2f}" for r in records(regimes))
    ac = "; ".join(f"{r['draft']}: alpha while decoding (chapter 06, k = {int(r['k'])}) {r['alpha_mle']:.2f} "
                   f"over c {r['c']:.3f}" for r in records(drafts))
    return [
        {"question": "Is the draft accepted often enough for its cost?",
         "rule": "In the idealized model some k pays exactly when alpha > c (at k = 1 the break-even alpha is c; "
                 "c from a model draft's isolated forwards, or a history drafter's propose time in the loop).",
         "this report": ac},
        {"question": "Does verifying k+1 tokens cost about one token?",
         "rule": "The further T(k+1)/T(1) is above 1, the higher the break-even alpha and the shorter the best k.",
         "this report": pairs},
        {"question": "Which batch size?",
         "rule": "Measure it: batching changes both the cost curve and the baseline.",
         "this report": "; ".join(f"batch {b}: median speedup {v:.2f}" for b, v in sorted(by_b.items()))
                        + " (temperature 1, fixed k)"},
        {"question": "How long are the outputs?",
         "rule": "Longer contexts make each forward dearer and acceptance changes along the text.",
         "this report": "; ".join(f"{n} tokens: median speedup {v:.2f}" for n, v in sorted(by_len.items()))
                        + " (temperature 1, fixed k)"},
        {"question": "Greedy or sampled?",
         "rule": "Acceptance depends on the temperature; measure at the temperature that will be served.",
         "this report": f"greedy: median speedup {greedy:.2f} over the fixed-k configurations timed"},
        _alternatives_row(root),
        _serving_row(root),
        _engines_row(root),
    ]


def _serving_row(root: Path) -> dict:
    """Chapter 09's evidence under continuous batching: each policy's latency speedup at the lightest
    and the heaviest arrival rate (interval, words) and its break-even rate with its interval."""
    sp, be = _t(root, "serve", "speedup"), _t(root, "serve", "break_even").set_index("policy")
    lo, hi = sp["rate"].min(), sp["rate"].max()
    rates = sorted(sp["rate"].unique())
    parts = []
    for pol, g in sp.groupby("policy", sort=False):
        a, b = g[g["rate"] == lo].iloc[0], g[g["rate"] == hi].iloc[0]
        e = next(be.loc[[pol]].reset_index().itertuples())
        parts.append(break_even_text(e, rates) + f"; {a['latency_speedup']:.2f} [{a['latency_lo']:.2f}, "
                     f"{a['latency_hi']:.2f}] at {lo:g} requests/s, {b['latency_speedup']:.2f} [{b['latency_lo']:.2f}, "
                     f"{b['latency_hi']:.2f}] at {hi:g}")
    return {"question": "Will it pay on a busy server?",
            "rule": "Speculation spends spare compute to cut latency, and a growing running batch uses that compute; "
                    "where it runs out depends on the hardware's cost curve, so measure the break-even load before "
                    "switching speculation off by batch size.",
            "this report": "; ".join(parts) + " (latency speedup over plain decoding, continuous batching)"}


def _engines_row(root: Path) -> dict:
    """Chapter 10's evidence: per engine, its speculative configurations' law tests (passed of run,
    which were rejected) and its best exact comparison with its own plain decoding (highest lower
    end; instruments and rows not the target's law are never read as speedups)."""
    path = Path(root) / CHAPTERS["eng"]
    if not (path / "laws.csv").exists():
        return {"question": "Does the engine you run keep the target's law?", "rule": ENGINE_RULE,
                "this report": "chapter 10 has not been run"}
    laws = records(read_table(path / "laws.csv"))
    speed = records(read_table(path / "speed.csv")) if (path / "speed.csv").exists() else []
    parts = []
    for engine in dict.fromkeys(r["engine"] for r in laws):
        done = [r for r in laws if r["engine"] == engine and r["role"] == "speculative" and r["status"] in ("pass", "reject")]
        spec = [r for r in done if str(r.get("patched")) not in ("True", "true", "1")]
        fixed = [r for r in done if r not in spec]
        bad = sorted({r["configuration"] for r in spec if r["status"] == "reject"})
        ok = [r for r in speed if r["engine"] == engine and r.get("verdict") in STATEMENTS and r.get("law") != INSTRUMENT]
        text = f"{engine}: {sum(r['status'] == 'pass' for r in spec)} of {len(spec)} law tests passed"
        if bad:
            text += f" (rejected: {'; '.join(bad)})"
        if fixed:
            text += f"; patched, {sum(r['status'] == 'pass' for r in fixed)} of {len(fixed)}"
        if ok:
            b = max(ok, key=lambda r: r["speedup_lo"])
            text += (f", best exact comparison {b['speedup']:.2f}x [{b['speedup_lo']:.2f}, {b['speedup_hi']:.2f}] "
                     f"({b['configuration']}, {b['setting']}, batch {int(b['batch'])}: {b['verdict']})")
        parts.append(text)
    return {"question": "Does the engine you run keep the target's law?", "rule": ENGINE_RULE,
            "this report": "; ".join(parts) + " (first two tokens; speedups over the engine's own plain decoding)"}


ENGINE_RULE = ("Test it on your pair before you time it: the law of the first tokens against the exact law, the "
               "engine's plain decoding as the control, a wrong rule that must fail; a configuration that fails "
               "is a different algorithm, and its speed is not a speedup.")


def _alternatives_row(root: Path) -> dict:
    """Chapter 08's evidence on approximate rules and precision at temperature 1: each measured
    approximate rule's speedup with its interval and its next-token TV on the real pair, and the TV
    that a float32 and a bfloat16 softmax add to plain decoding in the same precision."""
    real = _t(root, "alt", "rules_real").set_index("algorithm")["tv_median"]
    sp = _t(root, "alt", "speedup")
    sp = sp[(sp["temperature"] == 1.0) & ~sp["lossless"]]
    prec = _t(root, "alt", "precision_real")
    prec = prec[prec["config"] == prec["config"].iloc[0]].set_index("path")["tv_same_max"]
    rules = "; ".join(f"{r['algorithm']}: speedup {r['speedup_median']:.2f} [{r['speedup_lo']:.2f}, "
                      f"{r['speedup_hi']:.2f}], next-token TV {real[r['algorithm']]:.3f}" for r in records(sp))
    return {"question": "Accept more with an approximate rule, or compute in lower precision?",
            "rule": "A rule that changes the target's law is a different algorithm: name it and measure its "
                    "distance and its text; keep the probabilities in float32 or wider.",
            "this report": f"{rules}; float32 softmax adds TV {prec['float32 engine']:.1e}, "
                           f"a bfloat16 softmax {prec['bf16 softmax']:.1e}"}


def comparison_rows(published, root: Path = RESULTS_DIR) -> list[dict]:
    """Published rows (``published``: `specdec.chapters.summary.published.published_results`) beside this
    report's own best measured configurations (at batch 1, as the published rows are, and overall;
    tokens per step per row), with a ``whose`` column."""
    cols = ["method", "target", "hardware", "task", "temperature", "k", "acceptance", "mean_accepted_tokens", "speedup"]
    rows = [{"whose": f"theirs ({r['source']})", **{c: r[c] for c in cols}} for r in records(published)]
    for r in rows:  # this report's speedups carry an interval, so the column is text
        r["speedup"] = "" if r["speedup"] != r["speedup"] else f"{r['speedup']:.2f}"
    sp, prm = speed(root), _params(root, "dec")
    s = _t(root, "dec", "summary")
    spec = s[(s["config"] != "baseline") & (s["config"] != "dynamic")]
    d = _t(root, "dec", "draft_summary")
    used = str(d.loc[d["chosen"].astype(bool), "draft"].iloc[0]) if d["chosen"].astype(bool).any() else "model"
    target_params = int(_t(root, "family", "perplexity").set_index("model").loc["target", "params"])
    for label, pool in (("best at batch 1", spec[spec["batch"] == 1]), ("best overall", spec)):
        best = pool.loc[pool["speedup"].idxmax()]
        rows.append({"whose": f"this report (chapter 06, {label})", "method": f"speculative sampling, {used} draft",
                     "target": f"embedded GPT-2 ({target_params / 1e6:.1f}M)", "hardware": f"CPU, {prm['THREADS']} thread",
                     "task": "held-out Shakespeare prompts", "temperature": float(best["temperature"]), "k": int(best["k"]),
                     "acceptance": float(best["alpha_mle"]),
                     "mean_accepted_tokens": float(best["tokens_per_step"]),  # per row, as chapter 06 defines it
                     "speedup": f"{best['speedup']:.2f} ({best['speedup_lo']:.2f}-{best['speedup_hi']:.2f}), "
                                f"batch {best['batch']}, {best['output_len']} tokens"})
    rows.append({"whose": "this report (chapter 06)", "method": "controlled acceptance (instrumentation, not decoding)",
                 "target": f"{sp['real_name']} shape, random weights", "hardware": f"CPU, {prm['THREADS']} thread",
                 "task": "random context", "temperature": float("nan"), "k": None, "acceptance": None,
                 "mean_accepted_tokens": None,
                 "speedup": f"{sp['real_best']:.2f} ({sp['real_best_lo']:.2f}-{sp['real_best_hi']:.2f}) at {sp['real_best_at']}"})
    return rows


def scope(root: Path = RESULTS_DIR, reruns: Path = RERUNS_DIR) -> dict:
    """What the measurements cover, for the limitations: model scale, machine, lengths, batches,
    temperatures, prompts, how many intervals the measured chapters state, what each family's
    simultaneous intervals decided, and how chapter 06 agrees with its re-runs under ``reruns``
    (`specdec.report.robustness`)."""
    ppl = _t(root, "family", "perplexity").set_index("model")
    dec = _chapter(root, "dec")
    p6, p5, hw = dec["parameters"], _params(root, "acc"), dec["provenance"].get("hardware", {})
    s = _t(root, "dec", "summary")
    n_intervals = int((s["config"] != "baseline").sum() + len(_t(root, "dec", "draft_summary"))
                      + len(_t(root, "dec", "dynamic_vs_fixed")) + len(_t(root, "dec", "real_size_speedup_vs_alpha"))
                      + len(_t(root, "acc", "block_vs_token")) + len(_t(root, "dec", "prediction")))
    return {"target_params_m": float(ppl.loc["target", "params"]) / 1e6, "target_test_ppl": float(ppl.loc["target", "test_ppl"]),
            "threads": int(p6["THREADS"]), "prompt_len": int(p6["PROMPT_LEN"]),
            "output_lens": ", ".join(str(x) for x in p6["OUTPUT_LENS"]), "batches": ", ".join(str(x) for x in p6["BATCHES"]),
            "temperatures": ", ".join("greedy" if t == 0 else f"{t:g}" for t in p6["TEMPERATURES"]),
            "sweep_prompts": int(p6["PROMPTS"]), "rounds": int(p6["REPEATS"]), "acc_prompts": int(p5["N_PROMPTS"]),
            "n_intervals": n_intervals, "multiplicity": multiplicity_words(root),
            **rerun_values(s, reruns / CHAPTERS["dec"]), "real_new": int(p6["REAL_NEW"]), "draft_len": int(p6["DRAFT_LEN"]),
            "acc_k": int(p5["K"]), "tolerance": float(p6["TOLERANCE"]), "cpu": hw.get("cpu", "unnamed CPU"),
            "cpu_count": int(hw.get("cpu_count", 0))}
