"""specdec.engine.kv: the KV-keyword shim for older transformers releases, the context length."""

import torch

from specdec.engine.kv import KVCompat, context_length, engine_model, kv_keyword


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
