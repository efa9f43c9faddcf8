"""What one `generate` call reports besides its tokens: per-step timings, acceptance, emission times.

Step timings (seconds), recorded by the decoding loop at the boundaries of its phases:
    t_draft          the drafter's propose (t_draft_forward of it in model forwards)
    t_target         the target's forward over the k+1 fed positions
    t_accept         processing logits + verification / sampling
    t_rollback       cache crops, masks, the drafter's commit
    t_other          the rest: emission, stop checks, the step's one host sync, batch compaction
Engine overhead outside model forwards = t_step - t_draft_forward - t_target.  The *_steady sums
leave out the first step, whose target forward also feeds the prompt.

`summary` flattens a run into one dict:
    ttft_s            time to first token (prefill + first step), the earliest row's
    tokens_per_s      steady state: tokens after the first step / (total - ttft), ttft being the end
                      of the first step (which emits 1 token per row, or n+1 when speculating)
    lat_p50/p95/p99_s per-token latency over all rows, first tokens excluded; tokens emitted by one
                      speculative step arrive together, so their latency after the first is 0
    peak_memory_bytes process RSS peak on CPU (monotone over a process: an upper bound only),
                      cuda max_memory_allocated on GPU
    kv_slots          slots per row of the target's KV cache at the end: prompt + tokens fed, plus in a
                      ragged batch the masked holes of rejected drafts (`specdec.engine.decode`)
    lossless          False when the steps were decided by a caller's verifier that does not declare
                      ``lossless = True`` (approximate rules of `specdec.core.rules.approximate`, the
                      controlled-acceptance instrumentation); verifier names it

Example: generate(target, ids, max_new_tokens=32, temperature=0).summary()["tokens_per_s"]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specdec.core.acceptance import accepted_length_counts, fit_alpha

__all__ = ["STEP_KEYS", "DecodeStats", "GenerateResult", "latency_summary"]

STEP_KEYS = ("t_draft", "t_draft_forward", "t_target", "t_accept", "t_rollback", "t_other", "t_step")


def latency_summary(token_rows: list[dict], ttft: float | None, total: float, tokens: int, first: int) -> dict:
    """ttft_s, steady-state tokens_per_s (the tokens after the ``first`` ones, which arrive by ttft)
    and per-token latency percentiles from `token_rows`."""
    lat = np.array([r["latency_s"] for r in token_rows if r["index"] > 0], dtype=np.float64)
    p50, p95, p99 = (np.percentile(lat, [50, 95, 99]).tolist() if lat.size else [float("nan")] * 3)
    steady = tokens - first
    dur = total - (ttft or 0.0)
    return {"ttft_s": ttft, "tokens_per_s": steady / dur if steady > 0 and dur > 0 else float("nan"),
            "lat_p50_s": p50, "lat_p95_s": p95, "lat_p99_s": p99}


@dataclass
class DecodeStats:
    """Timings and acceptance of one `generate` call (module docstring); tidy rows via *_rows."""

    steps: list = field(default_factory=list)  # one dict per step
    accepted: list = field(default_factory=list)  # per step: (rows, n), lists of A ints
    emitted: list = field(default_factory=list)  # per step: (time since start, rows, count), lists of A ints
    prefill_seconds: float = 0.0
    total_seconds: float = 0.0
    peak_memory_bytes: int = 0
    kv_slots: int = 0  # slots per row of the target's KV cache at the end (prompt, tokens and masked holes)
    memory_kind: str = "process_rss_peak"  # or "cuda_max_memory_allocated"
    lossless: bool = True  # False when a verifier not known to keep the target's law decided the steps
    verifier: str = "token"  # the method, or the name of the verifier a caller passed
    mode: str = "eager"  # the target's forward: "lean", "eager" or "compiled" (`specdec.engine.modes`)

    def step_rows(self) -> list[dict]:
        return [dict(s) for s in self.steps]

    def accept_rows(self) -> list[dict]:
        """One row per (step, batch row): drafts proposed (k) and accepted."""
        out = []
        for s, (rows, n) in zip(self.steps, self.accepted):
            for r, a in zip(rows, n):
                out.append({"step": s["step"], "row": r, "k": s["k"], "accepted": a})
        return out

    def acceptance_by_position(self) -> list[dict]:
        """Position i (1-based): drafts proposed at i and accepted at i (accepted iff n >= i)."""
        prop, acc = {}, {}
        for r in self.accept_rows():
            for i in range(1, r["k"] + 1):
                prop[i] = prop.get(i, 0) + 1
                acc[i] = acc.get(i, 0) + (r["accepted"] >= i)
        return [{"position": i, "proposed": prop[i], "accepted": acc[i]} for i in sorted(prop)]

    def alpha_mle(self, k: int | None = None) -> tuple[float, int]:
        """(maximum-likelihood constant alpha, (row, step) pairs used) from the steps that drafted
        the full k (`specdec.core.acceptance.fit_alpha`); k=None pools every drafting step, whatever
        its k (the same MLE, S / (S + F): accepted drafts over accepted drafts plus rejections).
        (nan, 0) when no step qualifies."""
        if k is None:
            rows = [r for r in self.accept_rows() if r["k"] > 0]
            s, f = sum(r["accepted"] for r in rows), sum(r["accepted"] < r["k"] for r in rows)
            return (s / (s + f) if s + f else float("nan")), len(rows)
        n = [r["accepted"] for r in self.accept_rows() if r["k"] == k]
        if not n:
            return float("nan"), 0
        return fit_alpha(accepted_length_counts(np.array(n, dtype=np.int64), k)), len(n)

    def token_rows(self) -> list[dict]:
        """One row per generated token: its batch row, index, time since start, latency since the
        row's previous token (the first token's latency is the time to first token)."""
        per_row: dict[int, list[float]] = {}
        for t, rows, cnt in self.emitted:
            for r, c in zip(rows, cnt):
                per_row.setdefault(r, []).extend([t] * c)
        out = []
        for r in sorted(per_row):
            prev = 0.0
            for i, t in enumerate(per_row[r]):
                out.append({"row": r, "index": i, "time_s": t, "latency_s": t - prev})
                prev = t
        return out

    def summary(self) -> dict:
        """One flat dict of the run (module docstring)."""
        tot = {k: sum(s[k] for s in self.steps) for k in STEP_KEYS}
        n_tok = sum(s["emitted"] for s in self.steps)
        token_rows = self.token_rows()
        ttft = [r["time_s"] for r in token_rows if r["index"] == 0]
        overhead = tot["t_step"] - tot["t_draft_forward"] - tot["t_target"]
        acc = [r["accepted"] for r in self.accept_rows() if r["k"] > 0]
        first = self.steps[0]["emitted"] if self.steps else 0
        later = self.steps[1:]  # after the first step, which also feeds the prompt
        steady = {f"{k}_steady": sum(s[k] for s in later) for k in ("t_target", "t_draft_forward", "t_step")}
        out = {"steps": len(self.steps), "tokens": n_tok, **tot, **steady, "prefill_s": self.prefill_seconds,
               "total_s": self.total_seconds, "overhead_share": overhead / tot["t_step"] if self.steps else 0.0,
               "mean_accepted": sum(acc) / len(acc) if acc else 0.0, "first_step_tokens": first,
               "peak_memory_bytes": self.peak_memory_bytes, "memory_kind": self.memory_kind,
               "kv_slots": self.kv_slots, "lossless": self.lossless, "verifier": self.verifier}
        out.update(latency_summary(token_rows, min(ttft) if ttft else None, self.total_seconds, n_tok, first))
        return out


@dataclass
class GenerateResult:
    """tokens: one 1-D int64 tensor of new tokens per row (prompt excluded; a (T,) prompt gives a
    list of one).  finish: per row "stop", "length" or "cancelled"."""

    tokens: list
    stats: DecodeStats
    cancelled: bool
    finish: list

    def summary(self) -> dict:
        """`DecodeStats.summary` of this call."""
        return self.stats.summary()
