"""Chapter 06's measurements wired to its parameters: one method per table, so the chapter only
names what it shows (`specdec.chapters.ch06.runs` measures, `decoding_summary`, `prediction`
and `draft_choice` compute; this module passes the parameters and nothing else).

Example (a chapter's parameters P, e.g. `specdec.report.chapter.Chapter(globals()).P`):
    m = Measurements(P)
    curve = m.curves({"draft-small": m.pair.drafts["draft-small"]}, when="before")
    rule = m.rule(curve, beta_table)
"""

from __future__ import annotations

import os

import pandas as pd
import torch

from specdec.io.paths import CHAPTERS, RESULTS_DIR
from specdec.io.results import read_table

from specdec.chapters.ch06 import pilot as pilot_lib, runs as runs_lib, summary as summ_lib
from specdec.chapters.ch06.page import curve_values
from specdec.measure import curves, draft_choice, prediction

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
        self.n_prompts = max(P.PROMPTS, P.DRAFT_GROUPS)
        self.pair = runs_lib.EmbeddedPair(P.DEVICE, P.SEED, P.PROMPT_LEN, self.n_prompts, allow_stand_in=P.SMOKE,
                                          target_wanted=P.TARGET, dtype=P.DTYPE, mode=P.MODE)
        self.gen = torch.Generator().manual_seed(P.SEED)

    def setup(self) -> dict:
        """The pair's description (`runs.EmbeddedPair.describe`) and the load average at the start."""
        return {**self.pair.describe(), "load_1m_start": os.getloadavg()[0]}

    def load_end(self) -> dict:
        return {"load_1m_end": os.getloadavg()[0]}

    def curves(self, drafts: dict, *, when: str, interleaved: bool = False) -> list[dict]:
        """`specdec.measure.curves.cost_curves` of the target and ``drafts`` at every batch size and context."""
        return curves.cost_curves(self.pair.target, drafts, self.P.BATCHES, range(1, self.k_max + 2), self.contexts,
                                  repeats=self.P.CURVE_REPEATS, generator=self.gen, when=when,
                                  interleaved=interleaved)

    def pilot(self) -> list[dict]:
        """The history drafters' price per drafted token in the loop, at every batch size
        (`specdec.chapters.ch06.pilot`), on validation prompts at k = K_REF."""
        P = self.P
        return pilot_lib.pilot_runs(self.pair.target, self.pair.history_drafts,
                                    {B: self.pair.pilot_prompts(B) for B in P.BATCHES}, k=P.K_REF,
                                    tokens=pilot_lib.TOKENS, repeats=pilot_lib.REPEATS, seed=P.SEED, mode=P.MODE)

    def priced(self, curve, pilot) -> pd.DataFrame:
        """``curve`` with the pilot's rows for the history drafters (`pilot.curve_rows`)."""
        return pd.concat([curve, pd.DataFrame(pilot_lib.curve_rows(pilot, curve))], ignore_index=True)

    def rule(self, curve, pilot) -> list[dict]:
        """The draft rule (`draft_choice.draft_rule`) over every drafter: beta at temperature 1 from
        chapter 04's table (teacher-forced), or the pilot's alpha for a drafter chapter 04 has none
        for; c from the cost curve (a model draft's forward) or the pilot (a history drafter's
        propose), and T(n), at batch 1 and the longest output's mean context."""
        beta = read_table(RESULTS_DIR / CHAPTERS["family"] / "beta.csv")
        drafts = list(self.pair.drafts)
        prices = pilot_lib.pilot_prices(pilot)
        betas = {r["draft"]: r["beta"] for r in beta.to_dict("records")
                 if r["temperature"] == 1.0 and r["draft"] in drafts}
        beta_from = {d: "chapter 04" if d in betas else "pilot" for d in drafts}
        betas.update({d: prices[(d, 1)][1] for d in drafts if d not in betas})
        priced = self.priced(curve, pilot)
        costs = {d: curve_values(priced, 1, self.ctx_long, 1, d)["c_b1"] for d in drafts}
        t = curves.curve_at(priced, 1, self.ctx_long, drafts[0])[0]
        rows = draft_choice.draft_rule(betas, costs, t, k_max=self.k_max)
        return [{**r, "beta_from": beta_from[r["draft"]],
                 "c_from": "pilot" if r["draft"] in self.pair.history_drafts else "cost curve"} for r in rows]

    def loop_curve(self, draft: str, *, when: str) -> list[dict]:
        """The target's curve with ``draft``'s forwards as the loop runs them (interleaved); for a
        history drafter, the target's own (no other model's forward runs between)."""
        drafts = {draft: self.pair.drafts[draft]} if draft in self.pair.model_drafts else {}
        return self.curves(drafts, when=when, interleaved=True)

    def draft_runs(self) -> list[dict]:
        P = self.P
        return runs_lib.draft_runs(self.pair.target, self.pair.drafts, self.pair.prompts, k=P.K_REF,
                                   output_len=P.DRAFT_LEN, groups=P.DRAFT_GROUPS, temperature=1.0,
                                   repeats=P.DRAFT_REPEATS, seed=P.SEED, min_share=P.MIN_SHARE,
                                   max_reruns=P.MAX_RERUNS, mode=P.MODE)

    def runs(self, draft: str, curve) -> list[dict]:
        """The main sweep (`decoding_runs.decoding_runs`) with ``draft``; the cells' T and c from ``curve``."""
        P = self.P
        cells = runs_lib.decoding_cells(self.pair.prompts[:P.PROMPTS], P.TEMPERATURES, P.OUTPUT_LENS, P.BATCHES,
                                        P.GREEDY_BATCHES, prompt_len=P.PROMPT_LEN, curve=curve, draft=draft)
        return runs_lib.decoding_runs(self.pair.target, self.pair.drafts[draft], cells, P.KS, draft_name=draft,
                                      warmup_steps=P.PILOT_STEPS, k_start=P.PILOT_K, repeats=P.REPEATS,
                                      warmup=P.WARMUP, seed=P.SEED, min_share=P.MIN_SHARE, max_reruns=P.MAX_RERUNS,
                                      mode=P.MODE)

    def predictions(self, runs, draft: str, *curves) -> list[dict]:
        """`decoding_summary.prediction_summary` of every speculative run, from every curve point of
        the chapter's pair (before, in the loop's order, after)."""
        curve = pd.concat([c[c["model"].str.startswith("target") | c["model"].str.startswith(draft)] for c in curves],
                          ignore_index=True)
        rows = prediction.paired_predictions(runs, prediction.lookup(curve), draft, keys=summ_lib.PAIR,
                                             context_of=lambda r: runs_lib.run_context(r, self.P.PROMPT_LEN))
        return summ_lib.prediction_summary(rows, tolerance=self.P.TOLERANCE)

    def regimes(self, curve_loop, real_curve, draft: str, k_max: int) -> list[dict]:
        """The synthesis figure's curves (`prediction.regime_rows`) for k <= ``k_max``, alpha on a grid of
        41 points; ``real_curve``: `make surface`'s cost curves."""
        pairs = prediction.regime_inputs(curve_loop, real_curve, draft, batch=1, context=self.ctx_long)
        return prediction.regime_rows(pairs, [i / 40 for i in range(41)], k_max)
