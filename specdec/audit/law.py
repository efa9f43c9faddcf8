"""The law of the first two tokens (chapter 10): one row per (configuration, setting) with what ran,
how many samples went through a verification that carried drafts, the two-stage test, its power
and, for a rejection, the diagnosis; and acceptance at the first verification step against its
exact expectation.

Design, stated before any result.  Each row is tested in two stages against the exact joint law of
(x1, x2) (`specdec.peers.laws`, `specdec.peers.conformance.law_test`, two orders at half the
stage's level each): stage 1 on ``n1`` samples per prompt at level ``alpha1``; a row it does not
reject is decided by stage 2 on ``n2`` fresh samples per prompt at level ``alpha2``.  The row's
level is alpha1 + alpha2 (Bonferroni over the stages); its stated power is stage 2's, at binned TV
``eps`` at every prompt; a rejection's p-value is that of the stage that rejected.

Verified samples.  A sample counts as verified when its x2 was emitted by a verification step that
carried at least one draft: read per sample from the engine's own step record
(`Continuations.steps`: vLLM's per-request metrics, Hugging Face's candidate lists, our stats).

Diagnosis of a rejection (`specdec.peers.diagnosis.diagnose`): the named wrong rules' exact laws
ranked by likelihood, those the engine's own acceptance counter excludes set aside (for a lookup
drafter only "p at T'": the others are built on the draft model's q); the best one *fits* when the
same test at the same level does not reject it.

Example: law_row(cfg, "temperature 1", res, exact, alpha=0.001, eps=0.03, n_bins=8, x1_bins=2)["status"]
"""

from __future__ import annotations

import math

import numpy as np

from specdec.audit.design import SETTINGS, Config, config_cfg
from specdec.core.sampling import SamplingConfig
from specdec.peers.acceptance import first_step_expectation
from specdec.peers.conformance import law_test, verdict
from specdec.peers.diagnosis import diagnose
from specdec.peers.laws import CANDIDATES, candidate_acceptance, candidate_joint, joint_cells, ratio_score, target_joint
from specdec.peers.steps import token_steps
from specdec.peers.vllm import ignored_options

__all__ = ["Exact", "eos_mass", "law_row", "verified_x2", "ran", "acceptance_row", "vllm_rule", "rule_of", "first_step_counts"]

PREFILL = {"vllm": True, "ours": False, "hf": False, "llama": True}  # does the engine sample x1 at prefill?
LLAMA_DRAFT_TOP_K = 10  # llama.cpp's probabilistic draft samples its top 10 at the request's temperature


class Exact:
    """The exact laws of one chapter run, computed once: per setting the target's joints and ratio
    scores, per (setting, verified positions) every candidate's joints; ``t_other`` is the T' of
    the "at T'" candidates (0.5 at T = 1, else 1)."""

    def __init__(self, contexts: dict):
        self.contexts, self._cache, self.bins = contexts, {}, {}

    def t_other(self, setting: str) -> float:
        return 1.0 if SETTINGS[setting].temperature != 1.0 else 0.5

    def target(self, setting: str):
        key = ("target", setting)
        if key not in self._cache:
            sc = config_cfg(SETTINGS[setting])
            self._cache[key] = ([target_joint(c, sc) for c in self.contexts[setting]],
                                [ratio_score(c, sc) for c in self.contexts[setting]])
        return self._cache[key]

    def candidates(self, setting: str, verified: tuple) -> dict:
        key = ("candidates", setting, verified)
        if key not in self._cache:
            sc, t = config_cfg(SETTINGS[setting]), self.t_other(setting)
            self._cache[key] = {c: [candidate_joint(x, sc, c, verified=verified, t_other=t)
                                    for x in self.contexts[setting]] for c in CANDIDATES}
        return self._cache[key]


def ran(cfg: Config, res) -> tuple[str, str]:
    """("tested" | "ignored by this build" | "not run", detail): what the engine executed for the
    row (vLLM: the options `what_ran` shows it ignored; a row that raised: its error)."""
    if res.error:
        return "not run", res.error
    if cfg.engine == "vllm" and cfg.spec is not None:
        ignored = ignored_options(res.provenance.get("speculative_config"), res.provenance.get("what_ran"))
        if ignored:
            return "ignored by this build", "; ".join(ignored)
    return "tested", ""


def verified_x2(cfg: Config, res) -> tuple[int, int]:
    """(samples whose x2 came from a step that carried drafts, samples); (0, n) for plain decoding;
    (-1, n) where the engine reported no step record."""
    n = sum(len(p) for p in res.tokens)
    if cfg.spec is None:
        return 0, n
    if res.steps is None:
        return -1, n
    count = 0
    for prompt_tokens, prompt_steps in zip(res.tokens, res.steps):
        for toks, record in zip(prompt_tokens, prompt_steps):
            if record is None:
                return -1, n
            _, drafted = token_steps(record, len(toks), PREFILL[cfg.engine], complete=cfg.engine != "vllm")
            count += bool(drafted[1])
    return count, n


def _counts(ctxs, tokens) -> list[np.ndarray]:
    return [np.bincount(joint_cells(c, np.asarray(t)[:, :2]), minlength=c.support.numel() * c.V + 1)
            for c, t in zip(ctxs, tokens)]


def first_step_counts(res) -> tuple[int, int]:
    """(drafts kept at position 1, steps that drafted) over the first verification step of every
    sample, from the per-sample step records (vLLM's per-request metrics: process-wide counters
    mix the LLMs a process holds)."""
    if res.steps is None:
        raise ValueError("no per-sample step records: the engine did not report its steps")
    kept = drafts = 0
    for prompt_steps in res.steps:
        for record in prompt_steps:
            if record and record[0][0] > 0:
                drafts += 1
                kept += record[0][1] >= 1
    return kept, drafts


def vllm_rule(res, setting: str) -> tuple[str | None, SamplingConfig | None]:
    """(rule, q's processing) of a vLLM row's acceptance expectation, from what ran: argmax drafts ->
    "argmax"; probabilistic drafts -> "sampled" with q at the temperature only (vLLM's proposer);
    a lookup drafter or plain decoding -> (None, None)."""
    drafting = (res.provenance.get("what_ran") or {}).get("draft_sampling")
    if drafting == "argmax":
        return "argmax", None
    if drafting == "probabilistic":
        return "sampled", SamplingConfig(SETTINGS[setting].temperature)
    return None, None


def eos_mass(joints, contexts, token: int = 0) -> float:
    """The largest, over the prompts, target probability that x1 or x2 is ``token`` (the family's
    end of text, which llama.cpp bans under ``ignore_eos``): the most by which that ban moves the
    law tested (the cut cell counted whole)."""
    out = 0.0
    for joint, ctx in zip(joints, contexts):
        S, V = int(ctx.support.numel()), ctx.V
        cells = np.asarray(joint[:-1]).reshape(S, V)
        hit = cells[:, token].sum() + cells[(ctx.support == token).numpy()].sum() - \
            cells[(ctx.support == token).numpy(), token].sum()
        out = max(out, float(hit + joint[-1]))
    return out


def rule_of(cfg: Config, res, setting: str) -> tuple[str | None, SamplingConfig | None]:
    """(rule, q's processing) of a row's acceptance expectation: vLLM's from what ran (`vllm_rule`);
    llama.cpp's from its configuration, which the server runs as flagged (greedy drafts: "argmax";
    probabilistic: "sampled" with q its draft's top `LLAMA_DRAFT_TOP_K` at the temperature, the
    server's retuned draft sampler); (None, None) for the others."""
    if cfg.engine == "vllm":
        return vllm_rule(res, setting)
    if cfg.engine == "llama" and cfg.rule is not None:
        q = SamplingConfig(SETTINGS[setting].temperature, top_k=LLAMA_DRAFT_TOP_K) if cfg.rule == "sampled" else None
        return cfg.rule, q
    return None, None


def law_row(cfg: Config, setting: str, res, exact: Exact, *, alpha: float, eps: float, n_bins: int,
            x1_bins: int, power_target: float = 0.9) -> dict:
    """One stage's row (module docstring) for the Continuations ``res`` of ``cfg`` at ``setting``."""
    base = {"engine": cfg.engine, "configuration": cfg.label, "role": cfg.role, "setting": setting,
            "patched": cfg.patched}
    what, detail = ran(cfg, res)
    if what != "tested":
        return {**base, "ran": what, "ran_detail": detail, "status": what, "verdict": "not tested"}
    ctxs = exact.contexts[setting]
    laws, scores = exact.target(setting)
    counts = _counts(ctxs, res.tokens)
    r = law_test(laws, counts, ctxs[0].V, alpha=alpha, eps=eps, n_bins=n_bins, x1_bins=x1_bins, scores=scores,
                 power_target=power_target, cache=exact.bins)
    kept, n = verified_x2(cfg, res)
    row = {**base, "ran": what, "ran_detail": detail, "n": r.n, "verified": kept if kept >= 0 else math.nan,
           "verified_share": kept / n if kept >= 0 and cfg.spec is not None else math.nan,
           "p_value": r.p_value, "alpha": alpha, "power": r.power, "mdtv": r.mdtv, "n_needed": r.n_needed,
           "tv": r.tv, "tv_lo": r.tv_low, "tv_hi": r.tv_high, "impossible": r.impossible, "bins": r.bins,
           "status": r.status, "verdict": verdict(r), "best_fit": "", "fit_p": math.nan, "fit_lead": math.nan,
           "excluded": ""}
    if r.status == "reject" and cfg.spec is not None:
        row.update(_diagnosis(cfg, setting, res, exact, counts, r, alpha=alpha, n_bins=n_bins, x1_bins=x1_bins))
    return row


def _diagnosis(cfg, setting, res, exact, counts, r, *, alpha, n_bins, x1_bins) -> dict:
    ctxs = exact.contexts[setting]
    cands = exact.candidates(setting, (not PREFILL[cfg.engine], True))
    if cfg.spec.draft is None:  # a lookup drafter: the rules built on the draft model's q do not apply
        cands = {name: law for name, law in cands.items() if name in ("target", "p at T'")}
    implied, kept, drafts = None, None, None
    rule, _ = rule_of(cfg, res, setting)
    if rule and res.steps is not None and first_step_counts(res)[1] > 0:
        sc, t = config_cfg(SETTINGS[setting]), exact.t_other(setting)
        implied = {name: float(np.mean([candidate_acceptance(x, sc, name, rule, t) for x in ctxs]))
                   for name in CANDIDATES}
        kept, drafts = first_step_counts(res)
    rows = diagnose({k: v for k, v in cands.items() if k != "target"}, counts, implied=implied, kept=kept,
                    drafts=drafts)
    best = rows[0]
    excluded = [x["candidate"] for x in rows if x["excluded"]]
    if best["excluded"]:
        return {"best_fit": "", "excluded": "; ".join(excluded)}
    fit = law_test(cands[best["candidate"]], counts, ctxs[0].V, alpha=alpha, n_bins=n_bins, x1_bins=x1_bins)
    lead = rows[1]["deficit"] if len(rows) > 1 and not rows[1]["excluded"] else math.nan
    return {"best_fit": best["candidate"], "fit_p": fit.p_value, "fit_lead": float(lead), "excluded": "; ".join(excluded)}


def acceptance_row(cfg: Config, setting: str, res, exact: Exact) -> dict | None:
    """A vLLM or llama.cpp row's drafts kept at position 1 of its first verification step (the one
    that emits x2) against the exact expectation of the rule that ran (`rule_of`), counted from the per-sample steps
    (`first_step_counts`), with a binomial z at the interval's
    nearer end (0 inside it): "meets" (|z| < 4) or "misses"; None where no expectation exists."""
    if cfg.engine not in ("vllm", "llama") or cfg.spec is None or res.error or SETTINGS[setting].temperature == 0:
        return None
    rule, q_cfg = rule_of(cfg, res, setting)
    if rule is None or res.steps is None:
        return None
    kept, drafts = first_step_counts(res)
    if drafts == 0:
        return None
    ends = [first_step_expectation(c, config_cfg(SETTINGS[setting]), rule, first_from_prefill=True,
                                   draft_sampling=q_cfg) for c in exact.contexts[setting]]
    lo, hi = float(np.mean([e[0] for e in ends])), float(np.mean([e[1] for e in ends]))
    rate = kept / drafts
    a = min(max(rate, lo), hi)
    z = 0.0 if lo <= rate <= hi else (kept - drafts * a) / math.sqrt(max(drafts * a * (1 - a), 1e-12))
    return {"engine": cfg.engine, "configuration": cfg.label, "setting": setting, "patched": cfg.patched,
            "rule": rule, "drafts": drafts, "kept": kept, "measured": rate, "expected_lo": lo, "expected_hi": hi,
            "z": z, "status": "meets" if abs(z) < 4 else "misses"}
