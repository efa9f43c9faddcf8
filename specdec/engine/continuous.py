"""Continuous batching over the engine: requests join a running batch at step boundaries and leave
on a stop token, at their length or when cancelled -- the measurement apparatus of chapter 09, not
a server (one thread, no network).

The loop (`serve`), stated before any result:
  * clock: the engine's own measured time (`now`).  Everything the loop does is on it; when no
    request is running and none has arrived, it jumps to the next arrival (idle time is skipped,
    not slept, so a run costs only its compute).
  * admission: at each step boundary the arrived requests join, first come first served, while the
    running batch is below ``max_batch``.  Joining prompts are prefilled together in one forward of
    the target (and of a model drafter) and their caches joined to the running batch's: one batched
    cache, rows left-padded to one length, pad slots masked like any rejected slot
    (`specdec.engine.cache.join_caches`).  The first batch after an idle spell starts a fresh decoder,
    whose prompt goes in with its first step, as in `generate`.
  * a step: the engine's own step (`specdec.engine.decode`): k drafts for every running row (k from
    the policy, given the run's `History` with the running batch size), one target forward,
    verification, emission; a row's tokens of one step arrive together at its end.
  * departures: a row leaves after its stop token, at its max_new_tokens, or once it has streamed
    at least ``cancel_after`` tokens (cancelled: its output is what it streamed).  Its cache rows
    go at once; leading slots no remaining row uses are trimmed.
  * randomness: each request has its own generator seeded with its ``seed`` (an integer, checked
    with the other fields of every job before anything runs: `_check_jobs`), and
    the step's k is never clipped to the rows' remaining budgets (a row near its end drafts k and
    keeps what its budget allows).  So under a fixed k <= 8 a request's draws, and so its tokens, do
    not depend on which requests share its batch, up to floating-point differences of batched forwards
    (a larger k is capped as in `generate`, by the batch's last accepted run: `next_k_cap`);
    a policy that reads the batch (`LoadAware`) or the run's acceptance (`AdaptiveK`) changes a
    request's k, and so its realization, but never its law.
  * policies see one `History` per busy spell (from an idle batch to the next): the acceptance of
    every request so far and the running batch; a rule's k = 0 that is final (`AdaptiveK`) or
    absorbing (`LoadAware`'s acceptance floor) therefore holds for the rest of the spell.
  * memory: after every step the bytes of the target's and the drafter's key/value tensors
    (`kv_bytes`, padding and holes included); at a departure the bytes of the row it occupied, the
    bytes its own valid slots need (at the bytes per slot of the caches themselves), and what its
    step released (shared with the rows that left in the same step).

Example:
    jobs = [Job(prompt=ids[i], max_new_tokens=16, arrival_s=0.1 * i, seed=i) for i in range(4)]
    res = serve(target, jobs, drafter=draft, k=4, max_batch=2, temperature=1.0)
    res.requests[0]["tokens"], res.requests[0]["token_times"], res.steps[0]["running"]
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import torch

from specdec.core.sampling import RowGenerators, SamplingConfig
from specdec.engine.cache import join_caches, kv_bytes, pad_left
from specdec.engine.drafters import as_drafter, can
from specdec.engine.inputs import as_int, check_arguments, clip_k, prompts_of, stop_tokens
from specdec.engine.kv import engine_model, now
from specdec.engine.schedule import History, as_schedule
from specdec.engine.step import Decoder

__all__ = ["Job", "ServeResult", "serve"]


@dataclass(frozen=True)
class Job:
    """One request: prompt (T,) token ids, its budget, arrival time, generator seed, cancellation."""

    prompt: torch.Tensor
    max_new_tokens: int
    arrival_s: float
    seed: int
    cancel_after: int | None = None  # cancelled once it has streamed this many tokens


@dataclass
class ServeResult:
    requests: list      # per job, in job order: tokens, token_times, admitted_s, finish, memory at departure
    steps: list         # per step: clock, running rows, k, drafted, accepted, emitted, KV bytes, durations
    lossless: bool = True
    verifier: str = "autoregressive"
    notes: list = field(default_factory=list)


def _check_jobs(jobs, max_batch) -> list:
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch must be an integer >= 1, got {max_batch!r}")
    jobs = list(jobs)
    if not jobs:
        raise ValueError("empty workload: serve needs at least one job")
    for i, j in enumerate(jobs):
        if not isinstance(j, Job):
            raise ValueError(f"job {i} is a {type(j).__name__}, not a Job")
        if not (isinstance(j.arrival_s, (int, float)) and math.isfinite(j.arrival_s) and j.arrival_s >= 0):
            raise ValueError(f"job {i}: arrival_s must be a finite number >= 0, got {j.arrival_s!r}")
        if isinstance(j.max_new_tokens, bool) or not isinstance(j.max_new_tokens, int) or j.max_new_tokens < 1:
            raise ValueError(f"job {i}: max_new_tokens must be an integer >= 1, got {j.max_new_tokens!r}")
        if j.cancel_after is not None and (isinstance(j.cancel_after, bool) or not isinstance(j.cancel_after, int)
                                           or j.cancel_after < 1):
            raise ValueError(f"job {i}: cancel_after must be None or an integer >= 1, got {j.cancel_after!r}")
        if as_int(j.seed) is None:
            raise ValueError(f"job {i}: seed must be an integer (it seeds the job's own generator), got "
                             f"{j.seed!r} ({type(j.seed).__name__})")
        if not isinstance(j.prompt, torch.Tensor) or j.prompt.dim() != 1:
            raise ValueError(f"job {i}: prompt must be a 1-D tensor of token ids")
    return jobs


class _Batch(Decoder):
    """The engine's decoder state, with rows that join after it started (`admit`)."""

    def prefill(self) -> None:
        """Feed a pending prompt now, into the cache, without taking a step."""
        if self.prefix is not None:
            self.target(input_ids=self.prefix, attention_mask=self.tmask, position_ids=self.prefix_pos,
                        cache=self.cache, use_cache=True, logits_to_keep=1)
            self.prefix = None

    def admit(self, ids, mask, budgets, generators: RowGenerators) -> list[int]:
        """New rows (prompts ids, mask (N, T)) join after the running ones; returns their row ids."""
        self.prefill()
        new = _Batch(self.target, None, ids, mask, max_new_tokens=0, stops=self.stops, sampling=self.sampling,
                     method=self.method, generator=None, verifier=self.verifier)
        new.prefill()
        A, N = len(self.row_ids), ids.shape[0]
        self.cache = join_caches(self.cache, new.cache, A, N)
        L = max(self.tmask.shape[1], new.tmask.shape[1])
        self.tmask = torch.cat([pad_left(self.tmask, L), pad_left(new.tmask, L)], 0)
        self.pending, self.pos = torch.cat([self.pending, new.pending]), torch.cat([self.pos, new.pos])
        ids_new = list(range(len(self.out), len(self.out) + N))
        self.out += [[] for _ in ids_new]
        self.reason += [0] * N
        self.budget += list(budgets)
        self.row_ids += ids_new
        self.generator = self.generator + generators
        return ids_new


def _kv(dec) -> tuple[int, int]:
    cache = dec.drafter.cache if dec.drafter is not None else None
    return kv_bytes(dec.cache), kv_bytes(cache) if cache is not None else 0


def _needed(dec, a: int, before: tuple) -> int:
    """Bytes row a's own valid slots take in the target's (and a model drafter's) cache, at the
    bytes per slot measured on the caches themselves."""
    A, out = len(dec.row_ids), 0
    for mask, nbytes in ((dec.tmask, before[0]), (dec.drafter.mask if dec.drafter is not None else None, before[1])):
        if mask is not None and nbytes and mask.shape[1]:
            out += int(mask[a].sum()) * nbytes // (A * mask.shape[1])
    return out


def serve(target, jobs, *, drafter=None, k=4, max_batch: int, method: str = "token", temperature: float = 1.0,
          top_k: int | None = None, top_p: float | None = None, stop_token_ids=(), verifier=None) -> ServeResult:
    """Serve `jobs` (module docstring) with plain decoding (drafter None) or speculative decoding
    with k drafts per step (an integer or a schedule of `specdec.engine.schedule`)."""
    jobs = _check_jobs(jobs, max_batch)
    drafter = as_drafter(drafter)
    if any(getattr(m, "static", False) for m in (target, drafter.model if drafter is not None else None)):
        raise ValueError("continuous batching needs caches that grow (rows join a running batch), and a static "
                         "compiled model's is preallocated (specdec.engine.modes.slots): run it eager or compiled(..., "
                         "static=False)")
    missing = [m for m in ("advance", "admit") if drafter is not None and not can(drafter, m)]
    if missing:
        raise ValueError(f"serving needs a drafter that takes joining rows and steps without drafts; "
                         f"{type(drafter).__name__} lacks {', '.join(missing)}")
    with torch.inference_mode():
        return _serve(target, jobs, drafter=drafter, schedule=as_schedule(k), max_batch=max_batch,
                      method=method, sampling=SamplingConfig(temperature, top_k, top_p), stops=stop_token_ids,
                      verifier=verifier)


def _serve(target, jobs, *, drafter, schedule, max_batch, method, sampling, stops, verifier) -> ServeResult:
    target = engine_model(target)
    device = next(target.parameters()).device
    V = int(target.config.vocab_size)
    for i, j in enumerate(jobs):  # every prompt checked now (context, ids), not when it arrives
        try:
            ids, _ = prompts_of(j.prompt, V, device)
            check_arguments(target, drafter, ids, method, j.max_new_tokens, verifier, None)
        except ValueError as exc:
            raise ValueError(f"job {i}: {exc}") from None
    stops = stop_tokens(stops, V, device)
    order = deque(sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival_s, i)))
    res = ServeResult([{"rid": i, "arrival_s": float(j.arrival_s), "tokens": [], "token_times": [], "admitted_s": None,
                        "finish": None} for i, j in enumerate(jobs)], [])
    if drafter is not None:
        res.lossless = verifier is None or getattr(verifier, "lossless", False) is True
        res.verifier = method if verifier is None else str(getattr(verifier, "name", type(verifier).__name__))
    history, dec, job_of = History(), None, {}  # history: every request of the current busy spell
    start, jumped = now(device), 0.0
    clock = lambda: now(device) - start + jumped  # noqa: E731
    while order or dec is not None:
        if dec is None and jobs[order[0]].arrival_s > clock():
            jumped += jobs[order[0]].arrival_s - clock()  # idle: skip to the next arrival
        t_admit = clock()
        running = 0 if dec is None else len(dec.row_ids)
        new = []
        while order and jobs[order[0]].arrival_s <= t_admit and running + len(new) < max_batch:
            new.append(order.popleft())
        if new and dec is None:  # a fresh batch after an idle spell: the policies see a fresh history
            history = History()
        if new:
            ids, mask = prompts_of([jobs[i].prompt for i in new], V, device)
            gens = RowGenerators([torch.Generator(device).manual_seed(int(jobs[i].seed)) for i in new])
            if dec is None:
                dec = _Batch(target, drafter, ids, mask, max_new_tokens=0, stops=stops, sampling=sampling,
                             method=method, generator=gens, verifier=verifier)
                dec.budget = [jobs[i].max_new_tokens for i in new]
                rows = list(range(len(new)))
                if drafter is not None:
                    drafter.begin(ids, mask)
            else:
                rows = dec.admit(ids, mask, [jobs[i].max_new_tokens for i in new], gens)
                if drafter is not None:
                    drafter.admit(ids, mask)
            for r, i in zip(rows, new):
                job_of[r] = i
                res.requests[i]["admitted_s"] = t_admit
        if dec is None:
            continue
        t0 = clock()
        rows = dec.row_ids
        history.running = len(rows)
        ks = 0 if drafter is None else clip_k(schedule(history), 1 << 62, dec.k_cap)
        step = dec.step(ks)
        t_tok = clock()
        for a, r in enumerate(rows):
            req, job = res.requests[job_of[r]], jobs[job_of[r]]
            req["token_times"] += [t_tok] * step.emitted[a]
            if not step.done[a] and job.cancel_after is not None and len(dec.out[r]) >= job.cancel_after:
                step.done[a] = True  # cancelled: reason stays 0
        history.update(ks, len(rows), step.accepted, step.stopped)
        all_done = step.all_done
        dec.settle(step)
        before = _kv(dec)
        departed = [r for r, d in zip(rows, step.done) if d]
        for r in departed:
            req = res.requests[job_of[r]]
            req["tokens"] = list(dec.out[r])
            req["finish"] = {1: "stop", 2: "length"}.get(dec.reason[r], "cancelled")
            req["needed_kv_bytes"] = _needed(dec, rows.index(r), before)
            req["row_kv_bytes"] = sum(before) // len(rows)  # one row of the batched caches, padding included
        dec.compact(step)
        after = (0, 0) if all_done else _kv(dec)
        for r in departed:  # what its step released, shared with the rows that left with it
            res.requests[job_of[r]].update(step_released_bytes=sum(before) - sum(after), step_departed=len(departed))
        res.steps.append({"step": len(res.steps), "start_s": t0, "end_s": clock(), "admit_s": t0 - t_admit,
                          "t_draft_forward": step.t_draft_forward, "t_target": step.t_target,
                          "running": len(rows), "admitted": len(new), "departed": len(departed), "k": ks,
                          "drafted": ks * len(rows), "accepted": step.accepted, "accepted_rows": step.accepted_rows,
                          "emitted": sum(step.emitted),
                          "kv_target_bytes": before[0], "kv_draft_bytes": before[1],
                          "kv_after_bytes": sum(after)})
        if all_done:
            dec = None
    return res
