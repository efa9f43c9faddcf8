"""Bad inputs to the engine (issue 11): a target that emits NaN / inf logits mid-run, greedy and
sampled, plain and speculative; and the already-handled cases that had no test yet (the others
live in test_decode.py): k below 1 or beyond the context, more wrong argument types, empty
prompt lists, cancellation from another thread.

Models: the shared tiny seeded random pair (tests/conftest.py, V = 64, 128 positions).
"""

import threading

import pytest
import torch

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
    on: the sampled path (T = 1) raises a clear ValueError (already so before issue 11)."""
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


class _FlagsOnly:
    """A drafter object that reports its scores' `logit_flags` (``flags``) but no ``finite``, as a
    drafter written against the earlier protocol does; everything else is the wrapped ModelDrafter's."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        if name == "finite":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_drafter_reporting_flags_only_is_still_checked(tiny_pair):
    """The engine checks a drafter's ``finite`` each step; one that has only ``flags`` is checked by
    those instead, never left unchecked: NaN draft logits in one step still raise naming the draft."""
    from specdec.engine.drafters import ModelDrafter

    target, draft = tiny_pair
    drafter = _FlagsOnly(ModelDrafter(_PoisonedOnce(draft, "nan")))
    assert not hasattr(drafter, "finite") and hasattr(drafter, "flags")
    with pytest.raises(ValueError, match="the draft's logits contain NaN"):
        generate(target, PROMPT, drafter=drafter, k=3, max_new_tokens=30, temperature=1.0,
                 generator=torch.Generator().manual_seed(0))


def test_k_beyond_the_context_is_clipped(tiny_pair):
    """k = 500 with a 128-position model: each step drafts at most the remaining budget minus one
    (the first step all 19 of 20), nothing overshoots, and greedy output equals the baseline's.
    The drafter is the target itself, so every draft is accepted and the clip is what limits k."""
    target, _ = tiny_pair
    base = generate(target, PROMPT, max_new_tokens=20, temperature=0)
    out = generate(target, PROMPT, drafter=target, k=500, max_new_tokens=20, temperature=0)
    assert torch.equal(out.tokens[0], base.tokens[0]) and out.finish == ["length"]
    ks = [s["k"] for s in out.stats.steps]
    assert ks[0] == 19 and max(ks) <= 19


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
