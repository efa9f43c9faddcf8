"""specdec: speculative decoding, exact by construction and measured honestly."""

from specdec.cost import break_even_alpha, expected_tokens, optimal_k, speedup, toy_speedup
from specdec.decode import generate
from specdec.exact import expected_accepted, one_step_law, spec_law, target_law
from specdec.models import load_pair
from specdec.sampling import process_logits
from specdec.stats import gof_test, sample_size, tv_interval
from specdec.verify import VerifyResult, accept_prob, residual, verify

__all__ = [
    "accept_prob", "break_even_alpha", "expected_accepted", "expected_tokens", "generate", "gof_test",
    "load_pair", "one_step_law", "optimal_k", "process_logits", "residual", "sample_size", "spec_law",
    "speedup", "target_law", "toy_speedup", "tv_interval", "verify", "VerifyResult",
]
