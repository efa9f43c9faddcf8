"""The every-position test (chapter 10): the PIT of each token of long outputs (`specdec.peers.pit`),
one row per (configuration, setting), and the power of the test against the planted faults.

Per row: the sequences and tokens tested, the share of tokens emitted by verification steps that
carried drafts (from the engine's step record where it gives one), the component tests' p-values
(overall, per position group, per in-step index where the steps align with the tokens), the
combined p-value and verdict at ``alpha``, the binned TV of u and the minimal detectable TV.

Power against planted faults (`fault_power`): a negative control's own u, resampled by whole
sequences (`pit.resampled_power`) at each sequence count the chapter's rows use: the rejection rate
of the whole test against that fault at that size.

Example: row, u, idx = pit_row(cfg, "temperature 1", res, target, prompts, alpha=0.01, seed=0)
"""

from __future__ import annotations

import math

import numpy as np

from specdec.audit.design import SETTINGS, Config, config_cfg
from specdec.audit.law import PREFILL, ran
from specdec.peers.conformance import CONSISTENT, INCONSISTENT
from specdec.peers.pit import pit_test, pit_values, resampled_power
from specdec.peers.steps import token_steps

__all__ = ["pit_row", "fault_power"]


def _steps(cfg: Config, res, L: int) -> tuple[np.ndarray | None, int, int]:
    """(in-step index (sequences, L) or None when no sample's steps align, drafted tokens, tokens
    of the samples with a step record)."""
    if cfg.spec is None or res.steps is None:
        return None, 0, 0
    idx, drafted, known = [], 0, 0
    for prompt_tokens, prompt_steps in zip(res.tokens, res.steps):
        for toks, record in zip(prompt_tokens, prompt_steps):
            i, d = token_steps(record, len(toks), PREFILL[cfg.engine], complete=cfg.engine != "vllm") \
                if record is not None else (np.zeros(len(toks), dtype=np.int64), np.zeros(len(toks), dtype=bool))
            idx.append(i)
            if record is not None:
                drafted += int(sum(a + 1 for dd, a in record if dd > 0)) if cfg.engine == "vllm" else int(d.sum())
                known += len(toks)
    idx = np.stack(idx)
    return (idx if idx.any() else None), min(drafted, known), known


def pit_row(cfg: Config, setting: str, res, target, prompts, *, alpha: float, seed: int, bins: int = 10,
            position_groups: int = 8) -> tuple[dict, np.ndarray | None, np.ndarray | None]:
    """(row, u, in-step index) of one long-output run (module docstring)."""
    base = {"engine": cfg.engine, "configuration": cfg.label, "role": cfg.role, "setting": setting,
            "patched": cfg.patched}
    what, detail = ran(cfg, res)
    if what != "tested":
        return {**base, "ran": what, "ran_detail": detail, "status": what, "verdict": "not tested"}, None, None
    rng = np.random.default_rng(seed)
    sampling = config_cfg(SETTINGS[setting])
    u = np.concatenate([pit_values(target, p, np.asarray(t), sampling, rng)["u"] for p, t in zip(prompts, res.tokens)])
    L = u.shape[1]
    idx, drafted, known = _steps(cfg, res, L)
    r = pit_test(u, idx, bins=bins, position_groups=position_groups, alpha=alpha)
    comp = dict(zip(r.tests, r.p_components))
    row = {**base, "ran": what, "ran_detail": detail, "prompts": len(prompts), "sequences": r.n_sequences, "length": L,
           "tokens": r.n_values,
           "drafted_share": drafted / known if known else math.nan, "steps_aligned": idx is not None,
           "p_overall": comp.get("overall", math.nan), "p_position": comp.get("position", math.nan),
           "p_step": comp.get("step index", math.nan), "tests": len(r.tests), "p_value": r.p_value, "alpha": alpha,
           "impossible": r.impossible, "tv": r.tv, "mdtv": r.mdtv, "status": r.status,
           "verdict": INCONSISTENT if r.status == "reject" else CONSISTENT}
    return row, u, idx


def fault_power(u, idx, sequences: dict, *, alpha: float, seed: int, resamples: int = 100, **test) -> dict:
    """name -> power of the PIT test against this fault at each named sequence count (module docstring)."""
    rng = np.random.default_rng(seed)
    return {name: resampled_power(u, idx, sequences=int(n), resamples=resamples, rng=rng, alpha=alpha, **test)
            for name, n in sequences.items()}
