"""Chapter 06's timed runs of the embedded family: cost curves, the draft comparison, and plain,
fixed-k and dynamic-k decoding over temperatures x output lengths x batch sizes x prompt groups.

Protocol (`specdec.measure.protocol`, through the one harness: `specdec.measure.harness.protocol_sweep`):
  1. Cost curves: T(n) of the target and T_d(1), T_d(2) of each model draft, per batch size, at every
     context a run's prediction needs (`mid_context`), measured before the decoding runs and after
     them (`specdec.measure.curves.cost_curves(..., when=...)`), so drift shows.
  2. Cells: one per (temperature, output length L, batch B, prompt group g): the g-th block of B
     held-out prompts, L new tokens, no stop token.  Greedy runs only at the batch sizes asked.
  3. Configurations, all run on every cell in every round, in an order shuffled per (round, cell) with
     a seeded RNG: "baseline" (k = 0), "k=K" for each K, and "dynamic" (k = -1, the rule
     `specdec.engine.schedule.AdaptiveK` with that cell's T and c).
  4. The configurations of one (round, cell) share its seed: speedups are paired on common random
     numbers.  Untimed warm-up rounds first run every configuration on a short cell.
  5. A run whose CPU share falls below ``min_share`` was contended: it is re-run (at most
     ``max_reruns`` times) and the count recorded with its load average.

Example:
    pair = EmbeddedPair(seed=0, prompt_len=64, n_prompts=8, allow_stand_in=True)
    curve = cost_curves(pair.target, {"draft-small": pair.drafts["draft-small"]}, [1], [1, 2], [64],
                        repeats=3, generator=torch.Generator().manual_seed(0))
    cells = decoding_cells(pair.prompts, [1.0], [16], [1], [1], prompt_len=64, curve=curve, draft="draft-small")
    rows = decoding_runs(pair.target, pair.drafts["draft-small"], cells, [2], warmup_steps=2, k_start=2,
                         repeats=2, warmup=1, seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from specdec.engine.decode import generate
from specdec.engine.modes import forward_for
from specdec.engine.history import PromptLookupDrafter
from specdec.engine.schedule import AdaptiveK
from specdec.family.tokens import prompt_checksum
from specdec.measure.curves import curve_at
from specdec.measure.harness import Cell, Config, protocol_sweep
from specdec.measure.prediction import step_profile
from specdec.measure.subjects import load_subjects

__all__ = ["RUN_COLUMNS", "EmbeddedPair", "decoding_cells", "decoding_configs", "decoding_runs", "draft_runs",
           "mid_context", "run_context"]

RUN_COLUMNS = ("temperature", "output_len", "batch", "group", "config", "draft", "k", "repeat", "position", "tokens",
               "steps", "wall_s", "total_s", "ttft_s", "tokens_per_s", "lat_p50_s", "lat_p95_s", "lat_p99_s",
               "t_draft", "t_draft_forward", "t_target", "t_accept", "t_rollback", "t_other", "t_step",
               "t_target_steady", "t_draft_forward_steady", "t_step_steady", "first_step_tokens", "mean_accepted",
               "alpha_mle", "alpha_steps", "k_chosen", "step_profile", "kv_slots", "peak_memory_bytes", "cpu_share",
               "load_1m", "reruns")
PROMPT_LOOKUP = "prompt-lookup"


def mid_context(prompt_len: int, output_len: int) -> int:
    """The context a cost-curve point is measured at for a run of this length: prompt + half the
    output (T is about linear in the context, so this is the run's mean).  Example: (64, 256) -> 192."""
    return int(prompt_len) + int(output_len) // 2


def run_context(run: dict, prompt_len: int) -> float:
    """The mean length of the target's cache over a run, from its final length ``kv_slots`` (which
    counts a ragged batch's masked holes: the forwards attend over them too)."""
    return prompt_len + (float(run["kv_slots"]) - prompt_len) / 2


@dataclass
class EmbeddedPair:
    """The embedded target, its drafts and the held-out prompts, loaded on first use (a chapter
    that renders from its committed tables never loads a model).  ``drafts``: every draft of the
    family plus prompt lookup (a drafter without a model).  ``mode``: the forward every timed run
    and cost curve uses (`specdec.engine.modes.forward_for`: "lean" or "eager"); ``target`` and the
    model drafts are those forwards."""

    device: str = "cpu"
    seed: int = 0
    prompt_len: int = 64
    n_prompts: int = 8
    allow_stand_in: bool = False  # tiny random-weight stand-ins when the weights are absent (SMOKE)
    target_wanted: str = "embedded"
    dtype: str = "float32"  # the weights' dtype (`specdec.family.loader.resolve_dtype`)
    mode: str = "lean"

    @cached_property
    def subjects(self):
        return load_subjects(self.device, self.dtype, allow_stand_in=self.allow_stand_in, seed=self.seed)

    @cached_property
    def target(self):
        if self.mode not in ("lean", "eager"):
            raise ValueError(f"mode must be 'lean' or 'eager', got {self.mode!r}")
        return forward_for(self.subjects.target, self.mode)

    @cached_property
    def drafts(self) -> dict:
        self.target  # noqa: B018  (checks the mode)
        return {**{n: forward_for(d, self.mode) for n, d in self.subjects.drafts.items()},
                PROMPT_LOOKUP: PromptLookupDrafter(self.subjects.vocab_size)}

    @cached_property
    def model_drafts(self) -> dict:
        """The drafts that are models (have a forward to measure a cost curve of)."""
        return {n: d for n, d in self.drafts.items() if isinstance(d, torch.nn.Module)}

    @cached_property
    def history_drafts(self) -> dict:
        """The drafts without a forward of their own (n-gram table, prompt lookup)."""
        return {n: d for n, d in self.drafts.items() if n not in self.model_drafts}

    def pilot_prompts(self, batch: int) -> torch.Tensor:
        """(batch, prompt_len) prompts from the held-out validation plays: the pilot's, never measured."""
        return self.subjects.prompts(batch, self.prompt_len, seed=self.seed, split="validation")

    @cached_property
    def prompts(self) -> torch.Tensor:
        return self.subjects.prompts(self.n_prompts, self.prompt_len, seed=self.seed)  # (n_prompts, prompt_len)

    def describe(self) -> dict:
        """The chapter's setup values: models used, drafts, prompt checksum, notes, weight sha256."""
        notes = list(self.subjects.notes)
        if self.target_wanted != "embedded":
            notes.append(f"TARGET = {self.target_wanted!r} ignored here: the GPU run (chapter 07)")
        return {"models": self.subjects.kind, "mode": self.mode, "drafts": list(self.drafts),
                "model_drafts": list(self.model_drafts),
                "prompt_sha256": prompt_checksum(self.prompts), "notes": notes,
                "models_sha256": dict(self.subjects.sha256)}


def decoding_cells(prompts, temperatures, output_lens, batches, greedy_batches, *, prompt_len: int,
                   curve, draft: str) -> list[Cell]:
    """The cells of the main sweep (module docstring, 2): at batch B, the prompts in n // B groups
    (every batch size decodes the same n prompts; n a multiple of every B); each cell carries its
    T and c for the rule."""
    cells = []
    n = int(prompts.shape[0])
    for T in temperatures:
        for L in output_lens:
            for B in (batches if T > 0 else [b for b in batches if b in greedy_batches]):
                if n % B:
                    raise ValueError(f"{n} prompts do not split into groups of batch {B}")
                t, c = curve_at(curve, B, mid_context(prompt_len, L), draft)
                for g in range(n // B):
                    cells.append(Cell({"temperature": float(T), "output_len": L, "batch": B, "group": g},
                                      dict(ids=prompts[g * B:(g + 1) * B], max_new_tokens=L, temperature=float(T),
                                           c=c, curve=t)))
    return cells


def _run(target, drafter, k, *, k_max: int, warmup_steps: int, k_start: int, mode: str):
    """A configuration's run: generate on the cell's inputs, its summary with alpha, k chosen and the
    step profile the prediction needs (`specdec.measure.prediction.step_profile`)."""
    nan = float("nan")

    def go(x, seed):
        schedule = AdaptiveK(x["c"], x["curve"], k_max, min(k_start, k_max), warmup_steps) if k < 0 else max(k, 1)
        res = generate(target, x["ids"], drafter=drafter if k else None, k=schedule,
                       max_new_tokens=x["max_new_tokens"], temperature=x["temperature"],
                       generator=torch.Generator().manual_seed(seed), mode=mode)
        alpha, steps = res.stats.alpha_mle(k if k > 0 else None) if k else (nan, 0)
        chosen = [s["k"] for s in res.stats.steps[warmup_steps:]] or [k_start]
        return {**res.summary(), "alpha_mle": alpha, "alpha_steps": steps, "step_profile": step_profile(res.stats),
                "k_chosen": max(set(chosen), key=chosen.count) if k < 0 else k}
    return go


def decoding_configs(target, draft, ks, *, warmup_steps: int, k_start: int, dynamic: bool = True,
                     mode: str = "lean") -> list[Config]:
    """baseline (k = 0), k=K for each of ks, and (dynamic) the rule (k = -1) up to max(ks)."""
    kw = dict(k_max=max(ks), warmup_steps=warmup_steps, k_start=k_start, mode=mode)
    return ([Config("baseline", _run(target, draft, 0, **kw), k=0)]
            + [Config(f"k={k}", _run(target, draft, k, **kw), k=k) for k in ks]
            + ([Config("dynamic", _run(target, draft, -1, **kw), k=-1)] if dynamic else []))


def _rows(rows, draft_of) -> list[dict]:
    return [{c: (draft_of(r) if c == "draft" else r.get(c, float("nan"))) for c in RUN_COLUMNS} for r in rows]


def decoding_runs(target, draft, cells: list[Cell], ks, *, draft_name: str = "", warmup_steps: int, k_start: int,
                  repeats: int, warmup: int, seed: int, min_share: float = 0.9, max_reruns: int = 2,
                  warmup_tokens: int = 8, log=None, mode: str = "lean") -> list[dict]:
    """Every configuration of `decoding_configs` on every cell, interleaved and shuffled (module
    docstring), after ``warmup`` untimed rounds on short cells (one per distinct temperature and
    batch, ``warmup_tokens`` tokens); one row of RUN_COLUMNS per timed run, in the order they ran."""
    configs = decoding_configs(target, draft, ks, warmup_steps=warmup_steps, k_start=k_start, mode=mode)
    short = {(c.labels["temperature"], c.labels["batch"]): c for c in cells if c.labels["group"] == 0}
    warm = [Cell(c.labels, {**c.inputs, "max_new_tokens": warmup_tokens}) for c in short.values()] if warmup else []
    rows = protocol_sweep(configs, cells, repeats=repeats, seed=seed, min_share=min_share, max_reruns=max_reruns,
                          warm=warm, warm_rounds=warmup, log=log)
    return _rows(rows, lambda r: "" if r["config"] == "baseline" else draft_name)


def draft_runs(target, drafts: dict, prompts, *, k: int, output_len: int, groups: int, temperature: float,
               repeats: int, seed: int, min_share: float = 0.9, max_reruns: int = 2, log=None,
               mode: str = "lean") -> list[dict]:
    """The draft comparison: at batch 1, per prompt (``groups`` of them) and repeat, the baseline and
    each draft at draft length k, interleaved and shuffled; rows as `decoding_runs` (config = draft)."""
    cells = [Cell({"temperature": float(temperature), "output_len": output_len, "batch": 1, "group": g},
                  dict(ids=prompts[g:g + 1], max_new_tokens=output_len, temperature=float(temperature), c=0.0,
                       curve={1: 1.0})) for g in range(groups)]  # one batch-1 cell per prompt
    kw = dict(k_max=k, warmup_steps=0, k_start=k, mode=mode)
    configs = [Config("baseline", _run(target, None, 0, **kw), k=0)] + [
        Config(name, _run(target, d, k, **kw), k=k) for name, d in drafts.items()]
    warm = [Cell(cells[0].labels, {**cells[0].inputs, "max_new_tokens": 8})]
    rows = protocol_sweep(configs, cells, repeats=repeats, seed=seed, min_share=min_share, max_reruns=max_reruns,
                          warm=warm, log=log)
    return _rows(rows, lambda r: "" if r["config"] == "baseline" else r["config"])
