"""Chapter 06's timed runs of the embedded pair: the cost curve T(n) per batch size, then plain,
fixed-k and dynamic-k decoding over output lengths x batch sizes, and Hugging Face's own decoding.

Protocol (all through the one harness, `specdec.measure.harness.sweep`):
  1. T(n) of the target (n new tokens appended to a cached context of the prompt length) and
     T_d(1) of the draft, for every batch size, before any decoding run; c = T_d(1) / T(1)
     (`specdec.measure.cost_curve`, `specdec.core.cost.draft_cost`).
  2. One cell per (output length L, batch size B) -- the first B prompts, L new tokens, no stop
     token -- and one configuration per draft length: "baseline" (k = 0), "k=1", ..., and
     "dynamic" (k = -1: the adaptive per-step rule `specdec.engine.schedule.AdaptiveK`, with that
     batch's c and T).  Every configuration runs once per round on every cell, rounds
     repeated (warm-up rounds untimed), so drift of a shared machine hits all of them alike.
  3. Each run is seeded with seed + round (warm-up rounds counted), the same for every
     configuration of a round: a run's tokens do not depend on what ran before it.
  4. Hugging Face `generate` and assisted generation with k pinned (`specdec.measure.hf`), batch 1,
     the same way.

Example:
    pair = EmbeddedPair(seed=0, prompt_len=64, n_prompts=8, allow_stand_in=True)
    curve = cost_curves(pair.target, pair.draft, pair.draft_name, [1], [1, 2], context=64, repeats=3,
                        generator=torch.Generator().manual_seed(0))
    curves, cs = curves_by_batch(curve)          # {1: {1: T(1), 2: T(2)}}, {1: c}
    rows = decoding_runs(pair.target, pair.draft, pair.prompts, [16], [1], [2], curves, cs,
                         temperature=1.0, warmup_steps=2, k_start=2, repeats=1, warmup=0, seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from specdec.core.cost import draft_cost
from specdec.engine.decode import generate
from specdec.engine.schedule import AdaptiveK
from specdec.family.tokens import prompt_checksum
from specdec.measure.cost_curve import cost_curve
from specdec.measure.harness import Cell, Config, sweep
from specdec.measure.hf import hf_assisted
from specdec.measure.subjects import load_subjects

__all__ = ["TABLE_COLUMNS", "HF_COLUMNS", "EmbeddedPair", "cost_curves", "curves_by_batch", "decoding_configs",
           "decoding_runs", "hf_configs", "hf_runs"]

TABLE_COLUMNS = ("output_len", "batch", "config", "k", "repeat", "tokens", "steps", "total_s", "prefill_s", "ttft_s",
               "tokens_per_s", "lat_p50_s", "lat_p95_s", "lat_p99_s", "t_draft", "t_draft_forward", "t_target",
               "t_accept", "t_rollback", "t_other", "t_step", "peak_memory_bytes", "alpha_mle", "alpha_steps",
               "k_chosen")
HF_COLUMNS = ("output_len", "batch", "config", "k", "repeat", "tokens", "total_s", "tokens_per_s")
DEFAULT_DRAFT = "draft-small"  # the family's default draft


@dataclass
class EmbeddedPair:
    """The embedded target, one of its drafts and the held-out prompts, loaded on first use (a
    chapter that renders from its committed tables never loads a model).

    draft: a draft of the family; empty or unknown -> draft-small (an unknown one is noted).
    target: this chapter measures the embedded family; any other value is noted, not loaded.
    prompts: (n_prompts, prompt_len) from the held-out test plays; batch B takes the first B rows.
    """

    device: str = "cpu"
    draft_wanted: str = ""
    target_wanted: str = "embedded"
    seed: int = 0
    prompt_len: int = 64
    n_prompts: int = 8
    allow_stand_in: bool = False  # tiny random-weight stand-ins when the weights are absent (SMOKE)

    @cached_property
    def subjects(self):
        return load_subjects(self.device, allow_stand_in=self.allow_stand_in, seed=self.seed)

    @cached_property
    def draft_name(self) -> str:
        drafts = self.subjects.drafts
        if self.draft_wanted in drafts:
            return self.draft_wanted
        return DEFAULT_DRAFT if DEFAULT_DRAFT in drafts else sorted(drafts)[0]

    @property
    def target(self):
        return self.subjects.target

    @property
    def draft(self):
        return self.subjects.drafts[self.draft_name]

    @cached_property
    def prompts(self) -> torch.Tensor:
        return self.subjects.prompts(self.n_prompts, self.prompt_len, seed=self.seed)  # (n_prompts, prompt_len)

    def notes(self) -> list[str]:
        """What was asked for but not used, and the loader's own notes."""
        out = list(self.subjects.notes)
        if self.target_wanted != "embedded":
            out.append(f"this chapter measures the embedded family; TARGET = {self.target_wanted!r} is measured "
                       "by the GPU run (chapter 07)")
        if self.draft_wanted and self.draft_wanted not in self.subjects.drafts:
            out.append(f"DRAFT = {self.draft_wanted!r} is not in the embedded family {sorted(self.subjects.drafts)}; "
                       f"its default draft {self.draft_name} is used")
        return out

    def describe(self) -> dict:
        """The chapter's setup values: models used, draft, prompt checksum, notes, weight sha256."""
        return {"models": self.subjects.kind, "draft": self.draft_name, "prompt_sha256": prompt_checksum(self.prompts),
                "notes": self.notes(), "models_sha256": dict(self.subjects.sha256)}


def cost_curves(target, draft, draft_name: str, batches, n_values, *, context: int, repeats: int,
                generator: torch.Generator) -> list[dict]:
    """Per batch size: T(n) of the target for each n (model "target") and T_d(1) of the draft
    (model = draft_name), one row per (model, n, batch) (`specdec.measure.cost_curve.cost_curve`)."""
    rows = []
    for B in batches:
        rows += [{"model": "target", **r} for r in cost_curve(target, n_values, context=context, batch=B,
                                                               repeats=repeats, generator=generator)]
        rows.append({"model": draft_name, **cost_curve(draft, [1], context=context, batch=B, repeats=repeats,
                                                       generator=generator)[0]})
    return rows


def curves_by_batch(table) -> tuple[dict, dict]:
    """A cost_curves table (rows or DataFrame) -> ({batch: {n: median T(n) of the target}}, {batch: c}).

    Example: rows T(1) = 0.01 s, T(2) = 0.012 s, draft T_d(1) = 0.002 s at batch 1
             -> ({1: {1: 0.01, 2: 0.012}}, {1: 0.2})
    """
    rows = table.to_dict("records") if hasattr(table, "to_dict") else list(table)
    curves: dict = {}
    for r in rows:
        if r["model"] == "target":
            curves.setdefault(int(r["batch"]), {})[int(r["n"])] = float(r["median_s"])
    cs = {int(r["batch"]): draft_cost(float(r["median_s"]), curves[int(r["batch"])][1])
          for r in rows if r["model"] != "target" and int(r["n"]) == 1}
    return curves, cs


def decoding_configs(target, draft, ks, *, temperature: float, warmup_steps: int, k_start: int) -> list[Config]:
    """baseline (k = 0), k=1.. for each of ks, and dynamic (k = -1: `AdaptiveK` up to max(ks)).

    A run takes the cell's inputs dict(ids (B, T), max_new_tokens, c, curve) and a seed and
    returns its summary with alpha_mle / alpha_steps (steps that drafted the full k; every drafting
    step for dynamic) and k_chosen (dynamic: the most frequent k after the warm-up steps).
    """
    nan = float("nan")

    def run(k):
        def go(x, seed):
            schedule = AdaptiveK(x["c"], x["curve"], max(ks), k_start, warmup_steps) if k < 0 else max(k, 1)
            res = generate(target, x["ids"], drafter=draft if k else None, k=schedule,
                           max_new_tokens=x["max_new_tokens"], temperature=temperature,
                           generator=torch.Generator().manual_seed(seed))
            alpha, steps = res.stats.alpha_mle(k if k > 0 else None) if k else (nan, 0)
            chosen = [s["k"] for s in res.stats.steps[warmup_steps:]] or [k_start]
            return {**res.summary(), "alpha_mle": alpha, "alpha_steps": steps,
                    "k_chosen": max(set(chosen), key=chosen.count) if k < 0 else k}
        return go

    return ([Config("baseline", run(0), k=0)] + [Config(f"k={k}", run(k), k=k) for k in ks]
            + [Config("dynamic", run(-1), k=-1)])


def decoding_runs(target, draft, prompts, output_lens, batches, ks, curves: dict, cs: dict, *, temperature: float,
                  warmup_steps: int, k_start: int, repeats: int, warmup: int, seed: int) -> list[dict]:
    """Every configuration of `decoding_configs` on every (output length, batch) cell (module
    docstring), one row of TABLE_COLUMNS per timed run, in the order they ran."""
    configs = decoding_configs(target, draft, ks, temperature=temperature, warmup_steps=warmup_steps, k_start=k_start)
    cells = [Cell({"output_len": L, "batch": B}, dict(ids=prompts[:B], max_new_tokens=L, c=cs[B], curve=curves[B]))
             for L in output_lens for B in batches]
    rows = sweep(configs, cells, repeats=repeats, warmup=warmup, seed=lambda rnd, i: seed + warmup + rnd)
    return [{c: r[c] for c in TABLE_COLUMNS} for r in rows]


def hf_configs(target, draft, k: int, *, temperature: float) -> list[Config]:
    """Hugging Face's plain generate (k = 0) and assisted generation with k pinned."""
    def run(kk):
        return lambda x, seed: hf_assisted(target, draft, x["ids"], k=kk, max_new_tokens=x["max_new_tokens"],
                                           temperature=temperature, seed=seed)[1]
    return [Config("HF generate", run(0), k=0), Config(f"HF assisted k={k}", run(k), k=k)]


def hf_runs(target, draft, prompt, output_lens, k: int, *, temperature: float, repeats: int, warmup: int,
            seed: int) -> list[dict]:
    """`hf_configs` on the first prompt (batch 1: all HF assisted generation takes) for every output
    length, seeded as `decoding_runs`; one row of HF_COLUMNS per timed run (end-to-end timing)."""
    cells = [Cell({"output_len": L, "batch": 1}, dict(ids=prompt[:1], max_new_tokens=L)) for L in output_lens]
    rows = sweep(hf_configs(target, draft, k, temperature=temperature), cells, repeats=repeats, warmup=warmup,
                 seed=lambda rnd, i: seed + warmup + rnd)
    return [{c: r[c] for c in HF_COLUMNS} for r in rows]
