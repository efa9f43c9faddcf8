"""Verification of k drafted tokens against the target: accept, residual, bonus (token and block).

Token verification (Leviathan et al. 2022, Algorithm 1; seed, equations 1-2).  Draft x_i ~ q_i is
accepted with probability

    a(x) = min{1, p(x)/q(x)},        so the accepted mass is  q(x) a(x) = min{p(x), q(x)},     (1)

positions are checked in order and the first rejection stops the step; there one token is drawn
from the normalized residual

    r(x) = [p(x) - q(x)]_+ / sum_y [p(y) - q(y)]_+ .                                           (2)

When all k drafts are accepted the target contributes a bonus token from p_k = p(. | x_1..x_k).

Block verification (Sun et al., ICLR 2025, "Block Verification Accelerates Speculative
Decoding", Algorithm 2).  With weights w_0 = 1, w_i = min{1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i)}
(0-indexed distributions: p_i, q_i are the laws of token i+1 given i accepted drafts) and

    s_i = sum_y [w_i p_i(y) - q_i(y)]_+ ,   h_i = s_i / (s_i + 1 - w_i)  (i < k),   h_k = w_k,

draw eta_1..eta_k ~ U[0,1), keep tau = the largest i with eta_i < h_i (0 if none), accept
x_1..x_tau, then draw one token from [w_tau p_tau - q_tau]_+ normalized (tau < k) or from p_k
(tau = k).  Same output law as token verification, and optimal in expected accepted tokens.
Convention here: h_i = 0 when s_i = 0 (the residual at i is empty, so the step can never end there).

Conventions for floating point (both methods): ratios, weights w, h and uniforms are float64 and
a draft is accepted iff u < a, with u in [0, 1); so p(x) = 0 is always rejected (even at u = 0)
and p(x) = q(x) always accepted.  The block sums s_i are formed in the inputs' precision and
accumulated in float64 (float64 inputs stay float64 throughout).  A residual whose mass is
exactly zero (p == q up to rounding, reachable only through rounding) is replaced by p itself, its
limit -- see `residual`.

Example: p = q = [0.5, 0.5] -> a = [1, 1], every draft accepted, the residual is never drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.sampling import sample_inverse_cdf
from specdec.core.sampling import uniforms as draw_uniforms  # `uniforms` is verify's argument

__all__ = ["VerifyResult", "accept_prob", "residual", "block_weights", "block_stop_probs", "verify", "verify_unchecked",
           "greedy_verify", "check_inputs", "check_uniforms"]


@dataclass(frozen=True)
class VerifyResult:
    """What one verification step produced, per batch row.

    num_accepted: (B,) int64, drafts kept (0..k).
    tokens: (B, k+1) int64, the kept drafts, then the one target token (residual or bonus),
        then -1 padding.  Row b holds num_accepted[b] + 1 valid tokens.
    """

    num_accepted: torch.Tensor
    tokens: torch.Tensor


def accept_prob(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Equation (1): a = min{1, p/q} elementwise; 1 where q = 0 (never proposed, so q a = 0 = min{p, q}).

    Example: accept_prob(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> tensor([0.5, 1.0])
    """
    return torch.where(q > 0, p / q, 1.0).clamp_(max=1.0)  # p / 0 (inf or NaN) is computed, never selected


def residual(p: torch.Tensor, q: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Equation (2): r = [p - q]_+ / sum_y [p(y) - q(y)]_+ over the last axis.

    Where the mass sum_y [p - q]_+ is exactly zero (so p <= q everywhere; for distributions p == q
    and the rejection branch has probability zero) the row returned is p / sum(p), the residual's
    limit, so callers never divide by zero.  p may be a weighted distribution (block
    verification passes w p); it must have positive mass.  normalize=False skips the division
    (what an inverse-CDF sampler needs) and returns [p - q]_+, or p where that mass is zero.

    Example: residual(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> tensor([0., 1.])
    """
    r = torch.clamp(p - q, min=0.0)  # (..., V)
    mass = r.sum(dim=-1, keepdim=True)  # (..., 1)
    if not normalize:
        return torch.where(mass > 0, r, p)
    fallback = p / p.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, r / torch.where(mass > 0, mass, torch.ones_like(mass)), fallback)


def block_weights(px: torch.Tensor, qx: torch.Tensor) -> torch.Tensor:
    """Block verification weights w_i = min{1, w_{i-1} p(x_i)/q(x_i)}, w_0 = 1.

    px, qx: (..., k) target / draft probabilities of the drafted tokens (qx > 0), k >= 0.  Returns (..., k+1).
    The ratio is not clipped before multiplying: a likely token after an unlikely one restores w.
    Example: block_weights(torch.tensor([1/3, 2/3]), torch.tensor([2/3, 1/3])) -> [1, 0.5, 1]
    """
    ratio = px / torch.where(qx > 0, qx, torch.ones_like(qx))  # unclipped: w_i may recover to 1
    w = [px.new_ones(px.shape[:-1])]  # w_0 = 1 (also for k = 0: then w = [1], the bonus token only)
    for i in range(px.shape[-1]):  # loop over the k positions only
        w.append(torch.clamp(w[-1] * ratio[..., i], max=1.0))
    return torch.stack(w, dim=-1)


def block_stop_probs(w: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Block verification's h_1..h_k (module docstring): (B, k+1) weights, p (B, >=k, V), q (B, k, V)
    -> (B, k) float64, with h_i = s_i / (s_i + 1 - w_i) for i < k (0 where s_i = 0) and h_k = w_k.

    s_i = sum_y [w_i p_i(y) - q_i(y)]_+ is formed in the inputs' precision (float64 inputs stay
    exact) and accumulated in float64.  Shared by `verify` and the exact laws of `specdec.core.exact`.
    Example: w = [[1, 0.8, 0.5]], p = [[1/3, 2/3]] * 3, q = [[2/3, 1/3]] * 2 -> h = [[0.5, 0.5]]
    (s_1 = [0.8/3 - 2/3]_+ + [1.6/3 - 1/3]_+ = 0.2, h_1 = 0.2 / (0.2 + 1 - 0.8))
    """
    B, k = q.shape[0], q.shape[1]
    f64 = torch.float64
    h = torch.zeros(B, k, dtype=f64, device=w.device)  # h_1..h_k
    if k > 0:
        h[:, k - 1] = w[:, k]
    for i in range(1, k):  # loop over positions only; each step is (B, V)
        wi = w[:, i, None].to(torch.promote_types(p.dtype, q.dtype))
        s = (wi * p[:, i] - q[:, i]).clamp_(min=0.0).sum(-1, dtype=f64)  # (B,)
        den = s + 1.0 - w[:, i]
        h[:, i - 1] = torch.where(s > 0, s / torch.where(s > 0, den, torch.ones_like(den)), torch.zeros_like(s))
    return h


def greedy_verify(drafts: torch.Tensor, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification without building distributions; equal to `verify` on one-hot p and q
    (both methods): keep the drafts while each is the target's argmax, then the argmax itself
    (first maximum on ties, as process_logits(temperature=0)).
    drafts (A, k), logits (A, k+1, V) -> num_accepted (A,), tokens (A, k+1) padded with -1.
    Example: drafts [[3, 5]], argmax [[3, 4, 9]] -> n [1], tokens [[3, 4, -1]].
    """
    best = logits.argmax(-1)  # (A, k+1)
    n = (drafts == best[:, :-1]).long().cumprod(1).sum(1)  # (A,)
    j = torch.arange(best.shape[1], device=best.device)
    return n, torch.where(j[None] <= n[:, None], best, -1)


def _tol(*dtypes) -> float:
    """Tolerance on |row sum - 1| (see `check_inputs`): 1e-4 for float32 and float64 alike, 2e-2 if
    any input is half precision.  A float64 row often comes from a float32 softmax (`.double()` of
    it), whose sum is off by about sqrt(V) * 2^-24 (measured: 1.5e-7 at V = 16, 3.3e-6 at
    V = 50,257, 2.4e-5 at V = 262,144), so float64 is held to what its float32 origin allows.
    Half precision rows are off by up to ~1e-2 (process_logits never returns them; a caller might).
    """
    if any(d in (torch.float16, torch.bfloat16) for d in dtypes):
        return 2e-2
    return 1e-4


def _dist_flags(x: torch.Tensor, tol: float) -> list[torch.Tensor]:
    # two passes over x: aminmax (NaN propagates into both) and the row sums
    lo, hi = torch.aminmax(x) if x.numel() else (x.new_zeros(()), x.new_zeros(()))
    sums = x.sum(-1)
    return [~torch.isfinite(lo) | ~torch.isfinite(hi), lo < 0, ((sums - 1).abs() > tol).any()]


def check_inputs(draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor) -> None:
    """Raise ValueError unless drafts (B, k), q (B, k, V), p (B, k+1, V) are consistent distributions.

    Rows must be finite, non-negative and sum to 1 within a tolerance (`_tol`): 1e-4 for float32 and
    float64 -- a float64 row that came from a float32 softmax is accepted -- and 2e-2 for half
    precision.  Tolerance, not renormalization: rows are used exactly as given.  The cost is bounded
    for rounded rows (each entry within a relative tol of an exact distribution's, as after a
    float32 softmax): each acceptance probability min{1, p(x)/q(x)} moves by a factor within
    (1 +- tol)/(1 -+ tol), the residual and bonus draws renormalize exactly (inverse CDF over the
    row's own total), so the law of one verified token is within 4 tol of p in total variation
    (the accepted mass, the residual's weight and [p - q]_+ each move by at most 2 tol in L1), and
    the law of a step's outcome within 2 (k+1) tol, block verification included
    (checked in tests/core/test_verify_bad_inputs.py).
    All value checks run vectorized (two passes over p and q) and meet in one host sync.
    """
    for name, t in (("draft_tokens", draft_tokens), ("q", q), ("p", p)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if draft_tokens.dim() != 2 or draft_tokens.is_floating_point() or draft_tokens.dtype == torch.bool:
        raise ValueError(f"draft_tokens must be a (B, k) integer tensor, got shape {tuple(draft_tokens.shape)} "
                         f"dtype {draft_tokens.dtype}")
    B, k = draft_tokens.shape
    if q.dim() != 3 or p.dim() != 3 or not q.is_floating_point() or not p.is_floating_point():
        raise ValueError(f"q must be (B, k, V) and p (B, k+1, V) float tensors, got q {tuple(q.shape)} "
                         f"{q.dtype}, p {tuple(p.shape)} {p.dtype}")
    if q.shape[:2] != (B, k):
        raise ValueError(f"q has shape {tuple(q.shape)}, expected (B, k, V) = ({B}, {k}, V) from draft_tokens")
    if p.shape[:2] != (B, k + 1):
        raise ValueError(f"p has shape {tuple(p.shape)}, expected (B, k+1, V) = ({B}, {k + 1}, V)")
    if q.shape[2] != p.shape[2]:
        raise ValueError(f"vocabulary mismatch: q has V={q.shape[2]}, p has V={p.shape[2]}")
    V = p.shape[2]
    if V == 0:
        raise ValueError("empty vocabulary (V = 0)")
    tol = _tol(q.dtype, p.dtype)
    in_range = (draft_tokens >= 0) & (draft_tokens < V)  # (B, k)
    safe = torch.where(in_range, draft_tokens, torch.zeros_like(draft_tokens)).long()
    qx = q.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, k)
    flags = torch.stack([~in_range.all(), *_dist_flags(q, tol), *_dist_flags(p, tol),
                         (in_range & (qx <= 0)).any()]).tolist()  # the one host sync
    msgs = [
        f"draft token ids out of range [0, {V})",
        "q contains NaN or inf", "q has negative entries", f"rows of q do not sum to 1 (tolerance {tol:g})",
        "p contains NaN or inf", "p has negative entries", f"rows of p do not sum to 1 (tolerance {tol:g})",
        "a draft token has q(x) = 0: q is not the distribution the draft was sampled from "
        "(e.g. q from raw logits while the draft was sampled after top-k/top-p/temperature)",
    ]
    for bad, msg in zip(flags, msgs):
        if bad:
            raise ValueError(msg)


def verify(draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *, method: str = "token",
           generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None) -> VerifyResult:
    """Verify k drafts per row; returns the accepted drafts plus one target token.

    draft_tokens: (B, k) int, sampled from q.  q: (B, k, V) processed draft distributions.
    p: (B, k+1, V) processed target distributions (p[:, i] conditions on the first i drafts).
    method: "token" (Leviathan et al. Alg. 1) or "block" (Sun et al. 2025 Alg. 2).
    generator: the only source of randomness (B*(k+1) float64 uniforms per call); None uses
        torch's default generator.  Deterministic given a seeded generator.
    uniforms: for tests only (fixed-uniform test vectors, boundary cases such as u = 0): a (B, k+1)
        float64 tensor in [0, 1) used instead of drawing; the generator is then not touched.
        Column i < k is the uniform of draft i+1 (compared with a(x_{i+1}) by token verification,
        eta_{i+1} of block verification), column k the inverse-CDF draw of the final token's.
        Exactly the numbers the generator would have supplied: with uniforms = torch.rand((B, k+1),
        generator=g, dtype=torch.float64) the result equals verify(..., generator=g') for g' a
        copy of g.  Validated (shape, dtype, range) at the cost of one host sync.
    Greedy p (one-hot) gives the target's greedy tokens exactly.

    Example: p = q = one-hot on token 1, drafts [[1, 1]] -> num_accepted [2], tokens [[1, 1, 1]].
    """
    _check_method(method)
    check_inputs(draft_tokens, q, p)
    return verify_unchecked(draft_tokens, q, p, method=method, generator=generator, uniforms=uniforms)


def _check_method(method) -> None:
    if method not in ("token", "block"):
        raise ValueError(f"method must be 'token' or 'block', got {method!r}")


def check_uniforms(uniforms, B: int, k: int, width: int | None = None) -> None:
    """Raise ValueError unless `uniforms` is a (B, width) float64 tensor (width k+1 unless given)
    with every entry in [0, 1): the one check of injected uniforms, shared by every sampled rule
    (`verify`, the positional rules, multi-draft), so each says the same thing."""
    width = k + 1 if width is None else width
    if not isinstance(uniforms, torch.Tensor) or uniforms.dtype != torch.float64:
        raise ValueError(f"uniforms must be a float64 tensor, got "
                         f"{uniforms.dtype if isinstance(uniforms, torch.Tensor) else type(uniforms).__name__}")
    if tuple(uniforms.shape) != (B, width):
        what = "(B, k+1)" if width == k + 1 else "(B, k n + 1)"
        raise ValueError(f"uniforms has shape {tuple(uniforms.shape)}, expected {what} = ({B}, {width})")
    if uniforms.numel() and not bool(((uniforms >= 0) & (uniforms < 1)).all()):  # NaN fails too
        raise ValueError("uniforms must lie in [0, 1)")


def verify_unchecked(draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor, *, method: str = "token",
                     generator: torch.Generator | None = None,
                     uniforms: torch.Tensor | None = None) -> VerifyResult:
    """`verify` without `check_inputs` (and so without its host sync): for a caller that built
    drafts, q and p itself from checked logits (the engine, which checks them in the one sync it
    makes per step).  Same arguments, same randomness, same result as `verify` on valid inputs;
    `uniforms` (tests only) is validated here too.
    """
    _check_method(method)
    B, k = draft_tokens.shape
    dev = p.device
    d = draft_tokens.long()  # (B, k)
    f64 = torch.float64
    px = p[:, :k].gather(-1, d.unsqueeze(-1)).squeeze(-1).to(f64)  # (B, k)
    qx = q.gather(-1, d.unsqueeze(-1)).squeeze(-1).to(f64)  # (B, k)
    if uniforms is None:  # the normal path: B*(k+1) float64 uniforms from the generator
        u = draw_uniforms((B, k + 1), generator, dev)  # (B, k+1)
    else:
        check_uniforms(uniforms, B, k)
        u = uniforms.to(dev)  # (B, k+1)
    # few tensor operations: the engine calls this once per step, between model forwards that
    # leave the caches cold, where each small operation costs several microseconds
    if method == "token":
        n = (u[:, :k] < accept_prob(px, qx)).cumprod(dim=-1).sum(dim=-1)  # (B,) leading acceptances
        weight = None  # residual [p_n - q_n]_+
    else:
        w = block_weights(px, qx)  # (B, k+1)
        h = block_stop_probs(w, p, q)  # (B, k): h_1..h_k
        hit = u[:, :k] < h  # (B, k)
        pos = torch.arange(1, k + 1, device=dev)  # (k,)
        n = (hit.long() * pos).max(dim=-1).values if k > 0 else torch.zeros(B, dtype=torch.long, device=dev)
        weight = w.gather(1, n.unsqueeze(1)).squeeze(1)  # (B,)

    # the one target token: residual at position n (n < k) or bonus from p_k (n = k, q taken as 0)
    V = p.shape[2]
    at_n = n.view(B, 1, 1)
    p_n = p.gather(1, at_n.expand(B, 1, V)).squeeze(1).to(f64)  # (B, V), gather beats indexing
    if k > 0:
        q_n = q.gather(1, at_n.clamp(max=k - 1).expand(B, 1, V)).squeeze(1).to(f64)
        q_n = torch.where(at_n[:, 0] < k, q_n, 0.0)  # (B, V); zero for the bonus (n = k)
    else:
        q_n = torch.zeros_like(p_n)
    pw = p_n if weight is None else weight.unsqueeze(-1) * p_n  # block: w_n p_n
    y = sample_inverse_cdf(residual(pw, q_n, normalize=False), u[:, k])[:, None]  # (B, 1)

    # the kept drafts, y at position n, -1 after it
    tokens = torch.cat([d, y], dim=1).scatter_(1, at_n[:, 0], y)  # (B, k+1)
    return VerifyResult(num_accepted=n, tokens=tokens.masked_fill_(torch.arange(k + 1, device=dev) > at_n[:, 0], -1))
