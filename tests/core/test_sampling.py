"""process_logits against Hugging Face's own logits warpers, hand-worked cases, and bad input."""

import math

import pytest
import torch

from specdec.core import sampling
from specdec.core.sampling import SamplingConfig, process_logits, sample, sample_inverse_cdf


def _hf_reference(logits, temperature, top_k, top_p):
    """Hugging Face generate's warpers in their order: temperature, top-k, top-p, then softmax."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    scores = logits.clone()
    ids = torch.zeros(scores.shape[0], 1, dtype=torch.long)
    scores = TemperatureLogitsWarper(temperature)(ids, scores)
    if top_k is not None:
        scores = TopKLogitsWarper(top_k)(ids, scores)
    if top_p is not None:
        scores = TopPLogitsWarper(top_p)(ids, scores)
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, None, None), (0.7, 5, None), (1.3, None, 0.9), (0.8, 20, 0.75), (1.0, 3, 0.5), (2.0, 50, 0.95),
])
def test_matches_hugging_face_warpers(temperature, top_k, top_p):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(64, 40, generator=g, dtype=torch.float64) * 2
    ours = process_logits(logits, temperature, top_k, top_p)
    ref = _hf_reference(logits, temperature, top_k, top_p)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, ref, atol=1e-12, rtol=0)


def test_hand_worked_top_k_and_top_p():
    logits = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)
    e = [math.exp(2.0), math.exp(1.0), 1.0]
    full = [x / sum(e) for x in e]  # [0.665, 0.245, 0.090]
    torch.testing.assert_close(process_logits(logits), torch.tensor(full, dtype=torch.float64))
    top2 = [e[0] / (e[0] + e[1]), e[1] / (e[0] + e[1]), 0.0]
    torch.testing.assert_close(process_logits(logits, top_k=2), torch.tensor(top2, dtype=torch.float64))
    # top_p = 0.6: the first token alone (0.665) reaches 0.6 -> one-hot
    torch.testing.assert_close(process_logits(logits, top_p=0.6), torch.tensor([1.0, 0, 0], dtype=torch.float64))
    # top_p = 0.7: needs the first two (0.665 < 0.7 <= 0.910)
    torch.testing.assert_close(process_logits(logits, top_p=0.7), torch.tensor(top2, dtype=torch.float64))
    # temperature 0.5 doubles the logit gaps
    e2 = [math.exp(4.0), math.exp(2.0), 1.0]
    torch.testing.assert_close(process_logits(logits, temperature=0.5),
                               torch.tensor([x / sum(e2) for x in e2], dtype=torch.float64))


def test_order_is_top_k_then_top_p():
    # after top-k=2 the mass is renormalized over 2 tokens; top-p then acts on that renormalized mass
    logits = torch.tensor([1.0, 0.9, 0.8, 0.7], dtype=torch.float64)
    out = process_logits(logits, top_k=2, top_p=0.55)
    assert out[2] == 0 and out[3] == 0 and out[0] > 0 and out[1] > 0  # 0.525 < 0.55: needs both
    swapped_first_step = process_logits(logits, top_p=0.55)  # top-p alone keeps 3 of 4 tokens
    assert (swapped_first_step > 0).sum() == 3


def test_greedy_is_one_hot_on_argmax_lowest_index_on_ties():
    logits = torch.tensor([[0.5, 2.0, 2.0, -1.0], [3.0, 3.0, 3.0, 3.0]])
    out = process_logits(logits, temperature=0, top_k=2, top_p=0.3)
    torch.testing.assert_close(out, torch.tensor([[0.0, 1, 0, 0], [1.0, 0, 0, 0]]))


def test_top_k_keeps_ties_and_large_k_keeps_all():
    logits = torch.tensor([1.0, 2.0, 2.0, 0.0])
    assert ((process_logits(logits, top_k=1) > 0) == torch.tensor([False, True, True, False])).all()
    torch.testing.assert_close(process_logits(logits, top_k=100), torch.softmax(logits, -1))


def test_top_p_ties_rank_lower_index_first():
    out = process_logits(torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=torch.float64), top_p=0.4)
    torch.testing.assert_close(out, torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64))


def test_half_upcast_and_dtypes():
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        out = process_logits(torch.tensor([1.0, 2.0, -float("inf")], dtype=dt), temperature=0.9, top_p=0.9)
        assert out.dtype == torch.float32
    assert process_logits(torch.zeros(3, dtype=torch.float64)).dtype == torch.float64


def test_minus_inf_is_masking_and_input_untouched():
    logits = torch.tensor([[0.0, -float("inf"), 1.0], [2.0, 2.0, -float("inf")]])
    before = logits.clone()
    out = process_logits(logits, temperature=0.5, top_k=2, top_p=0.99)
    assert torch.equal(logits, before)
    assert out[0, 1] == 0 and out[1, 2] == 0
    torch.testing.assert_close(out.sum(-1), torch.ones(2))


@pytest.mark.parametrize("logits,kwargs,match", [
    (torch.tensor([0.0, float("nan")]), {}, "NaN"),
    (torch.tensor([0.0, float("inf")]), {}, r"\+inf"),
    (torch.tensor([[0.0, 1.0], [-float("inf"), -float("inf")]]), {}, "all -inf"),
    (torch.tensor([0.0, 1.0]), {"temperature": -0.1}, "temperature"),
    (torch.tensor([0.0, 1.0]), {"temperature": float("nan")}, "temperature"),
    (torch.tensor([0.0, 1.0]), {"top_k": 0}, "top_k"),
    (torch.tensor([0.0, 1.0]), {"top_k": 2.5}, "top_k"),
    (torch.tensor([0.0, 1.0]), {"top_p": 0.0}, "top_p"),
    (torch.tensor([0.0, 1.0]), {"top_p": 1.5}, "top_p"),
    (torch.tensor([1, 2]), {}, "floating"),
    (torch.zeros(2, 0), {}, "non-empty"),
    ([0.0, 1.0], {}, "torch.Tensor"),
])
def test_bad_input_raises(logits, kwargs, match):
    with pytest.raises(ValueError, match=match):
        process_logits(logits, **kwargs)


def test_inverse_cdf_never_returns_zero_mass_or_out_of_range():
    probs = torch.tensor([[0.0, 0.3, 0.0, 0.7, 0.0]], dtype=torch.float64).expand(6, 5)
    u = torch.tensor([0.0, 0.299999, 0.3, 0.5, 1 - 2 ** -53, 1.0], dtype=torch.float64)
    out = sample_inverse_cdf(probs, u)
    assert out.tolist() == [1, 1, 3, 3, 3, 3]  # u = 1.0 (rounding) still maps to the last positive token


def test_sample_is_deterministic_given_generator():
    probs = torch.softmax(torch.randn(100, 7, generator=torch.Generator().manual_seed(0)), -1)
    a = sample(probs, torch.Generator().manual_seed(5))
    b = sample(probs, torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and a.shape == (100,)
    with pytest.raises(ValueError):
        sample(torch.tensor([0.5, -0.5]))


def test_sample_greedy_unchecked_and_the_config_rules():
    p = torch.tensor([[0.1, 0.6, 0.3], [0.0, 0.0, 1.0]])
    assert sample(p, None, greedy=True).tolist() == [1, 2]
    g = torch.Generator().manual_seed(0)
    x = torch.stack([sample(p, g, check=False) for _ in range(400)])  # (400, 2)
    assert (x[:, 1] == 2).all() and set(x[:, 0].tolist()) == {0, 1, 2}
    cfg = SamplingConfig(0.7, top_p=0.9)
    z = torch.randn(3, 5, generator=g)
    assert torch.equal(cfg(z), process_logits(z, 0.7, None, 0.9)) and SamplingConfig(0.0).greedy
    for bad in (dict(temperature=-1), dict(top_k=0), dict(top_p=1.2)):
        with pytest.raises(ValueError):
            SamplingConfig(**bad)


@pytest.mark.parametrize("first_mode", ["inference", "grad"])
def test_inverse_cdf_in_and_out_of_inference_mode(first_mode):
    """The inverse CDF keeps a zero tensor per dtype and device (one operation fewer per draw); made
    under torch.inference_mode, it must still be usable with probabilities autograd tracks, and the
    other way round (a cached inference tensor there raised 'Inference tensors cannot be saved for
    backward').  The float32 draw at u = 1 - 2^-53 (rounds to 1.0) stays on the last positive token."""
    probs = torch.tensor([[0.0, 0.3, 0.0, 0.7, 0.0]], dtype=torch.float32)
    u = torch.tensor([0.5, 1 - 2 ** -53], dtype=torch.float64)
    tracked = probs.clone().requires_grad_(True).expand(2, 5)
    runs = [lambda: torch.inference_mode()(sample_inverse_cdf)(probs.expand(2, 5), u),
            lambda: sample_inverse_cdf(tracked, u)]
    sampling._ZEROS.clear()  # the first call below makes the cached zero
    for run in runs if first_mode == "inference" else runs[::-1]:
        assert run().tolist() == [3, 3]
