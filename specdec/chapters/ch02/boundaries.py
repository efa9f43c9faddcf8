"""Chapter 02's boundary cases and the greedy criterion, run through the real `verify`.

Boundary cases (each on B independent batch rows built for it; what must happen follows from
equations (1)-(2) of `specdec.core.verify`):
  zero probability      the draft proposes x with p(x) = 0: a(x) = 0, never accepted, never emitted;
  equal distributions   p = q: a = 1 everywhere, all k drafts accepted;
  first-step rejection  p = [0.1, 0, 0.9], q = [0.5, 0.5, 0], draft 0: accepted w.p. a = 0.1/0.5, so
                        rejected w.p. 0.8, and the residual is the point mass on token 2;
  full acceptance       p = q on the drafts, p_k a point mass on token 2: k accepted, bonus 2;
  stop token in draft   the toy pair with a likely stop token: exact law, and the sampled one
                        (a frequency test), with the share of rows that stop inside the draft.

Greedy criterion: at temperature 0, p is one-hot on the argmax, a(x) = 1[x = argmax] and the residual
is the argmax, so greedy speculative decoding is token-identical to greedy target decoding whatever the
draft does.  Under sampling only the law matches: a shared seed gives different strings (the two
procedures consume their uniforms differently).

Example: greedy_identity(target, draft, 5, 3, 100, seed=9).rows[0]["identical_rows"] -> 100
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specdec.core.exact import spec_law, target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import counts_of, gof_test
from specdec.core.toy import TableModel, sample_autoregressive, sample_speculative
from specdec.core.verify import verify

__all__ = ["boundary_case_rows", "GreedyIdentity", "greedy_identity"]

F64 = torch.float64
EXACT_TOL = 1e-12  # an exact law equal to the target's up to float64 rounding


def _row(case: str, quantity: str, must: str, observed: float, holds) -> dict:
    return dict(case=case, quantity=quantity, must=must, observed=float(observed),
                verdict="holds" if bool(holds) else "fails")


def _stop_case(target: TableModel, draft: TableModel, rows: int, generator: torch.Generator,
               alpha: float) -> list[dict]:
    """The toy pair with the stop logit raised (target +1.5, draft +2.0): 4 tokens, k = 3."""
    stop, V = target.stop, target.V
    t_tab, d_tab = target.table.clone(), draft.table.clone()
    t_tab[..., stop] += 1.5
    d_tab[..., stop] += 2.0
    t_stop, d_stop = TableModel(t_tab, stop), TableModel(d_tab, stop)
    err = max(float((spec_law(t_stop, d_stop, 4, 3, m) - target_law(t_stop, 4)).abs().max()) for m in ("token", "block"))
    samples = sample_speculative(t_stop, d_stop, 4, 3, rows, generator)  # (rows, 4)
    stop_mid = float(((samples[:, :3] == stop).any(1)).double().mean())
    fit = gof_test(counts_of(samples.numpy(), V, 4), target_law(t_stop, 4).reshape(-1).numpy())
    case = "stop token in the draft"
    return [_row(case, "exact-law error", f"< {EXACT_TOL:g}", err, err < EXACT_TOL),
            _row(case, "p-value", f"> {alpha:g}", fit.p_value, fit.p_value > alpha),
            _row(case, "share stopping early", "> 0", stop_mid, stop_mid > 0)]


def boundary_case_rows(target: TableModel, draft: TableModel, rows: int, generator: torch.Generator,
                       alpha: float = 1e-3) -> list[dict]:
    """One row per check of a boundary case (module docstring): the case, the quantity measured on
    ``rows`` batch rows, what it must be (as text: "0", "> 0.001", ...), the observed value and the
    verdict ("holds" or "fails").  A share that must equal 0.8 may differ by 4 standard deviations
    of a share over ``rows``; a p-value must exceed ``alpha``.  ``target``/``draft`` (with a stop
    token) serve the stop-token case.  Draws from ``generator`` case by case, in the order listed."""
    B = rows
    const = lambda d, n: torch.tensor(d, dtype=F64).expand(B, n, len(d)).contiguous()  # noqa: E731
    # zero probability: the draft proposes token 0, which the target gives p = 0
    r = verify(torch.zeros(B, 2, dtype=torch.long), const([0.4, 0.3, 0.3], 2), const([0.0, 0.5, 0.5], 3),
               generator=generator)
    shown = int((r.tokens == 0).any(1).sum())  # kept as a draft or emitted by the residual
    out = [_row("zero probability", "rows that output it", "0", shown, shown == 0)]
    # equal distributions
    dist = torch.softmax(torch.randn(6, generator=generator, dtype=F64), -1)
    d = torch.multinomial(dist, B * 3, replacement=True, generator=generator).view(B, 3)
    r = verify(d, dist.expand(B, 3, 6), dist.expand(B, 4, 6), generator=generator)
    share = float((r.num_accepted == 3).double().mean())
    out.append(_row("equal distributions", "share all accepted", "1", share, share == 1))
    # first-step rejection: a = 0.1/0.5, the residual is the point mass on token 2
    r = verify(torch.zeros(B, 2, dtype=torch.long), const([0.5, 0.5, 0.0], 2), const([0.1, 0.0, 0.9], 3),
               generator=generator)
    rej = r.num_accepted == 0
    rate, sd = float(rej.double().mean()), float(np.sqrt(0.16 / B))
    then2 = float((r.tokens[rej, 0] == 2).double().mean())
    out += [_row("first-step rejection", "share rejected", f"0.8 ± {4 * sd:.3f}", rate, abs(rate - 0.8) <= 4 * sd),
            _row("first-step rejection", "rejections then token 2", "1", then2, then2 == 1)]
    # full acceptance: the bonus comes from p_k, here a point mass on token 2
    pk = torch.cat([const([0.5, 0.5, 0.0], 3), const([0.0, 0.0, 1.0], 1)], dim=1)
    r = verify(torch.randint(0, 2, (B, 3), generator=generator), const([0.5, 0.5, 0.0], 3), pk, generator=generator)
    share = float(((r.num_accepted == 3) & (r.tokens[:, 3] == 2)).double().mean())
    out.append(_row("full acceptance", "share all kept, bonus 2", "1", share, share == 1))
    return out + _stop_case(target, draft, B, generator, alpha)


@dataclass(frozen=True)
class GreedyIdentity:
    """rows: per (target, draft, method) how many of ``rows`` generations equal the target's own;
    same_seed_p: the p-value of the same-seed sampled generations against the target law."""

    rows: list
    same_seed_p: float


def greedy_identity(target: TableModel, draft: TableModel, n: int, k: int, rows: int, seed: int) -> GreedyIdentity:
    """Greedy target (temperature 0), sampled (temperature 1) or greedy draft, token or block verification:
    ``rows`` speculative generations of n tokens (k drafts; generator seeded ``seed``) compared row
    by row with greedy target decoding (seeded ``seed + 1``); then sampling at temperature 1 with one seed
    (``seed + 2``) for both procedures, compared row by row and tested against the target law."""
    greedy = SamplingConfig(0.0)
    out = []
    for dcfg, dname in [(SamplingConfig(1.0), "sampled draft (τ=1)"), (greedy, "greedy draft")]:
        for method in ("token", "block"):
            spec = sample_speculative(target, draft, n, k, rows, torch.Generator().manual_seed(seed), method,
                                      greedy, dcfg)
            ar = sample_autoregressive(target, n, rows, torch.Generator().manual_seed(seed + 1), greedy)
            out.append(dict(target="greedy", draft=dname, method=method, rows=rows,
                            identical_rows=int((spec == ar).all(1).sum())))
    c = SamplingConfig(1.0)
    spec = sample_speculative(target, draft, n, k, rows, torch.Generator().manual_seed(seed + 2), "token", c)
    ar = sample_autoregressive(target, n, rows, torch.Generator().manual_seed(seed + 2), c)
    fit = gof_test(counts_of(spec.numpy(), target.V, n), target_law(target, n, c).reshape(-1).numpy())
    out.append(dict(target="sampled (τ=1)", draft="sampled (τ=1), same seed", method="token", rows=rows,
                    identical_rows=int((spec == ar).all(1).sum())))
    return GreedyIdentity(out, fit.p_value)
