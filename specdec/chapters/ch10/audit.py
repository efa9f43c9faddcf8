"""Chapter 10's audit: other engines' speculative decoding held to the exact target law, and their
acceptance to its exact expectation, through one engine interface (`specdec.peers`).

Protocol, stated before any result:
  1. Configurations (`plan`): each engine's plain decoding (the positive control: if it fails, the
     fault is the engine's sampler, not speculation), each speculative configuration the installed
     engine exposes (one row per draft-sampling and rejection option), and our own engine with named
     wrong verification rules (`specdec.core.rules.variants`, the negative controls, which must fail).
  2. The law (`law_rows`): for P fixed prompts, n samples of the first two generated tokens per
     prompt and configuration; a binned G-test against the exact joint law from the target's own
     logits under the same processed distribution (`specdec.peers.laws`, `specdec.peers.conformance`),
     level ``alpha``, n sized for worst-case power 0.8 at binned TV ``eps``.  A configuration that
     fails is diagnosed: which named wrong rule's exact law fits its counts best.  Words follow the
     test: "inconsistent with the target law (p = ...; power 0.8 for binned TV ...)", never stronger.
  3. Acceptance (`acceptance_rows`): the engine's own counters at position 1 of the first
     verification step (max_new_tokens 2: x1 from prefill, one verification step) against the exact
     expectation of the rule the engine is documented to apply -- sum min(p, q) for sampled drafts,
     p(x*) for argmax drafts, sum p q for the match rule -- with a binomial z.  An acceptance
     collapse is caught even where the law passes.
  4. Greedy (`greedy_rows`): speculative greedy decoding equal token for token to the same engine's
     plain greedy decoding of the same prompts.

Example:
    rows = law_rows(results, contexts, settings)   # one row per (configuration, setting)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.rules.variants import VARIANTS
from specdec.engine.decode import generate
from specdec.peers.acceptance import first_step_expectation, metrics_from_counters
from specdec.peers.conformance import alternative_power, diagnose, greedy_divergences, law_test, verdict
from specdec.peers.interface import Continuations, Sampling, Speculation
from specdec.peers.laws import CANDIDATES, candidate_joint, joint_cells, ratio_score, target_joint

__all__ = ["Config", "SETTINGS", "plan", "synthetic", "synthetic_rates", "NegativeControl", "law_rows",
           "acceptance_rows", "greedy_rows", "config_cfg", "with_verifier"]

SETTINGS = {"greedy": Sampling(0.0), "temperature 1": Sampling(1.0),
            "temperature 0.7, top-p 0.9": Sampling(0.7, top_p=0.9)}


@dataclass(frozen=True)
class Config:
    """One row of the audit: which engine, what it runs, and what the row is for."""
    engine: str  # "ours" | "hf" | "vllm"
    label: str  # the configuration in words
    spec: Speculation | None  # None: the engine's plain decoding
    role: str  # "control" (plain decoding), "speculative", "negative control" (must fail), "instrument"
    rule: str | None = None  # the rule whose exact position-1 acceptance its counters are held to (None: none is)
    variant: str | None = None  # a negative control's wrong rule (`specdec.core.rules.variants`)


def synthetic_rates(alpha: float, k: int) -> tuple[float, ...]:
    """vLLM's ``synthetic_acceptance_rates`` for i.i.d. acceptance alpha per position: the
    unconditional probability that the first i drafts are all kept, alpha^i (i = 1..k)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"acceptance alpha must be in [0, 1], got {alpha!r}")
    return tuple(float(alpha) ** i for i in range(1, k + 1))


def synthetic(k: int, draft: str, alpha: float) -> Config:
    """vLLM's draft model with forced acceptance alpha per position (``rejection_sample_method``
    "synthetic"): an instrument of speed at a set acceptance, whose tokens are not the target's law."""
    spec = Speculation("draft_model", k=k, draft=draft, options=(
        ("rejection_sample_method", "synthetic"), ("synthetic_acceptance_rates", synthetic_rates(alpha, k))))
    return Config("vllm", f"draft model, k = {k}, synthetic acceptance {alpha:g} (an instrument)", spec, "instrument")


def plan(k: int, draft: str) -> list[Config]:
    """Every configuration the chapter runs (module docstring, item 1), in table order."""
    dm = lambda *opts: Speculation("draft_model", k=k, draft=draft, options=tuple(opts))  # noqa: E731
    return [
        Config("ours", "plain decoding", None, "control"),
        Config("ours", f"token verification, k = {k}", Speculation("token", k=k, draft=draft), "speculative"),
        Config("ours", f"block verification, k = {k}", Speculation("block", k=k, draft=draft), "speculative"),
        Config("ours", "wrong rule: every draft kept", Speculation("token", k=k, draft=draft), "negative control",
               "sampled", "always_accept"),
        Config("ours", "wrong rule: residual omitted", Speculation("token", k=k, draft=draft), "negative control",
               "sampled", "resample_from_p"),
        Config("hf", "plain generate", None, "control"),
        Config("hf", f"assisted generation, k = {k}", Speculation("draft_model", k=k, draft=draft), "speculative"),
        Config("hf", "prompt lookup", Speculation("prompt_lookup", k=k), "speculative"),
        Config("vllm", "plain decoding", None, "control"),
        Config("vllm", f"draft model, k = {k} (defaults)", dm(), "speculative", "argmax"),
        Config("vllm", f"draft model, k = {k}, probabilistic drafts", dm(("draft_sample_method", "probabilistic")),
               "speculative", "sampled"),
        Config("vllm", f"draft model, k = {k}, probabilistic drafts, block rejection",
               dm(("draft_sample_method", "probabilistic"), ("rejection_sample_method", "block")), "speculative"),
        Config("vllm", f"n-gram prompt lookup, k = {k}", Speculation("ngram", k=k), "speculative"),
        synthetic(k, draft, 0.8),  # forced acceptance: a known wrong law the test must reject in vLLM too
    ]


def with_verifier(target, draft, verifier, prompts, n: int, max_new_tokens: int, sampling: Sampling,
                  spec: Speculation, seed: int, provenance: dict) -> Continuations:
    """`OursEngine.continue_prompts` with a verifier a caller names (one batch of n copies per
    prompt, seeded ``seed + prompt index``)."""
    tokens = []
    for i, p in enumerate(prompts):
        res = generate(target, torch.tensor([list(p)] * n), drafter=draft, k=spec.k, max_new_tokens=max_new_tokens,
                       temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p,
                       generator=torch.Generator().manual_seed(seed + i), verifier=verifier, mode="eager")
        tokens.append([t.tolist() for t in res.tokens])
    return Continuations(tokens, {}, {**provenance, "seed": seed})


@dataclass
class NegativeControl:
    """Our engine with a named wrong verifier (`specdec.core.rules.variants`): the negative control that
    the law test must reject.  Same interface as `specdec.peers.ours.OursEngine`."""
    target: object
    draft: object
    variant: str
    name: str = "ours (wrong rule)"

    def continue_prompts(self, prompts, n: int, max_new_tokens: int, sampling: Sampling, spec: Speculation,
                         seed: int) -> Continuations:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown wrong variant {self.variant!r}; known: {', '.join(VARIANTS)}")
        return with_verifier(self.target, self.draft, VARIANTS[self.variant].sampled, prompts, n, max_new_tokens,
                             sampling, spec, seed, {"engine": self.name, "variant": self.variant})


def _filled(rows: list[dict]) -> list[dict]:
    """Every row with the union of the rows' columns (first-seen order), NaN where a row has none:
    a row that could not run keeps its place in the table."""
    cols = list(dict.fromkeys(c for r in rows for c in r))
    return [{c: r.get(c, math.nan) for c in cols} for r in rows]


def config_cfg(s: Sampling) -> SamplingConfig:
    """The core's sampling configuration for an interface `Sampling`."""
    return SamplingConfig(s.temperature, top_k=s.top_k, top_p=s.top_p)


def _counts(contexts, tokens) -> list[np.ndarray]:
    return [np.bincount(joint_cells(c, np.asarray(t)[:, :2]), minlength=c.support.numel() * c.V + 1)
            for c, t in zip(contexts, tokens)]


def law_rows(results: dict, contexts: dict, *, alpha: float, eps: float, n_bins: int) -> list[dict]:
    """One row per (configuration, sampled setting): the law test, its words and, on a failure, the
    best-fitting wrong rule.  ``results`` maps (Config, setting name) -> Continuations of the first
    tokens; ``contexts`` maps setting name -> the prompts' `laws.PromptContexts`."""
    out, cache, bins = [], {}, {}

    def exact(name: str, verified=None):  # per setting (and wrong-rule positions): computed once
        key = (name, verified)
        if key not in cache:
            ctxs, sc = contexts[name], config_cfg(SETTINGS[name])
            if verified is None:  # the target's law, and x2 also ordered by the draft's log-ratio (alpha / 2 each)
                cache[key] = ([target_joint(c, sc) for c in ctxs], [ratio_score(c, sc) for c in ctxs])
            else:
                t_other = 1.0 if sc.temperature != 1.0 else 0.5  # "q at T'": q taken at another temperature
                cache[key] = {c: [candidate_joint(x, sc, c, verified=verified, t_other=t_other) for x in ctxs]
                              for c in CANDIDATES}
        return cache[key]

    for (cfg, name), res in results.items():
        if SETTINGS[name].temperature == 0:
            continue
        base = {"engine": cfg.engine, "configuration": cfg.label, "role": cfg.role, "setting": name}
        if res.error:
            out.append({**base, "status": "not run", "verdict": res.error})
            continue
        ctxs = contexts[name]
        laws, scores = exact(name)
        counts = _counts(ctxs, res.tokens)
        r = law_test(laws, counts, ctxs[0].V, alpha=alpha, eps=eps, n_bins=n_bins, scores=scores, cache=bins)
        row = {**base, "n": r.n, "p_value": r.p_value, "power": r.power, "tv": r.tv, "tv_lo": r.tv_low,
               "tv_hi": r.tv_high, "impossible": r.impossible, "status": "pass" if r.p_value > alpha else "reject",
               "verdict": verdict(r), "best_fit": "", "fit_lead": math.nan, "fit_power": math.nan}
        if row["status"] == "reject":
            cands = exact(name, (cfg.engine != "vllm", True))  # vLLM samples x1 at prefill; the others verify it
            fit = diagnose(cands, counts)
            best = fit[0]["candidate"]
            row.update(best_fit=best, fit_lead=float(fit[1]["deficit"]) if len(fit) > 1 else math.nan,
                       fit_power=float(alternative_power(laws, cands[best], ctxs[0].V, r.n // r.prompts, alpha=alpha,
                                                         n_bins=n_bins, scores=scores, cache=bins)["power"]))
        out.append(row)
    return _filled(out)


def acceptance_rows(results: dict, contexts: dict) -> list[dict]:
    """One row per configuration with a ``rule`` at each sampled setting: drafts kept at position 1 of
    the first verification step (vLLM's counters at max_new_tokens 2, where a request makes exactly
    one step) against that rule's exact expectation, z = (kept - n a) / sqrt(n a (1 - a)) at the
    interval's nearer end (0 inside it); status "meets" (|z| < 4), "misses" or "no expectation"."""
    out = []
    for (cfg, name), res in results.items():
        if cfg.spec is None or cfg.rule is None or cfg.variant is not None or SETTINGS[name].temperature == 0:
            continue
        s = SETTINGS[name]
        if cfg.rule == "sampled" and (s.top_k or s.top_p):  # vLLM's proposer samples q at the temperature only
            out.append({"engine": cfg.engine, "configuration": cfg.label, "setting": name, "rule": cfg.rule,
                        "status": "no expectation", "note": "the draft's q is processed by temperature only"})
            continue
        base = {"engine": cfg.engine, "configuration": cfg.label, "setting": name, "rule": cfg.rule}
        c = {key.removeprefix("vllm:spec_decode_"): v for key, v in (res.counters or {}).items()}
        if res.error or "num_drafts" not in c:
            out.append({**base, "status": "no expectation", "note": res.error or "no acceptance counters"})
            continue
        m = metrics_from_counters(res.counters)
        drafts = int(c["num_drafts"])
        kept = int(round(m["position_rate"][0] * drafts)) if m["position_rate"] else 0
        prefill = cfg.engine == "vllm"
        ends = [first_step_expectation(c, config_cfg(SETTINGS[name]), cfg.rule, first_from_prefill=prefill)
                for c in contexts[name]]
        lo, hi = float(np.mean([e[0] for e in ends])), float(np.mean([e[1] for e in ends]))
        rate = kept / drafts if drafts else math.nan
        a = min(max(rate, lo), hi)
        z = 0.0 if lo <= rate <= hi else (kept - drafts * a) / math.sqrt(max(drafts * a * (1 - a), 1e-12))
        out.append({**base, "drafts": drafts, "measured": rate, "expected_lo": lo, "expected_hi": hi, "z": z,
                    "status": "meets" if abs(z) < 4 else "misses", "note": ""})
    return _filled(out)


def greedy_rows(results: dict, prompts, plain_at=None) -> list[dict]:
    """Per engine, each speculative greedy configuration against the same engine's plain greedy:
    samples, how many are identical token for token, the first differing position, and each
    difference classified by `specdec.peers.conformance.greedy_divergences` with ``plain_at(engine,
    prompt, prefix) -> token`` (the engine's plain greedy next token; None: not classified): only
    "against speculation" -- plain decoding from the shared prefix emits plain's token again --
    counts against speculation; "plain not reproducible" is a near tie or nondeterminism of plain
    decoding itself."""
    plain = {cfg.engine: res for (cfg, name), res in results.items() if name == "greedy" and cfg.spec is None}
    out = []
    for (cfg, name), res in results.items():
        if name != "greedy" or cfg.spec is None or cfg.role != "speculative":
            continue
        base = {"engine": cfg.engine, "configuration": cfg.label}
        ref = plain.get(cfg.engine)
        if res.error or ref is None or ref.error:
            out.append({**base, "note": res.error or "no plain greedy run of this engine"})
            continue
        triples = [(prompt, a, b) for prompt, pa, pb in zip(prompts, res.tokens, ref.tokens) for a, b in zip(pa, pb)]
        same = sum(a == b for _, a, b in triples)
        first = next((next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) for _, a, b in triples if a != b), None)
        classes = []
        if plain_at is not None:
            for prompt, a, b in triples:
                if a != b:
                    classes += [r["class"] for r in greedy_divergences(
                        [a], [b], lambda prefix, prompt=prompt: plain_at(cfg.engine, prompt, prefix))]
        out.append({**base, "samples": len(triples), "identical": same,
                    "against_speculation": classes.count("against speculation") if plain_at else math.nan,
                    "plain_not_reproducible": classes.count("plain not reproducible") if plain_at else math.nan,
                    "first_difference": math.nan if first is None else first, "note": ""})
    return _filled(out)
