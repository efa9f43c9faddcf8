"""The server client's rows read as chapter 09's metrics (hand-computed on small made-up streams),
and the sweep's refusals (the real server: tests/peers/test_vllm_server.py)."""

import math

import pytest

from specdec.measure import server_runs


def _sent(arrival, sent, chunks, outcome="ok"):
    return {"arrival_s": arrival, "sent_s": sent, "chunk_s": [t for t, _ in chunks],
            "chunk_tokens": [n for _, n in chunks], "outcome": outcome}


def test_a_run_is_summarized_per_token_and_per_chunk():
    sent = [_sent(0.0, 0.0, [(0.1, 1), (0.3, 2), (0.4, 1)]),     # 4 tokens, 3 chunks
            _sent(0.2, 0.2, [(0.5, 2)], outcome="cancelled"),    # cancelled after 2
            _sent(0.3, 0.3, [], outcome="rejected")]             # a 400: no tokens
    before = {"vllm:request_success_total{abort}": 1.0, "vllm:spec_decode_num_draft_tokens_total": 10.0,
              "vllm:spec_decode_num_accepted_tokens_total": 4.0, "vllm:spec_decode_num_drafts_total": 5.0}
    after = {"vllm:request_success_total{abort}": 2.0, "vllm:spec_decode_num_draft_tokens_total": 14.0,
             "vllm:spec_decode_num_accepted_tokens_total": 7.0, "vllm:spec_decode_num_drafts_total": 7.0,
             "vllm:num_requests_running": 0.0, "vllm:kv_cache_usage_perc": 0.0}
    row = server_runs.run_summary(sent, before, after, ttft_slo=1.0, tpot_slo=1.0)
    assert (row["n_ok"], row["n_cancelled"], row["n_rejected"], row["requests"]) == (1, 1, 1, 3)
    assert row["tokens"] == 6 and row["server_aborted"] == 1 and row["acceptance_rate"] == pytest.approx(0.75)
    assert row["accepted_per_draft"] == pytest.approx(1.5)
    assert row["e2e_mean_s"] == pytest.approx(0.4)  # the completed request only
    assert row["span_s"] == pytest.approx(0.5) and row["serve_tokens_per_s"] == pytest.approx(12.0)
    assert row["tokens_per_chunk"] == pytest.approx(1.5)  # 6 tokens in 4 chunks
    assert row["chunk_itl_p50_s"] == pytest.approx(0.15)  # the chunk gaps 0.2 and 0.1
    assert row["mean_running"] == pytest.approx((0.4 + 0.3) / 0.5)  # Little's law
    empty = server_runs.run_summary([_sent(0.0, 0.0, [], outcome="error")], {}, {}, ttft_slo=1.0, tpot_slo=1.0)
    assert empty["n_error"] == 1 and math.isnan(empty["e2e_mean_s"])


def test_the_sweep_refuses_bad_input_before_any_request():
    with pytest.raises(ValueError, match="endpoint"):
        server_runs.server_sweep({}, [[1]], [1.0], repeats=1, n_requests=1, short_len=1, long_len=1, long_share=0.0,
                                 temperature=1.0, ttft_slo=1.0, tpot_slo=1.0, seed=0)
    for rates in ([], [0.0], [float("nan")]):
        with pytest.raises(ValueError, match="rates"):
            server_runs.server_sweep({"a": ("http://127.0.0.1:9", "m")}, [[1]], rates, repeats=1, n_requests=1,
                                     short_len=1, long_len=1, long_share=0.0, temperature=1.0, ttft_slo=1.0,
                                     tpot_slo=1.0, seed=0)
