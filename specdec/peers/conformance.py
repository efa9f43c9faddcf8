"""Do an engine's tokens follow the target's law?  A binned G-test against the exact law of
`specdec.peers.laws`, its power and minimal detectable TV, a TV interval and the one-word verdict
(the diagnosis of a failure and the greedy check: `specdec.peers.diagnosis`).

Bins.  A wrong rule changes x2's law given x1 after every x1, and the enumerated x1 are many (over
a thousand at T = 1), so bins that follow x1 would each hold a few x1 and see little.  Instead x2 is
placed by a probability integral transform: within its x1 the cells are ordered (by descending p,
or by a score such as `laws.ratio_score`, the draft's log-ratio) and x2's bin is the window of
1/H of the conditional cumulative mass its cell starts in; the same window is pooled over x1, so
a move of mass toward the draft's choices adds up over x1 instead of cancelling.  x1 itself is cut
into G groups of about equal p1 mass (the prefill sampler's check), giving G x H bins
(`make_bins`), the cell "x1 outside the support" alone, light bins merged with a neighbour.  B =
G H is capped at n / 10 so every expected count is >= 5.  Cells of target probability 0 are no
bin: a token there is impossible under the target and gives p = 0.  Every bin's probability is
exact (a sum of enumerated cells), whatever the order; the order only decides the power.

Two orders.  The p order sees rules that sharpen or flatten the law (q at another temperature);
the ratio order sees rules that move mass toward or away from the draft (residual omitted, the
draft's law).  `law_test` with ``scores`` runs both at alpha / 2 each (Bonferroni): the row's p-value is min(1, 2 min(p_p, p_ratio)), rejected at alpha.

Test.  G = 2 sum O ln(O / E) per prompt (each prompt's n samples fixed), summed over prompts, against
chi-square with df = sum (B_i - 1).  Power (`specdec.core.stats.power`, the worst case over
alternatives): if at every prompt the sampled law is at total variation >= eps from the target *on
the bins* then the noncentrality is >= 4 n eps^2 per prompt (Cauchy-Schwarz), so Pearson's X^2 and
asymptotically G (the same limit under local alternatives) are at least noncentral chi-square with
4 N eps^2, N = P n.  What "power 0.8 at TV 0.03" means here: against every law whose *binned* TV is
>= 0.03 at each prompt; a law whose error hides inside bins (mass moved between tokens of one bin)
has a smaller binned TV and is covered only as far as that.  `alternative_power` gives the power
against one stated law (its own noncentrality n sum (P_b - p_b)^2 / p_b, asymptotic).

TV.  Per prompt the binned TV of the empirical law with the distribution-free interval of
`specdec.core.stats.tv_interval` at level delta / P (Bonferroni), averaged over prompts: the mean
binned TV lies in the averaged interval with probability >= 1 - delta.

Minimal detectable TV (`LawTest.mdtv`): the smallest binned TV at every prompt that the test detects
with worst-case power 0.8 at its level per order, for rows whose n cannot buy the design's power.

What it refuses: counts that are not finite non-negative integers, laws that are not finite
distributions, scores with NaN, a vocabulary V < 1, bins < 2, a p-value that is not finite.  A verdict
is worded only from a finite p-value (`verdict`); anything else is an error, never "consistent".

Example: r = law_test([law], [counts], V, alpha=0.01, eps=0.03); verdict(r) -> "consistent"
(r.p_value, r.power, r.mdtv carry the numbers the sentence around it needs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from specdec.core.stats import power as worst_case_power
from specdec.core.stats import sample_size, tv_interval

__all__ = ["make_bins", "LawTest", "law_test", "design_n", "alternative_power", "verdict", "min_detectable_tv",
           "CONSISTENT", "INCONSISTENT"]

CONSISTENT, INCONSISTENT = "consistent", "inconsistent"


def _int(name: str, v, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


def _distribution(law, what: str = "law") -> np.ndarray:
    law = np.asarray(law, dtype=np.float64)
    if law.ndim != 1 or law.size == 0 or not np.all(np.isfinite(law)) or np.any(law < 0) or abs(law.sum() - 1) > 1e-9:
        raise ValueError(f"a {what} must be a finite, non-negative array of cells summing to 1")
    return law


def _counts(c) -> np.ndarray:
    c = np.asarray(c, dtype=np.float64)
    if c.ndim != 1 or not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("counts must be a 1-D array of finite, non-negative integers (np.bincount of the cells)")
    return c


def make_bins(law, V: int, n_bins: int, score=None, x1_bins: int = 4) -> np.ndarray:
    """Bin label of every cell of a joint law (S * V + 1,) (module docstring), -1 where law = 0:
    G = x1_bins groups of x1 by the cumulative p1 in the support's order, times H = n_bins // G
    bins of x2 by its conditional cumulative mass within its x1 (ordered by descending ``score``,
    default the law; `laws.ratio_score`), the cut cell alone; bins lighter than half of 1 / (G H)
    join the bin before them (the first joins the next)."""
    V, n_bins, x1_bins = _int("V", V, 1), _int("n_bins", n_bins, 2), _int("x1_bins", x1_bins, 1)
    law = _distribution(law)
    if (law.size - 1) % V or law.size < V + 1:
        raise ValueError("law must be a joint of S * V + 1 cells summing to 1 (laws.candidate_joint)")
    if not 1 <= x1_bins <= n_bins // 2:
        raise ValueError(f"need 1 <= x1_bins <= n_bins / 2, got x1_bins={x1_bins}, n_bins={n_bins}")
    G, H = x1_bins, n_bins // x1_bins
    S = (law.size - 1) // V
    key = law if score is None else np.asarray(score, dtype=np.float64)
    if key.shape != law.shape:
        raise ValueError(f"score has {key.size} cells, the law {law.size}")
    if np.any(np.isnan(key)):
        raise ValueError("a score must not contain NaN (it orders the cells)")
    rows = law[:-1].reshape(S, V)
    p1 = rows.sum(1)  # (S,)
    order = np.argsort(-key[:-1].reshape(S, V), axis=1, kind="stable")
    srt = np.take_along_axis(rows, order, 1)
    before = np.empty_like(rows)
    np.put_along_axis(before, order, np.cumsum(srt, 1) - srt, 1)
    cond = before / np.where(p1 > 0, p1, 1.0)[:, None]
    h = np.minimum((cond * H).astype(np.int64), H - 1)
    g = np.minimum(((np.cumsum(p1) - p1) * G).astype(np.int64), G - 1)
    raw = np.append((g[:, None] * H + h).reshape(-1), G * H)
    raw[law <= 0] = -1
    # the used labels in order, renumbered 0.. (np.unique's inverse, in linear time: labels are < G H + 1)
    present = np.bincount(raw[raw >= 0], minlength=G * H + 1) > 0
    lab = (np.cumsum(present) - 1)[raw[raw >= 0]]
    mass = np.bincount(lab, weights=law[raw >= 0])
    light = 0.5 / (G * H)
    group, gmass = np.zeros(mass.size, dtype=np.int64), [0.0]
    for b in range(mass.size):
        if b > 0 and mass[b] >= light:
            gmass.append(0.0)
        group[b] = len(gmass) - 1
        gmass[-1] += mass[b]
    if len(gmass) > 1 and gmass[0] < light:
        group = np.maximum(group - 1, 0)
    labels = np.full(law.size, -1, dtype=np.int64)
    labels[raw >= 0] = group[lab]
    return labels


@dataclass(frozen=True)
class LawTest:
    statistic: float  # G summed over prompts
    df: int
    p_value: float
    n: int  # samples in all
    prompts: int
    bins: int  # bins in all
    impossible: int  # samples in cells of target probability 0
    tv: float  # mean over prompts of the binned empirical TV
    tv_low: float
    tv_high: float
    alpha: float
    eps: float
    power: float  # worst-case power at binned TV eps at every prompt (module docstring)
    n_needed: int  # samples in all for power_target at eps with these bins
    orders: int = 1  # 2 with scores: each order tested at alpha / 2
    mdtv: float = math.nan  # binned TV detected with worst-case power 0.8 at alpha / orders

    @property
    def status(self) -> str:
        """"reject" when p <= alpha (p exactly at the level rejects), else "pass"."""
        return "reject" if self.p_value <= self.alpha else "pass"


def _binned(labels, law, counts):  # counts checked by _g_test
    keep = labels >= 0
    e = np.bincount(labels[keep], weights=law[keep])
    o = np.bincount(labels[keep], weights=counts[keep], minlength=e.size)
    return o, e, int(counts[~keep].sum())


def _g_test(laws, counts, V, n_bins, x1_bins, scores, delta, cache=None):
    G = df = n_all = imp = bins = 0
    tvs, los, his = [], [], []
    for law_in, c, score in zip(laws, counts, scores):
        law, c = _distribution(law_in), _counts(c)
        if law.shape != c.shape:
            raise ValueError(f"counts ({c.size} cells) must match the law ({law.size} cells)")
        n = int(c.sum())
        if n < 20 * x1_bins:
            raise ValueError(f"a prompt has {n} samples; the test needs >= {20 * x1_bins} per prompt (10 per bin)")
        labels = _bins(law_in, V, max(2 * x1_bins, min(n_bins, n // 10)), score, x1_bins, cache)
        o, e, bad = _binned(labels, law, c)
        m = o.sum()
        G += float(_st.power_divergence(o, e * m / e.sum(), lambda_="log-likelihood")[0]) if m else 0.0
        if e.size < 2:
            raise ValueError(f"a prompt's law falls in a single bin at n = {n} (df = 0): nothing to test")
        df, bins, n_all, imp = df + e.size - 1, bins + e.size, n_all + n, imp + bad
        tv, lo, hi = tv_interval(np.append(o, bad), np.append(e, 0.0), delta / len(laws))
        tvs.append(tv), los.append(lo), his.append(hi)
    p = 0.0 if imp else float(_st.chi2.sf(G, df))
    if not math.isfinite(p):
        raise ValueError(f"the G-test gave a p-value that is not finite (G = {G!r}, df = {df})")
    return G, df, p, n_all, bins, imp, float(np.mean(tvs)), float(np.mean(los)), float(np.mean(his))


def law_test(laws, counts, V: int, *, alpha: float = 0.01, eps: float = 0.03, power_target: float = 0.8,
             n_bins: int = 64, x1_bins: int = 4, delta: float = 0.01, scores=None, cache: dict | None = None) -> LawTest:
    """G-test of fine cell counts (one (S * V + 1,) array per prompt: np.bincount of laws.joint_cells)
    against the prompts' exact joints ``laws``; bins per prompt by `make_bins` with B = min(n_bins,
    n / 10).  With ``scores`` (one per prompt, `laws.ratio_score`) the test is run twice, x2 ordered
    by p and by the scores, each at level alpha / 2 (Bonferroni: p = 2 min(p_p, p_score)); the
    statistic and TV are the p order's, the worst-case power the larger of the two at alpha / 2.
    ``cache``: a dict the caller keeps while it holds the same ``laws`` and ``scores`` objects, so that
    many count arrays tested against one law cut its bins once (keys are the objects' ids)."""
    if len(laws) != len(counts) or not laws or (scores is not None and len(scores) != len(laws)):
        raise ValueError("one law, one count array (and one score when given) per prompt, at least one prompt")
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (alpha, eps, delta, power_target)) or \
            not (0 < alpha < 1 and 0 < eps <= 1 and 0 < delta < 1 and 0 < power_target < 1):
        raise ValueError("alpha, delta, power_target must lie in (0, 1) and eps in (0, 1]")
    V, n_bins, x1_bins = _int("V", V, 1), _int("n_bins", n_bins, 2), _int("x1_bins", x1_bins, 1)
    runs = [_g_test(laws, counts, V, n_bins, x1_bins, [None] * len(laws), delta, cache)]
    if scores is not None:
        runs.append(_g_test(laws, counts, V, n_bins, x1_bins, list(scores), delta, cache))
    level = alpha / len(runs)
    G, df, _, n_all, bins, imp, tv, lo, hi = runs[0]
    p = min(1.0, len(runs) * min(r[2] for r in runs))
    pw = max(worst_case_power(n_all, eps, r[1] + 1, level) for r in runs)  # stats.power's cells = df + 1
    need = min(sample_size(eps, r[1] + 1, level, power_target) for r in runs)
    mdtv = min(min_detectable_tv(n_all, r[1] + 1, level) for r in runs)
    return LawTest(G, df, p, n_all, len(laws), bins, imp, tv, lo, hi, alpha, eps, pw, need, len(runs), mdtv)


def min_detectable_tv(n: int, cells: int, level: float, power_target: float = 0.8) -> float:
    """Smallest binned TV eps (bisection to 1e-4) whose worst-case power (`specdec.core.stats.power`,
    ``cells`` cells, ``n`` samples, ``level``) reaches ``power_target``; inf if even eps = 1 does not."""
    n, cells = _int("n", n, 1), _int("cells", cells, 2)
    if not (0 < level < 1 and 0 < power_target < 1):
        raise ValueError("level and power_target must lie in (0, 1)")
    if worst_case_power(n, 1.0, cells, level) < power_target:
        return math.inf
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if worst_case_power(n, mid, cells, level) < power_target else (lo, mid)
    return hi


def design_n(prompts: int, *, eps: float = 0.03, alpha: float = 0.01, power_target: float = 0.8,
             n_bins: int = 64, orders: int = 1) -> int:
    """Samples per prompt for worst-case power ``power_target`` at binned TV ``eps`` at every prompt,
    level alpha / orders (``orders`` = 2 with scores), ``n_bins`` bins per prompt (module docstring);
    n >= 10 n_bins is also needed."""
    prompts, orders, n_bins = _int("prompts", prompts, 1), _int("orders", orders, 1), _int("n_bins", n_bins, 2)
    N = sample_size(eps, prompts * (n_bins - 1) + 1, alpha / orders, power_target)
    return max(math.ceil(N / prompts), 10 * n_bins)


def _bins(law_in, V, B, score, x1_bins, cache):
    """make_bins, kept in ``cache`` (a dict or None) under the law's and the score's identity."""
    key = (id(law_in), id(score), V, B, x1_bins)  # the bins depend on the law, never on the counts
    labels = cache.get(key) if cache is not None else None
    if labels is None:
        labels = make_bins(np.asarray(law_in, dtype=np.float64), V, B, score, x1_bins)
        if cache is not None:
            cache[key] = labels
    return labels


def _alt_power(laws, alternatives, V, n, alpha, n_bins, scores, x1_bins, cache=None):  # checked by alternative_power
    lam = tv_b = 0.0
    df, p_none = 0, 1.0
    for law_in, alt, score in zip(laws, alternatives, scores):
        labels = _bins(law_in, V, max(2 * x1_bins, min(n_bins, n // 10)), score, x1_bins, cache)
        law, alt = np.asarray(law_in, dtype=np.float64), np.asarray(alt, dtype=np.float64)
        keep = labels >= 0
        e = np.bincount(labels[keep], weights=law[keep])
        pa = np.bincount(labels[keep], weights=alt[keep], minlength=e.size)
        out = float(alt[~keep].sum())
        lam += n * float(((pa - e) ** 2 / e).sum())
        tv_b += 0.5 * (float(np.abs(pa - e).sum()) + out)
        if e.size < 2:
            raise ValueError(f"a prompt's law falls in a single bin at n = {n} (df = 0): no power to compute")
        df += e.size - 1
        p_none *= (1 - out) ** n
    crit = _st.chi2.ppf(1 - alpha, df)
    pw = float(_st.ncx2.sf(crit, df, lam)) if lam > 0 else alpha
    return {"power": 1 - p_none * (1 - pw), "noncentrality": lam, "binned_tv": tv_b / len(laws), "df": df}


def alternative_power(laws, alternatives, V: int, n: int, *, alpha: float = 0.01, n_bins: int = 64,
                      scores=None, x1_bins: int = 4, cache: dict | None = None) -> dict:
    """Power of `law_test` with n samples per prompt against the stated ``alternatives`` (one joint
    per prompt, same cells): noncentrality n sum_b (P_b - p_b)^2 / p_b summed over prompts (the
    asymptotic law of X^2 and G), and the alternatives' mean binned TV (what the power covers).
    Mass of an alternative on cells of target probability 0 makes the test reject whenever one
    such sample appears: that probability is folded in.  With ``scores`` both orders run at alpha / 2
    and the larger power (a lower bound on the pair's) is given, with the p order's binned TV.
    ``cache``: as `law_test`'s (the same dict reuses the bins it made for the same laws)."""
    if len(laws) != len(alternatives) or not laws or (scores is not None and len(scores) != len(laws)):
        raise ValueError("one law and one alternative (and one score when given) per prompt, at least one prompt")
    V, n, n_bins, x1_bins = _int("V", V, 1), _int("n", n, 1), _int("n_bins", n_bins, 2), _int("x1_bins", x1_bins, 1)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    for law, alt in zip(laws, alternatives):
        if _distribution(law).shape != _distribution(alt, "alternative").shape:
            raise ValueError("an alternative must have its law's cells")
    orders = [[None] * len(laws)] + ([] if scores is None else [list(scores)])
    rows = [_alt_power(laws, alternatives, V, n, alpha / len(orders), n_bins, o, x1_bins, cache) for o in orders]
    best = max(rows, key=lambda r: r["power"])
    return {**best, "binned_tv": rows[0]["binned_tv"], "binned_tv_orders": [r["binned_tv"] for r in rows]}


def verdict(r: LawTest) -> str:
    """The one word the test licenses: "inconsistent" (p <= alpha) or "consistent" (at the power the
    row states); refuses a p-value or power that is not finite."""
    if not (isinstance(r.p_value, (int, float)) and math.isfinite(r.p_value) and 0 <= r.p_value <= 1):
        raise ValueError(f"no verdict without a finite p-value in [0, 1], got {r.p_value!r}")
    if not (isinstance(r.power, (int, float)) and math.isfinite(r.power)):
        raise ValueError(f"no verdict without a stated power, got {r.power!r}")
    return INCONSISTENT if r.status == "reject" else CONSISTENT
