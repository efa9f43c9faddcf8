"""Bad inputs to the engine: a target that emits NaN / inf logits mid-run, greedy and
sampled, plain and speculative; and the already-handled cases that had no test yet (the others
live in test_decode.py): k below 1 or beyond the context, more wrong argument types, empty
prompt lists, cancellation from another thread.

Models: the shared tiny seeded random pair (tests/conftest.py, V = 64, 128 positions).
"""

import copy
import threading

import numpy as np
import pytest
import torch

from specdec.engine.drafters import Drafter
from specdec.engine.decode import generate
from specdec.engine.kv import engine_model

V = 64


class _Poisoned(torch.nn.Module):
    """The target, whose logits are replaced from its `start`-th call on: NaN everywhere ("nan"),
    one +inf per row ("posinf"), or every entry -inf ("dead")."""

    def __init__(self, model, kind: str, start: int = 3):
        super().__init__()
        self.inner, self.kind, self.start, self.calls = engine_model(model), kind, start, 0

    @property
    def config(self):
        return self.inner.config

    def forward(self, **kw):
        out = self.inner(**kw)
        self.calls += 1
        if self.calls >= self.start:
            x = out.logits.clone()
            if self.kind == "nan":
                x.fill_(float("nan"))
            elif self.kind == "posinf":
                x[..., 7] = float("inf")
            else:
                x.fill_(float("-inf"))
            out.logits = x
        return out


PROMPT = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "T1"])
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_nan_logits_mid_run_raise_the_same_clear_error(tiny_pair, speculative, temperature):
    """From its 3rd call on the target returns NaN logits.  Every path -- greedy (temperature 0,
    which builds no distributions) and sampled, with and without a drafter, one row and a batch --
    must raise the sampled path's ValueError ("... logits contain NaN"), never emit the argmax of
    NaNs as a token.  The models stay usable afterwards."""
    target, draft = tiny_pair
    for ids in (PROMPT, torch.stack([PROMPT, PROMPT.flip(0)])):
        bad = _Poisoned(target, "nan")
        with pytest.raises(ValueError, match="logits contain NaN"):
            generate(bad, ids, drafter=draft if speculative else None, k=3, max_new_tokens=30,
                     temperature=temperature, generator=torch.Generator().manual_seed(0))
        assert bad.calls >= 3  # it failed on the poisoned call, mid-run
    out = generate(target, PROMPT, drafter=draft if speculative else None, k=3, max_new_tokens=5,
                   temperature=temperature, generator=torch.Generator().manual_seed(0))
    assert len(out.tokens[0]) == 5


@pytest.mark.parametrize("kind,match", [("posinf", r"logits contain \+inf"), ("dead", "all -inf")])
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_inf_logits_mid_run_raise_when_sampling(tiny_pair, speculative, kind, match):
    """+inf logits, or a row of -inf logits (no token can be sampled), from the target's 3rd call
    on: the sampled path (T = 1) raises a clear ValueError."""
    target, draft = tiny_pair
    with pytest.raises(ValueError, match=match):
        generate(_Poisoned(target, kind), PROMPT, drafter=draft if speculative else None, k=3, max_new_tokens=30,
                 temperature=1.0, generator=torch.Generator().manual_seed(0))


class _PoisonedOnce(_Poisoned):
    """A drafter whose logits are poisoned in row 0 on its `start`-th call only, every other call
    and row clean: one bad draft step among k must still be reported."""

    def forward(self, **kw):
        out = self.inner(**kw)
        self.calls += 1
        if self.calls == self.start:
            x = out.logits.clone()
            x[0] = {"nan": float("nan"), "posinf": float("inf"), "dead": float("-inf")}[self.kind]
            out.logits = x
        return out


@pytest.mark.parametrize("kind,match", [("nan", "NaN"), ("posinf", r"\+inf"), ("dead", "all -inf")])
@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "T1"])
def test_one_bad_draft_step_raises_naming_the_draft(tiny_pair, kind, match, temperature):
    """The draft model's logits go bad in one row, on one forward in the middle of a k = 3 block
    (its 3rd call: the 2nd draft of the first block), clean before and after.  generate must raise
    a ValueError naming the draft's logits -- on the greedy path too -- not emit a token drawn
    from them."""
    target, draft = tiny_pair
    ids = torch.stack([PROMPT, PROMPT.flip(0)])
    with pytest.raises(ValueError, match=rf"the draft's logits.*{match}|{match}.*the draft's logits"):
        generate(target, ids, drafter=_PoisonedOnce(draft, kind), k=3, max_new_tokens=30,
                 temperature=temperature, generator=torch.Generator().manual_seed(0))


class _FlagsOnly(Drafter):
    """A drafter that reports its scores' `logit_flags` (``flags``) but leaves ``finite`` at the
    base's None; everything else is the wrapped ModelDrafter's."""

    def __init__(self, inner):
        self.inner = inner

    vocab_size = property(lambda self: self.inner.vocab_size)
    forward_seconds = property(lambda self: self.inner.forward_seconds)
    flags = property(lambda self: self.inner.flags)
    model = property(lambda self: self.inner.model)

    def begin(self, ids, mask):
        self.inner.begin(ids, mask)

    def propose(self, k, sampling, generator):
        return self.inner.propose(k, sampling, generator)

    def commit(self, n, next_token, n_max):
        self.inner.commit(n, next_token, n_max)

    def select(self, rows):
        self.inner.select(rows)


def test_a_drafter_reporting_flags_only_is_still_checked(tiny_pair):
    """The engine checks a drafter's ``finite`` each step; one that has only ``flags`` is checked by
    those instead, never left unchecked: NaN draft logits in one step still raise naming the draft."""
    from specdec.engine.drafters import ModelDrafter

    target, draft = tiny_pair
    drafter = _FlagsOnly(ModelDrafter(_PoisonedOnce(draft, "nan")))
    assert drafter.finite is None
    with pytest.raises(ValueError, match="the draft's logits contain NaN"):
        generate(target, PROMPT, drafter=drafter, k=3, max_new_tokens=30, temperature=1.0,
                 generator=torch.Generator().manual_seed(0))


def test_k_beyond_the_context_is_clipped(tiny_pair):
    """k = 500 with a 128-position model: each step drafts at most the remaining budget minus one,
    nothing overshoots, and greedy output equals the baseline's.  The drafter is the target itself,
    so every draft is accepted: the cap (`next_k_cap`) lets the first step draft 8, all kept, the
    next 2 (8 + 1) = 18, clipped to the 11 left minus one = 10 -- and that ends the run."""
    target, _ = tiny_pair
    base = generate(target, PROMPT, max_new_tokens=20, temperature=0)
    out = generate(target, PROMPT, drafter=target, k=500, max_new_tokens=20, temperature=0)
    assert torch.equal(out.tokens[0], base.tokens[0]) and out.finish == ["length"]
    assert [s["k"] for s in out.stats.steps] == [8, 10]


def test_a_huge_k_drafts_a_bounded_multiple_of_what_it_emits(tiny_pair):
    """k = 1000, 8-token prompt, 120 new tokens (the context's 128), sampled (T = 1) and greedy, with a
    draft that is rarely accepted (the tiny draft with its output scaled 30x: peaked where the target
    is flat; rejections asserted).  Uncapped, each step drafted the whole remaining budget (119, 118,
    ...: some 6,600 drafted tokens, one draft forward each, for 120 emitted at T = 1); capped where
    it cannot pay (`next_k_cap`) the run drafts at most 10 tokens per token emitted, and no more
    than the same run at k = 8 (twice that, for slack) -- counted, not timed.  No step drafts more
    than max(8, 2 (n + 1)), n the longest run kept the step before.  A k of 8 or less is never
    capped: k = 8 drafts min(8, budget left - 1) in every step (and greedy, the baseline's tokens)."""
    target, draft = tiny_pair
    weak = copy.deepcopy(draft)
    with torch.no_grad():
        weak.lm_head.weight.mul_(30.0)
    for temperature in (1.0, 0.0):
        runs = [generate(target, PROMPT, drafter=weak, k=k, max_new_tokens=120, temperature=temperature,
                         generator=torch.Generator().manual_seed(4)) for k in (1000, 8)]
        huge, eight = ([s["k"] for s in r.stats.steps] for r in runs)
        kept = [n for _, ns in runs[0].stats.accepted for n in ns]
        assert all(len(r.tokens[0]) == 120 for r in runs) and any(n < k for n, k in zip(kept, huge))
        assert sum(huge) <= 10 * 120 and sum(huge) <= 2 * sum(eight)
        assert huge[0] == 8 and all(k <= max(8, 2 * (n + 1)) for k, n in zip(huge[1:], kept))
        done = 0
        for s in runs[1].stats.steps:
            assert s["k"] == min(8, 120 - done - 1)
            done += s["emitted"]
    base = generate(target, PROMPT, max_new_tokens=120, temperature=0)
    assert torch.equal(runs[1].tokens[0], base.tokens[0]) and torch.equal(runs[0].tokens[0], base.tokens[0])


def test_cancel_from_another_thread_mid_run(tiny_pair):
    """A second thread sets the cancel event while generation runs (deterministically: the target's
    3rd call starts that thread and waits for it).  The result is cancelled, every row a prefix of
    the uncancelled run, and the same models generate the full output right after."""
    target, draft = tiny_pair
    ids = torch.stack([PROMPT, PROMPT.flip(0)])
    full = generate(target, ids, drafter=draft, k=3, max_new_tokens=24, temperature=0)
    ev = threading.Event()

    class _SetsFromAThread(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.calls = engine_model(target), 0

        @property
        def config(self):
            return target.config

        def forward(self, **kw):
            self.calls += 1
            if self.calls == 3:
                t = threading.Thread(target=ev.set)
                t.start()
                t.join()
            return self.inner(**kw)

    cut = generate(_SetsFromAThread(), ids, drafter=draft, k=3, max_new_tokens=24, temperature=0, cancel=ev)
    assert cut.cancelled and ev.is_set()
    assert all(f == "cancelled" for f in cut.finish)
    for a, b in zip(cut.tokens, full.tokens):
        assert 0 < len(a) < len(b) and torch.equal(a, b[: len(a)])
    again = generate(target, ids, drafter=draft, k=3, max_new_tokens=24, temperature=0)
    assert all(torch.equal(a, b) for a, b in zip(again.tokens, full.tokens))


@pytest.mark.parametrize("bad", [1.5, True, 2.0, "3", None, torch.tensor(1.5), np.float64(4.0)],
                         ids=lambda b: repr(b))
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_stop_token_ids_must_be_integers(tiny_pair, bad, speculative):
    """A stop id that is not an integer (1.5, True, 2.0, "3", ...) is refused by name before any
    forward -- never truncated to token 1 or 2 and stopped on silently.  Integer ids of any integer
    type (int, numpy, 0-d tensor) stop as before."""
    target, draft = tiny_pair
    kw = dict(drafter=draft if speculative else None, k=2, max_new_tokens=6, temperature=0)
    with pytest.raises(ValueError, match=r"stop_token_ids must be integer token ids; .* is not one"):
        generate(target, PROMPT, stop_token_ids=[5, bad], **kw)
    with pytest.raises(ValueError, match="stop_token_ids must be an iterable"):
        generate(target, PROMPT, stop_token_ids=7, **kw)
    free = generate(target, PROMPT, **kw).tokens[0]
    first = int(free[1])
    for ok in (first, np.int64(first), torch.tensor(first)):
        out = generate(target, PROMPT, stop_token_ids=[ok], **kw)
        assert out.tokens[0].tolist() == free[:int((free == first).nonzero()[0]) + 1].tolist()


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "T1"])
@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_a_generator_that_is_not_one_is_refused_up_front(tiny_pair, temperature, speculative):
    """generator=42 (or a numpy generator) is a TypeError before the first forward at every
    temperature -- greedy draws nothing, but the argument is still wrong -- never an AttributeError
    mid-run; a RowGenerators must have one generator per row."""
    from specdec.core.sampling import RowGenerators

    target, draft = tiny_pair
    calls = []
    counting = _Counting(target, calls)
    kw = dict(drafter=draft if speculative else None, k=2, max_new_tokens=6, temperature=temperature)
    for bad in (42, np.random.default_rng(0), [torch.Generator()]):
        with pytest.raises(TypeError, match="generator must be a torch.Generator"):
            generate(counting, PROMPT, generator=bad, **kw)
    with pytest.raises(TypeError, match="one generator per row: 2 for 1 rows"):
        generate(counting, PROMPT, generator=RowGenerators([torch.Generator(), torch.Generator()]), **kw)
    assert calls == []  # refused before any forward
    out = generate(counting, PROMPT, generator=RowGenerators([torch.Generator().manual_seed(0)]), **kw)
    assert len(out.tokens[0]) == 6


class _Counting(torch.nn.Module):
    """The target, counting its forwards in ``calls``."""

    def __init__(self, model, calls):
        super().__init__()
        self.inner, self.calls = engine_model(model), calls

    @property
    def config(self):
        return self.inner.config

    def forward(self, **kw):
        self.calls.append(1)
        return self.inner(**kw)
