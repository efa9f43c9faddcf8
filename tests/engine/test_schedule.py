"""specdec.engine.schedule: the per-step draft length inside `generate` -- the history a schedule sees
equals what the run accepted, the engine follows (and clips) what it returns, greedy output stays
the baseline's token for token, and the adaptive rule's hand-worked choices."""

import math

import pytest
import torch

from specdec.core.cost import optimal_k
from specdec.engine.decode import generate
from specdec.engine.schedule import AdaptiveK, History, as_schedule


def test_history_counts_and_the_mle_hand_case():
    h = History()
    assert math.isnan(h.alpha_mle())
    h.update(4, 1, accepted=2, stopped=1)   # one row accepted 2 of 4, then a rejection
    h.update(4, 1, accepted=4, stopped=0)   # all 4 accepted: no failure
    h.update(0, 1, accepted=0, stopped=0)   # a step without drafts changes nothing but the step count
    assert (h.steps, h.drafted, h.accepted, h.stopped, h.last_k) == (3, 8, 6, 1, 0)
    assert h.alpha_mle() == pytest.approx(6 / 7)


def test_adaptive_rule_hand_cases():
    flat = {n: 1.0 for n in range(1, 10)}
    rule = AdaptiveK(c=0.1, curve=flat, k_max=8, k_start=3, warmup=2)
    h = History()
    assert rule(h) == 3
    h.update(3, 1, 0, 1)
    assert rule(h) == 3                      # still warming up
    h.update(3, 1, 3, 0)                     # alpha_hat = 3 / 4
    assert rule(h) == optimal_k(0.75, 0.1, 8, curve=flat)
    h.update(3, 1, 0, 1)
    h.update(3, 1, 0, 1)                     # alpha_hat = 3 / 6
    assert rule(h) == optimal_k(0.5, 0.1, 8, curve=flat)
    steep = {n: float(n) for n in range(1, 10)}  # verifying n tokens costs n: never pays
    stop = AdaptiveK(c=0.0, curve=steep, k_max=8, k_start=2, warmup=1)
    h2 = History()
    h2.update(2, 1, 2, 0)
    assert stop(h2) == 0
    h2.update(0, 1, 0, 0)
    assert stop(h2) == 0                     # once stopped, it stays stopped
    for bad in (dict(k_max=0), dict(k_start=9), dict(warmup=0)):
        with pytest.raises(ValueError):
            AdaptiveK(**{**dict(c=0.1, curve=flat, k_max=8), **bad})
    with pytest.raises(ValueError, match="lacks"):
        AdaptiveK(c=0.1, curve={1: 1.0}, k_max=4)
    with pytest.raises(ValueError, match="k must be"):
        as_schedule(0)


def test_generate_follows_a_schedule_and_reports_the_history_it_saw(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(3))
    seen = []

    def schedule(h):
        seen.append((h.steps, h.accepted, h.stopped))
        return [1, 3, 5][h.steps % 3]

    out = generate(target, ids, drafter=draft, k=schedule, max_new_tokens=24, temperature=1.0,
                   generator=torch.Generator().manual_seed(4))
    ks = [s["k"] for s in out.stats.steps]
    assert ks[:3] == [1, 3, 5] and all(k <= [1, 3, 5][i % 3] for i, k in enumerate(ks))
    rows = out.stats.accept_rows()
    for step, (n_steps, acc, stopped) in enumerate(seen):
        before = [r for r in rows if r["step"] < step and r["k"] > 0]
        assert n_steps == step and acc == sum(r["accepted"] for r in before)
        assert stopped == sum(r["accepted"] < r["k"] for r in before)
    with pytest.raises(ValueError, match="schedule must return"):
        generate(target, ids, drafter=draft, k=lambda h: -1, max_new_tokens=4)


def test_adaptive_schedule_keeps_greedy_output_and_summary_is_consistent(tiny_pair):
    target, draft = tiny_pair
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    base = generate(target, ids, max_new_tokens=20, temperature=0)
    s = base.summary()
    assert s["tokens"] == 40 and s["steps"] == 20 and 0 < s["ttft_s"] <= s["total_s"]
    assert s["lat_p50_s"] <= s["lat_p95_s"] <= s["lat_p99_s"]
    curve = {n: 1.0 + 0.05 * n for n in range(1, 10)}
    spec = generate(target, ids, drafter=draft, k=AdaptiveK(0.1, curve, k_max=8, k_start=3, warmup=2),
                    max_new_tokens=20, temperature=0)
    assert [t.tolist() for t in spec.tokens] == [t.tolist() for t in base.tokens]
    alpha, steps = spec.stats.alpha_mle(3)
    assert steps > 0 and 0 <= alpha <= 1
