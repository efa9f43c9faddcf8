"""A trigram drafter from corpus counts, interpolated Witten-Bell smoothing (the near-zero-cost baseline).

Witten & Bell (1991), as interpolated in Chen & Goodman (1998), eq. (15): for history h with
c(h) tokens seen after it and N1+(h) distinct successors,

    P(w | h) = (c(h, w) + N1+(h) * P(w | h')) / (c(h) + N1+(h)),       h' = h without its oldest token,

recursing down to the add-one unigram P(w) = (c(w) + 1) / (N + V). Unseen histories (c(h) = 0)
fall back to P(w | h'). Every token keeps q(x) > 0, so acceptance min(p, q) is never starved.
Trigrams seen once are pruned (``min_count3=2``) to keep the file small; c(h) and N1+(h) are
taken over the stored counts, so each conditional still sums to 1.

Example: after "to be or not to be" the bigram ('to' -> 'be') has c = 2, N1+('to') = 1, so
P(be | to) = (2 + 1 * P(be)) / (2 + 1) > 2/3.

Stored as safetensors (never pickle): unigram counts, sorted int64 keys and int32 counts of the
bigrams (key a*V + b) and trigrams (key (a*V + b)*V + c), with ``format_version`` in the metadata.
The embedded file is opened, sha256-checked, by `specdec.family.loader.load_ngram`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from specdec.io.results import atomic_path

FORMAT_VERSION = "1"


def _count(keys: np.ndarray, min_count: int = 1) -> tuple[np.ndarray, np.ndarray]:
    u, c = np.unique(keys, return_counts=True)
    keep = c >= min_count
    return u[keep].astype(np.int64), c[keep].astype(np.int32)


class NGramModel:
    """Trigram model; ``logits(ids (B, T)) -> (B, V)`` next-token log-probabilities."""

    order = 3

    def __init__(self, vocab_size: int, uni: np.ndarray, bi_keys: np.ndarray, bi_counts: np.ndarray,
                 tri_keys: np.ndarray, tri_counts: np.ndarray):
        if uni.shape != (vocab_size,):
            raise ValueError(f"unigram counts have shape {uni.shape}, expected ({vocab_size},)")
        self.vocab_size = int(vocab_size)
        self.uni, self.bi_keys, self.bi_counts = uni, bi_keys, bi_counts
        self.tri_keys, self.tri_counts = tri_keys, tri_counts
        p1 = (uni.astype(np.float64) + 1.0) / (uni.sum() + vocab_size)
        self._p1 = torch.from_numpy(p1)                                    # (V,) float64

    @classmethod
    def fit(cls, ids, vocab_size: int, min_count3: int = 2) -> "NGramModel":
        """Counts from a 1-D sequence of token ids (tensor or array) in [0, vocab_size)."""
        a = np.asarray(ids, dtype=np.int64).ravel()
        if a.size < 3:
            raise ValueError(f"need at least 3 tokens to fit a trigram model, got {a.size}")
        if a.min() < 0 or a.max() >= vocab_size:
            raise ValueError(f"token ids must lie in [0, {vocab_size}), got [{a.min()}, {a.max()}]")
        V = vocab_size
        uni = np.bincount(a, minlength=V).astype(np.int64)
        bk, bc = _count(a[:-1] * V + a[1:])
        tk, tc = _count((a[:-2] * V + a[1:-1]) * V + a[2:], min_count3)
        return cls(V, uni, bk, bc, tk, tc)

    def _level(self, keys, counts, ctx_key: int, lower: torch.Tensor) -> torch.Tensor:
        V = self.vocab_size
        lo, hi = np.searchsorted(keys, [ctx_key * V, ctx_key * V + V])
        if hi == lo:
            return lower                                                   # unseen history
        c = torch.zeros(V, dtype=torch.float64)
        c[torch.from_numpy(keys[lo:hi] - ctx_key * V)] = torch.from_numpy(counts[lo:hi].astype(np.float64))
        n1 = float(hi - lo)
        return (c + n1 * lower) / (c.sum() + n1)

    def probs(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) LongTensor -> (B, V) float64 next-token probabilities (T may be 0..any)."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
        ids = input_ids.detach().to("cpu", torch.int64)
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        rows = []
        for row in ids.tolist():
            p = self._p1
            if len(row) >= 1:
                p = self._level(self.bi_keys, self.bi_counts, row[-1], p)
            if len(row) >= 2:
                p = self._level(self.tri_keys, self.tri_counts, row[-2] * self.vocab_size + row[-1], p)
            rows.append(p)
        return torch.stack(rows)                                           # (B, V)

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) LongTensor -> (B, V) float32 log-probabilities of the next token (all finite)."""
        return self.probs(input_ids).log().float()

    def sequence_logprobs(self, ids) -> torch.Tensor:
        """(N,) float64: log P(ids[i] | ids[i-2], ids[i-1]) for a 1-D sequence, vectorised (no (N, V)
        tables); position 0 uses the unigram, position 1 the bigram level. Same law as ``probs``."""
        a = np.asarray(ids, dtype=np.int64).ravel()
        V = self.vocab_size
        if a.size and (a.min() < 0 or a.max() >= V):
            raise ValueError(f"token ids must lie in [0, {V})")
        p = self._p1.numpy()[a]                                            # (N,) unigram
        for keys, counts, k in ((self.bi_keys, self.bi_counts, 1), (self.tri_keys, self.tri_counts, 2)):
            if a.size <= k:
                break
            ctx = a[k - 1:-1] if k == 1 else a[:-2] * V + a[1:-1]          # (N-k,) history keys
            cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
            lo, hi = np.searchsorted(keys, ctx * V), np.searchsorted(keys, ctx * V + V)
            j = np.searchsorted(keys, ctx * V + a[k:])
            hit = (j < keys.size) & (keys[np.minimum(j, keys.size - 1)] == ctx * V + a[k:])
            c = np.where(hit, counts[np.minimum(j, keys.size - 1)], 0).astype(np.float64)
            n1, tot = (hi - lo).astype(np.float64), (cum[hi] - cum[lo]).astype(np.float64)
            seen = n1 > 0
            upd = np.where(seen, (c + n1 * p[k:]) / np.where(seen, tot + n1, 1.0), p[k:])
            p = np.concatenate([p[:k], upd])
        return torch.from_numpy(np.log(p))

    def save(self, path) -> Path:
        """Write the counts as safetensors (atomic)."""
        from safetensors.numpy import save_file

        path = Path(path)
        with atomic_path(path) as tmp:
            save_file({"uni": self.uni, "bi_keys": self.bi_keys, "bi_counts": self.bi_counts,
                       "tri_keys": self.tri_keys, "tri_counts": self.tri_counts}, str(tmp),
                      metadata={"format_version": FORMAT_VERSION, "vocab_size": str(self.vocab_size),
                                "order": "3", "smoothing": "interpolated Witten-Bell"})
        return path

    @classmethod
    def load(cls, path) -> "NGramModel":
        """Read a file written by ``save``; checks ``format_version``."""
        from safetensors import safe_open

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing; run `python -m specdec.family.make ngram`")
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
            if meta.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"{path}: format_version {meta.get('format_version')!r}, expected {FORMAT_VERSION!r}")
            t = {k: f.get_tensor(k) for k in f.keys()}
        return cls(int(meta["vocab_size"]), t["uni"], t["bi_keys"], t["bi_counts"], t["tri_keys"], t["tri_counts"])
