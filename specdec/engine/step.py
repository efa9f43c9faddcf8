"""One decoding step of the engine, shared by `generate` (`specdec.engine.decode`) and `serve`
(`specdec.engine.continuous`): the state of a running batch and the five phases of a step.

A step (`Decoder.step`) drafts ks tokens per running row, feeds the target the pending token and
the drafts (with the prompt, at the first step), verifies them with the sampling rules in force
(`specdec.core.verify`), and emits each row's accepted drafts and the target's token, cut at a stop
token and at the row's budget; it returns a `StepResult`.  The caller may then end rows of its own
(serving cancels a request that has streamed enough) before `Decoder.settle` masks or crops the
rejected slots and tells the drafter what was kept, and `Decoder.compact` lets finished rows leave
the batch.  The decode module's docstring states the scheme (ragged rows, holes, positions, the one
host sync per step).

Example:
    dec = Decoder(target, drafter, ids, mask, max_new_tokens=8, stops=stops, sampling=SamplingConfig(1.0),
                  method="token", generator=None, verifier=None)
    res = dec.step(2)          # StepResult: res.emitted[a] tokens for running row a, res.done[a]
    dec.settle(res); dec.compact(res)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.sampling import RowGenerators, logit_flags, raise_for_flags, sample
from specdec.core.verify import greedy_verify, verify_unchecked
from specdec.engine.cache import drop_leading_holes
from specdec.engine.inputs import K_UNCAPPED, next_k_cap, prompt_positions
from specdec.engine.kv import context_length, new_cache, now, steps
from specdec.engine.stats import GenerateResult

__all__ = ["Decoder", "StepResult"]


@dataclass
class StepResult:
    """What one step did.  Lists are per running row at the step's start (``rows[a]`` is its
    original row id); ``done[a]`` may be set by the caller before `Decoder.settle` (a cancelled row).

    k: drafts per row; accepted_rows: drafts each row kept; emitted: tokens each row emitted
    (accepted drafts + the target's token, cut at a stop and at the budget); accepted: their sum;
    stopped: rows that rejected a draft; the seconds of each phase on the engine's clock, and the
    clock's readings when the step began and when it ended.
    n (A,) and tokens (A, k+1) are the verification's tensors, which `settle` needs.
    """

    k: int
    rows: list
    accepted_rows: list
    emitted: list
    done: list
    accepted: int
    stopped: int
    n: torch.Tensor
    tokens: torch.Tensor
    t_draft: float
    t_draft_forward: float
    t_target: float
    t_accept: float
    t_emit: float
    started: float  # the engine's clock when the step began and when its emission ended
    ended: float

    @property
    def n_max(self) -> int:
        return max(self.accepted_rows)

    @property
    def all_done(self) -> bool:
        return all(self.done)

    @property
    def any_done(self) -> bool:
        return any(self.done)


class Decoder:
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

    def step(self, ks: int, cancelled=lambda: False) -> StepResult | None:
        """One step with ks drafts per row (0: plain decoding); None when `cancelled()` turns true
        after drafting (the drafts are dropped and the committed prefix stands)."""
        t0, rows = now(self.device), self.row_ids
        drafts, q, t_df = self.draft(ks) if ks > 0 else (None, None, 0.0)
        if ks > 0 and cancelled():
            return None
        t1 = now(self.device)
        logits = self.forward(drafts)  # (A, ks+1, V)
        t2 = now(self.device)
        n, toks = self.accept(logits, drafts, q)
        t3 = now(self.device)
        n_l, emitted, done, accepted, stopped = self.emit(n, toks, ks)
        t4 = now(self.device)
        return StepResult(ks, rows, n_l, emitted, done, accepted, stopped, n, toks, t_draft=t1 - t0,
                          t_draft_forward=t_df, t_target=t2 - t1, t_accept=t3 - t2, t_emit=t4 - t3,
                          started=t0, ended=t4)

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
        (n per row, emitted per row, done per row, accepted, stopped)."""
        A, s = toks.shape
        d = self.drafter
        finite = None if d is None else d.finite  # every row of draft scores had a finite maximum
        if finite is None and d is not None and d.flags is not None:  # a drafter with flags only
            finite = ~d.flags.any()
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
        return n_l, emitted, done, sum(n_l), sum(x < ks for x in n_l)

    def settle(self, res: StepResult) -> None:
        """Mask each row's rejected slots, crop the slots every row rejected, advance, tell the drafter
        (what it drafted and kept, or after a step without drafts the target's token)."""
        ks, n, toks, n_max, all_done = res.k, res.n, res.tokens, res.n_max, res.all_done
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

    def compact(self, res: StepResult) -> None:
        """Finished rows leave the batch (cache, mask, positions, drafter); then the leading slots
        every remaining row masks (a departed row's longer prompt) are dropped."""
        done, any_done, all_done = res.done, res.any_done, res.all_done
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
