"""Chapter 08's evidence tables on the toy pair: lossless rows exact, approximate rows at a positive
TV and caught by the frequency test at the sample size their own TV calls for, the multi-draft
bound, the precision paths."""

import numpy as np
import pytest
import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.toy import toy_pair
from specdec.chapters.ch08 import exact as ev

CFG = SamplingConfig(1.0)


@pytest.fixture(scope="module")
def pair():
    return toy_pair(4, 3, torch.Generator().manual_seed(7))


@pytest.fixture(scope="module")
def algs():
    return ev.entries((2,), ((0.4, 0.63),), (0.5,), (2,))


def test_entries_name_every_algorithm_once_with_its_family(algs):
    names = [e.name for e in algs]
    assert len(names) == len(set(names))
    fam = {e.name: e.family for e in algs}
    assert {fam[n] for n in ("token", "block", "match", "one-hot q", "multi-draft n=2")} == {"lossless"}
    assert fam["greedy draft, sampled target"] == "approximate"
    assert sum(f == "approximate" for f in fam.values()) == 6  # 2 typical, 2 relaxed, top-2, greedy draft


def test_exact_rows(pair, algs):
    rows = {r["algorithm"]: r for r in ev.exact_rows(*pair, algs, 3, 2, CFG)}
    for r in rows.values():
        if r["family"] == "lossless":
            assert r["max_abs_error"] < 1e-12 and r["kl"] < 1e-12
        else:
            assert r["tv"] > 0.05 and r["kl"] > 0 and r["tv_1"] <= r["tv_3"] + 1e-12
    assert rows["match"]["expected_tokens"] == pytest.approx(rows["one-hot q"]["expected_tokens"], abs=1e-12)
    assert rows["multi-draft n=2"]["expected_tokens"] > rows["token"]["expected_tokens"]
    assert rows["greedy draft, sampled target"]["expected_tokens"] != pytest.approx(rows["token"]["expected_tokens"])


def test_frequency_rows_pass_lossless_and_catch_lossy_at_their_detect_size(pair, algs):
    pick = [e for e in algs if e.name in ("token", "match", "multi-draft n=2", "top-2 membership",
                                          "greedy draft, sampled target")]
    rows = ev.frequency_rows(*pair, pick, 3, 2, CFG, 0.1, 1e-3, 0.999, 3, 50_000)
    for r in rows:
        if r["family"] == "lossless":
            assert r["verdict"] == "passes" and r["detect_samples"] == 0
        else:
            assert r["verdict"] == "caught" and 0 < r["detect_samples"] <= 50_000
    assert {r["run"] for r in rows if r["family"] == "approximate"} == {"design", "detect"}


def test_detect_samples_is_zero_for_the_same_law_and_falls_with_the_distance():
    ref = np.array([0.4, 0.3, 0.2, 0.1])
    assert ev.detect_samples(ref, ref, 1e-3, 0.99) == (0, 0.0)
    near, far = np.array([0.38, 0.32, 0.2, 0.1]), np.array([0.2, 0.5, 0.2, 0.1])
    assert ev.detect_samples(near, ref, 1e-3, 0.99)[0] > ev.detect_samples(far, ref, 1e-3, 0.99)[0] > 0


def test_multidraft_and_precision_rows(pair):
    md = ev.multidraft_rows(ev.small_pairs(*pair, CFG, 4, 1, 0), 3)
    assert len(md) == 6
    for r in md:
        assert r["rrs"] <= r["optimal"] + 1e-12 and r["optimal"] == pytest.approx(r["optimal_lp"], abs=1e-9)
    prec = {r["path"]: r for r in ev.precision_rows(*pair, 2, 2, CFG, 1e-3, 0.999)}
    assert prec["exact (float64)"]["tv_exact"] < 1e-15 and prec["exact (float64)"]["detect_exact"] == 0
    assert prec["bf16 softmax"]["tv_same_precision"] > 100 * prec["bf16 logits, float32 softmax"]["tv_same_precision"]


def test_per_setting_labels_each_settings_rows():
    seen = []
    rows = ev.per_setting(lambda c: seen.append(c) or [{"t": c.temperature}, {"t": -1}], [[1.0, None, None], [1.2, 3, 0.9]])
    assert [r["config"] for r in rows] == ["τ=1", "τ=1", "τ=1.2, top-k 3, top-p 0.9", "τ=1.2, top-k 3, top-p 0.9"]
    assert rows[2]["t"] == 1.2 and seen[1].top_k == 3 and seen[1].top_p == 0.9
