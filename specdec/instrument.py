"""Thin adapters around the decoding engine for measurement: a KV-keyword shim and a recorder of
what the target and the draft computed at each step.

Neither changes what `specdec.decode.generate` computes; both wrap the models it is given.

* `KVCompat(model)`: the engine calls ``model(..., cache=DynamicCache)`` (transformers 5.24).  Older
  releases (e.g. 5.17 on the GPU machine) name that keyword ``past_key_values``.  The shim reads the
  model's ``forward`` signature (`inspect.signature`) once and renames the keyword when needed.
* `AcceptanceRecorder(target, drafter, sampling)`: wraps both so that each speculative step's
  processed target distributions p_i (from the verification forward), draft distributions q_i and
  drafts x_i are reduced, on the spot, to beta_i = sum_x min(p_i, q_i) and a_i = min(1, p_i(x_i) /
  q_i(x_i)) (see `specdec.measure`).  Only these (A, k) numbers are kept, not (A, k, V) tensors.
  The recording costs time: never time a recorded run.

Example:
    rec = AcceptanceRecorder(target, draft_model, Sampling(1.0))
    res = generate(rec.target, ids, drafter=rec.drafter, k=4, max_new_tokens=64, generator=g)
    steps = rec.steps(res.stats)   # per step: k, rows, accepted n, beta (A, k), a (A, k)
"""

from __future__ import annotations

import inspect

import torch

from specdec.decode import as_drafter
from specdec.measure import context_beta
from specdec.verify import accept_prob

__all__ = ["kv_keyword", "KVCompat", "AcceptanceRecorder", "teacher_forced_beta"]


def kv_keyword(model) -> str:
    """'cache' or 'past_key_values': the name `model.forward` takes its KV cache under."""
    params = inspect.signature(model.forward).parameters
    if "cache" in params:
        return "cache"
    if "past_key_values" in params:
        return "past_key_values"
    return "cache"  # **kwargs only: the engine's own keyword


class KVCompat(torch.nn.Module):
    """A causal LM whose forward accepts the engine's ``cache=`` keyword whatever its release calls it.

    Example: KVCompat(model)(input_ids=ids, cache=c) calls model(input_ids=ids, past_key_values=c)
    on a transformers release whose forward has no `cache` parameter.
    """

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.kv_name = kv_keyword(model)

    @property
    def config(self):
        return self.inner.config

    def forward(self, **kw):
        if self.kv_name != "cache" and "cache" in kw:
            kw[self.kv_name] = kw.pop("cache")
        return self.inner(**kw)


class _RecordingDrafter:
    """Delegates to a drafter; keeps the last proposal (drafts (A, k), q (A, k, V))."""

    def __init__(self, drafter, recorder):
        self._d, self._rec = drafter, recorder

    def __getattr__(self, name):  # vocab_size, forward_seconds, model, ...
        return getattr(self._d, name)

    def begin(self, ids, mask):
        return self._d.begin(ids, mask)

    def propose(self, k, sampling, generator):
        drafts, q = self._d.propose(k, sampling, generator)
        self._rec._pending = (drafts, q)
        return drafts, q

    def commit(self, n, next_token, n_max):
        return self._d.commit(n, next_token, n_max)

    def select(self, rows):
        return self._d.select(rows)


class _RecordingTarget(KVCompat):
    def __init__(self, model, recorder):
        super().__init__(model)
        object.__setattr__(self, "_rec", recorder)  # not a submodule

    def forward(self, **kw):
        out = super().forward(**kw)
        if "logits_to_keep" in kw:  # the prefill, not a step
            return out
        rec = self._rec
        pending, rec._pending = rec._pending, None
        if pending is None:  # a step without drafts (k clipped to 0 at the budget's end)
            rec._log.append(None)
            return out
        drafts, q = pending  # (A, k), (A, k, V)
        k = drafts.shape[1]
        p = rec.sampling.process(out.logits[:, :k])  # (A, k, V)
        q = q.to(p.dtype)
        beta = context_beta(p, q)  # (A, k)
        px = p.gather(-1, drafts[..., None])[..., 0]
        qx = q.gather(-1, drafts[..., None])[..., 0]
        a = accept_prob(px, qx)  # (A, k)
        rec._log.append((beta.double().cpu(), a.double().cpu()))
        return out


class AcceptanceRecorder:
    """Wrap a target and a drafter for one `generate` call; then `steps(stats)` aligns the record
    with the engine's per-step accepted counts.  `sampling` must be the call's sampling rules."""

    def __init__(self, target, drafter, sampling):
        self.sampling = sampling
        self._pending = None
        self._log: list = []
        self.target = _RecordingTarget(target, self)
        self.drafter = _RecordingDrafter(as_drafter(drafter), self)

    def reset(self) -> None:
        self._pending, self._log = None, []

    def steps(self, stats) -> list[dict]:
        """One dict per step with drafts: k, rows (A,), n (A,), beta (A, k), a (A, k) as numpy."""
        if len(self._log) != len(stats.accepted):
            raise ValueError(f"recorded {len(self._log)} target steps but the stats hold "
                             f"{len(stats.accepted)}: reset() the recorder before each generate call")
        out = []
        for s, rec, (rows, n) in zip(stats.steps, self._log, stats.accepted):
            if rec is None or s["k"] == 0:
                continue
            beta, a = rec
            out.append({"k": s["k"], "rows": rows.cpu().numpy(), "n": n.cpu().numpy(),
                        "beta": beta.numpy(), "a": a.numpy()})
        return out


@torch.inference_mode()
def teacher_forced_beta(target, draft, ids: torch.Tensor, sampling, start: int) -> torch.Tensor:
    """beta = sum_x min(p, q) at every position of REAL text, not of generated text.

    ids (B, T): prompt + real continuation; both models see the true prefix (teacher forcing) and
    their logits are processed with `sampling`.  Returns (B, T - start): beta of predicting token
    t from ids[:, :t] for t = start..T-1.  At temperature 0 this is greedy agreement (1 where both
    argmaxes agree).  `draft` is a causal LM or an NGramDrafter (its model scores each window).
    Example: teacher_forced_beta(t, d, ids, Sampling(1.0), start=64).mean() -> acceptance on real text
    """
    if ids.dim() != 2 or not (1 <= start < ids.shape[1]):
        raise ValueError(f"need ids (B, T) and 1 <= start < T, got shape {tuple(ids.shape)}, start {start}")
    p = sampling.process(target(input_ids=ids).logits[:, start - 1:-1])  # (B, T-start, V)
    ngram = getattr(draft, "model", None)
    if ngram is not None and hasattr(ngram, "logits") and not isinstance(ngram, torch.nn.Module):
        W = draft.context
        B, T = ids.shape
        win = torch.stack([ids[:, t - W:t] for t in range(start, T)], 1).reshape(-1, W)  # (B*(T-start), W)
        q = sampling.process(ngram.logits(win.cpu()).to(p.device).reshape(B, T - start, -1))
    else:
        q = sampling.process(draft(input_ids=ids).logits[:, start - 1:-1])
    return context_beta(p, q.to(p.dtype))
