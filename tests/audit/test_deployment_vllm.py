"""`make audit` against vLLM's real CPU server on 127.0.0.1 (skipped only when `.venv-vllm` is
missing): probabilistic drafts at temperature 1 with the project's expand (``VLLMServer(patched=True)``,
labelled) pass, and the patch ran in the server's processes.  The shipped build's rejection (the
expand of vllm-project/vllm#55005 hands its rejection sampler uninitialised temperatures) is shown by
`make audit-servers` at full size and, without a server, by tests/peers/test_upstream_reproducers.py;
the audit's power to reject through a server by tests/audit/test_deployment.py (our server keeping
every draft).  The plain server is audited in tests/peers/test_vllm_server.py.

Sizes and power (stated before the runs): 4 prompts x 16 samples x 16 tokens = 1,024 u values
(minimal detectable binned TV ~0.096 at power 0.8, level 1e-4).  vLLM draws from its server-level
seeded generator, but requests sent together may batch differently from run to run: each run is a
fresh draw, so the row can fail by chance, with probability at most the level, 1e-4 (at 0.01 the
two vLLM audits of `make test` would fail one run in 50)."""

import pytest

from specdec.audit.deployment import audit
from specdec.io.paths import MODELS_DIR, ROOT
from specdec.peers.conformance import CONSISTENT
from specdec.peers.interface import Sampling, Speculation
from specdec.peers.vllm import VLLM_VENV
from specdec.peers.vllm_server import PATCH_MARK, PATCH_USED, SITE, VLLMServer

PROMPTS = [[348, 891, 452, 264, 1125, 321, 77, 99], [40, 47, 54, 61, 68, 75, 82, 89], [5, 6, 7, 8, 9, 10, 11, 12],
           [600, 12, 44, 900, 3, 17, 250, 31]]
SPEC = Speculation("draft_model", k=2, draft="draft-distilled", options=(("draft_sample_method", "probabilistic"),))
pytestmark = [pytest.mark.skipif(not (VLLM_VENV / "bin" / "python").exists(),
                                 reason=f"{VLLM_VENV} is missing: build it with `make vllm-env`"),
              pytest.mark.xdist_group("vllm_server")]  # the worker that runs the other vLLM server


def test_the_marks_the_server_checks_are_the_ones_the_patch_writes():
    site = (SITE / "sitecustomize.py").read_text()
    assert PATCH_MARK in site and PATCH_USED in site


def test_vllm_probabilistic_drafts_at_temperature_1_patched_pass_and_the_patch_ran():
    with VLLMServer(SPEC, seed=0, patched=True, startup_timeout_s=300) as server:
        row = audit([("patched", server.url)], MODELS_DIR / "target", "target", PROMPTS, sequences=16, length=16,
                    sampling=Sampling(1.0), seed=0, alpha=1e-4)["rows"][0]
    assert row["kind"] == "vllm" and row["version"] == "0.32.0" and row["tokens"] == 1024 and row["drafts"] > 0
    assert row["verdict"] == CONSISTENT and row["greedy_mismatches"] == 0
    assert 0 < row["accepted"] < row["drafts"]
    log = (ROOT / server.provenance["log"]).read_text()
    assert PATCH_MARK in log and PATCH_USED in log and server.provenance["patched"] and server._proc is None
