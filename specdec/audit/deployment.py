"""Any deployment held to the target's law (`make audit`): samples from one or two endpoints
(`specdec.peers.endpoint`), the target's processed conditionals recomputed locally from the
reader's own weights with Hugging Face transformers, and the every-position test of chapter 10
(`specdec.peers.pit`: the randomized PIT of every emitted token, uniform under the target law).

Protocol, in order, each step refusing what it cannot do with an error naming why:
  1. each URL probed (`endpoint.probe`): malformed, unreachable or unpinnable servers refused;
  2. the local target loaded (``TARGET``: a folder `from_pretrained` reads), float32 on the CPU;
  3. identity: ``identity_tokens`` greedy tokens per prompt from each endpoint, compared with the
     local argmax at the served prefix (teacher forcing).  On the first endpoint (the control), a
     token the local argmax beats by more than ``tie_tol`` logits means other weights: refused.  On
     the second it is a finding (greedy speculative decoding not exact), counted in its row.  Near
     ties (a server in another precision may break them the other way) are counted, not refused;
  4. sampling: ``sequences`` samples of ``length`` tokens per prompt at the rules given, pinned;
  5. per endpoint the PIT test (overall and per position group, Bonferroni) at level ``alpha``: its
     p-value, binned TV, the minimal detectable binned TV at power 0.8 and the power at binned TV
     ``eps`` (`specdec.core.stats.power`, worst case over laws that far from uniform).
The law in force: the rules given, after the bans the server reports (llama.cpp's ignore_eos bans
every end-of-generation id of its vocabulary and echoes them), float64 from float32 logits.  A
token the local law gives probability 0 rejects the row (`specdec.peers.pit`), except a *boundary*
token (`boundary`: the first past the local top-p or top-k cut, within ``margin``): a server whose
logits differ at their rounding cuts the nucleus one token later now and then.  A sequence with one
leaves the test whole: a selection on an event of ~1e-4 per token, far below the test's resolution;
the row counts them.

The local forward runs on the CPU in float32, 16 sequences at a time, and holds their processed
laws as (16, length, V) float64: ~600 MB at V = 150,000 and 32 tokens (a larger vocabulary wants
shorter samples).

Two endpoints: the first is the control (plain decoding of the same deployment).  A control that
fails the test means the served numerics differ from the local ones with or without speculation,
so the second row's verdict is `CONTROL_FAILS`, never "inconsistent".

Example: audit([("plain", "http://127.0.0.1:8000"), ("speculative", "http://127.0.0.1:8001")],
    "data/models/target", "target", prompts, sequences=64, length=32, sampling=Sampling(1.0), seed=0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from specdec.audit.design import config_cfg
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import power as worst_case_power
from specdec.peers import endpoint
from specdec.peers.conformance import CONSISTENT, INCONSISTENT
from specdec.peers.contract import check_prompts, config_limits
from specdec.peers.interface import Sampling, as_int, as_real
from specdec.peers.pit import pit_test, pit_values

__all__ = ["CONTROL_FAILS", "Banned", "load_target", "identity", "boundary", "audit", "attribute"]

CONTROL_FAILS = "control fails"


@dataclass(frozen=True)
class Banned:
    """A processed law with ``ids`` banned first (logit -inf), as a server's ban applies them."""
    rule: SamplingConfig
    ids: tuple = ()

    @property
    def greedy(self) -> bool:
        return self.rule.greedy

    def ban(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` with the banned ids at -inf (a copy where there are any)."""
        if self.ids:
            logits = logits.clone()
            logits[..., list(self.ids)] = -math.inf
        return logits

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return self.rule(self.ban(logits))


def load_target(path) -> object:
    """The local target, float32, eval mode, from a folder transformers reads; refused (naming the
    folder) when it is missing or holds no causal language model."""
    from transformers import AutoModelForCausalLM

    folder = Path(path)
    if not (folder / "config.json").exists():
        raise ValueError(f"TARGET {str(path)!r} is not a model folder (no config.json): give the local copy of the "
                         f"served weights")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"TARGET {str(path)!r} could not be loaded as a causal language model: {exc}") from None
    return model.eval()


@torch.inference_mode()
def identity(model, prompt: list[int], served: list[int], bans: tuple = (), tie_tol: float = 0.1) -> dict:
    """{"compared", "ties", "mismatches", "first"}: the served greedy tokens against the local argmax
    at the served prefix, ``bans`` applied (module docstring, step 3); ``first`` the first mismatch
    beyond a near tie as (position, served, local, logit margin of the local argmax over the served
    token) or None."""
    ids = torch.tensor([list(prompt) + list(served)])
    logits = Banned(None, tuple(bans)).ban(model(input_ids=ids).logits[0, len(prompt) - 1:len(prompt) - 1 + len(served)]
                                           .double())
    best = logits.max(dim=-1)
    ties = mismatches = 0
    first = None
    for j, tok in enumerate(served):
        local, gap = int(best.indices[j]), float(best.values[j] - logits[j, tok])
        if tok == local:
            continue
        if gap <= tie_tol:
            ties += 1
            continue
        mismatches += 1
        first = first or (j, int(tok), local, gap)
    return {"compared": len(served), "ties": ties, "mismatches": mismatches, "first": first}


def _args(sequences, length, alpha, eps, bins, position_groups, identity_tokens, tie_tol, margin, prompts):
    as_int("sequences", sequences, low=2)
    as_int("length", length, low=1)
    as_int("identity_tokens", identity_tokens, low=1)
    as_int("bins", bins, low=2)
    as_int("position_groups", position_groups, low=1)
    as_real("alpha", alpha, "in (0, 1)", lambda v: 0 < v < 1)
    as_real("eps", eps, "in (0, 1)", lambda v: 0 < v < 1)
    as_real("tie_tol", tie_tol, ">= 0", lambda v: v >= 0)
    as_real("margin", margin, "in [0, 1)", lambda v: 0 <= v < 1)
    if len(prompts) * sequences * length < 5 * bins:
        raise ValueError(f"{len(prompts)} prompts x {sequences} sequences x {length} tokens are too few values for "
                         f"{bins} bins (at least {5 * bins})")


def _identity(local, info, name, model, prompts, *, first: bool, alone: bool, vocab: int, tie_tol: float,
              n_tokens: int, seed: int, timeout_s: float) -> list[dict]:
    """Step 3 for one endpoint: its per-prompt checks; a mismatch on the first endpoint refuses."""
    greedy = endpoint.sample(info, model, prompts, n=1, length=n_tokens, sampling=Sampling(0.0), seed=seed,
                             timeout_s=timeout_s)
    checks = []
    for i, (p, rows_i) in enumerate(zip(prompts, greedy["tokens"])):
        served = rows_i[0]
        if max(served) >= vocab:
            raise ValueError(f"{info['url']} returned token id {max(served)}, outside TARGET's vocabulary of "
                             f"{vocab}: the served model is not TARGET")
        check = {"endpoint": name, "url": info["url"], "prompt": i,
                 **identity(local, p, served, tuple(greedy["bans"]), tie_tol)}
        checks.append(check)
        if check["mismatches"] and first:
            j, got, want, gap = check["first"]
            why = (" (or its speculative decoding is not exact at greedy: audit a plain endpoint of the same "
                   "deployment first, as the control)") if alone else ""
            raise ValueError(f"{info['url']} does not serve TARGET's weights{why}: at prompt {i}, greedy position {j} "
                             f"it chose {got} where TARGET's argmax is {want} by a logit margin {gap:.3g} > tie_tol "
                             f"{tie_tol:g} (a server in lower precision may need a larger --tie-tol)")
    return checks


@torch.inference_mode()
def boundary(model, prompt: list[int], tokens: list[int], position: int, law: Banned, margin: float) -> bool:
    """Whether the token at ``position`` of a sample, impossible under ``law``, is a boundary token:
    the first one past the local truncation (top-p or top-k) and within ``margin`` of it -- top-p:
    the mass ranked before it exceeds top-p by at most ``margin``; top-k: it is ranked k-th (from 0)
    and its probability is within a factor (1 - margin) of the last one kept.  A server whose logits
    differ from the local ones at the level of their rounding (llama.cpp's float16 GELU table) cuts
    the nucleus one token further now and then: such a token says nothing of speculation."""
    ids = torch.tensor([list(prompt) + list(tokens[:position])])
    logits = law.ban(model(input_ids=ids).logits[0, -1].double())
    rule = law.rule
    full = torch.softmax(logits / rule.temperature, -1)
    kept = int((rule(logits) > 0).sum())
    order = full.argsort(descending=True, stable=True)
    rank = int((order == tokens[position]).nonzero()[0])
    if rank != kept:
        return False
    if rule.top_k and rank == rule.top_k:
        return float(full[order[rank]]) >= (1 - margin) * float(full[order[rank - 1]])
    return rule.top_p is not None and float(full[order[:rank]].sum()) - rule.top_p <= margin


def _row(local, info, name, model, prompts, sampling, *, sequences, length, seed, alpha, eps, bins, position_groups,
         timeout_s, mismatched, margin) -> dict:
    """Steps 4-5 for one endpoint: its row."""
    drawn = endpoint.sample(info, model, prompts, n=sequences, length=length, sampling=sampling, seed=seed,
                            timeout_s=timeout_s)
    rng = np.random.default_rng(seed)
    law = Banned(config_cfg(sampling), tuple(drawn["bans"]))
    try:
        parts = [pit_values(local, p, np.asarray(t), law, rng) for p, t in zip(prompts, drawn["tokens"])]
    except ValueError as exc:  # a token id outside TARGET's vocabulary
        raise ValueError(f"{info['url']}: {exc}: the served model is not TARGET") from None
    edge = [[(j, pos) for j, pos in zip(*np.nonzero(part["impossible"]))
             if boundary(local, p, t[j], int(pos), law, margin)] for p, t, part in zip(prompts, drawn["tokens"], parts)]
    # a sequence with a boundary token leaves the test whole
    u = np.concatenate([np.delete(part["u"], [j for j, _ in cut], axis=0) for part, cut in zip(parts, edge)])
    r = pit_test(u, bins=bins, position_groups=position_groups, alpha=alpha)
    comp = dict(zip(r.tests, r.p_components))
    level = alpha / max(len(r.tests), 1)
    return {"endpoint": name, "url": info["url"], "kind": info["kind"], "version": str(info["version"]),
            "model": model, "temperature": sampling.temperature, "top_k": sampling.top_k or 0,
            "top_p": sampling.top_p if sampling.top_p is not None else 1.0,
            "bans": " ".join(map(str, drawn["bans"])) or "none", "prompts": len(prompts), "sequences": r.n_sequences,
            "length": length, "tokens": r.n_values, "greedy_mismatches": mismatched, "drafts": drawn["drafts"],
            "accepted": drawn["accepted"],
            "acceptance": drawn["accepted"] / drawn["drafts"] if drawn["drafts"] else math.nan,
            "p_overall": comp.get("overall", math.nan), "p_position": comp.get("position", math.nan),
            "p_value": r.p_value, "alpha": alpha, "impossible": r.impossible, "tv": r.tv, "mdtv": r.mdtv,
            "boundary": sum(map(len, edge)), "margin": margin, "eps": eps, "power_at_eps": worst_case_power(r.n_values, eps, bins, level) if r.n_values else 0.0,
            "local_dtype": "float32", "status": r.status, "verdict": INCONSISTENT if r.status == "reject" else CONSISTENT}


def audit(endpoints, target, model: str, prompts, *, sequences: int, length: int, sampling: Sampling, seed: int,
          alpha: float = 0.01, eps: float = 0.05, bins: int = 10, position_groups: int = 8, identity_tokens: int = 8,
          tie_tol: float = 0.1, margin: float = 1e-3, timeout_s: float = 600.0) -> dict:
    """{"rows": one per endpoint, "identity": one per (endpoint, prompt)} (module docstring).
    ``endpoints``: [(name, url)], one or two (the first the control); ``target``: a folder or a loaded
    model; ``prompts``: token-id lists.  Every argument, URL and served name is checked before
    anything is sampled."""
    endpoints = list(endpoints)
    if not 1 <= len(endpoints) <= 2 or not all(isinstance(e, (tuple, list)) and len(e) == 2 for e in endpoints):
        raise ValueError(f"endpoints must be one or two (name, url) pairs (a control first), got {endpoints!r}")
    if not isinstance(sampling, Sampling) or sampling.temperature <= 0:
        raise ValueError(f"the audit tests sampled decoding: temperature must be > 0, got {sampling!r} "
                         f"(greedy outputs are compared token for token by the identity step)")
    _args(sequences, length, alpha, eps, bins, position_groups, identity_tokens, tie_tol, margin, list(prompts))
    infos = [endpoint.probe(url) for _, url in endpoints]
    for info in infos:
        endpoint.check_model(info, model)
    local = load_target(target) if isinstance(target, (str, Path)) else target
    vocab, context = config_limits(local.config.to_dict())
    prompts = check_prompts(prompts, vocab, name="the audit's prompts")
    longest = max(map(len, prompts)) + max(length, identity_tokens)
    if context is not None and longest > context:
        raise ValueError(f"prompts of up to {longest - max(length, identity_tokens)} ids + {max(length, identity_tokens)} "
                         f"tokens exceed the target's context of {context} positions")
    checks, rows = [], []
    for i, ((name, _), info) in enumerate(zip(endpoints, infos)):
        mine = _identity(local, info, name, model, prompts, first=i == 0, alone=len(infos) == 1, vocab=vocab,
                         tie_tol=tie_tol, n_tokens=identity_tokens, seed=seed, timeout_s=timeout_s)
        checks += mine
        rows.append(_row(local, info, name, model, prompts, sampling, sequences=sequences, length=length, seed=seed,
                         alpha=alpha, eps=eps, bins=bins, position_groups=position_groups, timeout_s=timeout_s,
                         mismatched=sum(c["mismatches"] for c in mine), margin=margin))
    return {"rows": attribute(rows), "identity": checks}


def attribute(rows: list[dict]) -> list[dict]:
    """The rows with the second one's verdict `CONTROL_FAILS` where the control (the first) is
    rejected: the served numerics differ without speculation, so nothing is said of it."""
    if len(rows) == 2 and rows[0]["status"] == "reject":
        rows = [rows[0], {**rows[1], "verdict": CONTROL_FAILS}]
    return rows
