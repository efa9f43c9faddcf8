"""Chapter 05's measurement: speculative decoding of held-out prompts with the acceptance recorder,
over drafts x temperatures x verification methods (and one nucleus setting), one summary row each.

Per configuration the target and the draft are wrapped in an `specdec.measure.recorder.AcceptanceRecorder`,
the prompts decoded by `specdec.engine.decode.generate` (k drafts per step, a generator seeded ``seed + i``
for the i-th configuration), and the recorded steps reduced by `specdec.core.acceptance.summarize_steps`:
the maximum-likelihood constant alpha of the truncated-geometric law P(N = n) = alpha^n (1 - alpha)
(n < k), P(N = k) = alpha^k with a Wilson interval, the measured E[L] = E[N] + 1 and its two predictions
from per-step beta_i and a_i, the G-test of the geometric law, and the mean beta per draft position.
Two more columns: the teacher-forced beta on the prompts' real continuation (acceptance on text, not
on what the target generates; `specdec.measure.agreement`), and the share of distinct n-grams in the
generated text (1 = no repeated n-gram; near 0 = the output loops).

The configurations (`configurations`): per draft, every temperature x method but block verification
at temperature 0 (greedy: the two coincide), then token verification with nucleus truncation.

Example:
    configurations(["ngram"], [0.0, 1.0], ["token", "block"], top_p=0.9) ->
        [{"draft": "ngram", "temperature": 0.0, "top_p": None, "method": "token"},
         {... 1.0, None, "token"}, {... 1.0, None, "block"}, {... 1.0, 0.9, "token"}]
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from specdec.core.acceptance import distinct_ngram_ratio, summarize_steps
from specdec.core.sampling import SamplingConfig
from specdec.engine.decode import generate
from specdec.measure.agreement import teacher_forced_beta
from specdec.measure.recorder import AcceptanceRecorder

__all__ = ["select_drafts", "configurations", "record_runs", "summary_row", "parse_counts"]


def select_drafts(drafts: dict, name: str = "") -> dict:
    """``drafts`` restricted to ``name``; every draft when ``name`` is empty or not one of them
    (a draft of another family, named for the chapters that decode it, measures this whole family).
    Example: select_drafts({"a": 1, "b": 2}, "b") -> {"b": 2};  select_drafts({"a": 1}, "x") -> {"a": 1}
    """
    return {name: drafts[name]} if name in drafts else dict(drafts)


def configurations(drafts, temperatures, methods, top_p: float, top_p_temperature: float = 1.0) -> list[dict]:
    """The measured settings, in order (module docstring): dicts draft, temperature, top_p, method;
    the nucleus setting ``top_p`` is tried with token verification at ``top_p_temperature``."""
    if not 0 < top_p < 1:
        raise ValueError(f"top_p must lie in (0, 1) (1 would repeat the untruncated setting), got {top_p!r}")
    out = []
    for name in drafts:
        out += [dict(draft=name, temperature=T, top_p=None, method=m) for T in temperatures for m in methods
                if not (T == 0 and m == "block")]  # greedy: block and token verification coincide
        out.append(dict(draft=name, temperature=top_p_temperature, top_p=top_p, method="token"))
    return out


def summary_row(cfg: dict, summary: dict, k: int, prompts: int, beta_real_text: float, distinct: float,
                distinct_n: int = 4) -> dict:
    """The table row of one configuration: its settings (top_p None written 1.0), k, prompts, the
    statistics of `summarize_steps` (counts last, as space-separated integers; when the steps carry
    their prompts, ``counts_by_prompt``: one histogram per prompt, separated by ";"), beta on real
    text, and the distinct n-gram share (column ``distinct_<n>gram``).
    Example: summary_row({"draft": "a", "temperature": 0.0, "top_p": None, "method": "token"},
             {"steps": 2, "counts": [1, 1]}, 1, 2, 0.5, 1.0) -> {..., "top_p": 1.0, "counts": "1 1"}
    """
    stats = {c: v for c, v in summary.items() if c not in ("counts", "counts_by_prompt")}
    by_prompt = summary.get("counts_by_prompt")
    return {**cfg, "top_p": cfg["top_p"] or 1.0, "k": k, "prompts": prompts, **stats, "beta_real_text": beta_real_text,
            f"distinct_{distinct_n}gram": distinct, "counts": " ".join(map(str, summary["counts"])),
            **({"counts_by_prompt": ";".join(" ".join(map(str, c)) for c in by_prompt)} if by_prompt else {})}


def tokens_per_step_by_row(res) -> list[float]:
    """Per batch row (prompt) of a `generate` result: its tokens over the steps it took part in.
    The unit a paired comparison of two methods on the same prompts resamples."""
    steps = Counter(r["row"] for r in res.stats.accept_rows())
    return [len(t) / steps[r] for r, t in enumerate(res.tokens)]


def parse_counts(counts: str) -> np.ndarray:
    """The ``counts`` column back as integers (k+1,): steps that accepted 0..k drafts; or the
    ``counts_by_prompt`` column (prompts separated by ";") as (prompts, k+1).
    Example: parse_counts("290 105 38 10 23") -> array([290, 105, 38, 10, 23]);
             parse_counts("1 2;3 4") -> array([[1, 2], [3, 4]])
    """
    if ";" in str(counts):
        return np.stack([parse_counts(c) for c in str(counts).split(";")])
    return np.array([int(c) for c in str(counts).split()], dtype=np.int64)


def record_runs(target, drafts: dict, text: torch.Tensor, prompt_len: int, configs: list[dict], *, k: int,
                new_tokens: int, seed: int, level: float = 0.95, distinct_n: int = 4) -> list[dict]:
    """Decode the prompts once per configuration with the recorder; one `summary_row` each.

    target: causal LM; drafts: name -> causal LM or drafter; text (N, prompt_len + M): held-out
    text whose first ``prompt_len`` tokens are the prompts (N, prompt_len) and whose rest is the
    real continuation (teacher-forced beta is scored on it).  Configuration i draws from
    ``torch.Generator().manual_seed(seed + i)``.  The recording costs time: these runs are never timed.
    """
    if text.dim() != 2 or not 1 <= prompt_len < text.shape[1]:
        raise ValueError(f"text must be (N, prompt_len + continuation), got {tuple(text.shape)}, prompt_len {prompt_len}")
    prompts = text[:, :prompt_len]  # (N, P)
    rows, on_text = [], {}
    for i, cfg in enumerate(configs):
        sampling = SamplingConfig(cfg["temperature"], None, cfg["top_p"])
        draft = drafts[cfg["draft"]]
        rec = AcceptanceRecorder(target, draft, sampling)
        res = generate(rec.target, prompts, drafter=rec.drafter, k=k, method=cfg["method"], max_new_tokens=new_tokens,
                       temperature=cfg["temperature"], top_p=cfg["top_p"],
                       generator=torch.Generator().manual_seed(seed + i), mode="eager")
        summary = summarize_steps(rec.steps(res.stats), k, level)
        key = (cfg["draft"], cfg["temperature"], cfg["top_p"])
        if key not in on_text:  # the same rules on REAL text: teacher forcing over the continuation
            on_text[key] = float(teacher_forced_beta(target, draft, text, sampling, prompt_len).mean())
        distinct = float(np.mean([distinct_ngram_ratio(t, distinct_n) for t in res.tokens]))
        rows.append({**summary_row(cfg, summary, k, int(prompts.shape[0]), on_text[key], distinct, distinct_n),
                     "el_by_prompt": " ".join(repr(x) for x in tokens_per_step_by_row(res))})
    return rows
