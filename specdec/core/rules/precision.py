"""Numerical precision as one more approximation: the law that a reduced-precision code path of
speculative sampling actually realizes, computed exactly.

A path is three choices (`Path`):
  logits     the precision the models' logits arrive in (bfloat16, float16, float32, float64);
  probs      the working precision of temperature, truncation and softmax (`process_logits(dtype=)`):
             half precision leaves rows that sum to 1 only within its rounding;
  verify     the precision of the ratio p(x)/q(x) and of the residual [p - q]_+.
Uniforms are float64 and every draw is an inverse CDF over the row's own total (`sample_inverse_cdf`),
so a draft follows q~/sum q~, the bonus p~/sum p~, the residual r~/sum r~ -- exactly as the engine's
samplers do.  With a~ the rounded acceptance, position i then emits y with probability

    pi(y) = qn(y) a~(y) + (sum_x qn(x) (1 - a~(x))) r~(y) / sum r~,      qn = q~ / sum q~,

which `one_step_law` computes in float64.  Two distances matter: from the exact target law
(float64 logits and arithmetic), and from the *same-precision target* p~ / sum p~ -- what plain
autoregressive decoding with the same rounded rows samples.  The first mixes in the rounding of the
model itself, which no decoding algorithm can undo; the second is what speculative sampling adds.
Rows that do not sum to 1 make the second distance non-zero: the acceptance compares the raw
p~(x) with the raw q~(x), so a row of total s != 1 is accepted as if scaled by s.

`precision_cfg(path, cfg, normalize)` turns a path into the processing callable that
`specdec.core.toy.TableModel.probs_for` and `specdec.core.exact` accept, and `token_parts(dtype)`
the token-verification rule with its arithmetic in ``dtype`` (`specdec.core.rules.positional`), so exact
laws over whole generations follow from `spec_law` unchanged.

Example: PATHS["bf16 softmax"] keeps bfloat16 probabilities; one_step_law on them differs from
p~ / sum p~ by about the rows' deviation of their totals from 1 (~1e-3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.core.rules.positional import drafted_probs
from specdec.core.sampling import SamplingConfig, process_logits

__all__ = ["Path", "PATHS", "DTYPES", "precision_cfg", "token_parts", "one_step_law", "tv"]

F64 = torch.float64
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Path:
    """One precision path: dtype names (keys of DTYPES) of the logits, the processing, the verification."""

    name: str
    logits: str
    probs: str
    verify: str

    def __post_init__(self):
        for part in ("logits", "probs", "verify"):
            _dtype(getattr(self, part), part)


def _dtype(name, part: str) -> torch.dtype:
    """The torch dtype of a path's dtype name, or a ValueError naming the part and the valid names."""
    if not isinstance(name, str) or name not in DTYPES:
        raise ValueError(f"a precision path's {part} dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


PATHS = {p.name: p for p in [
    Path("exact (float64)", "float64", "float64", "float64"),
    Path("float32 engine", "float32", "float32", "float64"),
    Path("float32, verify in float32", "float32", "float32", "float32"),
    Path("bf16 logits, float32 softmax", "bfloat16", "float32", "float64"),
    Path("fp16 logits, float32 softmax", "float16", "float32", "float64"),
    Path("bf16 softmax", "bfloat16", "bfloat16", "float64"),
    Path("fp16 softmax", "float16", "float16", "float64"),
    Path("bf16 softmax, verify in bf16", "bfloat16", "bfloat16", "bfloat16"),
]}


def precision_cfg(path: Path, cfg: SamplingConfig, normalize: bool = False):
    """logits -> processed rows as this path computes them, returned in float64 (the rounded values).
    normalize=True divides each row by its float64 total: the law an inverse-CDF draw realizes.
    A dtype name outside DTYPES is refused with a ValueError listing the valid ones."""
    if not isinstance(path, Path):
        raise ValueError(f"path must be a precision Path (see PATHS), got {type(path).__name__}")
    lo, pr = _dtype(path.logits, "logits"), _dtype(path.probs, "probs")

    def process(logits: torch.Tensor) -> torch.Tensor:
        rows = process_logits(logits.to(lo), cfg.temperature, cfg.top_k, cfg.top_p, check=False, dtype=pr).to(F64)
        return rows / rows.sum(-1, keepdim=True) if normalize else rows

    return process


def token_parts(dtype: torch.dtype):
    """Token verification (a = min{1, p(x)/q(x)}, r = [p - q]_+) with both computed in ``dtype``
    from the given rows, as a positional rule's parts."""

    def parts(d, q, p):
        k = d.shape[1]
        px, qx = (t.to(dtype) for t in drafted_probs(d, q, p))
        a = torch.where(qx > 0, torch.clamp(px / torch.where(qx > 0, qx, 1.0), max=1.0), 1.0).to(F64)  # q = 0: never drafted
        r = torch.clamp(p[:, :k].to(dtype) - q.to(dtype), min=0.0).to(F64)
        return a, torch.where(r.sum(-1, keepdim=True) > 0, r, p[:, :k].to(F64))

    return parts


def one_step_law(p: torch.Tensor, q: torch.Tensor, dtype: torch.dtype = F64) -> torch.Tensor:
    """The law (float64) of one verified token (module docstring) from rounded rows p~, q~ (..., V)
    given in float64, with the ratio and residual in ``dtype``: a batched closed form of
    `specdec.core.rules.positional.first_token_law` with `token_parts` (tested equal to it).
    p and q must be tensors of one shape, finite and non-negative, with every row of positive mass
    (a rounded row may miss 1, an empty or NaN one has no law): else a ValueError naming the problem."""
    _check_rows(p, q)
    p, q = p.to(F64), q.to(F64)
    qn = q / q.sum(-1, keepdim=True)
    a = torch.where(q > 0, torch.clamp(p.to(dtype) / torch.where(q > 0, q, 1.0).to(dtype), max=1.0).to(F64), 1.0)
    r = torch.clamp(p.to(dtype) - q.to(dtype), min=0.0).to(F64)
    mass = r.sum(-1, keepdim=True)
    r = torch.where(mass > 0, r / torch.where(mass > 0, mass, 1.0), p / p.sum(-1, keepdim=True))
    rej = (qn * (1 - a)).sum(-1, keepdim=True)
    return qn * a + rej * r


def _check_rows(p, q) -> None:
    if not (isinstance(p, torch.Tensor) and isinstance(q, torch.Tensor)) or p.shape != q.shape or p.dim() < 1:
        raise ValueError(f"p and q must be tensors (..., V) of one shape, got "
                         f"{getattr(p, 'shape', type(p).__name__)} and {getattr(q, 'shape', type(q).__name__)}")
    for name, t in (("p", p), ("q", q)):
        t = t.to(F64)
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or inf")
        if bool((t < 0).any()):
            raise ValueError(f"{name} has negative entries")
        if not bool((t.sum(-1) > 0).all()):
            raise ValueError(f"a row of {name} has no mass (all zeros): it is not a distribution")


def tv(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Total variation over the last axis, float64.  Example: tv([1, 0], [0.5, 0.5]) -> 0.5."""
    return 0.5 * (torch.as_tensor(a, dtype=F64) - torch.as_tensor(b, dtype=F64)).abs().sum(-1)
