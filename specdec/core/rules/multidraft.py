"""Multi-draft verification: n independent drafts of k tokens, verified by recursive rejection
sampling (SpecInfer, Miao et al. 2024; SpecTr, Sun et al. 2023), and the optimal n-draft
acceptance that no verification rule can beat.

Recursive rejection sampling at one position (candidates x^1..x^m i.i.d. from q, in draft order):

    p^1 = p;  try x^j with probability min{1, p^j(x^j) / q(x^j)};  on rejection
    p^{j+1} = [p^j - q]_+ / sum [p^j - q]_+ ;  after m rejections emit a token from p^{m+1}.

The emitted token follows p exactly (each candidate is a fresh draw from q, so each round is the
one-step identity applied to p^j; induction on j).  Over k positions: the candidates at position
i are the i-th tokens of the drafts still alive, those whose tokens so far equal the emitted
prefix.  Given everything decided so far, these tokens are still i.i.d. from q(. | prefix)
(each draft is its own chain), so the identity holds at every position; when the emitted token
came from the final residual no draft is alive and the step ends, and after k accepted positions a
bonus token comes from p_k.  One draft (n = 1) is token verification.

Acceptance at one position.  Recursive rejection sampling keeps a draft with probability
`rrs_acceptance` = sum_j prod_{l<j} (1 - beta_l) beta_j, beta_j = sum min{p^j, q}.  The best any
rule can do with n i.i.d. candidates and output law p is the maximal coupling of q^n and p with
"y is one of the candidates" (Sun et al. 2023, SpecTr; Khisti et al. 2025): by max-flow/min-cut,

    optimal(p, q, n) = min over token sets A of [ p(not A) + 1 - (1 - q(A))^n ]      (`optimal_acceptance`)

which `optimal_acceptance_lp` also solves as the transport linear program (a check of the formula).

Shapes: drafts (B, n, k), q (B, n, k, V), p (B, n, k+1, V) (row j of p and q conditions on draft j's
own prefix).  Example: rrs_acceptance(p=[0.5, 0.5], q=[1, 0], n=2) -> 0.5 (the second candidate is
the same token, and it is rejected for sure).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from specdec.core.acceptance import context_beta
from specdec.core.exact import all_sequences
from specdec.core.sampling import sample_inverse_cdf
from specdec.core.sampling import uniforms as draw_uniforms  # `uniforms` is verify_multi's argument
from specdec.core.verify import VerifyResult, accept_prob, check_inputs, check_uniforms, residual

__all__ = ["verify_multi", "multi_step_chunks", "rrs_acceptance", "optimal_acceptance", "optimal_acceptance_lp"]

F64 = torch.float64
LP_MAX_TUPLES = 50_000  # optimal_acceptance_lp builds every tuple: memory grows as V^n


def _check(drafts, q, p):
    if not all(isinstance(t, torch.Tensor) for t in (drafts, q, p)):
        raise ValueError("drafts, q and p must be torch tensors")
    if drafts.dim() != 3 or q.dim() != 4 or p.dim() != 4:
        raise ValueError(f"need drafts (B, n, k), q (B, n, k, V), p (B, n, k+1, V); got {tuple(drafts.shape)}, "
                         f"{tuple(q.shape)}, {tuple(p.shape)}")
    B, n, k = drafts.shape
    if q.shape[:3] != (B, n, k) or p.shape[:3] != (B, n, k + 1) or q.shape[3] != p.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and p {tuple(p.shape)} do not match drafts (B, n, k) = {(B, n, k)}")
    if n < 1 or k < 1:
        raise ValueError(f"need at least one draft of at least one token, got n={n}, k={k}")


def verify_multi(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *, method: str = "token",
                 generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None) -> VerifyResult:
    """One step of multi-draft verification (module docstring) -> `VerifyResult` with tokens (B, k+1):
    the accepted path, then the emitted token, then -1.  Randomness: B (k n + 1) float64 uniforms,
    one per (position, candidate) and one for the emitted token: column i n + j (0-based) decides
    candidate j at position i, column k n is the inverse-CDF draw of the residual or bonus token.
    ``uniforms`` (tests only): that (B, k n + 1) float64 tensor in [0, 1), used instead of drawing
    (checked as `verify` checks its own).  ``method`` is accepted for `verify`'s signature and
    ignored (recursive rejection sampling)."""
    _check(drafts, q, p)
    B, n, k = drafts.shape
    V = p.shape[-1]
    check_inputs(drafts.reshape(B * n, k), q.reshape(B * n, k, V), p.reshape(B * n, k + 1, V))  # as `verify` does
    dev = p.device
    if uniforms is None:
        u = draw_uniforms((B, k * n + 1), generator, dev)
    else:
        check_uniforms(uniforms, B, k, width=k * n + 1)
        u = uniforms.to(dev)
    d = drafts.long()
    rows = torch.arange(B, device=dev)
    alive = torch.ones(B, n, dtype=torch.bool, device=dev)
    running = torch.ones(B, dtype=torch.bool, device=dev)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long, device=dev)
    n_acc = torch.zeros(B, dtype=torch.long, device=dev)
    for i in range(k):
        first = alive.to(torch.int8).argmax(1)  # (B,) an alive draft: all alive ones share the prefix
        pc = p[rows, first, i].to(F64)  # (B, V)
        qc = q[rows, first, i].to(F64)
        got = torch.full((B,), -1, dtype=torch.long, device=dev)
        for j in range(n):
            x = d[:, j, i]
            try_j = running & alive[:, j] & (got < 0)
            a = accept_prob(pc.gather(1, x[:, None])[:, 0], qc.gather(1, x[:, None])[:, 0])
            ok = try_j & (u[:, i * n + j] < a)
            got = torch.where(ok, x, got)
            rej = try_j & ~ok
            pc = torch.where(rej[:, None], residual(pc, qc), pc)
        y = sample_inverse_cdf(pc, u[:, k * n])  # the final residual, used where nothing was kept
        stop = running & (got < 0)
        tokens[:, i] = torch.where(running, torch.where(stop, y, got), tokens[:, i])
        n_acc = n_acc + (running & ~stop).long()
        alive = alive & (d[:, :, i] == got[:, None])
        running = running & ~stop
    first = alive.to(torch.int8).argmax(1)
    bonus = sample_inverse_cdf(p[rows, first, k].to(F64), u[:, k * n])
    tokens[:, k] = torch.where(running, bonus, tokens[:, k])
    return VerifyResult(num_accepted=n_acc, tokens=tokens)


def multi_step_chunks(drafts: torch.Tensor, q: torch.Tensor, p: torch.Tensor):
    """Exact outcomes of `verify_multi` given the drafts, as `specdec.core.exact.spec_law` chunk
    groups [(draft row (M,), emitted tokens (M, j+1), probability (M,))]; pass
    ``spec_law(..., method=multi_step_chunks, drafts=n)``.  Enumerates the branch of every
    accepted candidate (n^k paths per row).  One draft may come as (D, k), (D, k, V), (D, k+1, V)."""
    if drafts.dim() == 2:
        drafts, q, p = drafts[:, None], q[:, None], p[:, None]
    _check(drafts, q, p)
    D, n, k = drafts.shape
    V = p.shape[-1]
    d = drafts.long()
    idx = torch.arange(D)
    toks = torch.zeros(D, 0, dtype=torch.long)
    alive = torch.ones(D, n, dtype=torch.bool)
    prob = torch.ones(D, dtype=F64)
    out = []
    for i in range(k):
        first = alive.to(torch.int8).argmax(1)
        pc, qc = p[idx, first, i].to(F64), q[idx, first, i].to(F64)
        reach = prob.clone()
        nxt = []
        for j in range(n):
            x = d[idx, j, i]
            a = accept_prob(pc.gather(1, x[:, None])[:, 0], qc.gather(1, x[:, None])[:, 0])
            a = torch.where(alive[:, j], a, torch.zeros_like(a))
            nxt.append((idx, torch.cat([toks, x[:, None]], 1), alive & (d[idx, :, i] == x[:, None]), reach * a))
            pc = torch.where((alive[:, j] & (a < 1))[:, None], residual(pc, qc), pc)
            reach = reach * (1 - a)
        M = idx.shape[0]
        out.append((idx.repeat_interleave(V), torch.cat([toks.repeat_interleave(V, 0),
                                                         torch.arange(V).repeat(M)[:, None]], 1),
                    (reach[:, None] * pc / pc.sum(-1, keepdim=True)).reshape(-1)))
        idx, toks, alive, prob = (torch.cat([b[t] for b in nxt]) for t in range(4))
    first = alive.to(torch.int8).argmax(1)
    pk = p[idx, first, k].to(F64)
    M = idx.shape[0]
    out.append((idx.repeat_interleave(V), torch.cat([toks.repeat_interleave(V, 0), torch.arange(V).repeat(M)[:, None]], 1),
                (prob[:, None] * pk / pk.sum(-1, keepdim=True)).reshape(-1)))
    return out


def _dists(p, q, n):
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1 or not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))) \
            or np.any(p < 0) or np.any(q < 0) or abs(p.sum() - 1) > 1e-9 or abs(q.sum() - 1) > 1e-9:
        raise ValueError("p and q must be distributions (V,) over the same tokens (finite, >= 0, sum 1)")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the number of drafts n must be an integer >= 1, got {n!r}")
    return p, q


def rrs_acceptance(p, q, n: int) -> float:
    """P(recursive rejection sampling keeps one of n i.i.d. candidates from q): (V,), (V,) -> float.
    Example: rrs_acceptance([1/3, 2/3], [2/3, 1/3], 1) -> 2/3 (= sum min{p, q})."""
    p, q = _dists(p, q, n)
    acc, reach, pc = 0.0, 1.0, p
    for _ in range(n):
        beta = float(context_beta(torch.from_numpy(pc), torch.from_numpy(q)))
        acc += reach * beta
        reach *= 1 - beta
        r = np.clip(pc - q, 0, None)
        if r.sum() <= 0:
            break
        pc = r / r.sum()
    return acc


def optimal_acceptance(p, q, n: int) -> float:
    """Largest P(output is one of the n candidates) over every rule with output law p (module
    docstring; min over the 2^V token sets, V <= 20).  Example: n = 1 gives sum min{p, q}."""
    p, q = _dists(p, q, n)
    V = p.size
    if V > 20:
        raise ValueError(f"optimal_acceptance enumerates 2^V token sets; V = {V} is too large")
    best = 1.0
    for m in range(V + 1):
        for A in itertools.combinations(range(V), m):
            a = list(A)
            best = min(best, float(p.sum() - p[a].sum() + 1 - (1 - q[a].sum()) ** n))
    return best


def optimal_acceptance_lp(p, q, n: int) -> float:
    """The same bound as a linear program over the transport plans pi(t, y) between the V^n
    candidate tuples t (mass q^n(t)) and the output y (mass p(y)), restricted to y in t: maximize
    sum pi subject to sum_y pi(t, y) <= q^n(t) and sum_t pi(t, y) <= p(y) (the max-flow form; the
    unmatched mass completes it to a coupling).  Small V^n only (scipy's HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    p, q = _dists(p, q, n)
    V = p.size
    if V ** n > LP_MAX_TUPLES:
        raise ValueError(f"the linear program enumerates V^n = {V ** n} candidate tuples; at most {LP_MAX_TUPLES}")
    tuples = all_sequences(V, n).numpy()  # (T, n)
    T = tuples.shape[0]
    qt = np.prod(q[tuples], axis=1)  # (T,)
    t_idx, y_idx = np.nonzero((tuples[:, :, None] == np.arange(V)).any(1))  # the pairs with y in t
    m = t_idx.size
    A = coo_matrix((np.ones(2 * m), (np.concatenate([t_idx, T + y_idx]), np.tile(np.arange(m), 2))), shape=(T + V, m))
    res = linprog(-np.ones(m), A_ub=A.tocsr(), b_ub=np.concatenate([qt, p]), bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"linear program failed: {res.message}")
    return float(-res.fun)
