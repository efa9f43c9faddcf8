"""One client for any OpenAI-compatible completions endpoint (vLLM, SGLang, a cluster behind one
URL): a seeded workload sent as streaming completions from token ids, every request timed, and the
server's Prometheus metrics read before and after.

`send` (stated before any result):
  * request i is sent at its arrival time (seconds after the run's start, `specdec.measure.serving`'s
    Poisson workload) as ``POST /v1/completions`` with ``prompt`` = its token ids, ``max_tokens``,
    ``temperature``, ``stream``, ``ignore_eos`` and ``return_token_ids`` (vLLM's extension: each
    streamed chunk carries the ids it delivers, so tokens are counted per chunk, not guessed from
    text); no per-request seed (vLLM's CPU build crashes on one);
  * a request with ``cancel_after`` closes its stream once that many tokens have arrived (a client
    disconnect: the server must free its slot);
  * every request has ``timeout_s`` for the whole exchange; one that runs out ends "timeout";
  * outcome: "ok", "cancelled", "rejected" (an HTTP status >= 400, or an error event inside a 200
    stream, ``in_stream`` True: the status or the event's code and the server's message kept),
    "timeout" or "error" (the connection failed or broke, or the stream ended before its
    ``data: [DONE]`` line, as one cut by a dying server can: its message kept).  A stream that ends
    with [DONE] and without a token is "ok" with no tokens: the row shows it, never hides it.
Per request the client records its arrival, the time each chunk arrived and how many tokens it
carried (all relative to the run's start, `time.perf_counter`).

`scrape` reads ``GET /metrics`` with `prometheus_client`'s parser: sample name -> value, label
sets summed (the ones a run needs: running and waiting requests, KV-cache usage, preemptions,
finished requests by reason, the speculative counters).

Example:
    out = send("http://127.0.0.1:8000", "target", [(0.0, [348, 891], 8, None)], temperature=1.0)
    out[0]["outcome"], out[0]["chunk_tokens"]
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor

from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specdec.peers.contract import check_prompts
from specdec.peers.interface import as_int, as_real

__all__ = ["send", "scrape", "post", "endpoint_info", "reachable", "check_url", "OUTCOMES"]

OUTCOMES = ("ok", "cancelled", "rejected", "timeout", "error")


def check_url(url) -> str:
    """``url`` without its trailing slash, refused (ValueError naming it) unless it is an endpoint's
    base URL: http or https, a host, a port in 1..65535 if one is given, no whitespace, no query
    or fragment (the client appends paths such as /v1/completions to it).
    Example: check_url("http://10.0.0.5:8000/") -> "http://10.0.0.5:8000"; check_url("10.0.0.5:8000")
    -> ValueError (no http(s) scheme)."""
    if not isinstance(url, str):
        raise TypeError(f"the endpoint URL must be a str such as 'http://127.0.0.1:8000', got {url!r}")
    rule = "an http(s) base URL such as 'http://127.0.0.1:8000'"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"the endpoint {url!r} is not a URL ({exc}): it must be {rule}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the endpoint {url!r} has no http(s) scheme: it must be {rule}")
    if not parts.hostname:
        raise ValueError(f"the endpoint {url!r} names no host: it must be {rule}")
    if port == 0 or any(c.isspace() for c in url) or parts.query or parts.fragment:
        raise ValueError(f"the endpoint {url!r} is malformed (port 0, whitespace, a query or a fragment): "
                         f"it must be {rule}")
    return url.rstrip("/")


def _check(requests, temperature, timeout_s) -> list:
    """The requests as (arrival_s, prompt ids, max_tokens, cancel_after) of Python values, after the
    checks of `send`'s arguments; refusals name the argument, the value and the rule."""
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    as_real("temperature", temperature, ">= 0", lambda v: v >= 0)
    requests = list(requests)
    if not requests:
        raise ValueError("requests is empty: send needs at least one (arrival_s, prompt ids, max_tokens, "
                         "cancel_after) request")
    for i, r in enumerate(requests):
        if not isinstance(r, (tuple, list)) or len(r) != 4:
            raise ValueError(f"request {i} must be (arrival_s, prompt ids, max_tokens, cancel_after), got {r!r}")
    # ids >= 0 only: the server judges them against its vocabulary
    prompts = check_prompts([r[1] for r in requests], name="the requests' prompts")
    return [(as_real(f"request {i}'s arrival_s", arrival, ">= 0 seconds", lambda v: v >= 0), prompt,
             as_int(f"request {i}'s max_tokens", max_tokens, low=1),
             None if cancel_after is None else as_int(f"request {i}'s cancel_after", cancel_after, low=1))
            for i, ((arrival, _, max_tokens, cancel_after), prompt) in enumerate(zip(requests, prompts))]


async def _one(client: httpx.AsyncClient, url: str, model: str, req, t0: float, temperature: float,
               timeout_s: float) -> dict:
    arrival, prompt, max_tokens, cancel_after = req
    await asyncio.sleep(max(0.0, t0 + arrival - time.perf_counter()))
    row = {"arrival_s": float(arrival), "sent_s": time.perf_counter() - t0, "chunk_s": [], "chunk_tokens": [],
           "tokens": [], "outcome": "ok", "status": None, "message": None, "in_stream": False,
           "max_tokens": max_tokens, "cancel_after": cancel_after}
    body = {"model": model, "prompt": list(prompt), "max_tokens": max_tokens, "temperature": temperature,
            "stream": True, "ignore_eos": True, "return_token_ids": True}

    async def exchange() -> None:
        async with client.stream("POST", url + "/v1/completions", json=body) as resp:
            row["status"] = resp.status_code
            if resp.status_code >= 400:
                text = (await resp.aread()).decode(errors="replace")
                try:
                    text = json.loads(text).get("error", {}).get("message", text)
                except (ValueError, AttributeError):
                    pass
                row.update(outcome="rejected", message=str(text)[:500])
                return
            done = False
            async for line in resp.aiter_lines():
                done = done or line == "data: [DONE]"
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                now = time.perf_counter() - t0
                event = json.loads(line[6:])
                if "error" in event:  # an error sent inside a 200 stream (vLLM does so for a bad token id)
                    err = event["error"] if isinstance(event["error"], dict) else {"message": event["error"]}
                    row.update(outcome="rejected", status=err.get("code") or resp.status_code, in_stream=True,
                               message=str(err.get("message"))[:500])
                    return
                ids = [t for c in event.get("choices", []) for t in (c.get("token_ids") or [])]
                if not ids:
                    continue
                row["chunk_s"].append(now)
                row["chunk_tokens"].append(len(ids))
                row["tokens"] += ids
                if cancel_after is not None and len(row["tokens"]) >= cancel_after:
                    row["outcome"] = "cancelled"
                    return  # leaving the block closes the stream: the client disconnects
            if not done:  # a stream cut by a dying server can end without an error: it is not an answer
                row.update(outcome="error", message="the stream ended before its [DONE] line")

    try:
        await asyncio.wait_for(exchange(), timeout=timeout_s)
    except asyncio.TimeoutError:
        row.update(outcome="timeout", message=f"no complete answer within {timeout_s:g} s")
    except (httpx.HTTPError, ValueError) as exc:
        row.update(outcome="error", message=f"{type(exc).__name__}: {exc}"[:500])
    row["end_s"] = time.perf_counter() - t0
    return row


async def _send(url, model, requests, temperature, timeout_s, max_connections) -> list[dict]:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits) as client:
        t0 = time.perf_counter()
        return list(await asyncio.gather(*(_one(client, url, model, r, t0, temperature, timeout_s)
                                           for r in requests)))


def send(url: str, model: str, requests, *, temperature: float, timeout_s: float = 60.0,
         max_connections: int = 256) -> list[dict]:
    """Every request of ``requests`` ((arrival_s, prompt ids, max_tokens, cancel_after or None))
    streamed as the module docstring says; one row per request, in the given order.

    Refused before anything is sent: a malformed URL (`check_url`), an empty request list, a
    temperature that is not a finite number >= 0, a timeout that is not > 0, and a request whose
    arrival is not >= 0, whose prompt is not a non-empty list of int ids >= 0 (bools refused; the
    server judges the ids against its vocabulary), or whose max_tokens or cancel_after is not an
    int >= 1."""
    url = check_url(url)
    requests = _check(requests, temperature, timeout_s)
    coro = _send(url, model, requests, float(temperature), float(timeout_s), max_connections)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a loop runs here already (a notebook's): its own thread
        return pool.submit(asyncio.run, coro).result()


def post(url: str, body: dict, timeout_s: float = 30.0) -> tuple[int, str]:
    """(HTTP status, the server's message or body) of one non-streaming ``POST /v1/completions``:
    how a malformed request is put to the server."""
    resp = httpx.post(check_url(url) + "/v1/completions", json=body, timeout=timeout_s)
    try:
        message = resp.json().get("error", {}).get("message") or resp.text
    except ValueError:
        message = resp.text
    return resp.status_code, str(message)[:500]


def scrape(url: str, timeout_s: float = 10.0) -> dict:
    """Sample name -> value from ``GET /metrics`` (module docstring), label sets summed, plus
    ``name{reason}`` keys by finished reason and ``name{i}`` keys by draft position."""
    text = httpx.get(check_url(url) + "/metrics", timeout=timeout_s).text
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
            for label in ("finished_reason", "position"):  # by reason, by draft position
                if label in s.labels:
                    key = f"{s.name}{{{s.labels[label]}}}"
                    out[key] = out.get(key, 0.0) + float(s.value)
    return out


def endpoint_info(url: str, timeout_s: float = 10.0) -> dict:
    """What the server says it is (``GET /version`` and ``GET /v1/models`` where it answers them;
    otherwise the status or the error), for a table's provenance."""
    base = check_url(url)
    out = {"url": url}
    for path in ("/version", "/v1/models"):
        try:
            resp = httpx.get(base + path, timeout=timeout_s)
            out[path] = resp.json() if resp.status_code == 200 else f"HTTP {resp.status_code}"
        except (httpx.HTTPError, ValueError) as exc:
            out[path] = f"{type(exc).__name__}: {exc}"
    return out


def reachable(url: str, timeout_s: float = 10.0) -> str | None:
    """None when ``GET /v1/models`` answers 200; otherwise why not, for an error message: the
    endpoint refused the connection (nothing listens there), could not be reached, did not answer
    in time, or answered with an HTTP error.  A malformed URL raises (`check_url`).
    Example: reachable("http://127.0.0.1:9") -> "the endpoint refused the connection (nothing
    listens at 127.0.0.1:9)"."""
    base = check_url(url)
    try:
        httpx.get(base + "/v1/models", timeout=timeout_s).raise_for_status()
    except httpx.ConnectError as exc:
        if _refused(exc):
            parts = urlsplit(base)
            where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
            return f"the endpoint refused the connection (nothing listens at {where})"
        return f"cannot connect to the endpoint ({exc})"
    except httpx.TimeoutException:
        return f"the endpoint did not answer within {timeout_s:g} s"
    except httpx.HTTPStatusError as exc:
        return f"the endpoint answered HTTP {exc.response.status_code}"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _refused(exc: BaseException) -> bool:
    """Whether a connection error comes from a refused connection (httpx wraps the OS's error)."""
    while exc is not None:
        if isinstance(exc, ConnectionRefusedError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
