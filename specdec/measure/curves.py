"""A decoding pair's cost curves as a chapter measures and reads them: every batch size and context
a run's prediction needs, the target's T(n) and each draft's T_d(1), T_d(2), and one point read
back for the dynamic-k rule (the single curve: `specdec.measure.cost_curve`).

Example:
    curve = cost_curves(target, {"draft-small": draft}, [1], [1, 2], [64], repeats=3,
                        generator=torch.Generator().manual_seed(0))
    t, c = curve_at(curve, 1, 64, "draft-small")    # ({1: T(1), 2: T(2)}, T_d(1) / T(1))
"""

from __future__ import annotations

import torch

from specdec.core.cost import draft_cost
from specdec.io.results import records
from specdec.measure.cost_curve import cost_curve, one_token_forward

__all__ = ["cost_curves", "curve_at"]


def cost_curves(target, drafts: dict, batches, n_values, contexts, *, repeats: int, generator: torch.Generator,
                when: str = "before", interleaved: bool = False) -> list[dict]:
    """Per batch size and context: T(n) of the target for each n (model "target") and T_d(1),
    T_d(2) of each model draft (model = its name), labelled ``when``; each n timed in its own block
    of repeats, as a decoding loop repeats one shape (`cost_curve(blocked=True)`).  ``interleaved``: also each
    forward as the speculative loop runs it, right after the other model's forward -- model
    "target after <draft>" (the verification after the drafts) and "<draft> after target" (a
    step's first draft forward) -- measured with `specdec.measure.cost_curve.cost_curve(between=)`."""
    rows = []
    for ctx in contexts:
        for B in batches:
            kw = dict(context=ctx, batch=B, repeats=repeats, generator=generator, blocked=True)
            rows += [{"model": "target", **r, "when": when} for r in cost_curve(target, n_values, **kw)]
            for name, d in drafts.items():
                rows += [{"model": name, **r, "when": when} for r in cost_curve(d, [1, 2], **kw)]
                if interleaved:
                    touch_d = one_token_forward(d, context=ctx, batch=B, generator=generator)
                    touch_t = one_token_forward(target, context=ctx, batch=B, generator=generator)
                    rows += [{"model": f"target after {name}", **r, "when": when}
                             for r in cost_curve(target, n_values, between=touch_d, **kw)]
                    rows += [{"model": f"{name} after target", **r, "when": when}
                             for r in cost_curve(d, [1, 2], between=touch_t, **kw)]
    return rows


def curve_at(curve, batch: int, context: int, draft: str) -> tuple[dict, float]:
    """({n: T(n)} of the target, c = T_d(1) / T(1)) at one batch and context (means over the
    measurements of the point), for the dynamic-k rule."""
    rows = records(curve)
    sel = [r for r in rows if int(r["batch"]) == batch and int(r["context"]) == context]
    pts: dict = {}
    for r in sel:
        pts.setdefault((r["model"], int(r["n"])), []).append(float(r["median_s"]))
    t = {n: sum(v) / len(v) for (m, n), v in pts.items() if m == "target"}
    d1 = pts[(draft, 1)]
    return t, draft_cost(sum(d1) / len(d1), t[1])
