"""Chapter 09's checks of the serving loop on the real pair, item by item.

`invariance_rows`: per policy and temperature, the workload served batched and each request alone
(its own generator either way): how many requests' tokens are identical and the first position where
any differ.  Greedy tokens can differ only where batched and single-row forwards round differently
across a near tie; sampled ones also where a uniform falls within that rounding of an acceptance
threshold (`specdec.engine.continuous`).

`cancellation_rows`: the workload served with and without its cancellations (``cancel_after``
removed).  Per cancelled request: the tokens it streamed, whether they prefix its uncancelled output,
and the key/value bytes freed at the step it left, at least the rows of every request leaving in that
step (rows of a batched cache are equal; more is leading slots no remaining row needs); per other
request, whether its tokens are unchanged.

Example: invariance_rows(target, {"fixed k=4": (draft, 4)}, jobs, temperatures=[0.0, 1.0], max_batch=8)
"""

from __future__ import annotations

from dataclasses import replace

from specdec.engine.continuous import Job, serve

__all__ = ["invariance_rows", "cancellation_rows"]


def _first_difference(a: list, b: list) -> int | None:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return n if n is not None or len(a) == len(b) else min(len(a), len(b))


def invariance_rows(target, pols: dict, jobs: list[Job], *, temperatures, max_batch: int) -> list[dict]:
    """Per (policy, temperature): requests identical alone and batched (module docstring)."""
    rows = []
    for name, (drafter, k) in pols.items():
        for t in temperatures:
            res = serve(target, jobs, drafter=drafter, k=k, max_batch=max_batch, temperature=t)
            alone = [serve(target, [replace(j, arrival_s=0.0)], drafter=drafter, k=k, max_batch=1,
                           temperature=t).requests[0] for j in jobs]
            diffs = [_first_difference(a["tokens"], b["tokens"]) for a, b in zip(alone, res.requests)]
            rows.append({"policy": name, "temperature": t, "requests": len(jobs),
                         "identical": sum(d is None for d in diffs),
                         "first_difference": min((d for d in diffs if d is not None), default=None),
                         "max_running": max(s["running"] for s in res.steps)})
    return rows


def cancellation_rows(target, drafter, k, jobs: list[Job], *, max_batch: int, temperature: float) -> list[dict]:
    """One row per request of the workload served with and without its cancellations."""
    full = serve(target, [replace(j, cancel_after=None) for j in jobs], drafter=drafter, k=k, max_batch=max_batch,
                 temperature=temperature).requests
    cut = serve(target, jobs, drafter=drafter, k=k, max_batch=max_batch, temperature=temperature).requests
    rows = []
    for j, a, b in zip(jobs, full, cut):
        cancelled = b["finish"] == "cancelled"
        rows.append({"rid": b["rid"], "cancel_after": j.cancel_after, "finish": b["finish"], "streamed": len(b["tokens"]),
                     "uncancelled_len": len(a["tokens"]),
                     "consistent": (b["tokens"] == a["tokens"][:len(b["tokens"])]) if cancelled else b["tokens"] == a["tokens"],
                     "step_released_bytes": b["step_released_bytes"] if cancelled else None,
                     "step_departed": b["step_departed"] if cancelled else None, "row_bytes": b["row_kv_bytes"],
                     "rows_freed": b["step_released_bytes"] >= b["step_departed"] * b["row_kv_bytes"] if cancelled
                     else None})
    return rows
