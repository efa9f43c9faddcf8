"""Chapter 09's break-even and trend words follow the data in both directions (report.serving)."""

import math
from types import SimpleNamespace

import pandas as pd

from specdec.chapters.ch09.words import break_even_text, trend_text

RATES = [1.0, 4.0, 16.0]


def _be(rate, direction, lo=math.nan, hi=math.nan, running=math.nan):
    return SimpleNamespace(policy="p", break_even_rate=rate, direction=direction, lo=lo, hi=hi,
                           running_at_break_even=running, share_no_crossing=0.1, share_opposite=0.05)


def test_break_even_words_name_the_direction():
    assert "stops paying" in break_even_text(_be(2.0, "falls", 1.5, 3.0), RATES)
    assert "starts paying" in break_even_text(_be(2.0, "rises", 1.5, 3.0), RATES)
    # no crossing: says which side of 1 it stays on, never "below the tested range"
    assert "above 1 at every tested rate" in break_even_text(_be(math.inf, "falls"), RATES)
    up = break_even_text(_be(math.inf, "rises"), RATES)
    assert "at or below 1 at every tested rate" in up and "stops" not in up and "starts" not in up


def _speed(rows):
    return pd.DataFrame([dict(policy=p, rate=r, latency_speedup=m, latency_lo=lo, latency_hi=hi)
                         for p, r, m, lo, hi in rows])


def test_trend_words_need_disjoint_intervals():
    speed = _speed([("fixed", 1, 0.976, 0.948, 1.007), ("fixed", 256, 1.050, 1.021, 1.096),
                    ("la", 1, 1.005, 0.946, 1.078), ("la", 256, 0.976, 0.970, 0.982),
                    ("down", 1, 1.2, 1.1, 1.3), ("down", 256, 0.9, 0.85, 0.95)])
    assert trend_text(speed) == "fixed gains with load; la no trend detected; down loses with load"


def test_the_vllm_part_of_a_run_is_named_with_its_wall_time_or_as_not_recorded():
    from specdec.chapters.ch09.words import server_words
    servers = [{"version": "0.32.0", "kv_cache_gib": 1}]
    assert server_words(servers, ["plain", "n-gram"], 275.4)["vllm_part_words"] == "took 275 s"
    # a committed run made before the part was timed says so instead of a number
    got = server_words(servers, ["plain"])
    assert got["vllm_part_words"].startswith("was not timed") and got["vllm_configs"] == "plain"
