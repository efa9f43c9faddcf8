"""Chapter 09's workload against OpenAI-compatible servers (`specdec.peers.openai_client`): one
run's metrics, and the paired arrival-rate sweep whose rows `specdec.measure.serving_runs.speedups`
and `break_even` read exactly as they read our engine's.

Protocol, stated before any result:
  1. A cell is one arrival rate.  Each round draws one workload per rate (`serving.workload`,
     seeded by round and cell, no cancellation) and sends it to every endpoint, one endpoint at a
     time, in an order reversed every other round (ABBA over rounds), so the endpoints of a (rate,
     round) see the same requests and pair.  Each endpoint gets one short warm-up request first.
  2. Per request (`request_rows`): arrival = its scheduled time, admission = when it was sent (a
     client cannot see the server's queue), every token at the time of the chunk that carried it;
     `serving.request_metrics` then gives TTFT, TPOT (per token after the first) and end-to-end
     latency.  ITL is reported per chunk, as vLLM's own benchmark reports it (gaps between
     streamed chunks; a chunk may carry several tokens), beside TPOT; tokens per chunk are kept.
  3. Per run (`run_summary`): `serving.run_metrics` over the requests that delivered tokens; the
     outcomes counted; the mean number of requests in the system by Little's law (sum of
     end-to-end times / span; the server's own running count is only sampled); from ``/metrics``
     before and after: preemptions, aborted (``server_aborted``: the server's own count, which need
     not include client disconnects) and finished requests, drafts and accepted drafts
     (acceptance rate = accepted / drafted tokens; mean accepted per draft), and after the run the
     running and waiting requests and KV-cache usage (0 when every slot was freed).
"""
from __future__ import annotations

import math

import numpy as np

from specdec.measure.serving import request_metrics, run_metrics, workload
from specdec.measure.serving_runs import NONE
from specdec.peers.openai_client import OUTCOMES, scrape, send

__all__ = ["request_rows", "run_summary", "server_sweep", "NONE"]

RUNNING, WAITING, KV = "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"
COUNTERS = {"preemptions": "vllm:num_preemptions_total", "server_aborted": "vllm:request_success_total{abort}",
            "finished": "vllm:request_success_total", "drafts": "vllm:spec_decode_num_drafts_total",
            "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
            "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total"}


def request_rows(sent: list[dict]) -> list[dict]:
    """`serving.request_metrics` of every request that delivered at least one token (module
    docstring, point 2), with its chunk gaps (``chunk_itl``) and tokens per chunk."""
    out = []
    for r in sent:
        if not r["chunk_s"]:
            continue
        times = [t for t, n in zip(r["chunk_s"], r["chunk_tokens"]) for _ in range(n)]
        m = request_metrics(r["arrival_s"], max(r["sent_s"], r["arrival_s"]), times, r["outcome"] == "cancelled")
        out.append({**m, "chunk_itl": np.diff(r["chunk_s"]).tolist(), "chunks": len(r["chunk_s"]),
                    "outcome": r["outcome"]})
    return out


def _pct(x, q) -> float:
    return float(np.percentile(x, q)) if len(x) else math.nan


def run_summary(sent: list[dict], before: dict, after: dict, *, ttft_slo: float, tpot_slo: float) -> dict:
    """One run's metrics (module docstring, point 3); NaN latencies when no request delivered a token."""
    reqs = request_rows(sent)
    count = {f"n_{o}": sum(r["outcome"] == o for r in sent) for o in OUTCOMES}
    delta = {k: after.get(v, 0.0) - before.get(v, 0.0) for k, v in COUNTERS.items()}
    out = {"requests": len(sent), **count, **delta,
           "acceptance_rate": delta["accepted_tokens"] / delta["draft_tokens"] if delta["draft_tokens"] else math.nan,
           "accepted_per_draft": delta["accepted_tokens"] / delta["drafts"] if delta["drafts"] else math.nan,
           "running_after": after.get(RUNNING, math.nan), "waiting_after": after.get(WAITING, math.nan),
           "kv_usage_after": after.get(KV, math.nan)}
    if not reqs:
        return {**out, "e2e_mean_s": math.nan, "serve_tokens_per_s": math.nan, "goodput_tokens_per_s": math.nan,
                "mean_running": math.nan}
    m = run_metrics(reqs, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    itl = np.concatenate([np.asarray(r["chunk_itl"], dtype=float) for r in reqs])
    done = [r for r in reqs if r["outcome"] == "ok"]
    return {**out, **{k: v for k, v in m.items() if k not in ("requests", "cancelled")},
            "e2e_mean_s": float(np.mean([r["e2e_s"] for r in done])) if done else math.nan,
            "serve_tokens_per_s": m["tokens_per_s"],
            "mean_running": sum(r["e2e_s"] for r in reqs) / m["span_s"] if m["span_s"] > 0 else math.nan,
            "chunk_itl_p50_s": _pct(itl, 50), "chunk_itl_p95_s": _pct(itl, 95), "chunk_itl_p99_s": _pct(itl, 99),
            "tokens_per_chunk": m["tokens"] / sum(r["chunks"] for r in reqs)}


def server_sweep(endpoints: dict, prompts, rates, *, repeats: int, n_requests: int, short_len: int, long_len: int,
                 long_share: float, temperature: float, ttft_slo: float, tpot_slo: float, seed: int,
                 timeout_s: float = 60.0, log=None) -> list[dict]:
    """Rows (policy, rate, repeat, `run_summary`) of every endpoint (name -> (url, model); the first
    is the baseline, named `NONE` for `serving_runs.speedups`' pairing if it is called so) on one
    workload per (rate, round) (module docstring, point 1)."""
    if not endpoints:
        raise ValueError("no endpoint to measure")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if not rates or any(not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0) for r in rates):
        raise ValueError(f"rates must be finite numbers of requests per second > 0, got {rates!r}")
    names = list(endpoints)
    for name in names:  # warm-up: one short request each, not kept
        url, model = endpoints[name]
        send(url, model, [(0.0, list(prompts[0]), 2, None)], temperature=temperature, timeout_s=timeout_s)
    rows = []
    for rep in range(repeats):
        for ci, rate in enumerate(rates):
            s = seed * 1000 + rep * 100 + ci
            reqs = workload(n_requests, rate=float(rate), short_len=short_len, long_len=long_len,
                            long_share=long_share, cancel_share=0.0, n_prompts=len(prompts), seed=s)
            batch = [(r.arrival_s, list(prompts[r.prompt]), r.output_len, None) for r in reqs]
            for name in (names if rep % 2 == 0 else names[::-1]):
                url, model = endpoints[name]
                before = scrape(url)
                sent = send(url, model, batch, temperature=temperature, timeout_s=timeout_s)
                row = run_summary(sent, before, scrape(url), ttft_slo=ttft_slo, tpot_slo=tpot_slo)
                rows.append({"policy": name, "rate": float(rate), "repeat": rep, "endpoint": url, **row})
                if log:
                    log(f"{name} rate {rate:g} round {rep}: {row['serve_tokens_per_s']:.0f} tok/s, "
                        f"e2e {row['e2e_mean_s']:.3f} s, {row['n_ok']}/{row['requests']} ok")
    return rows
