"""Chapter 10's whole recompute in the order its protocol states, from its parameters: the prompts
chosen, the engines built, vLLM's configurations inspected (and the kernel check), stage 1, stage 2,
the leads' follow-up, greedy equality, the every-position test, then the timing; the two-process
repeatability check runs beside the stages from the start, and the every-position test's rows beside
vLLM's stage 2 (neither needs a result of what it runs beside).
Returns the tables (lists of rows) and values the chapter writes; nothing here is worded.

vLLM runs on one worker kept across the stages and the timing (`specdec.peers.vllm_session`: its
LLMs are built once, in the order `tables.inspect_jobs` gives), closed at the end whatever happens.

Example: out = recompute(P); out["laws"][0]["status"]
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import torch

from specdec.audit import design, law, runs, speed as speed_lib, tables, versus
from specdec.audit.prompts import choose
from specdec.measure.subjects import load_subjects
from specdec.peers.conformance import design_n
from specdec.peers.laws import enumerate_prompt

__all__ = ["configs_of", "recompute"]


def configs_of(P) -> list:
    """The plan's configurations this run audits (``P.ENGINES``, ``P.VLLM_CONFIGS``)."""
    return [c for c in design.plan(P.K, P.DRAFT) if c.engine in P.ENGINES
            and (c.engine != "vllm" or not P.VLLM_CONFIGS or c.label in P.VLLM_CONFIGS)]


def _sizes(P) -> dict:
    """Per-prompt sizes (`tables.size_of`): vLLM's speculative rows at the design's n; llama.cpp's rows,
    its control too (its sample-and-match rows repeat the control's samples under the same seeds), at
    ``N_LLAMA``; every other plain-decoding control, vLLM's too, at ``N_OURS``."""
    return {e: {"n1": max(n // P.STAGE1, P.STAGE1_MIN), "n2": n, "n_long": nl}
            for e, n, nl in (("vllm", P.N_VLLM, P.N_LONG), ("vllm-control", P.N_OURS, P.N_LONG),
                             ("ours", P.N_OURS, P.N_LONG), ("hf", P.N_OURS, P.N_LONG),
                             ("hf-spec", P.N_HF, P.N_LONG_HF), ("llama", P.N_LLAMA, P.N_LONG),
                             ("llama-control", P.N_LLAMA, P.N_LONG))}


def recompute(P) -> dict:
    """Every table and value of the chapter (module docstring); ``P``: the chapter's parameters."""
    from specdec.peers.hf import HFEngine
    from specdec.peers.llama import LlamaEngine
    from specdec.peers.ours import OursEngine
    from specdec.peers.vllm import VLLMEngine
    from specdec.peers.vllm_session import VLLMSession

    torch.set_num_threads(1)
    phases, clock = {}, [time.perf_counter()]

    def mark(name: str) -> None:  # the wall seconds of each phase, for the chapter's budget
        now = time.perf_counter()
        phases[name], clock[0] = round(now - clock[0], 1), now

    configs = configs_of(P)
    subjects = load_subjects("cpu", "float32", allow_stand_in=False, seed=P.SEED)
    tgt, dft = subjects.target, subjects.drafts[P.DRAFT]
    sampled = {name: design.config_cfg(s) for name, s in design.SETTINGS.items() if s.temperature > 0}
    chosen = choose(tgt, subjects.prompts(P.CANDIDATES, P.PROMPT_LEN, seed=P.SEED), list(sampled.values()),
                    count=P.PROMPTS, min_drafts=P.MIN_DRAFTS, min_spread=P.MIN_SPREAD)
    prompts = chosen["prompts"]
    speed_prompts = [p.tolist() for p in subjects.prompts(P.SPEED_PROMPTS, P.PROMPT_LEN, seed=P.SEED + 1)]
    ours = OursEngine(mode="lean")  # the engine's fastest exact forward; its loaded members serve every in-process engine
    engines = {k: v for k, v in {"ours": ours, "hf": HFEngine(_models=ours._models)}.items() if k in P.ENGINES}
    exact = law.Exact({name: [enumerate_prompt(tgt, dft, p, cfg, mass_cut=P.MASS_CUT) for p in prompts]
                       for name, cfg in sampled.items()})
    session = VLLMSession(VLLMEngine(timeout_s=P.VLLM_TIMEOUT_S, threads=1)) if "vllm" in P.ENGINES else None
    # its servers start on first use; the law stages keep LLAMA_PARALLEL requests in flight, the timing one
    llama = LlamaEngine(threads=1, parallel=P.LLAMA_PARALLEL) if "llama" in P.ENGINES else None
    timed = LlamaEngine(threads=1) if llama is not None else None
    out, pool = {}, ThreadPoolExecutor(max_workers=1)  # the thread only waits on worker processes
    try:
        if llama is not None:
            engines["llama"] = llama
        if session is not None:
            engines["vllm"] = session
        lanes = {}  # each stage's busy seconds per lane (vLLM, llama.cpp, in-process), summed: the budget's evidence
        common = dict(session=session, hold=8, target=tgt, draft=dft, workers=P.LAW_WORKERS, lanes=lanes)
        mark("setup")
        rep = [c for c in configs if c.engine == "vllm" and (c.spec is None or "probabilistic drafts" in c.label)
               and "block" not in c.label]
        # two fresh processes of their own, started now: they need no result of the stages
        repeat = pool.submit(runs.repeatability, VLLMEngine(timeout_s=P.VLLM_TIMEOUT_S, threads=1), rep, prompts,
                             n=P.REPEAT_N, setting="temperature 1", seed=P.SEED) \
            if session is not None and P.REPEAT_N > 0 else None
        inspected = runs.stage(tables.inspect_jobs(configs, P.SEED), engines, prompts, kernel_check=True, **common)
        skip = tables.ignored(inspected)
        first = runs.stage(tables.stage_jobs(configs, _sizes(P), seed=P.SEED, long_len=P.LONG_LEN,
                                             greedy_len=P.GREEDY_LEN, skip=skip), engines, prompts, **common)
        test = dict(alpha1=P.ALPHA1, alpha2=P.ALPHA2, eps=P.EPS, n_bins=P.N_BINS, x1_bins=P.X1_BINS,
                    power_target=P.POWER)
        one = tables.law_table(first, {}, exact, skip, configs, **test)
        mark("stage 1")
        pit = dict(alpha=0.01, seed=P.SEED, bins=P.PIT_BINS, position_groups=P.POSITION_GROUPS)
        held = {}  # the every-position test needs only stage 1's long outputs: computed while vLLM's stage 2 runs

        def pit_rows() -> None:
            held["rows"], held["power"] = tables.pit_table(
                first, tgt, prompts, resamples=P.RESAMPLES,
                sequences={"vllm": P.N_LONG * len(prompts), "hf": P.N_LONG_HF * len(prompts)}, **pit)

        second = runs.stage(tables.second_jobs(one, configs, _sizes(P), seed=P.SEED), engines, prompts,
                            meanwhile=pit_rows, **common)
        two = tables.law_table(first, second, exact, skip, configs, **test)
        mark("stage 2 and every position")
        third = runs.stage(tables.lead_jobs(two, configs, _sizes(P), seed=P.SEED, lead_p=P.LEAD_P, factor=P.FOLLOWUP),
                           engines, prompts, **common)
        out["laws"] = tables.law_table(first, second, exact, skip, configs, third=third, **test)
        out["acceptance"] = tables.acceptance_table(first, second, exact, third)
        mark("leads")
        out["what_ran"] = tables.what_ran_rows(inspected)
        out["kernel"] = tables.kernel_rows(inspected)
        out["versions"] = tables.versions(inspected, llama is not None)
        out["greedy"] = tables.greedy_table(first, prompts, runs.greedy_next(engines, P.SEED))
        rows, out["pit_power"] = held["rows"], held["power"]
        again = runs.stage(tables.pit_lead_jobs(rows, configs, lead_p=P.LEAD_P, factor=P.FOLLOWUP, seed=P.SEED),
                           engines, prompts, **common)
        out["pit"] = tables.merge_leads(rows, tables.pit_table(again, tgt, prompts, resamples=1, sequences={}, **pit)[0])
        mark("every position's leads")
        if repeat is not None:
            out["repeat"] = repeat.result()
            mark("repeatability (what was left of it)")
        if llama is not None:
            llama.close()
            engines["llama"] = timed
        failed = {(r["engine"], r["configuration"]) for r in out["laws"] if r.get("status") == "reject"}
        pairs = speed_lib.speed_pairs([c for c in configs if not c.patched], (P.K,))
        out["speed"] = speed_lib.speed_rows(pairs, engines, speed_prompts, batches=tuple(P.SPEED_BATCHES),
                                            length=P.SPEED_LEN, rounds=P.SPEED_ROUNDS,
                                            settings=tuple(P.SPEED_SETTINGS), seed=P.SEED, failed=failed)
        plain = {"Hugging Face generate": engines.get("hf"), "ours, lean": ours,
                 "ours, eager": OursEngine(mode="eager", _models=ours._models), "llama.cpp": timed}
        out["plain"] = versus.plain_rows(
            {e: plain[e] for e in P.PLAIN_ENGINES if plain.get(e) is not None}, P.PLAIN_ENGINES[0], speed_prompts,
            batches=tuple(P.SPEED_BATCHES), length=P.SPEED_LEN, rounds=P.SPEED_ROUNDS,
            settings=tuple(P.SPEED_SETTINGS), seed=P.SEED, vllm=session if "vllm" in P.PLAIN_ENGINES else None)
        mark("timing")
    finally:
        pool.shutdown(wait=True)
        if session is not None:
            session.close()
        for engine in (llama, timed):
            if engine is not None:
                engine.close()
    out["phases"] = {**phases, **{f"lane: {k}": v for k, v in lanes.items()}}
    out["inputs"] = {"eos_mass": max(law.eos_mass(exact.target(name)[0], exact.contexts[name]) for name in sampled),
                     "prompts": prompts, "speed_prompts": speed_prompts, "chosen": chosen["chosen"],
                     "examined": len(chosen["rows"]), "sha256": subjects.sha256,
                     "n_design": design_n(P.PROMPTS, eps=P.EPS, alpha=P.ALPHA2, power_target=P.POWER,
                                          n_bins=P.N_BINS, orders=2)}
    return out
