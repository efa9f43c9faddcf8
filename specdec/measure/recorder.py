"""A recorder of what the target and the draft computed at each speculative step.

`AcceptanceRecorder(target, drafter, sampling)` wraps both models given to
`specdec.engine.decode.generate` (it changes nothing the engine computes) so that each step's
processed target distributions p_i (from the verification forward), draft distributions q_i and
drafts x_i are reduced, on the spot, to beta_i = sum_x min(p_i, q_i) and a_i = min(1, p_i(x_i) /
q_i(x_i)) (see `specdec.core.acceptance`).  Only these (A, k) numbers are kept, not (A, k, V)
tensors.  The recording costs time: never time a recorded run.

Example:
    rec = AcceptanceRecorder(target, draft_model, SamplingConfig(1.0))
    res = generate(rec.target, ids, drafter=rec.drafter, k=4, max_new_tokens=64, generator=g)
    steps = rec.steps(res.stats)   # per step: k, rows, accepted n, beta (A, k), a (A, k)
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.acceptance import context_beta
from specdec.core.verify import accept_prob
from specdec.engine.drafters import Drafter, as_drafter
from specdec.engine.kv import KVCompat

__all__ = ["AcceptanceRecorder"]


class _RecordingDrafter(Drafter):
    """Delegates to a drafter; keeps the last proposal (drafts (A, k), q (A, k, V))."""

    def __init__(self, drafter, recorder):
        self._d, self._rec = drafter, recorder

    # the Drafter attributes the engine reads, the wrapped drafter's own
    vocab_size = property(lambda self: self._d.vocab_size)
    forward_seconds = property(lambda self: self._d.forward_seconds)
    finite = property(lambda self: self._d.finite)
    flags = property(lambda self: self._d.flags)
    model = property(lambda self: self._d.model)
    cache = property(lambda self: self._d.cache)
    mask = property(lambda self: self._d.mask)
    slots_ahead = property(lambda self: self._d.slots_ahead, lambda self, v: setattr(self._d, "slots_ahead", v))

    def supports(self, method):
        return self._d.supports(method)

    def begin(self, ids, mask):
        return self._d.begin(ids, mask)

    def propose(self, k, sampling, generator):
        drafts, q = self._d.propose(k, sampling, generator)
        self._rec._pending = (drafts, q)
        return drafts, q

    def commit(self, n, next_token, n_max):
        return self._d.commit(n, next_token, n_max)

    def advance(self, next_token):
        return self._d.advance(next_token)

    def select(self, rows):
        return self._d.select(rows)

    def admit(self, ids, mask):
        return self._d.admit(ids, mask)


class _RecordingTarget(KVCompat):
    def __init__(self, model, recorder):
        super().__init__(model)
        object.__setattr__(self, "_rec", recorder)  # not a submodule

    def forward(self, **kw):
        out = super().forward(**kw)  # every target call is a step (the prompt is fed with the first)
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
            out.append({"k": s["k"], "rows": np.asarray(rows), "n": np.asarray(n),
                        "beta": beta.numpy(), "a": a.numpy()})
        return out
