"""llama.cpp's ``llama-server`` behind `specdec.peers.Engine`: the embedded pair as float32 GGUF,
token-id prompts over HTTP on 127.0.0.1, every sampling rule pinned per request.

One server per speculative configuration (flags are fixed at start), started on first use and
kept until `close` (a context manager; recompute paths close it in ``finally``).  Always given:
``-ctk f32 -ctv f32 -fa off`` (float32 KV cache, no flash attention: the logits ggml computes are
then ours to float32 rounding and its float16 GELU table, `tests/peers/test_llama_gguf.py`).

`Speculation` -> server flags:
  - None / "none": plain decoding (the control);
  - "draft_model" with the family member ``draft``: ``-md <draft.gguf> --spec-type draft-simple
    --spec-draft-n-max k --spec-draft-p-min 0`` (a draft of exactly k tokens whenever k fit; the
    draft's own KV cache float32, one thread) and ``--spec-draft-sampling`` from the option
    ``draft_sampling``: "greedy" (llama.cpp's default: the draft's argmax, kept while it equals the
    target's own sample, sample-and-match; acceptance p(argmax q)) or "probabilistic" (the draft
    samples q = its top 10 at the request's temperature and the target verifies by rejection with
    the residual [p - q]+; used when the temperature is > 0; acceptance sum min(p, q));
  - "ngram": ``--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m k``
    (prompt lookup as vLLM's n-gram row runs it: the last token looked up in the context, the k
    tokens that followed it drafted); a lookup draft has no q, so the server verifies it by
    sample-and-match at every temperature (acceptance p(d)).  Its steps are derived from the tokens
    by llama.cpp's own lookup rule (`llama_steps.ngram_steps`), checked against the request's totals.

Per request: ``samplers`` ["temperature", "top_k"?, "top_p"?] in that order -- the order of
`Sampling` (llama.cpp's default order puts top-p before the temperature, another law), no penalty,
DRY, XTC, min-p or typical-p sampler in the chain, no dynamic temperature, min_keep 0, no logit
bias or grammar sent (a server started with ``--logit-bias`` or ``--dynatemp-range`` is overridden); ``seed`` `stream_seed(seed, prompt, sample)`
(uint32, never llama.cpp's "random" 0xFFFFFFFF); ``ignore_eos``, which llama.cpp implements by
banning the end-of-text token (logit bias -inf on every end-of-generation token; the family's is
id 0): the rules in force are the target's law without that token, a difference of the mass the
target puts on it (chapter 10 computes it at its prompts).

Slots.  ``parallel`` > 1 starts each server with that many slots and keeps as many of one prompt's
requests in flight; the server decodes them as one batch, each request with its own sampler, seed
and draft counters, so a sample's law is unchanged (a batched forward may round differently: the
law tests, not token equality, are the check).  Timing uses one slot, one request at a time.

Tokens.  Each sample is one request for exactly ``max_new_tokens`` tokens; the first comes from
prefill, and the server drafts min(k, n_predict - decoded - 1) tokens a step, so a step near the
end drafts fewer (a caller that needs k drafts at token t asks for t + k tokens).  llama.cpp
reports per request only its totals ``draft_n`` / ``draft_n_accepted``: the sample's step record
(`Continuations.steps`: every step, undrafted ones as (0, 0)) is given where it is determined
(`specdec.peers.llama_steps`: by the totals, always for 2 + k tokens at k = 2; for the n-gram
lookup, by its rule replayed on the tokens, which must give the totals), and is None otherwise.

What ran, per row (``provenance["what_ran"]``): the server's command line; every response's
``generation_settings`` checked against the request (samplers, temperature, top-k, top-p, seed,
``speculative.types``: the configuration's drafter) -- a difference is an error row, never tokens;
the samples whose request drafted at all.

Example: with LlamaEngine() as e: e.continue_prompts([[5, 6, 7]], n=4, max_new_tokens=2,
    sampling=Sampling(1.0), spec=Speculation("draft_model", k=2, draft="draft-distilled",
    options=(("draft_sampling", "probabilistic"),)), seed=0).tokens -> 1 prompt x 4 samples x 2 ids
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from specdec.family.loader import embedded_dir
from specdec.family.manifest import read_sums, sha256_file, verify_dir
from specdec.io.paths import BUILD_DIR, MODELS_DIR
from specdec.peers.contract import check_request, config_limits
from specdec.peers.interface import Continuations, Sampling, Speculation, as_int, stream_seed
from specdec.peers.llama_server import LlamaServer, build_info
from specdec.peers.llama_steps import step_records

__all__ = ["LLAMA_METHODS", "DRAFT_SAMPLING", "EXACT_FLAGS", "LlamaEngine", "gguf_file", "server_flags",
           "request_payload", "settings_differ", "answer_tokens", "banned", "CHECKED", "spec_type"]

LLAMA_METHODS = ("none", "draft_model", "ngram")
DRAFT_SAMPLING = ("greedy", "probabilistic")
EXACT_FLAGS = ("-ctk", "f32", "-ctv", "f32", "-fa", "off")
RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: "draw a random seed"


def gguf_file(member: str, root: Path | None = None) -> Path:
    """The float32 GGUF of an embedded family member, written once per checked weights file and
    writer (`specdec.family.gguf.write_embedded`) under ``build/gguf/``, named by both sha256s."""
    name = embedded_dir(member)
    if name is None:
        raise ValueError(f"{member!r} is not a member of the embedded family (llama.cpp runs the embedded pair)")
    verify_dir(MODELS_DIR / name)
    from specdec.family import gguf

    sha = read_sums()[f"{name}/model.safetensors"][:12]
    path = Path(root or BUILD_DIR / "gguf") / f"{name}-{sha}-{sha256_file(Path(gguf.__file__))[:8]}.gguf"
    if not path.exists():
        from specdec.family.gguf import write_embedded

        path.parent.mkdir(parents=True, exist_ok=True)
        write_embedded(member, path)
    return path


def server_flags(spec: Speculation | None, threads: int) -> list[str]:
    """The speculative flags of one configuration (module docstring); [] for plain decoding."""
    if spec is None or spec.method == "none":
        return []
    if spec.method == "ngram":
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1",
                "--spec-ngram-simple-size-m", str(spec.k)]
    drafting = dict(spec.options).get("draft_sampling", "greedy")
    if drafting not in DRAFT_SAMPLING:
        raise ValueError(f"option draft_sampling must be one of {DRAFT_SAMPLING}, got {drafting!r}")
    return ["-ctkd", "f32", "-ctvd", "f32", "-td", str(threads), "--spec-type", "draft-simple",
            "--spec-draft-sampling", drafting, "--spec-draft-n-max", str(spec.k), "--spec-draft-p-min", "0"]


def spec_type(spec: Speculation | None) -> str | None:
    """The drafter llama-server must echo in ``speculative.types`` for a configuration; None for plain."""
    if spec is None or spec.method == "none":
        return None
    return "ngram-simple" if spec.method == "ngram" else "draft-simple"


def request_payload(prompt: list[int], n_predict: int, sampling: Sampling, seed: int) -> dict:
    """One /completion request with every sampling rule pinned (module docstring)."""
    samplers = ["temperature"] + (["top_k"] if sampling.top_k else []) + \
        (["top_p"] if sampling.top_p is not None and sampling.top_p < 1 else [])
    seed = int(seed) & 0xFFFFFFFF
    return {"prompt": list(map(int, prompt)), "n_predict": int(n_predict), "seed": seed if seed != RANDOM_SEED else 0,
            "temperature": float(sampling.temperature), "samplers": samplers, "top_k": int(sampling.top_k or 0),
            "top_p": float(sampling.top_p if sampling.top_p is not None else 1.0), "min_p": 0.0,
            "typical_p": 1.0, "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "dry_multiplier": 0.0, "xtc_probability": 0.0, "mirostat": 0, "n_probs": 0, "dynatemp_range": 0.0,
            "dynatemp_exponent": 1.0, "min_keep": 0, "logit_bias": [], "grammar": "",
            "ignore_eos": True, "cache_prompt": True, "return_tokens": True, "stream": False}


CHECKED = ("samplers", "temperature", "top_k", "top_p", "min_p", "seed", "ignore_eos", "dynatemp_range", "min_keep")


def answer_tokens(payload: dict, answer: dict, drafted: str | None) -> tuple[list[int], str | None]:
    """(the first ``n_predict`` token ids of one /completion answer, None), or ([], why) when the
    server did not run as asked: a pinned setting it does not echo (`settings_differ`) or fewer
    tokens than asked.  ``drafted``: the drafter the server must run (`spec_type`), None for plain."""
    n = payload["n_predict"]
    wrong = settings_differ(payload, answer.get("generation_settings", {}), drafted=drafted)
    got = answer.get("tokens") or []
    if wrong or len(got) < n:
        return [], "; ".join(wrong) or f"{len(got)} tokens returned, {n} asked"
    return [int(t) for t in got[:n]], None


def banned(settings: dict) -> list[int]:
    """The token ids a response's echoed ``logit_bias`` bans: with ``ignore_eos`` (and no bias sent)
    llama-server lists there every end-of-generation token of its vocabulary, bias -inf (JSON null).
    A finite bias is a rule this project did not ask for: ValueError naming it."""
    out = []
    for entry in settings.get("logit_bias") or []:
        bias = entry.get("bias") if isinstance(entry, dict) else None
        if bias is not None and bias != float("-inf"):
            raise ValueError(f"llama-server applied a logit bias {entry!r} that was not asked for")
        out.append(int(entry["token"]))
    return sorted(set(out))


def settings_differ(payload: dict, settings: dict, drafted: str | None) -> list[str]:
    """The pinned settings a response's ``generation_settings`` does not echo as sent (floats to
    float32 rounding), and a missing drafter ``drafted`` (`spec_type`) where the server should draft."""
    out = []
    for key in CHECKED:
        got, want = settings.get(key), payload[key]
        same = abs(float(got) - float(want)) < 1e-6 if isinstance(want, float) and got is not None else got == want
        if not same:
            out.append(f"{key}: sent {want!r}, ran {got!r}")
    if drafted and drafted not in str(settings.get("speculative.types", "")).split(","):
        out.append(f"speculative.types: {settings.get('speculative.types')!r} has no {drafted}")
    return out


@dataclass
class LlamaEngine:
    """llama-server behind the Engine interface (module docstring)."""
    threads: int = 1
    target: str = "target"
    startup_timeout_s: float = 120.0
    request_timeout_s: float = 120.0
    parallel: int = 1  # requests in flight per prompt, each in a server slot of its own (module docstring)
    name: str = "llama.cpp"
    _servers: dict = field(default_factory=dict, repr=False)
    _limits: tuple | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.parallel = as_int("parallel (llama-server's slots)", self.parallel, low=1)

    def limits(self) -> tuple[int, int | None]:
        """(vocabulary size, context) of the target, from its config, read once
        (`specdec.peers.contract.config_limits`)."""
        if self._limits is None:
            import json

            self._limits = config_limits(json.loads((MODELS_DIR / embedded_dir(self.target) / "config.json").read_text()))
        return self._limits

    def server(self, spec: Speculation | None) -> LlamaServer:
        """The running server of one configuration (None: plain decoding), started on first use and
        kept until `close`; its flags are checked before any file is written or process started."""
        key = None if spec is None or spec.method == "none" else (spec.method, spec.draft, spec.k, spec.options)
        if key not in self._servers:
            flags = [*EXACT_FLAGS, *server_flags(spec, self.threads)]  # a bad option raises before any file or process
            server = LlamaServer(threads=self.threads, parallel=self.parallel, startup_timeout_s=self.startup_timeout_s,
                                 request_timeout_s=self.request_timeout_s)
            draft = gguf_file(spec.draft) if key is not None and spec.method == "draft_model" else None
            server.start(gguf_file(self.target), draft=draft, extra_args=flags)
            self._servers[key] = server
        return self._servers[key]

    def continue_prompts(self, prompts: list[list[int]], n: int, max_new_tokens: int,
                         sampling: Sampling, spec: Speculation | None, seed: int) -> Continuations:
        vocab, context = self.limits()
        prompts, n, max_new_tokens, seed, method, options = check_request(
            prompts, n, max_new_tokens, sampling, spec, seed, vocab_size=vocab, context=context,
            methods=LLAMA_METHODS, drafted=("draft_model",), options={"draft_model": ("draft_sampling",)})
        k = spec.k if method != "none" else 0
        start = time.perf_counter()
        server = self.server(spec if method != "none" else None)
        tokens, steps = [], []
        counters = {"num_requests": 0, "num_drafted_requests": 0, "draft_n": 0, "draft_n_accepted": 0}

        def ask(prompt: list[int], i: int, j: int) -> tuple[dict, dict]:
            payload = request_payload(prompt, max_new_tokens, sampling, stream_seed(seed, i, j))
            return payload, server.post("/completion", payload)

        slots = set()  # the server slots that answered (the law stages' evidence that requests ran together)
        pool = ThreadPoolExecutor(max_workers=self.parallel) if self.parallel > 1 else None
        try:  # one prompt's samples in flight together; an error or a refusal cancels what was not yet sent
            for i, prompt in enumerate(prompts):
                rows, records = [], []
                if pool is None:  # one slot: each request in turn, no thread hand-off inside a timed call
                    answers = (ask(prompt, i, j) for j in range(n))
                else:
                    answers = (f.result() for f in [pool.submit(ask, prompt, i, j) for j in range(n)])
                for payload, answer in answers:
                    got, why = answer_tokens(payload, answer, drafted=spec_type(spec if k else None))
                    if why:
                        return Continuations([], counters, self._provenance(
                            server, method, k, options, sampling, n, seed, start),
                            f"llama-server did not run as asked: {why}")
                    rows.append(got)
                    slots.add(answer.get("id_slot"))
                    timing = answer.get("timings", {})
                    dn, da = int(timing.get("draft_n", 0)), int(timing.get("draft_n_accepted", 0))
                    counters["num_requests"] += 1
                    counters["num_drafted_requests"] += dn > 0
                    counters["draft_n"] += dn
                    counters["draft_n_accepted"] += da
                    records.append(step_records(method, prompt, got, dn, da, k, max_new_tokens) if k else [])
                tokens.append(rows)
                steps.append(records)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        provenance = self._provenance(server, method, k, options, sampling, n, seed, start)
        provenance["what_ran"] = {"command": server.provenance.get("command", ""), "settings_checked": list(CHECKED),
                                  "requests_drafted": counters["num_drafted_requests"], "slots_used": len(slots),
                                  "requests": counters["num_requests"]}
        return Continuations(tokens, counters, provenance, steps=steps if method != "none" else None)

    def forward_times(self, ns, *, context: list[int], extra: list[int], repeats: int) -> dict:
        """{n: [milliseconds, ...]}: the plain server's own time (``timings.prompt_ms``) to evaluate n
        tokens appended to the cached ``context``, ``repeats`` times each, the n interleaved.  A request
        is ``context`` plus n tokens of ``extra``, taken from its start and from its second token in
        turn (they differ), so the server's prompt cache holds exactly the context and it evaluates
        the n new tokens -- checked against its ``prompt_n`` (a mismatch raises naming both).  The
        first request caches the context and is not kept."""
        ns = [int(n) for n in ns]
        if not ns or min(ns) < 1 or max(ns) >= len(extra) or repeats < 1 or not context or extra[0] == extra[1]:
            raise ValueError(f"forward_times needs n >= 1 below the {len(extra)} extra tokens (whose first two "
                             f"differ), repeats >= 1 and a context; got ns {ns}, repeats {repeats}, "
                             f"context of {len(context)}")
        server, greedy = self.server(None), Sampling(0.0)
        server.post("/completion", request_payload(list(context), 1, greedy, 0))
        out: dict = {n: [] for n in ns}
        turn = 0
        for _ in range(repeats):
            for n in ns:
                turn ^= 1
                tail = list(extra[turn:turn + n])
                timing = server.post("/completion", request_payload(list(context) + tail, 1, greedy, 0))["timings"]
                if int(timing.get("prompt_n", -1)) != n:
                    raise RuntimeError(f"llama-server evaluated {timing.get('prompt_n')} prompt tokens where {n} "
                                       f"were new: its prompt cache did not hold the context")
                out[n].append(float(timing["prompt_ms"]))
        return out

    def _provenance(self, server, method, k, options, sampling, n, seed, start) -> dict:
        return {"engine": self.name, "method": method, "k": k, "options": dict(options), "sampling": vars(sampling),
                "n": n, "seed": seed, "threads": self.threads, "parallel": self.parallel, "command": server.provenance.get("command", ""),
                "build": build_info(), "wall_s": time.perf_counter() - start}

    def close(self) -> None:
        """Stop every server this engine started (idempotent)."""
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()

    def __enter__(self) -> "LlamaEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
