"""specdec: speculative decoding, exact by construction and measured honestly.

Layers (checked by import-linter, see pyproject.toml), top to bottom: `specdec.chapters` (one
package per notebook: its computations and the values it glues) and `specdec.cli` (make bench, make
gpu, make serve-bench, make readme); `specdec.report` (the chapter frame, formatting, figures);
`specdec.measure` (the measurement protocol); `specdec.peers` (other engines: vLLM, Hugging Face,
OpenAI-compatible servers); `specdec.engine` (decoding; optional forwards in `engine.modes`) and
`specdec.family` (the embedded models and their one loader); `specdec.core` (the equations;
chapter 08's alternatives and the named wrong variants in `core.rules`); `specdec.io` (paths,
tables with provenance).

The trusted path: the modules a reader must read to trust the headline results.
- exactness: `specdec.core.sampling` (the sampling rules and the one inverse-CDF sampler),
  `specdec.core.verify` (token and block verification), `specdec.core.exact` (exact laws by
  enumeration), `specdec.core.stats` (tests with stated power, intervals);
- the engine: `specdec.engine.decode` (`generate`), `specdec.engine.step` (one decoding step,
  shared with serving), `specdec.engine.drafters`,
  `specdec.engine.inputs` (argument checks), `specdec.engine.kv`, `specdec.engine.cache`,
  `specdec.engine.stats`, `specdec.engine.modes` (which forward a call runs) and
  `specdec.engine.modes.lean` (GPT-2's forward written out: what a plain call runs) with its cache,
  `specdec.engine.modes.grow`, and its arithmetic, `specdec.engine.modes.kernel` (with `affine.c`);
- a measured speedup: `specdec.measure.harness`, `specdec.measure.protocol` (paired intervals and
  the words they allow), `specdec.measure.cost_curve`, `specdec.core.cost`.
Everything else is optional (the compiled forward, tested to give the same tokens), a peer's adapter, a
chapter's tables or a figure.  README.md gives their sizes (`specdec.cli.readme.TRUSTED`).
"""

from specdec.core.cost import break_even_alpha, expected_tokens, optimal_k, speedup, toy_speedup
from specdec.core.exact import expected_accepted, one_step_law, spec_law, target_law
from specdec.core.sampling import SamplingConfig, process_logits
from specdec.core.stats import gof_test, sample_size, tv_interval
from specdec.core.verify import VerifyResult, accept_prob, residual, verify
from specdec.engine.decode import generate
from specdec.family.loader import load_pair

__all__ = [
    "accept_prob", "break_even_alpha", "expected_accepted", "expected_tokens", "generate", "gof_test",
    "load_pair", "one_step_law", "optimal_k", "process_logits", "residual", "sample_size", "SamplingConfig",
    "spec_law", "speedup", "target_law", "toy_speedup", "tv_interval", "verify", "VerifyResult",
]
