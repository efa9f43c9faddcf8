"""Every position of long outputs held to the target's law: the randomized probability integral
transform (PIT) of each generated token against the target's exact conditional at its prefix.

The transform.  At a prefix c the target's processed law p (`specdec.core.sampling.SamplingConfig`,
the rules in force) is recomputed by the project's own forward of the target on the prompt and the
sample (teacher forcing: one forward per sample gives every position).  Tokens are ranked by
descending p (ties: lower id first), and the emitted token x becomes

    u = F(x) + v p(x),   F(x) = sum of p over the tokens ranked before x,   v ~ Uniform(0, 1).

Under the target law u is Uniform(0, 1) given the prefix, so the u of every position of every sample
are independent and uniform (Rosenblatt 1952; Brockwell 2007 for the randomized discrete case).  A
token of target probability 0 is *impossible* (no u): one such token rejects the law.  Ranking by p
puts the target's likely tokens near u = 0: a rule that sharpens or flattens the law (a temperature
misapplied) piles u up at one end, a rule that moves mass toward the draft's choices shifts u
where the draft disagrees with the target.

The tests (`pit_test`), each a G-test of counts of u in ``bins`` equal-width bins against uniform:
overall; per position (positions in ``position_groups`` consecutive groups, a groups x bins table:
every group must be uniform); per verification-step index (the in-step index of `steps.token_steps`,
where the engine reports its steps: a fault acting at one draft position shows there).  The row's
p-value is min(1, m min_i p_i) over its m tests (Bonferroni), rejected at ``alpha``.

Power.  `min_detectable_tv`: the smallest binned TV of u's law from uniform that the overall test
detects with the stated power (worst case, `specdec.core.stats.power`).  `resampled_power`: the
rejection rate of the whole test over subsamples of a planted fault's own sequences (whole
sequences, without replacement, at most half of them) at a stated number of sequences -- the power
against that fault.  Not with replacement: duplicated sequences overdisperse the histogram, and
resamples of the target's own outputs then "reject" far above the level.

Example: u = pit_values(target, prompt, samples, SamplingConfig(1.0), np.random.default_rng(0))["u"];
    pit_test(u, alpha=0.01).p_value
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats as _st

from specdec.core.sampling import SamplingConfig
from specdec.core.stats import power as worst_case_power

__all__ = ["pit_values", "PITTest", "pit_test", "min_detectable_tv", "resampled_power"]

F64 = torch.float64


@torch.inference_mode()
def _ranked(model, prompt: list[int], samples: np.ndarray, sampling: SamplingConfig) -> tuple[np.ndarray, np.ndarray]:
    """(F, p(x)) (n, L) float64 of each sample's tokens under the target's processed law at its prefix."""
    dev = next(model.parameters()).device
    T, L = len(prompt), samples.shape[1]
    part = torch.as_tensor(samples, dtype=torch.long)
    ids = torch.cat([torch.tensor([prompt], dtype=torch.long).expand(part.shape[0], -1), part[:, :-1]], 1)
    p = sampling(model(input_ids=ids.to(dev)).logits[:, T - 1:T - 1 + L].double().cpu())  # (n, L, V)
    x = part.unsqueeze(-1)
    px = p.gather(-1, x)  # (n, L, 1)
    before = (p > px) | ((p == px) & (torch.arange(p.shape[-1]) < x))
    return (p * before).sum(-1).numpy(), px.squeeze(-1).numpy()


def pit_values(target, prompt, samples, sampling: SamplingConfig, rng: np.random.Generator,
               chunk: int = 16) -> dict:
    """{"u": (n, L) float64 (NaN at impossible tokens), "impossible": (n, L) bool} for ``samples``
    (n, L) token ids continuing ``prompt`` (module docstring); ``rng`` draws the v's."""
    s = np.asarray(samples)
    if s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 1:
        raise ValueError(f"samples must be (n >= 1, L >= 1) token ids, got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"samples must be integer token ids, got dtype {s.dtype}")
    V = int(target.config.vocab_size)
    ids = list(prompt)
    if not ids or any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < V for t in ids):
        raise ValueError(f"the prompt must be a non-empty list of token ids in [0, {V})")
    if s.min() < 0 or s.max() >= V:
        raise ValueError(f"sample tokens outside [0, {V})")
    if sampling.greedy:
        raise ValueError("the PIT is for T > 0; greedy decoding is tested token for token")
    parts = [_ranked(target, ids, s[i:i + chunk], sampling) for i in range(0, s.shape[0], chunk)]
    F, px = np.concatenate([f for f, _ in parts]), np.concatenate([q for _, q in parts])
    impossible = px <= 0
    u = F + rng.random(px.shape) * px
    return {"u": np.where(impossible, np.nan, np.clip(u, 0.0, 1.0)), "impossible": impossible}


@dataclass(frozen=True)
class PITTest:
    n_sequences: int
    n_values: int  # u values tested (impossible tokens excluded)
    impossible: int
    tests: tuple  # names of the component tests run: "overall", "position", "step index"
    p_components: tuple  # their p-values, in that order
    df_components: tuple
    p_value: float  # Bonferroni over the components; 0 with an impossible token
    alpha: float
    tv: float  # binned TV of the pooled u histogram from uniform
    mdtv: float  # overall test's minimal detectable binned TV at power 0.8 (its level alpha / m)

    @property
    def status(self) -> str:
        return "reject" if self.p_value <= self.alpha else "pass"


def _g(obs: np.ndarray) -> tuple[float, int]:
    """G statistic and df of a (groups, bins) table against uniform within each group (empty groups skipped)."""
    obs = np.atleast_2d(obs).astype(np.float64)
    obs = obs[obs.sum(1) > 0]
    exp = obs.sum(1, keepdims=True) / obs.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        g = 2.0 * np.where(obs > 0, obs * np.log(obs / exp), 0.0).sum()
    return float(g), int(obs.shape[0] * (obs.shape[1] - 1))


def _hist(u: np.ndarray, bins: int) -> np.ndarray:
    return np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1), minlength=bins)


def _check_u(u, step_index):
    u = np.asarray(u, dtype=np.float64)
    if u.ndim != 2 or u.size == 0:
        raise ValueError(f"u must be a non-empty (sequences, positions) array, got shape {u.shape}")
    ok = ~np.isnan(u)
    if np.any(np.isinf(u)) or np.any((u[ok] < 0) | (u[ok] > 1)):
        raise ValueError("u values must lie in [0, 1] (NaN marks an impossible token)")
    if step_index is not None:
        step_index = np.asarray(step_index)
        if step_index.shape != u.shape or not np.issubdtype(step_index.dtype, np.integer) or step_index.min() < 0:
            raise ValueError("step_index must be non-negative ints of u's shape (0 = unknown)")
    return u, ok, step_index


def pit_test(u, step_index=None, *, bins: int = 10, position_groups: int = 8, alpha: float = 0.01,
             min_expected: float = 5.0) -> PITTest:
    """The module's tests on u (sequences, L) with NaN at impossible tokens; ``step_index`` (same
    shape, 0 = unknown) adds the per-step-index test.  A component whose table would have an
    expected count below ``min_expected`` in some cell is not run (its name is absent from ``tests``)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise ValueError(f"bins must be an int >= 2, got {bins!r}")
    if isinstance(position_groups, bool) or not isinstance(position_groups, int) or position_groups < 1:
        raise ValueError(f"position_groups must be an int >= 1, got {position_groups!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    u, ok, step_index = _check_u(u, step_index)
    n, L = u.shape
    impossible = int((~ok).sum())
    names, ps, dfs = [], [], []

    def add(name, table):
        table = np.atleast_2d(table)
        table = table[table.sum(1) > 0]
        if table.size == 0 or (table.sum(1) / bins).min() < min_expected:
            return
        g, df = _g(table)
        names.append(name), ps.append(float(_st.chi2.sf(g, df))), dfs.append(df)

    pooled = _hist(u[ok], bins)
    add("overall", pooled)
    groups = np.array_split(np.arange(L), min(position_groups, L))
    if len(groups) > 1:
        add("position", np.stack([_hist(u[:, g][ok[:, g]], bins) for g in groups]))
    if step_index is not None:
        idx = sorted(set(step_index[ok & (step_index > 0)].tolist()))
        if len(idx) > 0:
            add("step index", np.stack([_hist(u[ok & (step_index == i)], bins) for i in idx]))
    if not names and not impossible:  # an impossible token decides the test without any bin
        raise ValueError(f"{int(ok.sum())} u values are too few for {bins} bins (expected >= {min_expected} per bin)")
    m = max(len(names), 1)
    p = 0.0 if impossible else min(1.0, m * min(ps))
    if not math.isfinite(p):
        raise ValueError("the PIT test's p-value is not finite")
    N = int(ok.sum())
    tv = 0.5 * float(np.abs(pooled / N - 1.0 / bins).sum()) if N else math.nan
    return PITTest(n, N, impossible, tuple(names), tuple(ps), tuple(dfs), p, alpha, tv,
                   min_detectable_tv(N, bins, alpha / m) if N else math.inf)


def min_detectable_tv(n_values: int, bins: int, level: float, power_target: float = 0.8) -> float:
    """Smallest binned TV eps (bisection, 1e-4) at which the worst-case power of a G/chi-square test
    with ``bins`` cells on ``n_values`` values at ``level`` reaches ``power_target``."""
    if isinstance(n_values, bool) or not isinstance(n_values, (int, np.integer)) or n_values < 1:
        raise ValueError(f"n_values must be an int >= 1, got {n_values!r}")
    if not 0 < power_target < 1 or not 0 < level < 1:
        raise ValueError("power_target and level must lie in (0, 1)")
    if worst_case_power(int(n_values), 1.0, bins, level) < power_target:
        return math.inf
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if worst_case_power(int(n_values), mid, bins, level) < power_target else (lo, mid)
    return hi


def resampled_power(u, step_index=None, *, sequences: int, resamples: int, rng: np.random.Generator,
                    **test) -> float:
    """Fraction of ``resamples`` draws of ``sequences`` distinct whole sequences (at most half of
    them) of a planted fault's u whose `pit_test` (``test``: its keywords) rejects: the power
    against that fault at that size."""
    u = np.asarray(u, dtype=np.float64)
    if isinstance(sequences, bool) or not isinstance(sequences, int) or sequences < 1:
        raise ValueError(f"sequences must be an int >= 1, got {sequences!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be an int >= 1, got {resamples!r}")
    if 2 * sequences > u.shape[0]:
        raise ValueError(f"subsamples of {sequences} sequences need at least {2 * sequences}; the fault has {u.shape[0]}")
    hits = 0
    for _ in range(resamples):
        pick = rng.choice(u.shape[0], sequences, replace=False)
        r = pit_test(u[pick], None if step_index is None else np.asarray(step_index)[pick], **test)
        hits += r.status == "reject"
    return hits / resamples
