"""The decoding engine: autoregressive baseline and speculative decoding with KV rollback.

One loop serves both.  Each step feeds the target the row's last token plus k drafts, processes
the k+1 logits with the sampling rules into p, and verifies (Leviathan et al. 2022, Algorithm 1;
Sun et al. 2025 for method="block", both in `specdec.verify`); with no drafter, k = 0 and the
step is plain autoregressive decoding with a KV cache, through the same sampling code.

Ragged batches (rows accept different counts and finish at different times) -- the scheme:
  * per-row valid slots in one shared DynamicCache.  Every row is fed the same number of slots
    per step; a rejected draft's slot is not cropped but masked (attention mask 0), and only the
    trailing slots rejected by every row are cropped (`cache.crop(-n)`, transformers 5.24).
  * explicit position_ids that count only valid slots, so a masked hole never shifts positions:
    row b's logits are those of its own unpadded sequence (fp32: equal within ~1e-6).
  * prompts of different lengths are left-padded the same way (masked slots, positions from 0).
  * finished rows leave the batch (`cache.batch_select_indices`), so they cost no compute.
Why not crop every row to the shortest accepted prefix and re-feed the rest: that repeats target
work each step; holes cost only memory (at most k slots per step) and one mask column each.

Stops and budget: a row ends right after a stop token (accepted draft or target token) or at
exactly max_new_tokens; the draft length is clipped to the largest remaining budget minus one and
rows with less budget are cut at theirs, so nothing overshoots.  `cancel` (a threading.Event or a
callable) is checked before each step and after each draft: generation returns the consistent
prefix so far, marked cancelled; caches live only inside the call, so models are reusable at once.

Overhead: per step the engine does vectorized tensor work and ONE host sync (a `.tolist()` of four
numbers); drafters, process_logits and verify add their own checks when sampling.  Greedy decoding
(temperature 0) skips building distributions: `greedy_verify` on the argmax, tested equal to
`verify` on one-hot p and q for both methods.  `instrument_accept_prob=alpha` is an
INSTRUMENTATION mode, not a decoding algorithm: each draft is accepted with probability alpha
regardless of p and q (the stopping token drawn from p), to measure the hardware cost curve at a
controlled acceptance; its outputs are not target samples and must never back quality claims.

Example: generate(target, torch.tensor([1, 2, 3]), drafter=draft, k=4, max_new_tokens=8,
temperature=0).tokens[0] == generate(target, torch.tensor([1, 2, 3]), max_new_tokens=8,
temperature=0).tokens[0]  (greedy speculative output is token-identical to the baseline).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field

import torch

from specdec.drafters import ModelDrafter, Sampling, _now, context_length, draw
from specdec.verify import verify

__all__ = ["generate", "GenerateResult", "DecodeStats", "as_drafter", "greedy_verify"]


@dataclass
class DecodeStats:
    """Timings (seconds) and acceptance of one `generate` call; tidy rows via the *_rows methods.

    t_draft: the drafter's propose (t_draft_forward of it in model forwards); t_target: the target
    forward; t_accept: processing logits + verification/sampling; t_rollback: cache crops, masks,
    drafter commit; t_other: the rest (emission, stop checks, the host sync, batch compaction).
    Engine overhead outside model forwards = t_step - t_draft_forward - t_target.
    """

    steps: list = field(default_factory=list)  # one dict per step
    accepted: list = field(default_factory=list)  # per step: (rows (A,), n (A,)) tensors
    emitted: list = field(default_factory=list)  # per step: (time since start, rows (A,), count (A,))
    prefill_seconds: float = 0.0
    total_seconds: float = 0.0
    peak_memory_bytes: int = 0
    memory_kind: str = "process_rss_peak"  # or "cuda_max_memory_allocated"

    def step_rows(self) -> list[dict]:
        return [dict(s) for s in self.steps]

    def accept_rows(self) -> list[dict]:
        """One row per (step, batch row): drafts proposed (k) and accepted."""
        out = []
        for s, (rows, n) in zip(self.steps, self.accepted):
            for r, a in zip(rows.tolist(), n.tolist()):
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

    def token_rows(self) -> list[dict]:
        """One row per generated token: its batch row, index, time since start, latency since the
        row's previous token (the first token's latency is the time to first token)."""
        per_row: dict[int, list[float]] = {}
        for t, rows, cnt in self.emitted:
            for r, c in zip(rows.tolist(), cnt.tolist()):
                per_row.setdefault(r, []).extend([t] * c)
        out = []
        for r in sorted(per_row):
            prev = 0.0
            for i, t in enumerate(per_row[r]):
                out.append({"row": r, "index": i, "time_s": t, "latency_s": t - prev})
                prev = t
        return out

    def summary(self) -> dict:
        keys = ("t_draft", "t_draft_forward", "t_target", "t_accept", "t_rollback", "t_other", "t_step")
        tot = {k: sum(s[k] for s in self.steps) for k in keys}
        n_tok = sum(s["emitted"] for s in self.steps)
        ttft = [r["time_s"] for r in self.token_rows() if r["index"] == 0]
        overhead = tot["t_step"] - tot["t_draft_forward"] - tot["t_target"]
        acc = [r["accepted"] for r in self.accept_rows() if r["k"] > 0]
        return {"steps": len(self.steps), "tokens": n_tok, **tot, "prefill_s": self.prefill_seconds,
                "total_s": self.total_seconds, "overhead_share": overhead / tot["t_step"] if self.steps else 0.0,
                "mean_accepted": sum(acc) / len(acc) if acc else 0.0,
                "ttft_s": min(ttft) if ttft else None, "peak_memory_bytes": self.peak_memory_bytes,
                "memory_kind": self.memory_kind}


@dataclass
class GenerateResult:
    """tokens: one 1-D int64 tensor of new tokens per row (prompt excluded; a (T,) prompt gives a
    list of one).  finish: per row "stop", "length" or "cancelled"."""

    tokens: list
    stats: DecodeStats
    cancelled: bool
    finish: list


def as_drafter(drafter):
    """A drafter object passes through; a causal LM (torch module) becomes a ModelDrafter."""
    if drafter is None or all(hasattr(drafter, m) for m in ("begin", "propose", "commit", "select")):
        return drafter
    if isinstance(drafter, torch.nn.Module):
        return ModelDrafter(drafter)
    raise ValueError(f"drafter must be None, a causal LM or a drafter object, got {type(drafter).__name__}")


def greedy_verify(drafts: torch.Tensor, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification without building distributions; equal to `verify` on one-hot p and q
    (both methods): keep the drafts while each is the target's argmax, then the argmax itself
    (first maximum on ties, as process_logits(temperature=0)).
    drafts (A, k), logits (A, k+1, V) -> num_accepted (A,), tokens (A, k+1) padded with -1.
    Example: drafts [[3, 5]], argmax [[3, 4, 9]] -> n [1], tokens [[3, 4, -1]].
    """
    best = logits.argmax(-1)  # (A, k+1)
    n = (drafts == best[:, :-1]).long().cumprod(1).sum(1)  # (A,)
    j = torch.arange(best.shape[1], device=best.device)
    return n, torch.where(j[None] <= n[:, None], best, -1)


def _prompts(input_ids, vocab: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(T,), (B, T) or a list of 1-D tensors -> left-padded ids (B, T) and mask (B, T)."""
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() not in (1, 2):
            raise ValueError(f"input_ids must be (T,) or (B, T), got shape {tuple(input_ids.shape)}")
        if input_ids.numel() == 0:
            raise ValueError(f"empty prompt: input_ids has shape {tuple(input_ids.shape)}")
        rows = list(input_ids.reshape(-1, input_ids.shape[-1]))
    elif isinstance(input_ids, (list, tuple)) and all(isinstance(r, torch.Tensor) and r.dim() == 1 for r in input_ids):
        rows = list(input_ids)
    else:
        raise ValueError("input_ids must be a tensor (T,) / (B, T) or a list of 1-D tensors")
    if not rows or any(r.numel() == 0 for r in rows):
        raise ValueError("empty prompt: every row needs at least one token")
    if any(r.is_floating_point() or r.dtype == torch.bool for r in rows):
        raise ValueError("input_ids must be integer token ids")
    lo, hi = min(int(r.min()) for r in rows), max(int(r.max()) for r in rows)
    if lo < 0 or hi >= vocab:
        raise ValueError(f"token ids must lie in [0, {vocab}), got range [{lo}, {hi}]")
    T = max(r.numel() for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long, device=device)
    mask = torch.zeros(len(rows), T, dtype=torch.long, device=device)
    for b, r in enumerate(rows):
        ids[b, T - r.numel():] = r.to(device)
        mask[b, T - r.numel():] = 1
    return ids, mask


def _check(target, drafter, ids, k, method, max_new_tokens, alpha, cancel):
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if method not in ("token", "block"):
        raise ValueError(f"method must be 'token' or 'block', got {method!r}")
    if alpha is not None and (drafter is None or not (0.0 <= alpha <= 1.0)):
        raise ValueError(f"instrument_accept_prob must be in [0, 1] and needs a drafter, got {alpha!r}")
    if cancel is not None and not (hasattr(cancel, "is_set") or callable(cancel)):
        raise ValueError("cancel must be a threading.Event, a callable returning bool, or None")
    V = int(target.config.vocab_size)
    if drafter is not None and drafter.vocab_size != V:
        raise ValueError(f"drafter vocabulary ({drafter.vocab_size}) differs from the target's ({V})")
    T = ids.shape[1]
    for name, m in (("target", target), ("drafter", getattr(drafter, "model", None))):
        n_ctx = context_length(m) if m is not None else None
        if n_ctx is not None and T > n_ctx:
            raise ValueError(f"prompt of {T} tokens is longer than the {name}'s context ({n_ctx})")
        if n_ctx is not None and T + max_new_tokens > n_ctx:
            raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) exceeds the {name}'s "
                             f"context ({n_ctx})")


def _peak_memory(device) -> tuple[int, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_rss_peak"


@torch.no_grad()  # not inference_mode: returned tensors stay ordinary tensors
def generate(target, input_ids, *, drafter=None, k: int = 4, method: str = "token", max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             stop_token_ids=(), generator: torch.Generator | None = None, cancel=None,
             instrument_accept_prob: float | None = None) -> GenerateResult:
    """Generate up to max_new_tokens per row from `target` (a Hugging Face causal LM).

    drafter=None: autoregressive baseline; a causal LM or a drafter object: speculative decoding
    with k drafts per step, verified by `method` ("token" or "block").  Sampling rules as in
    `specdec.sampling.process_logits` (temperature 0 = greedy).  All randomness from `generator`.
    """
    sampling = Sampling(temperature, top_k, top_p)
    drafter = as_drafter(drafter)
    device = next(target.parameters()).device
    V = int(target.config.vocab_size)
    ids, mask = _prompts(input_ids, V, device)  # (B, T), (B, T)
    _check(target, drafter, ids, k, method, max_new_tokens, instrument_accept_prob, cancel)
    try:
        stop_set = sorted({int(s) for s in stop_token_ids})
    except (TypeError, ValueError):
        raise ValueError(f"stop_token_ids must be an iterable of token ids, got {stop_token_ids!r}") from None
    if stop_set and (stop_set[0] < 0 or stop_set[-1] >= V):
        raise ValueError(f"stop_token_ids must lie in [0, {V}), got {stop_set}")
    stops = torch.tensor(stop_set, dtype=torch.long, device=device)
    is_cancelled = (cancel.is_set if hasattr(cancel, "is_set") else cancel) if cancel is not None else (lambda: False)
    n_ctx = context_length(target) or 1 << 62
    B, T = ids.shape
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    stats = DecodeStats()
    t_start = _now(device)

    from transformers import DynamicCache

    cache = DynamicCache()
    tmask = mask[:, :-1].clone()  # (A, L): valid slots of the target cache
    if T > 1:
        target(input_ids=ids[:, :-1], attention_mask=tmask, position_ids=(tmask.cumsum(1) - 1).clamp(min=0),
               cache=cache, use_cache=True, logits_to_keep=1)
    if drafter is not None:
        drafter.begin(ids, mask)
    pending = ids[:, -1]  # (A,) last committed token, not yet in the cache
    pos = mask.sum(1) - 1  # (A,) position of pending
    rows = torch.arange(B, device=device)  # active row -> original row
    W = max_new_tokens + k + 2  # output buffer; last column is a trash slot
    out = torch.full((B, W), -1, dtype=torch.long, device=device)
    n_out = torch.zeros(B, dtype=torch.long, device=device)
    reason = torch.zeros(B, dtype=torch.long, device=device)  # 0 running/cancelled, 1 stop, 2 length
    stats.prefill_seconds = _now(device) - t_start
    cancelled, active, max_rem = False, max_new_tokens > 0, max_new_tokens
    step = 0
    while active:
        if is_cancelled():
            cancelled = True
            break
        t0 = _now(device)
        ks = 0 if drafter is None else min(k, max_rem - 1)
        t_df = 0.0
        if ks > 0:
            drafts, q = drafter.propose(ks, sampling, generator)  # (A, ks), (A, ks, V)
            t_df = drafter.forward_seconds
            if is_cancelled():  # mid-draft: the drafts are dropped, the committed prefix stands
                cancelled = True
                break
            feed = torch.cat([pending[:, None], drafts], 1)  # (A, ks+1)
        else:
            feed = pending[:, None]  # (A, 1)
        t1 = _now(device)
        s = ks + 1
        A = feed.shape[0]
        j = torch.arange(s, device=device)
        tmask = torch.cat([tmask, torch.ones(A, s, dtype=torch.long, device=device)], 1)
        logits = target(input_ids=feed, attention_mask=tmask, position_ids=(pos[:, None] + j).clamp(max=n_ctx - 1),
                        cache=cache, use_cache=True).logits  # (A, s, V)
        t2 = _now(device)
        if sampling.greedy and instrument_accept_prob is None:
            n, toks = greedy_verify(drafts if ks else feed[:, :0], logits)  # (A,), (A, s)
        else:
            p = sampling.process(logits)  # (A, s, V)
            if ks == 0:
                n = torch.zeros(A, dtype=torch.long, device=device)
                toks = draw(p[:, 0], sampling, generator)[:, None]  # (A, 1)
            elif instrument_accept_prob is not None:  # INSTRUMENTATION, not exact decoding
                u = torch.rand((A, ks), generator=generator, dtype=torch.float64,
                               device=generator.device if generator is not None else device).to(device)
                n = (u < instrument_accept_prob).long().cumprod(1).sum(1)  # (A,)
                y = draw(p[torch.arange(A, device=device), n], sampling, generator)  # (A,)
                ext = torch.cat([drafts, y[:, None]], 1)
                toks = torch.where(j[None] < n[:, None], ext, torch.where(j[None] == n[:, None], y[:, None], -1))
            else:
                res = verify(drafts, q, p, method=method, generator=generator)
                n, toks = res.num_accepted, res.tokens  # (A,), (A, s)
        t3 = _now(device)
        # emit: the accepted drafts and the target's token, cut at the first stop and at the budget
        if stops.numel():
            hit = (j[None] <= n[:, None]) & torch.isin(toks, stops)  # (A, s) stop among the new tokens
            first = torch.where(hit.any(1), hit.long().argmax(1), s)  # (A,) index of the first stop
        else:
            first = torch.full_like(n, s)
        no = n_out[rows]  # (A,) tokens so far
        e = torch.minimum(torch.minimum(n + 1, first + 1), max_new_tokens - no)  # (A,) tokens emitted
        out[rows[:, None], torch.where(j[None] < e[:, None], no[:, None] + j[None], W - 1)] = toks
        no = no + e
        n_out[rows] = no
        stopped = first < e
        done = stopped | (no >= max_new_tokens)
        left = torch.where(done, 0, max_new_tokens - no)
        n_max, any_done, all_done, max_rem = torch.stack([n.max(), done.any(), done.all(), left.max()]).tolist()
        if any_done:
            reason[rows] = torch.where(stopped, 1, torch.where(done, 2, 0))
        t4 = _now(device)
        stats.emitted.append((t4 - t_start, rows, e))
        stats.accepted.append((rows, n))
        # roll back: mask each row's rejected slots, crop the slots every row rejected
        if ks > 0:
            tmask[:, -ks:] = (j[None, :ks] < n[:, None]).long()
            drop = ks - n_max
            if drop:
                cache.crop(-drop)
                tmask = tmask[:, :-drop]
        pos = pos + n + 1
        pending = toks.gather(1, n[:, None])[:, 0]  # (A,) the target's token
        if ks > 0 and not all_done:
            drafter.commit(n, pending, n_max)
        t5 = _now(device)
        if all_done:
            active = False
        elif any_done:  # finished rows leave the batch
            keep = (~done).nonzero()[:, 0]
            cache.batch_select_indices(keep)
            tmask, pos, pending, rows = tmask[keep], pos[keep], pending[keep], rows[keep]
            drafter is not None and drafter.select(keep)
        t6 = _now(device)
        stats.steps.append({"step": step, "k": ks, "active": A, "t_draft": t1 - t0, "t_draft_forward": t_df,
                            "t_target": t2 - t1, "t_accept": t3 - t2, "t_rollback": t5 - t4,
                            "t_other": (t4 - t3) + (t6 - t5), "t_step": t6 - t0, "emitted": 0})
        step += 1
    stats.total_seconds = _now(device) - t_start
    for srow, (_, _, e) in zip(stats.steps, stats.emitted):
        srow["emitted"] = int(e.sum())
    stats.peak_memory_bytes, stats.memory_kind = _peak_memory(device)
    counts, reasons = n_out.tolist(), reason.tolist()
    tokens = [out[b, :counts[b]].clone() for b in range(B)]
    finish = ["stop" if r == 1 else "length" if r == 2 else "cancelled" for r in reasons]
    if max_new_tokens == 0:
        finish = ["length"] * B
    return GenerateResult(tokens=tokens, stats=stats, cancelled=cancelled, finish=finish)
