"""specdec.chapters.ch04.family_quality (chapter 04): card rows and margins by hand, sample continuations and
teacher-forced beta on tiny random-weight models against independent references."""

import math

import pandas as pd
import pytest
import torch

from specdec.engine.history import NGramDrafter
from specdec.family.architectures import build_model, real_size_config
from specdec.family.ngram import NGramModel
from specdec.chapters.ch04 import family_quality as fq

V = 32
TINY = dict(n_embd=32, n_head=2, vocab_size=V, n_positions=128, bos_token_id=0, eos_token_id=0)
CARD = {"models": {
    "target": {"arch": "GPT-2 big", "params": 100, "tokens_seen": 5000, "validation_loss": 3.00004,
               "validation_ppl": 20.0864, "test_ppl": 25.004},
    "draft-small": {"arch": "GPT-2 small", "params": 10, "tokens_seen": 900, "validation_loss": 3.2,
                    "validation_ppl": 24.53, "test_ppl": 30.0},
    "ngram": {"arch": "trigram", "params": 7, "validation_loss": 3.1, "validation_ppl": 22.2, "test_ppl": 27.0}}}


@pytest.fixture(scope="module")
def pair():
    g = torch.Generator().manual_seed(0)
    return (build_model(real_size_config("gpt2-small", n_layer=2, **TINY), generator=g),
            build_model(real_size_config("draft-3m", n_layer=1, **TINY), generator=g))


class _Tok:
    def decode(self, ids):
        return " ".join(map(str, ids))


def test_perplexity_rows_round_and_default_the_training_count():
    rows = fq.perplexity_rows(CARD)
    assert [r["model"] for r in rows] == ["target", "draft-small", "ngram"]
    assert rows[0] == {"model": "target", "architecture": "GPT-2 big", "params": 100, "tokens_seen": 5000,
                       "val_loss": 3.0, "val_ppl": 20.09, "test_ppl": 25.0}
    assert rows[2]["tokens_seen"] == 0


def test_target_margin_by_hand():
    m = fq.target_margin(CARD, 0.15)  # closest: ngram, 3.1 - 3.00004 = 0.09996 < -ln 0.85 = 0.1625
    assert m["min_margin_model"] == "ngram" and m["min_margin"] == pytest.approx(0.09996)
    assert m["required_margin"] == pytest.approx(-math.log(0.85)) and m["target_is_best"] == "no"
    assert m["target_params"] == 100
    two = {"models": {k: v for k, v in CARD["models"].items() if k != "ngram"}}
    assert fq.target_margin(two, 0.15)["target_is_best"] == "yes"  # 0.19996 >= 0.1625
    with pytest.raises(ValueError, match="fraction"):
        fq.target_margin(CARD, 15)


def test_members_follow_the_card_and_keep_the_ngram_out_of_the_samples(pair):
    target, draft = pair
    ng = object()
    models, drafts = fq.members(CARD, target, {"ngram": ng, "draft-small": draft, "extra": draft})
    assert list(drafts) == ["draft-small", "ngram", "extra"]
    assert list(models) == ["target", "draft-small", "extra"] and models["target"] is target


def test_sample_continuations_are_seeded_and_greedy_matches_a_plain_argmax_loop(pair):
    target, draft = pair
    prompt = torch.randint(0, V, (1, 6), generator=torch.Generator().manual_seed(3))
    rows = fq.sample_continuations({"target": target, "draft": draft}, _Tok(), prompt, 8, 0.8, seed=5)
    again = fq.sample_continuations({"target": target, "draft": draft}, _Tok(), prompt, 8, 0.8, seed=5)
    assert rows == again and [r["model"] for r in rows] == ["target", "draft"]
    assert all(len(r["continuation"].split()) == 8 for r in rows)
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(8):  # the reference: full forward each step, argmax of the last position
            ids = torch.cat([ids, target(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
    greedy = fq.sample_continuations({"target": target}, _Tok(), prompt, 8, 0.0, seed=0)[0]["continuation"]
    assert greedy == _Tok().decode(ids[0, 6:].tolist())
    with pytest.raises(ValueError, match="one row"):
        fq.sample_continuations({"target": target}, _Tok(), prompt.repeat(2, 1), 8, 0.8, seed=0)


def test_beta_rows_against_a_direct_computation(pair):
    target, draft = pair
    ids = torch.randint(0, V, (4, 20), generator=torch.Generator().manual_seed(1))
    rows = fq.beta_rows(target, {"draft": draft, "same": target}, ids, [1.0, 0.0], start=8)
    assert [(r["draft"], r["temperature"]) for r in rows] == [("draft", 1.0), ("draft", 0.0), ("same", 1.0),
                                                             ("same", 0.0)]
    assert all(r["contexts"] == 4 * 12 and r["windows"] == 4 for r in rows)
    with torch.no_grad():
        pt, pd_ = target(input_ids=ids).logits[:, 7:-1], draft(input_ids=ids).logits[:, 7:-1]  # (4, 12, V)
    agree = (pt.argmax(-1) == pd_.argmax(-1)).float().mean(1)  # greedy agreement per window, (4,)
    assert rows[1]["beta"] == pytest.approx(agree.mean().item(), abs=1e-6)
    assert rows[1]["se"] == pytest.approx(agree.std().item() / 2, abs=1e-6)
    tv = 1 - 0.5 * (pt.softmax(-1) - pd_.softmax(-1)).abs().sum(-1).mean(1)  # 1 - TV per window
    assert rows[0]["beta"] == pytest.approx(tv.mean().item(), abs=1e-5)
    assert rows[2]["beta"] == pytest.approx(1.0, abs=1e-5) and rows[3]["beta"] == 1.0  # a draft equal to the target


def test_beta_rows_score_an_ngram_drafter(pair):
    target, _ = pair
    ng = NGramDrafter(NGramModel.fit(torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(2)).numpy(), V))
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(4))
    (row,) = fq.beta_rows(target, {"ngram": ng}, ids, [1.0], start=4)
    assert 0 < row["beta"] < 1 and row["contexts"] == 2 * 8


def test_agreement_summary_by_hand():
    beta = pd.DataFrame({"draft": ["draft-small", "draft-small", "draft-distilled", "draft-distilled", "ngram", "ngram"],
                         "temperature": [1.0, 0.0] * 3, "beta": [0.5, 0.3, 0.6, 0.45, 0.4, 0.39],
                         "se": [0.01] * 6, "contexts": [100] * 6, "windows": [4] * 6})
    s = fq.agreement_summary(beta)
    assert (s["t_high"], s["best_draft"], s["worst_draft"], s["n_contexts"]) == (1.0, "draft-distilled", "ngram", 100)
    assert (s["best_beta"], s["worst_beta"], s["agree_min"], s["agree_max"]) == (0.6, 0.4, 0.3, 0.45)
    assert s["distilled_gain"] == pytest.approx(0.1)
    assert math.isnan(fq.agreement_summary(beta[beta["draft"] == "ngram"])["distilled_gain"])


def test_the_shown_tables_keep_the_orders_of_their_rows():
    """Samples: the prompt first, then the models in the order sampled; beta: drafts in their order,
    temperatures ascending with the greedy column named as such."""
    samples = pd.DataFrame({"model": ["target", "draft-small"], "continuation": [" a\nb", " c"]})
    rows = [["prompt", "P"], ["target", " a\nb"], ["draft-small", " c"]]
    assert fq.sample_rows("P", samples).values.tolist() == rows
    beta = pd.DataFrame({"draft": ["b", "b", "a", "a"], "temperature": [1.0, 0.0, 1.0, 0.0],
                         "beta": [0.5, 0.3, 0.6, 0.4]})
    wide = fq.beta_by_temperature(beta)
    assert list(wide.columns) == ["draft", "greedy agreement (τ = 0)", "β at τ = 1"]
    assert wide.values.tolist() == [["b", 0.3, 0.5], ["a", 0.4, 0.6]]
