"""What chapter 10's time-breakdown section shows (`specdec.chapters.ch10.breakdown`), on small
hand-made tables: each engine against ours with the reference's fraction at batch 1 only, the
speculative rows at the page's k within a page's width, the head-to-head rows with the rule "ours at
least as fast" decided on the inverse interval, "-" where a number is missing (never "nan"), and
the glued numbers read from the rows they name."""

import pandas as pd
import pytest

from specdec.chapters.ch10 import breakdown
from specdec.report.formatting import MAX_COLUMNS

NAN = float("nan")


def _tables():
    plain = pd.DataFrame([
        {"engine": "llama.cpp", "setting": "greedy", "batch": 1, "prompts": 3, "pairs": 12, "relative_speed": 1.2,
         "relative_lo": 1.1, "relative_hi": 1.3, "tokens_per_s": 150.0, "reference_tokens_per_s": 125.0,
         "verdict": "faster"},
        {"engine": "vllm", "setting": "greedy", "batch": 1, "prompts": 3, "pairs": 12, "relative_speed": 0.5,
         "relative_lo": 0.4, "relative_hi": 0.6, "tokens_per_s": 62.5, "reference_tokens_per_s": 125.0,
         "verdict": "slower"},
        {"engine": "vllm", "setting": "greedy", "batch": 8, "prompts": 3, "pairs": 12, "relative_speed": 0.9,
         "relative_lo": 0.8, "relative_hi": 1.05, "tokens_per_s": 450.0, "reference_tokens_per_s": 500.0,
         "verdict": "undecided"}])
    spec = pd.DataFrame([
        {"engine": e, "configuration": f"draft model, k = {k}", "setting": "greedy", "batch": b, "k": k, "prompts": 3,
         "pairs": 12, "speedup": s, "speedup_lo": s - 0.1, "speedup_hi": s + 0.1, "plain_tokens_per_s": 100.0,
         "tokens_per_s": 100.0 * s, "tokens_per_forward": 1.5, "step_cost": 1.5 / s, "law": "greedy outputs equal",
         "verdict": "faster" if s - 0.1 > 1 else "slower" if s + 0.1 < 1 else "undecided"}
        for e, b, k, s in (("ours", 1, 2, 1.2), ("ours", 1, 4, 0.8), ("ours", 8, 2, 1.05), ("llama.cpp", 1, 2, 0.85),
                           ("vllm", 1, 2, 1.15), ("vllm", 8, 2, NAN))])
    forwards = pd.DataFrame([
        *[{"engine": e, "n": n, "forward_ms": 8.0 * r, "ratio": r, "k": NAN, "draft_ratio": NAN, "predicted_cost": NAN}
          for e in ("ours", "llama.cpp") for n, r in ((1, 1.0), (2, 1.2), (3, 1.5), (5, 1.7))],
        *[{"engine": e, "n": NAN, "forward_ms": NAN, "ratio": NAN, "k": 2, "draft_ratio": c, "predicted_cost": 1.5 + 2 * c}
          for e, c in (("ours", 0.08), ("llama.cpp", 0.04))]])
    split = pd.DataFrame([{"engine": e, "batch": b, "length": 128, "forward_s": 0.008 * b, "outside_s": 0.0002,
                           "ms unprofiled step": 9.0 * b + x, "ms matrix products": 4.0 * b + x,
                           "ms attention": 0.5, "ms copies": 0.1, "ms other": 1.0,
                           "ms outside operators": 1.0 + 3 * x, "ms profiled step": 7.0 * b + 3 * x, "rounds": 2}
                          for e, x in (("ours", 0.0), ("vllm", 1.0)) for b in (1, 8)])
    limit = pd.DataFrame([{"bandwidth_bytes_per_s": 12e9, "weight_bytes": 60_000_000, "tokens_per_s": 200.0,
                           "threads": 1}])
    cache = pd.DataFrame([{"change": c, "batch": b, "length": 128, "pairs": 12, "gain": g + d, "gain_lo": g + d - 0.05,
                           "gain_hi": g + d + 0.05, "verdict": v} for b, g, v in ((1, 1.0, "undecided"), (8, 1.2, "faster"))
                          for c, d in (("in-place cache", 0.0), ("kernel", 0.4), ("packed weights", 0.1))])
    versus = pd.DataFrame([
        {"comparison": c, "setting": "greedy", "batch": b, "engine": e, "configuration": cfg,
         "reference_configuration": "plain decoding", "prompts": 3, "pairs": 12, "relative_speed": r,
         "relative_lo": lo, "relative_hi": hi, "tokens_per_s": 100.0 * r, "reference_tokens_per_s": 100.0,
         "same_tokens": True, "verdict": v}
        for c, b, e, cfg, r, lo, hi, v in (
            ("best exact, greedy", 1, "vllm", "plain decoding", 0.5, 0.45, 0.55, "slower"),  # ours 2x: yes
            ("best exact, greedy", 8, "vllm", "draft model, k = 1", 0.98, 0.95, 1.02, "undecided"),  # 1/1.02 >= 0.97
            ("best k, greedy", 8, "vllm", "draft model, k = 2", 0.99, 0.90, 1.05, "undecided"),  # 1/1.05 < 0.97: no
            ("best exact, greedy", 1, "llama.cpp", "plain decoding", 1.3, 1.2, 1.4, "faster"),
            ("best k, greedy", 1, "llama.cpp", "draft model, k = 2", NAN, NAN, NAN, "not timed: gone"))])
    return {"plain": plain, "speculative": spec, "forwards": forwards, "split": split, "limit": limit, "cache": cache,
            "versus": versus}


def test_plain_view_puts_ours_as_the_reference_and_the_fraction_at_batch_1_only():
    v = breakdown.plain_view(_tables())
    assert list(zip(v["engine"], v["batch"])) == [("llama.cpp", 1), ("ours", 1), ("vllm", 1), ("ours", 8), ("vllm", 8)]
    assert list(v["of the reference"]) == ["0.75", "0.62", "0.31", "-", "-"]
    assert list(v["95% interval"])[1] == "-" and "nan" not in v.to_string()


def test_economics_view_shows_the_pages_k_within_the_page_width():
    v = breakdown.economics_view(_tables(), (2,))
    assert len(v) == 5 and len(v.columns) <= MAX_COLUMNS
    assert list(v["speedup [95%]"])[:2] == ["1.20 [1.10, 1.30]", "1.05 [0.95, 1.15]"]
    assert list(v["speedup [95%]"])[-1] == "-" and "nan" not in v.to_string()


def test_versus_view_decides_ours_at_least_as_fast_by_the_inverse_interval():
    v = breakdown.versus_view(_tables())
    assert len(v.columns) <= MAX_COLUMNS and "nan" not in v.to_string()
    assert list(v["ours >= it"]) == ["yes", "yes", "no", "no", "no"]  # an untimed row is no
    assert list(v["engine: configuration"])[1] == "vllm: draft model, k = 1" and set(v["ours"]) == {"plain"}
    assert breakdown._short("draft model, k = 2, probabilistic drafts (rejection)") == "draft model, k = 2, probabilistic"
    assert breakdown._short("token verification, k = 2") == "token, k = 2"
    assert list(v["speed / ours [95%]"])[-1] == "-"


def test_split_view_shows_each_engines_parts_in_milliseconds_per_step():
    v = breakdown.split_view(_tables())
    assert len(v.columns) <= MAX_COLUMNS and list(v["engine, batch"]) == ["ours, 1", "ours, 8", "vllm, 1", "vllm, 8"]
    assert list(v["matrix products"]) == ["4.00", "32.00", "5.00", "33.00"] and list(v["unprofiled step"])[2] == "10.00"
    assert list(v["other operators"])[0] == "1.10" and list(v["outside operators"])[2] == "4.00"


def test_values_read_the_rows_they_name():
    got = breakdown.values(_tables())
    assert got["bd_length"] == 128
    assert (got["vs_ours_ge"], got["vs_n"], got["vs_faster"], got["vs_slower"]) == (2, 5, 1, 1)
    assert (got["vs_pairs"], got["vs_prompts"]) == (12, 3)
    assert got["ours_over_llama_b1"] == "0.83" and got["ours_over_llama_b1_iv"] == "[0.77, 0.91]"
    assert (got["vs_llama_exact_b1"], got["vs_llama_k_b1"]) == ("faster", "not timed: gone")
    assert got["grow_b8"] == "1.20" and got["grow_b1_iv"] == "[0.95, 1.05]"
    assert (got["kernel_b1"], got["kernel_b8_iv"], got["packed_b8"]) == ("1.40", "[1.55, 1.65]", "1.30")
    assert (got["ours_mm_b8"], got["vllm_mm_b8"], got["ours_outside_b1"], got["vllm_outside_b1"]) == \
        ("32.00", "33.00", "1.00", "4.00") and got["split_rounds"] == 2
    assert got["ref_tps"] == "200" and got["ref_gbs"] == "12.0" and got["weights_mb"] == "60.0"
    with pytest.raises(KeyError, match="expected one row"):
        breakdown._row(_tables()["plain"], engine="hf")
