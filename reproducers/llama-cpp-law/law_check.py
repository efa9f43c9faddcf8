"""Does llama.cpp's speculative decoding (draft-simple, ngram-simple) sample from the target's law?

    python -I law_check.py --server PATH/llama-server [--mode {probabilistic,greedy,ngram,plain}]
                           [--n 2000] [--temperature 1] [--seed 1] [--sample-seed 0] [--planted]

Contract: needs torch, transformers, numpy, gguf, httpx and a llama-server binary, nothing else.
Prints one JSON line; exit status 0 whenever the run finished, whatever the decision, 1 (reason on
stderr) when something could not run, 2 for bad arguments.  Seeded: a rerun with the same build,
machine and flags draws the same samples.

Models.  Random-weight GPT-2s (vocabulary 256, 64 positions, width 64, 2 layers, 2 heads,
"gelu_new"): a target (seed ``--seed``) whose final layer norm is scaled by LOGIT_SCALE and given a
random bias (random init alone gives nearly uniform laws), and a draft equal to it plus noise
(related, so drafts are neither always nor never accepted).  Written as float32 GGUF with the
mapping of llama.cpp's convert_hf_to_gguf.py (GPT2Model); a byte-level "gpt2" vocabulary with one
merge (llama.cpp refuses a "gpt2" vocabulary without merges) and end-of-text id 0.

Run.  llama-server on 127.0.0.1 (one thread, float32 KV caches, no flash attention) with ``-md
draft.gguf --spec-type draft-simple --spec-draft-sampling MODE --spec-draft-n-max 2
--spec-draft-p-min 0``, no draft for ``--mode plain``; ``--mode ngram`` drafts by prompt lookup
instead (``--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 2``: the
last token looked up in the context, the tokens after it drafted, verified by sample-and-match).
Request i (of ``--n``) has seed ``--sample-seed`` + i and n_predict 4: the server drafts at most the
tokens left but one, so after x1 it drafts 2 and x2 is the first verified position.  In ngram mode
n_predict is 3: one draft after x1 at most and none later, so a request drafted (``draft_n`` > 0)
exactly when x2 went through a drafted verification; and a lookup drafts only when x1 occurs at
prompt positions 1 .. len - 2 (`lookup_positions`), so the default prompt there is built from the
target (`lookup_prompt`: its likely x1 tokens there), and P(x1 at those positions) is printed
beside the count of samples whose x2 was drafted.  Samplers ["temperature"] only (llama.cpp's
default order applies top-p before the temperature), top-k 0, top-p 1, min-p 0, ignore_eos; each
response must echo samplers and temperature.  ``samples_sha256`` digests the pairs (greedy drafts
are verified by sample-and-match on the target's own sampler: plain decoding's tokens).

The exact law.  ignore_eos makes llama.cpp add logit bias -inf to every end-of-generation token (id
0 here), so the law in force is softmax(logits / T) without token 0, renormalised, at both
positions: p1 at the prompt, p2(. | x1) for every x1 in one batched forward, float64 from the
softmax on.  Correct speculative decoding samples (x1, x2) from p1(x1) p2(x2 | x1).

Test.  Bins from the exact law only: x1 in 2 groups by p1 mass (descending p1, a token joins the
half of cumulative mass it starts in); within each x1, x2 by descending p2 into 4 windows of
conditional mass, pooled over the group: 8 bins, one expected below 5 samples merged into its
neighbour.  G = 2 sum O ln(O / E) against chi-square(B - 1): "consistent" when p >= 0.01, else
"rejected" (a sample of probability 0 gives p = 0).  ``--planted``, a negative control, also tests
the same samples against a wrong law (the target at PLANTED_FACTOR times the temperature, its own
bins), which must be rejected, with that comparison's Monte Carlo power at this n.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import gguf
    import httpx
    import numpy as np
    import torch
    import transformers
except ImportError as exc:   # a clear message, not a traceback
    sys.exit(f"law_check needs torch, transformers, numpy, gguf and httpx: {exc}")

VOCAB, POSITIONS, WIDTH, LAYERS, HEADS = 256, 64, 64, 2, 2
LOGIT_SCALE = 8.0      # final layer norm times this: spread laws, neither uniform nor one-hot
DRAFT_NOISE = 0.5      # draft = target + DRAFT_NOISE * (noise at each weight's own spread)
K, N_PREDICT, EOS = 2, 4, 0   # drafts a step; tokens a request (x2 verified needs 2 + K); banned id
N_PREDICT_NGRAM, LOOKUP_LEN = 3, 24   # ngram mode: x2 the only drafted position; its prompt's length
X1_GROUPS, X2_WINDOWS, MIN_EXPECTED, ALPHA = 2, 4, 5.0, 0.01
PLANTED_FACTOR = 1.3   # the wrong law of --planted: the target at 1.3 times the temperature
CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")   # (in, out) in HF: transposed
GGUF_NAMES = {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm", "ln_1": "attn_norm",
              "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
              "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}


def byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode map, by byte value: 256 distinct printable one-character strings."""
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def build_models(seed: int):
    """(target, draft) GPT2LMHeadModels in eval mode, as the module docstring says."""
    transformers.logging.set_verbosity_error()

    def fresh(s):
        torch.manual_seed(s)
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=WIDTH, n_layer=LAYERS,
                                      n_head=HEADS, activation_function="gelu_new", bos_token_id=EOS,
                                      eos_token_id=EOS, tie_word_embeddings=True)
        return transformers.GPT2LMHeadModel(cfg).eval()

    target, noise, draft = fresh(seed), fresh(seed + 1), fresh(seed)
    with torch.no_grad():
        target.transformer.ln_f.weight.mul_(LOGIT_SCALE)
        bias = torch.Generator().manual_seed(seed + 2)
        target.transformer.ln_f.bias.normal_(0.0, 0.02 * LOGIT_SCALE, generator=bias)
        draft.load_state_dict(target.state_dict())
        extra = dict(noise.named_parameters())
        for name, b in draft.named_parameters():   # constant tensors (fresh norms, zero biases) stay
            n = extra[name]
            if b.numel() > 1 and b.std() > 0 and n.std() > 0:
                b.add_(DRAFT_NOISE * (n - n.mean()) * (b.std() / n.std()))
    return target, draft


def write_gguf(model, path: str) -> None:
    """`model` as a float32 GGUF that llama.cpp loads as architecture gpt2 (the tied lm_head left out,
    llama.cpp reuses token_embd)."""
    cfg, chars = model.config, byte_chars()
    w = gguf.GGUFWriter(path, "gpt2")
    for add, value in ((w.add_name, "law-check"), (w.add_block_count, cfg.n_layer),
                       (w.add_context_length, cfg.n_positions), (w.add_embedding_length, cfg.n_embd),
                       (w.add_feed_forward_length, 4 * cfg.n_embd), (w.add_head_count, cfg.n_head),
                       (w.add_layer_norm_eps, cfg.layer_norm_epsilon), (w.add_file_type, gguf.LlamaFileType.ALL_F32),
                       (w.add_tokenizer_model, "gpt2"), (w.add_tokenizer_pre, "gpt-2"), (w.add_token_list, chars),
                       (w.add_token_types, [int(gguf.TokenType.NORMAL)] * VOCAB),
                       (w.add_token_merges, [f"{chars[ord(' ')]} {chars[ord('t')]}"]),   # "Ġ t"
                       (w.add_bos_token_id, EOS), (w.add_eos_token_id, EOS), (w.add_add_bos_token, False)):
        add(value)
    for key, value in model.state_dict().items():
        if not key.startswith("transformer.") or key.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        parts = key[len("transformer."):].split(".")          # e.g. h 0 attn c_attn weight
        block, parts = (f"blk.{parts[1]}.", parts[2:]) if parts[0] == "h" else ("", parts)
        stem, suffix = ".".join(parts[:-1]), parts[-1]
        array = value.detach().float().numpy()
        array = array.T if stem in CONV1D and suffix == "weight" else array
        w.add_tensor(f"{block}{GGUF_NAMES[stem]}.{suffix}", np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def exact_law(target, prompt: list[int], temperature: float):
    """(p1 (V,), p2 (V, V) with p2[x1, x2]): float64 laws at `temperature`, token EOS removed."""
    with torch.no_grad():
        ids = torch.tensor([prompt])
        both = torch.cat([ids.repeat(VOCAB, 1), torch.arange(VOCAB)[:, None]], 1)          # (V, len + 1)
        logits = torch.cat([target(ids).logits[:, -1], target(both).logits[:, -1]]).double()  # (1 + V, V)
    logits[:, EOS] = -float("inf")
    laws = (logits / temperature).softmax(-1).numpy()
    laws[1 + EOS] = 0.0   # x1 = EOS never happens: no law after it
    return laws[0], laws[1:]


def lookup_positions(prompt: list[int]) -> list[int]:
    """The prompt tokens a lookup of x1 can match: llama.cpp's ngram-simple searches the context it
    is given -- the prompt, x1 not yet in it -- from its second-to-last position down to position 1,
    so neither the first nor the last prompt token is ever matched."""
    return sorted(set(prompt[1:-1]))


def lookup_prompt(target, temperature: float, rounds: int = 20) -> list[int]:
    """A prompt of LOOKUP_LEN tokens holding the target's likely first tokens where a lookup can find
    them (`lookup_positions`): starting from 1, 2, ..., each round puts the current prompt's most
    likely x1 tokens (EOS excluded) at positions 1 .. LOOKUP_LEN - 2, the likeliest nearest the end,
    and repeats the likeliest in the last slot (never matched, but it shapes the law of x1); the
    prompt with the largest P(x1 in lookup_positions) of the rounds is kept."""
    prompt, best, best_share = list(range(1, LOOKUP_LEN + 1)), None, -1.0
    for _ in range(rounds):
        p1, _ = exact_law(target, prompt, temperature)
        share = float(p1[lookup_positions(prompt)].sum())
        if share > best_share:
            best, best_share = list(prompt), share
        top = [int(t) for t in np.argsort(-p1, kind="stable") if t != EOS][:LOOKUP_LEN - 2]
        prompt = [1] + top[::-1] + [top[0]]
    return best


def make_bins(p1, p2, n: int):
    """(labels (V, V): bin of each cell (x1, x2), -1 where the law is 0; probs (B,)), as documented."""

    def start(p):   # cumulative mass before each entry, entries in descending order along the last axis
        order = np.argsort(-p, axis=-1, kind="stable")
        srt = np.take_along_axis(p, order, -1)
        out = np.empty_like(p)
        np.put_along_axis(out, order, np.cumsum(srt, -1) - srt, -1)
        return out

    group = np.minimum((start(p1) * X1_GROUPS).astype(int), X1_GROUPS - 1)          # (V,)
    window = np.minimum((start(p2) * X2_WINDOWS).astype(int), X2_WINDOWS - 1)       # (V, V)
    joint = p1[:, None] * p2
    raw = np.where(joint > 0, group[:, None] * X2_WINDOWS + window, -1)
    mass = np.bincount(raw[raw >= 0], weights=joint[raw >= 0], minlength=X1_GROUPS * X2_WINDOWS)
    new, sums = np.full(mass.size, -1), []
    for b in np.flatnonzero(mass > 0):   # a light bin joins the one before it (a light first, the next)
        if sums and (mass[b] * n < MIN_EXPECTED or (len(sums) == 1 and sums[0] * n < MIN_EXPECTED)):
            sums[-1] += mass[b]
        else:
            sums.append(mass[b])
        new[b] = len(sums) - 1
    labels = np.where(raw >= 0, new[np.maximum(raw, 0)], -1)
    return labels, np.bincount(labels[labels >= 0], weights=joint[labels >= 0], minlength=len(sums))


def g_test(counts, probs) -> tuple[float, float]:
    """(G, p-value): G = 2 sum O ln(O / E), p = P(chi-square(B - 1) > G) = Q((B - 1) / 2, G / 2)."""
    seen = counts > 0
    g = 2.0 * float((counts[seen] * np.log(counts[seen] / (probs[seen] * counts.sum()))).sum())
    df = torch.tensor((probs.size - 1) / 2.0, dtype=torch.float64)
    return g, 1.0 if g <= 0 else float(torch.special.gammaincc(df, torch.tensor(g / 2.0, dtype=torch.float64)))


def law_test(pairs, p1, p2, truth=None) -> dict:
    """The G-test of the samples against the law p1 p2; with `truth` = (p1, p2) of the law the samples
    really follow, also the Monte Carlo power of this comparison at this n."""
    n = len(pairs)
    labels, probs = make_bins(p1, p2, n)
    x1, x2 = np.array(pairs).T
    cell = labels[x1, x2]
    counts = np.bincount(cell[cell >= 0], minlength=probs.size).astype(float)
    g, p = g_test(counts, probs)
    p = 0.0 if (cell < 0).any() else p
    out = {"bins": int(probs.size), "g": round(g, 3), "df": int(probs.size - 1), "p_value": p,
           "decision": "consistent" if p >= ALPHA else "rejected", "impossible": int((cell < 0).sum()),
           "binned_tv": round(0.5 * float(np.abs(counts / n - probs).sum()), 4)}
    if truth is not None:
        joint = truth[0][:, None] * truth[1]
        real = np.bincount(labels[labels >= 0], weights=joint[labels >= 0], minlength=probs.size)
        draws = np.random.default_rng(0).multinomial(n, real / real.sum(), size=2000).astype(float)
        out["power"] = float(np.mean([g_test(d, probs)[1] < ALPHA for d in draws]))
    return out


def start_server(args, folder: str):
    """(process, base URL): llama-server in a process group of its own, healthy within
    --startup-timeout; otherwise it is stopped and RuntimeError says why, with the log's tail."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    cmd = [args.server, "-m", os.path.join(folder, "target.gguf"), "--host", "127.0.0.1", "--port",
           url.rsplit(":", 1)[1], "-t", "1", "-tb", "1", "-c", str(POSITIONS), "-np", "1", "--no-webui",
           "-ctk", "f32", "-ctv", "f32", "-fa", "off"]
    if args.mode == "ngram":
        cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", str(K)]
    elif args.mode != "plain":
        cmd += ["-md", os.path.join(folder, "draft.gguf"), "-td", "1", "-ctkd", "f32", "-ctvd", "f32",
                "--spec-type", "draft-simple", "--spec-draft-sampling", args.mode,
                "--spec-draft-n-max", str(K), "--spec-draft-p-min", "0"]
    log = os.path.join(folder, "server.log")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + args.startup_timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    why = f"exited with status {proc.returncode}" if proc.poll() is not None else \
        f"was not healthy after {args.startup_timeout:g} s"
    stop_server(proc)
    with open(log, errors="replace") as f:
        raise RuntimeError(f"llama-server {why}; its log ends: " + " | ".join(f.read().strip().split("\n")[-6:]))


def stop_server(proc) -> None:
    """SIGTERM the process group, SIGKILL it after 10 s, reap the process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            pass


def server_version(server: str) -> str:
    """``server --version``, one line (its own process group: a hanging binary is killed after 20 s)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([server, "--version"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=20)
        finally:
            stop_server(proc)
        out.seek(0)
        return " ".join(out.read().split())


def sample(args, url: str) -> dict:
    """{"pairs": [(x1, x2)], "drafted": responses with drafts, "draft_n", "draft_n_accepted", "seconds"}."""
    out = {"pairs": [], "drafted": 0, "draft_n": 0, "draft_n_accepted": 0}
    start = time.perf_counter()
    with httpx.Client(base_url=url, timeout=args.request_timeout) as client:   # one kept-alive connection
        for i in range(args.n):
            n_predict = N_PREDICT_NGRAM if args.mode == "ngram" else N_PREDICT
            body = {"prompt": args.prompt, "n_predict": n_predict, "temperature": args.temperature,
                    "samplers": ["temperature"], "top_k": 0, "top_p": 1.0, "min_p": 0.0, "ignore_eos": True,
                    "cache_prompt": True, "return_tokens": True, "seed": args.sample_seed + i, "stream": False}
            answer = client.post("/completion", json=body).raise_for_status().json()
            ran = answer.get("generation_settings", {})
            if ran.get("samplers") != ["temperature"] or abs(ran.get("temperature", -1) - args.temperature) > 1e-6:
                raise RuntimeError(f"llama-server ran other settings than sent: samplers {ran.get('samplers')}, "
                                   f"temperature {ran.get('temperature')}")
            tokens, timings = answer.get("tokens") or [], answer.get("timings", {})
            if len(tokens) < 2:
                raise RuntimeError(f"llama-server returned {len(tokens)} tokens, {n_predict} asked")
            out["pairs"].append((int(tokens[0]), int(tokens[1])))
            out["drafted"] += int(timings.get("draft_n", 0)) > 0
            out["draft_n"] += int(timings.get("draft_n", 0))
            out["draft_n_accepted"] += int(timings.get("draft_n_accepted", 0))
    return {**out, "seconds": time.perf_counter() - start}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="path of the llama-server binary")
    parser.add_argument("--mode", choices=("probabilistic", "greedy", "ngram", "plain"), default="probabilistic",
                        help="--spec-draft-sampling of the draft, prompt lookup (ngram), or plain decoding")
    parser.add_argument("--n", type=int, default=2000, help="samples (requests), default 2000")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1, help="the target's weights (the draft's noise: + 1)")
    parser.add_argument("--sample-seed", type=int, default=0, help="request i has seed SAMPLE_SEED + i")
    parser.add_argument("--prompt", type=lambda s: [int(t) for t in s.split(",")], default=None,
                        help="token ids, comma-separated (default 1,2,3,4; ngram mode: built by lookup_prompt)")
    parser.add_argument("--planted", action="store_true", help="also test a wrong law (must be rejected)")
    parser.add_argument("--startup-timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--request-timeout", type=float, default=30.0, help="seconds (default 30)")
    args = parser.parse_args(argv)
    if args.n < 50 or not args.temperature > 0 or not 0 <= args.sample_seed < 2**32 - 1 - args.n:
        parser.error("need --n >= 50, --temperature > 0 and 0 <= --sample-seed < 2**32 - 1 - n")
    if args.prompt is not None and (not args.prompt or not all(0 < t < VOCAB for t in args.prompt)
                                    or len(args.prompt) + N_PREDICT > POSITIONS):
        parser.error(f"--prompt: at most {POSITIONS - N_PREDICT} token ids in [1, {VOCAB})")
    if not (os.path.isfile(args.server) and os.access(args.server, os.X_OK)):
        parser.error(f"--server {args.server!r} is not an executable file")
    try:
        version = server_version(args.server)
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory(prefix="llama_law_") as folder:
            target, draft = build_models(args.seed)
            if args.prompt is None:
                args.prompt = lookup_prompt(target, args.temperature) if args.mode == "ngram" else [1, 2, 3, 4]
            write_gguf(target, os.path.join(folder, "target.gguf"))
            write_gguf(draft, os.path.join(folder, "draft.gguf"))
            p1, p2 = exact_law(target, args.prompt, args.temperature)
            proc, url = start_server(args, folder)
            try:
                run = sample(args, url)
            finally:
                stop_server(proc)
        if args.mode != "plain" and run["drafted"] == 0:
            raise RuntimeError("no request drafted: the speculative path was not exercised")
        result = {"llama_server": version, "mode": args.mode, "n": args.n,
                  "temperature": args.temperature, "prompt": args.prompt, "seed": args.seed,
                  "sample_seed": args.sample_seed, "samples_with_drafts": run["drafted"],
                  "p_x1_in_prompt": round(float(p1[lookup_positions(args.prompt)].sum()), 4),
                  "draft_n": run["draft_n"], "draft_n_accepted": run["draft_n_accepted"],
                  "samples_per_s": round(args.n / run["seconds"], 1), "max_p1": round(float(p1.max()), 4),
                  "samples_sha256": hashlib.sha256(json.dumps(run["pairs"]).encode()).hexdigest(),
                  **law_test(run["pairs"], p1, p2)}
        if args.planted:
            w1, w2 = exact_law(target, args.prompt, args.temperature * PLANTED_FACTOR)
            result["planted"] = {"temperature": round(args.temperature * PLANTED_FACTOR, 9),
                                 **law_test(run["pairs"], w1, w2, truth=(p1, p2))}
    except Exception as exc:
        print(f"law_check could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
