"""Small context-dependent toy language models given by explicit tables, and a sampled
speculative-decoding loop over them that calls the real `verify`.

A `TableModel` of order m is an m-gram model: the next-token logits are `table[c_1, ..., c_m]`,
the last m tokens of the context, with the index V (one past the vocabulary) standing for
"before the start".  An optional stop token is absorbing: once emitted, every later token is the
stop token, so "the first n tokens" is defined for every generation and a stop token may sit
anywhere inside a draft.

These models are what `specdec.core.exact` enumerates and what the Monte Carlo tests sample from.

Example: a bigram model over V = 3 with stop token 2:
    m = random_table_model(3, order=1, generator=torch.Generator().manual_seed(0), stop=2)
    m.logits_for(torch.tensor([[0, 2]]))  # -> [[-inf, -inf, 0.]]: after stop, only stop
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.sampling import SamplingConfig, sample_inverse_cdf
from specdec.core.verify import verify

__all__ = ["TableModel", "random_table_model", "toy_pair", "sample_speculative", "sample_autoregressive"]


@dataclass(frozen=True)
class TableModel:
    """Next-token logits from the last `order` tokens; `table` has shape (V+1,)*order + (V,)."""

    table: torch.Tensor  # float64 logits; index V on a context axis means "before the start"
    stop: int | None = None  # absorbing stop token, or None

    def __post_init__(self):
        t = self.table
        if not isinstance(t, torch.Tensor) or t.dim() < 1 or not t.is_floating_point():
            raise ValueError("table must be a float tensor of shape (V+1,)*order + (V,)")
        V = t.shape[-1]
        if any(s != V + 1 for s in t.shape[:-1]):
            raise ValueError(f"table shape {tuple(t.shape)} is not (V+1,)*order + (V,) with V={V}")
        if self.stop is not None and not (0 <= self.stop < V):
            raise ValueError(f"stop token {self.stop} outside the vocabulary [0, {V})")

    @property
    def V(self) -> int:
        return self.table.shape[-1]

    @property
    def order(self) -> int:
        return self.table.dim() - 1

    def _stopped_table(self) -> torch.Tensor:
        """The table with the stop rule baked in: after stop, only stop (order >= 1)."""
        t = self.table
        if self.stop is None or self.order == 0:
            return t
        only_stop = torch.full((self.V,), float("-inf"), dtype=t.dtype)
        only_stop[self.stop] = 0.0
        t = t.clone()
        t[(slice(None),) * (self.order - 1) + (self.stop,)] = only_stop
        return t

    def _lookup(self, table: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        N, L = ctx.shape
        m = self.order
        pad = torch.full((N, m), self.V, dtype=torch.long)
        last = torch.cat([pad, ctx.long()], dim=1)[:, L:]  # (N, m): the last m tokens, BOS-padded
        out = table[tuple(last[:, i] for i in range(m))] if m else table.expand(N, self.V)
        if self.stop is not None and m == 0 and L > 0:  # order 0 cannot see the stop: override
            only_stop = torch.full((self.V,), float("-inf"), dtype=table.dtype)  # logits (see probs_for)
            only_stop[self.stop] = 0.0
            out = torch.where((ctx[:, -1] == self.stop).unsqueeze(-1), only_stop, out)
        return out  # (N, V)

    def logits_for(self, ctx: torch.Tensor) -> torch.Tensor:
        """Logits of the next token after each context row: ctx (N, L) long -> (N, V) float64."""
        return self._lookup(self._stopped_table() if self.order else self.table, ctx)

    def probs_for(self, ctx: torch.Tensor, cfg: "SamplingConfig") -> torch.Tensor:
        """cfg(logits_for(ctx)), computed once per table entry (cheap for enumeration): (N, V)."""
        if self.order == 0:
            return cfg(self.logits_for(ctx))
        return self._lookup(cfg(self._stopped_table()), ctx)


def random_table_model(V: int, order: int, generator: torch.Generator, stop: int | None = None,
                       scale: float = 1.5, zero_frac: float = 0.0) -> TableModel:
    """Random Gaussian logits (sd `scale`); a `zero_frac` share of entries set to -inf (p = 0),
    never a whole row.  Example: random_table_model(4, 2, g, stop=3) is a trigram model."""
    if V < 2 or order < 0:
        raise ValueError(f"need V >= 2 and order >= 0, got V={V}, order={order}")
    shape = (V + 1,) * order + (V,)
    t = torch.randn(shape, generator=generator, dtype=torch.float64) * scale
    if zero_frac > 0:
        drop = torch.rand(shape, generator=generator, dtype=torch.float64) < zero_frac
        keep_one = torch.nn.functional.one_hot(t.argmax(-1), V).bool()
        t = t.masked_fill(drop & ~keep_one, float("-inf"))
    return TableModel(t, stop)


def toy_pair(V: int, stop: int, generator: torch.Generator) -> tuple[TableModel, TableModel]:
    """(target, draft): a random trigram target (15% of entries p = 0) and a random bigram draft
    (10% q = 0) over V tokens with absorbing stop token ``stop``; target drawn first."""
    target = random_table_model(V, 2, generator, stop=stop, zero_frac=0.15)
    draft = random_table_model(V, 1, generator, stop=stop, zero_frac=0.1)
    return target, draft


def sample_autoregressive(model: TableModel, n: int, N: int, generator: torch.Generator,
                          cfg: SamplingConfig = SamplingConfig()) -> torch.Tensor:
    """N independent generations of n tokens from `model` itself: (N, n) long."""
    seq = torch.zeros(N, 0, dtype=torch.long)
    for _ in range(n):
        probs = model.probs_for(seq, cfg)  # (N, V)
        u = torch.rand(N, generator=generator, dtype=torch.float64)
        seq = torch.cat([seq, sample_inverse_cdf(probs, u).unsqueeze(1)], dim=1)
    return seq


def sample_speculative(target: TableModel, draft: TableModel, n: int, k: int, N: int,
                       generator: torch.Generator, method: str = "token",
                       target_cfg: SamplingConfig = SamplingConfig(), draft_cfg: SamplingConfig | None = None,
                       draft_sample_cfg: SamplingConfig | None = None, verifier=verify, drafts: int = 1) -> torch.Tensor:
    """N generations of the first n tokens by speculative decoding with k drafts: (N, n) long.

    Each step drafts k tokens autoregressively from `draft_sample_cfg(draft)` (default: the
    verified q, `draft_cfg`, default `target_cfg`), then calls `verifier(drafts, q, p, method=,
    generator=)` -- the real `verify` unless a negative control from `specdec.core.rules.variants` is passed
    -- and appends its tokens.  All N rows advance together; rows already at n are done.
    drafts > 1: that many independent draft blocks per step (drawn one block after another), given
    to the verifier as (R, drafts, k), (R, drafts, k, V), (R, drafts, k+1, V)
    (`specdec.core.rules.multidraft.verify_multi`).
    """
    draft_cfg = draft_cfg or target_cfg
    draft_sample_cfg = draft_sample_cfg or draft_cfg
    width = n + k + 1
    seq = torch.zeros(N, width, dtype=torch.long)
    length = torch.zeros(N, dtype=torch.long)
    while bool((length < n).any()):
        rows = (length < n).nonzero().squeeze(1)  # (R,)
        for Lg in length[rows].unique().tolist():
            grp = rows[length[rows] == Lg]
            blocks = []
            for _ in range(drafts):
                ctx = seq[grp, :Lg]  # (R, Lg)
                qv, toks = [], []
                for _ in range(k):
                    qi_sample = draft.probs_for(ctx, draft_sample_cfg)  # (R, V)
                    qi_verify = draft.probs_for(ctx, draft_cfg)
                    u = torch.rand(len(grp), generator=generator, dtype=torch.float64)
                    x = sample_inverse_cdf(qi_sample, u)  # (R,)
                    qv.append(qi_verify)
                    toks.append(x)
                    ctx = torch.cat([ctx, x.unsqueeze(1)], dim=1)
                full = ctx  # (R, Lg + k)
                p = torch.stack([target.probs_for(full[:, : Lg + i], target_cfg) for i in range(k + 1)], dim=1)
                d = torch.stack(toks, dim=1) if k else torch.zeros(len(grp), 0, dtype=torch.long)
                q = torch.stack(qv, dim=1) if k else torch.zeros(len(grp), 0, target.V, dtype=p.dtype)
                blocks.append((d, q, p))
            d, q, p = blocks[0] if drafts == 1 else (torch.stack([b[i] for b in blocks], dim=1) for i in range(3))
            res = verifier(d, q, p, method=method, generator=generator)
            m = res.num_accepted + 1  # (R,) valid tokens
            cols = Lg + torch.arange(k + 1)  # (k+1,)
            valid = torch.arange(k + 1).unsqueeze(0) < m.unsqueeze(1)  # (R, k+1)
            block = seq[grp]
            block[:, cols] = torch.where(valid, res.tokens, block[:, cols])
            seq[grp] = block
            length[grp] = Lg + m
    return seq[:, :n]
