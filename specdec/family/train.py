"""Training the embedded model family: GPT-2 architecture (Radford et al. 2019) on Shakespeare.

One loop for every model: AdamW (Loshchilov & Hutter 2019), linear warmup then cosine decay,
optional bf16 autocast, random 512-token blocks from the train split, validation loss on the whole
validation split every ``eval_every`` steps, the best-validation weights kept, resumable from
``data/checkpoints/<name>/state.pt`` (the command line is `specdec.family.make`), stopped by ``max_steps`` or a wall-clock budget.

Learning rate at step s (warmup W, total S, peak lr, floor m*lr):
    lr(s) = lr * s / W                                       for s < W
    lr(s) = m*lr + (1-m)*lr * (1 + cos(pi * (s-W)/(S-W))) / 2 otherwise

Distillation (``teacher`` set): loss = KL(p_teacher || q_student) per position, averaged,
    KL = sum_x p(x) (log p(x) - log q(x))    (Hinton et al. 2015 at temperature 1).

Randomness: model init, dropout and batch sampling are seeded from ``TrainConfig.seed`` inside
``torch.random.fork_rng``, so the caller's global RNG is left untouched.

Example (tiny, seconds):
    >>> cfg = TrainConfig(n_layer=1, n_embd=32, n_head=2, batch_size=2, block=32, max_steps=5)
    >>> model, log = train_model(cfg, train_ids, val_ids)      # log: list of dict rows
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec.family.architectures import build_model as _build, gpt2_config
from specdec.io.results import atomic_path


@dataclass(frozen=True)
class TrainConfig:
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    n_positions: int = 512       # later chapters decode 256 tokens after a 64-token prompt
    vocab_size: int = 2048       # the project's BPE tokenizer
    dropout: float = 0.1         # ~1.7M train tokens: many epochs would overfit
    batch_size: int = 16
    block: int = 512             # train on full contexts so every position is learned
    lr: float = 1e-3             # short budgets need a high peak LR (with warmup)
    min_lr_frac: float = 0.1     # cosine floor, as in nanoGPT
    warmup: int = 100
    max_steps: int = 1000        # sets the cosine schedule; the budget may stop earlier
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_blocks: int = 0         # 0 = the whole validation split
    budget_min: float = 0.0      # wall-clock stop in minutes, 0 = none
    threads: int = 2             # this machine's cores
    bf16: bool = False           # autocast; only pays on CPUs with AMX or on GPUs
    seed: int = 0

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.block > self.n_positions:
            raise ValueError(f"block={self.block} exceeds n_positions={self.n_positions}")
        if min(self.n_layer, self.n_embd, self.batch_size, self.block, self.max_steps, self.eval_every) < 1:
            raise ValueError("n_layer, n_embd, batch_size, block, max_steps and eval_every must be >= 1")


def lr_at(step: int, cfg: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Warmup + cosine schedule (module docstring). Example: lr_at(0, cfg) == 0.

    With a wall-clock budget the cosine runs on the larger of the step fraction and the time
    fraction ``elapsed_s / (60 * budget_min)``, so the decay completes when the budget ends even
    when the CPU is slower than planned (it is shared).
    """
    if step < cfg.warmup:
        return cfg.lr * step / cfg.warmup
    frac = min(1.0, (step - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup))
    if cfg.budget_min:
        frac = max(frac, min(1.0, elapsed_s / (60.0 * cfg.budget_min)))
    floor = cfg.min_lr_frac * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * frac))


def build_model(cfg: TrainConfig):
    """A freshly initialised GPT-2 of ``cfg``'s shape (uses the global RNG: call under a seed)."""
    return _build(gpt2_config(n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_head=cfg.n_head, vocab_size=cfg.vocab_size,
                              n_positions=cfg.n_positions, dropout=cfg.dropout))


def random_blocks(ids: torch.Tensor, batch: int, block: int, gen: torch.Generator):
    """(x, y), each (batch, block): random windows of ``ids`` (N,) and the next-token targets."""
    starts = torch.randint(0, ids.numel() - block - 1, (batch,), generator=gen)
    x = torch.stack([ids[s:s + block] for s in starts.tolist()])
    y = torch.stack([ids[s + 1:s + block + 1] for s in starts.tolist()])
    return x, y


def eval_blocks(ids: torch.Tensor, block: int, limit: int = 0) -> torch.Tensor:
    """Non-overlapping windows of ``block + 1`` tokens: (M, block+1); ``limit`` > 0 keeps M evenly spaced."""
    m = (ids.numel() - 1) // block
    if m < 1:
        raise ValueError(f"{ids.numel()} tokens are too few for one block of {block}")
    w = torch.stack([ids[i * block:i * block + block + 1] for i in range(m)])  # (M, block+1)
    if 0 < limit < m:
        w = w[torch.linspace(0, m - 1, limit).round().long()]
    return w


@torch.no_grad()
def mean_loss(model, windows: torch.Tensor, batch: int = 16, bf16: bool = False) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` over windows (M, T+1)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        w = windows[i:i + batch]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(w[:, :-1]).logits                              # (b, T, V)
        nll = F.cross_entropy(logits.float().flatten(0, 1), w[:, 1:].flatten(), reduction="sum")
        total, count = total + nll.item(), count + w[:, 1:].numel()
    model.train(was_training)
    return total / count


def _loss(model, x, y, teacher, bf16: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x).logits                                          # (B, T, V)
        if teacher is None:
            return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        with torch.no_grad():
            t_logp = F.log_softmax(teacher(x).logits.float(), -1).flatten(0, 1)  # (B*T, V)
    s_logp = F.log_softmax(logits.float(), -1).flatten(0, 1)
    return F.kl_div(s_logp, t_logp, log_target=True, reduction="batchmean")


def train_model(cfg: TrainConfig, train_ids: torch.Tensor, val_ids: torch.Tensor, *,
                ckpt_dir: Path | None = None, teacher=None, on_eval=None):
    """Train one model; returns (best-validation model in fp32, eval mode; log rows).

    ``ckpt_dir``: resume from / save to ``state.pt`` there (pickle-free tensors, loaded with
    ``weights_only=True``). ``on_eval(row)`` is called after each evaluation (for progress output).
    """
    windows = eval_blocks(val_ids, cfg.block, cfg.eval_blocks)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        prev_threads = torch.get_num_threads()
        torch.set_num_threads(cfg.threads)
        try:
            return _run(cfg, train_ids, windows, ckpt_dir, teacher, on_eval)
        finally:
            torch.set_num_threads(prev_threads)


def _run(cfg, train_ids, windows, ckpt_dir, teacher, on_eval):
    model = build_model(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)
    step, elapsed, log, best = 0, 0.0, [], {"val_loss": math.inf, "state": None, "step": 0}
    state_path = Path(ckpt_dir) / "state.pt" if ckpt_dir else None
    if state_path is not None and state_path.exists():
        st = torch.load(state_path, weights_only=True)
        if _resume_key(st["config"]) != _resume_key(dataclasses.asdict(cfg)):
            raise ValueError(f"{state_path} was made with a different config; delete it to start afresh")
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        gen.set_state(st["gen"])
        torch.set_rng_state(st["rng"])
        step, elapsed, log = st["step"], st["elapsed"], json.loads(st["log"])
        best = {"val_loss": st["best_val"], "state": st["best_model"], "step": st["best_step"]}
    model.train()
    t0, run_loss, run_n = time.perf_counter() - elapsed, 0.0, 0
    def over_budget():
        return bool(cfg.budget_min) and time.perf_counter() - t0 > 60 * cfg.budget_min

    while step < cfg.max_steps and not over_budget():
        for g in opt.param_groups:
            g["lr"] = lr_now = lr_at(step, cfg, time.perf_counter() - t0)
        x, y = random_blocks(train_ids, cfg.batch_size, cfg.block, gen)   # (B, T) each
        loss = _loss(model, x, y, teacher, cfg.bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        step, run_loss, run_n = step + 1, run_loss + loss.item(), run_n + 1
        if step % cfg.eval_every == 0 or step == cfg.max_steps or over_budget():
            val = mean_loss(model, windows, bf16=cfg.bf16)
            row = {"step": step, "tokens": step * cfg.batch_size * cfg.block,
                   "elapsed_s": round(time.perf_counter() - t0, 1), "lr": lr_now,
                   "train_loss": run_loss / run_n, "val_loss": val}
            log.append(row)
            run_loss, run_n = 0.0, 0
            if val < best["val_loss"]:
                best = {"val_loss": val, "step": step,
                        "state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
            if state_path is not None:
                _save_state(state_path, cfg, model, opt, gen, step, time.perf_counter() - t0, log, best)
            if on_eval is not None:
                on_eval(row)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    return model.eval(), log


def _resume_key(config: dict) -> dict:
    """The config fields a resumed run must share with its checkpoint. A longer ``budget_min``
    (give a model more hours) or another thread count may change between runs; with a longer
    budget the time-driven cosine stretches from the point reached, so the lr rises slightly."""
    return {k: v for k, v in config.items() if k not in ("budget_min", "threads")}


def _save_state(path, cfg, model, opt, gen, step, elapsed, log, best):
    path.parent.mkdir(parents=True, exist_ok=True)
    st = {"config": dataclasses.asdict(cfg), "model": model.state_dict(), "opt": opt.state_dict(),
          "gen": gen.get_state(), "rng": torch.get_rng_state(), "step": step, "elapsed": elapsed,
          "log": json.dumps(log), "best_val": best["val_loss"], "best_step": best["step"],
          "best_model": best["state"]}
    with atomic_path(path) as tmp:
        torch.save(st, tmp)
