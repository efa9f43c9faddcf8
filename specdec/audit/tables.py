"""The audit's tables from its runs (chapter 10): the jobs of each stage, the law rows merged over the two
stages, acceptance, the every-position (PIT) rows with the planted faults' power, greedy equality,
repeatability and the kernel check.  Numbers and one-word verdicts only: the chapter words them.

Stages, stated before any result (`specdec.audit.law` gives the test's design):
  0. vLLM: every configuration built and inspected (what ran), and the kernel check; no samples.
  1. every tested configuration: law samples (``n1`` per prompt), long outputs, greedy outputs.
  2. every law row stage 1 did not reject: ``n2`` fresh law samples per prompt (seed + 1).
  3. a *lead* -- a stage-2 rejection with ``lead_p`` < p and no token the target cannot emit, which
     chance alone gives about once in 1 / level tests -- is drawn once more, ``factor`` times
     ``n2`` fresh samples per prompt (seed + 2), at stage 2's level, and that draw decides the row;
     the stage-2 p-value stays beside it.

Example: jobs = stage_jobs(configs, 1, sizes, seed=10, long_len=64, greedy_len=32)
"""

from __future__ import annotations

import math

from specdec.audit.design import SETTINGS, Config
from specdec.audit.law import Exact, acceptance_row, law_row, ran
from specdec.audit.pit_rows import fault_power, pit_row
from specdec.audit.runs import Job, law_length
from specdec.audit.speed import filled
from specdec.peers.diagnosis import greedy_divergences

__all__ = ["versions", "inspect_jobs", "size_of", "stage_jobs", "ignored", "law_table", "second_jobs", "lead_jobs",
           "pit_lead_jobs", "merge_leads", "acceptance_table", "pit_table",
           "greedy_table", "kernel_rows", "what_ran_rows"]

SAMPLED = [name for name, s in SETTINGS.items() if s.temperature > 0]


def versions(inspected: dict, llama: bool = False) -> dict:
    """The versions each engine ran with: vLLM's as its worker reported them (its own environment),
    ours and Hugging Face's from this one, llama.cpp's from its build record (``llama``: it ran)."""
    import torch
    import transformers

    from specdec.peers.llama_server import build_info

    got = next((r.provenance.get("versions") for r in inspected.values() if r.provenance.get("versions")), {}) or {}
    return {"vllm": got.get("vllm", "not run"), "distribution": got.get("distribution", ""),
            "publisher": got.get("publisher", "").split(" <")[0], "bug_tracker": got.get("bug_tracker", ""),
            "torch_vllm": got.get("torch", ""),
            "transformers_vllm": got.get("transformers", ""), "torch": torch.__version__,
            "transformers": transformers.__version__,
            **({f"llama_{k}": v for k, v in build_info().items() if k in ("package", "package_version", "sdist_sha256",
                "llama_cpp_build", "package_commit", "package_commit_date", "compiler")} if llama else {})}


def inspect_jobs(configs: list[Config], seed: int) -> list[Job]:
    """Stage 0: one inspect-only job per vLLM configuration that has an LLM of its own (a patched
    configuration shares its shipped one's), plain first and n-gram lookup last: in vLLM 0.32.0 no
    LLM can be built in a process after an n-gram one (llvmlite raises AttributeError), so every
    LLM the stages need is built here, in that order, and held."""
    own = [c for c in configs if c.engine == "vllm" and not c.patched]
    own.sort(key=lambda c: c.spec is not None and c.spec.method == "ngram")  # stable: n-gram last
    return [Job(c, SAMPLED[0], "inspect", 1, 2, seed) for c in own]


def ignored(inspected: dict) -> dict:
    """(engine, label) -> why, for every inspected configuration whose requested options the build ignored."""
    out = {}
    for job, res in inspected.items():
        what, detail = ran(job.cfg, res)
        if what != "tested":
            out[(job.cfg.engine, job.cfg.label)] = (what, detail)
    return out


def size_of(c: Config, sizes: dict) -> dict:
    """A configuration's sizes: ``sizes["<engine>-spec"]`` for a speculative row and
    ``sizes["<engine>-control"]`` for plain decoding where the chapter gives them, else ``sizes[engine]``."""
    own = f"{c.engine}-{'control' if c.spec is None else 'spec'}"
    return sizes.get(own) or sizes[c.engine]


def stage_jobs(configs: list[Config], sizes: dict, *, seed: int, long_len: int, greedy_len: int,
               skip: dict | None = None) -> list[Job]:
    """Stage 1 (module docstring) for every configuration not in ``skip``; ``sizes``: engine ->
    {"n1", "n_long"} (`size_of`).  The
    negative controls draw twice ``n_long``: their power is read at the rows' size by subsampling
    at most half of their outputs (`specdec.peers.pit.resampled_power`)."""
    jobs = []
    for c in configs:
        if skip and (c.engine, c.label) in skip:
            continue
        size = size_of(c, sizes)
        for name in SAMPLED:
            jobs.append(Job(c, name, "law", size["n1"], law_length(c.engine, c.spec.k if c.spec else 0), seed))
            if size.get("n_long"):
                n_long = size["n_long"] * (2 if c.role == "negative control" else 1)
                jobs.append(Job(c, name, "long", n_long, long_len, seed))
        if c.role != "negative control":
            jobs.append(Job(c, "greedy", "greedy", 1, greedy_len, seed))
    return jobs


def second_jobs(rows: list[dict], configs: list[Config], sizes: dict, *, seed: int) -> list[Job]:
    """Stage 2: ``n2`` law samples for every stage-1 row that was tested and not rejected, drawn
    fresh: in-process engines with ``seed + 1``; vLLM with the same engine-level ``seed``, its LLM's
    stream going on from stage 1 (a new seed would need a new LLM, module `inspect_jobs`)."""
    by = {(c.engine, c.label): c for c in configs}
    out = []
    for r in rows:
        if r.get("status") == "pass":
            c = by[(r["engine"], r["configuration"])]
            size = size_of(c, sizes)
            out.append(Job(c, r["setting"], "law", size["n2"], law_length(c.engine, c.spec.k if c.spec else 0),
                           seed if c.engine == "vllm" else seed + 1))
    return out


def lead_jobs(rows: list[dict], configs: list[Config], sizes: dict, *, seed: int, lead_p: float,
              factor: int) -> list[Job]:
    """Stage 3 (module docstring): ``factor`` x ``n2`` fresh law samples per prompt for every lead,
    in process with ``seed + 2``, vLLM with its engine-level ``seed`` (its stream goes on)."""
    by = {(c.engine, c.label): c for c in configs}
    out = []
    for r in rows:
        if r.get("status") == "reject" and r.get("stage") == 2 and r["p_value"] > lead_p and not r.get("impossible"):
            c = by[(r["engine"], r["configuration"])]
            size = size_of(c, sizes)
            out.append(Job(c, r["setting"], "law", factor * size["n2"], law_length(c.engine, c.spec.k if c.spec else 0),
                           seed if c.engine == "vllm" else seed + 2))
    return out


def law_table(first: dict, second: dict, exact: Exact, skip: dict, configs: list[Config], *, alpha1: float,
              alpha2: float, eps: float, n_bins: int, x1_bins: int, power_target: float,
              third: dict | None = None) -> list[dict]:
    """One row per (configuration, sampled setting): the lead's follow-up (``third``) where it ran,
    else stage 2's test where it ran, else stage 1's (a rejection there, or a row that could not
    run), else the build's ignoring of the row; ``stage`` says which decided, ``p_stage1`` and
    ``p_stage2`` keep the earlier p-values."""
    kw = dict(eps=eps, n_bins=n_bins, x1_bins=x1_bins, power_target=power_target)
    one = {(j.cfg, j.setting): law_row(j.cfg, j.setting, r, exact, alpha=alpha1, **kw)
           for j, r in first.items() if j.kind == "law"}
    two = {(j.cfg, j.setting): law_row(j.cfg, j.setting, r, exact, alpha=alpha2, **kw)
           for j, r in second.items() if j.kind == "law"}
    three = {(j.cfg, j.setting): law_row(j.cfg, j.setting, r, exact, alpha=alpha2, **kw)
             for j, r in (third or {}).items() if j.kind == "law"}
    rows = []
    for c in configs:
        for name in SAMPLED:
            if (c.engine, c.label) in skip:
                what, detail = skip[(c.engine, c.label)]
                rows.append({"engine": c.engine, "configuration": c.label, "role": c.role, "setting": name,
                             "patched": c.patched, "ran": what, "ran_detail": detail, "status": what,
                             "verdict": "not tested"})
                continue
            a = one.get((c, name))
            if a is None:
                continue
            b, d = two.get((c, name)), three.get((c, name))
            row = dict(d if d is not None else b if b is not None else a)
            row.update(stage=3 if d is not None else 2 if b is not None else 1, p_stage1=a.get("p_value", math.nan),
                       n_stage1=a.get("n", math.nan), p_stage2=(b or {}).get("p_value", math.nan),
                       level=alpha1 + alpha2)
            rows.append(row)
    return filled(rows)


def acceptance_table(first: dict, second: dict, exact: Exact, third: dict | None = None) -> list[dict]:
    """vLLM's and llama.cpp's position-1 acceptance of each row's deciding stage (`law.acceptance_row`)."""
    latest = {(j.cfg, j.setting): (j, r) for j, r in first.items() if j.kind == "law"}
    latest.update({(j.cfg, j.setting): (j, r) for j, r in second.items() if j.kind == "law"})
    latest.update({(j.cfg, j.setting): (j, r) for j, r in (third or {}).items() if j.kind == "law"})
    rows = [acceptance_row(j.cfg, j.setting, r, exact) for j, r in latest.values()]
    return filled([r for r in rows if r is not None])


def pit_table(first: dict, target, prompts, *, alpha: float, seed: int, sequences: dict, resamples: int = 100,
              **test) -> tuple[list[dict], list[dict]]:
    """(one row per long-output run, one row per negative control and setting with its power at each
    named sequence count of ``sequences``)."""
    rows, power = [], []
    for j, res in first.items():
        if j.kind != "long":
            continue
        row, u, idx = pit_row(j.cfg, j.setting, res, target, prompts, alpha=alpha, seed=seed, **test)
        rows.append(row)
        if j.cfg.role == "negative control" and u is not None:
            got = fault_power(u, idx, sequences, alpha=alpha, seed=seed, resamples=resamples, **test)
            power.append({"configuration": j.cfg.label, "setting": j.setting,
                          **{f"power_{k}": v for k, v in got.items()}, "resamples": resamples})
    return filled(rows), filled(power)


def pit_lead_jobs(rows: list[dict], configs: list[Config], *, lead_p: float, factor: int, seed: int) -> list[Job]:
    """The every-position test's leads (a rejection with ``lead_p`` < p and no impossible token, of
    a row that is no negative control): ``factor`` times the row's sequences, drawn fresh (in process
    ``seed + 2``, vLLM its own seed), at the row's length; that draw decides the row (`merge_leads`)."""
    by = {(c.engine, c.label): c for c in configs}
    out = []
    for r in rows:
        if r.get("status") == "reject" and r["p_value"] > lead_p and not r.get("impossible") \
                and r.get("role") != "negative control":
            c = by[(r["engine"], r["configuration"])]
            per_prompt = int(r["sequences"]) // max(1, int(r.get("prompts", 1) or 1))
            out.append(Job(c, r["setting"], "long", factor * per_prompt, int(r["length"]),
                           seed if c.engine == "vllm" else seed + 2))
    return out


def merge_leads(rows: list[dict], followed: list[dict]) -> list[dict]:
    """The rows with each lead replaced by its follow-up's row (``stage`` 2, ``p_first`` kept)."""
    by = {(r["engine"], r["configuration"], r["setting"]): r for r in followed}
    out = []
    for r in rows:
        f = by.get((r["engine"], r["configuration"], r["setting"]))
        out.append({**r, "stage": 1, "p_first": math.nan} if f is None else {**f, "stage": 2, "p_first": r["p_value"]})
    return filled(out)


def greedy_table(first: dict, prompts, plain_at=None) -> list[dict]:
    """Per engine, each speculative greedy configuration against the same engine's plain greedy:
    samples, how many are identical, and each difference classified (`diagnosis.greedy_divergences`)."""
    got = {j.cfg: r for j, r in first.items() if j.kind == "greedy"}
    plain = {c.engine: r for c, r in got.items() if c.spec is None}
    out = []
    for c, res in got.items():
        if c.spec is None or c.role != "speculative":
            continue
        base = {"engine": c.engine, "configuration": c.label, "patched": c.patched}
        ref = plain.get(c.engine)
        if res.error or ref is None or ref.error:
            out.append({**base, "note": res.error or "no plain greedy run of this engine"})
            continue
        triples = [(p, a, b) for p, pa, pb in zip(prompts, res.tokens, ref.tokens) for a, b in zip(pa, pb)]
        classes = []
        for p, a, b in triples:
            if a != b and plain_at is not None:
                classes += [r["class"] for r in greedy_divergences(
                    [a], [b], lambda prefix, p=p: plain_at(c.engine, p, prefix))]
        out.append({**base, "samples": len(triples), "identical": sum(a == b for _, a, b in triples),
                    "against_speculation": classes.count("against speculation"),
                    "plain_not_reproducible": classes.count("plain not reproducible"), "note": ""})
    return filled(out)


def kernel_rows(inspected: dict) -> list[dict]:
    """The kernel check (`peers.vllm_patch.kernel_check`) as rows: dtype, input, shipped and
    patched outputs and whether each is correct."""
    check = next((r.provenance.get("kernel_check") for r in inspected.values() if r.provenance.get("kernel_check")),
                 None)
    if not check or "cases" not in check:
        return [{"dtype": "", "note": (check or {}).get("error", "the kernel check did not run")}]
    return [{"dtype": c["dtype"], "input": str(c["input"]), "expected": str(c["expected"]),
             "shipped": str(c["shipped"]), "shipped_correct": c["shipped_correct"], "patched": str(c["patched"]),
             "patched_correct": c["patched_correct"], "has_triton": check["has_triton"]} for c in check["cases"]]


def what_ran_rows(inspected: dict) -> list[dict]:
    """Per inspected vLLM configuration, what ran (`peers.vllm_patch.what_ran`) and what it ignored."""
    out = []
    for j, res in inspected.items():
        w = res.provenance.get("what_ran") or {}
        what, detail = ran(j.cfg, res)
        out.append({"configuration": j.cfg.label, "runner": w.get("runner", ""), "drafter": w.get("drafter", ""),
                    "draft_sampling": w.get("draft_sampling", ""), "rejection": w.get("rejection", ""),
                    "ran": what, "ignored": detail})
    return filled(out)
