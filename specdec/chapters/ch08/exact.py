"""Chapter 08's exact and sampled evidence: lossless alternatives, multi-draft verification,
approximate algorithms and reduced precision, each against the target's exact law.

Every algorithm is an `Entry`: how `specdec.core.exact.spec_law` enumerates it (a method name or a
chunk rule, and how many draft blocks), how `specdec.core.toy.sample_speculative` samples it (the
verifier and the drafts' sampling rule), and whether it claims to be lossless.  Distances from the
target's law: TV = 1/2 sum |law - target| and KL(law || target) in nats; the frequency test is
chapter 02's (`specdec.core.frequency`).

Example: exact_rows(target, draft, entries((2,)), 3, 2, SamplingConfig(1.2, 3, 0.9)) -> one row per
entry; the lossless ones have max_abs_error < 1e-12.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specdec.core.acceptance import context_beta
from specdec.core.rules import alternatives, approximate, multidraft, precision
from specdec.core.rules.positional import Rule, positional_law_rule
from specdec.core.frequency import design, pooled_tv
from specdec.core.exact import as_rule, expected_accepted, expected_accepted_rule, marginal, spec_law, target_law
from specdec.core.sampling import SamplingConfig
from specdec.core.stats import counts_of, gof_test, pool_cells, sample_size
from specdec.core.toy import TableModel, sample_speculative
from specdec.core.rules.variants import VARIANTS
from specdec.core.verify import verify
from specdec.report.formatting import config_label

__all__ = ["Entry", "entries", "per_setting", "exact_rows", "detect_samples", "frequency_rows", "small_pairs", "multidraft_rows",
           "precision_rows", "positional_specs"]

F64 = torch.float64
GREEDY = SamplingConfig(0.0)


@dataclass(frozen=True)
class Entry:
    """One algorithm of the chapter: name, family ("lossless" / "approximate"), exact method (a
    `spec_law` method name or chunk rule), sampler (a verify-like callable), draft blocks per step,
    and whether drafts are drawn greedily."""

    name: str
    family: str
    method: object
    sampler: object
    drafts: int = 1
    greedy_drafts: bool = False
    description: str = ""

    @property
    def lossless(self) -> bool:
        return self.family == "lossless"

    def draws(self, cfg: SamplingConfig) -> SamplingConfig:
        """The sampling rule the drafts are drawn with: greedy for the greedy-draft shortcut, else ``cfg``."""
        return GREEDY if self.greedy_drafts else cfg


def _rule_entry(rule) -> Entry:
    return Entry(rule.name, "lossless" if rule.lossless else "approximate", rule.law_rule, rule,
                 greedy_drafts=rule.draws == "argmax", description=rule.description)


def entries(n_drafts=(2, 3), typical_sweep=((0.3, 0.3), (0.01, 0.1)), lambdas=(0.5,), top_ks=(1, 2)) -> list[Entry]:
    """The chapter's algorithms: token and block verification, match, one-hot q, multi-draft
    (each n in n_drafts), then the approximate ones: typical acceptance at Medusa's published
    (eps, delta) and at each pair of ``typical_sweep``, relaxed acceptance (each lambda, both
    residuals), top-K membership (each K) and the greedy-draft shortcut."""
    out = [Entry("token", "lossless", "token", verify, description="token verification (Leviathan/Chen)"),
           Entry("block", "lossless", "block", verify, description="block verification (Sun et al.)")]
    out += [_rule_entry(r) for r in alternatives.LOSSLESS_ALTERNATIVES.values()]
    out += [Entry(f"multi-draft n={n}", "lossless", multidraft.multi_step_chunks, multidraft.verify_multi, drafts=n,
                  description=f"{n} independent drafts, recursive rejection sampling (SpecInfer)") for n in n_drafts]
    rules = [approximate.typical()] + [approximate.typical(e, d) for e, d in typical_sweep]
    rules += [approximate.relaxed(lam, m) for lam in lambdas for m in (False, True)]
    rules += [approximate.top_k_accept(K) for K in top_ks]
    greedy = Entry("greedy draft, sampled target", "approximate", "token", verify, greedy_drafts=True,
                   description=VARIANTS["greedy_draft"].bug)
    return out + [_rule_entry(r) for r in rules] + [greedy]


def per_setting(rows_of, configs) -> list[dict]:
    """The rows ``rows_of(cfg)`` returns for each sampling setting of ``configs`` ([temperature,
    top_k, top_p] lists), each led by the setting's label (column "config", `config_label`).
    Example: per_setting(lambda c: [{"x": 1}], [[1.0, None, None]]) -> [{"config": "τ=1", "x": 1}]"""
    return [{"config": config_label(cfg), **r} for cfg in (SamplingConfig(*c) for c in configs) for r in rows_of(cfg)]


def _law(target, draft, e: Entry, n: int, k: int, cfg: SamplingConfig) -> torch.Tensor:
    return spec_law(target, draft, n, k, e.method, cfg, cfg, e.draws(cfg), drafts=e.drafts)


def _kl(law: np.ndarray, ref: np.ndarray) -> float:
    pos = law > 0
    if np.any(pos & (ref <= 0)):
        return float("inf")
    return max(0.0, float(np.sum(law[pos] * np.log(law[pos] / ref[pos]))))  # >= 0; rounding can dip below


def exact_rows(target: TableModel, draft: TableModel, algs: list[Entry], n: int, k: int,
               cfg: SamplingConfig) -> list[dict]:
    """Per algorithm: family, max |law - target law|, TV and KL(law || target) after 1..n tokens
    (tv_m, kl_m for each prefix length m; tv, kl at n), exact E[drafts kept] and E[L] in the first step."""
    ref = target_law(target, n, cfg)
    rows = []
    for e in algs:
        law = _law(target, draft, e, n, k, cfg)
        row = {"algorithm": e.name, "family": e.family, "lossless_claimed": e.lossless, "drafts": e.drafts,
               "max_abs_error": float((law - ref).abs().max())}
        for m in range(1, n + 1):
            row[f"tv_{m}"] = float(0.5 * (marginal(law, m) - marginal(ref, m)).abs().sum())
            row[f"kl_{m}"] = _kl(marginal(law, m).reshape(-1).numpy(), marginal(ref, m).reshape(-1).numpy())
        row["tv"], row["kl"] = row[f"tv_{n}"], row[f"kl_{n}"]
        if isinstance(e.method, str) and not e.greedy_drafts:
            acc = expected_accepted(target, draft, k, e.method, cfg, cfg)
        else:
            acc = expected_accepted_rule(target, draft, k, as_rule(e.method), cfg, cfg, e.draws(cfg), drafts=e.drafts)
        rows.append({**row, "expected_accepted": acc, "expected_tokens": acc + 1.0, "description": e.description})
    return rows


def detect_samples(law: np.ndarray, ref: np.ndarray, alpha: float, power: float) -> tuple[int, float]:
    """(N, TV on the tested cells): the smallest N at which the frequency test (cells pooled for N
    samples) has the stated power against ``law``, from its exact TV on the pooled cells; iterated
    until the pooling and N agree.  (0, 0.0) when the law equals ref on every tested cell."""
    pos = ref > 0
    labels = np.arange(int(pos.sum()))
    N = 0
    for _ in range(6):
        tvp = pooled_tv(law, ref, labels)
        if tvp <= 1e-12:
            return 0, 0.0
        cells = int(labels.max()) + 1 + int(np.any(law[~pos] > 0))
        N_new = sample_size(tvp, max(cells, 2), alpha, power)
        if N_new == N:
            break
        N = N_new
        labels = pool_cells(ref[pos] / ref[pos].sum(), N)
    return N, tvp


def frequency_rows(target: TableModel, draft: TableModel, algs: list[Entry], n: int, k: int, cfg: SamplingConfig,
                   eps: float, alpha: float, power: float, seed: int, max_samples: int) -> list[dict]:
    """Per algorithm: the test at the design N for ``eps`` (every lossless one must pass), and for a
    lossy one the N that detects its own TV and, when that N <= max_samples, the test run at it
    (it must be caught).  Each run draws from its own generator ``seed * 1000 + row * 10 + run``."""
    ref = target_law(target, n, cfg).reshape(-1).numpy()
    N_design = design(target, n, cfg, eps, alpha, power)["samples"]
    rows = []
    for i, e in enumerate(algs):
        law = _law(target, draft, e, n, k, cfg).reshape(-1).numpy()
        N_det, tv_det = detect_samples(law, ref, alpha, power)
        exact_tv = 0.5 * float(np.abs(law - ref).sum())
        runs = [("design", N_design)] + ([("detect", N_det)] if 0 < N_det <= max_samples and N_det != N_design else [])
        for j, (what, N) in enumerate(runs):
            gen = torch.Generator().manual_seed(seed * 1000 + i * 10 + j)
            samples = sample_speculative(target, draft, n, k, N, gen, e.method if isinstance(e.method, str) else "token",
                                         cfg, cfg, e.draws(cfg), e.sampler, drafts=e.drafts)
            r = gof_test(counts_of(samples.numpy(), target.V, n), ref)
            rows.append({"algorithm": e.name, "family": e.family, "run": what, "samples": N, "chi2": r.statistic,
                         "df": r.df, "p_value": r.p_value, "tv_sampled": r.tv, "exact_tv": exact_tv,
                         "detect_samples": N_det, "exact_tv_tested": tv_det,
                         "verdict": "passes" if r.p_value > alpha else "caught"})
        if not runs[1:] and N_det > max_samples:
            rows.append({"algorithm": e.name, "family": e.family, "run": "detect (not run: N too large)",
                         "samples": N_det, "chi2": float("nan"), "df": 0, "p_value": float("nan"),
                         "tv_sampled": float("nan"), "exact_tv": exact_tv,
                         "detect_samples": N_det, "exact_tv_tested": tv_det, "verdict": "not run"})
    return rows


def small_pairs(target: TableModel, draft: TableModel, cfg: SamplingConfig, vocab: int, count: int,
                seed: int) -> dict:
    """Pairs (p, q) for the multi-draft figure: the toy pair's first-position laws under ``cfg``, and
    ``count`` pairs drawn from a flat Dirichlet over ``vocab`` tokens (numpy generator ``seed``)."""
    empty = torch.zeros(1, 0, dtype=torch.long)
    pairs = {"toy pair, first token": (target.probs_for(empty, cfg)[0].numpy(), draft.probs_for(empty, cfg)[0].numpy())}
    rng = np.random.default_rng(seed)
    for i in range(count):
        pairs[f"random pair {i + 1}, V={vocab}"] = (rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab)))
    return pairs


def multidraft_rows(pairs: dict, n_max: int, lp_max_tuples: int = 4096) -> list[dict]:
    """Per named pair (p, q) over a small vocabulary and n = 1..n_max: acceptance of recursive
    rejection sampling, the optimal bound (subset formula; LP where V^n <= lp_max_tuples, else NaN)
    and the single-draft acceptance sum min{p, q}."""
    rows = []
    for name, (p, q) in pairs.items():
        p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        for n in range(1, n_max + 1):
            lp = multidraft.optimal_acceptance_lp(p, q, n) if p.size ** n <= lp_max_tuples else float("nan")
            rows.append({"pair": name, "vocabulary": p.size, "drafts": n, "rrs": multidraft.rrs_acceptance(p, q, n),
                         "optimal": multidraft.optimal_acceptance(p, q, n), "optimal_lp": lp,
                         "single_draft": float(context_beta(torch.from_numpy(p), torch.from_numpy(q)))})
    return rows


def precision_rows(target: TableModel, draft: TableModel, n: int, k: int, cfg: SamplingConfig,
                   alpha: float, power: float) -> list[dict]:
    """Per precision path: the exact law its arithmetic realizes over n tokens with k drafts (token
    verification), TV from the exact target law and from the same-precision target's own law, the
    largest |row total - 1| of its processed rows, and the N a frequency test needs to see each TV."""
    ref = target_law(target, n, cfg).reshape(-1)
    cells = int((ref > 0).sum())
    rows = []
    for path in precision.PATHS.values():
        raw, norm = precision.precision_cfg(path, cfg), precision.precision_cfg(path, cfg, normalize=True)
        # token verification in the path's verification arithmetic
        rule = positional_law_rule(precision.token_parts(precision.DTYPES[path.verify]))
        law = spec_law(target, draft, n, k, rule, raw, raw, norm).reshape(-1)
        same = target_law(target, n, norm).reshape(-1)
        dev = max(float((raw(m.table).sum(-1) - 1).abs().max()) for m in (target, draft))
        tv_e, tv_s = float(precision.tv(law, ref)), float(precision.tv(law, same))
        rows.append({"path": path.name, "logits": path.logits, "probs": path.probs, "verify": path.verify,
                     "tv_exact": tv_e, "tv_same_precision": tv_s, "row_total_deviation": dev,
                     "detect_exact": sample_size(tv_e, cells, alpha, power) if tv_e > 1e-15 else 0,
                     "detect_same_precision": sample_size(tv_s, cells, alpha, power) if tv_s > 1e-15 else 0})
    return rows


def positional_specs(algs: list[Entry]) -> dict:
    """{name: (positional parts, family, greedy drafts)} of the single-draft algorithms whose rule is
    positional (token verification and the greedy-draft shortcut as `precision.token_parts` in
    float64); block and multi-draft verification are not positional and are left out."""
    return {e.name: (e.sampler.parts if isinstance(e.sampler, Rule) else precision.token_parts(F64), e.family,
                     e.greedy_drafts) for e in algs if e.drafts == 1 and e.method != "block"}
