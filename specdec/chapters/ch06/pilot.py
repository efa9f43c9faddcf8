"""The price of a drafter without a forward, measured the way the loop pays it, so the draft rule
can weigh every drafter before any timed run.

A model draft's cost is a point of the cost curve (T_d(1), T_d(2) of its forward).  A history drafter
(n-gram table, prompt lookup) has no forward: its cost is its propose call (booked by the engine as its
forward time, `forward_seconds`, so the overhead excludes it for both kinds), which depends on the batch
and the context searched.  The pilot measures it in the decoding loop: at each batch size B, ``repeats``
runs of ``tokens`` new tokens at draft length k on B held-out validation prompts (never the measured
ones); the price per drafted token is the run's propose time over the tokens drafted (rows x k summed
over steps).  The runs' alpha (maximum likelihood) stands in for beta where chapter 04 has none.

`curve_rows` writes the pilot as cost-curve rows (model = the drafter, n = 1 and 2 at the price per
drafted token, at every batch and context of a curve; "target after <drafter>" = the target's own rows:
no other model's weights pass through the caches), so the rule, the dynamic-k rule and the cost model
price a history drafter with the same code as a model draft.

Example:
    rows = pilot_runs(target, {"ngram": ngram}, {1: prompts[:1]}, k=2, tokens=32, repeats=2, seed=0)
    curve = pd.concat([curve, pd.DataFrame(curve_rows(rows, curve))])
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.chapters.ch06.summary import groups
from specdec.engine.decode import generate
from specdec.io.results import records

__all__ = ["TOKENS", "REPEATS", "pilot_runs", "pilot_prices", "curve_rows"]

TOKENS, REPEATS = 32, 3  # a chapter's pilot: tokens per run and runs per (drafter, batch size)


def pilot_runs(target, drafters: dict, prompts_by_batch: dict, *, k: int, tokens: int, repeats: int, seed: int,
               mode: str = "lean") -> list[dict]:
    """One row per (drafter, batch, repeat): tokens drafted, propose seconds, seconds per drafted
    token, alpha; drafters interleaved within each repeat.  ``prompts_by_batch``: {B: (B, T) ids}."""
    if k < 1 or tokens < 2 or repeats < 1:
        raise ValueError(f"the pilot needs k >= 1, tokens >= 2 and repeats >= 1; got {k}, {tokens}, {repeats}")
    out = []
    for rep in range(repeats):
        for B, ids in prompts_by_batch.items():
            for name, d in drafters.items():
                res = generate(target, ids, drafter=d, k=k, max_new_tokens=tokens, temperature=1.0, mode=mode,
                               generator=torch.Generator().manual_seed(seed + rep))
                drafted = sum(r["k"] for r in res.stats.accept_rows() if r["k"] > 0)
                t_draft = res.summary()["t_draft"]
                if drafted == 0:
                    raise ValueError(f"the pilot of {name!r} at batch {B} drafted nothing in {tokens} tokens: "
                                     "its price per drafted token is undefined")
                out.append({"drafter": name, "batch": int(B), "repeat": rep, "tokens": int(tokens), "drafted": int(drafted),
                            "t_draft_s": float(t_draft), "s_per_drafted": float(t_draft) / drafted,
                            "alpha_mle": float(res.stats.alpha_mle(None)[0])})
    return out


def pilot_prices(rows) -> dict:
    """{(drafter, batch): (median seconds per drafted token, median alpha)} of `pilot_runs` rows."""
    return {(d, int(b)): (float(np.median([r["s_per_drafted"] for r in g])),
                          float(np.nanmedian([r["alpha_mle"] for r in g])))
            for (d, b), g in groups(records(rows), ("drafter", "batch")).items()}


def curve_rows(rows, curve) -> list[dict]:
    """Cost-curve rows for every drafter of the pilot (module docstring) at every (batch, context,
    when) of ``curve``'s target rows; a batch the pilot did not measure is an error."""
    prices = pilot_prices(rows)
    target = [r for r in records(curve) if r["model"] == "target"]
    out = []
    for name in sorted({d for d, _ in prices}):
        points = {(int(r["batch"]), int(r["context"]), r.get("when", "")) for r in target}
        for B, ctx, when in sorted(points):
            if (name, B) not in prices:
                raise ValueError(f"the pilot of {name!r} has no batch {B}, which the cost curve measures")
            s = prices[(name, B)][0]
            for n in (1, 2):
                row = {"model": name, "n": n, "batch": B, "context": ctx, "repeats": 0, "median_s": s,
                       "q1_s": s, "q3_s": s, "min_s": s, "max_s": s, "ratio": 1.0, "when": when}
                out += [row, {**row, "model": f"{name} after target"}]
        out += [{**r, "model": f"target after {name}"} for r in target]
    return out
