"""The server client's rows read as chapter 09's metrics (hand-computed on small made-up streams),
chapter 10's vLLM configurations and verdicts carried into the serving runs, and a configuration
outside the target's law never read as faster (the real server: tests/peers/test_vllm_server.py)."""

import math

import pytest

from specdec.measure import server_runs
from specdec.chapters.ch09 import vllm as serving_vllm
from specdec.measure.serving_runs import NONE
from specdec.report.robustness import NOT_EXACT


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


def test_chapter_10s_configurations_and_verdicts_label_the_serving_runs(tmp_path):
    cfgs = serving_vllm.configs(["n-gram prompt lookup, k = 2", "draft model, k = 2 (defaults)"], 2, "draft-distilled")
    assert [c.spec.method for c in cfgs] == ["ngram", "draft_model"]
    with pytest.raises(ValueError, match="not vLLM configurations"):
        serving_vllm.configs(["draft model, k = 3 (defaults)"], 2, "draft-distilled")
    laws = tmp_path / "laws.csv"
    laws.write_text("engine,configuration,setting,status,verified_share\n"
                    "vllm,\"n-gram prompt lookup, k = 2\",temperature 1,pass,0.95\n"
                    "vllm,\"draft model, k = 2 (defaults)\",temperature 1,reject,1.0\n"
                    "vllm,\"n-gram prompt lookup, k = 2\",temperature 0.5,pass,0.02\n")
    status = serving_vllm.law_status(laws, cfgs, "temperature 1")
    assert status == {"n-gram prompt lookup, k = 2": "pass", "draft model, k = 2 (defaults)": "reject"}
    # a pass on samples the drafter barely drafted is no pass of its verification
    assert serving_vllm.law_status(laws, cfgs[:1], "temperature 0.5") == {"n-gram prompt lookup, k = 2": "not tested"}
    assert serving_vllm.policy_name(cfgs[0], "not tested").endswith("(law not tested)")
    assert set(serving_vllm.law_status(tmp_path / "none.csv", cfgs, "temperature 1").values()) == {"not tested"}
    names = [serving_vllm.policy_name(c, status[c.label]) for c in cfgs]
    assert names[0] == "vLLM n-gram prompt lookup, k = 2" and names[1].endswith(f"({NOT_EXACT})")
    # the page reads a name back as its configuration and its law status
    assert [serving_vllm.label_of(n) for n in names] == [c.label for c in cfgs]
    assert [serving_vllm.law_of(n) for n in names] == ["passed", "rejected"]
    assert serving_vllm.law_of(serving_vllm.policy_name(cfgs[0], "not tested")) == "not tested"
    vcfg = serving_vllm.labelled_configs([c.label for c in cfgs], 2, "draft-distilled", 1.0, laws_csv=laws)
    assert list(vcfg) == names and [s for _, s in vcfg.values()] == ["pass", "reject"]
    hotter = serving_vllm.labelled_configs([c.label for c in cfgs], 2, "draft-distilled", 1.5, laws_csv=laws)
    assert {s for _, s in hotter.values()} == {"not tested"}  # another temperature's verdict is not borrowed
    assert all(r["verdict"] == NOT_EXACT for r in serving_vllm.labelled(
        [{"policy": n, "verdict": "faster", "verdict_sim": "faster"} for n in hotter], hotter))
    speed = [{"policy": n, "verdict": "faster", "verdict_sim": "faster"} for n in names]
    out = serving_vllm.labelled(speed, vcfg)
    assert [r["verdict"] for r in out] == ["faster", NOT_EXACT]  # the negative case: never "faster"
    assert NONE == "no speculation"
