"""Drafters behind one small protocol: a causal LM, an n-gram model, and prompt lookup.

A drafter proposes k tokens per row together with the exact processed distribution q each was
sampled from, and afterwards is told how many drafts the target accepted, so it can roll back.
Speculative sampling is exact only when q is the distribution the draft really came from, after
the SAME temperature / top-k / top-p as the target (Leviathan et al. 2022, section 2.3; seed,
section 2); every drafter here therefore runs its scores through `specdec.core.sampling.process_logits`
with the target's settings (`SamplingConfig`).  The model-free drafters (n-gram, prompt lookup) are in
`specdec.engine.history`.  A deterministic drafter (prompt lookup) has a one-hot q, which is
still exact: a draft x is then accepted with probability min(1, p(x)/1) = p(x).

Protocol (`Drafter`, the base class of every drafter; the engine drives it; rows are the active batch rows):

    begin(ids (B, T), mask (B, T))         a new generation; prompts left-padded, mask 1 = real token
    propose(k, sampling, generator)         -> tokens (B, k) int64, q (B, k, V) float
    commit(n (B,), next_token (B,), n_max)  keep the first n[b] drafts of row b, then next_token[b];
                                            n_max = int(max(n)) (the engine's one host sync)
    advance(next_token (B,))                a step without drafts (k = 0): the target's token only
    select(rows (A,))                       keep only these rows (finished rows leave the batch)
    admit(ids (N, T), mask (N, T))          new rows join after the running ones (continuous batching)
    forward_seconds                         model-forward time inside the last propose

Example: PromptLookupDrafter on history [5, 6, 7, 5] proposes [6, 7, 5] for k = 3 (the token
after the last earlier "5" continues the copy), with q one-hot on those tokens.
"""

from __future__ import annotations

import torch

from specdec.core.sampling import SamplingConfig, draws, logit_flags, sample, sample_inverse_cdf
from specdec.engine.cache import drop_leading_holes, join_caches, pad_left
from specdec.engine.inputs import prompt_positions
from specdec.engine.kv import context_length, engine_model, new_cache, now, steps

__all__ = ["Drafter", "ModelDrafter", "as_drafter", "can", "sample_with_q"]


def one_hot(x: torch.Tensor, V: int, like: torch.Tensor) -> torch.Tensor:
    """(...) token ids -> (..., V) float32 one-hot rows on ``like``'s device: a greedy draft's q."""
    return torch.zeros((*x.shape, V), dtype=torch.float32, device=like.device).scatter_(-1, x[..., None], 1.0)


def sample_with_q(logits: torch.Tensor, sampling: SamplingConfig, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V) scores -> (token (B,), q (B, V)): q processed with `sampling`, the token drawn from q.

    Greedy takes the argmax of the raw scores (the first maximum, exactly what process_logits with
    temperature 0 keeps) and builds the one-hot q directly.  No host sync here: the scores are not
    checked; a drafter that can produce NaN or inf reports whether its scores were finite in its
    ``finite`` attribute, which the engine checks in its one sync per step.
    """
    if sampling.greedy:
        x = logits.argmax(dim=-1)  # (B,)
        return x, one_hot(x, logits.shape[-1], logits)
    q = sampling.process(logits, check=False)
    return sample(q, generator, check=False, float64=False), q


class Drafter:
    """The base every drafter derives from: the protocol of the module docstring, with its optional
    parts given as defaults the engine reads instead of probing for attributes.

    Required: begin, propose, commit, select (each refuses here).  Optional: advance (a step without
    drafts; a draft-length schedule that can choose k = 0 needs it) and admit (rows joining a
    running batch; serving needs it): a drafter has them when it overrides them (`supports`).
    Attributes: vocab_size; forward_seconds, the model-forward time inside the last propose;
    finite (None, or a 0-dim bool tensor: every row of scores drafted from since begin had a finite
    maximum, checked by the engine each step) and flags (their (3,) `logit_flags`, read only to name
    the problem); model, cache and mask (a model drafter's causal LM, KV cache and its mask: context
    checks and serving's memory accounting; None for a model-free drafter); slots_ahead (slots a
    compiled draft preallocates beyond the prompt, set by `generate`).
    """

    vocab_size: int
    forward_seconds = 0.0
    finite = None
    flags = None
    model = None
    cache = None
    mask = None
    slots_ahead = 0

    def begin(self, ids: torch.Tensor, mask: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement begin")

    def propose(self, k: int, sampling: SamplingConfig, generator) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} does not implement propose")

    def commit(self, n: torch.Tensor, next_token: torch.Tensor, n_max: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement commit")

    def select(self, rows: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement select")

    def advance(self, next_token: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot take a step without drafts (no advance)")

    def admit(self, ids: torch.Tensor, mask: torch.Tensor) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot take rows joining a running batch (no admit)")

    def supports(self, method: str) -> bool:
        """Whether this drafter implements the optional `method` ("advance" or "admit")."""
        return getattr(type(self), method) is not getattr(Drafter, method)


def can(drafter, method: str) -> bool:
    """`Drafter.supports` of a drafter (False for None)."""
    return drafter is not None and drafter.supports(method)


class ModelDrafter(Drafter):
    """Any Hugging Face causal LM as drafter, with its own cache (`new_cache`) that is never re-encoded.

    Cache layout per row (the engine's ragged scheme, see `specdec.engine.decode`): slots hold every
    committed token except the uncached tail; rejected slots are masked (attention mask 0) and
    trailing slots rejected by every row are cropped (`cache.crop(-n)`).  Explicit position_ids
    count only the valid slots, so a masked hole never shifts positions.  The tail (committed tokens
    not yet fed, ids and a validity mask (B, m)) is the target's last token, or after a fully
    accepted draft two (the last draft, never fed since nothing was sampled after it, and the bonus
    token; the first slot masked in rows that need none), plus one token per step without drafts
    (`advance`); `propose` feeds it in one forward.  The prompt is not fed by `begin`: the first
    `propose` feeds it together with the tail (one forward instead of two).  `admit` feeds new rows'
    prompts at once and joins their cache to the running one (`specdec.engine.cache.join_caches`).
    ``finite``: every draft forward since `begin` had a finite maximum in every row (checked by the
    engine each step); ``flags``: their `logit_flags` (NaN, +inf, an all -inf row), to name a problem.
    """

    def __init__(self, model):
        self.slots_ahead = 0  # new slots a cache should hold beyond the prompt (the engine sets it)
        self.model = engine_model(model)
        self.vocab_size = int(model.config.vocab_size)
        self.max_positions = context_length(model)
        self.forward_seconds = 0.0
        self.device = next(model.parameters()).device

    def _clamp(self, pos):
        if self.max_positions is not None:
            pos = pos.clamp(max=self.max_positions - 1)  # only beyond-budget slots, discarded later
        return pos

    def _forward(self, ids, pos, L=None):  # ids (B, s), pos (B, s) clamped; the mask's first L columns
        # (default all) cover the cache and these s slots
        mask = self.mask if L is None else self.mask[:, :L]
        t = now(self.device)
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=self.cache,
                             use_cache=True, logits_to_keep=1)
        self.forward_seconds += now(self.device) - t
        logits = out.logits[:, -1]  # (B, V)
        self._scores.append(logits)  # their row maxima are checked once per propose (`_check`)
        return logits

    def begin(self, ids, mask):
        B, T = ids.shape
        self.cache = new_cache(self.model, T + self.slots_ahead)
        self.mask = mask[:, :-1].to(self.device).clone()  # (B, T-1): the prompt's slots, our own copy
        self.pos = mask.sum(1) - 1  # (B,) positions of the next slot = real tokens before the tail
        self.prefix = (ids[:, :-1], prompt_positions(mask[:, :-1])) if T > 1 else None  # fed first
        self.tail = ids[:, -1:]  # (B, m) committed tokens not yet fed
        self.tail_valid = torch.ones(B, 1, dtype=torch.bool, device=ids.device)  # (B, m)
        self._dense = True  # every tail slot is valid (kept on the host: a shorter propose)
        self.drafts, self._scores, self._ahead, self._seen = None, [], [], []
        self.finite = torch.ones((), dtype=torch.bool, device=self.device)
        self.forward_seconds = 0.0

    @property
    def flags(self) -> torch.Tensor:
        """`logit_flags` of every row of scores drafted from since `begin` (their maxima)."""
        seen = getattr(self, "_seen", None)  # none before begin
        seen = torch.cat(seen) if seen else torch.zeros(0, device=self.device)
        return logit_flags(seen[:, None])

    def _check(self):
        """Fold the row maxima of this propose's (or prefill's) scores into `finite`, and keep them for
        `flags`."""
        m = torch.stack(self._scores).amax(-1).reshape(-1)  # (forwards * B,)
        self._seen.append(m)
        self.finite = self.finite & torch.isfinite(m).all()

    def propose(self, k, sampling, generator):
        self.forward_seconds, self._scores = 0.0, []
        self._flush()
        B = self.tail.shape[0]
        ids, valid = self.tail, self.tail_valid
        m = valid.shape[1]
        L = self.mask.shape[1] + m  # slots after this forward; one more after each draft fed
        # the drafts' columns too, at once (the last draft is never fed); each forward sees its first
        # L.  Positions: the tail's (B, m), and d_1..d_{k-1}'s (k - 1, B) -- row i contiguous, as a
        # compiled forward's static shapes want; this propose's k uniforms per row are drawn at once
        # (the same numbers, in the same order, as one draw per draft)
        if self._dense:  # every tail slot valid: positions run on from self.pos
            self.mask = torch.cat([self.mask, self.mask.new_ones(B, m + k - 1)], 1)
            pos = self._clamp(self.pos[:, None] + steps(m, self.device))
            fed = self._clamp(self.pos[None] + steps(k - 1, self.device, m, column=True))
            self.pos = self.pos + m
        else:
            self.mask = torch.cat([self.mask, valid.long(), self.mask.new_ones(B, k - 1)], 1)
            pos = self._clamp((self.pos[:, None] + valid.long().cumsum(1) - 1).clamp(min=0))
            self.pos = self.pos + valid.sum(1)
            fed = self._clamp(self.pos[None] + steps(k - 1, self.device, column=True))
        if self.prefix is not None:  # first propose: the prompt, then the tail, in one forward
            ids, pos = torch.cat([self.prefix[0], ids], 1), torch.cat([self.prefix[1], pos], 1)
            self.prefix = None
        logits = self._forward(ids, pos, L)
        u = None if sampling.greedy else draws(k, B, generator, self.device)  # (k, B)
        toks, qs = [], []
        for i in range(k):  # x (B, 1): the argmax (the first maximum), or drawn from q (B, V)
            if sampling.greedy:
                x = logits.argmax(dim=-1, keepdim=True)
            else:
                qs.append(sampling.process(logits, check=False))  # checked through `finite`
                x = sample_inverse_cdf(qs[-1], u[i])[:, None]  # (B, 1)
            toks.append(x)
            if i + 1 < k:  # the last draft is not fed: nothing is sampled after it
                logits = self._forward(x, fed[i].unsqueeze(1), L + i + 1)
        if k > 1:
            self.pos = self.pos + (k - 1)
        self.k = k
        self._check()
        self.drafts = torch.cat(toks, 1)  # (B, k)
        if sampling.greedy:  # one-hot q of every draft at once
            return self.drafts, one_hot(self.drafts, logits.shape[-1], logits)
        return self.drafts, torch.stack(qs, 1)  # (B, k), (B, k, V)

    def commit(self, n, next_token, n_max):
        k, one = self.k, n.shape[0] == 1  # one row: its n is n_max, so every slot it rejected is cropped
        if k > 1:  # slots of d_1..d_{k-1}: keep the first n[b]
            drop = k - 1 - min(n_max, k - 1)
            if not one:  # rows keep different counts: each row's rejected slots are masked
                self.mask[:, -(k - 1):] = (steps(k - 1, self.device)[None] < n[:, None]).long()
                self.pos = self.pos - (k - 1 - n.clamp(max=k - 1))
            elif drop:
                self.pos = self.pos - drop
            if drop:
                self.cache.crop(-drop)
                self.mask = self.mask[:, :-drop]
        if n_max == k:  # a row accepted every draft: its d_k was never fed
            self.tail = torch.stack([self.drafts[:, -1], next_token], 1)
            self.tail_valid = torch.stack([n == k, torch.ones_like(n, dtype=torch.bool)], 1)
            self._dense = one  # other rows' first slot may be a hole
        else:
            self.tail = next_token[:, None]
            self.tail_valid = torch.ones_like(self.tail, dtype=torch.bool)
            self._dense = True

    def advance(self, next_token):
        self._ahead.append(next_token)  # joins the tail at the next propose, select or admit (no work per step)

    def _flush(self):
        if self._ahead:
            new = torch.stack(self._ahead, 1)  # (B, steps)
            self.tail = torch.cat([self.tail, new], 1)
            self.tail_valid = torch.cat([self.tail_valid, torch.ones_like(new, dtype=torch.bool)], 1)
            self._ahead = []

    def select(self, rows):
        self._flush()
        self.cache.batch_select_indices(rows)
        self.mask, self.pos = self.mask[rows], self.pos[rows]
        self.tail, self.tail_valid, self.drafts = self.tail[rows], self.tail_valid[rows], None
        if self.prefix is not None:
            self.prefix = (self.prefix[0][rows], self.prefix[1][rows])
        else:  # slots every remaining row masks (a departed row's longer prompt) are dropped
            self.mask = drop_leading_holes(self.cache, self.mask)

    def _prefill(self):
        """Feed a pending prompt now (its slots are already in the mask)."""
        if self.prefix is not None:
            self._scores = []
            self._forward(self.prefix[0], self._clamp(self.prefix[1]))
            self._check()
            self.prefix = None

    def admit(self, ids, mask):
        self._flush()
        self._prefill()
        new = ModelDrafter.__new__(ModelDrafter)
        new.__dict__.update(self.__dict__)
        new.begin(ids, mask)
        new._prefill()
        A, N = self.tail.shape[0], ids.shape[0]
        self.cache = join_caches(self.cache, new.cache, A, N)
        L, m = max(self.mask.shape[1], new.mask.shape[1]), max(self.tail.shape[1], new.tail.shape[1])
        self.mask = torch.cat([pad_left(self.mask, L), pad_left(new.mask, L)], 0)
        self.tail = torch.cat([pad_left(self.tail, m), pad_left(new.tail, m)], 0)
        self.tail_valid = torch.cat([pad_left(self.tail_valid, m), pad_left(new.tail_valid, m)], 0)
        self.pos, self.drafts, self._dense = torch.cat([self.pos, new.pos]), None, False  # padded tails
        self.finite, self._seen = self.finite & new.finite, self._seen + new._seen


def as_drafter(drafter):
    """A `Drafter` passes through; a causal LM (torch module) becomes a ModelDrafter."""
    if drafter is None or isinstance(drafter, Drafter):
        return drafter
    if isinstance(drafter, torch.nn.Module):
        return ModelDrafter(drafter)
    raise ValueError(f"drafter must be None, a causal LM or a specdec.engine.drafters.Drafter, got {type(drafter).__name__}")
