"""The model-free drafters: an n-gram model and prompt lookup, over a per-row token history.

Both follow the drafter protocol of `specdec.engine.drafters`.  The n-gram drafter processes its
log-probabilities with the target's sampling rules, so q is exactly the distribution each draft is
sampled from; prompt lookup proposes deterministically, so q is one-hot (still exact: a draft x is
then accepted with probability min(1, p(x)/1) = p(x)).

Example: PromptLookupDrafter on history [5, 6, 7, 5] proposes [6, 7, 5] for k = 3 (the token
after the last earlier "5" continues the copy), with q one-hot on those tokens.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.engine.drafters import Drafter, sample_with_q
from specdec.engine.kv import now

__all__ = ["NGramDrafter", "PromptLookupDrafter"]


class _HistoryDrafter(Drafter):
    """Shared state of the model-free drafters: per-row token history (B, cap) and lengths (B,)."""

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

    def advance(self, next_token):
        """A step without drafts: only the target's token joins each row's history."""
        self.drafts = torch.zeros(len(next_token), 0, dtype=torch.long)
        self.commit(torch.zeros_like(next_token), next_token, 0)

    def select(self, rows):
        rows_c = rows.cpu()
        self.hist, self.lens, self.drafts = self.hist[rows_c], self.lens[rows], None

    def admit(self, ids, mask):
        """New rows join after the running ones (continuous batching)."""
        hist, lens = self.hist, self.lens
        self.begin(ids, mask)
        w = max(hist.shape[1], self.hist.shape[1])
        pad = lambda h: torch.cat([h[:, :-1], h.new_zeros(h.shape[0], w - h.shape[1]), h[:, -1:]], 1)  # noqa: E731
        self.hist, self.lens, self.drafts = torch.cat([pad(hist), pad(self.hist)]), torch.cat([lens, self.lens]), None


class NGramDrafter(_HistoryDrafter):
    """Draft from an n-gram model: `model.logits(ids (B, W)) -> (B, V)` log-probabilities.

    The log-probabilities are treated as logits and processed with the target's rules, so at T = 1
    with no truncation q is the n-gram law itself.  The model sees the last `context` tokens of each
    row, or all of a shorter row's history (default: its order - 1), so a batched row sees exactly
    what it would alone.  Its scores
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

    def _scores(self, ctxs: list) -> torch.Tensor:
        """Contexts (tuples of token ids, one per row, lengths may differ) -> (B, V) log-probabilities,
        from the memo or one model call per context length for the rest."""
        new = [i for i, key in enumerate(ctxs) if key not in self.memo]
        if new:
            if len(self.memo) + len(new) > self.memo_size:
                self.memo.clear()
            by_len: dict = {}
            for i in new:
                by_len.setdefault(len(ctxs[i]), []).append(i)
            for idx in by_len.values():
                rows = self.model.logits(torch.tensor([ctxs[i] for i in idx], dtype=torch.long))  # (n, V)
                for i, r in zip(idx, rows):
                    self.memo[ctxs[i]] = r
        return torch.stack([self.memo[key] for key in ctxs])

    def propose(self, k, sampling, generator):
        # each row's own window, min(context, its length): what it would see alone, whoever shares its batch
        ctxs = [tuple(self.hist[b, L - min(self.context, L):L].tolist()) for b, L in enumerate(self.lens.cpu().tolist())]
        toks, qs = [], []
        dev = self.lens.device
        self.forward_seconds = 0.0  # the table look-ups: this drafter's "model forward"
        for _ in range(k):
            t = now()
            scores = self._scores(ctxs).to(dev)  # (B, V)
            self.forward_seconds += now() - t
            x, q = sample_with_q(scores, sampling, generator)  # (B,), (B, V)
            toks.append(x)
            qs.append(q)
            ctxs = [c[1:] + (y,) for c, y in zip(ctxs, x.tolist())]
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
        t = now()
        hist, lens = self.hist.numpy(), self.lens.cpu().tolist()
        out = np.empty((len(lens), k), dtype=np.int64)
        for b, L in enumerate(lens):  # per row, not per position: one numpy search each
            s = self._start(hist[b, :L])
            out[b] = hist[b, s + np.arange(k) % (L - s)]
        dev = self.lens.device
        self.drafts = torch.from_numpy(out).to(dev)  # (B, k)
        q = torch.zeros(len(lens), k, self.vocab_size, device=dev).scatter_(2, self.drafts[..., None], 1.0)
        self.forward_seconds = now() - t
        return self.drafts, q
