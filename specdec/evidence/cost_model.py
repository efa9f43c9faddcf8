"""Chapter 03's tables: the idealized cost model E[L] = sum_{i=0..k} alpha^i, S = E[L] / (1 + k c)
(seed, eq. 3; `specdec.core.cost`), checked two independent ways and tabulated for its figures.

Example: speed_ratio_grid(np.linspace(0, 1, 3), [4], 0.1)[-1]["speed_ratio"] -> 5 / 1.4
"""

from __future__ import annotations

import numpy as np

from specdec.core.acceptance import truncated_geometric_pmf
from specdec.core.cost import break_even_alpha, expected_tokens, optimal_k, toy_speedup

__all__ = ["expected_tokens_check", "worked_example", "speed_ratio_grid", "optimal_k_grid", "break_even_grid"]


def expected_tokens_check(alphas, k: int, steps: int, rng: np.random.Generator) -> list[dict]:
    """E[L] three ways per alpha: the closed form, the expectation under the truncated-geometric law
    of N (accepted drafts), and a simulation of the stopping rule (``steps`` verification steps,
    Bernoulli(alpha) acceptances, stop at the first rejection) with its standard error."""
    rows = []
    for a in alphas:
        n = np.arange(k + 1)
        pmf = truncated_geometric_pmf(a, k)                                  # law of N
        from_law = float(((n + 1) * pmf).sum())
        accepted = rng.random((steps, k)) < a                                # (steps, k) Bernoulli(alpha)
        l_sim = np.cumprod(accepted, axis=1).sum(axis=1) + 1                 # drafts before the first rejection, + 1
        rows.append(dict(alpha=a, k=k, closed_form=expected_tokens(a, k), from_law=from_law,
                         simulated=float(l_sim.mean()), sim_std_error=float(l_sim.std(ddof=1) / np.sqrt(steps)),
                         steps=steps))
    return rows


def worked_example(alpha: float, alpha_low: float, k: int, c: float, k_max: int) -> dict:
    """The seed's worked example and its neighbours: E[L], cost, ratio, break-even alpha, optimal k."""
    k_opt, k_low = optimal_k(alpha, c, k_max=k_max), optimal_k(alpha_low, c, k_max=k_max)
    return {"el_example": expected_tokens(alpha, k), "cost_example": 1 + k * c,
            "s_example": toy_speedup(alpha, k, c), "el_low": expected_tokens(alpha_low, k),
            "s_low": toy_speedup(alpha_low, k, c), "be_example": break_even_alpha(k, c),
            "kopt_example": k_opt, "s_kopt_example": toy_speedup(alpha, k_opt, c),
            "kopt_low": k_low, "s_kopt_low": toy_speedup(alpha_low, k_low, c)}


def speed_ratio_grid(alphas, ks, c: float) -> list[dict]:
    """E[L] and S_toy for every (k, alpha): the seed's figure."""
    rows = []
    for k in ks:
        s = toy_speedup(alphas, k, c)
        rows += [dict(alpha=float(a), k=k, c=c, expected_tokens=float(expected_tokens(a, k)), speed_ratio=float(v))
                 for a, v in zip(alphas, s)]
    return rows


def optimal_k_grid(alphas, cs, k_max: int) -> list[dict]:
    """The best draft length (0 = do not speculate) and its ratio for every (c, alpha)."""
    rows = []
    for c in cs:
        kopt = optimal_k(alphas, c, k_max=k_max)
        rows += [dict(alpha=float(a), c=c, optimal_k=int(kk), speed_ratio=float(toy_speedup(a, kk, c)))
                 for a, kk in zip(alphas, kopt)]
    return rows


def break_even_grid(k_max: int, cs) -> list[dict]:
    """The acceptance rate below which k drafts lose, for k = 1..k_max and every c."""
    ks = np.arange(1, k_max + 1)
    return [dict(k=int(kk), c=c, break_even_alpha=float(b)) for c in cs for kk, b in zip(ks, break_even_alpha(ks, c))]
