"""Chapter 09's serving measurements (`specdec.measure.serving_runs`) and checks
(`specdec.chapters.ch09.checks`): the break-even crossing and its bootstrap interval, paired
speedups and their words on hand-built rows, a served run's summary recounted from its steps, the
key/value bytes of a token, the interleaved sweep's rows, and batch invariance and cancellation on
the tiny pair."""

import math

import numpy as np
import pytest
import torch
from shared_helpers import serving_jobs

from specdec.engine.continuous import serve
from specdec.measure.serving import workload
from specdec.chapters.ch09.checks import _first_difference, cancellation_rows, invariance_rows
from specdec.measure.serving_runs import (KEEP, NONE, _crossing, break_even, break_even_rows,
                                          jobs_for, policies, serving_runs, speedups, summary)

SLO = dict(ttft_slo=1e3, tpot_slo=1e3)
FACTORS = (0.98, 0.99, 1.0, 1.01, 1.02)  # per-round noise whose median is exactly 1 (five rounds)


def _jobs(n=5, gap=0.0, cancel=None, seed=7):
    """n requests with ragged prompts (3..8 tokens) and budgets (4..11), arriving `gap` seconds apart
    (default: all at once, so with max_batch 3 three run and the rest join as rows leave)."""
    return serving_jobs(n, gap=gap, cancel=cancel, seed=seed, prompt=(3, 9), budget=(4, 12), seed_base=200)


def _two_rates(vals: dict) -> list[dict]:
    """Rows of plain decoding (e2e = the value) and policy "p" (e2e = 1) per rate and round."""
    return [{"policy": pol, "rate": rate, "repeat": rep, "e2e_mean_s": e, "mean_running": 1.0}
            for rate, vs in vals.items() for rep, v in enumerate(vs) for pol, e in ((NONE, v), ("p", 1.0))]


def _rows(policy_ratio: dict, running=None, rates=(1.0, 2.0, 4.0, 8.0)):
    """Hand-built sweep rows: per rate, five rounds; plain decoding's e2e = ratio x noise and the
    policy's = 1, so the paired ratio none/policy at each rate is `ratio` x FACTORS (median: ratio)."""
    rows = []
    for rate in rates:
        for rep, f in enumerate(FACTORS):
            run = running[rate][rep] if running else rate
            rows.append({"policy": NONE, "rate": rate, "repeat": rep, "e2e_mean_s": 1.0, "mean_running": run})
            for pol, ratio in policy_ratio.items():
                rows.append({"policy": pol, "rate": rate, "repeat": rep, "e2e_mean_s": 1.0 / (ratio[rate] * f),
                             "mean_running": run})
    return rows


# --- the crossing and the break-even load ------------------------------------------------------


def test_crossing_is_log_linear_and_names_its_direction():
    assert _crossing([1.0, 4.0], [1.2, 0.8]) == pytest.approx((2.0, "falls"))  # exp(log 1 + 0.5 (log 4 - log 1))
    assert _crossing([1.0, 4.0], [1.2, 1.0]) == pytest.approx((4.0, "falls"))  # reaching exactly 1 counts as falling
    # the first fall wins, even if the medians rise again: between 1 and 2, fraction 0.5 / 0.6 -> 2^(5/6)
    assert _crossing([1.0, 2.0, 4.0, 8.0], [1.5, 0.9, 1.2, 0.8]) == pytest.approx((1.7817974362806785, "falls"))
    # interpolation in log rate, not in rate: 10 -> 1000 halfway in log is 100 (linear would be 505)
    assert _crossing([10.0, 1000.0], [1.5, 0.5]) == pytest.approx((100.0, "falls"))
    # a policy that starts at or below 1 and gains with load crosses upward
    assert _crossing([1.0, 4.0], [0.8, 1.2]) == pytest.approx((2.0, "rises"))
    assert _crossing([1.0, 4.0], [1.0, 0.8]) == (math.inf, "rises")  # at 1 from the start, never above
    assert _crossing([1.0, 4.0, 16.0], [1.3, 1.1, 1.01]) == (math.inf, "falls")


def test_break_even_falls_between_the_rates_where_the_policy_stops_paying():
    ratio = {1.0: 1.5, 2.0: 1.3, 4.0: 0.8, 8.0: 0.6}
    running = {1.0: [1.0, 1.1, 1.2, 1.3, 1.4], 2.0: [1.4, 1.45, 1.5, 1.55, 1.6], 4.0: [2.8, 2.9, 3.0, 3.1, 3.2],
               8.0: [4.0, 4.1, 4.2, 4.3, 4.4]}
    rows = _rows({"spec": ratio}, running)
    be = break_even(rows, "spec", n_resamples=500)
    # medians 1.3 at rate 2 and 0.8 at rate 4: fraction 0.3 / 0.5 = 0.6 of the way in log rate
    want = 2.0 * 2.0 ** 0.6
    assert be["break_even_rate"] == pytest.approx(want)
    assert 2.0 <= be["lo"] <= be["break_even_rate"] <= be["hi"] <= 4.0 and be["lo"] < be["hi"]
    assert be["direction"] == "falls" and be["share_no_crossing"] == 0.0 and be["share_opposite"] == 0.0
    assert be["resamples"] == 500
    # plain decoding's median running batch: 1.5 at rate 2, 3.0 at rate 4, 0.6 of the way -> 2.4
    assert be["running_at_break_even"] == pytest.approx(2.4)


def test_break_even_of_a_policy_that_always_pays_or_never_pays():
    rows = _rows({"pays": {r: 1.4 for r in (1.0, 2.0, 4.0, 8.0)}, "costs": {r: 0.7 for r in (1.0, 2.0, 4.0, 8.0)}})
    pays = break_even(rows, "pays", n_resamples=300)
    assert pays["break_even_rate"] == math.inf and pays["lo"] == pays["hi"] == math.inf
    assert pays["direction"] == "falls" and pays["share_no_crossing"] == 1.0 and pays["share_opposite"] == 0.0
    assert math.isnan(pays["running_at_break_even"])
    costs = break_even(rows, "costs", n_resamples=300)  # negative control: the roles swapped
    assert costs["break_even_rate"] == math.inf and costs["direction"] == "rises"
    assert costs["share_no_crossing"] == 1.0 and costs["share_opposite"] == 0.0
    both = break_even_rows(rows)  # every speculative policy, in order of first appearance
    assert [(b["policy"], b["direction"]) for b in both] == [("pays", "falls"), ("costs", "rises")]


def test_break_even_of_a_policy_that_gains_with_load():
    """Below 1 at light load, above it at heavy load (as fixed k did in chapter 09 on this CPU): the
    break-even is where it starts paying, with the same log interpolation: medians 0.8 at rate 2 and
    1.3 at rate 4 cross 1 at 0.2 / 0.5 = 0.4 of the way."""
    ratio = {1.0: 0.7, 2.0: 0.8, 4.0: 1.3, 8.0: 1.4}
    be = break_even(_rows({"spec": ratio}), "spec", n_resamples=500)
    assert be["direction"] == "rises" and be["break_even_rate"] == pytest.approx(2.0 * 2.0 ** 0.4)
    assert 2.0 <= be["lo"] <= be["break_even_rate"] <= be["hi"] <= 4.0
    assert be["share_opposite"] == 0.0 and be["share_no_crossing"] == 0.0


def test_break_even_counts_resamples_from_the_other_side_as_below_the_range():
    """At the lightest rate the rounds straddle 1 (median 0.95): resamples whose median there is above
    1 already pay, so they cross below the tested range and the interval's low end says so."""
    rows = _two_rates(dict(((1.0, [0.9, 0.95, 0.92, 1.2, 1.3]), (2.0, [1.5] * 5))))
    be = break_even(rows, "p", n_resamples=2000, seed=3)
    assert be["direction"] == "rises" and 1.0 < be["break_even_rate"] < 2.0
    assert 0.05 < be["share_opposite"] < 0.6 and be["lo"] == -math.inf


def test_break_even_bootstrap_counts_resamples_without_a_crossing():
    """At the top rate three rounds of five are above 1 and two below: a resample's median there
    falls to 1 or below only if at least three of its five draws come from the two below, with
    probability sum_{j>=3} C(5,j) 0.4^j 0.6^(5-j) = 0.31744; so a share 0.68256 never crosses
    (held to 5 binomial sigmas, 0.037 at 4000 resamples)."""
    rows = _two_rates(dict(((1.0, [1.5] * 5), (2.0, [1.1, 1.2, 0.9, 0.95, 1.3]))))
    be = break_even(rows, "p", n_resamples=4000, seed=1)
    assert be["break_even_rate"] == math.inf  # median at rate 2 is 1.1 > 1
    assert abs(be["share_no_crossing"] - 0.68256) < 5 * math.sqrt(0.31744 * 0.68256 / 4000)
    assert be["share_opposite"] == 0.0 and be["hi"] == math.inf and 1.0 <= be["lo"] <= 2.0


def test_break_even_interval_ends_are_the_bootstrap_percentiles():
    """Rates 1 and 2; at rate 1 every ratio is 1.5, at rate 2 the five rounds are 0.5 .. 0.9, so a
    resample crosses at 2^(0.5 / (1.5 - m)), increasing in its median m at rate 2.  m is the smallest
    value when at least three of five draws are, P = P(Bin(5, 0.2) >= 3) = 0.05792 (the largest
    likewise), and the next one in from an end has P(Bin(5, 0.4) >= 3) = 0.31744: so the 2.5% and
    97.5% order statistics are the crossings of m = 0.5 and 0.9, far from any atom's edge."""
    rows = _two_rates(dict(((1.0, [1.5] * 5), (2.0, [0.7, 0.5, 0.9, 0.6, 0.8]))))
    be = break_even(rows, "p", n_resamples=2000, seed=2)
    assert be["break_even_rate"] == pytest.approx(2.0 ** (0.5 / 0.8))  # median 0.7
    assert be["lo"] == pytest.approx(2.0 ** 0.5) and be["hi"] == pytest.approx(2.0 ** (0.5 / 0.6))
    assert be["share_no_crossing"] == 0.0 and be["share_opposite"] == 0.0


def test_break_even_running_batch_counts_tied_rounds():
    ratio = {2.0: 1.3, 4.0: 0.8}
    running = {2.0: [1.0, 1.0, 1.0, 1.0, 3.0], 4.0: [3.0, 3.0, 3.0, 3.0, 5.0]}  # medians 1 and 3
    be = break_even(_rows({"spec": ratio}, running, rates=(2.0, 4.0)), "spec", n_resamples=200)
    assert be["running_at_break_even"] == pytest.approx(1.0 + 0.6 * 2.0)  # got 2 + 0.6 x 2 = 3.2


# --- speedups ----------------------------------------------------------------------------------


def test_speedups_pair_by_round_and_word_by_the_interval():
    base = {1.0: [2.0, 3.0, 2.5, 2.2, 2.6, 2.0], 2.0: [1.0] * 6, 4.0: [1.0, 1.2, 0.9, 1.1, 0.8, 1.0]}
    pol = {1.0: [1.0, 2.0, 1.0, 1.0, 2.0, 1.0], 2.0: [2.0, 4.0, 1.6, 2.5, 1.25, 2.0], 4.0: [1.0] * 6}
    tput_b, tput_p = [10.0, 20.0, 10.0, 40.0, 10.0, 10.0], [15.0, 20.0, 30.0, 50.0, 12.0, 12.5]  # 1.5 1 3 1.25 1.2 1.25
    rows = []
    for rate in base:
        for rep in range(6):
            common = {"rate": rate, "repeat": rep, "goodput_tokens_per_s": 5.0}
            rows.append({**common, "policy": NONE, "e2e_mean_s": base[rate][rep], "serve_tokens_per_s": tput_b[rep],
                         "mean_running": 1.0 + rep})
            rows.append({**common, "policy": "spec", "e2e_mean_s": pol[rate][rep], "serve_tokens_per_s": tput_p[rep],
                         "mean_running": 2.0 + rep})
    rows = rows[::-1]  # pairing is by round, not by position in the list
    unpaired = rows + [{"rate": 1.0, "repeat": 9, "policy": "spec", "e2e_mean_s": 1e-3, "serve_tokens_per_s": 1.0,
                        "goodput_tokens_per_s": 1.0, "mean_running": 1.0}]  # no baseline in round 9
    with pytest.raises(ValueError, match="not paired"):
        speedups(unpaired)
    out = {r["rate"]: r for r in speedups(rows, seed=3)}
    assert list(out) == [1.0, 2.0, 4.0] and all(r["policy"] == "spec" and r["pairs"] == 6 for r in out.values())
    # hand medians of base / policy: rate 1: [2, 1.5, 2.5, 2.2, 1.3, 2] -> 2.0; rate 2: [.5, .25, .625, .4, .8, .5]
    # -> 0.5; rate 4: [1, 1.2, .9, 1.1, .8, 1] -> 1.0
    assert [out[r]["latency_speedup"] for r in (1.0, 2.0, 4.0)] == pytest.approx([2.0, 0.5, 1.0])
    for r in out.values():
        assert r["latency_lo"] <= r["latency_speedup"] <= r["latency_hi"]
        assert r["verdict"] == ("faster" if r["latency_lo"] > 1 else "slower" if r["latency_hi"] < 1
                                else "undecided")
    assert [out[r]["verdict"] for r in (1.0, 2.0, 4.0)] == ["faster", "slower",
                                                            "undecided"]
    # throughput: policy / plain tokens/s, median of [1.5, 1, 3, 1.25, 1.2, 1.25] = 1.25 (not its inverse, 0.8)
    assert all(r["throughput_ratio"] == pytest.approx(1.25) for r in out.values())
    assert all(r["goodput_ratio"] == pytest.approx(1.0) for r in out.values())
    assert all(r["running_base"] == 3.5 and r["running"] == 4.5 for r in out.values())
    # 3 comparisons together need 98.3%; 6 rounds reach at most 1 - 2/64 = 96.9% for a median: no words
    assert all(r["verdict_sim"] == "too few pairs for this level" and r["pairs_sim"] == 7 for r in out.values())
    more = rows + [{**r, "repeat": r["repeat"] + 6} for r in rows]  # 12 rounds: [min, max] covers 99.95%
    for r in speedups(more, seed=3):
        assert r["latency_lo_sim"] <= r["latency_lo"] and r["latency_hi_sim"] >= r["latency_hi"]
        assert r["verdict_sim"] in ("faster", "slower", "undecided")
        assert r["half_width"] == pytest.approx((r["latency_hi"] - r["latency_lo"]) / 2 / r["latency_speedup"])


def test_speedups_pool_goodput_and_count_rounds_without_it():
    rows = [{"policy": p, "rate": 1.0, "repeat": i, "e2e_mean_s": 1.0, "serve_tokens_per_s": 1.0,
             "goodput_tokens_per_s": g, "mean_running": 1.0}
            for i, (gb, gp) in enumerate(((0.0, 2.0), (4.0, 2.0))) for p, g in ((NONE, gb), ("spec", gp))]
    (r,) = speedups(rows)
    assert r["goodput_ratio"] == pytest.approx(4.0 / 4.0) and r["rounds_base_goodput_0"] == 1
    none = [dict(x, goodput_tokens_per_s=0.0) if x["policy"] == NONE else x for x in rows]
    assert math.isnan(speedups(none)[0]["goodput_ratio"])


def test_break_even_of_a_policy_without_runs_is_an_error():
    rows = [{"policy": NONE, "rate": 1.0, "repeat": 0, "e2e_mean_s": 1.0, "mean_running": 1.0}]
    with pytest.raises(ValueError, match="typo"):
        break_even(rows, "typo")


def test_speedups_of_a_single_round_say_no_difference():
    rows = [{"policy": p, "rate": 1.0, "repeat": 0, "e2e_mean_s": e, "serve_tokens_per_s": 1.0,
             "goodput_tokens_per_s": 1.0, "mean_running": 1.0} for p, e in ((NONE, 2.0), ("spec", 1.0))]
    (r,) = speedups(rows)
    assert r["latency_speedup"] == 2.0 and math.isnan(r["latency_lo"]) and r["verdict"] != "faster"


# --- one served run's summary ------------------------------------------------------------------


def test_summary_of_a_speculative_run_recounts_from_its_steps(tiny_pair):
    target, draft = tiny_pair
    k = 2
    res = serve(target, _jobs(), drafter=draft, k=k, max_batch=3, temperature=1.0)
    s = summary(res, **SLO)
    # hand recount: every row-step drafts positions 1..k; a row that kept n drafts kept positions 1..n
    drafted, kept, stopped = [0] * k, [0] * k, 0
    for st in res.steps:
        assert st["k"] == k and len(st["accepted_rows"]) == st["running"]
        for n in st["accepted_rows"]:
            for i in range(k):
                drafted[i] += 1
                kept[i] += 1 if i < n else 0
            stopped += 1 if n < k else 0
    assert s["accept_by_position"] == pytest.approx([kept[i] / drafted[i] for i in range(k)])
    assert sum(kept) == sum(st["accepted"] for st in res.steps)  # the engine's own count agrees
    acc = s["accept_by_position"]
    assert all(0.0 <= a <= 1.0 for a in acc) and all(a >= b for a, b in zip(acc, acc[1:]))
    assert s["alpha_mle"] == pytest.approx(sum(kept) / (sum(kept) + stopped)) and 0.0 <= s["alpha_mle"] <= 1.0
    row_steps = sum(st["running"] for st in res.steps)
    tokens = sum(len(r["tokens"]) for r in res.requests)
    assert tokens == sum(j.max_new_tokens for j in _jobs()) == s["tokens"]
    assert s["tokens_per_row_step"] == pytest.approx(tokens / row_steps) and s["tokens_per_row_step"] >= 1.0
    assert s["mean_running"] == pytest.approx(row_steps / len(res.steps)) and 1.0 <= s["mean_running"] <= 3.0
    assert s["max_running"] == 3 and s["k_mean"] == k and s["steps"] == len(res.steps)
    assert s["peak_kv_bytes"] > 0 and max(st["kv_draft_bytes"] for st in res.steps) > 0
    assert s["peak_kv_bytes"] >= max(st["kv_target_bytes"] for st in res.steps)
    needed = [r["needed_kv_bytes"] for r in res.requests]
    assert s["needed_kv_bytes_mean"] == pytest.approx(sum(needed) / len(needed))
    assert all(0 < r["needed_kv_bytes"] <= r["row_kv_bytes"] for r in res.requests)
    assert 0 < s["draft_share"] < 1
    e2e = [r["token_times"][-1] - r["arrival_s"] for r in res.requests]
    assert s["e2e_mean_s"] == pytest.approx(sum(e2e) / len(e2e)) and s["e2e_mean_s"] > 0
    assert s["serve_tokens_per_s"] == s["tokens_per_s"] > 0 and s["cancelled"] == 0
    assert set(KEEP) <= s.keys()


def test_summary_of_a_plain_run(tiny_pair):
    target, _ = tiny_pair
    res = serve(target, _jobs(), drafter=None, k=1, max_batch=3, temperature=1.0)
    s = summary(res, **SLO)
    assert s["draft_share"] == 0 and s["tokens_per_row_step"] == 1.0 and s["accept_by_position"] == [] and s["k_mean"] == 0
    assert math.isnan(s["alpha_mle"]) and s["peak_kv_bytes"] > 0
    assert all(st["kv_draft_bytes"] == 0 for st in res.steps)


def test_summary_counts_cancelled_requests(tiny_pair):
    target, draft = tiny_pair
    res = serve(target, _jobs(cancel={1: 2}), drafter=draft, k=2, max_batch=3, temperature=1.0)
    s = summary(res, **SLO)
    assert s["cancelled"] == 1 and res.requests[1]["finish"] == "cancelled"


def test_policies_and_jobs_for():
    pol = policies("D", 4, "A", "L")
    assert pol == {NONE: (None, 1), "fixed k=4": ("D", 4), "dynamic k (chapter 06)": ("D", "A"),
                   "load-aware": ("D", "L")}
    prompts = [torch.tensor([1, 2]), torch.tensor([3])]
    reqs = workload(3, rate=2.0, short_len=2, long_len=5, long_share=0.5, cancel_share=0.5, n_prompts=2, seed=1)
    jobs = jobs_for(reqs, prompts, seed=7)
    for r, j in zip(reqs, jobs):
        assert torch.equal(j.prompt, prompts[r.rid % 2]) and j.max_new_tokens == r.output_len
        assert j.arrival_s == r.arrival_s and j.cancel_after == r.cancel_after and j.seed == 7000 + r.rid
    assert len({j.seed for j in jobs}) == 3


# --- the interleaved sweep ---------------------------------------------------------------------


def test_serving_runs_gives_one_paired_row_per_rate_round_and_policy(tiny_pair):
    target, draft = tiny_pair
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 64, (n,), generator=g) for n in (3, 5, 4)]
    rates, seed = [2.0, 50.0], 11
    pol = policies(draft, 2, 2, 2)
    rows = serving_runs(target, pol, prompts, rates, repeats=1, n_requests=3, short_len=3, long_len=6,
                        long_share=0.5, temperature=1.0, max_batch=2, seed=seed, **SLO)
    assert len(rows) == len(rates) * 1 * len(pol)
    assert sorted((r["rate"], r["repeat"], r["policy"]) for r in rows) == \
        sorted((x, 0, p) for x in rates for p in pol)
    assert all(r["config"] == r["policy"] and set(KEEP) <= r.keys() for r in rows)
    for i, rate in enumerate(rates):  # one workload per (rate, round), seeded seed + 1000 round + cell
        want = sum(q.output_len for q in workload(3, rate=rate, short_len=3, long_len=6, long_share=0.5,
                                                   cancel_share=0.0, n_prompts=3, seed=seed + i))
        got = {r["tokens"] for r in rows if r["rate"] == rate}
        assert got == {want}
    for r in rows:
        assert r["e2e_mean_s"] > 0 and r["max_running"] <= 2 and r["cancelled"] == 0
        assert 0 < r["needed_kv_bytes_mean"] <= r["row_kv_bytes_mean"]
        assert (r["accept_by_position"] == []) == (r["policy"] == NONE)
        assert (r["tokens_per_row_step"] == 1.0) if r["policy"] == NONE else r["tokens_per_row_step"] >= 1.0
    assert len(speedups(rows)) == (len(pol) - 1) * len(rates)


# --- the checks ----------------------------------------------------------------------------------


def test_first_difference():
    assert _first_difference([1, 2, 3], [1, 2, 3]) is None
    assert _first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert _first_difference([1, 2], [1, 2, 3]) == 2 and _first_difference([1, 2, 3], [1, 2]) == 2


def test_invariance_rows_find_batched_and_alone_identical(tiny_pair):
    target, draft = tiny_pair
    jobs = _jobs(4)
    rows = invariance_rows(target, {"fixed k=2": (draft, 2), NONE: (None, 1)}, jobs, temperatures=[0.0, 1.0],
                           max_batch=3)
    assert [(r["policy"], r["temperature"]) for r in rows] == \
        [("fixed k=2", 0.0), ("fixed k=2", 1.0), (NONE, 0.0), (NONE, 1.0)]
    for r in rows:
        assert r["requests"] == 4 and r["identical"] == 4 and r["first_difference"] is None
        assert 2 <= r["max_running"] <= 3  # they really shared a batch


def test_cancellation_rows(tiny_pair):
    target, draft = tiny_pair
    jobs = _jobs(4, cancel={1: 2})
    rows = cancellation_rows(target, draft, 2, jobs, max_batch=3, temperature=1.0)
    assert [r["rid"] for r in rows] == [0, 1, 2, 3]
    c = rows[1]
    assert c["finish"] == "cancelled" and c["consistent"] is True and c["cancel_after"] == 2
    assert 2 <= c["streamed"] < c["uncancelled_len"] == jobs[1].max_new_tokens
    assert c["step_released_bytes"] >= c["step_departed"] * c["row_bytes"] > 0 and c["rows_freed"] is True
    for r, j in zip(rows, jobs):
        if r["rid"] != 1:
            assert r["finish"] == "length" and r["consistent"] is True and r["step_released_bytes"] is None
            assert r["streamed"] == r["uncancelled_len"] == j.max_new_tokens and r["row_bytes"] > 0
