"""Chapter 01's tables: one verified token, entry by entry, on a vocabulary small enough to list.

The identity checked (Leviathan et al. 2023, Theorem 3.5; equations (1)-(2), `specdec.core.verify`):

    pi(x) = q(x) a(x) + (1 - beta) r(x) = min{p(x), q(x)} + [p(x) - q(x)]_+ = p(x),
    a = min{1, p/q},   beta = sum_y min{p(y), q(y)},   r = [p - q]_+ / sum_y [p(y) - q(y)]_+ .

Evaluated exactly (`per_token_rows`, `edge_case_rows`, `pair_errors`), sampled through the real
`verify` (`sampled_verify`), and against replacement rules that put the rejected mass elsewhere
(`replacement_laws`).  Every function is pure given its generator; p, q are float64 (V,) tensors.

Example (the toy pair p = [1/3, 2/3], q = [2/3, 1/3]):
    per_token_rows(p, q)[0] -> token 0: a = 0.5, accepted_qa = 1/3, missing = 0, pi = 1/3
    replacement_tv_rows(replacement_laws(p, q))[1]["tv_from_p"] -> 1/9  (a fresh sample from p)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.acceptance import context_beta
from specdec.core.exact import one_step_law
from specdec.core.sampling import process_logits
from specdec.core.verify import accept_prob, residual, verify

__all__ = ["example_pair", "per_token_rows", "mass_decomposition_rows", "random_pairs", "pair_errors",
           "edge_cases", "edge_case_rows", "SampledVerify", "sampled_verify", "replacement_laws",
           "replacement_rule_rows", "replacement_tv_rows"]

F64 = torch.float64


def example_pair(V: int, temperature: float, top_k: int, generator: torch.Generator):
    """(p, q), each (V,) float64: target logits ~ 1.5 N(0, 1), draft logits = target's + 1.2 N(0, 1)
    (a related, cheaper model), both processed with the same temperature and top-k, so both have
    zeros.  Draws 2 V normals from ``generator``, target first."""
    logits_p = torch.randn(V, generator=generator, dtype=F64) * 1.5
    logits_q = logits_p + torch.randn(V, generator=generator, dtype=F64) * 1.2
    return process_logits(logits_p, temperature, top_k), process_logits(logits_q, temperature, top_k)


def per_token_rows(p: torch.Tensor, q: torch.Tensor) -> list[dict]:
    """One row per token x: p, q, a = min{1, p/q}, the accepted mass q a = min{p, q}, the missing
    mass [p - q]_+, r(x), the rejection branch's mass (1 - beta) r(x), pi(x) and pi(x) - p(x)."""
    a, r, pi = accept_prob(p, q), residual(p, q), one_step_law(p, q)
    beta = context_beta(p, q).item()
    return [dict(token=x, p=p[x].item(), q=q[x].item(), a=a[x].item(), accepted_qa=(q[x] * a[x]).item(),
                 missing=max(p[x].item() - q[x].item(), 0.0), r=r[x].item(),
                 rejected_mass_r=((1 - beta) * r[x]).item(), pi=pi[x].item(), pi_minus_p=(pi[x] - p[x]).item())
            for x in range(p.shape[-1])]


def mass_decomposition_rows(per_token: list[dict]) -> list[dict]:
    """The data of the stacked-bar figure: per token p, q, the accepted part and the residual part."""
    return [dict(token=int(r["token"]), p=float(r["p"]), q=float(r["q"]), accepted=float(r["accepted_qa"]),
                 residual_part=float(r["rejected_mass_r"])) for r in per_token]


def random_pairs(n: int, V: int, generator: torch.Generator):
    """(P, Q), each (n, V) float64: random logits (sd 2) processed with a random temperature in
    [0.3, 2) and a random top-k in 1..V, drawn independently for each side of each pair.
    Draws, in order: temperatures (n, 2), top-k (n, 2), target logits (n, V), draft logits (n, V)."""
    temps = 0.3 + 1.7 * torch.rand(n, 2, generator=generator, dtype=F64)
    ks = torch.randint(1, V + 1, (n, 2), generator=generator)
    lp = torch.randn(n, V, generator=generator, dtype=F64) * 2
    lq = torch.randn(n, V, generator=generator, dtype=F64) * 2
    P = torch.stack([process_logits(lp[i], float(temps[i, 0]), int(ks[i, 0])) for i in range(n)])
    Q = torch.stack([process_logits(lq[i], float(temps[i, 1]), int(ks[i, 1])) for i in range(n)])
    return P, Q


def pair_errors(P: torch.Tensor, Q: torch.Tensor) -> dict:
    """Over (n, V) pairs: err_random = max |pi - p|, and mass_identity = max |sum [p - q]_+ - (1 - beta)|."""
    err = float((one_step_law(P, Q) - P).abs().max())
    mass = float(((P - Q).clamp(min=0).sum(-1) - (1 - context_beta(P, Q))).abs().max())
    return {"err_random": err, "mass_identity": mass}


def edge_cases(V: int, p_any: torch.Tensor, q_any: torch.Tensor) -> dict:
    """The boundary cases of the one-step identity as {name: (p, q)} over V >= 6 tokens (V even:
    its halves are the supports; the one-hots sit on tokens 2, 3 and 5); ``p_any``, ``q_any`` are
    any target / draft distributions (V,).  Example: edge_cases(8, p, q)["disjoint supports"] ->
    (uniform on tokens 0-3, uniform on tokens 4-7), beta = 0."""
    half = [0.0] * (V // 2)
    masked = [-float("inf")] * (V - V // 2)
    first = process_logits(torch.tensor(half + masked, dtype=F64))        # uniform on the first half
    last = process_logits(torch.tensor(masked + half, dtype=F64))         # uniform on the second half
    full = process_logits(torch.zeros(V, dtype=F64))                      # uniform on all V
    one_hot = lambda i: torch.nn.functional.one_hot(torch.tensor(i), V).to(F64)  # noqa: E731
    return {
        "equal": (p_any, p_any),
        "p zero where q positive": (first, full),
        "q zero where p positive": (full, first),
        "disjoint supports": (first, last),
        "greedy target, sampled draft": (one_hot(3), q_any),
        "both greedy, different argmax": (one_hot(2), one_hot(5)),
    }


def edge_case_rows(cases: dict) -> list[dict]:
    """Per case: beta, max |pi - p| and whether the law has a NaN."""
    rows = []
    for name, (pe, qe) in cases.items():
        law = one_step_law(pe, qe)
        rows.append(dict(case=name, beta=float(context_beta(pe, qe)),
                         max_abs_pi_minus_p=float((law - pe).abs().max()), any_nan=bool(torch.isnan(law).any())))
    return rows


@dataclass(frozen=True)
class SampledVerify:
    """The real `verify` on N one-draft rows (drafts ~ q): counts of the emitted token per vocabulary
    entry against N p, and the sampled acceptance rate (compare with beta)."""

    counts: torch.Tensor  # (V,) int64
    expected: torch.Tensor  # (V,) float64, N p
    accept_rate: float  # share of rows whose draft was accepted

    def rows(self) -> list[dict]:
        return [dict(token=x, count=int(self.counts[x]), expected=float(self.expected[x]))
                for x in range(len(self.counts))]


def sampled_verify(p: torch.Tensor, q: torch.Tensor, n: int, generator: torch.Generator) -> SampledVerify:
    """N = n drafts x ~ q (one per batch row, k = 1), verified by `specdec.core.verify.verify`
    against p; the first emitted token of each row is counted.  Draws the drafts, then verify's
    uniforms, from ``generator``."""
    V = p.shape[-1]
    drafts = torch.multinomial(q, n, replacement=True, generator=generator).view(n, 1)  # (n, 1)
    res = verify(drafts, q.expand(n, 1, V), p.expand(n, 2, V), generator=generator)
    counts = torch.bincount(res.tokens[:, 0], minlength=V)  # (V,)
    return SampledVerify(counts, p * n, float(res.num_accepted.double().mean()))


def replacement_laws(p: torch.Tensor, q: torch.Tensor, spread: int = 3) -> dict:
    """Law of the verified token when the rejected mass 1 - beta goes to: the residual r (correct),
    a fresh sample from p, the argmax of p, or a uniform pick among the ``spread`` most likely
    tokens of p:  pi' = min{p, q} + (1 - beta) * (that distribution).  {rule name: (V,) law}."""
    V = p.shape[-1]
    beta = context_beta(p, q).item()
    return {
        "residual r (correct)": one_step_law(p, q),
        "fresh sample from p": torch.minimum(p, q) + (1 - beta) * p,
        "argmax of p": torch.minimum(p, q) + (1 - beta) * torch.nn.functional.one_hot(p.argmax(), V).to(p.dtype),
        f"uniform over top-{spread} of p": torch.minimum(p, q) + (1 - beta) * torch.zeros(V, dtype=p.dtype).scatter(
            0, p.topk(spread).indices, 1 / spread),
    }


def replacement_rule_rows(laws: dict, p: torch.Tensor) -> list[dict]:
    """Long table of the laws: rule, token, probability, target p(token)."""
    return [dict(rule=name, token=x, probability=float(law[x]), target=float(p[x]))
            for name, law in laws.items() for x in range(p.shape[-1])]


def replacement_tv_rows(laws: dict, p: torch.Tensor) -> list[dict]:
    """Total variation 1/2 sum |pi' - p| of each rule's law from p."""
    return [dict(rule=name, tv_from_p=0.5 * float((law - p).abs().sum())) for name, law in laws.items()]
