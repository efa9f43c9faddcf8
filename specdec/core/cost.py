"""The idealized cost model of speculative decoding, and its measured-cost extension.

Assumptions (seed, equation 3; Leviathan et al. 2022, section 3.4): each of the k draft tokens
is accepted independently with the same probability alpha, one target verification costs 1
whatever k is, and each draft token costs c.  Under them one verification advances

    E[L] = sum_{i=0}^{k} alpha^i = (1 - alpha^(k+1)) / (1 - alpha)      (alpha < 1)

tokens (the accepted drafts plus the one token the target always contributes), and the ratio of
speculative to plain decoding speed is S = E[L] / (1 + k c).  The spread of L around E[L] is
Var(L) = Var(N) (`accepted_length_variance`).  This is a model, not a measurement.

The extension puts measured costs in: a target forward appending n tokens to a cached context
costs T(n) seconds and one draft token T_d(1), so with c = T_d(1) / T(1)

    S_ext = E[L] / (T(k+1)/T(1) + k c)              (`speedup` with verify_cost = T(k+1)/T(1)).

Everything is vectorized with numpy broadcasting; scalars in give Python floats out.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "expected_tokens",
    "accepted_length_variance",
    "toy_speedup",
    "speedup",
    "expected_tokens_from_positions",
    "optimal_k",
    "best_k",
    "break_even_alpha",
    "break_even_alpha_best_k",
    "draft_cost",
    "extended_speedup",
]


def _as_alpha(alpha) -> np.ndarray:
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(np.isnan(a)):
        raise ValueError("alpha must be a number in [0, 1], got NaN")
    if np.any((a < 0) | (a > 1)):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    return a


def _as_k(k) -> np.ndarray:
    k_arr = np.asarray(k)
    if k_arr.dtype == bool or not np.issubdtype(k_arr.dtype, np.number):
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    k_float = k_arr.astype(np.float64)
    if np.any(~np.isfinite(k_float)) or np.any(k_float != np.round(k_float)):
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    if np.any(k_float < 0):
        raise ValueError(f"k must be a non-negative integer (number of draft tokens), got {k!r}")
    return k_float.astype(np.int64)


def _as_cost(c, name: str) -> np.ndarray:
    c_arr = np.asarray(c, dtype=np.float64)
    if np.any(~np.isfinite(c_arr)) or np.any(c_arr < 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {c!r}")
    return c_arr


def _out(x: np.ndarray):
    return float(x) if np.ndim(x) == 0 else x


def expected_tokens(alpha, k):
    """Expected tokens advanced per verification: E[L] = sum_{i=0}^{k} alpha^i (seed, eq. 3).

    Computed by the closed form (1 - alpha^(k+1)) / (1 - alpha), with the limit k + 1 at alpha = 1.
    k = 0 (no drafts) gives 1: plain decoding.

    Example: expected_tokens(0.8, 4) -> 3.3616  (1 + 0.8 + 0.64 + 0.512 + 0.4096)
    """
    a, kk = _as_alpha(alpha), _as_k(k)
    a, kk = np.broadcast_arrays(a, kk)
    one = a == 1.0
    safe = np.where(one, 0.5, a)  # avoid 0/0 where alpha == 1; that branch is replaced below
    closed = (1.0 - safe ** (kk + 1)) / (1.0 - safe)
    return _out(np.where(one, kk + 1.0, closed))


def accepted_length_variance(alpha, k):
    """Variance of the tokens advanced per verification, Var(L) = Var(N), N the accepted drafts.

    N is truncated geometric, P(N >= i) = alpha^i for i = 1..k, and L = N + 1.  From
    E[N^2] = sum_{n} (2n - 1) P(N >= n) (since n^2 = sum_{i=1}^{n} (2i - 1)):

        E[N^2] = sum_{i=1}^{k} (2i - 1) alpha^i,        Var(L) = E[N^2] - E[N]^2,

    which for alpha < 1 sums to the closed form

        Var(L) = (alpha - (2k + 1)(1 - alpha) alpha^(k+1) - alpha^(2k+2)) / (1 - alpha)^2 .

    It is computed by the sum (the closed form loses digits as alpha -> 1); k = 1 gives the
    Bernoulli variance alpha (1 - alpha), k -> inf the geometric alpha / (1 - alpha)^2, and
    alpha in {0, 1} or k = 0 give 0 (L is then certain).

    Example: accepted_length_variance(0.8, 4) -> 2.57004544  (E[N^2] = 8.1472, E[N] = 2.3616);
             accepted_length_variance(0.3, 1) -> 0.21
    """
    a, kk = _as_alpha(alpha), _as_k(k)
    a, kk = np.broadcast_arrays(a, kk)
    i = np.arange(1, int(kk.max(initial=0)) + 1)            # (I,) positions 1..max k
    used = i <= kk[..., None]                               # (..., I) position i is a draft of this k
    powers = np.where(used, a[..., None] ** i, 0.0)         # (..., I) P(N >= i)
    mean_n = powers.sum(axis=-1)
    second = ((2 * i - 1) * powers).sum(axis=-1)
    return _out(np.maximum(second - mean_n**2, 0.0))


def speedup(alpha, k, c, verify_cost=1.0):
    """Ratio of speculative to plain decoding speed: E[L] / (verify_cost + k c).

    Costs are in units of one plain target step.  `verify_cost` = T(k+1) / T(1) is the cost of a
    target forward over the k+1 verified positions; the idealized model sets it to 1 and the
    measured chapters put in the measured ratio.

    Example: speedup(0.8, 4, 0.1, verify_cost=1.5) -> 3.3616 / 1.9 = 1.769...
    """
    cost = 1.0 * _as_cost(verify_cost, "verify_cost") + _as_k(k) * _as_cost(c, "c")
    if np.any(cost <= 0):
        raise ValueError("verify_cost + k c must be > 0")
    return _out(np.asarray(expected_tokens(alpha, k)) / cost)


def toy_speedup(alpha, k, c):
    """The seed's idealized speed ratio S_toy = sum_{i=0}^{k} alpha^i / (1 + k c) (eq. 3).

    Example: toy_speedup(0.8, 4, 0.1) -> 3.3616 / 1.4 = 2.4011...;  toy_speedup(0.2, 4, 0.1) -> 0.8926
    """
    return speedup(alpha, k, c, verify_cost=1.0)


def expected_tokens_from_positions(alphas):
    """E[L] when position i (1-based) is accepted with its own conditional probability alphas[i-1].

    E[L] = 1 + sum_{i=1}^{k} prod_{j<=i} alphas[j-1]; constant alphas reduce to expected_tokens.
    The last axis holds the positions.

    Example: expected_tokens_from_positions([0.9, 0.5]) -> 1 + 0.9 + 0.45 = 2.35
    """
    a = _as_alpha(alphas)
    if a.ndim == 0:
        raise ValueError("alphas must have a positions axis (shape (..., k))")
    return _out(1.0 + np.cumprod(a, axis=-1).sum(axis=-1))


def _ratios(alpha, c, ks: np.ndarray, curve: dict | None) -> np.ndarray:
    """S at each k of ``ks`` (first axis): unit verification cost, or T(k+1)/T(1) from ``curve``."""
    vc = np.ones(ks.shape) if curve is None else \
        np.array([curve[int(k) + 1] / curve[1] for k in ks.ravel()]).reshape(ks.shape)
    return np.asarray(speedup(alpha, ks, c, verify_cost=vc))


def _pick(s: np.ndarray):
    """Index of the largest S along the first axis, ties (within 1e-12) to the first (the smaller k)."""
    return np.argmax(s >= s.max(axis=0) - 1e-12, axis=0)


def optimal_k(alpha, c, k_max: int = 64, curve: dict | None = None):
    """The draft length k in 0..k_max that maximizes the speed ratio; k = 0 means speculation does
    not pay.  Ties go to the smaller k (cheaper, same speed).  Arrays of alpha and c broadcast.

    curve=None: the idealized model, toy_speedup(alpha, k, c).  A measured cost curve
    {n: seconds} holding T(1)..T(k_max+1) gives the extended model instead,
    speedup(alpha, k, c, verify_cost=T(k+1)/T(1)); a curve lacking one is an error (`best_k`
    chooses among the k a partial curve holds).

    Example: optimal_k(0.8, 0.1) -> 6 ;  optimal_k(0.2, 0.1) -> 1 ;  optimal_k(0.05, 0.1) -> 0 ;
             optimal_k(0.0, 0.2, 1, curve={1: 1.0, 2: 1.1}) -> 0
    """
    k_max = int(_as_k(k_max))
    a = _as_alpha(alpha)
    cc = _as_cost(c, "c")
    a, cc = np.broadcast_arrays(a, cc)
    if curve is not None:
        missing = [n for n in range(1, k_max + 2) if n not in curve]
        if missing:
            raise ValueError(f"cost curve lacks T(n) for n = {missing}")
    ks = np.arange(k_max + 1).reshape((-1,) + (1,) * a.ndim)  # (K, ...)
    best = _pick(_ratios(a[None], cc[None], ks, curve))
    return int(best) if best.ndim == 0 else best


def best_k(alpha: float, c: float, k_max: int, curve: dict | None = None, k_min: int = 0) -> tuple[int, float]:
    """(k, S) of the fastest draft length in k_min..k_max, by `optimal_k`'s rule (ties to the smaller
    k; k = 0 is plain decoding, S = 1).  With a measured ``curve`` {n: seconds} only the k whose
    T(k+1) it holds are candidates (it must hold T(1)): a curve measured at a few n prices those.
    ``k_min`` = 1 gives the best speculative k even where none pays.

    Example: best_k(0.8, 0.1, 2, curve={1: 1.0, 2: 1.0, 3: 1.0}) -> (2, 2.44 / 1.2 = 2.033...)
    """
    k_max, k_min = int(_as_k(k_max)), int(_as_k(k_min))
    if k_min > k_max:
        raise ValueError(f"k_min must be <= k_max, got {k_min} > {k_max}")
    if curve is not None and 1 not in curve:
        raise ValueError(f"the cost curve needs T(1); it has n = {sorted(curve)}")
    ks = np.array([k for k in range(k_min, k_max + 1) if curve is None or k == 0 or k + 1 in curve])
    if not ks.size:
        raise ValueError(f"the cost curve holds no T(k+1) for k in {k_min}..{k_max}: n = {sorted(curve)}")
    s = _ratios(float(_as_alpha(alpha)), float(_as_cost(c, "c")), ks, curve)
    i = int(_pick(s))
    return int(ks[i]), float(s[i])


def break_even_alpha(k, c, tol: float = 1e-12):
    """The alpha at which toy_speedup(alpha, k, c) = 1; below it speculation is slower.

    E[L] rises monotonically in alpha from 1 to k + 1, so the root of E[L] = 1 + k c is found by
    bisection.  Returns +inf where even alpha = 1 does not pay (c > 1) and 0 for k = 0 or c = 0
    (nothing is spent on drafting, so any alpha breaks even).

    Example: break_even_alpha(4, 0.1) -> 0.2871...  (E[L] = 1.4 there)
    """
    kk, cc = np.broadcast_arrays(_as_k(k), _as_cost(c, "c"))
    target = 1.0 + kk * cc
    lo, hi = np.zeros(kk.shape), np.ones(kk.shape)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = np.asarray(expected_tokens(mid, kk)) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo < tol):
            break
    out = 0.5 * (lo + hi)
    out = np.where((kk == 0) | (cc == 0), 0.0, out)
    out = np.where(kk + 1.0 < target, np.inf, out)
    return _out(out)


def break_even_alpha_best_k(c: float, k_max: int, curve: dict | None = None, tol: float = 1e-6) -> float:
    """The smallest alpha at which some k <= k_max pays (`best_k`'s S > 1): bisection, since each
    k's speed ratio rises with alpha; inf when not even alpha = 1 pays (k_max = 0, or c >= 1 in the
    idealized model).  In the idealized model with k_max >= 1 and 0 < c < 1 it is c to ``tol``
    (Leviathan et al.'s corollary: k = 1 is the first to pay, at alpha = c).

    Example: break_even_alpha_best_k(0.1, 4) -> 0.1 (to tol);  with curve {1: 1.0, 2: 2.0}, k_max 1 -> inf
    """
    if best_k(1.0, c, k_max, curve)[1] <= 1:
        return float("inf")
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if best_k(mid, c, k_max, curve)[1] > 1 else (mid, hi)
    return hi


def draft_cost(draft_t1: float, target_t1: float) -> float:
    """c = T_d(1) / T(1): one draft token in units of one plain target step.

    Example: draft_cost(0.001, 0.005) -> 0.2
    """
    if not (np.isfinite(draft_t1) and np.isfinite(target_t1)) or draft_t1 < 0 or target_t1 <= 0:
        raise ValueError(f"need draft time >= 0 and target time > 0, got {draft_t1!r}, {target_t1!r}")
    return float(draft_t1) / float(target_t1)


def extended_speedup(alpha, k: int, curve: dict, c: float) -> float:
    """S_ext = E[L] / (T(k+1)/T(1) + k c) from a measured curve {n: seconds} holding 1 and k+1.

    Example: extended_speedup(0.8, 4, {1: 1.0, 5: 1.5}, 0.1) -> 3.3616 / 1.9 = 1.769...
    """
    if 1 not in curve or (k + 1) not in curve:
        raise ValueError(f"the cost curve needs T(1) and T({k + 1}); it has n = {sorted(curve)}")
    return speedup(alpha, k, c, verify_cost=curve[k + 1] / curve[1])
