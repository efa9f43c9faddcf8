"""specdec.engine.kv: the KV-keyword shim for older transformers releases, the context length."""

import torch

from specdec.engine.kv import KVCompat, context_length, engine_model, kv_keyword, steps


def test_kv_shim_renames_the_keyword_for_older_releases():
    class Old(torch.nn.Module):
        config = None

        def forward(self, input_ids=None, past_key_values=None):
            return past_key_values

    class New(torch.nn.Module):
        def forward(self, input_ids=None, cache=None):
            return cache

    assert kv_keyword(Old()) == "past_key_values" and kv_keyword(New()) == "cache"
    assert KVCompat(Old())(input_ids=1, cache="kv") == "kv"
    assert KVCompat(New())(input_ids=1, cache="kv") == "kv"
    new = New()
    assert engine_model(new) is new and isinstance(engine_model(Old()), KVCompat)
    assert context_length(torch.nn.Linear(1, 1)) is None


def test_steps_are_made_once_and_usable_in_and_out_of_inference_mode():
    """The engine's shared aranges: the same tensor for the same request, a column when asked, and
    made first under torch.inference_mode they still enter an autograd-tracked computation (a cached
    inference tensor there raises 'Inference tensors cannot be saved for backward')."""
    from specdec.engine import kv

    kv._STEPS.clear()
    with torch.inference_mode():
        a = steps(3, "cpu", 2)
    assert a.tolist() == [2, 3, 4] and steps(3, "cpu", 2) is a
    assert steps(3, "cpu", 2, column=True).shape == (3, 1)
    w = torch.ones(3, requires_grad=True)
    (w * steps(3, "cpu", 2)).sum().backward()
    assert w.grad.tolist() == [2.0, 3.0, 4.0]
