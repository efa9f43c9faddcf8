"""The serving workload and its metrics for the continuous-batching measurements: a
seeded stream of requests, and per-request and per-run latency and throughput, named as the
production engines name them.

Workload (`workload`), stated before any result:
  * arrivals: a Poisson process of rate ``rate`` requests per second (exponential gaps, the first
    request at its first gap);
  * output lengths: ``long_len`` tokens with probability ``long_share``, else ``short_len``;
  * prompts: request i gets held-out prompt index ``i mod n_prompts``;
  * cancellation: each request is cancelled with probability ``cancel_share`` after a number of
    generated tokens drawn uniformly from 1..output_len-1 (outputs of one token are never cancelled).
All draws come from one numpy generator seeded with ``seed``, in a fixed order, so a workload is a
function of its parameters.

Metrics of one request (`request_metrics`), from its arrival, admission and token times (seconds):
    queue_s = admitted - arrival          (queueing delay)
    ttft_s  = first token - arrival       (time to first token, queueing included)
    itl_s   = gaps between consecutive tokens (inter-token latency; tokens of one speculative
              step arrive together, gap 0)
    tpot_s  = (last token - first token) / (tokens - 1)   (time per output token after the first;
              NaN for a one-token request; not lowered by tokens arriving together)
    e2e_s   = last token - arrival        (end-to-end latency)
Metrics of a run (`run_metrics`): tokens/s over the span from the first arrival to the last token;
goodput = tokens/s of the requests that met the latency targets (TTFT <= ttft_slo and TPOT <=
tpot_slo, the targets serving benchmarks state; a cancelled request never counts); percentiles
p50/p95/p99 of TTFT, of the pooled inter-token latencies, of TPOT, of queueing delay and of
end-to-end latency.

Example: ws = workload(100, rate=2.0, short_len=16, long_len=128, long_share=0.25, cancel_share=0.1,
n_prompts=8, seed=0); ws[0].arrival_s > 0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Request", "workload", "request_metrics", "run_metrics"]


@dataclass(frozen=True)
class Request:
    rid: int
    arrival_s: float
    prompt: int               # index of the held-out prompt
    output_len: int           # tokens to generate (no stop token)
    cancel_after: int | None  # cancelled after this many tokens, or None


def _int(name: str, v, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _share(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    return float(v)


def workload(n: int, *, rate: float, short_len: int, long_len: int, long_share: float, cancel_share: float,
             n_prompts: int, seed: int) -> list[Request]:
    """n requests (module docstring), in arrival order."""
    n = _int("n (requests)", n, 1)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not np.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a finite number of requests per second > 0, got {rate!r}")
    short_len, long_len = _int("short_len", short_len, 1), _int("long_len", long_len, 1)
    long_share, cancel_share = _share("long_share", long_share), _share("cancel_share", cancel_share)
    n_prompts = _int("n_prompts", n_prompts, 1)
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    lengths = np.where(rng.random(n) < long_share, long_len, short_len)
    cancel = rng.random(n) < cancel_share
    points = rng.random(n)
    out = []
    for i in range(n):
        L = int(lengths[i])
        after = 1 + int(points[i] * (L - 1)) if cancel[i] and L > 1 else None  # uniform on 1..L-1
        out.append(Request(i, float(arrivals[i]), i % n_prompts, L, after))
    return out


def _pct(x, q) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def request_metrics(arrival_s: float, admitted_s: float, token_times, cancelled: bool = False) -> dict:
    """One request's queueing delay, TTFT, inter-token latencies (p50/p95/p99 and the list),
    end-to-end latency and token count.  token_times: the arrival time of each token, non-decreasing,
    none before admission, admission not before arrival.
    Example: request_metrics(0.0, 0.5, [1.0, 1.2, 1.2]) -> queue 0.5, ttft 1.0, itl [0.2, 0.0], e2e 1.2."""
    t = np.asarray(token_times, dtype=np.float64)
    if not (np.isfinite(arrival_s) and np.isfinite(admitted_s)) or admitted_s < arrival_s:
        raise ValueError(f"need finite times with admission ({admitted_s!r}) not before arrival ({arrival_s!r})")
    if t.ndim != 1 or not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0) or (t.size and t[0] < admitted_s):
        raise ValueError("token times must be finite, non-decreasing and not before admission")
    itl = np.diff(t)
    return {"queue_s": admitted_s - arrival_s, "ttft_s": float(t[0] - arrival_s) if t.size else float("nan"),
            "itl": itl.tolist(), "itl_p50_s": _pct(itl, 50), "itl_p95_s": _pct(itl, 95), "itl_p99_s": _pct(itl, 99),
            "tpot_s": float((t[-1] - t[0]) / (t.size - 1)) if t.size > 1 else float("nan"),
            "e2e_s": float(t[-1] - arrival_s) if t.size else float("nan"), "tokens": int(t.size),
            "arrival_s": float(arrival_s), "last_s": float(t[-1]) if t.size else float(admitted_s),
            "cancelled": bool(cancelled)}


def run_metrics(requests: list[dict], *, ttft_slo: float, tpot_slo: float) -> dict:
    """Throughput, goodput and latency percentiles of a run from its `request_metrics` (module docstring)."""
    if not requests:
        raise ValueError("no requests: an empty workload has no metrics")
    if not (ttft_slo > 0 and tpot_slo > 0):
        raise ValueError(f"latency targets must be > 0, got ttft_slo={ttft_slo!r}, tpot_slo={tpot_slo!r}")
    span = max(r["last_s"] for r in requests) - min(r["arrival_s"] for r in requests)
    tokens = sum(r["tokens"] for r in requests)
    good = sum(r["tokens"] for r in requests if not r["cancelled"] and r["ttft_s"] <= ttft_slo
               and not (r["tpot_s"] > tpot_slo))  # a one-token request has no TPOT: NaN passes
    itl = np.concatenate([np.asarray(r["itl"], dtype=np.float64) for r in requests])
    col = lambda k: np.array([r[k] for r in requests if np.isfinite(r[k])])  # noqa: E731
    out = {"requests": len(requests), "cancelled": sum(r["cancelled"] for r in requests), "tokens": tokens,
           "span_s": span, "tokens_per_s": tokens / span if span > 0 else float("nan"),
           "goodput_tokens_per_s": good / span if span > 0 else float("nan")}
    for name, x in (("ttft", col("ttft_s")), ("itl", itl), ("tpot", col("tpot_s")), ("queue", col("queue_s")),
                    ("e2e", col("e2e_s"))):
        out.update({f"{name}_p50_s": _pct(x, 50), f"{name}_p95_s": _pct(x, 95), f"{name}_p99_s": _pct(x, 99)})
    return out
