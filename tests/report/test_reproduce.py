"""specdec.chapters.reproduction.status: each kind of table is compared as its sidecar says, and each
comparison rejects a planted difference (negative controls)."""

import pandas as pd

from specdec.chapters.reproduction.status import compare_frames


def _frame(kind, data, **meta):
    df = pd.DataFrame(data)
    df.attrs["meta"] = {"kind": kind, **meta}
    return df


def test_exact_tables_agree_to_rounding_and_catch_a_changed_value():
    old = _frame("exact", {"k": [1, 2], "v": [1.336363636363636, 0.5], "s": ["a", "b"]})
    same = _frame("exact", {"k": [1, 2], "v": [1.3363636363636362, 0.5], "s": ["a", "b"]})  # last bit differs
    assert compare_frames(same, old)["status"] == "reproduced"
    moved = _frame("exact", {"k": [1, 2], "v": [1.3364, 0.5], "s": ["a", "b"]})
    assert compare_frames(moved, old)["status"] == "differs" and "v" in compare_frames(moved, old)["detail"]
    relabelled = _frame("exact", {"k": [1, 2], "v": [1.336363636363636, 0.5], "s": ["a", "c"]})
    assert compare_frames(relabelled, old)["status"] == "differs"
    assert compare_frames(_frame("exact", {"k": [1]}), _frame("exact", {"k": [1, 2]}))["status"] == "differs"


def test_sampled_tables_use_their_intervals_errors_and_keys():
    meta = dict(intervals=[["a", "lo", "hi"]], se={"m": "se"}, keys=["verdict"])
    old = _frame("sampled", {"a": [0.5], "lo": [0.45], "hi": [0.55], "m": [2.0], "se": [0.01], "verdict": ["passes"]}, **meta)
    new = _frame("sampled", {"a": [0.53], "lo": [0.48], "hi": [0.58], "m": [2.03], "se": [0.01], "verdict": ["passes"]}, **meta)
    assert compare_frames(new, old)["status"] == "reproduced"
    far = new.copy()
    far["lo"], far["hi"] = [0.6], [0.7]
    assert "intervals do not overlap" in compare_frames(far, old)["detail"]
    off = new.copy()
    off["m"] = [2.1]  # 0.1 > 4 * sqrt(2) * 0.01
    assert "standard errors" in compare_frames(off, old)["detail"]
    flipped = new.copy()
    flipped["verdict"] = ["caught"]
    assert compare_frames(flipped, old)["status"] == "differs"
    bare = _frame("sampled", {"x": [1.0]})
    assert compare_frames(bare, _frame("sampled", {"x": [2.0]}))["status"] == "not compared"


def test_timing_tables_are_reported_never_asserted():
    old = _frame("timing", {"tokens_per_s": [100.0, 200.0], "wall_s": [1.0, 2.0], "k": [1, 2]})
    new = _frame("timing", {"tokens_per_s": [50.0, 400.0], "wall_s": [1.0, 2.0], "k": [1, 2]})
    r = compare_frames(new, old)
    assert r["status"] == "timing" and "median 1.00" in r["detail"] and "0.50-2.00" in r["detail"]
