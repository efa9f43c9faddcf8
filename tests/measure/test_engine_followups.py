"""Chapter 10's leads: a rejection with lead_p < p <= the level is run once more (fresh seed,
`factor` times the samples) and that run decides the row.  On the real embedded pair: a lead of
our exact engine is cleared; a lead of a named wrong rule (the negative control) is confirmed; a
rejection far below lead_p and a pass are left as they were (no run)."""

import math

import pytest
import torch

from specdec.family.loader import load_pair
from specdec.measure import engine_audit as audit
from specdec.measure.engine_runs import with_followups
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
