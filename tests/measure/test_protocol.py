"""specdec.measure.protocol: a synthetic timing source with a known speedup is recovered inside its
interval (and an interval that excludes 1 says so); the words follow the interval; a contended run
is flagged and re-run by the harness (negative control: an uncontended run is not); the words at
the boundaries (an interval that touches 1 is undecided) and a NaN end refused, one pair worded by
the caller instead."""

import time

import numpy as np
import pytest

from specdec.measure.harness import Cell, Config, sweep
from specdec.measure.protocol import ONE_RUN, comparison, paired_interval, paired_speedups, summarize, verdict


def test_a_known_speedup_is_recovered_within_its_interval():
    """Baseline times lognormal around 1.0, the configuration's 1.0 / 1.25 with independent noise
    (sd 5%): the median ratio's 95% interval holds 1.25 in most seeded trials and is 'faster'."""
    hits, faster = 0, 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        base = np.exp(rng.normal(0, 0.05, 24))
        cfg = np.exp(rng.normal(0, 0.05, 24)) / 1.25
        med, lo, hi = paired_interval(base, cfg, seed=seed)
        hits += lo <= 1.25 <= hi
        faster += verdict(lo, hi) == "faster"
    assert hits >= 32 and faster == 40  # 95% nominal: >= 32 of 40 has probability > 0.99


def test_no_difference_is_not_called_faster():
    rng = np.random.default_rng(0)
    base, cfg = np.exp(rng.normal(0, 0.05, 24)), np.exp(rng.normal(0, 0.05, 24))
    med, lo, hi = paired_interval(base, cfg)
    assert lo < 1 < hi and verdict(lo, hi) == "undecided"
    assert verdict(0.8, 0.95) == "slower" and verdict(1.01, 1.2) == "faster"
    with pytest.raises(ValueError):
        paired_interval([1.0, 2.0], [1.0])


def test_paired_speedups_need_a_paired_design():
    rows = [{"impl": "base", "cell": 0, "wall_s": 2.0, "tokens": 4}, {"impl": "x", "cell": 0, "wall_s": 1.0, "tokens": 4},
            {"impl": "base", "cell": 1, "wall_s": 2.2, "tokens": 4}, {"impl": "x", "cell": 1, "wall_s": 1.0, "tokens": 4}]
    out = paired_speedups(rows, baseline="base", keys=("cell",))
    assert [r["speedup"] for r in out] == [1.0, 2.0, 1.0, pytest.approx(2.2)]
    s = {r["impl"]: r for r in summarize(out, by=("impl",))}
    assert s["x"]["speedup_median"] == pytest.approx(2.1) and s["x"]["runs"] == 2
    with pytest.raises(ValueError, match="not paired"):
        paired_speedups(rows + [{"impl": "x", "cell": 2, "wall_s": 1.0, "tokens": 4}], baseline="base", keys=("cell",))


def test_a_contended_run_is_flagged_and_rerun():
    """A run that sleeps for most of its wall time has a CPU share near 0: the harness runs it again
    (bounded) and records it; a busy run is not re-run.  The threshold is 0.3 so that the busy run
    passes on a machine shared with other jobs (its share there is about 1 / the load)."""
    calls = {"idle": 0, "busy": 0}

    def idle(x, seed):
        calls["idle"] += 1
        time.sleep(0.05)
        return {"tokens": 1, "total_s": 0.05}

    def busy(x, seed):
        calls["busy"] += 1
        t = time.process_time()
        while time.process_time() - t < 0.05:
            pass
        return {"tokens": 1, "total_s": 0.05}

    rows = sweep([Config("idle", idle), Config("busy", busy)], [Cell({}, None)], repeats=1, min_share=0.3,
                 max_reruns=2)
    by = {r["config"]: r for r in rows}
    assert by["idle"]["reruns"] == 2 and calls["idle"] == 3 and by["idle"]["cpu_share"] < 0.3
    assert by["busy"]["reruns"] == 0 and calls["busy"] == 1 and by["busy"]["cpu_share"] > 0.3


def test_bonferroni_level_and_simultaneous_verdicts():
    """Ten comparisons at 95% together: each at 99.5%; a speedup whose 95% interval just clears 1
    can lose that word in the simultaneous interval (wider), never the other way round."""
    from specdec.measure.protocol import bonferroni

    assert bonferroni(0.95, 10) == pytest.approx(0.995) and bonferroni(0.95, 1) == 0.95
    with pytest.raises(ValueError):
        bonferroni(0.95, 0)
    rng = np.random.default_rng(3)
    rows = []
    for g in range(10):
        for i in range(12):
            base = float(np.exp(rng.normal(0, 0.04)))
            rows.append({"g": g, "base_s_per_token": base, "wall_s": base / 1.03 * float(np.exp(rng.normal(0, 0.04))),
                         "tokens": 1})
    out = summarize(rows, by=("g",))
    for r in out:
        assert r["speedup_lo_sim"] <= r["speedup_lo"] <= r["speedup_hi"] <= r["speedup_hi_sim"]
    assert sum(r["verdict"] == "faster" for r in out) >= sum(r["verdict_sim"] == "faster" for r in out)
    assert any(r["verdict"] != r["verdict_sim"] for r in out)  # the correction changes some words here


def test_repeats_for_half_width_matches_the_median_standard_error():
    """Pinned to the formula: rel sd 5% -> ceil((1.95996 * 1.25331 * 0.05 / 0.03)^2) = 17; and the
    interval achieved with that many normal pairs has a half-width near 3% (simulation)."""
    from specdec.measure.protocol import repeats_for_half_width

    assert repeats_for_half_width(0.05) == 17
    assert repeats_for_half_width(0.0) == 2 and repeats_for_half_width(0.10, half_width=0.05) == 25
    with pytest.raises(ValueError):
        repeats_for_half_width(float("nan"))
    rng = np.random.default_rng(0)
    n = repeats_for_half_width(0.05)
    widths = []
    for s in range(20):
        x = 1.2 * (1 + rng.normal(0, 0.05, n))
        med, lo, hi = paired_interval(x, np.ones(n), seed=s)
        widths.append((hi - lo) / 2 / med)
    assert 0.02 < float(np.median(widths)) < 0.04


def test_spec_bench_convention_mean_and_sd_over_runs():
    from specdec.measure.protocol import spec_bench

    rows = [{"c": "k=2", "repeat": 0, "prompt": 0, "speedup": 1.0}, {"c": "k=2", "repeat": 0, "prompt": 1, "speedup": 1.2},
            {"c": "k=2", "repeat": 1, "prompt": 0, "speedup": 1.1}, {"c": "k=2", "repeat": 1, "prompt": 1, "speedup": 1.3}]
    (r,) = spec_bench(rows, by=("c",))
    assert r["speedup_mean"] == pytest.approx(1.15) and r["speedup_sd"] == pytest.approx(0.1 / np.sqrt(2))
    assert r["runs"] == 2


def test_median_interval_hand_worked_and_levels_out_of_reach():
    """Order statistics of the median: n = 6 at 95% -> [min, max], coverage 1 - 2/64; n = 12 at 99%
    -> [x_(2), x_(11)], coverage 1 - 2 * 13/4096 (P(Bin(12, 1/2) <= 1) = 13/4096); n = 5 cannot reach
    95% (1 - 2/32 = 93.75%): no interval, and the coverage it could reach."""
    from specdec.measure.protocol import max_level, median_interval, pairs_for_level

    assert median_interval([3, 1, 2, 5, 4, 6], 0.95) == (1.0, 6.0, 0.96875)
    assert median_interval(np.arange(12.0)[::-1], 0.99) == (1.0, 10.0, pytest.approx(1 - 26 / 4096))
    lo, hi, cover = median_interval([1, 2, 3, 4, 5], 0.95)
    assert np.isnan(lo) and np.isnan(hi) and cover == 0.9375
    assert max_level(6) == 0.96875 and max_level(0) == 0.0 and max_level(1) == 0.0
    assert pairs_for_level(0.95) == 6 and pairs_for_level(1 - 0.05 / 30) == 11 and pairs_for_level(0.9375) == 5
    with pytest.raises(ValueError):
        median_interval([1.0, float("nan")])
    with pytest.raises(ValueError):
        pairs_for_level(1.0)


def test_median_interval_has_its_stated_coverage_where_the_bootstrap_falls_short():
    """Seeded simulation.  Exact interval, n = 12 at 99%: coverage 1 - 26/4096 = 0.99365; over 4000
    lognormal samples the observed share is within 4 standard errors (0.005) of it.  Negative
    control: the percentile bootstrap asked for 99.8% (a 25-comparison family) with 6 pairs stays
    inside [min, max], so it covers at most 96.9%: observed below 0.99 in 400 trials (a true 96.9%
    reaches 0.99 with probability < 1%)."""
    from specdec.measure.protocol import median_interval

    rng = np.random.default_rng(11)
    true_median = 1.1  # lognormal(log 1.1, 0.05): median 1.1
    x = np.sort(np.exp(rng.normal(np.log(true_median), 0.05, (4000, 12))), axis=1)
    lo, hi, cover = median_interval(x[0], 0.99)
    hits = np.mean((x[:, 1] <= true_median) & (true_median <= x[:, 10]))  # the same order statistics
    assert (lo, hi) == (x[0, 1], x[0, 10])  # the order statistics whose coverage the hits count
    assert cover == pytest.approx(1 - 26 / 4096) and abs(hits - cover) < 0.005
    boot = 0
    for s in range(400):
        b = np.exp(rng.normal(np.log(true_median), 0.05, 6))
        _, blo, bhi = paired_interval(b, np.ones(6), level=0.998, seed=s, n_resamples=300)
        boot += blo <= true_median <= bhi
    assert boot / 400 < 0.99


def test_paired_speedups_refuses_keys_that_do_not_identify_a_pair():
    """Two baseline runs on the same keys (e.g. two execution modes, the mode left out of the keys)
    would pair silently with whichever came last."""
    from specdec.measure.protocol import paired_speedups

    rows = [{"impl": "ours_ar", "mode": m, "prompt": 0, "wall_s": w, "tokens": 10} for m, w in (("eager", 1.0), ("compiled", 0.8))]
    with pytest.raises(ValueError, match="do not identify a pair"):
        paired_speedups(rows, baseline="ours_ar", keys=("prompt",))
    assert [r["speedup"] for r in paired_speedups(rows, baseline="ours_ar", keys=("mode", "prompt"))] == [1.0, 1.0]


def _rows(groups: dict) -> list[dict]:
    """Rows with base_s_per_token 1 and wall times 1 / speedup, one per given speedup, per group."""
    return [{"g": g, "base_s_per_token": 1.0, "wall_s": 1.0 / s, "tokens": 1} for g, sp in groups.items() for s in sp]


def test_a_median_above_1_with_an_interval_reaching_below_1_is_not_faster():
    """The rule every page's words rest on: "faster" only when the whole interval is above 1.  Twelve
    pairs with speedups spread around 1.03 (median above 1, both intervals reaching below 1, asserted)
    must say "no difference", in the bootstrap and the simultaneous verdict, through `comparison` and
    `summarize`; mirrored (speedups inverted), not "slower" either.  Control: the same spread
    shifted up by 0.2 is faster."""
    from specdec.measure.protocol import comparison

    sp = np.array([0.85, 0.9, 0.94, 0.97, 1.01, 1.03, 1.04, 1.06, 1.1, 1.14, 1.2, 1.25])
    none = "undecided"
    for s, word, side in ((sp, none, 1), (1 / sp, none, -1), (sp + 0.2, "faster", 1)):
        c = comparison(np.ones(12), 1 / s, family_size=3)
        assert (c["median"] - 1) * side > 0
        if word == none:
            assert c["lo"] < 1 < c["hi"] and c["lo_sim"] < 1 < c["hi_sim"]
        assert c["verdict"] == word and c["verdict_sim"] == word
        row = summarize(_rows({0: list(s), 1: list(s), 2: list(s)}), by=("g",))[0]
        assert row["verdict"] == word and row["verdict_sim"] == word


def test_summarize_takes_the_number_of_groups_as_the_family():
    """Three groups, no family_size given: each simultaneous interval is at 1 - 0.05 / 3 (Bonferroni over
    the three), not at 95% (a family of 1); family_size = 5 sets 1 - 0.05 / 5 instead.  Twelve pairs
    reach 1 - 0.05/3 (`max_level(12)` = 0.9995), so the level sets the interval: the simultaneous one
    is wider than the 95% one."""
    rng = np.random.default_rng(2)
    rows = _rows({g: list(np.exp(rng.normal(0.05, 0.05, 12))) for g in range(3)})
    out = summarize(rows, by=("g",))
    assert [r["level_sim"] for r in out] == [pytest.approx(1 - 0.05 / 3)] * 3
    assert [r["pairs_sim"] for r in out] == [7] * 3
    for r in out:
        assert r["speedup_lo_sim"] < r["speedup_lo"] and r["speedup_hi"] < r["speedup_hi_sim"]
    assert [r["level_sim"] for r in summarize(rows, by=("g",), family_size=5)] == [pytest.approx(0.99)] * 3
    one = summarize(rows[:12], by=("g",))  # one group: a family of one
    assert one[0]["level_sim"] == pytest.approx(0.95)


def test_an_interval_that_touches_1_is_undecided():
    """"faster" only when ALL of the interval lies above 1: a low end of exactly 1 is undecided, and
    so is a high end of exactly 1; the nearest floats beyond 1 give the words."""
    above, below = np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0)
    assert verdict(1.0, 1.2) == "undecided" and verdict(above, 1.2) == "faster"
    assert verdict(0.8, 1.0) == "undecided" and verdict(0.8, below) == "slower"
    assert verdict(1.0, 1.0) == "undecided"  # a point interval at 1 (every pair tied)
    assert verdict(1.1, float("inf")) == "faster" and verdict(0.0, 0.9) == "slower"  # infinite ends are worded


@pytest.mark.parametrize("lo,hi", [(float("nan"), 1.2), (1.1, float("nan")), (float("nan"), float("nan")), (1.2, 1.1)])
def test_a_nan_end_or_a_reversed_interval_is_refused_not_worded(lo, hi):
    with pytest.raises(ValueError, match="verdict needs an interval lo <= hi without NaN ends"):
        verdict(lo, hi)


def test_one_pair_is_worded_by_the_caller_not_by_verdict():
    """One pair gives (r, nan, nan); `comparison` and `summarize` say ONE_RUN for it, never calling
    verdict on the NaN ends (which would raise, as the test above pins)."""
    med, lo, hi = paired_interval([2.0], [1.0])
    assert med == 2.0 and np.isnan(lo) and np.isnan(hi)
    c = comparison([2.0], [1.0])
    assert c["verdict"] == ONE_RUN and c["verdict_sim"] == ONE_RUN
    rows = [{"impl": "base", "cell": 0, "wall_s": 2.0, "tokens": 4},
            {"impl": "x", "cell": 0, "wall_s": 1.0, "tokens": 4}]
    out = summarize(paired_speedups(rows, baseline="base", keys=("cell",)), by=("impl",))
    assert [r["verdict"] for r in out] == [ONE_RUN, ONE_RUN]


def test_level_verdict_is_the_rule_comparison_words_by():
    """One rule for every page: under two pairs no interval, below the pairs a level needs no words
    (6 pairs reach 95%: 96.9%; 5 reach 93.75%), else `verdict`; `comparison` words by it."""
    from specdec.measure.protocol import ONE_RUN, OUT_OF_REACH, comparison, level_verdict

    assert level_verdict(1.02, 1.1, 1) == ONE_RUN
    assert level_verdict(1.02, 1.1, 5) == OUT_OF_REACH and level_verdict(1.02, 1.1, 6) == "faster"
    assert level_verdict(0.9, 1.1, 12) == "undecided" and level_verdict(0.8, 0.9, 12, 0.99) == "slower"
    base, other = [1.1 + 0.01 * i for i in range(8)], [1.0] * 8
    c = comparison(base, other, family_size=4)
    assert c["verdict"] == level_verdict(c["lo"], c["hi"], 8) == "faster"
    assert c["verdict_sim"] == level_verdict(c["lo_sim"], c["hi_sim"], 8, c["level_sim"])
