"""Logits -> processed distributions (temperature, top-k, top-p, greedy), and categorical sampling.

The distribution a model *samples from* is not softmax(logits): it is the distribution after the
sampling rules.  Speculative sampling is exact only when the acceptance test uses these processed
distributions for both target (p) and draft (q) -- seed, section 2; Leviathan et al. 2022, section
2.3.  `process_logits` applies the rules in the order Hugging Face's `generate` applies its logits
warpers:

    z = logits / T                                   (temperature; T = 0 means greedy)
    keep x  iff  z_x >= (k-th largest z)             (top-k; ties at the k-th value are kept)
    keep x  iff  mass of tokens ranked above x < top_p   (top-p, on softmax of what top-k kept)
    probs = softmax(z over kept tokens)              (renormalize)

Top-p keeps the smallest set of most-probable tokens whose mass reaches `top_p`; tokens are ranked
by a stable descending sort, so among equal probabilities the lower token id ranks first.

`SamplingConfig` names one such set of rules (the one sampling configuration of the project: the
toy models, the engine and its drafters all take it), and `sample` draws one token per row.

Example: process_logits(torch.tensor([2.0, 1.0, 0.0]), top_k=2) -> tensor([0.7311, 0.2689, 0.0000])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["SamplingConfig", "process_logits", "sample_inverse_cdf", "sample", "uniforms", "draws", "RowGenerators",
           "logit_flags", "raise_for_flags"]


def _check_knobs(temperature, top_k, top_p) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if math.isnan(temperature) or math.isinf(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not (0 < top_p <= 1):
            raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")


def logit_flags(x: torch.Tensor) -> torch.Tensor:
    """(3,) bool tensor, no host sync: [any NaN, any +inf, any row all -inf] of logits (..., V).

    For callers that fold the check into a sync they make anyway; `raise_for_flags` turns the
    synced values into the same errors `process_logits` raises.  (The engine syncs only whether
    every row maximum is finite, and computes these flags on the way to an error.)
    """
    m = x.amax(dim=-1)  # (...,): NaN if a row has a NaN (amax propagates it), +inf if one has +inf, -inf if all are
    return torch.stack([torch.isnan(m).any(), torch.isposinf(m).any(), torch.isneginf(m).any()])


def raise_for_flags(flags, what: str = "logits") -> None:
    """Raise the ValueError that names the first problem in synced `logit_flags` values."""
    nan, posinf, dead = (bool(f) for f in flags)
    if nan:
        raise ValueError(f"{what} contain NaN")
    if posinf:
        raise ValueError(f"{what} contain +inf")
    if dead:
        raise ValueError(f"a row of {what} is all -inf: no token can be sampled")


def _check_logits(logits, check: bool = True, dtype: torch.dtype | None = None) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    if logits.dim() < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last (vocabulary) axis, got shape {tuple(logits.shape)}")
    # half precision is upcast: the result is float32 (or float64 for float64 input), never half
    x = logits if logits.dtype == torch.float64 else logits.to(torch.float32)
    if dtype is not None:  # an explicit working precision (specdec.core.rules.precision studies them)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        x = logits.to(dtype)
    if check:
        raise_for_flags(logit_flags(x).tolist())  # all three checks in one host sync
    return x


def process_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None, *, check: bool = True, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Probabilities over the last axis after temperature, top-k, top-p, renormalization.

    logits: (..., V) float tensor; -inf entries are masked tokens.  Never modified.
    temperature: 0 gives greedy decoding, a one-hot on the argmax (ties: the lowest index, as
        `torch.argmax` returns the first maximum); top_k / top_p are then irrelevant.
    top_k: keep the tokens whose logit is >= the k-th largest (k > V keeps all).
    top_p: nucleus, in (0, 1]; 1 keeps all.
    check: raise on NaN, +inf or an all -inf row (one host sync).  The engine passes False and
        checks its logits' row maxima inside the one sync it makes per step instead.
    dtype: the working precision of every operation (temperature, truncation, softmax) and of the
        result; None (the engine's choice) is float32, or float64 for float64 logits.  Half
        precision rows sum to 1 only within its rounding (`specdec.core.rules.precision`).
    Returns (..., V) float32 (float64 for float64 input; ``dtype`` when given), rows summing to 1.

    Example: process_logits(torch.tensor([0.0, 0.0, -1e9]), temperature=0) -> tensor([1., 0., 0.])
    """
    _check_knobs(temperature, top_k, top_p)
    return _warp(_check_logits(logits, check, dtype), temperature, top_k, top_p)


def _warp(x: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """`process_logits` on checked logits x (..., V) with validated rules."""
    V = x.shape[-1]
    if temperature == 0:
        idx = x.argmax(dim=-1, keepdim=True)  # (..., 1), first maximum
        return torch.zeros_like(x).scatter_(-1, idx, 1.0)
    z = x / temperature if temperature != 1 else x  # x / 1 is x bit for bit; nothing below writes into z
    if top_k is not None and top_k < V:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # (..., 1)
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_z, order = torch.sort(z, dim=-1, descending=True, stable=True)  # (..., V)
        probs_sorted = torch.softmax(sorted_z, dim=-1)
        mass_before = torch.cumsum(probs_sorted, dim=-1) - probs_sorted  # mass ranked above each token
        drop_sorted = mass_before >= top_p  # the first token is always kept (mass_before = 0)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        z = z.masked_fill(drop, float("-inf"))
    return torch.softmax(z, dim=-1)


_ZEROS: dict = {}


def _zero(like: torch.Tensor) -> torch.Tensor:
    """A 0-dim zero of ``like``'s dtype and device, made once (one tensor operation fewer per draw)."""
    key = (like.dtype, like.device)
    if key not in _ZEROS:
        with torch.inference_mode(False):  # a normal tensor, usable in and out of inference mode
            _ZEROS[key] = torch.zeros((), dtype=like.dtype, device=like.device)
    return _ZEROS[key]


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Token ids drawn from `probs` by inverse-CDF with the given uniforms; no randomness inside.

    probs: (..., V) non-negative rows with positive mass (need not be normalized).
    u: (...) uniforms in [0, 1).  Returns (...) int64: the first x with cdf(x) > u * total.
    The threshold is kept strictly below the total (rounding can put u * total on it), so the id
    is always < V, and a token with zero probability is never returned (cdf does not rise there).
    Rows that are not distributions (NaN) still give an id < V (clamped): the caller's check, not an
    out-of-range index further down, reports them.

    Example: sample_inverse_cdf(torch.tensor([0.2, 0.0, 0.8]), torch.tensor(0.5)) -> tensor(2)
    """
    cdf = torch.cumsum(probs, dim=-1)  # (..., V), non-decreasing in floating point too
    total = cdf[..., -1:]  # (..., 1)
    thr = torch.minimum(u.unsqueeze(-1).to(cdf.dtype) * total, torch.nextafter(total, _zero(cdf)))
    return torch.searchsorted(cdf, thr, right=True).squeeze(-1).clamp_(max=probs.shape[-1] - 1)  # (...)


class RowGenerators:
    """One torch.Generator per batch row, usable wherever a generator is: row b's uniforms come from
    its own generator (`uniforms`), so what a row draws does not depend on the other rows of its
    batch.  The continuous-batching loop (`specdec.engine.continuous`) gives each request one; rows
    leave (`select`) and join (`+`) with the batch.
    Example: uniforms((2, 3), RowGenerators([g0, g1]), "cpu")[1] == torch.rand(3, generator=g1', ...)
    for g1' seeded like g1."""

    def __init__(self, generators):
        self.generators = list(generators)
        if not all(isinstance(g, torch.Generator) for g in self.generators):
            raise ValueError("RowGenerators needs a list of torch.Generator, one per row")
        if len({str(g.device) for g in self.generators}) > 1:
            raise ValueError("the generators of a batch must live on one device")

    def __len__(self) -> int:
        return len(self.generators)

    def __add__(self, other: "RowGenerators") -> "RowGenerators":
        return RowGenerators(self.generators + other.generators)

    def select(self, rows) -> "RowGenerators":
        return RowGenerators([self.generators[int(r)] for r in rows])

    @property
    def device(self):
        return self.generators[0].device if self.generators else torch.device("cpu")


def uniforms(shape, generator, device) -> torch.Tensor:
    """float64 uniforms in [0, 1) of ``shape`` drawn from ``generator`` on the generator's own device
    (torch's default generator on ``device`` when None), then moved to ``device``: every sampler of
    the project draws its randomness this way, so a seeded generator gives the same numbers to all.
    A `RowGenerators` draws row b (``shape[0]`` rows) from its b-th generator.
    Example: uniforms((2, 3), torch.Generator().manual_seed(0), "cpu").shape -> (2, 3)."""
    if isinstance(generator, RowGenerators):
        shape = tuple(shape)
        if not shape or shape[0] != len(generator):
            raise ValueError(f"{len(generator)} row generators cannot draw uniforms of shape {shape}")
        rows = [torch.rand(shape[1:], generator=g, dtype=torch.float64, device=g.device) for g in generator.generators]
        return (torch.stack(rows) if rows else torch.empty(shape, dtype=torch.float64)).to(device)
    gdev = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=gdev).to(device)


def draws(n: int, rows: int, generator, device) -> torch.Tensor:
    """(n, rows) float64 uniforms: n successive draws of one uniform per row, drawn at once -- on a
    CPU generator the same numbers, in the same order, as n calls of ``uniforms((rows,), generator,
    device)`` (row b of a `RowGenerators` from its own generator; a CUDA generator advances per
    call, so there the numbers differ, not their law).  A drafter sampling n tokens in a row draws
    this way.
    Example: draws(3, 2, torch.Generator().manual_seed(0), "cpu")[1] is the second of three draws."""
    if isinstance(generator, RowGenerators):
        return uniforms((rows, n), generator, device).T
    return uniforms((n, rows), generator, device)


def sample(probs: torch.Tensor, generator: torch.Generator | None = None, *, greedy: bool = False,
           check: bool = True, float64: bool = True) -> torch.Tensor:
    """One token id per row of `probs` (..., V) -> (...) int64, using `generator` for the uniforms.

    greedy: the argmax of each row (the first maximum; probs is one-hot after temperature 0), with
        no uniform drawn.  Otherwise one float64 uniform per row from `generator` (on the
        generator's device), then `sample_inverse_cdf`.
    check: validate the rows first (non-negative, no NaN, positive mass), costing one host sync;
        the engine passes False for distributions `process_logits` has just built (it checks their
        logits in its one sync per step).
    float64: run the inverse CDF on float64 probabilities (exact to the rounding of the given
        probs); the engine passes False and runs it in the precision of probs (float32), which can
        pick a neighbouring token where a uniform falls within float32 rounding of a cdf step
        (about 1 token in 20,000 at V = 2000).
    None as generator uses torch's default generator.

    Example: sample(torch.tensor([[0.0, 1.0]]), torch.Generator().manual_seed(0)) -> tensor([1])
    """
    if check:
        if not isinstance(probs, torch.Tensor) or probs.dim() < 1 or probs.shape[-1] == 0:
            raise ValueError("probs must be a tensor with a non-empty last (vocabulary) axis")
        bad_neg, bad_nan, bad_zero = torch.stack([
            (probs < 0).any(), torch.isnan(probs).any(), (probs.sum(-1) <= 0).any()]).tolist()
        if bad_neg or bad_nan or bad_zero:
            raise ValueError("probs must be non-negative, free of NaN, with positive mass in every row")
    if greedy:
        return probs.argmax(dim=-1)
    u = uniforms(probs.shape[:-1], generator, probs.device)
    return sample_inverse_cdf(probs.to(torch.float64) if float64 else probs, u)


@dataclass(frozen=True)
class SamplingConfig:
    """The sampling rules that define a processed distribution (`process_logits`); validated.

    The target's rules; drafters process their own scores with the same ones, so q is the
    distribution each draft was sampled from.  Positional order: temperature, top_k, top_p.
    Example: SamplingConfig(0.7, top_p=0.9)(logits) == process_logits(logits, 0.7, None, 0.9)
    """

    temperature: float = 1.0  # 1 = the model's own law; 0 = greedy
    top_k: int | None = None  # None = no truncation (Hugging Face's generate defaults to 50)
    top_p: float | None = None  # None = no nucleus truncation

    def __post_init__(self):
        _check_knobs(self.temperature, self.top_k, self.top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def process(self, logits: torch.Tensor, check: bool = True) -> torch.Tensor:
        """(..., V) logits -> (..., V) processed probabilities (`process_logits`)."""
        return _warp(_check_logits(logits, check), self.temperature, self.top_k, self.top_p)  # rules checked once

    __call__ = process
