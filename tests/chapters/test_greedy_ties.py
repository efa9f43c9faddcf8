"""`specdec.chapters.ch01.greedy_ties`: the one-token and the (k+1)-token forwards compared position by
position.  A hand-made bigram model whose multi-token forward nudges one logit on purpose must show
exactly the flips it forces (negative control), and none when it does not nudge; on a small random
GPT-2 the plain path reproduces the engine's greedy output."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from specdec.engine.decode import generate
from specdec.family.architectures import build_model, real_size_config
from specdec.chapters.ch01 import greedy_ties as gt

V = 5
TIE = 1e-6  # token 0's top-2 gap: its successor 1 beats token 4 by this much


class BigramLM(torch.nn.Module):
    """logits = table[input_id] (float64), plus ``bump`` on every forward over more than one token:
    a stand-in for a verification forward whose reduction order moves the logits."""

    def __init__(self, bump: float = 0.0):
        super().__init__()
        table = torch.full((V, V), -5.0, dtype=torch.float64)
        for t in range(4):                       # the greedy chain 0 -> 1 -> 2 -> 3 -> 0
            table[t, (t + 1) % 4] = 1.0
        table[0, 4] = 1.0 - TIE                  # the near tie, at every position whose pending token is 0
        self.table = torch.nn.Parameter(table, requires_grad=False)
        self.bump = torch.zeros(V, dtype=torch.float64)
        self.bump[4] = bump
        self.config = SimpleNamespace(vocab_size=V, n_positions=512)

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0):
        z = self.table[input_ids]  # (B, s, V)
        if input_ids.shape[1] > 1:
            z = z + self.bump
        return SimpleNamespace(logits=z[:, -logits_to_keep:] if logits_to_keep else z)


PROMPTS = torch.tensor([[2, 3], [1, 2]])  # pending 3 -> chain 0 1 2 3 ...; pending 2 -> chain 3 0 1 2 ...
N_NEW = 12                                # every k below tiles 12 positions with windows of 2 or more tokens
KS = [1, 2, 4]


def _summary(model):
    pos = pd.DataFrame(gt.position_rows(model, PROMPTS, N_NEW, KS))
    return pos, {r["k"]: r for r in gt.summary_rows(pos)}


def test_plain_greedy_follows_the_chain_and_keeps_its_logits():
    tokens, logits = gt.plain_greedy(BigramLM(), PROMPTS[0], 6)
    assert tokens.tolist() == [0, 1, 2, 3, 0, 1]
    assert logits.shape == (6, V) and torch.equal(logits.argmax(-1), tokens)


def test_exact_agreement_gives_no_flip_and_no_difference():
    pos, summary = _summary(BigramLM(bump=0.0))
    assert len(pos) == len(KS) * len(PROMPTS) * N_NEW
    for k in KS:
        s = summary[k]
        assert (s["dtype"], s["positions"], s["flips"], s["max_abs_diff"], s["near_ties"]) == ("float64", 24, 0, 0.0, 0)
        assert s["min_top2_gap"] == pytest.approx(TIE)
        assert 0 < s["flip_rate_high"] < 0.2  # Wilson upper bound of 0 in 24


def test_a_forced_near_tie_that_flips_is_counted():
    # the bump 2 TIE lifts token 4 above token 1 wherever the pending token is 0: positions 1, 5, 9 of
    # the first prompt (chain 0 1 2 3 ...) and 2, 6, 10 of the second (chain 3 0 1 2 ...)
    pos, summary = _summary(BigramLM(bump=2 * TIE))
    for k in KS:
        s = summary[k]
        assert s["flips"] == 6 and s["near_ties"] == 6
        assert s["max_abs_diff"] == pytest.approx(2 * TIE)
        flipped = pos[(pos.k == k) & pos.flip]
        assert sorted(zip(flipped.prompt, flipped.position)) == [(0, 1), (0, 5), (0, 9), (1, 2), (1, 6), (1, 10)]
        assert set(flipped.verify_token) == {4} and set(flipped.token) == {1}
    gaps = pd.DataFrame(gt.gap_rows(pos))
    assert len(gaps) == len(PROMPTS) * N_NEW and int(gaps.flip.sum()) == 6


def test_a_difference_below_the_gap_moves_logits_but_flips_nothing():
    _, summary = _summary(BigramLM(bump=TIE / 2))
    assert all(s["flips"] == 0 and s["near_ties"] == 0 and s["max_abs_diff"] == pytest.approx(TIE / 2)
               for s in summary.values())


def test_a_one_token_window_is_a_one_token_forward():
    # k = 4 over 6 positions: windows of 5 and 1; the last position is not bumped, so not flipped
    tokens, _ = gt.plain_greedy(BigramLM(), PROMPTS[0], 6)  # 0 1 2 3 0 1: position 5 has pending 0
    z = gt.verification_logits(BigramLM(bump=2 * TIE), PROMPTS[0], tokens, 4)
    assert z.argmax(-1).tolist() == [0, 4, 2, 3, 0, 1]


def _tiny(seed: int, n_layer: int, n_embd: int):
    cfg = real_size_config("gpt2-small", n_layer=n_layer, n_embd=n_embd, n_head=2, vocab_size=97, n_positions=64,
                           bos_token_id=0, eos_token_id=0)
    return build_model(cfg, generator=torch.Generator().manual_seed(seed)).eval()


def test_on_a_random_gpt2_the_plain_path_is_the_engines_greedy_path():
    target = _tiny(0, 2, 32)
    prompts = torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    for prompt in prompts:
        tokens, _ = gt.plain_greedy(target, prompt, 10)
        assert tokens.tolist() == generate(target, prompt, max_new_tokens=10, temperature=0,
                                           mode="eager").tokens[0].tolist()
    pos = pd.DataFrame(gt.position_rows(target, prompts, 10, [1, 3]))
    assert set(pos.dtype) == {"float32"} and pos.max_abs_diff.max() < 1e-4


def test_engine_rows_compare_speculative_with_plain_greedy():
    target, draft = _tiny(0, 2, 32), _tiny(5, 1, 16)
    prompts = torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(2))
    rows = gt.engine_rows(target, {"tiny": draft}, prompts, 9, 3)
    assert [(r["draft"], r["prompt"], r["tokens"]) for r in rows] == [("tiny", 0, 9), ("tiny", 1, 9)]
    assert all(r["identical"] == (r["first_difference"] == -1) for r in rows)


def test_the_gap_figure_draws_every_series():
    import matplotlib

    matplotlib.use("Agg")
    from specdec.report.plotting import greedy_gaps, visible_series

    pos, _ = _summary(BigramLM(bump=2 * TIE))
    gaps = pd.DataFrame(gt.gap_rows(pos))
    fig = greedy_gaps(pd.concat([gaps, gaps.assign(dtype="other", flip=False)]))
    series = visible_series(fig)
    assert len(series) == 5 and all(seen for _, _, seen in series)  # 2 curves, 2 lines, the flips


def test_the_dtype_table_totals_each_dtype():
    pos, _ = _summary(BigramLM(bump=2 * TIE))
    other = pos.assign(dtype="other", flip=False, max_abs_diff=0.0)  # a second dtype without differences
    both = pd.concat([pos, other])
    summary, gaps = pd.DataFrame(gt.summary_rows(both)), pd.DataFrame(gt.gap_rows(both))
    engine = pd.DataFrame({"dtype": ["float64"] * 3 + ["other"] * 2, "identical": [True, False, True, True, True]})
    rows = {r["dtype"]: r for r in gt.dtype_rows(summary, gaps, engine)}
    assert list(rows) == ["float64", "other"]
    r = rows["float64"]
    assert (r["comparisons"], r["flips"], r["near_ties"]) == (72, 18, 18)  # 3 k of 24 positions each
    assert r["max_abs_diff"] == pytest.approx(2 * TIE) and r["min_top2_gap"] == pytest.approx(TIE)
    assert (r["positions"], r["near_tie_positions"], r["flipped_positions"]) == (24, 6, 6)
    assert (r["engine_runs"], r["engine_identical"]) == (3, 2)
    assert 0 < r["flip_rate_high"] < 1
    o = rows["other"]
    assert (o["flips"], o["near_ties"], o["near_tie_positions"], o["engine_runs"], o["engine_identical"]) == (0, 0, 0, 2, 2)


def test_positions_and_engine_rows_run_every_dtype():
    fams = {"a": SimpleNamespace(target=BigramLM()), "b": SimpleNamespace(target=BigramLM(bump=2 * TIE))}
    rows = pd.DataFrame(gt.positions_by_dtype(fams, PROMPTS, N_NEW, KS))
    assert len(rows) == 2 * len(KS) * len(PROMPTS) * N_NEW and int(rows.flip.sum()) == len(KS) * 6
    target, draft = _tiny(0, 2, 32), _tiny(5, 1, 16)
    prompts = torch.randint(1, 97, (2, 7), generator=torch.Generator().manual_seed(2))
    fams = {"x": SimpleNamespace(target=target, drafts={"tiny": draft, "unused": None})}
    eng = gt.engine_rows_by_dtype(fams, ["tiny"], prompts, 5, 2)
    assert [(r["draft"], r["prompt"]) for r in eng] == [("tiny", 0), ("tiny", 1)]
