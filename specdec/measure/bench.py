"""CPU benchmark of the engine (`make bench`): speedup over our autoregressive baseline, engine
overhead outside the model forwards, and Hugging Face assisted generation pinned to the same k.

For each temperature (0 = greedy, 1), each held-out prompt and repeat, in one process and
interleaved (`specdec.measure.harness.sweep`) so that drift hits every implementation alike:
    ours_ar      `specdec.engine.decode.generate` without a drafter (the baseline, KV cache)
    hf_ar        Hugging Face `generate` (batch 1)
    ours_spec    our engine with the model drafter, k drafts, token verification, k in 1..8
    hf_assisted  `generate(assistant_model=draft)` with k pinned (`specdec.measure.hf`)
Speedup of a run = (our AR wall time per token on that prompt and repeat) / (its wall time per
token) -- a ratio of wall times, as both engines run exactly new_tokens (no stop token); reported as
median and interquartile range over prompts x repeats.  Overhead share (ours_spec) =
(step time - draft forwards - target forward) / step time, summed over a run's steps.  Results are
reported, not asserted.

Usage: python -m specdec.measure.bench --out data/results/bench [--smoke]
Example: python -m specdec.measure.bench --smoke --out /tmp/bench  (about 30 s)
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from specdec.core.stats import spread
from specdec.engine.decode import generate
from specdec.engine.kv import now
from specdec.family.tokens import prompt_checksum
from specdec.measure.harness import Cell, Config, sweep
from specdec.measure.hf import hf_assisted
from specdec.measure.subjects import load_subjects
from specdec.report.paths import RESULTS_DIR
from specdec.report.results import provenance, write_table

__all__ = ["configs", "speedups", "summarize", "main"]


def configs(target, draft, ks, temperature: float, n_new: int) -> list[Config]:
    """ours_ar, hf_ar, then ours_spec and hf_assisted for each k (module docstring)."""
    def ours(k):
        return lambda ids, seed: generate(target, ids, drafter=draft if k else None, k=max(k, 1), max_new_tokens=n_new,
                                          temperature=temperature, generator=torch.Generator().manual_seed(seed)
                                          ).summary()

    def hf(k):
        return lambda ids, seed: hf_assisted(target, draft, ids[None], k=k, max_new_tokens=n_new,
                                             temperature=temperature, seed=seed)[1]

    out = [Config("ours_ar", ours(0), impl="ours_ar", k=0), Config("hf_ar", hf(0), impl="hf_ar", k=0)]
    for k in ks:
        out += [Config(f"ours_spec k={k}", ours(k), impl="ours_spec", k=k),
                Config(f"hf_assisted k={k}", hf(k), impl="hf_assisted", k=k)]
    return out


def speedups(rows: list[dict]) -> list[dict]:
    """Each row with ``speedup`` = our AR's wall time per token / its own, same (T, prompt, repeat)."""
    base = {(r["temperature"], r["prompt"], r["repeat"]): r["wall_s"] / r["tokens"] for r in rows
            if r["impl"] == "ours_ar"}
    return [{**r, "speedup": base[(r["temperature"], r["prompt"], r["repeat"])] / (r["wall_s"] / r["tokens"])}
            for r in rows]


def summarize(rows: list[dict]) -> list[dict]:
    """Median and interquartile range of speedup, tokens/s and overhead share per (T, k, impl)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["temperature"], r["k"], r["impl"]), []).append(r)
    out = []
    for (temperature, k, impl), rs in sorted(groups.items()):
        sp = spread([r["speedup"] for r in rs])
        tps = [r["tokens"] / r["wall_s"] for r in rs]
        ov = [r["overhead_share"] for r in rs if r["overhead_share"] == r["overhead_share"]]
        acc = [r["mean_accepted"] for r in rs if r["mean_accepted"] == r["mean_accepted"]]
        out.append({"temperature": temperature, "k": k, "impl": impl, "runs": len(rs),
                    "speedup_median": sp["median"], "speedup_q25": sp["q1"], "speedup_q75": sp["q3"],
                    "tokens_per_s_median": statistics.median(tps),
                    "overhead_share_median": statistics.median(ov) if ov else float("nan"),
                    "overhead_share_max": max(ov) if ov else float("nan"),
                    "mean_accepted_median": statistics.median(acc) if acc else float("nan")})
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specdec.measure.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS_DIR / "bench"))
    ap.add_argument("--smoke", action="store_true", help="a ~30 s run: 1 prompt, k in {1, 4}, 16 tokens")
    ap.add_argument("--draft", default="draft-small", help="a draft of the embedded family")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ks = [1, 4] if a.smoke else list(range(1, 9))
    n_prompts, n_new, repeats = (1, 16, 1) if a.smoke else (a.prompts, a.new_tokens, a.repeats)
    torch.set_num_threads(a.threads)
    subj = load_subjects(allow_stand_in=a.smoke, seed=a.seed)
    target, draft = subj.target, subj.drafts[a.draft]
    prompts = subj.prompts(n_prompts, a.prompt_len, seed=a.seed)
    params = {"target": "embedded", "draft": a.draft, "weights": subj.kind, "ks": ks, "temperatures": [0.0, 1.0],
              "prompts": n_prompts, "prompt_len": a.prompt_len, "new_tokens": n_new, "repeats": repeats,
              "threads": a.threads, "smoke": a.smoke, "method": "token", "top_k": None,
              "prompt_sha256": prompt_checksum(prompts)}
    print(f"bench: {subj.kind}, {n_prompts} prompts x {n_new} tokens, k={ks}, repeats={repeats}", flush=True)
    t0 = now()
    log = lambda m: print(f"[{now() - t0:6.1f}s] {m}", flush=True)  # noqa: E731
    sweep(configs(target, draft, [2], 1.0, 8), [Cell({}, prompts[0])], repeats=1)  # warm-up: one-off costs
    rows = []
    for temperature in (0.0, 1.0):
        cells = [Cell({"temperature": temperature, "prompt": i}, p) for i, p in enumerate(prompts)]
        rows += sweep(configs(target, draft, ks, temperature, n_new), cells, repeats=repeats,
                      seed=lambda rep, i: a.seed + 1000 * rep + i, log=log)
    rows = speedups(rows)
    prov = provenance(params, a.seed, models=subj.sha256)
    write_table(rows, f"{a.out}/bench_runs.csv", prov, kind="timing")
    summ = summarize(rows)
    write_table(summ, f"{a.out}/bench_summary.csv", prov, kind="timing")
    for r in summ:
        print(f"T={r['temperature']:g} k={r['k']} {r['impl']:<12} speedup {r['speedup_median']:.3f} "
              f"[{r['speedup_q25']:.3f}, {r['speedup_q75']:.3f}]  tok/s {r['tokens_per_s_median']:.1f}  "
              f"overhead {r['overhead_share_median']:.3f}  accepted {r['mean_accepted_median']:.2f}")
    print(f"wrote {a.out}/bench_runs.csv and bench_summary.csv in {now() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
