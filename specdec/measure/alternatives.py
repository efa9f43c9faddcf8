"""The measured runs of the lossless alternatives and the approximate verification rules on the
embedded pair (speedup, acceptance per position, output quality): `make alternatives`
(`specdec.cli.alternatives`) times them, chapter 08 renders the tables.  The exact one-step laws on
the pair's real logits are in `specdec.chapters.ch08.real_laws`.

Protocol (`specdec.measure.protocol`, through the one harness `specdec.measure.harness.protocol_sweep`):
  1. Cells: one per (temperature, prompt): one held-out prompt (batch 1), ``output_len`` new tokens,
     no stop token.  Configurations (`rule_configs`): "autoregressive" (plain target sampling: the
     speed baseline and the quality reference), "token" (the engine's own verification) and one per
     named rule, each run on every cell in every round, shuffled per (round, cell), all seeded alike
     (common random numbers), after one untimed warm-up round on short cells.
  2. The timed call is `generate` and nothing else.  Its generated tokens and per-position counts
     come back with its summary; quality is scored afterwards, outside the timing:
         nll = -(1/n) sum_t log p_T(y_t | prompt, y_<t)
     under the target's processed law p_T at the run's temperature (one teacher-forced target
     forward over prompt + continuation; temperature 0 is scored at temperature 1, since its
     processed law is a point mass), and distinct-2 / distinct-3 of the continuation.
  3. An approximate rule's runs carry ``lossless`` False, from its label and the engine's stats alike.

Example:
    rows = alternative_runs(target, draft, prompts[:4], {"typical": typical()}, k=4, output_len=64,
                            temperatures=[1.0], repeats=5, seed=0)
    speedup_rows(rows); acceptance_rows(rows, 4); quality_rows(rows)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specdec.core.acceptance import distinct_ngram_ratio
from specdec.core.rules import alternatives, approximate
from specdec.core.sampling import process_logits
from specdec.core.stats import cluster_ratio_interval, wilson_interval
from specdec.engine.decode import generate
from specdec.measure.harness import Cell, Config, protocol_sweep
from specdec.measure.protocol import LEVEL, paired_speedups, summarize

__all__ = ["AR", "TOKEN", "measured_rules", "rule_configs", "alternative_runs", "continuation_nll", "speedup_rows",
           "acceptance_rows", "quality_rows"]

AR, TOKEN, BLOCK = "autoregressive", "token", "block"
PAIR_KEYS = ("temperature", "prompt", "repeat")  # a run pairs with the AR run of the same keys
RUN_KEEP = ("temperature", "prompt", "repeat", "position", "algorithm", "lossless", "tokens", "steps", "wall_s",
            "total_s", "tokens_per_s", "mean_accepted", "cpu_share", "load_1m", "reruns")
QUALITY = ("nll", "distinct_2", "distinct_3")


def _position_counts(stats, k: int) -> dict:
    """prop_i, reach_i, acc_i (i = 1..k) of one run: drafts proposed at i, steps that proposed i and
    kept i-1 drafts, drafts accepted at i (`DecodeStats.acceptance_by_position` and its accept rows)."""
    by = {r["position"]: r for r in stats.acceptance_by_position()}
    rows = stats.accept_rows()
    out = {}
    for i in range(1, k + 1):
        out[f"prop_{i}"] = by[i]["proposed"] if i in by else 0
        out[f"reach_{i}"] = sum(r["k"] >= i and r["accepted"] >= i - 1 for r in rows)
        out[f"acc_{i}"] = by[i]["accepted"] if i in by else 0
    return out


def _run(target, draft, k: int, output_len: int, verifier, method: str = "token"):
    """A configuration's run on inputs {ids (1, P), temperature[, max_new_tokens]}: `generate`, then its
    summary, per-position counts and the generated ids ("continuation", a list)."""

    def go(x, seed):
        res = generate(target, x["ids"], drafter=draft, k=k, max_new_tokens=x.get("max_new_tokens", output_len),
                       temperature=x["temperature"], generator=torch.Generator().manual_seed(seed),
                       verifier=verifier, method=method, mode="eager")
        s = res.summary()
        return {**s, "engine_lossless": s["lossless"], **_position_counts(res.stats, k),
                "continuation": res.tokens[0].tolist()}
    return go


def measured_rules(lam: float, top_k: int) -> dict:
    """The named rules the chapter measures beside token and block verification, by name: match
    verification, typical acceptance at Medusa's published setting, relaxed acceptance at ``lam``
    (standard residual) and top-``top_k`` membership."""
    rules = [alternatives.MATCH, approximate.typical(), approximate.relaxed(lam), approximate.top_k_accept(top_k)]
    return {r.name: r for r in rules}


def rule_configs(target, draft, rules: dict, *, k: int, output_len: int, block: bool = False) -> list[Config]:
    """Harness configurations: "autoregressive" (no drafter) first, "token" (the engine's own
    verification), with ``block`` the engine's block verification, then one per entry of ``rules`` (name -> `specdec.core.rules.positional.Rule`, passed
    as the engine's verifier without re-validation), labelled ``algorithm`` (the name) and
    ``lossless``.  Rules that do not draw their drafts from q (``draws != "q"``, the greedy-draft
    shortcut) are skipped: the engine's drafters only sample.  A run returns the `GenerateResult`
    summary plus prop_i / reach_i / acc_i (i = 1..k) and "continuation" (the generated ids).

    Example: rule_configs(t, d, {"match": MATCH, "typical": typical()}, k=4, output_len=64)
    -> names [autoregressive, token, match, typical], lossless [True, True, True, False].
    """
    clash = {AR, TOKEN, BLOCK} & set(rules)
    if clash:
        raise ValueError(f"rule names {sorted(clash)} are reserved for the baselines")
    configs = [Config(AR, _run(target, None, k, output_len, None), algorithm=AR, lossless=True),
               Config(TOKEN, _run(target, draft, k, output_len, None), algorithm=TOKEN, lossless=True)]
    if block:
        configs.append(Config(BLOCK, _run(target, draft, k, output_len, None, BLOCK), algorithm=BLOCK, lossless=True))
    for name, rule in rules.items():
        if getattr(rule, "draws", "q") == "q":
            configs.append(Config(name, _run(target, draft, k, output_len, replace(rule, check=False)),
                                  algorithm=name, lossless=bool(rule.lossless)))
    return configs


@torch.inference_mode()
def continuation_nll(target, prompt_ids: torch.Tensor, continuation: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean negative log-likelihood per token of each continuation under the target's processed law
    at ``temperature`` (`process_logits`, float64; temperature 0 scored at 1), from one
    teacher-forced forward: prompt_ids (B, P), continuation (B, n) -> (B,) float64.

    Example: a continuation the target gives probability 1/2 at each of its tokens -> log 2.
    """
    dev = next(target.parameters()).device
    prompt_ids, continuation = prompt_ids.to(dev).long(), continuation.to(dev).long()
    P, n = prompt_ids.shape[1], continuation.shape[1]
    if P < 1 or n < 1:
        raise ValueError(f"need a prompt and a continuation of at least one token, got {P} and {n}")
    ids = torch.cat([prompt_ids, continuation], 1)  # (B, P + n)
    logits = target(input_ids=ids).logits[:, P - 1:P + n - 1]  # (B, n, V): the law of each continuation token
    p = process_logits(logits.double(), temperature if temperature > 0 else 1.0)  # (B, n, V)
    return -torch.log(p.gather(-1, continuation.unsqueeze(-1)).squeeze(-1)).mean(-1).cpu()


def _distinct(ids: list, n: int) -> float:
    return distinct_ngram_ratio(ids, n) if len(ids) >= n else float("nan")


def alternative_runs(target, draft, prompts: torch.Tensor, rules: dict, *, k: int, output_len: int, temperatures,
                     repeats: int, seed: int, score: bool = True, min_share: float = 0.9, max_reruns: int = 2,
                     warmup_tokens: int = 8, block: bool = False, log=None) -> list[dict]:
    """Every configuration of `rule_configs` on every (temperature, prompt) cell, ``repeats`` timed
    rounds (module docstring).  prompts (n, P).  One row per timed run, in the order they ran:
    RUN_KEEP columns (``position``: its place in the shuffled round), ``verifier`` (the engine's
    stats), prop_i / reach_i / acc_i, ``continuation`` (space-separated ids) and, with ``score``,
    nll, distinct_2, distinct_3 (scored after all timing).  The counts and tokens come with each
    timed run's own row (`protocol_sweep`'s ``keep``)."""
    configs = rule_configs(target, draft, rules, k=k, output_len=output_len, block=block)
    cells = [Cell({"temperature": float(T), "prompt": j}, {"ids": prompts[j:j + 1], "temperature": float(T)})
             for T in temperatures for j in range(prompts.shape[0])]
    warm = [Cell({"temperature": float(T), "prompt": 0}, {"ids": prompts[:1], "temperature": float(T),
                                                          "max_new_tokens": min(warmup_tokens, output_len)})
            for T in temperatures]
    counts = tuple(f"{c}_{j}" for j in range(1, k + 1) for c in ("prop", "reach", "acc"))
    runs = protocol_sweep(configs, cells, repeats=repeats, seed=seed, min_share=min_share, max_reruns=max_reruns,
                          warm=warm, keep=("verifier", "engine_lossless", "continuation", *counts), log=log)
    rows = []
    for r in runs:
        if bool(r["engine_lossless"]) != bool(r["lossless"]):
            raise RuntimeError(f"{r['config']!r}: label lossless={r['lossless']} but the engine says "
                               f"{r['engine_lossless']}")
        rows.append({**{c: r[c] for c in RUN_KEEP}, "verifier": r["verifier"], **{c: r[c] for c in counts},
                     "continuation": " ".join(map(str, r["continuation"])), "_ids": r["continuation"]})
    if score:
        _score(target, prompts, rows)
    for r in rows:
        del r["_ids"]
    return rows


def _score(target, prompts, rows, chunk: int = 16) -> None:
    """nll, distinct_2, distinct_3 into each row (rows of one temperature and length scored in batches)."""
    groups: dict = {}
    for r in rows:
        r["distinct_2"], r["distinct_3"] = _distinct(r["_ids"], 2), _distinct(r["_ids"], 3)
        r["nll"] = float("nan")
        if r["_ids"]:
            groups.setdefault((r["temperature"], len(r["_ids"])), []).append(r)
    for (T, _), rs in groups.items():
        for s in range(0, len(rs), chunk):
            part = rs[s:s + chunk]
            ids = torch.stack([prompts[r["prompt"]] for r in part])  # (b, P)
            cont = torch.tensor([r["_ids"] for r in part], dtype=torch.long)  # (b, n)
            for r, v in zip(part, continuation_nll(target, ids, cont, T).tolist()):
                r["nll"] = v


def speedup_rows(rows: list[dict], *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per (temperature, algorithm != autoregressive): runs, median speedup over the autoregressive
    run of the same (temperature, prompt, repeat), its 95% bootstrap interval and verdict, and the
    simultaneous (Bonferroni over all these comparisons, ``family_size``) interval and verdict
    (`specdec.measure.protocol.paired_speedups` + `summarize`), with ``lossless``.

    Example: every run of "x" takes half the AR run's time per token -> median 2, "faster".
    """
    paired = [r for r in paired_speedups(rows, baseline=AR, keys=PAIR_KEYS, impl="algorithm") if r["algorithm"] != AR]
    lossless = {(r["temperature"], r["algorithm"]): bool(r["lossless"]) for r in paired}
    out = summarize(paired, by=("temperature", "algorithm"), level=level, seed=seed)
    return [{**s, "lossless": lossless[(s["temperature"], s["algorithm"])], "family_size": len(out)} for s in out]


def _by_prompt(rs: list[dict], col: str) -> np.ndarray:
    """Sum of ``col`` per prompt (the clusters: a prompt's runs and steps are not independent)."""
    tot: dict = {}
    for r in rs:
        tot[r["prompt"]] = tot.get(r["prompt"], 0.0) + float(r[col])
    return np.array([tot[p] for p in sorted(tot)], dtype=np.float64)


def acceptance_rows(rows: list[dict], k: int, *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per (temperature, algorithm that drafted, position i = 1..k): proposed (drafts offered at i),
    reached (steps that offered i with i-1 kept), accepted (kept at i), rate = accepted / proposed
    and conditional = accepted / reached (the seed's alpha at i), each with a Wilson interval, which
    treats steps as independent (they are not within a prompt), and the conditional rate's
    percentile bootstrap interval over prompts (``conditional_lo_prompts`` / ``_hi_prompts``,
    `specdec.core.stats.cluster_ratio_interval`).  Each row also carries its group's mean accepted
    drafts per drafting step (sum_i accepted_i / proposed_1, bootstrap over prompts) and mean
    tokens per step (= mean_accepted + 1).

    Example: one run, k = 2, steps accepting [2, 0] -> position 1: 1 of 2, position 2: 1 of 1
    reached; mean_accepted 1, tokens_per_step 2.
    """
    groups: dict = {}
    for r in rows:
        if r.get("prop_1", 0) > 0:
            groups.setdefault((r["temperature"], r["algorithm"]), []).append(r)
    nan = float("nan")
    out = []
    for (T, alg), rs in groups.items():
        drafted = _by_prompt(rs, "prop_1")
        kept = sum(_by_prompt(rs, f"acc_{i}") for i in range(1, k + 1))
        m, mlo, mhi = cluster_ratio_interval(kept, drafted, level, seed)
        for i in range(1, k + 1):
            prop, reach, acc = (_by_prompt(rs, f"{c}_{i}") for c in ("prop", "reach", "acc"))
            P, R, A = int(prop.sum()), int(reach.sum()), int(acc.sum())
            rlo, rhi = wilson_interval(A, P, level) if P else (nan, nan)
            clo, chi = wilson_interval(A, R, level) if R else (nan, nan)
            _, blo, bhi = cluster_ratio_interval(acc, reach, level, seed) if R else (nan, nan, nan)
            out.append({"temperature": T, "algorithm": alg, "lossless": bool(rs[0]["lossless"]), "position": i,
                        "proposed": P, "reached": R, "accepted": A, "rate": A / P if P else nan, "rate_lo": rlo,
                        "rate_hi": rhi, "conditional": A / R if R else nan, "conditional_lo": clo,
                        "conditional_hi": chi, "conditional_lo_prompts": blo, "conditional_hi_prompts": bhi,
                        "mean_accepted": m, "mean_accepted_lo": mlo, "mean_accepted_hi": mhi,
                        "tokens_per_step": m + 1})
    return out


def quality_rows(rows: list[dict], *, level: float = LEVEL, seed: int = 0) -> list[dict]:
    """Per (temperature, algorithm), the autoregressive runs (plain target sampling) first as the
    reference: for each of nll, distinct_2, distinct_3 its mean over prompts (each prompt's mean
    over repeats) and its difference from the autoregressive mean at the same temperature, paired by
    prompt, with a percentile bootstrap interval over prompts (`cluster_ratio_interval` of the
    per-prompt differences; prompts, not runs, are the independent units).

    Example: nll higher by 0.5 on every prompt -> nll_diff 0.5, interval [0.5, 0.5].
    """
    per: dict = {}
    lossless: dict = {}
    for r in rows:
        per.setdefault((r["temperature"], r["algorithm"]), {}).setdefault(r["prompt"], []).append(r)
        lossless[(r["temperature"], r["algorithm"])] = bool(r["lossless"])
    out = []
    for (T, alg) in sorted(per, key=lambda g: (g[0], g[1] != AR)):
        ref, mine = per.get((T, AR)), per[(T, alg)]
        if ref is None or set(ref) != set(mine):
            raise ValueError(f"{alg!r} at temperature {T}: its prompts are not those of the {AR!r} runs")
        row = {"temperature": T, "algorithm": alg, "lossless": lossless[(T, alg)],
               "runs": sum(map(len, mine.values())), "prompts": len(mine)}
        ps = sorted(mine)
        for m in QUALITY:
            a = np.array([np.mean([r[m] for r in mine[p]]) for p in ps])
            b = np.array([np.mean([r[m] for r in ref[p]]) for p in ps])
            d, lo, hi = cluster_ratio_interval(a - b, np.ones_like(a), level, seed) if np.all(np.isfinite(a - b)) \
                else (float(np.mean(a - b)), float("nan"), float("nan"))
            row.update({m: float(a.mean()), f"{m}_diff": d, f"{m}_diff_lo": lo, f"{m}_diff_hi": hi})
        out.append(row)
    return out
