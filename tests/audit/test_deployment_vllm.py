"""`make audit` against vLLM's real CPU servers on 127.0.0.1 (skipped only when `.venv-vllm` is
missing): the shipped build with probabilistic drafts at temperature 1 is rejected (the expand of
vllm-project/vllm#55005 hands its rejection sampler uninitialised temperatures), the same
configuration with the project's expand (``VLLMServer(patched=True)``, labelled) passes.  The plain
server is audited in tests/peers/test_vllm_server.py (its module's server).

Sizes and power (stated before the runs): 4 prompts x 16 samples x 16 tokens = 1,024 u values
(minimal detectable binned TV ~0.076 at power 0.8, level 0.01); the shipped server's TV measured
while building the test was 0.27 (p < 1e-300 at 1,536 values), so it is rejected with a wide margin.
vLLM draws from its server-level seeded generator, but requests sent together may batch differently
from run to run: the patched row can fail by chance, with probability at most 0.01."""

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest

from specdec.audit.deployment import audit
from specdec.io.paths import MODELS_DIR, ROOT
from specdec.peers.conformance import CONSISTENT, INCONSISTENT
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


def test_vllm_probabilistic_drafts_at_temperature_1_shipped_rejected_patched_passes():
    servers = [VLLMServer(SPEC, seed=0, patched=patched, startup_timeout_s=300) for patched in (False, True)]
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:  # the two start-ups overlap
        for server in servers:
            stack.callback(server.stop)
        list(pool.map(VLLMServer.__enter__, servers))
        shipped, patched = (audit([(name, s.url)], MODELS_DIR / "target", "target", PROMPTS, sequences=16, length=16,
                                  sampling=Sampling(1.0), seed=0)["rows"][0]
                            for name, s in zip(("shipped", "patched"), servers))
    for row, server, verdict in ((shipped, servers[0], INCONSISTENT), (patched, servers[1], CONSISTENT)):
        assert row["kind"] == "vllm" and row["version"] == "0.32.0" and row["tokens"] == 1024 and row["drafts"] > 0
        assert row["verdict"] == verdict and row["greedy_mismatches"] == 0
        log = (ROOT / server.provenance["log"]).read_text()
        assert (PATCH_MARK in log) == (PATCH_USED in log) == server.provenance["patched"] == server.patched
        assert server._proc is None
    assert 0 < patched["accepted"] < patched["drafts"]
    assert shipped["p_value"] < 1e-6 and shipped["tv"] > shipped["mdtv"]  # its TV moves with the memory it reads (0.21-0.28 seen)
