"""Chapter 06's measurements wired to its parameters: one method per table, so the chapter only
names what it shows (`specdec.chapters.ch06.runs` measures, `decoding_summary`, `prediction`
and `draft_choice` compute; this module passes the parameters and nothing else).

Example (a chapter's parameters P, e.g. `specdec.report.chapter.Chapter(globals()).P`):
    m = Measurements(P)
    curve = m.curves({"draft-small": m.pair.drafts["draft-small"]}, when="before")
    rule = m.rule(curve, beta_table)
"""

from __future__ import annotations

from functools import cached_property

import pandas as pd
import torch

from specdec.chapters.ch06 import runs as runs_lib
from specdec.chapters.ch06 import summary as summ_lib
from specdec.chapters.ch06 import values as vals
from specdec.measure import draft_choice, prediction
from specdec.chapters.ch06 import real_size as real_size_runs

__all__ = ["Measurements"]


class Measurements:
    """The embedded pair, the contexts and the random generator of one chapter run, and a method
    per table.  Models load on first use: rendering from committed tables never builds them."""

    def __init__(self, P):
        self.P = P
        self.k_max, self.L_long = max(P.KS), max(P.OUTPUT_LENS)
        self.ctx_long = runs_lib.mid_context(P.PROMPT_LEN, self.L_long)
        self.n_ref = min(P.K_REF + 1, self.k_max + 1)  # the verification length the prose quotes
        self.contexts = sorted({runs_lib.mid_context(P.PROMPT_LEN, L) for L in P.OUTPUT_LENS + [P.DRAFT_LEN]}
                               | set(P.CURVE_CONTEXTS))
        self.n_prompts = max(P.GROUPS * max(P.BATCHES), P.DRAFT_GROUPS, P.HF_GROUPS)
        self.pair = runs_lib.EmbeddedPair(P.DEVICE, P.SEED, P.PROMPT_LEN, self.n_prompts, allow_stand_in=P.SMOKE,
                                          target_wanted=P.TARGET, dtype=P.DTYPE)
        self.gen = torch.Generator().manual_seed(P.SEED)

    def curves(self, drafts: dict, *, when: str, interleaved: bool = False) -> list[dict]:
        """`decoding_runs.cost_curves` of the target and ``drafts`` at every batch size and context."""
        return runs_lib.cost_curves(self.pair.target, drafts, self.P.BATCHES, range(1, self.k_max + 2), self.contexts,
                                    repeats=self.P.CURVE_REPEATS, generator=self.gen, when=when,
                                    interleaved=interleaved)

    def rule(self, curve, beta) -> list[dict]:
        """The draft rule (`draft_choice.draft_rule`) over the model drafts: beta at temperature 1 from
        chapter 04's table, c and T(n) at batch 1 and the longest output's mean context."""
        drafts = list(self.pair.model_drafts)
        betas = {r["draft"]: r["beta"] for r in beta.to_dict("records")
                 if r["temperature"] == 1.0 and r["draft"] in drafts}
        costs = {d: vals.curve_values(curve, 1, self.ctx_long, 1, d)["c_b1"] for d in drafts}
        t = runs_lib.curve_at(curve, 1, self.ctx_long, drafts[0])[0]
        return draft_choice.draft_rule(betas, costs, t, k_max=self.k_max)

    def draft_runs(self) -> list[dict]:
        P = self.P
        return runs_lib.draft_runs(self.pair.target, self.pair.drafts, self.pair.prompts, k=P.K_REF,
                                   output_len=P.DRAFT_LEN, groups=P.DRAFT_GROUPS, temperature=1.0,
                                   repeats=P.DRAFT_REPEATS, seed=P.SEED, min_share=P.MIN_SHARE,
                                   max_reruns=P.MAX_RERUNS)

    def runs(self, draft: str, curve) -> list[dict]:
        """The main sweep (`decoding_runs.decoding_runs`) with ``draft``; the cells' T and c from ``curve``."""
        P = self.P
        cells = runs_lib.decoding_cells(self.pair.prompts, P.TEMPERATURES, P.OUTPUT_LENS, P.BATCHES, P.GREEDY_BATCHES,
                                        groups=P.GROUPS, prompt_len=P.PROMPT_LEN, curve=curve, draft=draft)
        return runs_lib.decoding_runs(self.pair.target, self.pair.drafts[draft], cells, P.KS, draft_name=draft,
                                      warmup_steps=P.PILOT_STEPS, k_start=P.PILOT_K, repeats=P.REPEATS,
                                      warmup=P.WARMUP, seed=P.SEED, min_share=P.MIN_SHARE, max_reruns=P.MAX_RERUNS)

    def predictions(self, runs, draft: str, *curves) -> list[dict]:
        """`decoding_summary.prediction_summary` of every speculative run, from every curve point of
        the chapter's pair (before, in the loop's order, after)."""
        curve = pd.concat([c[c["model"].str.startswith("target") | c["model"].str.startswith(draft)] for c in curves],
                          ignore_index=True)
        rows = prediction.paired_predictions(runs, prediction.lookup(curve), draft, keys=summ_lib.PAIR,
                                             context_of=lambda r: runs_lib.run_context(r, self.P.PROMPT_LEN))
        return summ_lib.prediction_summary(rows, tolerance=self.P.TOLERANCE)

    def hf_runs(self, draft: str) -> list[dict]:
        P = self.P
        return runs_lib.hf_runs(self.pair.target, self.pair.drafts[draft], self.pair.prompts, k=P.K_REF,
                                output_len=P.HF_LEN, groups=P.HF_GROUPS, temperature=1.0, repeats=P.HF_REPEATS,
                                seed=P.SEED, min_share=P.MIN_SHARE, max_reruns=P.MAX_RERUNS)

    @cached_property
    def real(self) -> dict:
        """The real-size surface and curves (`real_size_runs.controlled_runs`), measured once."""
        P = self.P
        return real_size_runs.controlled_runs(
            P.REAL_TARGETS, P.REAL_DRAFT, P.REAL_ALPHAS, P.REAL_KS, new_tokens=P.REAL_NEW, context=P.REAL_CONTEXT,
            n_values=P.REAL_CURVE_N, curve_repeats=P.REAL_CURVE_REPEATS, repeats=P.REAL_REPEATS, temperature=1.0,
            batches=P.REAL_BATCHES, curve_only=P.REAL_CURVE_ONLY, generator=torch.Generator().manual_seed(P.SEED + 1),
            target_sizes=P.REAL_TARGET_SIZES, draft_sizes=P.REAL_DRAFT_SIZES, min_share=P.MIN_SHARE,
            max_reruns=P.MAX_RERUNS)

    @property
    def k_regime(self) -> int:
        return max(self.k_max, max(self.P.REAL_KS))

    def regimes(self, curve_loop, real_curve, draft: str) -> list[dict]:
        """The synthesis figure's curves (`prediction.regime_rows`), alpha on a grid of 41 points."""
        pairs = prediction.regime_inputs(curve_loop, real_curve, draft, batch=1, context=self.ctx_long)
        return prediction.regime_rows(pairs, [i / 40 for i in range(41)], self.k_regime)
