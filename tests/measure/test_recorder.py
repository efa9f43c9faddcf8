"""specdec.measure.recorder on the real engine: the recorded beta and a predict the accepted lengths."""

import numpy as np
import torch

from specdec.core.acceptance import predicted_length_conditional
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import mean_interval
from specdec.engine.decode import generate
from specdec.measure.recorder import AcceptanceRecorder


def test_recorder_on_the_engine_predicts_its_accepted_lengths():
    """End to end: the AcceptanceRecorder's per-step beta and a, taken while the real engine decodes
    a tiny GPT-2 pair, predict the engine's accepted counts (mean(L - L_cond) = 0 up to noise),
    while the stop-ignoring predictor 1 + sum beta (negative control) is rejected.

    Power: with S step-rows the test's half-width is 4 sd / sqrt(S); the control's bias b is
    detected with probability >= 0.99 when b >= (4 + 2.33) sd / sqrt(S).  The test asserts that
    condition with the sd and b of this run (a fixed seed), so a too-small S fails loudly."""
    from transformers import GPT2Config, GPT2LMHeadModel


    def tiny(seed, layers):
        with torch.random.fork_rng():
            torch.manual_seed(seed)  # model construction only, restored afterwards
            return GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=32, n_head=2, vocab_size=16, n_positions=64,
                                              bos_token_id=0, eos_token_id=0, initializer_range=0.3)).eval()

    target, draft = tiny(1, 2), tiny(2, 1)
    sampling = SamplingConfig(1.0)
    rec = AcceptanceRecorder(target, draft, sampling)
    ids = torch.randint(0, 16, (64, 4), generator=torch.Generator().manual_seed(5))
    res = generate(rec.target, ids, drafter=rec.drafter, k=3, max_new_tokens=30, temperature=1.0,
                   generator=torch.Generator().manual_seed(6))
    steps = [s for s in rec.steps(res.stats) if s["k"] == 3]
    n = np.concatenate([s["n"] for s in steps]) + 1.0
    beta = np.concatenate([s["beta"] for s in steps])
    a = np.concatenate([s["a"] for s in steps])
    diff = n - predicted_length_conditional(a, beta)
    S, sd = diff.size, diff.std(ddof=1)
    m, lo, hi = mean_interval(diff, level=1 - 2 * 3.2e-5)  # +-4 se
    assert lo < 0 < hi, (m, lo, hi, S)
    wrong = n - (1.0 + beta.sum(1))
    bias = -wrong.mean()
    assert bias >= 6.33 * wrong.std(ddof=1) / np.sqrt(S), (bias, S)  # the power condition of the docstring
    m2, lo2, hi2 = mean_interval(wrong, level=1 - 2 * 3.2e-5)
    assert hi2 < 0, (m2, lo2, hi2)
    # the recorded beta of the first step is sum min(p, q) of the two models' processed distributions
    s0 = rec.steps(res.stats)[0]
    assert s0["beta"].shape == (64, 3) and np.all((s0["beta"] >= 0) & (s0["beta"] <= 1 + 1e-9))
    assert sd > 0
