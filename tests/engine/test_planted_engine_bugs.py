"""Small bugs planted in the engine that the law tests cannot see, each test seen to fail on its bug:
a KV crop one slot short (outputs unchanged -- the extra slot is masked -- but the target is fed
attention masks with holes and the cache grows by a slot per rejection), and prompt lookup taking
the earliest instead of the latest earlier match; and rows that keep another row's generator after
a row selection.  The math modules' planted bugs are in tests/core/test_planted_math_bugs.py."""

import pytest
import torch

from specdec.core.sampling import RowGenerators
from specdec.engine.decode import generate
from specdec.engine.history import PromptLookupDrafter
from specdec.engine.kv import engine_model


class _MaskRecorder(torch.nn.Module):
    """The target, recording the attention_mask of every call."""

    def __init__(self, model):
        super().__init__()
        self.inner = engine_model(model)
        self.masks = []

    @property
    def config(self):
        return self.inner.config

    def forward(self, **kw):
        self.masks.append(kw["attention_mask"].clone())
        return self.inner(**kw)


def test_single_row_generation_never_feeds_a_mask_with_holes(tiny_pair):
    """One row: every slot a rejection leaves is cropped (it is the trailing slot of the only row),
    so the target never sees a 0 in its attention mask.  A crop one slot short keeps a masked
    slot per rejection: same tokens, but holes in the mask and a cache that grows.
    Sampled (T = 1) and greedy, with a weak random draft so rejections happen (asserted)."""
    target, draft = tiny_pair
    prompt = torch.randint(0, 64, (9,), generator=torch.Generator().manual_seed(2))
    for temperature in (1.0, 0.0):
        rec = _MaskRecorder(target)
        out = generate(rec, prompt, drafter=draft, k=4, max_new_tokens=40, temperature=temperature,
                       generator=torch.Generator().manual_seed(3))
        assert len(out.tokens[0]) == 40
        assert any(r["accepted"] < r["k"] for r in out.stats.accept_rows()), "no rejection: the crop is untested"
        assert rec.masks and all(m.shape[0] == 1 for m in rec.masks)
        holes = [i for i, m in enumerate(rec.masks) if (m == 0).any()]
        assert not holes, f"T={temperature}: calls {holes} fed an attention mask with a 0 (uncropped rejected slot)"


def test_prompt_lookup_takes_the_latest_earlier_match():
    """History [5, 1, 5, 2, 5], max n-gram 2, k = 3: "2 5" has no earlier occurrence, so m = 1: "5"
    occurs earlier at 0 and at 2; the latest (2) continues with h[3:] = [2, 5] and then periodically
    -> [2, 5, 2].  The earliest match (0) would give [1, 5, 2]."""
    d = PromptLookupDrafter(64, max_ngram=2)
    ids = torch.tensor([[5, 1, 5, 2, 5]])
    d.begin(ids, torch.ones_like(ids))
    toks, q = d.propose(3, None, None)
    assert toks.tolist() == [[2, 5, 2]]
    assert torch.equal(q, torch.nn.functional.one_hot(toks, 64).float())


@pytest.mark.parametrize("speculative", [False, True], ids=["plain", "speculative"])
def test_rows_keep_their_own_generators_after_a_row_leaves(tiny_pair, speculative):
    """Two rows, each with its own generator (`RowGenerators`), sampled at T = 1.  Row 0 ends early at a
    stop token (one it emits within its first tokens and row 1 never does, chosen from solo runs);
    when it leaves the batch, row 1 must keep drawing from ITS generator: both rows' tokens equal
    their solo runs (row 0 cut at the stop).  Keeping the first generator (row 0's) for the
    remaining row, a wrong selection, changes row 1's tokens after row 0 leaves."""
    target, draft = tiny_pair
    g = torch.Generator().manual_seed(8)
    rows = torch.randint(0, 64, (2, 7), generator=g)
    kw = dict(drafter=draft if speculative else None, k=3, max_new_tokens=30, temperature=1.0)

    def gens(*seeds):
        return RowGenerators([torch.Generator().manual_seed(s) for s in seeds])

    solo = [generate(target, rows[b], generator=gens(11 + b), **kw).tokens[0].tolist() for b in (0, 1)]
    stop = next(t for t in solo[0][1:8] if t not in solo[1])
    cut = solo[0][:solo[0].index(stop) + 1]
    out = generate(target, rows, generator=gens(11, 12), stop_token_ids=[stop], **kw)
    assert out.finish == ["stop", "length"] and len(cut) < 10
    assert out.tokens[0].tolist() == cut and out.tokens[1].tolist() == solo[1]
