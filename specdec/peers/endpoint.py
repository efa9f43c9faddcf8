"""A deployment's sampling endpoint put to the law audit (`specdec.audit.deployment`): which server
answers at a URL, and n samples of exactly L tokens per token-id prompt with every sampling rule
pinned, plus the server's own draft counters.

Kinds (`probe`), told apart by what each answers, each with the requests that pin its rules:
  - "specdec" (`specdec.peers.own_server`; ``GET /version`` -> {"server": "specdec"}): ``POST
    /v1/completions`` with n, a seed, top_k and neutral min-p and penalties; it refuses any rule it
    does not run.  Counters: the answer's ``speculative`` field.
  - "vllm" (``GET /version`` -> {"version"} and ``GET /v1/models`` owned_by "vllm"): ``POST
    /v1/completions`` with n samples, ``return_token_ids`` (vLLM's extension) and every rule of its
    sampling defaults pinned -- temperature, top_p, top_k (0 = off), min_p 0, repetition 1,
    presence and frequency 0 (otherwise the model folder's generation_config.json supplies them) --
    and no seed (vLLM's CPU build crashes on a per-request seed: the server's seeded generator draws).
    All prompts are sent at once, so the server batches them.  Counters: ``/metrics``' spec-decode
    totals before and after.
  - "llama.cpp" (``GET /props`` -> {"build_info", ...}): its native ``POST /completion``, one sample
    per request, `specdec.peers.llama.request_payload` (its sampler chain in `Sampling`'s order,
    min-p, penalties, DRY, XTC off, a seed per sample) and each answer's ``generation_settings``
    checked against the request (`specdec.peers.llama.settings_differ`; a difference is an error).
    Its ``ignore_eos`` bans every end-of-generation token of the vocabulary (bias -inf), which each
    answer echoes in ``logit_bias``: ``bans`` lists them (the law in force is the target's without
    them), and any other bias is an error.  Counters: each answer's ``draft_n`` / ``draft_n_accepted``.
Anything else is refused: a server whose defaults for top-k, min-p and penalties are unknown cannot
be held to an exact law.

Errors: `EndpointError` (a ValueError) names the URL and what is wrong -- malformed, unreachable,
an unknown kind, a served model not named as asked, an answer without the tokens asked for.

Example: info = probe("http://127.0.0.1:8000"); sample(info, "target", [[5, 6, 7]], n=4, length=8,
    sampling=Sampling(1.0), seed=0)["tokens"] -> 1 prompt x 4 samples x 8 ids
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import httpx

from specdec.peers.contract import check_prompts, check_seed
from specdec.peers.interface import Sampling, as_int, stream_seed
from specdec.peers.llama import answer_tokens, banned, request_payload
from specdec.peers.openai_client import check_url, reachable, scrape

__all__ = ["KINDS", "EndpointError", "probe", "check_model", "sample", "VLLM_COUNTERS"]

KINDS = ("specdec", "vllm", "llama.cpp")
VLLM_COUNTERS = ("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total")


class EndpointError(ValueError):
    """The endpoint cannot be audited as asked (the message names the URL and why)."""


def _get(client: httpx.Client, url: str, path: str):
    try:
        resp = client.get(url + path)
        return resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def probe(url: str, timeout_s: float = 10.0) -> dict:
    """{"url", "kind", "version", "models"} of the server at ``url`` (module docstring);
    `EndpointError` when it is malformed, does not answer, or is of no kind whose rules can be pinned."""
    try:
        url = check_url(url)
    except (TypeError, ValueError) as exc:
        raise EndpointError(str(exc)) from None
    why = reachable(url, timeout_s)
    if why is not None:
        raise EndpointError(f"{url}: {why}")
    with httpx.Client(timeout=timeout_s) as client:
        version, models, props = (_get(client, url, p) for p in ("/version", "/v1/models", "/props"))
    served = [m.get("id") for m in (models or {}).get("data", []) if isinstance(m, dict)]
    owners = {m.get("owned_by") for m in (models or {}).get("data", []) if isinstance(m, dict)}
    if isinstance(version, dict) and version.get("server") == "specdec":
        kind, ver = "specdec", version
    elif isinstance(version, dict) and "version" in version and "vllm" in owners:
        kind, ver = "vllm", version.get("version")
    elif isinstance(props, dict) and "build_info" in props:
        kind, ver = "llama.cpp", props.get("build_info")
    else:
        raise EndpointError(f"{url}: not a server whose sampling rules this audit can pin (it knows {', '.join(KINDS)}; "
                            f"/version answered {version!r}, /props {'answered' if props else 'did not answer'}): "
                            f"an unknown server's defaults for top-k, min-p and penalties would change the law unseen")
    return {"url": url, "kind": kind, "version": ver, "models": served}


def check_model(info: dict, model: str) -> None:
    """`EndpointError` unless ``info`` is what `probe` returned and the server serves ``model``
    (llama-server serves one model whatever the name)."""
    if not isinstance(info, dict) or info.get("kind") not in KINDS:
        raise EndpointError(f"info must be what probe returned, got {info!r}")
    if info["kind"] != "llama.cpp" and model not in info["models"]:
        raise EndpointError(f"{info['url']} serves {info['models']}, not {model!r}: name the served model")


def _check(info, model, prompts, n, length, sampling, seed, timeout_s):
    check_model(info, model)
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a specdec.peers.Sampling, got {sampling!r}")
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    return check_prompts(prompts), as_int("n", n, low=1), as_int("length", length, low=1), check_seed(seed)


def _openai_body(info, model, prompt, n, length, sampling, seed) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": length, "n": n, "temperature": sampling.temperature,
            "top_p": sampling.top_p if sampling.top_p is not None else 1.0, "top_k": sampling.top_k or 0,
            "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "ignore_eos": True, "stream": False}
    if info["kind"] == "vllm":
        body["return_token_ids"] = True
    else:
        body["seed"] = seed
    return body


def _tokens(info, answer: dict, n: int, length: int) -> list[list[int]]:
    choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
    rows = [c.get("token_ids") for c in choices]
    if len(rows) != n or any(not isinstance(r, list) or len(r) != length for r in rows):
        got = [len(r) if isinstance(r, list) else None for r in rows]
        raise EndpointError(f"{info['url']} answered {len(rows)} samples of {got} token ids where {n} of {length} "
                            f"were asked (a server must return token ids, vLLM's return_token_ids, and must not "
                            f"stop early: a stop token of its own)")
    return [[int(t) for t in r] for r in rows]


def _post(client: httpx.Client, info: dict, path: str, body: dict) -> dict:
    try:
        resp = client.post(info["url"] + path, json=body)
    except httpx.HTTPError as exc:
        raise EndpointError(f"{info['url']}{path}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise EndpointError(f"{info['url']}{path} refused the request (HTTP {resp.status_code}): {resp.text[:300]}")
    try:
        answer = resp.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise EndpointError(f"{info['url']}{path} answered something other than a JSON object: {resp.text[:200]!r}")
    return answer


def _scrape(info: dict) -> dict:
    try:
        return scrape(info["url"])
    except httpx.HTTPError as exc:
        raise EndpointError(f"{info['url']}/metrics: {type(exc).__name__}: {exc}") from None


def sample(info: dict, model: str, prompts, *, n: int, length: int, sampling: Sampling, seed: int,
           timeout_s: float = 300.0) -> dict:
    """{"tokens": prompts x n x length ids, "drafts", "accepted", "bans"} from the endpoint ``info``
    (`probe`) under the pinned rules of its kind (module docstring); ``drafts`` / ``accepted`` the
    server's own counters over these requests, ``bans`` the token ids the server banned."""
    prompts, n, length, seed = _check(info, model, prompts, n, length, sampling, seed, timeout_s)
    kind = info["kind"]
    with httpx.Client(timeout=timeout_s, limits=httpx.Limits(max_connections=len(prompts))) as client:
        if kind == "llama.cpp":
            return _llama(client, info, prompts, n, length, sampling, seed)
        before = _scrape(info) if kind == "vllm" else None
        bodies = [_openai_body(info, model, p, n, length, sampling, stream_seed(seed, i) & 0xFFFFFFFF)
                  for i, p in enumerate(prompts)]
        workers = len(prompts) if kind == "vllm" else 1  # vLLM batches what arrives together; ours serves one at a time
        with ThreadPoolExecutor(max_workers=workers) as pool:
            answers = list(pool.map(lambda b: _post(client, info, "/v1/completions", b), bodies))
    tokens = [_tokens(info, a, n, length) for a in answers]
    if kind == "specdec":
        spec = [a.get("speculative") or {} for a in answers]
        return {"tokens": tokens, "drafts": sum(s.get("drafts", 0) for s in spec),
                "accepted": sum(s.get("accepted", 0) for s in spec), "bans": []}
    after = _scrape(info)
    drafts, accepted = (after.get(c, 0.0) - before.get(c, 0.0) for c in VLLM_COUNTERS)
    return {"tokens": tokens, "drafts": int(drafts), "accepted": int(accepted), "bans": []}


def _llama(client, info, prompts, n, length, sampling, seed) -> dict:
    tokens, drafts, accepted, bans = [], 0, 0, None
    for i, prompt in enumerate(prompts):
        rows = []
        for j in range(n):
            payload = request_payload(prompt, length, sampling, stream_seed(seed, i, j))
            answer = _post(client, info, "/completion", payload)
            got, why = answer_tokens(payload, answer, drafted=None)
            if why:
                raise EndpointError(f"{info['url']} did not run as asked: {why}")
            try:
                ids = banned(answer["generation_settings"])
            except ValueError as exc:
                raise EndpointError(f"{info['url']}: {exc}") from None
            if bans is not None and ids != bans:
                raise EndpointError(f"{info['url']} banned {ids} in one answer and {bans} in another")
            bans = ids
            rows.append(got)
            timing = answer.get("timings", {})
            drafts += int(timing.get("draft_n", 0))
            accepted += int(timing.get("draft_n_accepted", 0))
        tokens.append(rows)
    return {"tokens": tokens, "drafts": drafts, "accepted": accepted, "bans": bans or []}
