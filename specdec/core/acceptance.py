"""Acceptance statistics of measured speculative decoding: beta, per-position rates, the law of
the accepted length, and E[L] predicted from per-step betas.

Definitions (Leviathan et al. 2022, section 3.1; seed, equations 1-3).  At draft position i of a
step, with processed target and draft distributions p_i, q_i given the drafted prefix,

    beta_i = sum_x min(p_i(x), q_i(x))          (probability that position i is accepted, given
                                                 that the step reached it; token verification)
    a_i    = min(1, p_i(x_i) / q_i(x_i))        (acceptance probability of the realised draft x_i)

The seed's model assumes one constant alpha for every position and context, so the number N of
accepted drafts out of k is truncated-geometric:

    P(N = n) = alpha^n (1 - alpha)  (n < k),    P(N = k) = alpha^k,     E[L] = E[N] + 1.

Two predictions of E[L] from what the target and the draft computed at each step s:
  * independent:   L_ind(s) = 1 + sum_i prod_{j<=i} beta_j(s)   (cost.expected_tokens_from_positions)
  * conditional:   L_rb(s)  = 1 + sum_i beta_i(s) prod_{j<i} a_j(s)
L_rb is E[L | drafted prefixes] exactly (acceptance of x_j has probability a_j given x_j, and
position i is reached only if all earlier drafts passed), so mean(L - L_rb) is 0 up to noise under
token verification; L_ind additionally assumes acceptances independent of the drafted tokens.

Pure numpy/torch math: no model, file or plot.  scipy is imported only inside `geometric_gof`.

Example: context_beta(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> tensor(0.6667);
         accepted_length_counts([0, 2, 4, 4], k=4) -> array([1, 0, 1, 0, 2])
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.core.cost import expected_tokens_from_positions
from specdec.core.stats import cluster_ratio_interval, mean_interval, wilson_interval

__all__ = ["context_beta", "accepted_length_counts",
           "position_acceptance", "truncated_geometric_pmf", "fit_alpha", "geometric_gof",
           "predicted_length_independent", "predicted_length_conditional", "summarize_steps",
           "distinct_ngram_ratio"]


def _check_dist(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"{name} must be a floating tensor (..., V) with V >= 1")
    if bool(torch.isnan(x).any()) or bool((x < 0).any()):
        raise ValueError(f"{name} must be non-negative and free of NaN")
    if bool(((x.sum(-1) - 1).abs() > 1e-3).any()):
        raise ValueError(f"{name} rows must sum to 1 (processed probabilities, not logits)")


def context_beta(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """beta = sum_x min(p(x), q(x)) over the last axis: (..., V), (..., V) -> (...).

    1 - beta is the total variation distance between p and q.
    Example: context_beta(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> tensor(0.6667)
    """
    _check_dist(p, "p")
    _check_dist(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    return torch.minimum(p, q).sum(-1)


def accepted_length_counts(n, k: int) -> np.ndarray:
    """Histogram (k+1,) of accepted drafts per step, values 0..k.

    Example: accepted_length_counts([0, 2, 4, 4], k=4) -> array([1, 0, 1, 0, 2])
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    a = np.asarray(n)
    if a.size == 0 or not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() > k:
        raise ValueError(f"accepted counts must be integers in [0, {k}] (and at least one), got {n!r}")
    return np.bincount(a.ravel(), minlength=k + 1)


def position_acceptance(n, k: int, level: float = 0.95) -> list[dict]:
    """Per draft position i = 1..k from accepted counts n (steps with k drafts each):

    reached = #(N >= i-1), accepted = #(N >= i), rate = P(N >= i), conditional = accepted / reached
    (the seed's alpha at position i), each with a Wilson interval.
    Example: n = [0, 2, 4, 1], k = 4 -> position 1: rate 3/4, conditional 3/4; position 2: 2/4, 2/3
    """
    counts = accepted_length_counts(n, k)
    total = int(counts.sum())
    ge = counts[::-1].cumsum()[::-1]  # ge[i] = #(N >= i), (k+1,)
    rows = []
    for i in range(1, k + 1):
        reached, acc = int(ge[i - 1]), int(ge[i])
        lo, hi = wilson_interval(acc, total, level)
        row = {"position": i, "steps": total, "reached": reached, "accepted": acc, "rate": acc / total,
               "rate_lo": lo, "rate_hi": hi}
        if reached:
            clo, chi = wilson_interval(acc, reached, level)
            row.update(conditional=acc / reached, conditional_lo=clo, conditional_hi=chi)
        else:
            row.update(conditional=float("nan"), conditional_lo=float("nan"), conditional_hi=float("nan"))
        rows.append(row)
    return rows


def truncated_geometric_pmf(alpha: float, k: int) -> np.ndarray:
    """P(N = n), n = 0..k, for constant independent acceptance alpha (seed's assumption).

    Example: truncated_geometric_pmf(0.5, 2) -> array([0.5, 0.25, 0.25])
    """
    if not (0.0 <= float(alpha) <= 1.0):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    n = np.arange(k + 1)
    return np.where(n < k, float(alpha) ** n * (1 - float(alpha)), float(alpha) ** k)


def fit_alpha(counts) -> float:
    """Maximum-likelihood constant alpha from a histogram `counts` (k+1,) of accepted drafts.

    Each step contributes n successes and one failure unless n = k, so
    alpha_hat = sum n / (sum n + #(N < k)).
    Example: fit_alpha([1, 0, 1, 0, 2]) -> 10 / (10 + 2) = 0.8333...
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size < 2 or np.any(c < 0) or c.sum() <= 0:
        raise ValueError(f"counts must be a non-negative histogram over 0..k with k >= 1, got {counts!r}")
    succ = float((np.arange(c.size) * c).sum())
    fail = float(c[:-1].sum())
    return succ / (succ + fail) if succ + fail > 0 else 0.0


def _pool(expected: np.ndarray, min_expected: float) -> np.ndarray:
    """The pooled bin of each bin (k+1,): adjacent bins merge left to right until each pooled bin
    expects >= min_expected; a short tail joins the last pooled bin.  Example: expected [6, 2, 2, 3]
    with min 5 -> [0, 1, 1, 1]"""
    label, cur_e, cur = np.zeros(expected.size, dtype=np.int64), 0.0, 0
    for j, e in enumerate(expected):
        label[j], cur_e = cur, cur_e + e
        if cur_e >= min_expected:
            cur, cur_e = cur + 1, 0.0
    if cur > 0 and label[-1] == cur:  # a short tail joins the last pooled bin
        label[label == cur] = cur - 1
    return label


def geometric_gof(counts, alpha: float | None = None, min_expected: float = 5.0) -> dict:
    """G-test of the truncated-geometric law against an accepted-length histogram (k+1,), or
    against histograms per cluster (C, k+1) (e.g. per prompt: a prompt's steps are not independent).

    alpha=None fits alpha by `fit_alpha` on the total and removes one degree of freedom.  Bins
    expecting fewer than `min_expected` steps are pooled with their neighbours.  G = 2 sum O log(O / E),
    compared with chi2(bins - 1 - fitted).  Per cluster (C >= 2), G is divided by the Rao-Scott mean
    design effect of the pooled bins (`specdec.core.stats.rao_scott_deff`; an estimate below 1,
    negative within-cluster correlation or noise, counts as 1: never more liberal than the
    independent test), and p_value is the corrected one; clusters without steps are dropped, and
    fewer than 2 clusters with steps give no corrected test (p_value NaN).  Returns alpha, G, df, p_value, steps,
    bins, deff (1 without clusters), G_corrected, p_independent (the test as if steps were independent).
    Example: geometric_gof([500, 250, 250], alpha=0.5)["G"] -> 0.0
    """
    from scipy.stats import chi2

    from specdec.core.stats import rao_scott_deff

    per = np.asarray(counts, dtype=np.float64)
    if per.ndim not in (1, 2) or (per.ndim == 2 and per.shape[0] < 2):
        raise ValueError(f"counts must be a histogram (k+1,) or per cluster (C >= 2, k+1), got shape {per.shape}")
    c = per.sum(0) if per.ndim == 2 else per
    fitted = alpha is None
    a = fit_alpha(c) if fitted else float(alpha)
    total = float(c.sum())
    pmf = truncated_geometric_pmf(a, c.size - 1)
    label = _pool(pmf * total, min_expected)
    obs, exp = np.bincount(label, weights=c), np.bincount(label, weights=pmf * total)
    df = obs.size - 1 - int(fitted)
    out = {"alpha": a, "df": df, "steps": int(total), "bins": int(obs.size), "deff": 1.0}
    if df < 1:
        return {**out, "G": float("nan"), "p_value": float("nan"), "G_corrected": float("nan"),
                "p_independent": float("nan")}
    if np.any((exp <= 0) & (obs > 0)):  # a count where the law puts no mass: impossible under it
        return {**out, "G": float("inf"), "p_value": 0.0, "G_corrected": float("inf"), "p_independent": 0.0}
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(obs > 0, obs * np.log(obs / exp), 0.0)
    g = float(2 * terms.sum())
    if per.ndim == 2:
        pooled = np.stack([np.bincount(label, weights=row, minlength=obs.size) for row in per if row.sum() > 0])
        out["deff"] = max(1.0, rao_scott_deff(pooled, exp / total)) if len(pooled) >= 2 else float("nan")
    return {**out, "G": g, "G_corrected": g / out["deff"], "p_value": float(chi2.sf(g / out["deff"], df)),
            "p_independent": float(chi2.sf(g, df))}


def _check_step_matrix(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    # beta = sum min(p, q) from float32 distributions can exceed 1 by ~1e-7 (a draft equal to the
    # target); 1e-6 admits that rounding, anything larger is not a probability
    if a.ndim != 2 or a.shape[1] < 1 or not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1 + 1e-6):
        raise ValueError(f"{name} must be a (steps, k) array of probabilities in [0, 1]")
    return np.clip(a, 0.0, 1.0)


def predicted_length_independent(betas) -> np.ndarray:
    """Per step: 1 + sum_i prod_{j<=i} beta_j, treating positions as independent.  (S, k) -> (S,)

    Example: predicted_length_independent([[0.9, 0.5]]) -> array([2.35])
    """
    return np.atleast_1d(expected_tokens_from_positions(_check_step_matrix(betas, "betas")))


def predicted_length_conditional(a, betas) -> np.ndarray:
    """Per step: E[L | drafted prefixes] = 1 + sum_i beta_i prod_{j<i} a_j (token verification).

    a: (S, k) realised acceptance probabilities min(1, p(x_j)/q(x_j)); betas: (S, k).  -> (S,)
    Example: predicted_length_conditional([[0.5, 1.0]], [[0.9, 0.6]]) -> array([1 + 0.9 + 0.5 * 0.6]) = [2.2]
    """
    aa, bb = _check_step_matrix(a, "a"), _check_step_matrix(betas, "betas")
    if aa.shape != bb.shape:
        raise ValueError(f"a and betas must have the same shape, got {aa.shape} and {bb.shape}")
    reach = np.cumprod(np.concatenate([np.ones((aa.shape[0], 1)), aa[:, :-1]], 1), 1)  # prod_{j<i} a_j
    return 1.0 + (bb * reach).sum(1)


def summarize_steps(steps: list[dict], k: int, level: float = 0.95) -> dict:
    """Acceptance statistics of recorded steps (dicts with n (A,), beta (A, k), a (A, k); e.g.
    `specdec.measure.recorder.AcceptanceRecorder.steps`), over the steps that drafted the full k.

    alpha_mle (successes / (successes + failures)), measured E[L] and mean(L - L_rb), each with an
    interval; the two predictions; the G-test of the geometric law; mean beta overall and per
    position (beta_pos_1..k).  Intervals: when the steps carry ``rows`` (the prompt of each row)
    and there are at least two prompts, a bootstrap over prompts (`specdec.core.stats.
    cluster_ratio_interval`: the steps of one prompt are not independent) and the G-test on the
    histograms per prompt (Rao-Scott-corrected, `geometric_gof`; ``gof_p_independent`` is the test
    as if steps were independent, ``gof_deff`` the design effect), and ``counts_by_prompt``, the
    histogram of each prompt (in order of prompt id); otherwise Wilson (alpha) and normal (means)
    intervals over steps and the G-test on the total.  ``interval_unit`` says which.
    """
    full = [s for s in steps if s["k"] == k]
    if not full:
        raise ValueError(f"no recorded step drafted k = {k} tokens")
    n = np.concatenate([s["n"] for s in full]).astype(np.int64)
    beta = np.concatenate([s["beta"] for s in full])  # (S, k)
    a = np.concatenate([s["a"] for s in full])
    counts = accepted_length_counts(n, k)
    succ, fail = int(n.sum()), int((n < k).sum())
    alpha = fit_alpha(counts)
    L = n + 1.0
    rb, ind = predicted_length_conditional(a, beta), predicted_length_independent(beta)
    rows = np.concatenate([s["rows"] for s in full]) if all("rows" in s for s in full) else None
    if rows is not None and np.unique(rows).size >= 2:
        ids = np.unique(rows, return_inverse=True)[1]
        per = lambda x: np.bincount(ids, weights=x)  # noqa: E731  (sum per prompt)
        steps_p = per(np.ones_like(L))
        _, lo, hi = cluster_ratio_interval(per(n.astype(np.float64)), per(n + (n < k)), level)
        el, el_lo, el_hi = cluster_ratio_interval(per(L), steps_p, level)
        d, d_lo, d_hi = cluster_ratio_interval(per(L - rb), steps_p, level)
        unit = "prompts"
        by_prompt = np.stack([np.bincount(n[ids == c], minlength=k + 1) for c in range(ids.max() + 1)])
    else:
        lo, hi = wilson_interval(succ, max(succ + fail, 1), level) if succ + fail else (float("nan"),) * 2
        two = n.size >= 2
        el, el_lo, el_hi = mean_interval(L, level) if two else (float(L.mean()), float("nan"), float("nan"))
        d, d_lo, d_hi = mean_interval(L - rb, level) if two else (float((L - rb).mean()), float("nan"), float("nan"))
        unit = "steps"
        by_prompt = None
    gof = geometric_gof(counts if by_prompt is None else by_prompt)
    out = {"steps": int(n.size), "alpha_mle": alpha, "alpha_lo": lo, "alpha_hi": hi,
           "el_measured": el, "el_lo": el_lo, "el_hi": el_hi, "el_pred_conditional": float(rb.mean()),
           "el_pred_independent": float(ind.mean()), "el_minus_pred": d, "el_minus_pred_lo": d_lo,
           "el_minus_pred_hi": d_hi, "beta_mean": float(beta.mean()), "gof_G": gof["G"], "gof_df": gof["df"],
           "gof_p": gof["p_value"], "gof_p_independent": gof["p_independent"], "gof_deff": gof["deff"],
           "interval_unit": unit}
    for i in range(k):
        out[f"beta_pos_{i + 1}"] = float(beta[:, i].mean())
    out["counts"] = counts.tolist()
    if by_prompt is not None:
        out["counts_by_prompt"] = by_prompt.tolist()
    return out


def distinct_ngram_ratio(tokens, n: int = 4) -> float:
    """Distinct n-grams / n-grams in one token sequence: 1 = no repeated n-gram, near 0 = a loop.

    Example: distinct_ngram_ratio([1, 2, 1, 2, 1, 2], n=2) -> 2 / 5 = 0.4
    """
    t = [int(x) for x in tokens]
    if n < 1 or len(t) < n:
        raise ValueError(f"need n >= 1 and at least n tokens, got n={n}, {len(t)} tokens")
    grams = [tuple(t[i:i + n]) for i in range(len(t) - n + 1)]
    return len(set(grams)) / len(grams)
