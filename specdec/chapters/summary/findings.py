"""The front page's numbers, read from the chapters' committed tables: what the exactness chapters
established, chapter 06's counts by verdict, the acceptance the page quotes, the guide's evidence
and the scope of the measurements.  Nothing here measures and nothing here writes a sentence: every
function returns numbers, verdict words and labels, and the page's markdown says what they mean.
Every function reads the tables the chapters wrote under ``root`` (`specdec.io.paths.RESULTS_DIR`
by default), so the page updates itself when they change.

Example: speed()["n_spec"] == sum(speed()[k] for k in ("n_faster", "n_slower", "n_undecided", "n_too_few"))
"""

from __future__ import annotations

import json
from pathlib import Path

from specdec.io.paths import CHAPTERS, RESULTS_DIR
from specdec.io.results import read_table, records

__all__ = ["exactness", "speed", "fastest_plain", "acceptance", "guide", "scope", "FAST_BASE_KEYS", "chapter_table", "chapter_parameters"]


def chapter_table(root: Path, chapter: str, name: str):
    """A chapter's committed table ``name`` (its CSV under ``root``)."""
    return read_table(Path(root) / CHAPTERS[chapter] / f"{name}.csv")


def _chapter(root: Path, chapter: str) -> dict:
    """The chapter's chapter.json: its parameters and the provenance of its run."""
    return json.loads((Path(root) / CHAPTERS[chapter] / "chapter.json").read_text())


def chapter_parameters(root: Path, chapter: str) -> dict:
    return _chapter(root, chapter)["parameters"]


def exactness(root: Path = RESULTS_DIR) -> dict:
    """Largest |law - p| over chapter 02's exact grid (and how many settings it enumerates); the
    correct algorithms' frequency tests (smallest p-value) and their design (the total variation
    ``freq_eps`` detected with power ``freq_power``); wrong variants caught out of those tried."""
    grid = chapter_table(root, "seq", "exact_grid")
    freq = chapter_table(root, "seq", "frequency_tests")
    correct = freq[freq["bug"] == "(correct)"]
    wrong = freq[freq["bug"] != "(correct)"]
    design = chapter_parameters(root, "seq")
    return {"law_err": float(grid["max_abs_error"].max()), "law_configs": int(len(grid)),
            "correct_min_p": float(correct["p_value"].min()), "freq_eps": float(design["EPS"]),
            "freq_power": float(design["POWER"]), "n_variants": int(len(wrong)),
            "n_caught": int((wrong["verdict"] == "caught").sum())}


def speed(root: Path = RESULTS_DIR, bench: Path = RESULTS_DIR / "bench") -> dict:
    """Chapter 06's speculative settings by verdict (each a paired 95% interval): faster, slower,
    too few pairs for the level (no interval could decide: counted apart, never as undecided) and
    undecided (the rest); ``gpu_state``:
    "measured" when chapter 07 holds GPU tables, else "unmeasured"; and `fastest_plain` of the engine
    benchmark under ``bench``."""
    s = chapter_table(root, "dec", "summary")
    spec = s[s["config"] != "baseline"]
    few = spec["verdict"].astype(str).str.startswith("too few pairs")
    status = records(chapter_table(root, "gpu", "status"))[0]
    return {"n_spec": int(len(spec)), "n_faster": int((spec["verdict"] == "faster").sum()),
            "n_slower": int((spec["verdict"] == "slower").sum()), "n_too_few": int(few.sum()),
            "n_undecided": int((~spec["verdict"].isin(["faster", "slower"]) & ~few).sum()),
            "gpu_state": "measured" if bool(status["real_gpu"]) else "unmeasured", **fastest_plain(bench)}


# per mode, the value names of our greedy batch-1 baseline's median and interval ends (`fastest_plain`)
FAST_BASE_KEYS = {"eager": ("fast_base", "fast_base_lo", "fast_base_hi"),
                  "lean": ("fast_lbase", "fast_lbase_lo", "fast_lbase_hi"),
                  "compiled": ("fast_cbase", "fast_cbase_lo", "fast_cbase_hi")}


def fastest_plain(bench: Path = RESULTS_DIR / "bench") -> dict:
    """Our greedy batch-1 plain decoding against Hugging Face's compiled plain `generate`, its fastest
    plain decoding measured, from the engine benchmark's comparison table under ``bench``: per
    execution mode the median ratio with its interval (``fast_base`` eager; ``fast_lbase`` lean, the
    baseline of chapter 06's speedups; ``fast_cbase`` compiled; a mode the bench did not run is left
    out).  A missing table, or one without the eager check, is an error."""
    rows = records(read_table(Path(bench) / "bench_comparisons.csv"))
    fast = [{"mode": "eager", **r} for r in rows if r["comparison"] == "vs_hf_compiled_ar"]
    out = {}
    for mode, keys in FAST_BASE_KEYS.items():
        base = [r for r in fast if (r["mode"], r["k"], r["batch"], r["temperature"]) == (mode, 0, 1, 0.0)]
        if not base and mode != "eager":
            continue
        if not base:
            raise ValueError(f"the bench table has no check against Hugging Face's compiled generate (vs_hf_compiled_ar, "
                             f"{mode} greedy batch 1): re-run make bench")
        out.update(zip(keys, (float(base[0]["median"]), float(base[0]["lo"]), float(base[0]["hi"])), strict=True))
    return out


def acceptance(root: Path = RESULTS_DIR) -> dict:
    """The acceptance of chapter 06's chosen draft as chapter 05 measured it (token verification,
    temperature 1, no top-p, k = its K; ``alpha05`` with its 95% interval over prompts).  Chapter 06
    measures it again while decoding (`front.reference`'s ``ref_alpha``, k = K_REF): two runs, two
    draft lengths, two measurements."""
    d = chapter_table(root, "dec", "draft_summary")
    draft = str(d.loc[d["chosen"].astype(bool), "draft"].iloc[0])
    a = chapter_table(root, "acc", "alpha_vs_temperature")
    a = records(a[(a["draft"] == draft) & (a["method"] == "token") & (a["temperature"] == 1.0) & (a["top_p"] == 1.0)])
    if len(a) != 1:
        raise ValueError(f"chapter 05 has {len(a)} rows for {draft}, token verification, temperature 1 (one expected)")
    return {"acc_draft": draft, "alpha05": float(a[0]["alpha_mle"]), "alpha05_lo": float(a[0]["lo"]),
            "alpha05_hi": float(a[0]["hi"]), "k05": int(chapter_parameters(root, "acc")["K"])}


def _median_at(spec, column: str, value) -> float:
    return float(spec.loc[spec[column] == value, "speedup"].median())


def guide(root: Path = RESULTS_DIR) -> dict:
    """The guide's evidence: chapter 06's median speedup of the fixed-k settings at temperature 1 at
    its smallest and largest batch, and at batch 1 greedy and at temperature 1; chapter 05's block
    against token verification (undecided of compared); chapter 09's latency comparisons (undecided
    of (policy, rate) cells); chapter 08's approximate rules at temperature 1 (faster of measured)."""
    s = chapter_table(root, "dec", "summary")
    fixed = s[s["config"].astype(str).str.startswith("k=")]
    t1, b1 = fixed[fixed["temperature"] == 1.0], fixed[fixed["batch"] == 1]
    bt = chapter_table(root, "acc", "block_vs_token")
    serve = chapter_table(root, "serve", "speedup")
    alt = read_table(root / "alternatives" / "speedup.csv")  # `make alternatives`' runs
    approx = alt[(alt["temperature"] == 1.0) & ~alt["lossless"].astype(bool)]
    b_lo, b_hi = int(t1["batch"].min()), int(t1["batch"].max())
    return {"batch_small": b_lo, "batch_large": b_hi, "median_batch_small": _median_at(t1, "batch", b_lo),
            "median_batch_large": _median_at(t1, "batch", b_hi), "median_greedy": _median_at(b1, "temperature", 0.0),
            "median_sampled": _median_at(b1, "temperature", 1.0),
            "bt_undecided": int((~bt["words"].isin(["faster", "slower", "higher", "lower"])).sum()), "bt_n": int(len(bt)),
            "serve_undecided": int((serve["verdict"] == "undecided").sum()), "serve_n": int(len(serve)),
            "approx_faster": int((approx["verdict"] == "faster").sum()), "approx_n": int(len(approx))}


def scope(root: Path = RESULTS_DIR) -> dict:
    """What chapter 06's measurements cover: the target's size (millions of parameters), the machine
    (CPU, cores, torch threads) and the prompts and rounds behind each setting's interval per run."""
    ppl = chapter_table(root, "family", "perplexity").set_index("model")
    dec = _chapter(root, "dec")
    p6, hw = dec["parameters"], dec["provenance"].get("hardware", {})
    return {"target_params_m": float(ppl.loc["target", "params"]) / 1e6, "threads": int(p6["THREADS"]),
            "sweep_prompts": int(p6["PROMPTS"]), "rounds": int(p6["REPEATS"]),
            "cpu": hw.get("cpu", "unnamed CPU"), "cpu_count": int(hw.get("cpu_count", 0))}
