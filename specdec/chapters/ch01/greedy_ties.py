"""Greedy verification in floating point: where the (k+1)-token forward and the one-token forward differ.

Greedy speculative decoding accepts the draft x_i iff x_i = argmax_x z_i^{(k+1)}(x), z_i^{(k+1)} being
the target's logits at position i of the verification forward over k+1 tokens (the pending token and k
drafts); plain greedy decoding emits argmax_x z_i^{(1)}(x) from a one-token forward with the KV cache.
In exact arithmetic the two logits are equal, so the decodings emit the same tokens (Leviathan et al.
2023).  In floating point the two forwards multiply matrices of different shapes, whose sums may be
reduced in different orders, so d_i = max_x |z_i^{(k+1)}(x) - z_i^{(1)}(x)| is small but need not be 0;
a position whose top-2 gap g_i = z_(1) - z_(2) (of the one-token logits) is below d_i is a near tie,
and its argmax can flip.

Both paths call the model as the engine does (`specdec.engine.decode`): ``cache=DynamicCache``, an
attention mask, explicit position ids, ``logits_to_keep``, the model's own dtype, under
``torch.inference_mode``.  Both start from one prompt cache (the prompt but its last token, fed apart
in one forward, so that it is bit for bit the same for both); the plain path then feeds one token per
forward (`plain_greedy`), the verification path k+1: the pending token and the next k tokens of the
plain greedy output, drafts that agree everywhere, so every window is accepted whole and the cache
grows as in the engine (`verification_logits`).  Teacher-forced on the plain output, one flip does
not change the later contexts.

Example (a model whose logits do not depend on the forward's shape):
    summary_rows(pandas.DataFrame(position_rows(model, prompts, 16, [1, 4])))
    -> [{"dtype": "float32", "k": 1, "positions": 16 N, "flips": 0, "max_abs_diff": 0.0, ...}, {... "k": 4 ...}]
"""

from __future__ import annotations

import torch

from specdec.core.stats import wilson_interval
from specdec.engine.decode import generate
from specdec.engine.kv import engine_model

__all__ = ["plain_greedy", "verification_logits", "position_rows", "summary_rows", "gap_rows", "engine_rows",
           "families_by_dtype", "positions_by_dtype", "engine_rows_by_dtype", "dtype_rows"]


def _forward(model, cache, feed: torch.Tensor, start: int) -> torch.Tensor:
    """The model over ``feed`` (s,) at positions start..start+s-1, after ``start`` cached slots, as the
    engine calls it: logits (s, V) in the model's dtype."""
    s = feed.shape[0]
    mask = torch.ones(1, start + s, dtype=torch.long, device=feed.device)
    pos = torch.arange(start, start + s, device=feed.device)[None]
    return model(input_ids=feed[None], attention_mask=mask, position_ids=pos, cache=cache, use_cache=True,
                 logits_to_keep=s).logits[0]


def _prefill(model, prompt: torch.Tensor):
    """A DynamicCache holding the prompt but its last token (one forward; the same for both paths)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    if prompt.shape[0] > 1:
        _forward(model, cache, prompt[:-1], 0)
    return cache


@torch.inference_mode()
def plain_greedy(model, prompt: torch.Tensor, n_new: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding, one token per forward: tokens (n_new,) and the logits (n_new, V) each came from.
    Position i's logits predict token i from the prompt and tokens 0..i-1."""
    model = engine_model(model)
    cache, T = _prefill(model, prompt), prompt.shape[0]
    pending, toks, logits = prompt[-1:], [], []
    for i in range(n_new):
        z = _forward(model, cache, pending, T - 1 + i)[0]  # (V,)
        logits.append(z)
        pending = z.argmax()[None]  # first maximum on ties, as the engine
        toks.append(pending)
    return torch.cat(toks), torch.stack(logits)


@torch.inference_mode()
def verification_logits(model, prompt: torch.Tensor, tokens: torch.Tensor, k: int) -> torch.Tensor:
    """Logits (n, V) of the verification forwards over ``tokens`` (n,), k+1 tokens per forward: the
    pending token and the next k tokens, all accepted (the last window is cut at n, as the engine
    clips k to the budget).  Row i predicts tokens[i], as in `plain_greedy`."""
    model = engine_model(model)
    cache, T, n = _prefill(model, prompt), prompt.shape[0], tokens.shape[0]
    seq = torch.cat([prompt[-1:], tokens])  # (n+1,): seq[i] is the pending token before position i
    out, i = [], 0
    while i < n:
        s = min(k + 1, n - i)
        out.append(_forward(model, cache, seq[i:i + s], T - 1 + i))  # (s, V)
        i += s
    return torch.cat(out)


def _dtype_name(model) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def position_rows(model, prompts: torch.Tensor, n_new: int, ks) -> list[dict]:
    """One row per (k, prompt, position i < n_new): the model's dtype, the plain greedy token, the
    verification argmax, flip (they differ), top2_gap g_i of the one-token logits and max_abs_diff
    d_i (module docstring), both in float64.  prompts (N, T) token ids."""
    rows, dtype = [], _dtype_name(model)
    for b, prompt in enumerate(prompts):
        tokens, z1 = plain_greedy(model, prompt, n_new)  # (n,), (n, V)
        top = z1.double().topk(2, dim=-1).values  # (n, 2)
        gap = (top[:, 0] - top[:, 1]).tolist()
        for k in ks:
            zk = verification_logits(model, prompt, tokens, k)  # (n, V)
            diff = (zk.double() - z1.double()).abs().amax(-1).tolist()
            for i, (t, v) in enumerate(zip(tokens.tolist(), zk.argmax(-1).tolist())):
                rows.append(dict(dtype=dtype, k=int(k), prompt=b, position=i, token=t, verify_token=v, flip=t != v,
                                 top2_gap=gap[i], max_abs_diff=diff[i]))
    return rows


def summary_rows(positions, level: float = 0.95) -> list[dict]:
    """Per dtype and k over the rows of `position_rows` (a DataFrame): positions, flips, the Wilson
    upper bound (``level``) on the flip rate per position, the largest and the median d_i,
    near_ties = #{i: g_i < max d} (positions whose argmax a difference as large as the largest one
    seen could flip; every flip is one), and the smallest gap.
    Example: 0 flips in 768 positions -> flip_rate_high = 0.0050 at level 0.95."""
    out = []
    for (dtype, k), g in positions.groupby(["dtype", "k"], sort=False):
        worst, flips = float(g["max_abs_diff"].max()), int(g["flip"].sum())
        out.append(dict(dtype=dtype, k=int(k), positions=len(g), flips=flips,
                        flip_rate_high=float(wilson_interval(flips, len(g), level)[1]), max_abs_diff=worst,
                        median_abs_diff=float(g["max_abs_diff"].median()),
                        near_ties=int((g["top2_gap"] < worst).sum()), min_top2_gap=float(g["top2_gap"].min())))
    return out


def gap_rows(positions) -> list[dict]:
    """One row per (dtype, prompt, position) of `position_rows`: the top-2 gap g_i (the same for
    every k), the largest d_i over k, and whether any k flipped the position."""
    g = positions.groupby(["dtype", "prompt", "position"], sort=False)
    agg = g.agg(top2_gap=("top2_gap", "first"), max_abs_diff=("max_abs_diff", "max"), flip=("flip", "any"))
    return [dict(dtype=d, prompt=int(b), position=int(i), top2_gap=float(r.top2_gap),
                 max_abs_diff=float(r.max_abs_diff), flip=bool(r.flip)) for (d, b, i), r in agg.iterrows()]


def engine_rows(target, drafts: dict, prompts: torch.Tensor, n_new: int, k: int) -> list[dict]:
    """Per draft and prompt: does greedy `generate` with that draft and k drafts per step return the
    tokens of greedy `generate` without a draft?  Both decode the prompts (N, T) as one batch, as the
    engine serves them.  identical, and the first position where they differ (-1 if none).
    drafts: name -> causal LM or drafter."""
    plain = [t.tolist() for t in generate(target, prompts, max_new_tokens=n_new, temperature=0, mode="eager").tokens]
    rows = []
    for name, draft in drafts.items():
        spec = generate(target, prompts, drafter=draft, k=k, max_new_tokens=n_new, temperature=0,
                        mode="eager").tokens
        for b, (a, s) in enumerate(zip(plain, (t.tolist() for t in spec))):
            first = next((i for i, (x, y) in enumerate(zip(a, s)) if x != y), -1 if a == s else min(len(a), len(s)))
            rows.append(dict(dtype=_dtype_name(target), draft=name, prompt=b, k=int(k), tokens=len(a),
                             identical=a == s, first_difference=first))
    return rows


def families_by_dtype(device: str, dtypes, allow_stand_in: bool, seed: int) -> dict:
    """{dtype name: the embedded family (`specdec.measure.subjects.load_subjects`) in that dtype}."""
    from specdec.measure.subjects import load_subjects

    return {dt: load_subjects(device, dtype=dt, allow_stand_in=allow_stand_in, seed=seed) for dt in dtypes}


def positions_by_dtype(families: dict, prompts: torch.Tensor, n_new: int, ks) -> list[dict]:
    """`position_rows` of every family's target (``families``: dtype -> family with ``.target``)."""
    return [r for fam in families.values() for r in position_rows(fam.target, prompts, n_new, ks)]


def engine_rows_by_dtype(families: dict, draft_names, prompts: torch.Tensor, n_new: int, k: int) -> list[dict]:
    """`engine_rows` of every family's target with its drafts named ``draft_names``."""
    return [r for fam in families.values()
            for r in engine_rows(fam.target, {d: fam.drafts[d] for d in draft_names}, prompts, n_new, k)]


def dtype_rows(summary, gaps, engine) -> list[dict]:
    """One row per dtype, from DataFrames of `summary_rows`, `gap_rows` and `engine_rows`.

    Over every k (``summary``): comparisons, flips and near_ties (sums), flip_rate_high (the largest
    upper bound), max_abs_diff (the largest d) and min_top2_gap (the smallest gap).  Over each position
    once (``gaps``): positions, near_tie_positions (a gap below the dtype's largest difference) and
    flipped_positions (flipped at some k).  Over ``engine``: engine_runs, engine_identical.

    Example: one float32 k with 0 flips in 16 positions and 2 identical engine runs of 3
        -> [{"dtype": "float32", "comparisons": 16, "flips": 0, ..., "engine_runs": 3, "engine_identical": 2}]
    """
    out = []
    for dt, s in summary.groupby("dtype", sort=False):
        g, e = gaps[gaps["dtype"] == dt], engine[engine["dtype"] == dt]
        out.append(dict(dtype=dt, comparisons=int(s["positions"].sum()), flips=int(s["flips"].sum()),
                        flip_rate_high=float(s["flip_rate_high"].max()), max_abs_diff=float(s["max_abs_diff"].max()),
                        min_top2_gap=float(s["min_top2_gap"].min()), near_ties=int(s["near_ties"].sum()),
                        positions=len(g), near_tie_positions=int((g["top2_gap"] < g["max_abs_diff"].max()).sum()),
                        flipped_positions=int(g["flip"].sum()), engine_runs=len(e),
                        engine_identical=int(e["identical"].sum())))
    return out
