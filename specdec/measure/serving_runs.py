"""Chapter 09's measured runs: serving workloads under continuous batching
(`specdec.engine.continuous.serve`), every policy paired with plain decoding on the same workload.

Protocol, stated before any result (the measurement protocol of `specdec.measure.protocol`, applied
to serving):
  1. A cell is one arrival rate.  Each round draws one workload per rate
     (`specdec.measure.serving.workload`, seeded by round and cell) and serves it with every policy
     in a shuffled order (`specdec.measure.harness.protocol_sweep`), so the policies of a (rate,
     round) see the same requests and the same machine, and pair; contended runs are re-run.
  2. A policy's latency speedup at a rate = plain decoding's mean end-to-end latency / the
     policy's, on the same workload (above 1: requests finish sooner); its throughput ratio = its
     tokens/s / plain decoding's.  Both go through the protocol's own code (`paired_speedups`,
     `summarize`): the median over rounds with a 95% bootstrap interval, its half-width, the
     words of `verdict`, and a simultaneous interval over every (policy, rate) comparison.
  3. Break-even load (`break_even`): the arrival rate at which the median latency speedup crosses 1,
     from the side it is on at the lightest rate - falling (speculation stops paying as load grows)
     or rising (it starts paying) - interpolated linearly in log rate between the two tested rates
     around the crossing; its interval: percentiles of the same crossing over bootstrap resamples of
     the rounds (each rate resampled on its own) that start on the same side.  Resamples without a
     crossing in the tested range, and those starting on the other side, are counted and reported.
  4. Per run (`summary`): the serving metrics of `specdec.measure.serving.run_metrics`, tokens per
     row-step, the mean running batch, acceptance per draft position (vLLM's "acceptance rate per
     position": row-steps that kept draft i / row-steps that drafted i), and the peak bytes of the
     key/value tensors of target and drafter together, per request the bytes of its row against
     the bytes its own tokens need, the draft model's share of step time; alpha_mle = kept drafts / (kept drafts +
     row-steps that stopped at a rejection), as `specdec.engine.schedule.History.alpha_mle`.

Example:
    pol = policies(draft, k=4, adaptive=AdaptiveK(...), load_aware=LoadAware(4, max_batch=4))
    rows = serving_runs(target, pol, prompts, [2.0, 32.0], repeats=6, n_requests=12, ...)
    speedups(rows)  # per (policy, rate): median latency speedup, interval, verdict
"""

from __future__ import annotations

import math

import numpy as np

from specdec.core.cost import extended_speedup
from specdec.engine.continuous import Job, serve
from specdec.measure.harness import Cell, Config, protocol_sweep
from specdec.measure.protocol import LEVEL, paired_speedups, summarize
from specdec.measure.serving import request_metrics, run_metrics, workload

__all__ = ["NONE", "policies", "jobs_for", "summary", "serving_runs", "speedups", "break_even",
           "break_even_rows", "with_prediction", "KEEP"]

NONE = "no speculation"
KEEP = ("e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s", "itl_p99_s",
        "queue_p50_s", "queue_p95_s", "goodput_tokens_per_s", "serve_tokens_per_s", "span_s", "tokens_per_row_step",
        "mean_running", "max_running", "k_mean", "accept_by_position", "peak_kv_bytes", "row_kv_bytes_mean",
        "needed_kv_bytes_mean", "draft_share", "tpot_p50_s", "tpot_p95_s", "cancelled")


def policies(draft, k: int, adaptive, load_aware) -> dict:
    """name -> (drafter, k or schedule) of the four policies (their rules: `rules`)."""
    return {NONE: (None, 1), f"fixed k={k}": (draft, k), "dynamic k (chapter 06)": (draft, adaptive),
            "load-aware": (draft, load_aware)}


def jobs_for(requests, prompts, seed: int) -> list[Job]:
    """The workload's requests as jobs: prompt i of `prompts`, each with its own generator seed."""
    return [Job(prompts[r.prompt], r.output_len, r.arrival_s, seed * 1000 + r.rid, r.cancel_after) for r in requests]


def summary(res, *, ttft_slo: float, tpot_slo: float) -> dict:
    """One served run -> its metrics (module docstring, point 4)."""
    reqs = [request_metrics(r["arrival_s"], r["admitted_s"], r["token_times"], r["finish"] == "cancelled")
            for r in res.requests]
    out = run_metrics(reqs, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    steps = res.steps
    row_steps = sum(s["running"] for s in steps)
    kmax = max((s["k"] for s in steps), default=0)
    num, den, stopped = np.zeros(kmax), np.zeros(kmax), 0
    for s in steps:
        for n in s["accepted_rows"]:
            den[:s["k"]] += 1
            num[:min(n, s["k"])] += 1
            stopped += 0 < s["k"] and n < s["k"]
    out.update({
        "e2e_mean_s": float(np.mean([r["e2e_s"] for r in reqs])), "serve_tokens_per_s": out["tokens_per_s"],
        "tokens_per_row_step": out["tokens"] / row_steps, "mean_running": row_steps / len(steps),
        "max_running": max(s["running"] for s in steps), "k_mean": sum(s["k"] * s["running"] for s in steps) / row_steps,
        "accept_by_position": [float(a / b) if b else float("nan") for a, b in zip(num, den)],
        "peak_kv_bytes": max(s["kv_target_bytes"] + s["kv_draft_bytes"] for s in steps),
        "row_kv_bytes_mean": float(np.mean([r["row_kv_bytes"] for r in res.requests])),
        "needed_kv_bytes_mean": float(np.mean([r["needed_kv_bytes"] for r in res.requests])),
        "draft_share": sum(s["t_draft_forward"] for s in steps) / sum(s["end_s"] - s["start_s"] for s in steps),
        "alpha_mle": float(num.sum() / (num.sum() + stopped)) if num.sum() + stopped else float("nan"),
        "total_s": out["span_s"], "steps": len(steps)})
    return out


def serving_runs(target, pols: dict, prompts, rates, *, repeats: int, n_requests: int, short_len: int, long_len: int,
                 long_share: float, temperature: float, max_batch: int, ttft_slo: float, tpot_slo: float, seed: int,
                 log=None) -> list[dict]:
    """Every policy on one workload per (rate, round), interleaved (module docstring, point 1)."""
    def config(name, drafter, k):
        def run(rate, s):
            reqs = workload(n_requests, rate=rate, short_len=short_len, long_len=long_len, long_share=long_share,
                            cancel_share=0.0, n_prompts=len(prompts), seed=s)
            res = serve(target, jobs_for(reqs, prompts, s), drafter=drafter, k=k, max_batch=max_batch,
                        temperature=temperature)
            return summary(res, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
        return Config(name, run, policy=name)

    cells = [Cell({"rate": float(r)}, float(r)) for r in rates]
    return protocol_sweep([config(n, *p) for n, p in pols.items()], cells, repeats=repeats, seed=seed,
                          warm=cells[-1:], keep=KEEP, log=log)


def _pairs(rows, policy: str, rate: float, col: str) -> tuple[np.ndarray, np.ndarray]:
    """(plain decoding's, the policy's) `col` per round at one rate, matched by round; a round
    without its pair, or a rate without any, is an error (the design is paired)."""
    base = {r["repeat"]: r[col] for r in rows if r["policy"] == NONE and r["rate"] == rate}
    other = {r["repeat"]: r[col] for r in rows if r["policy"] == policy and r["rate"] == rate}
    if not other or base.keys() != other.keys():
        raise ValueError(f"policy {policy!r} at rate {rate}: rounds {sorted(other)} do not pair with plain "
                         f"decoding's {sorted(base)}")
    keys = sorted(base)
    return np.array([base[i] for i in keys], dtype=float), np.array([other[i] for i in keys], dtype=float)


def speedups(rows: list[dict], *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per (policy, rate) (module docstring, point 2), through the protocol's `paired_speedups` and
    `summarize`: the latency speedup (time per token = mean end-to-end latency) with its interval,
    half-width, verdict and simultaneous interval over all (policy, rate) comparisons (Bonferroni);
    the throughput ratio likewise (time per token = 1 / tokens per second); the pooled goodput ratio
    (sum over rounds of the policy's goodput / plain decoding's; NaN when plain decoding's is 0 in
    every round) and the rounds where plain decoding met no target; the median running batches."""
    spec = [r for r in rows if r["policy"] != NONE]
    m = len({(r["policy"], r["rate"]) for r in spec})
    kw = dict(baseline=NONE, keys=("rate", "repeat"), impl="policy")
    lat_t, thr_t = (lambda r: r["e2e_mean_s"]), (lambda r: 1.0 / r["serve_tokens_per_s"])
    lat = summarize([r for r in paired_speedups(rows, **kw, time_per_token=lat_t) if r["policy"] != NONE],
                    by=("policy", "rate"), level=level, seed=seed, family_size=m, time_per_token=lat_t)
    thr = {(r["policy"], r["rate"]): r for r in summarize(
        [r for r in paired_speedups(rows, **kw, time_per_token=thr_t) if r["policy"] != NONE],
        by=("policy", "rate"), level=level, seed=seed, family_size=m, time_per_token=thr_t)}
    out = []
    for r in lat:
        pol, rate = r["policy"], r["rate"]
        gb, go = _pairs(rows, pol, rate, "goodput_tokens_per_s")
        t = thr[(pol, rate)]
        out.append({"policy": pol, "rate": rate, "pairs": r["runs"], "latency_speedup": r["speedup_median"],
                    "latency_lo": r["speedup_lo"], "latency_hi": r["speedup_hi"], "half_width": r["half_width"],
                    "verdict": r["verdict"], "latency_lo_sim": r["speedup_lo_sim"], "latency_hi_sim": r["speedup_hi_sim"],
                    "verdict_sim": r["verdict_sim"], "pairs_sim": r["pairs_sim"], "throughput_ratio": t["speedup_median"],
                    "throughput_lo": t["speedup_lo"], "throughput_hi": t["speedup_hi"],
                    "goodput_ratio": float(go.sum() / gb.sum()) if gb.sum() > 0 else math.nan,
                    "rounds_base_goodput_0": int((gb == 0).sum()),
                    "running_base": float(np.median(_pairs(rows, pol, rate, "mean_running")[0])),
                    "running": float(np.median(_pairs(rows, pol, rate, "mean_running")[1]))})
    order = list(dict.fromkeys(r["policy"] for r in spec))
    return sorted(out, key=lambda r: (order.index(r["policy"]), r["rate"]))


def _crossing(rates, med) -> tuple[float, str]:
    """(rate, direction): the first rate where med (ordered by rate) crosses 1 from the side it starts
    on at the lightest rate, log-interpolated.  Direction "falls" when it starts above 1 (the policy
    stops paying as load grows; reaching exactly 1 counts as falling), "rises" when it starts at or
    below 1 (the policy starts paying); rate +inf when it never crosses in the tested range.

    Example: _crossing([1, 4], [1.2, 0.8]) -> (2.0, "falls"); _crossing([1, 4], [0.8, 1.2]) -> (2.0, "rises")."""
    above = med[0] > 1
    direction = "falls" if above else "rises"
    for i in range(1, len(rates)):
        if (med[i] <= 1) if above else (med[i] > 1):
            x0, x1, y0, y1 = math.log(rates[i - 1]), math.log(rates[i]), med[i - 1], med[i]
            return math.exp(x0 + (y0 - 1) / (y0 - y1) * (x1 - x0)), direction
    return math.inf, direction


def break_even(rows: list[dict], policy: str, *, level: float = LEVEL, seed: int = 0, n_resamples: int = 2000) -> dict:
    """The arrival rate at which `policy`'s median latency speedup crosses 1, in either direction
    (`_crossing`: the first crossing), with the running batch there and an interval (point 3): order
    statistics over every resample, one that starts on the other side of 1 counted as crossing
    below the tested range (-inf), one that never crosses as beyond it (+inf); the shares of both
    (``share_opposite``, ``share_no_crossing``) are reported beside it."""
    rates = sorted({r["rate"] for r in rows})
    ratios = [np.divide(*_pairs(rows, policy, x, "e2e_mean_s")) for x in rates]
    est, direction = _crossing(rates, [float(np.median(r)) for r in ratios])
    rng = np.random.default_rng(seed)
    boot = [_crossing(rates, [float(np.median(rng.choice(r, r.size))) for r in ratios]) for _ in range(n_resamples)]
    # a resample that starts on the other side of 1 has already crossed before the lightest rate: below
    # the tested range (-inf); one that never crosses: beyond it (+inf); order statistics over them all
    at = np.sort([x if d == direction else -math.inf for x, d in boot])
    a = (1 - level) / 2
    lo, hi = at[int(math.floor(a * at.size))], at[int(math.ceil((1 - a) * at.size)) - 1]
    run = [(r["rate"], r["mean_running"]) for r in rows if r["policy"] == NONE]  # every round, ties included
    running_at = float(np.interp(math.log(est), [math.log(x) for x in rates],
                                 [np.median([m for x2, m in run if x2 == x]) for x in rates])) \
        if math.isfinite(est) else math.nan
    return {"policy": policy, "break_even_rate": est, "direction": direction, "lo": float(lo), "hi": float(hi),
            "share_no_crossing": float(np.mean([x == math.inf for x, _ in boot])),
            "share_opposite": float(np.mean([d != direction for _, d in boot])),
            "running_at_break_even": running_at, "resamples": n_resamples}


def break_even_rows(rows: list[dict], *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """`break_even` of every speculative policy."""
    return [break_even(rows, pol, level=level, seed=seed) for pol in dict.fromkeys(r["policy"] for r in rows
                                                                                    if r["policy"] != NONE)]


def with_prediction(speed: list[dict], lat, curve: dict, c: float, k: int, fixed: str) -> list[dict]:
    """The speedup rows with the idealized prediction for the fixed-k policy: `extended_speedup` of its
    median measured alpha_hat (table lat: policy, rate, alpha_mle) with the batch-1 cost curve; it
    knows nothing of batching or queueing."""
    a = {(r["policy"], r["rate"]): r["alpha_mle"] for r in lat.to_dict("records")}
    return [{**r, "predicted_batch1": extended_speedup(float(a[(r["policy"], r["rate"])]), k, curve, c)
             if r["policy"] == fixed else math.nan} for r in speed]
