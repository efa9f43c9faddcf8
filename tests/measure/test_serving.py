"""The serving workload and metrics (the continuous-batching apparatus, before its loop): seeded Poisson arrivals
and the length and cancellation mixture checked against their stated laws, hand-worked metrics,
and bad inputs."""

import math

import numpy as np
import pytest

from specdec.measure.serving import request_metrics, run_metrics, workload

KW = dict(rate=4.0, short_len=16, long_len=128, long_share=0.25, cancel_share=0.2, n_prompts=8, seed=3)


def test_workload_follows_its_stated_laws():
    """n = 20,000 requests: the mean gap is 1/rate with standard error 1/(rate sqrt n), so a 5-sigma
    band (+-0.0088 s here) fails with probability < 1e-6 for a correct generator, while a rate off by
    5% (mean gap off by 0.0125 s, 7 standard errors) lands outside it with probability about 0.98;
    shares are held to 5 binomial sigmas the same way."""
    n = 20_000
    ws = workload(n, **KW)
    gaps = np.diff([0.0] + [r.arrival_s for r in ws])
    assert np.all(gaps > 0) and abs(gaps.mean() - 0.25) < 5 * 0.25 / math.sqrt(n)
    long = np.mean([r.output_len == 128 for r in ws])
    assert abs(long - 0.25) < 5 * math.sqrt(0.25 * 0.75 / n)
    cancelled = [r for r in ws if r.cancel_after is not None]
    assert abs(len(cancelled) / n - 0.2) < 5 * math.sqrt(0.2 * 0.8 / n)
    assert all(1 <= r.cancel_after <= r.output_len - 1 for r in cancelled)
    assert {r.prompt for r in ws} == set(range(8)) and ws[9].prompt == 1
    assert workload(50, **KW) == workload(50, **KW) and workload(50, **{**KW, "seed": 4}) != workload(50, **KW)


def test_request_metrics_hand_worked():
    m = request_metrics(0.0, 0.5, [1.0, 1.2, 1.2, 1.5])
    assert m["queue_s"] == 0.5 and m["ttft_s"] == 1.0 and m["e2e_s"] == 1.5 and m["tokens"] == 4
    assert m["itl"] == pytest.approx([0.2, 0.0, 0.3]) and m["itl_p50_s"] == pytest.approx(0.2)


def test_run_metrics_goodput_counts_only_requests_meeting_the_targets():
    a = request_metrics(0.0, 0.0, [0.1, 0.2, 0.3])           # ttft 0.1, tpot 0.1: meets both
    b = request_metrics(0.5, 1.0, [2.0, 2.1])                # ttft 1.5: misses the TTFT target
    c = request_metrics(0.2, 0.2, [0.3, 1.3], cancelled=True)  # cancelled: never counts
    r = run_metrics([a, b, c], ttft_slo=1.0, tpot_slo=0.5)
    assert r["tokens"] == 7 and r["span_s"] == pytest.approx(2.1) and r["cancelled"] == 1
    assert r["tokens_per_s"] == pytest.approx(7 / 2.1) and r["goodput_tokens_per_s"] == pytest.approx(3 / 2.1)
    assert r["ttft_p50_s"] == pytest.approx(0.1)
    slow = request_metrics(0.0, 0.0, [0.1, 0.1, 0.1, 2.0])  # tpot 0.633: misses it, though its median gap is 0
    assert slow["tpot_s"] == pytest.approx(1.9 / 3) and slow["itl_p50_s"] == 0.0
    assert run_metrics([a, slow], ttft_slo=1.0, tpot_slo=0.5)["goodput_tokens_per_s"] == pytest.approx(3 / 2.0)


@pytest.mark.parametrize("bad", [dict(rate=-1.0), dict(rate=0), dict(rate=float("inf")), dict(short_len=0),
                                 dict(long_share=1.5), dict(cancel_share=-0.1), dict(n_prompts=0)])
def test_bad_workloads_are_named(bad):
    with pytest.raises(ValueError):
        workload(10, **{**KW, **bad})
    with pytest.raises(ValueError, match="n \\(requests\\)"):
        workload(0, **KW)


def test_bad_metrics_inputs_are_named():
    with pytest.raises(ValueError, match="empty workload"):
        run_metrics([], ttft_slo=1.0, tpot_slo=1.0)
    with pytest.raises(ValueError, match="admission"):
        request_metrics(1.0, 0.5, [2.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        request_metrics(0.0, 0.0, [2.0, 1.0])
    with pytest.raises(ValueError, match="targets"):
        run_metrics([request_metrics(0.0, 0.0, [1.0])], ttft_slo=0.0, tpot_slo=1.0)
