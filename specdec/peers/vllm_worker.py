"""The vLLM side of `specdec.peers.vllm`: run as a script by `.venv-vllm/bin/python`, never imported.

    .venv-vllm/bin/python specdec/peers/vllm_worker.py REQUEST.json RESULT.json

It imports only vllm and the standard library (the project's environment is not on its path).
REQUEST.json holds {"runs": [run, ...], "hold": int (optional, default 1)}; each run is one
configuration, executed in order in this one process (vLLM's start-up is the cost, so a list of
configurations shares it, and runs of one configuration share its LLM while it is one of the
``hold`` most recently used: 2 lets plain and speculative runs alternate without rebuilding):

    {"model": folder, "seed": int, "max_model_len": int, "speculative_config": dict | null,
     "prompts": [[token ids]], "sampling": {"n", "temperature", "top_k", "top_p", "max_tokens"},
     "repeats": int (optional, default 1: generate calls timed one after another)}

For each run it builds `vllm.LLM` the way vLLM's offline users do (float32, eager, one engine-level
seed: per-request seeds crash vLLM's CPU sampler), generates from token-id prompts with
detokenization off and EOS ignored (every sample is `max_tokens` ids, the ids the engine sampled;
no `min_tokens`, which would mask the end-of-text token and change the law),
and records the engine's own counters: the `vllm:spec_decode_*` metrics of `llm.get_metrics()`,
taken as differences around `generate` (the registry is global to the process). RESULT.json is
rewritten after every run, so a run cut by the caller's timeout keeps the rows already finished.

A run vLLM cannot do gets a row with `error` instead of stopping the others: a method, option or
option value the installed `SpeculativeConfig` does not declare gives "not available in vLLM X.Y.Z"
(checked before building anything), and any exception vLLM raises is recorded with its message.
"""
import gc
import json
import os
import sys
import time
import traceback
import typing


def _declared(config_class) -> dict:
    """{field name: annotation} of vLLM's SpeculativeConfig (a pydantic dataclass)."""
    fields = getattr(config_class, "__dataclass_fields__", None) or getattr(config_class, "model_fields", {})
    return {name: getattr(field, "type", None) or getattr(field, "annotation", None)
            for name, field in fields.items()}


def _choices(annotation) -> tuple | None:
    """The allowed values of a Literal annotation (through Optional/Union), None if not a Literal."""
    if isinstance(annotation, str) or annotation is None:
        return None
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    values = [_choices(arg) for arg in typing.get_args(annotation)]
    values = [v for v in values if v]
    return tuple(x for v in values for x in v) if values else None


def unavailable(spec: dict | None, version: str) -> str | None:
    """Why the installed vLLM cannot run `spec`, or None when every key and Literal value is declared."""
    if not spec:
        return None
    from vllm.config import SpeculativeConfig
    declared = _declared(SpeculativeConfig)
    for key, value in spec.items():
        if key not in declared:
            return f"speculative option {key!r} not available in vLLM {version}"
        allowed = _choices(declared[key])
        if allowed is not None and value is not None and value not in allowed:
            what = "method" if key == "method" else f"{key}"
            return f"{what} {value!r} not available in vLLM {version} (it has {', '.join(map(str, allowed))})"
    return None


def _spec_counters(llm) -> dict:
    """{metric name: int or [int per position]} for vLLM's spec_decode_* and generation counters."""
    out = {}
    for metric in llm.get_metrics():
        if not (metric.name.startswith("vllm:spec_decode") or metric.name in (
                "vllm:generation_tokens", "vllm:prompt_tokens")):
            continue
        if hasattr(metric, "values"):
            old = out.get(metric.name, [])
            vals = list(metric.values)
            out[metric.name] = [a + b for a, b in zip(vals, old + [0] * (len(vals) - len(old)))]
        elif hasattr(metric, "value"):
            out[metric.name] = out.get(metric.name, 0) + metric.value
    return out


def _difference(after: dict, before: dict) -> dict:
    out = {}
    for name, value in after.items():
        old = before.get(name)
        if isinstance(value, list):
            old = old or []
            out[name] = [a - (old[i] if i < len(old) else 0) for i, a in enumerate(value)]
        else:
            out[name] = value - (old or 0)
    return out


def _key(run: dict) -> str:
    """What decides the LLM a run needs: consecutive runs with the same key share one LLM."""
    return json.dumps([run["model"], run["seed"], run["max_model_len"], run.get("speculative_config"),
                       run.get("llm_options", {})], sort_keys=True)


def _close(held: dict, keep: int = 0) -> None:
    """Shut down the held LLMs, oldest first, until at most ``keep`` remain (``held``: key -> LLM,
    in order of last use)."""
    while len(held) > keep:
        llm = held.pop(next(iter(held)))
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass
        del llm
        gc.collect()


def run_one(run: dict, versions: dict, held: dict | None = None, hold: int = 1, failed: dict | None = None) -> dict:
    """One configuration: build the LLM (or reuse one ``held`` from an earlier run with the same
    model, seed, length and speculative configuration: its random stream then goes on from that
    run; at most ``hold`` LLMs are kept, the least recently used shut down first), generate
    ``repeats`` times (default 1; the tokens and counters are the first call's, the wall time of
    every call is kept), read the counters; never raises.  A configuration that raised is recorded in
    ``failed`` (key -> error, traceback): a later run of it in the same worker gets that error
    without being built again (vLLM's refusals are deterministic; a rebuild per repeat would cost a
    start-up and the other held LLMs, which a failure shuts down)."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    held = {} if held is None else held
    failed = {} if failed is None else failed
    row = {"tokens": [], "counters": {}, "error": None, "timings": {}}
    why = unavailable(run.get("speculative_config"), versions["vllm"])
    if why:
        row["error"] = why
        return row
    key = _key(run)
    if key in failed:  # the same configuration failed earlier in this worker: its error, not a retry
        row["error"], row["traceback"] = failed[key]
        return row
    try:
        if key not in held:
            _close(held, keep=max(int(hold), 1) - 1)
            start = time.perf_counter()
            held[key] = LLM(model=run["model"], tokenizer=run["model"], dtype="float32", enforce_eager=True,
                              max_model_len=run["max_model_len"], seed=run["seed"], disable_log_stats=False,
                              speculative_config=run.get("speculative_config"), **run.get("llm_options", {}))
            row["timings"]["startup_s"] = time.perf_counter() - start
        else:
            row["timings"]["startup_s"] = 0.0  # an earlier run's LLM, reused
        held[key] = held.pop(key)  # most recently used last
        llm = held[key]
        s = run["sampling"]
        # vLLM refuses n > 1 at temperature 0: greedy samples are asked as n requests of one each
        copies = s["n"] if s["temperature"] == 0 else 1
        params = SamplingParams(n=s["n"] // copies, temperature=s["temperature"], top_k=s.get("top_k") or 0,
                                top_p=s.get("top_p") or 1.0, max_tokens=s["max_tokens"], ignore_eos=True,
                                detokenize=False, skip_special_tokens=False)
        # no min_tokens: it masks the end-of-text token at every position (vLLM adds it to the stop
        # set even with ignore_eos), which changes the law; ignore_eos alone gives max_tokens ids
        prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in run["prompts"] for _ in range(copies)]
        each = []
        if int(run.get("repeats", 1)) > 1 and row["timings"]["startup_s"] > 0:
            llm.generate(prompts, params, use_tqdm=False)  # a timed series starts warm, as a reused LLM does
        for i in range(int(run.get("repeats", 1))):
            before = _spec_counters(llm)
            start = time.perf_counter()
            outputs = llm.generate(prompts, params, use_tqdm=False)
            each.append(time.perf_counter() - start)
            if i == 0:
                row["counters"] = _difference(_spec_counters(llm), before)
                samples = [[list(c.token_ids) for c in sorted(o.outputs, key=lambda c: c.index)] for o in outputs]
                row["tokens"] = [sum(samples[j * copies:(j + 1) * copies], []) for j in range(len(run["prompts"]))]
        row["timings"]["generate_s"] = each[0]
        row["timings"]["generate_each_s"] = each
    except Exception as exc:  # a row that failed says why; the other runs go on
        row["error"] = f"vLLM {versions['vllm']} raised {type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=8)
        failed[key] = (row["error"], row["traceback"])
        _close(held)  # all of them: shutting one down tears down the process group the others use
    return row


def main(request_path: str, result_path: str) -> None:
    start = time.perf_counter()
    with open(request_path) as f:
        request = json.load(f)
    import torch
    import transformers
    import vllm
    versions = {"vllm": vllm.__version__, "torch": torch.__version__,
                "transformers": transformers.__version__, "python": sys.version.split()[0]}
    result = {"versions": versions, "import_s": time.perf_counter() - start, "runs": []}
    held, hold, failed = {}, int(request.get("hold", 1)), {}
    try:
        for run in request["runs"]:
            result["runs"].append(run_one(run, versions, held, hold, failed))
            with open(result_path + ".tmp", "w") as f:
                json.dump(result, f)
            os.replace(result_path + ".tmp", result_path)
    finally:
        _close(held)


if __name__ == "__main__":  # vLLM spawns its engine core: the entry point must be guarded
    main(sys.argv[1], sys.argv[2])
