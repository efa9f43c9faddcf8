"""The decoding engine: autoregressive baseline and speculative decoding with KV rollback.

One loop serves both.  Each step feeds the target the row's last token plus k drafts, processes
the k+1 logits with the sampling rules into p, and verifies (Leviathan et al. 2022, Algorithm 1;
Sun et al. 2025 for method="block", both in `specdec.core.verify`); with no drafter, k = 0 and the
step is plain autoregressive decoding with a KV cache, through the same sampling code.  A step is
five small functions -- draft, forward, accept, emit, rollback (+ compact) -- and `generate` only
sequences them and reads the clock between them.

Ragged batches (rows accept different counts and finish at different times) -- the scheme:
  * per-row valid slots in one shared cache (`specdec.engine.kv.new_cache`: a DynamicCache, or a
    compiled model's preallocated SlotCache).  Every row is fed the same number of slots
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
rows with less budget are cut at theirs, so nothing overshoots.  It is also capped where it cannot
pay (`specdec.engine.inputs.next_k_cap`): a step drafts at most max(8, 2 (n + 1)) tokens, n the
longest run of drafts any row had accepted in the previous drafting step -- a k of 8 or less is
never touched, a drafter accepted all the way doubles its way up to the requested k, and a huge k
with a drafter accepted a few tokens at a time drafts about 8 per step, not hundreds (a one-row
run drafts at most 10 tokens per token it emits).  `cancel` (a threading.Event or a
callable) is checked before each step and after each draft: generation returns the consistent
prefix so far, marked cancelled; caches live only inside the call, so models are reusable at once.

Overhead: per step the engine does vectorized tensor work and ONE host sync: a `.tolist()` of each
row's accepted count and new tokens together with the checks of the step's logits (target and draft:
is every row's maximum finite? -- false exactly when a row has a NaN or +inf or is all -inf; only
then does a second sync find which, for the error); the bookkeeping of a few rows (stops, budgets,
who finished) is then host arithmetic.  Nothing else syncs: p and q are built unchecked and verified
by `verify_unchecked`.  Between model forwards that leave the CPU's caches cold each small tensor
operation costs several microseconds, so the step is written with few of them.  Greedy decoding
(temperature 0) skips building distributions: `greedy_verify` on the argmax, tested equal to
`verify` on one-hot p and q for both methods.

A `verifier` replaces `verify` for a caller that names one (same signature: drafts, q, p, method=,
generator= -> VerifyResult): the measurement code passes its controlled-acceptance
instrumentation this way (`specdec.measure.controlled`); the algorithm itself has no branch for it.

Example: generate(target, torch.tensor([1, 2, 3]), drafter=draft, k=4, max_new_tokens=8,
temperature=0).tokens[0] == generate(target, torch.tensor([1, 2, 3]), max_new_tokens=8,
temperature=0).tokens[0]  (greedy speculative output is token-identical to the baseline).
"""

from __future__ import annotations

import torch

from specdec.core.sampling import RowGenerators, SamplingConfig, logit_flags, raise_for_flags, sample
from specdec.core.verify import greedy_verify, verify_unchecked
from specdec.engine.cache import drop_leading_holes
from specdec.engine.drafters import as_drafter
from specdec.engine.inputs import (K_UNCAPPED, check_arguments, check_generator, clip_k, next_k_cap, peak_memory,
                                   prompt_positions, prompts_of, stop_tokens)
from specdec.engine.kv import context_length, engine_model, new_cache, now, steps
from specdec.engine.schedule import History, as_schedule
from specdec.engine.stats import DecodeStats, GenerateResult

__all__ = ["generate", "GenerateResult", "DecodeStats", "as_drafter", "greedy_verify"]


class _Decoder:
    """The state of one `generate` call: the target's cache and mask, the running rows (A of B), the
    output buffer, and the problems seen in logits so far; one method per phase of a step."""

    def __init__(self, target, drafter, ids, mask, *, max_new_tokens, stops, sampling, method, generator,
                 verifier, slots_ahead: int = 0):
        self.target, self.drafter, self.sampling = target, drafter, sampling
        self.max_new, self.stops, self.method = max_new_tokens, stops, method
        self.generator, self.verifier = generator, verifier
        self.device = ids.device
        self.n_ctx = context_length(target) or 1 << 62
        B, T = ids.shape
        self.ids, self.mask, self.cache = ids, mask, new_cache(target, T + slots_ahead)
        self.prefix = ids[:, :-1] if T > 1 else None  # fed with the first step: no separate prefill call
        self.prefix_pos = prompt_positions(mask[:, :-1])  # its positions count only its real tokens
        self.tmask = mask[:, :-1].clone()  # (A, L): valid slots of the target cache (after the first step)
        self.pending = ids[:, -1]  # (A,) last committed token, not yet in the cache
        self.pos = mask.sum(1) - 1  # (A,) position of pending
        self.row_ids = list(range(B))  # active row -> original row
        self.out = [[] for _ in range(B)]  # each row's tokens so far (host ints: the step's sync brings them)
        self.reason = [0] * B  # 0 running/cancelled, 1 stop, 2 length
        self.budget = [max_new_tokens] * B  # each row's max_new_tokens (rows of a continuous batch differ)
        self.stop_set = set(stops.tolist())
        self.tmax = None  # (A, s) the maxima of the step's target logits: checked by the step's sync (emit)
        self.true = torch.ones((), dtype=torch.bool, device=self.device)  # for a drafter that reports nothing
        self.active, self.max_rem = max_new_tokens > 0, max_new_tokens
        self.k_cap = K_UNCAPPED  # the next step's draft-length cap (`next_k_cap`)

    def draft(self, ks: int):
        """ks drafts per row: (drafts (A, ks), q (A, ks, V), seconds in the drafter's forwards)."""
        drafts, q = self.drafter.propose(ks, self.sampling, self.generator)
        return drafts, q, self.drafter.forward_seconds

    def forward(self, drafts) -> torch.Tensor:
        """The target over the pending token and the drafts (and, at the first step, the prompt
        before them): logits (A, ks+1, V); their row maxima are kept for the step's check (`emit`)."""
        feed = self.pending[:, None] if drafts is None else torch.cat([self.pending[:, None], drafts], 1)
        A, s = feed.shape
        j = steps(s, self.device)
        self.tmask = torch.cat([self.tmask, self.tmask.new_ones(A, s)], 1)
        pos = (self.pos[:, None] + j).clamp(max=self.n_ctx - 1)
        if self.prefix is not None:  # first step: the prompt, then the pending token and the drafts
            feed, pos = torch.cat([self.prefix, feed], 1), torch.cat([self.prefix_pos, pos], 1)
            self.prefix = None
        logits = self.target(input_ids=feed, attention_mask=self.tmask, position_ids=pos, cache=self.cache,
                             use_cache=True, logits_to_keep=s).logits  # (A, s, V)
        self.tmax = logits.amax(-1)  # (A, s): NaN if a row has one, +inf if one has it, -inf if all are
        return logits

    def accept(self, logits, drafts, q):
        """(n (A,) accepted drafts, tokens (A, ks+1): the accepted drafts, the target's token, -1)."""
        A = logits.shape[0]
        if self.sampling.greedy and drafts is None:  # plain greedy step: the argmax, nothing to verify
            return self.pos.new_zeros(A), logits[:, 0].argmax(-1, keepdim=True)
        if self.sampling.greedy and self.verifier is None:
            return greedy_verify(drafts, logits)
        p = self.sampling.process(logits, check=False)  # (A, ks+1, V); checked by the step's one sync
        if drafts is None:
            toks = sample(p[:, 0], self.generator, greedy=self.sampling.greedy, check=False,
                          float64=False)[:, None]  # (A, 1)
            return torch.zeros(A, dtype=torch.long, device=self.device), toks
        verifier = self.verifier or verify_unchecked  # p and q are the engine's own: no re-validation
        res = verifier(drafts, q, p, method=self.method, generator=self.generator)
        return res.num_accepted, res.tokens

    def emit(self, n, toks, ks: int):
        """The step's one host sync -- each row's accepted count and tokens, the logits checks -- then,
        on the host, each row's new tokens cut at the first stop and at the budget.  Returns
        (n per row, emitted per row, done per row, n_max, any_done, all_done, accepted, stopped)."""
        A, s = toks.shape
        finite = getattr(self.drafter, "finite", None)  # every row of draft scores had a finite maximum
        if finite is None and getattr(self.drafter, "flags", None) is not None:  # a drafter with flags only
            finite = ~self.drafter.flags.any()
        checks = torch.stack([torch.isfinite(self.tmax).all(), self.true if finite is None else finite]).long()
        synced = torch.cat([n, toks.reshape(-1), checks]).tolist()
        n_l = synced[:A]
        if not synced[-2]:  # which problem: a second sync, on the way to the error only
            raise_for_flags(logit_flags(self.tmax[..., None]).tolist(), "the target's logits")
        if not synced[-1]:
            raise_for_flags(self.drafter.flags.tolist(), "the draft's logits")
        emitted, done = [], []
        for a, r in enumerate(self.row_ids):
            new = synced[A + a * s: A + a * s + n_l[a] + 1][:self.budget[r] - len(self.out[r])]  # drafts kept + 1
            stop = next((i for i, t in enumerate(new) if t in self.stop_set), None)
            if stop is not None:
                new = new[:stop + 1]
            self.out[r].extend(new)
            emitted.append(len(new))
            done.append(stop is not None or len(self.out[r]) >= self.budget[r])
            if done[-1]:
                self.reason[r] = 1 if stop is not None else 2
        left = [self.budget[r] - len(self.out[r]) for r, d in zip(self.row_ids, done) if not d]
        self.max_rem = max(left, default=0)
        if ks > 0:
            self.k_cap = next_k_cap(max(n_l))
        return (n_l, emitted, done, max(n_l), any(done), all(done), sum(n_l), sum(x < ks for x in n_l))

    def rollback(self, ks: int, n, toks, n_max: int, all_done: bool) -> None:
        """Mask each row's rejected slots, crop the slots every row rejected, advance, tell the drafter
        (what it drafted and kept, or after a step without drafts the target's token)."""
        one = toks.shape[0] == 1  # one row: its n is n_max, so every slot it rejected is cropped below
        if ks > 0:
            if not one:  # rows keep different counts: each row's rejected slots are masked
                self.tmask[:, -ks:] = (steps(ks, self.device)[None] < n[:, None]).long()
            drop = ks - n_max
            if drop:
                self.cache.crop(-drop)
                self.tmask = self.tmask[:, :-drop]
        self.pos = self.pos + (n_max + 1 if one else n + 1)
        # (A,) the target's token (contiguous, like every tensor a compiled forward is fed)
        self.pending = toks.reshape(-1)[n_max:n_max + 1] if one else toks.gather(1, n[:, None])[:, 0]
        if ks > 0 and not all_done:
            self.drafter.commit(n, self.pending, n_max)
        elif self.drafter is not None and not all_done:
            self.drafter.advance(self.pending)

    def compact(self, done: list, any_done: bool, all_done: bool) -> None:
        """Finished rows leave the batch (cache, mask, positions, drafter); then the leading slots
        every remaining row masks (a departed row's longer prompt) are dropped."""
        if all_done:
            self.active = False
        elif any_done:
            kept = [a for a, d in enumerate(done) if not d]
            keep = torch.tensor(kept, dtype=torch.long, device=self.device)
            self.cache.batch_select_indices(keep)
            self.tmask, self.pos, self.pending = self.tmask[keep], self.pos[keep], self.pending[keep]
            self.row_ids = [self.row_ids[a] for a in kept]
            if isinstance(self.generator, RowGenerators):
                self.generator = self.generator.select(kept)
            if self.drafter is not None:
                self.drafter.select(keep)
            self.tmask = drop_leading_holes(self.cache, self.tmask)

    def result(self, stats, cancelled: bool) -> GenerateResult:
        B = len(self.out)
        tokens = [torch.tensor(t, dtype=torch.long, device=self.device) for t in self.out]
        finish = ["stop" if r == 1 else "length" if r == 2 else "cancelled" for r in self.reason]
        if self.max_new == 0:
            finish = ["length"] * B
        return GenerateResult(tokens=tokens, stats=stats, cancelled=cancelled, finish=finish)


def generate(target, input_ids, *, drafter=None, k=4, method: str = "token", max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             stop_token_ids=(), generator: torch.Generator | None = None, cancel=None,
             verifier=None) -> GenerateResult:
    """Generate up to max_new_tokens per row from `target` (a Hugging Face causal LM).

    drafter=None: autoregressive baseline; a causal LM or a drafter object: speculative decoding
    with k drafts per step -- an integer, or a schedule (`specdec.engine.schedule`: a callable
    given the run's `History` before each step; each step's k is capped where it cannot pay, see
    the module docstring) -- verified by `method` ("token" or "block"), or
    by `verifier` when a caller names one (module docstring; an approximate rule of
    `specdec.core.approximate` is reached only this way, and its stats say lossless False).  Sampling rules as in
    `specdec.core.sampling.process_logits` (temperature 0 = greedy).  All randomness from `generator`
    (None, a torch.Generator, or a `RowGenerators` with one per row; anything else is a TypeError at
    every temperature).  Every argument is checked before the first forward (`specdec.engine.inputs`).

    The loop runs under `torch.inference_mode` (about 5% faster per forward on this CPU than
    no_grad, and what Hugging Face's generate uses); the returned tokens are cloned outside it, so
    they are ordinary tensors.
    """
    res = _generate(target, input_ids, drafter=drafter, k=k, method=method, max_new_tokens=max_new_tokens,
                    temperature=temperature, top_k=top_k, top_p=top_p, stop_token_ids=stop_token_ids,
                    generator=generator, cancel=cancel, verifier=verifier)
    res.tokens = [t.clone() for t in res.tokens]
    return res


@torch.inference_mode()
def _generate(target, input_ids, *, drafter, k, method, max_new_tokens, temperature, top_k, top_p, stop_token_ids,
              generator, cancel, verifier) -> GenerateResult:
    sampling = SamplingConfig(temperature, top_k, top_p)
    drafter, target, schedule = as_drafter(drafter), engine_model(target), as_schedule(k)
    if drafter is not None and not isinstance(k, int) and not hasattr(drafter, "advance"):
        raise ValueError("a draft-length schedule can choose k = 0, after which the drafter is told the target's "
                         f"token with advance(next_token); {type(drafter).__name__} has no advance method")
    device = next(target.parameters()).device
    V = int(target.config.vocab_size)
    ids, mask = prompts_of(input_ids, V, device)  # (B, T), (B, T)
    check_arguments(target, drafter, ids, method, max_new_tokens, verifier, cancel)
    check_generator(generator, ids.shape[0])
    stops = stop_tokens(stop_token_ids, V, device)
    is_cancelled = (cancel.is_set if hasattr(cancel, "is_set") else cancel) if cancel is not None else (lambda: False)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t_start = now(device)
    k_max = 0 if drafter is None else k if isinstance(k, int) else getattr(schedule, "k_max", 8)
    ahead = (max_new_tokens + k_max) * (2 if k_max and ids.shape[0] > 1 else 1)  # slots a compiled model
    # preallocates beyond the prompt: enough for what one row can fill, twice that for a ragged batch's holes
    dec = _Decoder(target, drafter, ids, mask, max_new_tokens=max_new_tokens, stops=stops, sampling=sampling,
                   method=method, generator=generator, verifier=verifier, slots_ahead=ahead)
    if drafter is not None and hasattr(drafter, "slots_ahead"):
        drafter.slots_ahead = ahead
    stats, history, cancelled = DecodeStats(), History(), False
    if verifier is not None and drafter is not None:  # a caller's rule: lossless only if it says so
        stats.lossless = getattr(verifier, "lossless", False) is True
        stats.verifier = str(getattr(verifier, "name", type(verifier).__name__))
    else:
        stats.verifier = method if drafter is not None else "autoregressive"
    if drafter is not None:
        drafter.begin(ids, mask)
    stats.prefill_seconds = now(device) - t_start  # the prompt itself is fed with the first step
    while dec.active:
        if is_cancelled():
            cancelled = True
            break
        t0, rows = now(device), dec.row_ids
        history.running = len(rows)  # what a load-aware schedule sees
        ks = 0 if drafter is None else clip_k(schedule(history), dec.max_rem, dec.k_cap)
        drafts, q, t_df = dec.draft(ks) if ks > 0 else (None, None, 0.0)
        if ks > 0 and is_cancelled():  # mid-draft: the drafts are dropped, the committed prefix stands
            cancelled = True
            break
        t1 = now(device)
        logits = dec.forward(drafts)  # (A, ks+1, V)
        t2 = now(device)
        n, toks = dec.accept(logits, drafts, q)
        t3 = now(device)
        n_l, e, done, n_max, any_done, all_done, accepted, n_stopped = dec.emit(n, toks, ks)
        t4 = now(device)
        history.update(ks, len(rows), accepted, n_stopped)
        stats.emitted.append((t4 - t_start, rows, e))
        stats.accepted.append((rows, n_l))
        dec.rollback(ks, n, toks, n_max, all_done)
        t5 = now(device)
        dec.compact(done, any_done, all_done)
        t6 = now(device)
        stats.steps.append({"step": len(stats.steps), "k": ks, "active": len(rows), "t_draft": t1 - t0,
                            "t_draft_forward": t_df, "t_target": t2 - t1, "t_accept": t3 - t2,
                            "t_rollback": t5 - t4, "t_other": (t4 - t3) + (t6 - t5), "t_step": t6 - t0,
                            "emitted": sum(e)})
    stats.total_seconds = now(device) - t_start
    stats.peak_memory_bytes, stats.memory_kind = peak_memory(device)
    stats.kv_slots = int(dec.tmask.shape[1])  # the target cache's length per row at the end, holes included
    return dec.result(stats, cancelled)
