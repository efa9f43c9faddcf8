"""specdec.costcurve and specdec.timing: hand-worked cost cases, seeded random models that leave
the global RNG alone, the KV-keyword shim, and the dynamic-k rule and HF assisted generation
against the engine's own greedy output (greedy speculative decoding is token-identical to it)."""

import pytest
import torch

from specdec.cost import toy_speedup
from specdec.costcurve import (cost_curve, draft_cost, extended_speedup, param_count, random_model,
                               real_size_config, spread)
from specdec.decode import generate
from specdec.instrument import KVCompat, kv_keyword
from specdec.timing import choose_k, generate_dynamic_k, hf_assisted, run_alpha, summarize

TINY_T = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=128)
TINY_D = dict(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=128)


@pytest.fixture(scope="module")
def pair():
    g = torch.Generator().manual_seed(0)
    return (random_model(real_size_config("gpt2-small", **TINY_T), g),
            random_model(real_size_config("draft-3m", **TINY_D), g))


def test_spread_and_cost_hand_cases():
    assert spread([1, 2, 3, 4]) == {"median": 2.5, "q1": 1.75, "q3": 3.25, "min": 1.0, "max": 4.0, "n": 4}
    assert draft_cost(0.001, 0.005) == pytest.approx(0.2)
    # unit verification cost: the seed's worked example 3.3616 / 1.4
    assert extended_speedup(0.8, 4, {1: 2.0, 5: 2.0}, 0.1) == pytest.approx(3.3616 / 1.4)
    assert extended_speedup(0.8, 4, {1: 1.0, 5: 1.5}, 0.1) == pytest.approx(3.3616 / 1.9)
    assert extended_speedup(0.3, 2, {1: 1.0, 3: 1.0}, 0.05) == pytest.approx(toy_speedup(0.3, 2, 0.05))
    with pytest.raises(ValueError, match="T\\(5\\)"):
        extended_speedup(0.8, 4, {1: 1.0}, 0.1)
    with pytest.raises(ValueError):
        draft_cost(0.001, 0.0)
    with pytest.raises(ValueError):
        spread([])


def test_real_size_shapes_have_the_published_parameter_counts():
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        small = AutoModelForCausalLM.from_config(real_size_config("gpt2-small"))
        medium = AutoModelForCausalLM.from_config(real_size_config("gpt2-medium"))
        draft = AutoModelForCausalLM.from_config(real_size_config("draft-3m"))
    assert param_count(small) == 124_439_808  # Hugging Face's count for `gpt2`
    assert param_count(medium) == 354_823_168  # ... and for `gpt2-medium`
    assert 2e6 < param_count(draft) < 5e6
    with pytest.raises(ValueError, match="unknown architecture"):
        real_size_config("gpt5")


def test_random_model_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    cfg = real_size_config("draft-3m", **TINY_D)
    a = random_model(cfg, torch.Generator().manual_seed(7))
    b = random_model(cfg, torch.Generator().manual_seed(7))
    c = random_model(cfg, torch.Generator().manual_seed(8))
    assert torch.equal(torch.get_rng_state(), state)
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    assert all(torch.equal(pa[n], pb[n]) for n in pa)
    assert not torch.equal(pa["inner.transformer.wte.weight"], pc["inner.transformer.wte.weight"])
    with pytest.raises(ValueError, match="Generator"):
        random_model(cfg, 7)


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


def test_cost_curve_rows_and_checks(pair):
    target, _ = pair
    rows = cost_curve(target, [1, 3], context=8, repeats=2, warmup=1, generator=torch.Generator().manual_seed(1))
    assert [r["n"] for r in rows] == [1, 3] and rows[0]["ratio"] == 1.0
    assert all(r["repeats"] == 2 and 0 < r["min_s"] <= r["median_s"] <= r["max_s"] for r in rows)
    with pytest.raises(ValueError, match="exceeds"):
        cost_curve(target, [9], context=125, generator=torch.Generator())
    with pytest.raises(ValueError):
        cost_curve(target, [0], context=8, generator=torch.Generator())


def test_choose_k_hand_cases():
    flat = {n: 1.0 for n in range(1, 10)}
    assert choose_k(0.0, 0.1, flat, 8) == 0            # nothing accepted: do not draft
    assert choose_k(1.0, 0.01, flat, 8) == 8           # everything accepted, verification free
    assert choose_k(0.8, 0.1, flat, 8) == 6            # cost.optimal_k(0.8, 0.1) of the seed's model
    steep = {n: float(n) for n in range(1, 10)}        # compute bound: verifying n tokens costs n
    assert choose_k(0.9, 0.0, steep, 8) == 0
    with pytest.raises(ValueError, match="lacks"):
        choose_k(0.5, 0.1, {1: 1.0}, 2)


def test_summary_and_dynamic_k_match_the_greedy_baseline(pair):
    target, draft = pair
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    base = generate(target, ids, max_new_tokens=20, temperature=0)
    s = summarize(base)
    assert s["tokens"] == 40 and s["steps"] == 20 and 0 < s["ttft_s"] <= s["total_s"]
    assert s["lat_p50_s"] <= s["lat_p95_s"] <= s["lat_p99_s"]
    curve = {n: 1.0 + 0.05 * n for n in range(1, 10)}
    toks, d = generate_dynamic_k(target, ids, drafter=draft, max_new_tokens=20, pilot_tokens=6, pilot_k=3,
                                 c=0.1, curve=curve, k_max=8, temperature=0)
    assert [t.tolist() for t in toks] == [t.tolist() for t in base.tokens]
    assert d["tokens"] == 40 and 0 <= d["k_chosen"] <= 8 and 0 <= d["alpha_pilot"] <= 1
    spec = generate(target, ids, drafter=draft, k=3, max_new_tokens=20, temperature=0)
    alpha, steps = run_alpha(spec.stats, 3)
    assert steps > 0 and 0 <= alpha <= 1
    with pytest.raises(ValueError):
        generate_dynamic_k(target, ids, drafter=draft, max_new_tokens=5, pilot_tokens=5, pilot_k=3, c=0.1,
                           curve=curve, k_max=8, temperature=0)


def test_hf_assisted_greedy_matches_the_engine(pair):
    target, draft = pair
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(4))
    ours = generate(target, ids, max_new_tokens=16, temperature=0).tokens[0]
    state = torch.get_rng_state()
    for k in (0, 3):
        theirs, row = hf_assisted(target, draft, ids, k=k, max_new_tokens=16, temperature=0, seed=0)
        assert theirs.tolist() == ours.tolist() and row["tokens"] == 16
    hf_assisted(target, draft, ids, k=3, max_new_tokens=8, temperature=1.0, seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    with pytest.raises(ValueError, match="batch size 1"):
        hf_assisted(target, draft, ids.repeat(2, 1), k=3, max_new_tokens=4, temperature=0, seed=0)


def test_prompt_checksum_is_stable_and_shape_aware():
    from specdec.family import prompt_checksum

    a = torch.arange(6).reshape(2, 3)
    assert prompt_checksum(a) == prompt_checksum(a.clone().to(torch.int32))
    assert prompt_checksum(a) != prompt_checksum(a.reshape(3, 2))  # same bytes, other prompts
    assert prompt_checksum(a) != prompt_checksum(a + 1)
    assert len(prompt_checksum(a)) == 16
