"""specdec.engine.schedule: the dynamic-k rule reproduces the greedy baseline token for token, and a
run's summary and alpha estimate are consistent."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.engine.schedule import generate_dynamic_k

def test_summary_and_dynamic_k_match_the_greedy_baseline(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    base = generate(target, ids, max_new_tokens=20, temperature=0)
    s = base.summary()
    assert s["tokens"] == 40 and s["steps"] == 20 and 0 < s["ttft_s"] <= s["total_s"]
    assert s["lat_p50_s"] <= s["lat_p95_s"] <= s["lat_p99_s"]
    curve = {n: 1.0 + 0.05 * n for n in range(1, 10)}
    toks, d = generate_dynamic_k(target, ids, drafter=draft, max_new_tokens=20, pilot_tokens=6, pilot_k=3,
                                 c=0.1, curve=curve, k_max=8, temperature=0)
    assert [t.tolist() for t in toks] == [t.tolist() for t in base.tokens]
    assert d["tokens"] == 40 and 0 <= d["k_chosen"] <= 8 and 0 <= d["alpha_pilot"] <= 1
    spec = generate(target, ids, drafter=draft, k=3, max_new_tokens=20, temperature=0)
    alpha, steps = spec.stats.alpha_mle(3)
    assert steps > 0 and 0 <= alpha <= 1
    with pytest.raises(ValueError):
        generate_dynamic_k(target, ids, drafter=draft, max_new_tokens=5, pilot_tokens=5, pilot_k=3, c=0.1,
                           curve=curve, k_max=8, temperature=0)
