"""The one measurement harness: timed decoding runs, interleaved, each reduced to one tidy row.

A sweep times every configuration on every cell (a cell is one set of inputs, e.g. a prompt or a
batch of prompts with its labels), round after round:

    for round in warmup + repeats:          # warmup rounds are run, never recorded
        for cell in cells:                  # e.g. (output length, batch) or one prompt
            for config in configs (in order, or shuffled per round with a seeded RNG):
                row = run_row(config.run(cell.inputs, seed(round, cell)), ...)

so drift and load of a shared machine hit every configuration alike, and a configuration's rows
pair with its baseline's rows of the same (cell, repeat).  Each run records its CPU share (process
CPU time / wall time / torch threads) and the 1-minute load average; a run below ``min_share`` was
contended and is run again, at most ``max_reruns`` times (`specdec.measure.protocol`).  Chapter 06,
`make bench` and the GPU run (`specdec.cli.gpu_bench`) all measure through it.

`run_row` is the one per-run row builder: a run's summary (`GenerateResult.summary`, the dynamic-k
summary, or Hugging Face's end-to-end timing) becomes the same columns, NaN where a source has no
such number.

Example:
    cfgs = [Config("baseline", lambda x, s: generate(t, x, max_new_tokens=64, generator=g(s)).summary(), k=0)]
    rows = sweep(cfgs, [Cell({"prompt": 0}, ids[:1])], repeats=3, warmup=1)
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from specdec.engine.kv import now

__all__ = ["RUN_COLUMNS", "Config", "Cell", "run_row", "sweep", "protocol_sweep"]

RUN_COLUMNS = ("tokens", "steps", "wall_s", "total_s", "prefill_s", "ttft_s", "tokens_per_s", "tokens_per_s_total",
               "lat_p50_s", "lat_p95_s", "lat_p99_s", "t_draft", "t_draft_forward", "t_target", "t_accept",
               "t_rollback", "t_other", "t_step", "t_engine", "overhead_share", "t_target_steady",
               "t_draft_forward_steady", "t_step_steady", "first_step_tokens", "mean_accepted", "alpha_mle",
               "alpha_steps", "k_chosen", "step_profile", "kv_slots", "peak_memory_bytes")


@dataclass(frozen=True)
class Config:
    """One thing to time: ``run(inputs, seed) -> summary dict``; ``labels`` go into its rows."""

    name: str
    run: Callable
    labels: dict = field(default_factory=dict)

    def __init__(self, name: str, run: Callable, **labels):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "run", run)
        object.__setattr__(self, "labels", labels)


@dataclass(frozen=True)
class Cell:
    """One set of inputs and the labels that identify it in the rows."""

    labels: dict
    inputs: object


def run_row(summary: dict, wall_s: float | None = None, **labels) -> dict:
    """labels, then RUN_COLUMNS from ``summary`` (NaN where absent).  ``wall_s``: the caller's wall
    clock around the whole call; t_engine = t_step - t_draft_forward - t_target (engine overhead)."""
    nan = float("nan")
    s = dict(summary)
    s.setdefault("wall_s", wall_s if wall_s is not None else s.get("total_s", nan))
    tokens, total = s.get("tokens"), s.get("total_s", s["wall_s"])
    if "tokens_per_s_total" not in s and tokens and total and total > 0:
        s["tokens_per_s_total"] = tokens / total
    if {"t_step", "t_draft_forward", "t_target"} <= s.keys():
        s["t_engine"] = s["t_step"] - s["t_draft_forward"] - s["t_target"]
    row = dict(labels)
    for c in RUN_COLUMNS:
        v = s.get(c, nan)
        row[c] = nan if v is None else v
    return row


def _timed(run, inputs, seed, min_share: float, max_reruns: int):
    """(summary, wall seconds, CPU share, load average, re-runs) of one run, re-run while contended."""
    threads = max(torch.get_num_threads(), 1)
    for attempt in range(max_reruns + 1):
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        c0, t0 = time.process_time(), now()
        summary = run(inputs, seed)
        wall = now() - t0
        share = (time.process_time() - c0) / wall / threads if wall > 0 else float("nan")
        if not share < min_share:
            break
    return summary, wall, share, load, attempt


def sweep(configs: list[Config], cells: list[Cell], *, repeats: int, warmup: int = 0,
          seed: Callable[[int, int], int] = lambda rep, i: 1000 * rep + i, shuffle: bool = False,
          shuffle_seed: int = 0, min_share: float = 0.0, max_reruns: int = 0, keep: tuple = (),
          log: Callable[[str], None] | None = None) -> list[dict]:
    """Time every config on every cell (module docstring): one `run_row` per (repeat, cell, config),
    labelled with the cell's labels, ``config`` (its name), its labels, ``repeat`` (0-based, warmup
    rounds excluded), ``position`` in the round, ``cpu_share``, ``load_1m`` and ``reruns``.
    ``seed(round, cell index)`` seeds each run (warmup rounds included, round = -warmup..repeats-1;
    a re-run uses the same seed); ``shuffle`` permutes the configs of each (round, cell) with a
    ``random.Random(shuffle_seed)``, so the order is recorded and reproducible.  ``keep``: keys of
    a run's summary carried into its row unchanged, beside the RUN_COLUMNS (outputs a caller needs
    from the very run it timed, e.g. its tokens)."""
    if repeats < 1 or warmup < 0 or not configs or not cells or max_reruns < 0:
        raise ValueError(f"need repeats >= 1, warmup >= 0, max_reruns >= 0 and at least one config and cell; got "
                         f"repeats={repeats}, warmup={warmup}, max_reruns={max_reruns}, {len(configs)} configs, "
                         f"{len(cells)} cells")
    rng = random.Random(shuffle_seed)
    rows = []
    for rnd in range(-warmup, repeats):
        for i, cell in enumerate(cells):
            order = list(configs)
            if shuffle:
                rng.shuffle(order)
            for pos, cfg in enumerate(order):
                summary, wall, share, load, reruns = _timed(cfg.run, cell.inputs, seed(rnd, i), min_share,
                                                            max_reruns if rnd >= 0 else 0)
                if rnd >= 0:
                    rows.append({**run_row(summary, wall, **cell.labels, config=cfg.name, **cfg.labels, repeat=rnd,
                                           position=pos), "cpu_share": share, "load_1m": load, "reruns": reruns,
                                 **{c: summary[c] for c in keep}})
            if log is not None:
                log(f"round {rnd} cell {i}: done" if rnd >= 0 else f"warm-up round {rnd + warmup}, cell {i}: done")
    return rows


def protocol_sweep(configs: list[Config], cells: list[Cell], *, repeats: int, seed: int, min_share: float = 0.9,
                   max_reruns: int = 2, warm: list[Cell] = (), warm_rounds: int = 1, keep: tuple = (),
                   log: Callable[[str], None] | None = None) -> list[dict]:
    """`sweep` as the measurement protocol runs it (`specdec.measure.protocol`): ``warm_rounds``
    untimed rounds on the ``warm`` cells (run ``seed + 10**6 + 1000 round + cell``), then ``repeats``
    timed rounds on ``cells``, the configurations shuffled per (round, cell) by ``Random(seed)``,
    every configuration of a (round, cell) seeded ``seed + 1000 round + cell``, contended runs re-run;
    ``keep`` as in `sweep`."""
    if warm:
        sweep(configs, list(warm), repeats=warm_rounds, seed=lambda rnd, i: seed + 10**6 + 1000 * rnd + i)
    return sweep(configs, cells, repeats=repeats, seed=lambda rnd, i: seed + 1000 * rnd + i, shuffle=True,
                 shuffle_seed=seed, min_share=min_share, max_reruns=max_reruns, keep=keep, log=log)
