"""`make models`: the recipe of the embedded family, its training runs and their export.

    python -m specdec.family.make {tokenizer,target,draft-small,draft-medium,draft-distilled,ngram,card,all}
                                  [--budget-min M] [--max-steps N] [--threads T] [--fresh]

Each member of `FAMILY` is trained by `specdec.family.train.train_model` (resuming from
``data/checkpoints/<name>/state.pt``), then exported to ``data/models/<name>`` as fp16
safetensors with its training log and summary; ``card`` writes the model card and SHA256SUMS
(`specdec.family.card`).  A longer ``--budget-min`` may be given on resume, e.g.
``python -m specdec.family.make target --budget-min 150``.

Example: python -m specdec.family.make ngram   (seconds: counts the trigram model from the train split)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import shutil
import time
from pathlib import Path

import torch

from specdec.family import card, corpus
from specdec.family.loader import load_model, load_tokenizer
from specdec.family.manifest import sha256_file
from specdec.family.ngram import NGramModel
from specdec.family.tokens import token_ids, train_tokenizer
from specdec.family.train import TrainConfig, build_model, train_model
from specdec.io.paths import CHECKPOINTS_DIR, MODELS_DIR
from specdec.io.results import atomic_write, provenance

__all__ = ["FAMILY", "export", "run_one", "main"]

# The family. Parameter counts with vocab 2048, 512 positions, tied embeddings.
# Dropout is off: a CPU budget of about 95 minutes buys the target a few epochs, too few to
# overfit, the best-validation copy is kept anyway, and dropout makes every step slower.  bf16
# autocast is not used (without AMX it is slower than fp32), nor torch.compile (its compile time
# is not repaid within the budget).  The model card records each model's budget and steps.
# Drafts: a fixed number of steps (1.2M / 1.0M tokens) with a 20-minute safety budget; the distilled
# draft gets the small draft's step limit (its 12-minute budget may stop it sooner: see the card).
FAMILY = {
    "target": TrainConfig(n_layer=8, n_embd=384, n_head=6, dropout=0.0, lr=1.2e-3, warmup=40,
                          batch_size=8, max_steps=1100, eval_every=50, eval_blocks=48,
                          budget_min=105, bf16=False),                        # ~15.2M
    "draft-small": TrainConfig(n_layer=2, n_embd=128, n_head=4, dropout=0.0, lr=3e-3, warmup=20,
                               batch_size=8, max_steps=300, eval_every=50, eval_blocks=48,
                               budget_min=20, threads=1, bf16=False),         # ~0.72M
    "draft-medium": TrainConfig(n_layer=4, n_embd=192, n_head=4, dropout=0.0, lr=2e-3, warmup=20,
                                batch_size=8, max_steps=250, eval_every=50, eval_blocks=48,
                                budget_min=20, threads=1, bf16=False),        # ~2.3M
    "draft-distilled": TrainConfig(n_layer=2, n_embd=128, n_head=4, dropout=0.0, lr=3e-3, warmup=20,
                                   batch_size=8, max_steps=300, eval_every=50, eval_blocks=48,
                                   budget_min=12, threads=2, bf16=False),     # same arch as small
}


def export(model, name: str, cfg: TrainConfig, log: list, wall_s: float, out_dir: Path = MODELS_DIR,
           extra: dict | None = None) -> Path:
    """Save the best weights as fp16 safetensors + the training log and summary for the card.

    ``extra``: more summary fields, e.g. the teacher's sha256 for the distilled draft.
    """
    d = Path(out_dir) / name
    d.mkdir(parents=True, exist_ok=True)
    half = build_model(cfg)
    half.load_state_dict(model.state_dict())
    half.half().save_pretrained(d, safe_serialization=True)

    def write_log(f):
        w = csv.DictWriter(f, fieldnames=list(log[0]))
        w.writeheader()
        w.writerows(log)

    atomic_write(d / "train_log.csv", write_log)
    best = min(log, key=lambda r: r["val_loss"])
    summary = {"name": name, "config": dataclasses.asdict(cfg),
               "params": sum(p.numel() for p in model.parameters()),
               "steps": log[-1]["step"], "tokens_seen": log[-1]["tokens"], "best_step": best["step"],
               "best_val_loss_eval_subset": best["val_loss"], "wall_s": round(wall_s, 1), **(extra or {}),
               "provenance": provenance(dataclasses.asdict(cfg), cfg.seed)}
    atomic_write(d / "train_summary.json", lambda f: f.write(json.dumps(summary, indent=1) + "\n"))
    return d


def run_one(name: str, *, budget_min: float | None = None, max_steps: int | None = None,
            threads: int | None = None, fresh: bool = False, on_eval=None) -> Path:
    """Train (or resume) one member of FAMILY and export it to data/models/<name>."""
    if name not in FAMILY:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(FAMILY)}")
    over = {k: v for k, v in {"budget_min": budget_min, "max_steps": max_steps, "threads": threads}.items()
            if v is not None}
    cfg = dataclasses.replace(FAMILY[name], **over)
    tok = load_tokenizer(checked=False)
    train_ids, val_ids = token_ids(tok, "train"), token_ids(tok, "validation")
    ckpt = CHECKPOINTS_DIR / name
    if fresh and ckpt.exists():
        shutil.rmtree(ckpt)
    teacher, extra = None, {}
    if name == "draft-distilled":
        teacher = load_model("target", dtype=torch.float32, checked=False)
        extra["teacher_sha256"] = sha256_file(MODELS_DIR / "target" / "model.safetensors")
    t0 = time.perf_counter()
    model, log = train_model(cfg, train_ids, val_ids, ckpt_dir=ckpt, teacher=teacher, on_eval=on_eval)
    return export(model, name, cfg, log, log[-1]["elapsed_s"] if log else time.perf_counter() - t0,
                  extra=extra)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specdec.family.make", description="train the embedded family")
    ap.add_argument("what", choices=["tokenizer", *FAMILY, "ngram", "card", "all"])
    ap.add_argument("--budget-min", type=float, default=None, help="wall-clock stop (minutes)")
    ap.add_argument("--max-steps", type=int, default=None, help="schedule length (steps)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    a = ap.parse_args(argv)

    def show(row):
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
              flush=True)

    names = ["tokenizer", "target", "draft-small", "draft-medium", "draft-distilled", "ngram", "card"] \
        if a.what == "all" else [a.what]
    for name in names:
        print(f"== {name}", flush=True)
        if name == "tokenizer":
            MODELS_DIR.mkdir(parents=True, exist_ok=True)
            if (MODELS_DIR / "tokenizer.json").exists() and not a.fresh:
                print("tokenizer.json exists (use --fresh to retrain)")
                continue
            train_tokenizer(corpus.load_text("train")).save_pretrained(MODELS_DIR)
        elif name == "ngram":
            tok = load_tokenizer(checked=False)
            NGramModel.fit(token_ids(tok, "train"), len(tok)).save(MODELS_DIR / "ngram.safetensors")
        elif name == "card":
            print(card.write_card(), flush=True)
        else:
            print(run_one(name, budget_min=a.budget_min, max_steps=a.max_steps, threads=a.threads,
                          fresh=a.fresh, on_eval=show), flush=True)


if __name__ == "__main__":
    main()
