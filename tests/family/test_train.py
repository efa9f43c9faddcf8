"""The training loop on a tiny config: loss goes down, schedule, resume, export."""

import math

import pytest
import torch

from specdec.family import tokens, train
from specdec.family.loader import load_tokenizer
from specdec.family.make import export

TINY = train.TrainConfig(n_layer=1, n_embd=32, n_head=2, n_positions=64, batch_size=4, block=32,
                         lr=1e-2, warmup=5, max_steps=40, eval_every=20, eval_blocks=16, threads=1)


@pytest.fixture(scope="module")
def ids():
    tok = load_tokenizer()
    # train on one held-out play, validate on the other split (the train split is not committed)
    return tokens.encode_split(tok, "validation"), tokens.encode_split(tok, "test")


def test_tiny_training_reduces_validation_loss(ids):
    tr, va = ids
    windows = train.eval_blocks(va, TINY.block, TINY.eval_blocks)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY.seed)
        untrained = train.mean_loss(train.build_model(TINY), windows)
    model, log = train.train_model(TINY, tr, va)
    assert [r["step"] for r in log] == [20, 40]
    assert abs(untrained - math.log(2048)) < 0.3                        # uniform-ish at init
    assert log[-1]["val_loss"] < untrained - 1.0
    assert train.mean_loss(model, windows) == pytest.approx(min(r["val_loss"] for r in log), abs=1e-5)


def test_negative_control_zero_lr_does_not_learn(ids):
    tr, va = ids
    cfg = train.TrainConfig(**{**TINY.__dict__, "lr": 0.0, "max_steps": 20})
    windows = train.eval_blocks(va, cfg.block, cfg.eval_blocks)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        untrained = train.mean_loss(train.build_model(cfg), windows)
    _, log = train.train_model(cfg, tr, va)
    assert abs(log[-1]["val_loss"] - untrained) < 1e-4                  # the check above can fail


def test_global_rng_untouched(ids):
    tr, va = ids
    torch.manual_seed(123)
    before = torch.get_rng_state()
    train.train_model(train.TrainConfig(**{**TINY.__dict__, "max_steps": 2, "eval_every": 2}), tr, va)
    assert torch.equal(torch.get_rng_state(), before)


def test_resume_after_interruption_equals_uninterrupted_run(ids, tmp_path):
    tr, va = ids
    cfg = train.TrainConfig(**{**TINY.__dict__, "max_steps": 20, "eval_every": 10})
    straight, _ = train.train_model(cfg, tr, va)

    class Crash(Exception):
        pass

    def crash(row):
        if row["step"] == 10:
            raise Crash
    with pytest.raises(Crash):
        train.train_model(cfg, tr, va, ckpt_dir=tmp_path, on_eval=crash)
    resumed, log = train.train_model(cfg, tr, va, ckpt_dir=tmp_path)
    assert [r["step"] for r in log] == [10, 20]
    for (k, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k
    other = train.TrainConfig(**{**cfg.__dict__, "lr": 5e-3})
    with pytest.raises(ValueError, match="different config"):
        train.train_model(other, tr, va, ckpt_dir=tmp_path)
    longer = train.TrainConfig(**{**cfg.__dict__, "budget_min": 60.0, "threads": 2})   # more hours
    _, log2 = train.train_model(longer, tr, va, ckpt_dir=tmp_path)
    assert [r["step"] for r in log2] == [10, 20]                  # resumed, not restarted


def test_schedule():
    cfg = train.TrainConfig(lr=1.0, warmup=10, max_steps=110, min_lr_frac=0.1)
    assert train.lr_at(0, cfg) == 0.0 and train.lr_at(5, cfg) == 0.5
    assert train.lr_at(10, cfg) == pytest.approx(1.0)
    assert train.lr_at(60, cfg) == pytest.approx(0.55)                  # half way: (1 + 0.1) / 2
    assert train.lr_at(110, cfg) == pytest.approx(0.1)
    timed = train.TrainConfig(lr=1.0, warmup=10, max_steps=10**6, budget_min=1.0)
    assert train.lr_at(20, timed, elapsed_s=60.0) == pytest.approx(0.1)  # budget spent: floor


def test_export_is_fp16_safetensors(ids, tmp_path):
    tr, va = ids
    cfg = train.TrainConfig(**{**TINY.__dict__, "max_steps": 2, "eval_every": 2})
    model, log = train.train_model(cfg, tr, va)
    d = export(model, "tiny", cfg, log, 1.0, out_dir=tmp_path)
    assert (d / "model.safetensors").exists() and not list(d.glob("*.bin"))
    from safetensors import safe_open
    with safe_open(str(d / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}


def test_bad_configs():
    with pytest.raises(ValueError, match="divisible"):
        train.TrainConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="n_positions"):
        train.TrainConfig(block=1024)
    with pytest.raises(ValueError, match="too few"):
        train.eval_blocks(torch.arange(10), 32)
