"""Chapter 10's time breakdown (`specdec.audit.breakdown`, `specdec.measure.step_split`): the arithmetic of
its predictions, our step split's shares, the streaming reference, and the in-place cache's paired gain,
which refuses to time two caches that decode differently (a planted fault must be caught)."""

import math

import pytest
import torch

from specdec.audit import breakdown
from specdec.engine.modes import kernel
from specdec.engine.modes.grow import _Buffer
from specdec.measure import step_split

PROMPTS = [[3, 7, 1, 9], [4, 8, 1, 7]]


def test_predicted_cost_is_verification_plus_k_drafts_in_plain_steps():
    assert breakdown.predicted_cost(1.5, 0.1, 2) == pytest.approx(1.7)
    for bad in ((1.5, 0.1, 0), (0.0, 0.1, 2), (1.5, -0.1, 2)):
        with pytest.raises(ValueError, match="need k >= 1"):
            breakdown.predicted_cost(*bad)


def test_forward_rows_divide_by_t1_and_price_k_with_t_of_k_plus_one():
    times = {1: [0.010, 0.012, 0.011], 2: [0.013], 3: [0.016], 5: [0.020]}
    rows = breakdown.forward_rows("x", times, [0.0011], (2, 4))
    by_n = {r["n"]: r for r in rows if "n" in r}
    assert by_n[1]["ratio"] == 1.0 and by_n[3]["ratio"] == pytest.approx(16 / 11) and by_n[1]["forward_ms"] == 11.0
    by_k = {r["k"]: r for r in rows if "k" in r}
    assert by_k[2]["predicted_cost"] == pytest.approx(16 / 11 + 2 * 0.1)
    assert by_k[4]["predicted_cost"] == pytest.approx(20 / 11 + 4 * 0.1)


def test_configs_pair_each_engines_plain_decoding_with_its_draft_model():
    from specdec.audit.speed import speed_pairs

    pairs = speed_pairs(breakdown.configs(("ours", "vllm", "llama"), "draft-distilled"), (1, 4))
    assert [(p.engine, s.spec.method, s.spec.k) for p, s, _ in pairs] == [
        ("ours", "token", 1), ("ours", "token", 4), ("vllm", "draft_model", 1), ("vllm", "draft_model", 4),
        ("llama", "draft_model", 1), ("llama", "draft_model", 4)]
    assert all(p.spec is None and s.spec.draft == "draft-distilled" for p, s, _ in pairs)


def test_operator_split_groups_a_profile_per_step_and_keeps_the_time_outside_operators():
    ops = {"aten::addmm": 6000.0, "_C::onednn_mm": 2000.0, "_C::cpu_attention_with_kv_cache": 1000.0,
           "aten::copy_": 500.0, "aten::tanh": 500.0}  # microseconds
    got = step_split.operator_split(ops, wall_s=0.02, steps=4)  # 10 ms in operators, 10 outside
    assert got["ms matrix products"] == pytest.approx(2.0) and got["ms attention"] == pytest.approx(0.25)
    assert got["ms copies"] == pytest.approx(0.125) and got["ms other"] == pytest.approx(0.125)
    assert got["ms outside operators"] == pytest.approx(2.5) and got["ms profiled step"] == pytest.approx(5.0)
    assert got["share matrix products"] == pytest.approx(0.8)
    assert got["top operators"].startswith("aten::addmm 1.50; _C::onednn_mm 0.50; ")
    assert step_split.operator_split({k: [v, 3] for k, v in ops.items()}, 0.02, 4) == got  # vLLM's worker's form
    for bad in (dict(wall_s=0.02, steps=0), dict(wall_s=0.0, steps=4)):
        with pytest.raises(ValueError, match="need steps >= 1"):
            step_split.operator_split(ops, **bad)
    with pytest.raises(ValueError, match="exceeds the call's"):
        step_split.operator_split(ops, wall_s=0.005, steps=4)  # 10 ms of operators in 5 ms: several threads
    with pytest.raises(ValueError, match="a profile"):
        step_split.operator_split({}, wall_s=0.02, steps=4)


def test_split_rows_reverse_the_engines_order_every_other_round_and_keep_means(monkeypatch):
    """Scripted splits: the call order is ours, vLLM at each batch, then vLLM, ours; each row's number
    is the mean over its rounds (a row that kept its first round would read 1 for ours at batch 1) and
    its text the last round's; a vLLM split that fails leaves a "not timed" row, ours' failure stops."""
    calls = []

    def scripted(engine, fail_at=None):
        def run(*args, batch, length, **kw):
            calls.append((engine, batch))
            if len(calls) == fail_at:
                raise RuntimeError("vLLM's profiled call failed: gone")
            return {"engine": engine, "batch": batch, "length": length, "ms step": float(len(calls)) ** 2,
                    "forward_s": float("nan"), "top operators": f"call {len(calls)}"}
        return run

    monkeypatch.setattr(breakdown, "step_split", scripted("ours"))
    monkeypatch.setattr(breakdown, "vllm_split", scripted("vllm"))
    rows = breakdown.split_rows(None, PROMPTS, batches=(1, 8), length=4, seed=0, session=object(), rounds=2)
    assert calls == [("ours", 1), ("vllm", 1), ("ours", 8), ("vllm", 8),
                     ("vllm", 1), ("ours", 1), ("vllm", 8), ("ours", 8)]
    assert [(r["engine"], r["batch"], r["ms step"], r["rounds"], r["top operators"]) for r in rows] == [
        ("ours", 1, (1 + 36) / 2, 2, "call 6"), ("ours", 8, (9 + 64) / 2, 2, "call 8"),
        ("vllm", 1, (4 + 25) / 2, 2, "call 5"), ("vllm", 8, (16 + 49) / 2, 2, "call 7")]
    assert all(math.isnan(r["forward_s"]) for r in rows)
    calls.clear()
    monkeypatch.setattr(breakdown, "vllm_split", scripted("vllm", fail_at=5))  # vLLM at batch 1, round 2
    rows = breakdown.split_rows(None, PROMPTS, batches=(1, 8), length=4, seed=0, session=object(), rounds=2)
    assert [(r["engine"], r["batch"], r.get("note", "")) for r in rows] == [
        ("ours", 1, ""), ("ours", 8, ""), ("vllm", 1, "not timed: vLLM's profiled call failed: gone"), ("vllm", 8, "")]
    assert [r["engine"] for r in breakdown.split_rows(None, PROMPTS, batches=(1,), length=4, seed=0)] == ["ours"]
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        breakdown.split_rows(None, PROMPTS, batches=(1,), length=4, seed=0, rounds=0)


def test_step_split_shares_are_a_partition_of_profiled_operator_time(tiny_pair):
    row = step_split.step_split(tiny_pair[0], PROMPTS, batch=2, length=6)
    shares = [v for k, v in row.items() if k.startswith("share ")]
    assert len(shares) == len(step_split.GROUPS) + 1 and sum(shares) == pytest.approx(1.0)
    assert all(0 <= s <= 1 for s in shares) and row["share matrix products"] > 0
    assert row["forward_s"] > 0 and row["outside_s"] > 0 and row["ms unprofiled step"] > 0
    parts = sum(row[f"ms {g}"] for g in (*step_split.GROUPS, "other")) + row["ms outside operators"]
    assert parts == pytest.approx(row["ms profiled step"])
    with pytest.raises(ValueError, match="at least one prompt"):
        step_split.step_split(tiny_pair[0], [], batch=1, length=2)


def test_limit_divides_the_streaming_rate_by_the_weights_a_step_reads(tiny_pair):
    model = tiny_pair[0]
    everything = sum(p.numel() * p.element_size() for p in model.parameters())
    wpe = model.transformer.wpe.weight
    assert step_split.weight_bytes(model) == everything - wpe.numel() * wpe.element_size()
    got = step_split.limit(model, size_mb=64, repeats=1)
    assert got["tokens_per_s"] == pytest.approx(got["bandwidth_bytes_per_s"] / got["weight_bytes"])
    assert 1e8 < got["bandwidth_bytes_per_s"] < 1e12
    with pytest.raises(ValueError, match="size_mb must be >= 64"):
        step_split.limit(model, size_mb=8)


@pytest.mark.parametrize("change", step_split.CHANGES)
def test_forward_gain_is_paired_and_refuses_forwards_that_decode_differently(tiny_pair, monkeypatch, change):
    got = step_split.forward_gain(tiny_pair[0], PROMPTS, change=change, batch=2, length=40, rounds=2, seed=0)
    assert got["change"] == change and got["pairs"] == 4
    assert got["gain_lo"] <= got["gain"] <= got["gain_hi"] and math.isfinite(got["gain"])
    with pytest.raises(ValueError, match="rounds must be even"):
        step_split.forward_gain(tiny_pair[0], PROMPTS, change=change, batch=1, length=4, rounds=3, seed=0)

    def corrupt(self, x, capacity):  # a cache that stores what it is given, scaled: a wrong write
        return original(self, 3 * x, capacity)

    original = _Buffer.append
    if change == "in-place cache":  # the DynamicCache side never appends through _Buffer: the GrowCache side is wrong
        monkeypatch.setattr(_Buffer, "append", corrupt)
    elif change == "kernel":  # the kernel's products wrong: the torch side is right
        monkeypatch.setattr(kernel.Affine, "__call__", lambda self, x, residual=None: x.new_ones(x.shape[0], self.N))
    else:  # packing that scrambles the copied weights
        monkeypatch.setattr(step_split, "pack_weights", lambda m: [p.data.mul_(-1) for p in m.parameters()] and m)
    with pytest.raises(RuntimeError, match="different tokens"):
        step_split.forward_gain(tiny_pair[0], PROMPTS, change=change, batch=2, length=40, rounds=2, seed=0)
    with pytest.raises(ValueError, match="change must be one of"):
        step_split.forward_gain(tiny_pair[0], PROMPTS, change="magic", batch=2, length=4, rounds=2, seed=0)
