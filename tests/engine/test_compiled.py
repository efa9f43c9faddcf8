"""specdec.engine.modes.compiled: the graph-compiled execution mode is the same algorithm with another forward."""

import pytest
import torch

from specdec.engine.modes.compiled import RECOMPILE_LIMIT, CompiledModel, compiled, graph_count
from specdec.engine.decode import generate
from specdec.engine.kv import KVCompat


def test_dynamic_shapes_decode_what_the_eager_engine_decodes_on_its_growing_cache(tiny_pair):
    """compiled(..., static=False): the engine keeps its DynamicCache (no preallocated one), and greedy
    k = 2 on a ragged batch gives the eager tokens.  Traced by dynamo with dynamic shapes and run by
    the aot_eager backend: the dynamic mode is the GPU run's, whose kernels inductor writes in Triton,
    not in the C++ a CPU test would compile (minutes for dynamic shapes here); the static mode's test
    below runs inductor's CPU kernels."""
    from transformers import DynamicCache

    from specdec.engine.kv import new_cache

    target, draft = tiny_pair
    ct, cd = compiled(target, static=False, backend="aot_eager"), compiled(draft, static=False, backend="aot_eager")
    assert isinstance(new_cache(ct, 8), DynamicCache) and not ct.static
    prompts = [torch.tensor([3, 7, 1, 9, 4]), torch.tensor([5, 2, 8])]
    # k = 2 speculative decoding runs the target on every shape plain decoding does (prefill, one
    # token) and more (k + 1 tokens), so it alone covers the growing cache's shapes
    eager = generate(target, prompts, drafter=draft, k=2, max_new_tokens=5, temperature=0, mode="eager")
    comp = generate(ct, prompts, drafter=cd, k=2, max_new_tokens=5, temperature=0)
    assert [t.tolist() for t in comp.tokens] == [t.tolist() for t in eager.tokens]


def test_serving_refuses_a_static_compiled_model_up_front(tiny_pair):
    """Before any work (rows that join need a growing cache), for the target and for a draft."""
    from shared_helpers import serving_jobs

    from specdec.engine.continuous import serve

    jobs = serving_jobs(2, gap=0.0, seed=0)
    with pytest.raises(ValueError, match="continuous batching needs caches that grow"):
        serve(compiled(tiny_pair[0]), jobs, max_batch=2)
    with pytest.raises(ValueError, match="continuous batching needs caches that grow"):
        serve(tiny_pair[0], jobs, drafter=compiled(tiny_pair[1]), max_batch=2)


def test_compiled_engine_decodes_what_the_eager_engine_decodes(tiny_pair):
    """Greedy, ragged batch of two, plain and speculative (k = 2): token for token the eager run's.
    The compiled forward's logits agree with the eager ones to fp32 rounding, the wrapper passes the
    engine's keyword through, and a repeated call of the same shapes compiles nothing new.  Traced
    by dynamo on static shapes and run by aot_eager (the same graphs, guards and cache mutations
    as inductor's, without a C++ build per graph); inductor's own kernels: the next test."""
    from shared_helpers import assert_decodes_like_eager

    target, draft = tiny_pair
    ct, cd = assert_decodes_like_eager(lambda m: compiled(m, backend="aot_eager"), tiny_pair, 10)
    prompts = [torch.tensor([3, 7, 1, 9, 4]), torch.tensor([5, 2, 8])]
    comp = generate(ct, prompts, drafter=cd, k=2, max_new_tokens=10, temperature=0)
    before = graph_count()
    again = generate(ct, prompts, drafter=cd, k=2, max_new_tokens=10, temperature=0)
    assert graph_count() == before > 0, "the same shapes again must not compile again"
    assert [t.tolist() for t in again.tokens] == [t.tolist() for t in comp.tokens]
    ids, cache, calls, fwd = torch.tensor([[3, 7, 1, 9, 4, 6]]), ct.new_cache(8), [], ct._fwd
    ct._fwd = lambda **kw: (calls.append(kw["input_ids"].shape[1]), fwd(**kw))[1]  # counts the compiled calls
    with torch.inference_mode():
        a = target(input_ids=ids).logits[:, 4:]  # eager, no cache
        ct(input_ids=ids[:, :4], attention_mask=torch.ones(1, 4, dtype=torch.long), cache=cache, use_cache=True)
        b = ct(input_ids=ids[:, 4:], attention_mask=torch.ones(1, 6, dtype=torch.long), cache=cache,
               position_ids=torch.tensor([[4, 5]]), use_cache=True).logits
    assert calls == [2], "the prompt runs eager, the next step through the compiled forward"
    assert torch.allclose(a, b, atol=1e-4, rtol=1e-4) and not torch.equal(a, torch.zeros_like(a))


def test_inductors_kernels_decode_what_the_eager_engine_decodes(tiny_pair):
    """The default backend (inductor: C++ kernels on a CPU) on the target, plain greedy decoding at
    batch 1: the eager tokens, and graphs were really compiled (what `make bench` times)."""
    target, _ = tiny_pair
    ids = torch.tensor([3, 7, 1, 9, 4])
    eager = generate(target, ids, max_new_tokens=4, temperature=0, mode="eager")
    before = graph_count()
    comp = generate(compiled(target), ids, max_new_tokens=4, temperature=0)
    assert graph_count() > before and comp.stats.mode == "compiled"
    assert comp.tokens[0].tolist() == eager.tokens[0].tolist()


def test_compiled_raises_the_recompile_limit_and_refuses_bad_models():
    import torch._dynamo

    compiled(torch.nn.Linear(2, 2))
    assert torch._dynamo.config.recompile_limit >= RECOMPILE_LIMIT
    assert torch._dynamo.config.fail_on_recompile_limit_hit  # no silent eager fall-back
    with pytest.raises(ValueError, match="torch.nn.Module"):
        compiled(lambda **kw: None)
    with pytest.raises(ValueError, match="already compiled"):
        compiled(compiled(torch.nn.Linear(2, 2)))


def test_compiled_model_renames_the_kv_keyword_for_older_releases():
    """A forward that takes ``past_key_values`` gets the engine's ``cache=`` under that name (None
    here: a call without a cache runs the eager forward)."""
    class Old(torch.nn.Module):
        def forward(self, input_ids=None, past_key_values="not passed"):
            return input_ids * 2 if past_key_values is None else input_ids

    m = compiled(Old())
    assert isinstance(m, CompiledModel) and isinstance(m, KVCompat) and m.kv_name == "past_key_values"
    assert torch.equal(m(input_ids=torch.ones(2), cache=None), torch.full((2,), 2.0))
    assert compiled(KVCompat(Old())).inner.__class__ is Old  # an engine wrapper is unwrapped, not nested


def test_compiled_model_refuses_a_cache_or_mask_it_cannot_keep_static(tiny_pair):
    """Only its own SlotCache, and a 2-D mask with one column per slot (cached + fed): anything else
    would silently attend to the wrong slots."""
    from transformers import DynamicCache

    ct = compiled(tiny_pair[0])
    ids = torch.tensor([[3, 7, 1]])
    with pytest.raises(ValueError, match="SlotCache.*DynamicCache"):
        ct(input_ids=ids, attention_mask=torch.ones_like(ids), cache=DynamicCache())
    cache = ct.new_cache(8)
    with pytest.raises(ValueError, match="0 cached \\+ 3 fed"):
        ct(input_ids=ids, attention_mask=torch.ones(1, 4, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="0 cached \\+ 3 fed"):
        ct(input_ids=ids, cache=cache)
