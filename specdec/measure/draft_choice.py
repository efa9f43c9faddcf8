"""Which draft a measured chapter uses, decided by a rule stated before any decoding run.

The rule: for each model draft d, its acceptance beta_d measured teacher-forced on held-out text
(chapter 04, at the chapter's temperature) and its cost c_d = T_d(1) / T(1) measured here give the
extended cost model's best speed ratio over k = 0..k_max,

    S_d = max_k E[L](beta_d, k) / (T(k+1)/T(1) + k c_d)        (`specdec.core.cost.best_k`),

and the draft with the largest S_d is the chapter's draft (ties: the cheaper draft).  Where no
drafter is predicted to pay (every S_d = 1, at k = 0), the rule ranks them by their best speculative
ratio, max over k >= 1 (the one that loses least when it drafts), never by cost alone: a noisy cost
curve must not hand the chapter a drafter that cannot help (a beta of 0).  Where some drafter pays,
the two rankings agree.  Every drafter
is a candidate once it has a beta and a cost: a history drafter (n-gram, prompt lookup), which runs
no forward, is priced by its propose time per drafted token in the loop
(`specdec.chapters.ch06.pilot`), and a drafter without a teacher-forced beta by its pilot's alpha.

Example:
    rows = draft_rule({"draft-small": 0.48, "draft-distilled": 0.59}, {"draft-small": 0.13,
                      "draft-distilled": 0.13}, {1: 1.0, 2: 1.9, 3: 2.5}, k_max=2)
    chosen(rows) -> "draft-distilled"
"""

from __future__ import annotations

from specdec.core.cost import best_k
from specdec.io.results import records

__all__ = ["draft_rule", "chosen", "decide", "best_of"]


def draft_rule(betas: dict, costs: dict, curve: dict, *, k_max: int) -> list[dict]:
    """One row per model draft with a beta and a cost: beta, c, the best k and its predicted speed
    ratio S, the best speculative ratio (k >= 1, ``best_speculative``), and ``chosen`` on exactly one
    row (the largest best speculative ratio, which is the largest S whenever some S > 1; ties to the
    smaller c; module docstring).  A draft missing from either dict is an error: the rule would be
    silently narrower."""
    names = sorted(set(betas) | set(costs))
    missing = [n for n in names if n not in betas or n not in costs]
    if missing or not names:
        raise ValueError(f"every candidate needs a beta and a cost; missing for {missing or 'all'}")
    lacking = [j for j in range(1, k_max + 2) if j not in curve]
    if lacking:  # every k is a candidate of the rule: a curve with holes would narrow it silently
        raise ValueError(f"the cost curve lacks T(n) for n = {lacking}")
    rows = []
    for n in names:
        k, s = best_k(betas[n], costs[n], k_max, curve)
        rows.append({"draft": n, "beta": float(betas[n]), "c": float(costs[n]), "k_best": k, "predicted": s,
                     "best_speculative": best_k(betas[n], costs[n], k_max, curve, k_min=1)[1]})
    best = max(rows, key=_rank)
    for r in rows:
        r["chosen"] = r is best
    return rows


def _rank(row: dict) -> tuple:
    """The rule's order: the best speculative ratio, ties to the smaller c; a table made before that
    column ranks by the predicted S (the same order whenever some drafter pays)."""
    return float(row.get("best_speculative", row["predicted"])), -float(row["c"])


def chosen(rows) -> str:
    """The name of the draft the rule chose."""
    (name,) = [r["draft"] for r in records(rows) if bool(r["chosen"])]
    return name


def decide(rows, forced: str = "") -> tuple[str, dict]:
    """(the draft a chapter decodes with, the words for it): the rule's choice, unless ``forced``
    names a candidate, which is then used and said.  Example: decide(rows) -> ("draft-distilled",
    {"rule_draft": "draft-distilled", "draft_name": "draft-distilled", "forced": "(the rule's choice)"})."""
    rule = chosen(rows)
    names = {r["draft"] for r in records(rows)}
    draft = forced if forced in names else rule
    words = "(the rule's choice)" if draft == rule else f"(forced by DRAFT; the rule chose {rule})"
    return draft, {"rule_draft": rule, "draft_name": draft, "forced": words}


def best_of(rows, names) -> str:
    """The drafter among ``names`` the rule ranks first (`_rank`):
    e.g. the model draft a comparison that takes only models (Hugging Face's assisted generation)
    uses when the rule chose a history drafter."""
    cand = [r for r in records(rows) if r["draft"] in set(names)]
    if not cand:
        raise ValueError(f"none of {sorted(names)} is among the rule's drafters")
    return max(cand, key=_rank)["draft"]
