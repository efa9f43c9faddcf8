"""The real `verify` reproduces the exact target law in sampled frequencies; every named wrong
variant is caught, exactly (its law differs) and statistically (its frequencies fail the test).

Setup: V = 4 (token 3 is an absorbing stop token), trigram target, bigram draft, k = 2 drafts,
the law of the first n = 3 tokens, sampling at temperature 1.2 with top-k 3 and top-p 0.9.

Power calculation: the chi-square test at level ALPHA = 1e-3 must detect TV >= EPS = 0.05 with
power >= 0.999 (the smallest variant TV, raw_q's, is about 0.09); `sample_size` turns that into N.  Every variant's exact TV from the target law, on
the cells the test actually uses (after pooling), is checked to be >= EPS, so the guarantee covers
it; with the seeds fixed the outcome is deterministic.
"""

import numpy as np
import pytest
import torch

from specdec.core.exact import spec_law, target_law
from specdec.core.stats import counts_of, gof_test, pool_cells, sample_size
from specdec.core.sampling import SamplingConfig
from specdec.core.toy import random_table_model, sample_speculative
from specdec.core.rules.variants import VARIANTS, variant_law, variant_sample

V, STOP, N_TOK, K = 4, 3, 3, 2
CFG = SamplingConfig(1.2, top_k=3, top_p=0.9)
EPS, ALPHA, POWER = 0.05, 1e-3, 0.999


def _models():
    g = torch.Generator().manual_seed(1)
    return random_table_model(V, 2, g, stop=STOP, scale=1.0), random_table_model(V, 1, g, stop=STOP, scale=1.0)


TARGET, DRAFT = _models()
REF = target_law(TARGET, N_TOK, CFG).reshape(-1).numpy()
CELLS = int((REF > 0).sum())
N = sample_size(EPS, CELLS, ALPHA, POWER)
LABELS = pool_cells(REF[REF > 0] / REF[REF > 0].sum(), N)


def _pooled_tv(law):
    """TV between `law` and the target law on the cells the test uses (pooled; zero cells apart)."""
    pos = REF > 0
    a = np.bincount(LABELS, weights=law[pos])
    b = np.bincount(LABELS, weights=REF[pos])
    return 0.5 * (np.abs(a - b).sum() + law[~pos].sum())


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_law_differs_from_target(name):
    law = variant_law(name, TARGET, DRAFT, N_TOK, K, CFG).reshape(-1).numpy()
    assert abs(law.sum() - 1) < 1e-12
    tv = 0.5 * np.abs(law - REF).sum()
    assert tv >= EPS, f"{name}: exact TV {tv:.4f} from the target law is below {EPS}"
    assert _pooled_tv(law) >= EPS  # so the power calculation covers it


@pytest.mark.parametrize("method", ["token", "block"])
def test_real_verify_frequencies_match_exact_law(method):
    law = spec_law(TARGET, DRAFT, N_TOK, K, method, CFG).reshape(-1).numpy()
    assert np.abs(law - REF).max() <= 1e-12
    g = torch.Generator().manual_seed(101 if method == "token" else 202)
    samples = sample_speculative(TARGET, DRAFT, N_TOK, K, N, g, method, CFG)
    r = gof_test(counts_of(samples.numpy(), V, N_TOK), REF)
    assert r.impossible == 0
    assert r.p_value > ALPHA, r
    assert r.tv_low == 0.0 and r.tv_high < 0.15, r


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_variant_fails_the_frequency_test(name):
    g = torch.Generator().manual_seed(303)
    samples = variant_sample(name, TARGET, DRAFT, N_TOK, K, N, g, CFG)
    r = gof_test(counts_of(samples.numpy(), V, N_TOK), REF)
    assert r.p_value < ALPHA, f"{name} passed: {r}"
    # and its own exact law fits its samples: the variant is what we think it is
    own = variant_law(name, TARGET, DRAFT, N_TOK, K, CFG).reshape(-1).numpy()
    assert gof_test(counts_of(samples.numpy(), V, N_TOK), own).p_value > ALPHA
