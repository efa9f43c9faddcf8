"""Drafters behind one small protocol: a causal LM, an n-gram model, and prompt lookup.

A drafter proposes k tokens per row together with the exact processed distribution q each was
sampled from, and afterwards is told how many drafts the target accepted, so it can roll back.
Speculative sampling is exact only when q is the distribution the draft really came from, after
the SAME temperature / top-k / top-p as the target (Leviathan et al. 2022, section 2.3; seed,
section 2); every drafter here therefore runs its scores through `specdec.sampling.process_logits`
with the target's settings.  A deterministic drafter (prompt lookup) has a one-hot q, which is
still exact: a draft x is then accepted with probability min(1, p(x)/1) = p(x).

Protocol (the engine in `specdec.decode` drives it; rows are the active batch rows):

    begin(ids (B, T), mask (B, T))         a new generation; prompts left-padded, mask 1 = real token
    propose(k, sampling, generator)         -> tokens (B, k) int64, q (B, k, V) float
    commit(n (B,), next_token (B,), n_max)  keep the first n[b] drafts of row b, then next_token[b];
                                            n_max = int(max(n)) (the engine's one host sync)
    select(rows (A,))                       keep only these rows (finished rows leave the batch)
    forward_seconds                         model-forward time inside the last propose

Example: PromptLookupDrafter on history [5, 6, 7, 5] proposes [6, 7, 5] for k = 3 (the token
after the last earlier "5" continues the copy), with q one-hot on those tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from specdec.sampling import _check_knobs, process_logits, sample_inverse_cdf

__all__ = ["Sampling", "Drafter", "ModelDrafter", "NGramDrafter", "PromptLookupDrafter", "draw",
           "sample_with_q", "context_length"]


@dataclass(frozen=True)
class Sampling:
    """The target's sampling rules; drafters process their scores with the same ones."""

    temperature: float = 1.0  # 1 = the model's own law; 0 = greedy
    top_k: int | None = None  # None = no truncation (Hugging Face's generate defaults to 50)
    top_p: float | None = None  # None = no nucleus truncation

    def __post_init__(self):
        _check_knobs(self.temperature, self.top_k, self.top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def process(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., V) logits -> (..., V) processed probabilities (`specdec.sampling.process_logits`)."""
        return process_logits(logits, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p)


def draw(probs: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of processed `probs` (..., V) -> (...) int64; shared by drafters and engine.

    Greedy: the argmax (probs is one-hot there).  Otherwise inverse-CDF sampling with one float64
    uniform per row from `generator` (`specdec.sampling.sample_inverse_cdf`; probs are already
    validated by process_logits, so no second check and no host sync here).
    """
    if sampling.greedy:
        return probs.argmax(dim=-1)
    gdev = generator.device if generator is not None else probs.device
    u = torch.rand(probs.shape[:-1], generator=generator, dtype=torch.float64, device=gdev).to(probs.device)
    return sample_inverse_cdf(probs, u)


def sample_with_q(logits: torch.Tensor, sampling: Sampling, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V) scores -> (token (B,), q (B, V)): q processed with `sampling`, the token drawn from q.

    Greedy takes the argmax of the raw scores (the first maximum, exactly what process_logits with
    temperature 0 keeps) and builds the one-hot q directly, skipping the distribution checks.
    """
    if sampling.greedy:
        x = logits.argmax(dim=-1)  # (B,)
        q = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device).scatter_(-1, x[..., None], 1.0)
        return x, q
    q = sampling.process(logits)
    return draw(q, sampling, generator), q


def context_length(model) -> int | None:
    """The model's maximum number of positions (GPT-2: n_positions), or None when unbounded."""
    cfg = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@runtime_checkable
class Drafter(Protocol):
    vocab_size: int
    forward_seconds: float

    def begin(self, ids: torch.Tensor, mask: torch.Tensor) -> None: ...

    def propose(self, k: int, sampling: Sampling, generator: torch.Generator | None
                ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def commit(self, n: torch.Tensor, next_token: torch.Tensor, n_max: int) -> None: ...

    def select(self, rows: torch.Tensor) -> None: ...


class ModelDrafter:
    """Any Hugging Face causal LM as drafter, with its own DynamicCache that is never re-encoded.

    Cache layout per row (the engine's ragged scheme, see `specdec.decode`): slots hold every
    committed token except the uncached tail; rejected slots are masked (attention mask 0) and
    trailing slots rejected by every row are cropped (`cache.crop(-n)`).  Explicit position_ids
    count only the valid slots, so a masked hole never shifts positions.  The tail is one token
    (the target's last token) or, after a fully accepted draft, two (the last draft, never fed
    since nothing was sampled after it, and the bonus token); it is fed as two slots with the first
    masked in rows that need one.
    """

    def __init__(self, model):
        from transformers import DynamicCache  # the engine owns caches; imported where used

        self._Cache = DynamicCache
        self.model = model
        self.vocab_size = int(model.config.vocab_size)
        self.max_positions = context_length(model)
        self.forward_seconds = 0.0
        self.device = next(model.parameters()).device

    def _forward(self, ids, pos):  # ids (B, s), pos (B, s); mask already extended by s columns
        if self.max_positions is not None:
            pos = pos.clamp(max=self.max_positions - 1)  # only beyond-budget slots, discarded later
        t = _now(self.device)
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=self.mask, position_ids=pos, cache=self.cache,
                             use_cache=True, logits_to_keep=1)
        self.forward_seconds += _now(self.device) - t
        return out.logits[:, -1]  # (B, V)

    def begin(self, ids, mask):
        B, T = ids.shape
        self.cache = self._Cache()
        self.mask = mask[:, :-1].to(self.device).clone()  # (B, T-1): cached slots, our own copy
        self.pos = mask.sum(1) - 1  # (B,) positions of the next slot = real tokens cached
        if T > 1:
            pos = (mask[:, :-1].cumsum(1) - 1).clamp(min=0)
            t = _now(self.device)
            with torch.no_grad():
                self.model(input_ids=ids[:, :-1], attention_mask=self.mask, position_ids=pos, cache=self.cache,
                           use_cache=True, logits_to_keep=1)
            self.forward_seconds = _now(self.device) - t
        self.tail = torch.stack([ids[:, -1], ids[:, -1]], 1)  # (B, 2); slot 0 valid only if tail_two
        self.tail_two = torch.zeros(B, dtype=torch.bool, device=ids.device)
        self.any_two = False

    def propose(self, k, sampling, generator):
        self.forward_seconds = 0.0
        B = self.tail.shape[0]
        if self.any_two:
            ids, valid = self.tail, torch.stack([self.tail_two, torch.ones_like(self.tail_two)], 1)
        else:
            ids, valid = self.tail[:, 1:], torch.ones(B, 1, dtype=torch.bool, device=self.tail.device)
        self.mask = torch.cat([self.mask, valid.long()], 1)
        pos = self.pos[:, None] + valid.long().cumsum(1) - 1  # (B, s)
        self.pos = self.pos + valid.sum(1)
        logits = self._forward(ids, pos.clamp(min=0))
        toks, qs = [], []
        for i in range(k):
            x, q = sample_with_q(logits, sampling, generator)  # (B,), (B, V)
            toks.append(x)
            qs.append(q)
            if i + 1 < k:  # the last draft is not fed: nothing is sampled after it
                self.mask = torch.cat([self.mask, torch.ones(B, 1, dtype=torch.long, device=x.device)], 1)
                logits = self._forward(x[:, None], self.pos[:, None])
                self.pos = self.pos + 1
        self.k = k
        self.drafts = torch.stack(toks, 1)  # (B, k)
        return self.drafts, torch.stack(qs, 1)  # (B, k), (B, k, V)

    def commit(self, n, next_token, n_max):
        k = self.k
        if k > 1:  # slots of d_1..d_{k-1}: keep the first n[b]
            j = torch.arange(k - 1, device=n.device)
            self.mask[:, -(k - 1):] = (j[None] < n[:, None]).long()
            self.pos = self.pos - (k - 1 - n.clamp(max=k - 1))
            drop = k - 1 - min(n_max, k - 1)
            if drop:
                self.cache.crop(-drop)
                self.mask = self.mask[:, :-drop]
        self.tail_two = n == k  # all accepted: d_k was never fed
        self.tail = torch.stack([self.drafts[:, -1], next_token], 1)
        self.any_two = n_max == k

    def select(self, rows):
        self.cache.batch_select_indices(rows)
        self.mask, self.pos = self.mask[rows], self.pos[rows]
        self.tail, self.tail_two = self.tail[rows], self.tail_two[rows]
        self.drafts = self.drafts[rows] if hasattr(self, "drafts") else None
        self.any_two = bool(self.tail_two.any())


class _HistoryDrafter:
    """Shared state of the model-free drafters: per-row token history (B, cap) and lengths (B,)."""

    forward_seconds = 0.0

    def begin(self, ids, mask):
        B, T = ids.shape
        self.lens = mask.sum(1)  # (B,)
        cap = T + 4096
        self.hist = torch.zeros(B, cap + 1, dtype=torch.long)  # last column: a trash slot
        order = torch.argsort(mask, dim=1, stable=True, descending=True)  # real tokens first, in order
        self.hist[:, :T] = ids.cpu().gather(1, order.cpu())
        self.hist[:, :T] *= (torch.arange(T)[None] < self.lens.cpu()[:, None])

    def commit(self, n, next_token, n_max):
        n, next_token = n.cpu(), next_token.cpu()
        B, k = self.drafts.shape
        new = torch.cat([self.drafts.cpu(), torch.zeros(B, 1, dtype=torch.long)], 1)  # (B, k+1)
        new.scatter_(1, n[:, None], next_token[:, None])
        col = self.lens.cpu()[:, None] + torch.arange(k + 1)[None]  # (B, k+1)
        cap = self.hist.shape[1] - 1
        if int(col.max()) >= cap:  # grow the history buffer (rare)
            self.hist = torch.cat([self.hist[:, :cap], torch.zeros_like(self.hist), self.hist[:, cap:]], 1)
            cap = self.hist.shape[1] - 1
        col = torch.where(torch.arange(k + 1)[None] <= n[:, None], col, torch.full_like(col, cap))
        self.hist.scatter_(1, col, new)
        self.lens = self.lens + (n + 1).to(self.lens.device)

    def select(self, rows):
        rows_c = rows.cpu()
        self.hist, self.lens = self.hist[rows_c], self.lens[rows]
        self.drafts = self.drafts[rows] if hasattr(self, "drafts") else None


class NGramDrafter(_HistoryDrafter):
    """Draft from an n-gram model: `model.logits(ids (B, W)) -> (B, V)` log-probabilities.

    The log-probabilities are treated as logits and processed with the target's rules, so at T = 1
    with no truncation q is the n-gram law itself.  The model sees the last `context` tokens of each
    row (default: its order - 1, so a batched row sees exactly what it would alone).  Its scores
    are memoized per context (the model is a fixed table of the context alone), at most
    `memo_size` contexts; only unseen contexts reach `model.logits`, in one batched call.
    """

    def __init__(self, model, context: int | None = None, memo_size: int = 20000):
        self.model = model
        self.vocab_size = int(model.vocab_size)
        order = getattr(model, "order", None) or getattr(model, "n", None)
        self.context = context or (int(order) - 1 if order else 8)
        if self.context < 1:
            raise ValueError(f"n-gram context must be >= 1 token, got {self.context}")
        self.memo: dict[tuple, torch.Tensor] = {}
        self.memo_size = memo_size

    def _scores(self, ctx: torch.Tensor) -> torch.Tensor:
        """ctx (B, W) -> (B, V) log-probabilities, from the memo or one model call for the rest."""
        keys = [tuple(r) for r in ctx.tolist()]
        new = [i for i, key in enumerate(keys) if key not in self.memo]
        if new:
            if len(self.memo) + len(new) > self.memo_size:
                self.memo.clear()
            rows = self.model.logits(ctx[new])  # (len(new), V)
            for i, r in zip(new, rows):
                self.memo[keys[i]] = r
        return torch.stack([self.memo[key] for key in keys])

    def propose(self, k, sampling, generator):
        W = min(self.context, int(self.lens.min()))
        idx = self.lens.cpu()[:, None] - W + torch.arange(W)[None]  # (B, W)
        ctx = self.hist.gather(1, idx)  # (B, W)
        toks, qs = [], []
        dev = self.lens.device
        self.forward_seconds = 0.0  # the table look-ups: this drafter's "model forward"
        for _ in range(k):
            t = time.perf_counter()
            scores = self._scores(ctx).to(dev)  # (B, V)
            self.forward_seconds += time.perf_counter() - t
            x, q = sample_with_q(scores, sampling, generator)  # (B,), (B, V)
            toks.append(x)
            qs.append(q)
            ctx = torch.cat([ctx[:, 1:], x.cpu()[:, None]], 1)
        self.drafts = torch.stack(toks, 1)  # (B, k)
        return self.drafts, torch.stack(qs, 1)


class PromptLookupDrafter(_HistoryDrafter):
    """Prompt lookup decoding (Saxena 2023): copy what followed the latest earlier match.

    For m = max_ngram .. min_ngram, find the latest earlier occurrence of the row's last m tokens in
    its prompt + output; propose the k tokens that followed it, continuing the copy periodically when
    it runs into the present (history h of length L, continuation start s: draft i = h[s + i mod (L-s)]).
    No match: repeat the last token.  q is one-hot: deterministic proposals.
    Example: h = [5, 6, 7, 5], k = 3 -> match "5" at 0, s = 1 -> [6, 7, 5].
    """

    def __init__(self, vocab_size: int, max_ngram: int = 3, min_ngram: int = 1):
        if not (1 <= min_ngram <= max_ngram):
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.vocab_size = int(vocab_size)
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def _start(self, h: np.ndarray) -> int:
        L = len(h)
        for m in range(min(self.max_ngram, L - 1), self.min_ngram - 1, -1):
            win = np.lib.stride_tricks.sliding_window_view(h[:L - 1], m)  # (L-m, m): starts 0..L-m-1
            hit = np.flatnonzero((win == h[L - m:]).all(1))
            if hit.size:
                return int(hit[-1]) + m
        return L - 1

    def propose(self, k, sampling, generator):
        t = time.perf_counter()
        hist, lens = self.hist.numpy(), self.lens.cpu().tolist()
        out = np.empty((len(lens), k), dtype=np.int64)
        for b, L in enumerate(lens):  # per row, not per position: one numpy search each
            s = self._start(hist[b, :L])
            out[b] = hist[b, s + np.arange(k) % (L - s)]
        dev = self.lens.device
        self.drafts = torch.from_numpy(out).to(dev)  # (B, k)
        q = torch.zeros(len(lens), k, self.vocab_size, device=dev).scatter_(2, self.drafts[..., None], 1.0)
        self.forward_seconds = time.perf_counter() - t
        return self.drafts, q
