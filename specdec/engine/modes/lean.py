"""GPT-2's forward written out on the model's own weights: the engine's lean mode.

Why.  On this CPU the embedded models are small enough that the module code around the arithmetic
is a large part of a forward (Python dispatch through nested modules, output dataclasses, mask
construction), the more so the smaller the model.  `LeanGPT2` runs the same operations
(embeddings, pre-norm blocks with scaled dot-product attention and the tanh-approximated GELU, the
final norm, the tied head) as a flat sequence of tensor calls on the model's parameters -- no
copies, no module dispatch, no output bookkeeping.  What that gains in decoding is `make bench`'s
``lean_gain`` (paired, with intervals; the book shows the committed numbers).  At up to
`kernel.MAX_ROWS` rows on one CPU thread its matrix products (each with the layer norm before it)
and the fed tokens' attention run on the project's C kernel (`specdec.engine.modes.kernel`),
which reads each weight from a packed copy (one per model, kept while the model lives: the weights'
memory twice) faster than torch's BLAS does at so few rows; elsewhere (another device or
dtype, more rows or threads, autograd, no C compiler) on torch's operators.  It
is an implementation of the model, not a different model: its logits equal Hugging Face's up to
fp32 rounding (a fused GELU and another attention kernel; tested to 1e-4 on every position a caller
reads on tiny models, ragged and left-padded batches included, and to 1e-3 on the trained embedded
pair, whose logits reach tens), so decoding with it is the same law, like the compiled mode.

What it accepts: a GPT-2 causal LM (``model_type`` "gpt2": the embedded family and the real-size
GPT-2 shapes of `specdec.family.architectures`) without cross-attention, per-layer attention
scaling, upcast-and-reordered attention or an activation other than GELU; anything else is refused
at wrapping, naming the reason.  The blocks' parameters are taken at wrapping: a model whose
parameters are replaced afterwards (not updated in place) is wrapped again.

The engine calls it as it calls any model (`specdec.engine.kv`): ``input_ids`` (B, s), the 2-D
``attention_mask`` over every cached and fed slot (0 = a hole), ``position_ids``, the cache
(``cache=``: the `specdec.engine.modes.grow.GrowCache` its ``new_cache`` hands the engine, or any
DynamicCache; keys and values are appended with its ``update``, so every cache surgery of the
engine -- crop, row selection, leading-slot drop, rows joining -- works unchanged) and
``logits_to_keep``.  Inference only: dropout is never applied, whatever ``model.training`` says.

Masking.  Query i of a forward that follows `past` cached slots attends slot j when j <= past + i
(causal) and the mask keeps j, or j is its own slot (several fed tokens only: a left-pad query of a
prompt, which the mask holes everywhere, then attends to itself and stays finite -- whatever an
attention kernel returns for a row with nothing to attend to -- and to every other query its slot
is a hole, whose weight is exactly 0).  A single fed token's own slot is the caller's to keep, as
the engine always does.

Hugging Face's `generate` (`specdec.measure.hf`) unwraps it (``.inner``) and runs the model's own
forward: the lean mode is ours only.

Example: generate(lean(target), ids, drafter=lean(draft), k=4, max_new_tokens=64, temperature=0)
gives the eager run's tokens (tested on tiny models).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from specdec.engine.kv import KVCompat
from specdec.engine.modes import kernel
from specdec.engine.modes.grow import GrowCache

__all__ = ["LeanGPT2", "lean", "refusal"]

_GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}  # activation -> F.gelu(approximate=)
_ARGS = {"input_ids", "attention_mask", "position_ids", "cache", "use_cache", "logits_to_keep"}


class _Output:
    """What the engine reads from a forward: ``logits`` (B, kept positions, V)."""

    __slots__ = ("logits",)

    def __init__(self, logits: torch.Tensor):
        self.logits = logits


def refusal(model) -> str | None:
    """Why `model` cannot run lean, or None."""
    if not isinstance(model, torch.nn.Module):
        return "not a torch.nn.Module"
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) != "gpt2" or not hasattr(model, "transformer") or not hasattr(model, "lm_head"):
        return f"the lean forward is GPT-2's (a GPT2LMHeadModel), got {type(model).__name__}"
    if cfg.activation_function not in _GELU:
        return f"activation {cfg.activation_function!r} (the lean forward has {sorted(_GELU)})"
    if getattr(cfg, "add_cross_attention", False):
        return "cross-attention layers"
    if getattr(cfg, "scale_attn_by_inverse_layer_idx", False) or not getattr(cfg, "scale_attn_weights", True):
        return "attention scaling other than 1/sqrt(head_dim)"
    if getattr(cfg, "reorder_and_upcast_attn", False):
        return "upcast-and-reordered attention"
    return None


class LeanGPT2(KVCompat):
    """``model`` (a GPT-2 causal LM) with the flat forward of the module docstring; takes ``cache=``."""

    mode = "lean"

    def __init__(self, model):
        if isinstance(model, KVCompat):
            raise ValueError(f"lean() takes the model itself, got a {type(model).__name__} wrapper")
        if (why := refusal(model)) is not None:
            raise ValueError(f"lean() cannot run this model: {why}")
        super().__init__(model)
        self.kv_name = "cache"
        cfg, t = model.config, model.transformer
        self.E, self.H = cfg.n_embd, cfg.n_head
        self.D, self.eps, self.approx = self.E // self.H, cfg.layer_norm_epsilon, _GELU[cfg.activation_function]
        self.scale = 1.0 / math.sqrt(self.D)
        self.blocks = [(b.ln_1.weight, b.ln_1.bias, b.attn.c_attn.weight, b.attn.c_attn.bias, b.attn.c_proj.weight,
                        b.attn.c_proj.bias, b.ln_2.weight, b.ln_2.bias, b.mlp.c_fc.weight, b.mlp.c_fc.bias,
                        b.mlp.c_proj.weight, b.mlp.c_proj.bias) for b in t.h]
        eps, ln_f, head = self.eps, (t.ln_f.weight, t.ln_f.bias), (model.lm_head.weight, getattr(model.lm_head, "bias", None))
        specs = [spec for w1, b1, wa, ba, wp, bp, w2, b2, wf, bf, wq, bq in self.blocks
                 for spec in ((wa, ba, (w1, b1, eps), False), (wp, bp, None, False), (wf, bf, (w2, b2, eps), False),
                              (wq, bq, None, False))] + [(head[0], head[1], (*ln_f, eps), True)]
        self.products, self.head = None, None
        if all(s[0].device.type == "cpu" and s[0].dtype == torch.float32 for s in specs) and kernel.available():
            try:  # each weight's product on the kernel, checked and packed once per model (`kernel.packed`)
                done = kernel.packed(model, specs)
                self.products, self.head = [tuple(done[4 * i:4 * i + 4]) for i in range(len(self.blocks))], done[-1]
            except ValueError:  # another dtype or device, or a weight laid out otherwise: torch's products
                pass

    def new_cache(self, slots: int) -> GrowCache:
        """The cache the engine decodes on (`specdec.engine.kv.new_cache`): a `GrowCache` of ``slots``
        slots, which appends in place where a DynamicCache copies every slot each step."""
        return GrowCache(slots)

    @staticmethod
    def _mask(attention_mask, B: int, s: int, past: int, device) -> torch.Tensor | None:
        """(B, 1, s, past + s) bool (or what broadcasts to it): causal and the caller's holes, and
        (s > 1) each query's own slot."""
        L = past + s
        causal = None if s == 1 else torch.ones(s, L, dtype=torch.bool, device=device).tril_(past)
        if attention_mask is None:
            return causal
        if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (B, L):
            raise ValueError(f"the lean forward needs a 2-D attention mask of every slot, ({B}, {L}) here "
                             f"({past} cached + {s} fed), got {tuple(attention_mask.shape)}")
        allowed = attention_mask.bool()[:, None, None, :]
        if causal is None:
            return allowed
        own = torch.ones(s, L, dtype=torch.bool, device=device).triu_(past).tril_(past)  # the diagonal
        return (allowed & causal) | own

    def _call(self, **kw):
        if unknown := set(kw) - _ARGS:
            raise ValueError(f"the lean forward takes {sorted(_ARGS)}, got also {sorted(unknown)}")
        ids, cache = kw["input_ids"], kw.get("cache")
        if ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(ids.shape)}")
        keep = kw.get("logits_to_keep") or 0
        if not isinstance(keep, int):
            raise ValueError(f"the lean forward keeps the last logits_to_keep positions (an int), "
                             f"got {type(keep).__name__}")
        B, s = ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        pos = kw.get("position_ids")
        if pos is None:
            pos = torch.arange(past, past + s, device=ids.device).expand(B, s)
        m, (E, H, D) = self.inner, (self.E, self.H, self.D)
        mask = self._mask(kw.get("attention_mask"), B, s, past, ids.device)
        h = F.embedding(ids, m.transformer.wte.weight) + F.embedding(pos, m.transformer.wpe.weight)
        fast = self.products is not None and B * s <= kernel.MAX_ROWS and kernel.uses_kernel()
        am = kw.get("attention_mask")
        slots = am.ne(0).to(torch.uint8) if fast and am is not None else None  # (B, L) kept slots, as _mask reads them
        for i, (w1, b1, wa, ba, wp, bp, w2, b2, wf, bf, wq, bq) in enumerate(self.blocks):
            pa, pp, pf, pq = self.products[i] if fast else (None,) * 4
            qkv = _affine(pa, h.view(-1, E), wa, ba, norm=(w1, b1, self.eps))
            q, k, v = qkv.view(B, s, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
            if cache is not None:
                k, v = cache.update(k, v, i)
            o = kernel.attend(q, k, v, slots, self.scale) if fast else None
            if o is None:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale).transpose(1, 2).reshape(-1, E)
            h = _affine(pp, o, wp, bp, h.view(-1, E))
            f = F.gelu(_affine(pf, h, wf, bf, norm=(w2, b2, self.eps)), approximate=self.approx)
            h = _affine(pq, f, wq, bq, h).view(B, s, E)
        h = h if keep <= 0 or keep >= s else h[:, -keep:]
        if fast:
            return _Output(self.head(h.reshape(-1, E)).view(B, h.shape[1], -1))
        t = m.transformer
        return _Output(F.linear(F.layer_norm(h, (E,), t.ln_f.weight, t.ln_f.bias, self.eps), m.lm_head.weight,
                                getattr(m.lm_head, "bias", None)))


def _affine(product, x, w, b, residual=None, norm=None):
    """b + n(x) @ w (+ residual), n the layer norm ``norm`` = (weight, bias, eps) or none: the kernel's
    ``product`` of that weight when given (`specdec.engine.modes.kernel.Affine`), else torch's."""
    if product is not None:
        return product(x, residual)
    if norm is not None:
        x = F.layer_norm(x, (x.shape[-1],), *norm)
    y = torch.addmm(b, x, w)
    return y if residual is None else y.add_(residual)


def lean(model) -> LeanGPT2:
    """`LeanGPT2(model)`: ``model``'s forward written out (module docstring); ValueError naming why
    when the model is not a GPT-2 it can run."""
    return LeanGPT2(model)
