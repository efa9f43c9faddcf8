"""The whole GPU measurement in one script (chapter 07):

    python -m specdec.gpu_bench --out data/results/gpu [--smoke] [--device cuda]
                                [--target ID_OR_PATH --draft ID_OR_PATH] [--budget-s 540]

Needs only torch and transformers (the GPU machine has no network and no papermill); writes tidy
CSV + JSON tables with provenance (GPU name, driver and CUDA versions, package versions, date):

  cost_curve.csv   T(n), n = 1..9, of each real-size target and T(1) of its draft (random weights)
  controlled.csv   controlled-acceptance surface: tokens/s of baseline and k in K_GRID at each
                   alpha in ALPHAS (INSTRUMENTATION: drafts accepted with probability alpha
                   regardless of p and q; measures the hardware, never quality), with the
                   extended prediction S_ext = E[L] / (T(k+1)/T(1) + k c) beside each
  batch.csv        throughput (tokens/s over all rows) at batch sizes 1..32, baseline and k = 4
  embedded.csv     the project's embedded family (data/models/, if present): real acceptance
  hub.csv          a named pair (--target/--draft), only if its weights load without network

Real-size architectures are built from a config with random weights: a ~8B Llama-style target
with a ~1B draft (Llama 3 shapes, vocabulary 128,256), and GPT-2 medium with a 3M draft.  Every
section checks a wall-clock budget and records what it skipped, so the run ends in time.
Run on CPU with --device cpu --smoke to exercise the code path (tiny configs; not GPU numbers).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import subprocess
import sys
import time
from pathlib import Path

import torch

from specdec.costcurve import cost_curve, draft_cost, extended_speedup, param_count, random_model, real_size_config
from specdec.decode import generate
from specdec.instrument import KVCompat
from specdec.results import provenance, write_table
from specdec.timing import run_alpha, summarize

K_GRID = (1, 2, 3, 4, 6, 8)
ALPHAS = (0.5, 0.7, 0.8, 0.9, 0.95)
BATCHES = (1, 2, 4, 8, 16, 32)
LLAMA = {  # Llama 3 8B / 3.2 1B shapes (Grattafiori et al. 2024), random weights
    "llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=8),
    "llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8, tie_word_embeddings=True),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)


def llama_config(name: str, smoke: bool):
    from transformers import LlamaConfig

    kw = dict(TINY, vocab_size=512) if smoke else dict(LLAMA[name], vocab_size=128256)
    if smoke and name == "llama-1b":
        kw.update(num_hidden_layers=1)
    return LlamaConfig(max_position_embeddings=2048, rope_theta=500000.0, bos_token_id=0, eos_token_id=0, **kw)


def gpu_info(device: torch.device) -> dict:
    info = {"device": str(device), "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "cuda_runtime": torch.version.cuda}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["gpu_memory_bytes"] = torch.cuda.get_device_properties(device).total_memory
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            info["driver"] = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "unknown"
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
    return info


class Budget:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds
        self.skipped: list[str] = []

    def left(self) -> float:
        return self.end - time.perf_counter()

    def ok(self, what: str, need: float = 0.0) -> bool:
        if self.left() > need:
            return True
        self.skipped.append(what)
        return False


def _log(msg: str) -> None:
    print(f"[gpu_bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _pairs(args, device, dtype, gen):
    """(name, target, draft) real-size pairs with random weights, built one at a time."""
    if args.smoke:
        specs = [("gpt2-medium/draft-3m", lambda: random_model(real_size_config("gpt2-medium", n_layer=2, n_embd=64,
                                                                                n_head=2, vocab_size=512), gen, dtype, device),
                  lambda: random_model(real_size_config("draft-3m", n_layer=1, n_embd=16, vocab_size=512), gen, dtype, device)),
                 ("llama-8b/llama-1b", lambda: random_model(llama_config("llama-8b", True), gen, dtype, device),
                  lambda: random_model(llama_config("llama-1b", True), gen, dtype, device))]
    else:
        specs = [("gpt2-medium/draft-3m", lambda: random_model(real_size_config("gpt2-medium"), gen, dtype, device),
                  lambda: random_model(real_size_config("draft-3m"), gen, dtype, device)),
                 ("llama-8b/llama-1b", lambda: random_model(llama_config("llama-8b", False), gen, dtype, device),
                  lambda: random_model(llama_config("llama-1b", False), gen, dtype, device))]
    for name, mk_t, mk_d in specs:
        yield name, mk_t, mk_d


def _speed_row(res, pair, B, k, alpha, extra=None) -> dict:
    s = summarize(res)
    row = {"pair": pair, "batch": B, "k": k, "alpha_set": alpha, "tokens": s["tokens"], "total_s": s["total_s"],
           "tokens_per_s_total": s["tokens"] / s["total_s"], "tokens_per_s": s["tokens_per_s"],
           "ttft_s": s["ttft_s"], "lat_p50_s": s["lat_p50_s"], "lat_p95_s": s["lat_p95_s"],
           "t_draft": s["t_draft"], "t_target": s["t_target"], "t_other": s["t_step"] - s["t_draft"] - s["t_target"],
           "mean_accepted": s["mean_accepted"], "peak_memory_bytes": s["peak_memory_bytes"]}
    row.update(extra or {})
    return row


def real_size(args, device, dtype, budget, prov) -> None:
    gen = torch.Generator(device=device).manual_seed(args.seed)
    new, ctx = (8, 16) if args.smoke else (64, 128)
    reps = 1 if args.smoke else 2
    ks, alphas = ((1, 2), (0.8,)) if args.smoke else (K_GRID, ALPHAS)
    curve_rows, ctrl_rows, batch_rows = [], [], []
    for pair, mk_t, mk_d in _pairs(args, device, dtype, gen):
        if not budget.ok(f"{pair}: everything", 60):
            continue
        try:
            _one_pair(pair, mk_t, mk_d, args, device, gen, budget, new, ctx, reps, ks, alphas,
                      curve_rows, ctrl_rows, batch_rows)
        except Exception as exc:  # one failing pair must not cost the others (a single-shot GPU run)
            _log(f"{pair}: FAILED: {type(exc).__name__}: {exc}")
            budget.skipped.append(f"{pair}: failed with {type(exc).__name__}: {str(exc)[:200]}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
        for name, rows in (("cost_curve", curve_rows), ("controlled", ctrl_rows), ("batch", batch_rows)):
            if rows:  # written after every pair: a run cut short keeps what it measured
                write_table(rows, Path(args.out) / f"{name}.csv", prov)


def _one_pair(pair, mk_t, mk_d, args, device, gen, budget, new, ctx, reps, ks, alphas, curve_rows, ctrl_rows,
              batch_rows) -> None:
    _log(f"{pair}: building random-weight models")
    target, draft = mk_t(), mk_d()
    V = int(target.config.vocab_size)
    rows = cost_curve(target, range(1, max(ks) + 2), context=ctx, repeats=3 if args.smoke else 20,
                      warmup=1 if args.smoke else 3, generator=gen)
    d1 = cost_curve(draft, [1], context=ctx, repeats=3 if args.smoke else 20, generator=gen)[0]
    curve = {r["n"]: r["median_s"] for r in rows}
    c = draft_cost(d1["median_s"], curve[1])
    for r in rows:
        curve_rows.append({"pair": pair, "model": "target", "params": param_count(target), **r,
                           "draft_t1_s": d1["median_s"], "c": c})
    _log(f"{pair}: T(1) {curve[1] * 1e3:.2f} ms, T({max(curve)})/T(1) {curve[max(curve)] / curve[1]:.2f}, c {c:.3f}")
    ids = torch.randint(0, V, (32, ctx), generator=gen, device=device)
    gen_kw = dict(max_new_tokens=new, temperature=1.0)
    generate(target, ids[:1], drafter=draft, k=2, instrument_accept_prob=0.8, generator=gen, **gen_kw)  # warm-up
    for rep in range(reps):
        if not budget.ok(f"{pair}: controlled repeat {rep}", 30):
            break
        base = generate(target, ids[:1], generator=gen, **gen_kw)
        ctrl_rows.append(_speed_row(base, pair, 1, 0, float("nan"), {"repeat": rep, "predicted_speedup": 1.0}))
        for alpha in alphas:
            for k in ks:
                res = generate(target, ids[:1], drafter=draft, k=k, instrument_accept_prob=alpha, generator=gen,
                               **gen_kw)
                ctrl_rows.append(_speed_row(res, pair, 1, k, alpha, {
                    "repeat": rep, "predicted_speedup": extended_speedup(alpha, k, curve, c)}))
    for B in BATCHES if not args.smoke else (1, 2):
        if not budget.ok(f"{pair}: batch {B}", 20):
            break
        for k in (0, 4):
            kw = dict(drafter=draft, k=k, instrument_accept_prob=0.8) if k else {}
            res = generate(target, ids[:B], generator=gen, **kw, **gen_kw)
            batch_rows.append(_speed_row(res, pair, B, k, 0.8 if k else float("nan")))
    _log(f"{pair}: done ({budget.left():.0f} s left)")


def _load(name, device, dtype):
    """An embedded name, local directory or cached hub id via `specdec.models.load_model`
    (safetensors only, sha256-checked when embedded, never remote code)."""
    from specdec.models import load_model

    return KVCompat(load_model(name, dtype=dtype, device=str(device)))


def pair_acceptance(name, target, draft, prompts, args, device, budget) -> list[dict]:
    """Real acceptance and speed of a trained pair: baseline and each k, T = 0 and 1, batch 1."""
    rows, new = [], 8 if args.smoke else 128
    temps, ks = ((1.0,), (0, 2)) if args.smoke else ((0.0, 1.0), (0,) + K_GRID)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    generate(target, prompts[:1], drafter=draft, k=4, max_new_tokens=8, temperature=1.0, generator=gen)  # warm-up
    for temp in temps:
        for k in ks:
            if not budget.ok(f"{name}: T={temp} k={k}", 10):
                return rows
            for i in range(prompts.shape[0]):
                kw = dict(drafter=draft, k=k) if k else {}
                res = generate(target, prompts[i:i + 1], max_new_tokens=new, temperature=temp, generator=gen, **kw)
                alpha, steps = run_alpha(res.stats, k) if k else (float("nan"), 0)
                rows.append(_speed_row(res, name, 1, k, float("nan"), {"temperature": temp, "prompt": i,
                                                                        "alpha_mle": alpha, "alpha_steps": steps}))
    return rows


def embedded(args, device, dtype, budget, prov) -> None:
    models = Path(__file__).resolve().parent.parent / "data" / "models"
    if not (models / "target").is_dir():
        _log("embedded family: data/models/target not found, skipped")
        budget.skipped.append("embedded: no weights in data/models")
        return
    from specdec.corpus import heldout_prompts, load_tokenizer

    from specdec.models import ModelUnavailableError

    try:
        target = _load("embedded", device, dtype)
    except ModelUnavailableError as exc:
        _log(f"embedded family not loadable: {exc}")
        budget.skipped.append(f"embedded: {type(exc).__name__}")
        return
    prompts = heldout_prompts(load_tokenizer(), n=1 if args.smoke else 4, prompt_len=64, seed=args.seed).to(device)
    rows = []
    for dname in ("draft-small", "draft-medium", "draft-distilled"):
        if not (models / dname).is_dir():
            continue
        try:
            rows += pair_acceptance(f"embedded target/{dname}", target,
                                    _load("embedded-" + dname.split("-", 1)[1], device, dtype), prompts, args,
                                    device, budget)
        except Exception as exc:  # keep the other drafts' results
            _log(f"embedded/{dname}: FAILED: {type(exc).__name__}: {exc}")
            budget.skipped.append(f"embedded/{dname}: failed with {type(exc).__name__}: {str(exc)[:200]}")
    if rows:
        write_table(rows, Path(args.out) / "embedded.csv", prov)


def hub(args, device, dtype, budget, prov) -> None:
    try:
        target, draft = _load(args.target, device, dtype), _load(args.draft, device, dtype)
    except (OSError, ValueError) as exc:  # ModelUnavailableError is a ValueError
        _log(f"hub pair {args.target} / {args.draft} not loadable offline: {exc}")
        budget.skipped.append(f"hub pair {args.target}/{args.draft}: not reachable ({type(exc).__name__})")
        return
    V = int(target.config.vocab_size)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    prompts = torch.randint(0, V, (2, 64), generator=gen, device=device)  # no tokenizer needed for timing
    rows = pair_acceptance(f"{args.target}/{args.draft}", target, draft, prompts, args, device, budget)
    if rows:
        write_table(rows, Path(args.out) / "hub.csv", prov)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/results/gpu")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny configs: exercises the code path only")
    ap.add_argument("--target", default="")
    ap.add_argument("--draft", default="")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget for all sections")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_bench: CUDA is not available on this machine; nothing measured, nothing written.",
              file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    budget = Budget(args.budget_s)
    info = gpu_info(device)
    params = {**vars(args), "dtype": str(dtype), "K_GRID": (1, 2) if args.smoke else K_GRID,
              "ALPHAS": (0.8,) if args.smoke else ALPHAS, "BATCHES": (1, 2) if args.smoke else BATCHES}
    prov = provenance(params, seed=args.seed)
    prov["gpu_environment"] = info
    _log(f"start on {info.get('gpu', args.device)}; budget {args.budget_s:.0f} s")
    t0 = time.perf_counter()
    for section in (real_size, embedded, hub if args.target and args.draft else None):
        if section is None:
            continue
        try:
            section(args, device, dtype, budget, prov)
        except Exception as exc:  # report and go on: the run's other tables still get written
            _log(f"{section.__name__}: FAILED: {type(exc).__name__}: {exc}")
            budget.skipped.append(f"{section.__name__}: failed with {type(exc).__name__}: {str(exc)[:200]}")
    if (args.target or args.draft) and not (args.target and args.draft):
        budget.skipped.append("hub pair: needs both --target and --draft")
    summary = [{"section": s, "status": "skipped"} for s in budget.skipped] or [{"section": "all", "status": "complete"}]
    for r in summary:
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        r["smoke"] = args.smoke
    write_table(summary, Path(args.out) / "run_summary.csv", prov)
    _log(f"done in {time.perf_counter() - t0:.0f} s; skipped: {budget.skipped or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
