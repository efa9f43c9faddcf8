"""Chapter 03's tables: the idealized cost model E[L] = sum_{i=0..k} alpha^i, S = E[L] / (1 + k c)
(seed, eq. 3; `specdec.core.cost`), E[L] and Var(L) checked two independent ways, Leviathan et al.'s
corollary (some k >= 1 gives S > 1 iff alpha > c) checked on a grid, and the figures' grids.

Example: speed_ratio_grid(np.linspace(0, 1, 3), [4], 0.1)[-1]["speed_ratio"] -> 5 / 1.4
"""

from __future__ import annotations

import numpy as np

from specdec.core.acceptance import truncated_geometric_pmf
from specdec.core.cost import accepted_length_variance, break_even_alpha, expected_tokens, optimal_k, toy_speedup

__all__ = ["expected_tokens_check", "worked_example", "speed_ratio_grid", "optimal_k_grid", "break_even_grid",
           "corollary_check", "speedups_per_cost", "sample_variance_se", "TIE"]

TIE = 1e-9  # |alpha - c| within this is the boundary case alpha = c (S(1) = 1 there, up to rounding)


def sample_variance_se(x: np.ndarray) -> tuple[float, float]:
    """The unbiased sample variance s^2 of ``x`` and its standard error from the fourth central moment:
    Var(s^2) = (m4 - s^4 (n - 3) / (n - 1)) / n.

    Example: sample_variance_se(np.array([0., 0, 1, 1])) -> (0.3333..., 0.0797...)
    """
    n = x.size
    s2 = float(x.var(ddof=1))
    m4 = float(((x - x.mean()) ** 4).mean())
    return s2, float(np.sqrt(max(m4 - s2**2 * (n - 3) / (n - 1), 0.0) / n))


def expected_tokens_check(alphas, k: int, steps: int, rng: np.random.Generator) -> list[dict]:
    """E[L] and Var(L) three ways per alpha: the closed form (`expected_tokens`,
    `accepted_length_variance`), the moments of the truncated-geometric law of N (accepted drafts),
    and a simulation of the stopping rule (``steps`` verification steps, Bernoulli(alpha)
    acceptances, stop at the first rejection): its mean and sample variance, each with its standard
    error (the variance's from the fourth central moment, `sample_variance_se`)."""
    rows = []
    for a in alphas:
        n = np.arange(k + 1)
        pmf = truncated_geometric_pmf(a, k)                                  # law of N
        from_law = float(((n + 1) * pmf).sum())
        accepted = rng.random((steps, k)) < a                                # (steps, k) Bernoulli(alpha)
        l_sim = np.cumprod(accepted, axis=1).sum(axis=1) + 1                 # drafts before the first rejection, + 1
        var_sim, var_se = sample_variance_se(l_sim.astype(np.float64))
        rows.append(dict(alpha=a, k=k, closed_form=expected_tokens(a, k), from_law=from_law,
                         simulated=float(l_sim.mean()), sim_std_error=float(l_sim.std(ddof=1) / np.sqrt(steps)),
                         steps=steps, var_closed_form=accepted_length_variance(a, k),
                         var_from_law=float(((n + 1 - from_law) ** 2 * pmf).sum()), var_simulated=var_sim,
                         var_sim_std_error=var_se))
    return rows


def worked_example(alpha: float, alpha_low: float, k: int, c: float, k_max: int) -> dict:
    """The seed's worked example and its neighbours: E[L], Var(L), its standard deviation and
    coefficient of variation, P(L = 1) = 1 - alpha and P(L = k + 1) = alpha^k, cost, ratio,
    break-even alpha, optimal k."""
    k_opt, k_low = optimal_k(alpha, c, k_max=k_max), optimal_k(alpha_low, c, k_max=k_max)
    var = accepted_length_variance(alpha, k)
    return {"el_example": expected_tokens(alpha, k), "var_example": var, "sd_example": float(np.sqrt(var)),
            "cv_example": float(np.sqrt(var)) / expected_tokens(alpha, k), "l_max_example": k + 1,
            "p_l_one": 1 - alpha, "p_l_max": alpha**k, "cost_example": 1 + k * c,
            "s_example": toy_speedup(alpha, k, c), "el_low": expected_tokens(alpha_low, k),
            "s_low": toy_speedup(alpha_low, k, c), "be_example": break_even_alpha(k, c),
            "kopt_example": k_opt, "s_kopt_example": toy_speedup(alpha, k_opt, c),
            "kopt_low": k_low, "s_kopt_low": toy_speedup(alpha_low, k_low, c)}


def speed_ratio_grid(alphas, ks, c: float) -> list[dict]:
    """E[L] and S_toy for every (k, alpha): the seed's figure."""
    return [dict(alpha=float(a), k=k, c=c, expected_tokens=float(expected_tokens(a, k)), speed_ratio=float(v))
            for k in ks for a, v in zip(alphas, toy_speedup(alphas, k, c))]


def optimal_k_grid(alphas, cs, k_max: int) -> list[dict]:
    """The best draft length (0 = do not speculate) and its ratio for every (c, alpha)."""
    return [dict(alpha=float(a), c=c, optimal_k=int(kk), speed_ratio=float(toy_speedup(a, kk, c)))
            for c in cs for a, kk in zip(alphas, optimal_k(alphas, c, k_max=k_max))]


def break_even_grid(k_max: int, cs) -> list[dict]:
    """The acceptance rate below which k drafts lose, for k = 1..k_max and every c."""
    ks = np.arange(1, k_max + 1)
    return [dict(k=int(kk), c=c, break_even_alpha=float(b)) for c in cs for kk, b in zip(ks, break_even_alpha(ks, c))]


def corollary_check(alphas, cs, k_max: int, speed=toy_speedup) -> list[dict]:
    """Leviathan et al.'s corollary on a grid: some k in 1..k_max gives speed(alpha, k, c) > 1 if and only
    if alpha > c (idealized model, S(k) = sum_{i=0}^{k} alpha^i / (1 + k c)).

    Why: sum_{i=0}^{k} alpha^i <= 1 + k alpha (alpha^i <= alpha), so alpha <= c gives S(k) <= 1 for
    every k, while alpha > c gives S(1) = (1 + alpha) / (1 + c) > 1; the k = 1 break-even is alpha = c.

    Per c: ``n_alphas`` grid points; ``n_above_c`` with alpha > c; ``n_ties`` with |alpha - c| <= TIE,
    where max_k S must equal 1 to TIE (S(1) = 1: no speedup); ``n_speedup`` (non-ties) where max_k
    speed > 1; ``n_disagree`` (must be 0) the non-ties where (max_k speed > 1) != (alpha > c) and the
    ties where max_k speed is not 1; ``k1_break_even`` = break_even_alpha(1, c), ``break_even_gap`` =
    k1_break_even - c (~0).  ``speed`` is replaceable so that a wrong model can be shown to fail.

    Example: corollary_check([0.05, 0.1, 0.3], [0.1], 8)[0] -> n_speedup 1, n_ties 1, n_disagree 0
    """
    a = np.asarray(alphas, dtype=np.float64)
    ks = np.arange(1, k_max + 1)[:, None]                                   # (K, 1)
    rows = []
    for c in cs:
        s = np.asarray(speed(a[None, :], ks, c))                            # (K, A)
        best = s.max(axis=0)                                                # (A,) max over k >= 1
        tie = np.abs(a - c) <= TIE
        pays, above = (best > 1.0) & ~tie, (a > c) & ~tie
        wrong = ((pays != above) & ~tie) | (tie & (np.abs(best - 1.0) > TIE))
        b1 = float(break_even_alpha(1, c))
        rows.append(dict(c=c, n_alphas=int(a.size), n_above_c=int(above.sum()), n_ties=int(tie.sum()),
                         n_speedup=int(pays.sum()), n_disagree=int(wrong.sum()), k1_break_even=b1, break_even_gap=b1 - c))
    return rows


def speedups_per_cost(kgrid, cs) -> list[int]:
    """For each c in ``cs``, how many alphas of the optimal-k table (`optimal_k_grid`, as a DataFrame)
    speculate (optimal_k > 0): must equal `corollary_check`'s n_speedup, the same question answered
    by `specdec.core.cost.optimal_k` instead of a maximum over k.

    Example: speedups_per_cost(pandas.DataFrame(optimal_k_grid([0.05, 0.1, 0.3], [0.1], 8)), [0.1]) -> [1]
    """
    return [int((kgrid.loc[kgrid["c"] == c, "optimal_k"] > 0).sum()) for c in cs]
