"""Chapter 04's computations: how good the embedded family is, and how closely each draft agrees
with the target on held-out text, before any decoding is timed.

Perplexity = exp(mean next-token cross-entropy over a whole held-out split), read from the model card
(``data/models/card.json``, written by `specdec.family.card`); a perplexity at least a fraction m below
every draft's is a loss at least -ln(1 - m) nats lower (m = 0.15 -> 0.1625 nats).  Agreement is the
teacher-forced beta(c) = sum_x min(p(x|c), q(x|c)) = 1 - TV(p, q) (Leviathan et al. 2023, section 3.1;
`specdec.measure.agreement`), averaged per held-out window, then over windows with its standard error
(positions within a window are correlated: windows are the independent units).

Example:
    card = {"models": {"target": {"arch": "GPT-2", "params": 10, "validation_loss": 3.0,
                                  "validation_ppl": 20.0855, "test_ppl": 25.0}}}
    perplexity_rows(card)[0] -> {"model": "target", "architecture": "GPT-2", "params": 10,
        "tokens_seen": 0, "val_loss": 3.0, "val_ppl": 20.09, "test_ppl": 25.0}
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from specdec.core.sampling import SamplingConfig
from specdec.engine.decode import generate
from specdec.measure.agreement import logits_beta, teacher_forced_logits
from specdec.io.paths import MODELS_DIR
from specdec.io.results import records

__all__ = ["load_card", "perplexity_rows", "target_margin", "members", "sample_continuations", "sample_rows",
           "beta_rows", "beta_by_temperature", "agreement_summary"]


def load_card(path=None) -> dict:
    """The model card's numbers (``data/models/card.json`` unless ``path``)."""
    with open(path or MODELS_DIR / "card.json") as f:
        return json.load(f)


def perplexity_rows(card: dict) -> list[dict]:
    """One row per model of the card, in the card's order: size and perplexity (module docstring).
    Losses are rounded to 4 decimals and perplexities to 2, as the chapter shows them; a model
    without a training count (the n-gram's counts are not tokens seen by gradient steps) has 0."""
    return [{"model": n, "architecture": m["arch"], "params": m["params"], "tokens_seen": m.get("tokens_seen", 0),
             "val_loss": round(m["validation_loss"], 4), "val_ppl": round(m["validation_ppl"], 2),
             "test_ppl": round(m["test_ppl"], 2)} for n, m in card["models"].items()]


def target_margin(card: dict, ppl_margin: float) -> dict:
    """Is the target at least ``ppl_margin`` (a fraction) below every other model in validation
    perplexity?  Equivalently: is its validation loss lower by at least -ln(1 - ppl_margin) nats.

    Returns target_params, target_val_ppl, target_test_ppl, min_margin (nats, over the closest
    model), min_margin_model, required_margin (nats) and target_is_best ("yes" / "no").
    Example: losses target 3.0, draft 3.2, ppl_margin 0.15 -> min_margin 0.2 >= 0.1625: "yes"
    """
    if not 0 < ppl_margin < 1:
        raise ValueError(f"ppl_margin must be a fraction in (0, 1), got {ppl_margin!r}")
    t = card["models"]["target"]
    margins = {n: m["validation_loss"] - t["validation_loss"] for n, m in card["models"].items() if n != "target"}
    if not margins:
        raise ValueError("the card lists no model besides the target")
    closest = min(margins, key=margins.get)
    required = -math.log(1 - ppl_margin)
    return {"target_params": int(t["params"]), "target_val_ppl": float(t["validation_ppl"]),
            "target_test_ppl": float(t["test_ppl"]), "min_margin": float(margins[closest]),
            "min_margin_model": closest, "required_margin": required,
            "target_is_best": "yes" if margins[closest] >= required else "no"}


def members(card: dict, target, drafts: dict) -> tuple[dict, dict]:
    """(models, drafts) in the card's order (drafts it does not list after them): ``models`` are the
    causal LMs, target first (they continue the sample prompt); ``drafts`` every draft, the n-gram
    drafter included (they are scored against the target).
    Example: card order target, draft-small, ngram; drafts {"ngram": ng, "draft-small": lm}
             -> ({"target": t, "draft-small": lm}, {"draft-small": lm, "ngram": ng})
    """
    listed = [n for n in card["models"] if n in drafts]
    ordered = {n: drafts[n] for n in listed + [n for n in drafts if n not in listed]}
    models = {"target": target, **{n: d for n, d in ordered.items() if isinstance(d, torch.nn.Module)}}
    return models, ordered


def sample_continuations(models: dict, tokenizer, prompt: torch.Tensor, new_tokens: int, temperature: float,
                         seed: int) -> list[dict]:
    """One row per model (name -> causal LM): the decoded continuation of ``prompt`` (1, P).

    Each model samples ``new_tokens`` tokens at ``temperature`` through the engine's autoregressive
    loop, with its own ``torch.Generator().manual_seed(seed)``: the same uniforms for every model.
    Example: sample_continuations({"target": m}, tok, ids[:1], 60, 0.8, 0)[0] -> {"model": "target",
             "continuation": "..."}
    """
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"prompt must be one row (1, P), got shape {tuple(prompt.shape)}")
    rows = []
    for name, model in models.items():
        device = next(model.parameters()).device
        g = torch.Generator().manual_seed(seed)
        res = generate(model, prompt.to(device), max_new_tokens=new_tokens, temperature=temperature, generator=g,
                       mode="eager")
        rows.append({"model": name, "continuation": tokenizer.decode(res.tokens[0].tolist())})
    return rows


def sample_rows(prompt: str, samples):
    """The table (a DataFrame) of the sample continuations: the prompt first (model "prompt"), then
    one row per model of ``samples`` (`sample_continuations` rows), columns model and text.
    Example: sample_rows("Hi", [{"model": "target", "continuation": " there"}]).to_dict("records")
             -> [{"model": "prompt", "text": "Hi"}, {"model": "target", "text": " there"}]
    """
    import pandas as pd

    return pd.DataFrame([{"model": "prompt", "text": prompt}] + [{"model": r["model"], "text": r["continuation"]}
                                                                 for r in records(samples)])


def beta_rows(target, drafts: dict, ids: torch.Tensor, temperatures, start: int) -> list[dict]:
    """Teacher-forced beta per (draft, temperature), in the order of ``drafts`` then ``temperatures``.

    ids (N, L): N held-out windows; positions start..L-1 are scored (each sees >= start tokens).
    Columns: beta (mean over windows of the per-window mean), se (standard deviation of the
    per-window means / sqrt(N); NaN for one window), contexts (scored positions), windows (N).
    At temperature 0 beta is the greedy agreement: the fraction of contexts whose argmaxes agree.
    """
    rows = []
    with torch.inference_mode():
        zt = teacher_forced_logits(target, ids, start)  # (N, L - start, V): one forward for every draft and T
        for name, draft in drafts.items():
            zq = teacher_forced_logits(draft, ids, start)
            for T in temperatures:
                b = logits_beta(zt, zq, SamplingConfig(T))  # (N, L - start)
                per_window = b.float().mean(1)                                               # (N,)
                n = len(per_window)
                se = per_window.std().item() / np.sqrt(n) if n > 1 else float("nan")
                rows.append({"draft": name, "temperature": T, "beta": per_window.mean().item(), "se": se,
                             "contexts": b.numel(), "windows": n})
    return rows


def beta_by_temperature(beta):
    """``beta`` (DataFrame of `beta_rows`) as one row per draft (in its order) and one column per
    temperature (ascending), headed "greedy agreement (τ = 0)" or "β at τ = <t>".
    Example: rows (a, 1.0, 0.5), (a, 0.0, 0.3) -> columns draft, "greedy agreement (τ = 0)", "β at τ = 1"
    """
    wide = beta.pivot(index="draft", columns="temperature", values="beta").loc[beta["draft"].unique()]
    wide.columns = ["greedy agreement (τ = 0)" if t == 0 else f"β at τ = {t:g}" for t in wide.columns]
    return wide.rename_axis("draft").reset_index()


def agreement_summary(beta, small: str = "draft-small", distilled: str = "draft-distilled") -> dict:
    """What the chapter says about a beta table (DataFrame of `beta_rows`): the highest and lowest
    beta at the highest temperature and which drafts; the greedy agreement range (temperature 0,
    NaN when not measured); the distilled draft's beta minus the small draft's (same architecture)
    at the highest temperature; scored positions per row.
    Example: rows (a, 1.0, 0.5), (b, 1.0, 0.6) -> t_high 1.0, best_draft "b", best_beta 0.6, worst "a"
    """
    t_high = float(beta["temperature"].max())
    hi = beta[beta["temperature"] == t_high].set_index("draft")["beta"]
    greedy = beta[beta["temperature"] == 0]["beta"]
    gain = float(hi[distilled] - hi[small]) if {small, distilled} <= set(hi.index) else float("nan")
    return {"t_high": t_high, "best_draft": str(hi.idxmax()), "best_beta": float(hi.max()),
            "worst_draft": str(hi.idxmin()), "worst_beta": float(hi.min()),
            "agree_min": float(greedy.min()), "agree_max": float(greedy.max()),  # NaN when not measured
            "distilled_gain": gain, "n_contexts": int(beta["contexts"].iloc[0])}
