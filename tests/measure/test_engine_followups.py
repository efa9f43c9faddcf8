"""Chapter 10's leads: a rejection with lead_p < p <= the level is run once more (fresh seed,
`factor` times the samples) and that run decides the row.  On the real embedded pair: a lead of
our exact engine is cleared; a lead of a named wrong rule (the negative control) is confirmed; a
rejection far below lead_p and a pass are left as they were (no run)."""

import math

import pytest
import torch

from specdec.family.loader import load_pair
from specdec.chapters.ch10 import audit
from specdec.chapters.ch10.runs import with_followups
from specdec.peers.laws import enumerate_prompt
from specdec.peers.ours import OursEngine

DRAFT = "draft-distilled"
SETTING = "temperature 1"


@pytest.fixture(scope="module")
def setup():
    target, draft, tok = load_pair("embedded", DRAFT, dtype=torch.float32)
    prompts = [tok.encode("The dog ran to the")]
    ctx = {SETTING: [enumerate_prompt(target, draft, p, audit.config_cfg(audit.SETTINGS[SETTING])) for p in prompts]}
    return target, draft, prompts, ctx


def test_leads_are_decided_by_their_follow_up(setup):
    target, draft, prompts, ctx = setup
    configs = audit.plan(2, DRAFT)
    token, wrong, plain = configs[1], configs[3], configs[0]
    row = lambda c, p, status: {"engine": c.engine, "configuration": c.label, "role": c.role,  # noqa: E731
                                "setting": SETTING, "status": status, "p_value": p, "n": 100, "impossible": 0}
    rows = [row(token, 0.003, "reject"), row(wrong, 0.002, "reject"), row(wrong, 1e-9, "reject"),
            row(plain, 0.5, "pass")]
    out = with_followups(rows, configs, {"ours": OursEngine()}, prompts, ctx, lead_p=1e-4, factor=3, n=100,
                         n_hf=100, seed=11, target=target, draft=draft, alpha=0.01, eps=0.1, n_bins=8)
    assert [r["status"] for r in out] == ["pass", "reject", "reject", "pass"]
    assert out[0]["first_p"] == 0.003 and out[0]["n"] == 300 and "follow-up" in out[0]["verdict"]
    assert out[1]["first_p"] == 0.002 and out[1]["p_value"] < 0.01  # the wrong rule stays rejected
    assert math.isnan(out[2]["first_p"]) and out[2]["p_value"] == 1e-9 and math.isnan(out[3]["first_p"])


def test_law_samples_drawn_in_processes_of_their_own_are_the_same_tokens(setup):
    """collect(workers=2): Hugging Face's jobs run in two spawned processes that load the models
    again; every call is seeded by its job, so the tokens equal those drawn in this process."""
    from specdec.chapters.ch10.runs import collect
    from specdec.peers.hf import HFEngine

    target, draft, prompts, _ = setup
    ours = OursEngine()
    engines = {"ours": ours, "hf": HFEngine(_models=ours._models)}
    configs = [c for c in audit.plan(2, DRAFT) if c.engine == "hf" and c.role == "speculative"][:2]
    kw = dict(n=6, n_hf=6, greedy_len=4, seed=3, target=target, draft=draft, settings=(SETTING,))
    here, apart = collect(configs, engines, prompts, **kw), collect(configs, engines, prompts, workers=2, **kw)
    assert list(here) == list(apart) and len(here) == 2
    assert all(here[k].tokens == apart[k].tokens and here[k].error is None for k in here)
    with pytest.raises(ValueError, match="workers"):
        collect(configs, engines, prompts, workers=0, **kw)
