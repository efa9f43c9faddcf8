"""The every-position test (`specdec.peers.pit`) against independent references: on a random-weight
tiny GPT-2, samples drawn from the target's own processed law pass, samples drawn at another
temperature fail, a token the target cannot emit fails; the G statistic, df and p-value of a
hand-built u histogram equal scipy's; the minimal detectable TV is where the worst-case power
crosses its target; the resampled power against a strong fault is 1 and against the target's own
law is near the level; the step-index test runs only where indices are known; bad input is refused.

Size: 4 000 u values per run, 10 bins: the overall test detects binned TV 0.04 with power >= 0.8
(stated by `min_detectable_tv`, asserted below); the temperature-1.6 fault moves the u histogram by
far more."""

import math

import numpy as np
import pytest
import torch
from scipy import stats as st
from transformers import GPT2Config, GPT2LMHeadModel

from specdec.core.sampling import SamplingConfig
from specdec.core.stats import power as worst_case_power
from specdec.peers.pit import min_detectable_tv, pit_test, pit_values, resampled_power

PROMPT = [3, 1, 4, 1, 5]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=40, n_positions=64, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(6.0)  # spread but not uniform next-token laws (entropy about 2.8 nats)
    return model


@torch.no_grad()
def _sample(model, n: int, L: int, cfg: SamplingConfig, seed: int) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor([PROMPT] * n)
    for _ in range(L):
        p = cfg(model(input_ids=ids).logits[:, -1].double())
        ids = torch.cat([ids, torch.multinomial(p, 1, generator=g)], 1)
    return ids[:, len(PROMPT):].numpy()


@pytest.mark.parametrize("cfg", [SamplingConfig(1.0), SamplingConfig(0.7, top_p=0.9)], ids=["T1", "T0.7p0.9"])
def test_the_target_law_passes_and_another_temperature_fails(tiny, cfg):
    good = _sample(tiny, 400, 10, cfg, seed=1)
    u = pit_values(tiny, PROMPT, good, cfg, np.random.default_rng(0))
    r = pit_test(u["u"], alpha=0.01)
    assert r.impossible == 0 and r.n_values == 4000 and r.tests == ("overall", "position")
    assert r.status == "pass" and r.mdtv < 0.04
    hot = _sample(tiny, 400, 10, SamplingConfig(1.6 * cfg.temperature, top_p=cfg.top_p), seed=2)
    bad = pit_test(pit_values(tiny, PROMPT, hot, cfg, np.random.default_rng(0))["u"], alpha=0.01)
    assert bad.status == "reject"


def test_u_is_exactly_the_randomized_transform(tiny):
    cfg = SamplingConfig(1.0)
    s = _sample(tiny, 3, 2, cfg, seed=4)
    rng = np.random.default_rng(7)
    u = pit_values(tiny, PROMPT, s, cfg, np.random.default_rng(7))["u"]
    v = rng.random(s.shape)
    with torch.no_grad():
        for i in range(3):
            for t in range(2):
                p = cfg(tiny(input_ids=torch.tensor([PROMPT + s[i, :t].tolist()])).logits[0, -1].double()).numpy()
                x = s[i, t]
                before = sum(p[y] for y in range(len(p)) if p[y] > p[x] or (p[y] == p[x] and y < x))
                assert u[i, t] == pytest.approx(before + v[i, t] * p[x], abs=1e-12)


def test_an_impossible_token_rejects(tiny):
    cfg = SamplingConfig(1.0, top_k=2)
    s = _sample(tiny, 50, 4, cfg, seed=3)
    with torch.no_grad():
        p = cfg(tiny(input_ids=torch.tensor([PROMPT])).logits[0, -1].double())
    s[0, 0] = int(torch.argmin(p))  # outside the top 2: probability 0 under the target
    out = pit_values(tiny, PROMPT, s, cfg, np.random.default_rng(0))
    assert out["impossible"].sum() >= 1 and math.isnan(out["u"][0, 0])
    r = pit_test(out["u"], alpha=0.01)
    assert r.impossible >= 1 and r.p_value == 0.0 and r.status == "reject"


def test_g_df_and_p_equal_scipy_on_a_hand_built_histogram():
    rng = np.random.default_rng(3)
    u = rng.random((50, 8)) ** 1.3  # a shifted law
    r = pit_test(u, bins=5, position_groups=2, alpha=0.05)
    counts = np.bincount(np.minimum((u.ravel() * 5).astype(int), 4), minlength=5)
    g = st.power_divergence(counts, np.full(5, counts.sum() / 5), lambda_="log-likelihood")[0]
    assert r.p_components[0] == pytest.approx(st.chi2.sf(g, 4), rel=1e-9) and r.df_components[0] == 4
    halves = [np.bincount(np.minimum((u[:, cols].ravel() * 5).astype(int), 4), minlength=5)
              for cols in (slice(0, 4), slice(4, 8))]
    g2 = sum(st.power_divergence(h, np.full(5, h.sum() / 5), lambda_="log-likelihood")[0] for h in halves)
    assert r.p_components[1] == pytest.approx(st.chi2.sf(g2, 8), rel=1e-9) and r.df_components[1] == 8
    assert r.p_value == pytest.approx(min(1.0, 2 * min(r.p_components)))  # Bonferroni over the two tests
    idx = np.tile(np.array([1, 2, 1, 2, 3, 1, 2, 0]), (50, 1))
    with_idx = pit_test(u, idx, bins=5, position_groups=2, alpha=0.05)
    assert with_idx.tests == ("overall", "position", "step index") and with_idx.df_components[2] == 3 * 4
    assert with_idx.p_value == pytest.approx(min(1.0, 3 * min(with_idx.p_components)))


def test_minimal_detectable_tv_is_where_the_power_crosses():
    eps = min_detectable_tv(4000, 10, 0.01)
    assert worst_case_power(4000, eps, 10, 0.01) >= 0.8 > worst_case_power(4000, eps - 2e-4, 10, 0.01)
    assert min_detectable_tv(2, 10, 0.01) == math.inf


def test_resampled_power_against_a_fault_and_against_the_law_itself():
    rng = np.random.default_rng(5)
    shifted, uniform = rng.random((200, 16)) ** 1.5, rng.random((200, 16))
    assert resampled_power(shifted, sequences=100, resamples=20, rng=rng, alpha=0.01) == 1.0
    assert resampled_power(uniform, sequences=100, resamples=40, rng=rng, alpha=0.01) <= 0.1  # near the level
    with pytest.raises(ValueError, match="sequences"):
        resampled_power(uniform, sequences=0, resamples=5, rng=rng)
    with pytest.raises(ValueError, match="need at least"):
        resampled_power(uniform, sequences=101, resamples=5, rng=rng)


def test_bad_input_is_refused(tiny):
    u = np.random.default_rng(0).random((20, 8))
    for bad, match in [(np.full((20, 8), np.inf), "u values"), (u * 2, "u values"), (u[0], "u must be"),
                       (np.empty((0, 3)), "u must be")]:
        with pytest.raises(ValueError, match=match):
            pit_test(bad)
    with pytest.raises(ValueError, match="bins"):
        pit_test(u, bins=1)
    with pytest.raises(ValueError, match="bins"):
        pit_test(u, bins=2.5)
    with pytest.raises(ValueError, match="too few"):
        pit_test(u[:2, :2])
    with pytest.raises(ValueError, match="step_index"):
        pit_test(u, np.full((20, 8), -1))
    cfg = SamplingConfig(1.0)
    with pytest.raises(ValueError, match="outside"):
        pit_values(tiny, PROMPT, np.array([[0, 40]]), cfg, np.random.default_rng(0))
    with pytest.raises(ValueError, match="integer"):
        pit_values(tiny, PROMPT, np.array([[0.5, 1.0]]), cfg, np.random.default_rng(0))
    with pytest.raises(ValueError, match="prompt"):
        pit_values(tiny, [True, 2], np.array([[0, 1]]), cfg, np.random.default_rng(0))
    with pytest.raises(ValueError, match="greedy"):
        pit_values(tiny, PROMPT, np.array([[0, 1]]), SamplingConfig(0.0), np.random.default_rng(0))
