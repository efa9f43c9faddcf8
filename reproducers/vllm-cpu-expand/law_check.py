"""Does vLLM's sampled speculative decoding on CPU follow the target's law?  (vllm-project/vllm#55005)

    python law_check.py [--patched] [--n N] [--temperature T] [--top-p P]
                        [--draft-sample {probabilistic,greedy}] [--json RESULT.json]

What it does.  Builds two random-weight GPT-2 models with `transformers.GPT2Config` (no download, no
tokenizer): a target (seed ``--model-seed``) and a draft equal to the target plus noise of the same
size as each weight, drawn from a second seed (so the draft is related to the target, and
acceptance is neither near 0 nor near 1).  Vocabulary 64, one layer, width 32, one attention head
(head size 32: vLLM's CPU attention has no kernel for head size 16), untied output layer scaled by
20 so the next-token laws are spread but not uniform (about 2 nats of entropy out of ln 64 = 4.16;
printed).  It saves them to a temporary folder and runs `vllm.LLM` on the target twice, one engine
after the other in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``):

  - control: plain decoding;
  - speculative: ``speculative_config={"method": "draft_model", "num_speculative_tokens": 2,
    "draft_sample_method": "probabilistic"}`` (``--draft-sample greedy`` for vLLM's default argmax
    drafts),

each drawing ``--n`` samples of two tokens (x1, x2) from one token-id prompt at temperature
``--temperature`` and top-p ``--top-p`` (top-k off), with one engine-level seed ``--seed`` (no
per-request seeds).  x1 comes from the prefill, sampled by vLLM's ordinary sampler; the draft then
proposes after x1 and x2 is the first verified position: the accepted draft token or the recovered
one.  With ``--patched`` the script first replaces `vllm.v1.sample.rejection_sampler.
expand_batch_to_tokens` by a dtype-preserving expansion of its own (`expand_batch_to_tokens_fixed`,
written from the Triton kernel's semantics), which is what #55006 restores.

The exact law.  With transformers (float32 forward, float64 softmax) it computes the target's law
p1 of x1 after the prompt and, for every x1 of the vocabulary, the law p2(. | x1) of x2, at the same
temperature and with vLLM's top-p rule (sort ascending, drop the tokens whose cumulative mass is
<= 1 - top_p, keep the most likely one).  Correct speculative decoding samples (x1, x2) from
p1(x1) p2(x2 | x1), exactly as plain decoding does.

Bins (fixed by the exact law before any sample is seen).  x1 is cut into G = 4 groups of about
equal p1 mass (tokens in descending p1; a token goes to the quarter of cumulative mass it starts
in).  Within each x1, x2's tokens are ordered by descending p2 and a cell goes to the window of 1/H
of cumulative conditional mass it starts in (a probability integral transform, pooled over the x1
of a group: a law sharpened or flattened at the verified position moves mass between windows after
every x1, and the moves add up).  B = G H with H = 8 (32 bins), H lowered until N / B >= 10;
a bin whose expected count is below 5 joins its neighbour (the one before it, the first bin the one
after), so every bin has expected count >= 5.  Cells of target probability 0 (outside top-p) are in
no bin: a sample there is impossible under the target and gives p = 0.

Test.  G-test, G = 2 sum_b O_b ln(O_b / E_b) with E_b = P_b times the number of possible samples,
against chi-square with B - 1 degrees of freedom; the chi-square tail is the regularized upper
incomplete gamma function Q(df / 2, G / 2), `torch.special.gammaincc` in float64 (scipy is not in
vLLM's environment).  Decision at level ``--alpha`` (0.01): "CONSISTENT with the target law at
level 0.01" when p >= alpha, else "INCONSISTENT ...".  The binned TV printed is
1/2 sum_b |O_b / N - P_b| plus half the fraction of impossible samples.

Power.  If the sampled law is at total variation >= eps from the target's on the bins, Pearson's
noncentrality N sum_b (Q_b - P_b)^2 / P_b is >= N (sum_b |Q_b - P_b|)^2 = 4 N eps^2 (Cauchy-Schwarz,
sum_b P_b = 1), so the test's power is at least P(noncentral chi-square(B - 1, 4 N eps^2) > the
level-alpha critical value of chi-square(B - 1)), asymptotically (G and Pearson's X^2 have the same
limit under local alternatives); the noncentral tail is computed as a Poisson(2 N eps^2) mixture of
central chi-square tails, and printed for the sizes run.  The bins are a deterministic function of
the models, prompt, temperature, top-p and N: at the defaults (N = 2000, T = 1, top-p 1) the merge
leaves B = 21 bins and, at level 0.01, the worst-case power is 1.00 at binned TV 0.1, 0.98 at
0.075 and 0.56 at 0.05; at N = 600 (the test suite's size) 0.69 at binned TV 0.1; at T = 0.7,
top-p 0.9 (B = 8) 0.81 at 0.05.  This is the worst case over every law at that binned TV; an error
that only moves mass inside a bin is seen only as far as it changes the binned law.

Acceptance.  The spec-decode counters (`llm.get_metrics()`: ``vllm:spec_decode_num_drafts``,
``vllm:spec_decode_num_accepted_tokens_per_pos``) give the acceptance of the first drafted position,
compared with its exact expectation sum_x1 p1(x1) a(x1): a(x1) = sum_x min(p2(x | x1), q2(x | x1))
for probabilistic drafts (q2 the draft's law at the same temperature, no top-p: vLLM's drafter
applies only the temperature), a(x1) = p2(argmax q2 | x1) for argmax drafts; z is (accepted - N_d E)
/ sqrt(N_d E (1 - E)) over the N_d first drafts (each a Bernoulli(E), independent).

Output: vLLM's version, the configuration, N, and for each run the p-value, the binned TV, the
acceptance against its expectation and the decision; the last line is the speculative run's
decision.  ``--json PATH`` writes the same as JSON.  Exit status 0 whenever the runs finished,
whatever the decision; 1 when a run could not be done (the reason on stderr); 2 for bad arguments.

Contract: the inputs are deterministic (model seeds, prompt, one engine seed), so a rerun with the
same vLLM build, machine and thread count draws the same samples; across machines the draws may
differ, the decision at the stated power should not.  Needs only vllm, torch, transformers and
numpy.  vLLM's environment knobs above are set as defaults (an exported value wins) before vLLM is
imported; LLM is built only under ``if __name__ == "__main__"`` (vLLM may spawn processes that
re-import the main module).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
import warnings

ENVIRONMENT = (("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),  # the engine core in this process: the patch applies
               ("VLLM_CPU_KVCACHE_SPACE", "1"), ("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
               ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("VLLM_LOGGING_LEVEL", "ERROR"),
               ("TOKENIZERS_PARALLELISM", "false"))

VOCAB, LAYERS, WIDTH, HEADS, POSITIONS = 64, 1, 32, 1, 64
HEAD_SCALE = 20.0  # the output layer's weights times this: spread, not uniform, next-token laws
DRAFT_NOISE = 0.5  # draft = target + DRAFT_NOISE * (own weights rescaled to the target's spread)
X1_GROUPS, X2_WINDOWS, MIN_EXPECTED = 4, 8, 5.0
POWER_EPS = (0.1, 0.05)


# ---------------------------------------------------------------- the patch (what #55006 restores)

def expand_batch_to_tokens_fixed(x, cu_num_tokens, num_tokens: int, replace_from=0, replace_to=0):
    """`rejection_sampler.expand_batch_to_tokens` with the Triton `expand_kernel`'s semantics and the
    caller's dtype: out[i] = x[r] for the tokens i of request r (cu_num_tokens[r - 1] <= i <
    cu_num_tokens[r]), x[r] == replace_from replaced by replace_to.  Positions past
    cu_num_tokens[-1] (none in vLLM's calls) are 0."""
    import torch
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    src = torch.where(x == replace_from, torch.full_like(x, replace_to), x)
    out = x.new_zeros(num_tokens)
    total = int(cu[-1]) if cu.numel() else 0
    out[:total] = torch.repeat_interleave(src, counts)[:num_tokens]
    return out


# ---------------------------------------------------------------- models and the exact law

def build_models(folder: str, seed: int):
    """Save the target and the draft under folder/target, folder/draft; return both (eval mode)."""
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    def fresh(s):
        torch.manual_seed(s)
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=WIDTH, n_layer=LAYERS,
                                      n_head=HEADS, tie_word_embeddings=False, bos_token_id=VOCAB - 1,
                                      eos_token_id=VOCAB - 1)
        return transformers.GPT2LMHeadModel(cfg).eval()

    target, draft = fresh(seed), fresh(seed + 1)
    with torch.no_grad():
        target.lm_head.weight.mul_(HEAD_SCALE)
        draft.lm_head.weight.mul_(HEAD_SCALE)
        for a, b in zip(target.parameters(), draft.parameters()):
            spread = b.std()  # layer-norm weights and biases start constant: no noise there
            b.copy_(a + DRAFT_NOISE * b * (a.std() / spread) if spread > 0 else a)
    target.save_pretrained(os.path.join(folder, "target"))
    draft.save_pretrained(os.path.join(folder, "draft"))
    return target, draft


def _law(logits, temperature: float, top_p: float):
    """float64 next-token law at this temperature with vLLM's top-p rule (rows of logits)."""
    probs = (logits.double() / temperature).softmax(-1)
    if top_p < 1.0:
        srt, idx = probs.sort(-1)  # ascending, as vLLM's apply_top_k_top_p_pytorch
        drop = srt.cumsum(-1) <= 1 - top_p
        drop[:, -1] = False
        probs = probs.scatter(-1, idx, srt.masked_fill(drop, 0.0))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def exact_law(target, draft, prompt, temperature: float, top_p: float):
    """(p1 (V,), p2 (V, V) = p2[x1, x2], a1 (V,) probabilistic-draft and a1g (V,) argmax-draft
    acceptance of the first drafted position after each x1), all float64 numpy."""
    import torch
    with torch.no_grad():
        ids = torch.tensor([prompt])
        p1 = _law(target(ids).logits[:, -1], temperature, top_p)[0]
        both = torch.cat([ids.repeat(VOCAB, 1), torch.arange(VOCAB)[:, None]], 1)
        p2 = _law(target(both).logits[:, -1], temperature, top_p)
        draft_logits = draft(both).logits[:, -1]
        q2 = _law(draft_logits, temperature, 1.0)  # vLLM's drafter applies the temperature only
        a1 = torch.minimum(p2, q2).sum(-1)
        a1g = p2.gather(1, draft_logits.argmax(-1, keepdim=True))[:, 0]
    return p1.numpy(), p2.numpy(), a1.numpy(), a1g.numpy()


def entropy(p) -> float:
    import numpy as np
    p = np.asarray(p, dtype=np.float64)
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


# ---------------------------------------------------------------- bins and the test

def make_bins(p1, p2, n: int):
    """(labels (V, V) int: bin of every cell (x1, x2), -1 where the target's probability is 0;
    probs (B,) the exact probability of every bin), as the module docstring says."""
    import numpy as np
    V = p1.size
    h = X2_WINDOWS
    while h > 1 and n / (X1_GROUPS * h) < 10:
        h //= 2
    order1 = np.argsort(-p1, kind="stable")
    start1 = np.empty(V)
    start1[order1] = np.cumsum(p1[order1]) - p1[order1]
    g = np.minimum((start1 * X1_GROUPS).astype(int), X1_GROUPS - 1)
    order2 = np.argsort(-p2, axis=1, kind="stable")
    srt = np.take_along_axis(p2, order2, 1)
    start2 = np.empty_like(p2)
    np.put_along_axis(start2, order2, np.cumsum(srt, 1) - srt, 1)
    w = np.minimum((start2 * h).astype(int), h - 1)
    raw = g[:, None] * h + w
    joint = p1[:, None] * p2
    raw[joint <= 0] = -1
    mass = np.bincount(raw[raw >= 0], weights=joint[raw >= 0], minlength=X1_GROUPS * h)
    # merge: walk the raw bins in order; an empty raw bin vanishes, a light one joins the one before
    new = np.full(mass.size, -1)
    sums = []
    for b in range(mass.size):
        if mass[b] <= 0:
            continue
        if sums and mass[b] * n < MIN_EXPECTED:
            sums[-1] += mass[b]
        else:
            sums.append(mass[b])
        new[b] = len(sums) - 1
    if len(sums) > 1 and sums[0] * n < MIN_EXPECTED:  # a light first bin joins the next
        new[new >= 1] -= 1
        sums[1] += sums[0]
        sums.pop(0)
    labels = np.where(raw >= 0, new[np.maximum(raw, 0)], -1)
    probs = np.bincount(labels[labels >= 0], weights=joint[labels >= 0], minlength=len(sums))
    return labels, probs


def chi2_sf(x: float, df: float) -> float:
    """P(chi-square(df) > x) = Q(df / 2, x / 2), the regularized upper incomplete gamma function."""
    import torch
    if x <= 0:
        return 1.0
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64),
                                        torch.tensor(x / 2.0, dtype=torch.float64)))


def chi2_isf(alpha: float, df: float) -> float:
    """The x with chi2_sf(x, df) = alpha (bisection)."""
    lo, hi = 0.0, df + 10.0 * math.sqrt(2 * df) + 100.0
    while chi2_sf(hi, df) > alpha:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > alpha else (lo, mid)
    return (lo + hi) / 2


def ncx2_sf(x: float, df: float, lam: float) -> float:
    """P(noncentral chi-square(df, lam) > x): the Poisson(lam / 2) mixture of chi-square(df + 2 j) tails."""
    if lam <= 0:
        return chi2_sf(x, df)
    half = lam / 2.0
    top = int(half + 12 * math.sqrt(half + 1) + 30)
    return min(1.0, sum(math.exp(-half + j * math.log(half) - math.lgamma(j + 1)) * chi2_sf(x, df + 2 * j)
                        for j in range(top + 1)))


def worst_case_power(n: int, bins: int, alpha: float, eps: float) -> float:
    """Power of the level-alpha G-test on `bins` bins against every law at binned TV >= eps (docstring)."""
    return ncx2_sf(chi2_isf(alpha, bins - 1), bins - 1, 4.0 * n * eps * eps)


def law_test(pairs, labels, probs, alpha: float) -> dict:
    """G-test of the sampled (x1, x2) pairs against the binned exact law."""
    import numpy as np
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    n = len(pairs)
    inside = (pairs >= 0).all(1) & (pairs < labels.shape[0]).all(1)
    lab = np.full(n, -1)
    lab[inside] = labels[pairs[inside, 0], pairs[inside, 1]]
    impossible = int((lab < 0).sum())
    observed = np.bincount(lab[lab >= 0], minlength=probs.size).astype(np.float64)
    expected = probs * (n - impossible)  # the possible samples against the binned law
    used = observed > 0
    g = float(2.0 * (observed[used] * np.log(observed[used] / expected[used])).sum())
    df = probs.size - 1
    p = 0.0 if impossible else chi2_sf(g, df)
    tv = 0.5 * float(np.abs(observed / n - probs).sum()) + 0.5 * impossible / n
    return {"n": n, "g": g, "df": df, "p_value": p, "binned_tv": tv, "impossible": impossible,
            "consistent": bool(p >= alpha)}


def decision(result: dict, alpha: float) -> str:
    word = "CONSISTENT" if result["consistent"] else "INCONSISTENT"
    return f"{word} with the target law at level {alpha:g}"


# ---------------------------------------------------------------- vLLM

def run_vllm(folder: str, spec: dict | None, args) -> dict:
    """One engine: build, generate N two-token samples from the prompt, read the counters, shut down."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    start = time.perf_counter()
    llm = LLM(model=os.path.join(folder, "target"), skip_tokenizer_init=True, dtype="float32",
              enforce_eager=True, max_model_len=POSITIONS, seed=args.seed, disable_log_stats=False,
              speculative_config=spec)
    built = time.perf_counter() - start
    try:
        params = SamplingParams(n=args.n, temperature=args.temperature, top_p=args.top_p, top_k=0,
                                max_tokens=2, ignore_eos=True, detokenize=False)
        start = time.perf_counter()
        outputs = llm.generate([TokensPrompt(prompt_token_ids=list(args.prompt))], params, use_tqdm=False)
        generated = time.perf_counter() - start
        pairs = [list(c.token_ids) for c in outputs[0].outputs]
        if len(pairs) != args.n or any(len(t) != 2 for t in pairs):
            raise RuntimeError(f"vLLM returned {len(pairs)} samples of lengths "
                               f"{sorted({len(t) for t in pairs})}, asked {args.n} of 2 tokens")
        counters = {}
        for metric in llm.get_metrics():
            if metric.name.startswith("vllm:spec_decode"):
                counters[metric.name] = list(metric.values) if hasattr(metric, "values") else metric.value
    finally:
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass
        del llm
        gc.collect()
    return {"pairs": pairs, "counters": counters, "startup_s": built, "generate_s": generated}


def acceptance(counters: dict, expected: float) -> dict | None:
    drafts = counters.get("vllm:spec_decode_num_drafts")
    per_pos = counters.get("vllm:spec_decode_num_accepted_tokens_per_pos")
    if not drafts or not per_pos:
        return None
    drafts, accepted = int(drafts), int(per_pos[0])
    sd = math.sqrt(drafts * expected * (1 - expected))
    return {"drafts": drafts, "accepted": accepted, "rate": accepted / drafts, "expected": expected,
            "z": (accepted - drafts * expected) / sd if sd > 0 else float("nan")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patched", action="store_true",
                        help="install this script's dtype-preserving expand_batch_to_tokens before building LLM")
    parser.add_argument("--n", type=int, default=2000, help="samples per run (default 2000)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--draft-sample", choices=("probabilistic", "greedy"), default="probabilistic",
                        help="vLLM's draft_sample_method: probabilistic (default here) or greedy (vLLM's "
                             "default: argmax drafts)")
    parser.add_argument("--k", type=int, default=2, help="num_speculative_tokens (default 2)")
    parser.add_argument("--no-control", action="store_true", help="skip the plain-decoding control run")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0, help="vLLM's engine seed")
    parser.add_argument("--model-seed", type=int, default=1, help="target's seed (the draft's is +1)")
    parser.add_argument("--prompt", type=lambda s: [int(t) for t in s.split(",")], default=[1, 2, 3, 4],
                        help="token ids, comma-separated (default 1,2,3,4)")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH")
    args = parser.parse_args(argv)
    for name, value in ENVIRONMENT:
        os.environ.setdefault(name, value)
    # vLLM's kernel-override registration scans every loaded module; torch answers one attribute
    # with a FutureWarning that says nothing about this check
    warnings.filterwarnings("ignore", message=".*torch.distributed.reduce_op.*", category=FutureWarning)
    if args.n < 20 * X1_GROUPS or not 0 < args.temperature or not 0 < args.top_p <= 1 or args.k < 1:
        parser.error(f"need --n >= {20 * X1_GROUPS}, --temperature > 0, 0 < --top-p <= 1, --k >= 1")
    if not all(0 <= t < VOCAB for t in args.prompt) or len(args.prompt) + 2 + args.k > POSITIONS:
        parser.error(f"prompt token ids must lie in [0, {VOCAB}) and the prompt be short")
    if args.patched and os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] != "0":
        parser.error("--patched replaces a function in this process: it needs VLLM_ENABLE_V1_MULTIPROCESSING=0 "
                     "(the engine core in this process)")

    try:  # every dependency up front, so that a missing one is reported before any work
        import numpy  # noqa: F401  (the bins and the test)
        import torch
        import transformers
        import vllm
        from vllm.triton_utils import HAS_TRITON
        from vllm.v1.sample import rejection_sampler
    except Exception as exc:
        print(f"law_check could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.patched:
        rejection_sampler.expand_batch_to_tokens = expand_batch_to_tokens_fixed
    spec = {"method": "draft_model", "num_speculative_tokens": args.k,
            "draft_sample_method": args.draft_sample}
    versions = {"vllm": vllm.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
                "python": sys.version.split()[0]}
    config = {"vocab": VOCAB, "layers": LAYERS, "width": WIDTH, "heads": HEADS, "model_seed": args.model_seed,
              "prompt": list(args.prompt), "temperature": args.temperature, "top_p": args.top_p, "top_k": 0,
              "max_tokens": 2, "engine_seed": args.seed, "speculative_config": spec,
              "expand_batch_to_tokens": "patched (this script)" if args.patched else "shipped"}

    runs = {}
    with tempfile.TemporaryDirectory(prefix="law_check_") as folder:
        try:
            target, draft = build_models(folder, args.model_seed)
            p1, p2, a1, a1g = exact_law(target, draft, args.prompt, args.temperature, args.top_p)
            del target, draft
            labels, probs = make_bins(p1, p2, args.n)
            if probs.size < 2:
                raise ValueError(f"the exact law leaves {probs.size} bin at N = {args.n}: raise --n or the temperature")
            plan = [] if args.no_control else [("control", None)]
            plan.append(("speculative", dict(spec, model=os.path.join(folder, "draft"))))
            for name, sc in plan:
                runs[name] = run_vllm(folder, sc, args)
        except Exception as exc:
            print(f"law_check could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1

    expected_acc = float(p1 @ (a1 if args.draft_sample == "probabilistic" else a1g))
    results = {}
    for name, run in runs.items():
        res = law_test(run["pairs"], labels, probs, args.alpha)
        res["decision"] = decision(res, args.alpha)
        res["acceptance"] = acceptance(run["counters"], expected_acc) if name == "speculative" else None
        res["counters"] = run["counters"]
        res["startup_s"], res["generate_s"] = round(run["startup_s"], 2), round(run["generate_s"], 2)
        results[name] = res
    power = {f"{eps:g}": worst_case_power(args.n, probs.size, args.alpha, eps) for eps in POWER_EPS}
    h1 = entropy(p1)
    h2 = float(sum(p1[x] * entropy(p2[x]) for x in range(VOCAB)))

    print(f"vLLM {versions['vllm']} (torch {versions['torch']}, transformers {versions['transformers']}, "
          f"Python {versions['python']}); Triton in use: {bool(HAS_TRITON)}")
    print(f"models: random GPT-2 target (seed {args.model_seed}) and draft (target + noise, seed "
          f"{args.model_seed + 1}); vocab {VOCAB}, {LAYERS} layer, width {WIDTH}; entropy of x1 {h1:.2f} nats, "
          f"of x2 given x1 {h2:.2f} nats on average (uniform: {math.log(VOCAB):.2f})")
    print(f"sampling: prompt {list(args.prompt)}, temperature {args.temperature:g}, top-p {args.top_p:g}, "
          f"top-k off, 2 tokens per sample, N = {args.n} per run, engine seed {args.seed}")
    print(f"speculative run: draft_model, num_speculative_tokens {args.k}, draft_sample_method "
          f"{args.draft_sample!r}; expand_batch_to_tokens: {config['expand_batch_to_tokens']}")
    print(f"test: G-test of (x1, x2) on {probs.size} bins of the exact joint law (expected counts >= "
          f"{MIN_EXPECTED:g}), level {args.alpha:g}; worst-case power "
          + ", ".join(f"{v:.2f} at binned TV {k}" for k, v in power.items()))
    for name, res in results.items():
        p = f"{res['p_value']:.3g}" if res["p_value"] > 0 else "< 1e-300"
        line = (f"  {name:<11} p = {p:<9} binned TV = {res['binned_tv']:.3f}  G = {res['g']:.1f} on "
                f"{res['df']} df" + (f", {res['impossible']} impossible samples" if res["impossible"] else ""))
        acc = res["acceptance"]
        if acc:
            line += (f"; position-1 acceptance {acc['accepted']}/{acc['drafts']} = {acc['rate']:.3f} "
                     f"(exact expectation {acc['expected']:.3f}, z = {acc['z']:+.1f})")
        print(line + f"  -> {res['decision']}")
    final = results["speculative"]
    print(f"decision (speculative run): {final['decision']}")

    if args.json:
        out = {**versions, "has_triton": bool(HAS_TRITON), "patched": bool(args.patched), "config": config,
               "n": args.n, "alpha": args.alpha, "bins": int(probs.size),
               "power": {"eps": list(POWER_EPS), "power": [power[f"{e:g}"] for e in POWER_EPS]},
               "entropy_x1": h1, "entropy_x2_given_x1": h2, "expected_acceptance": expected_acc,
               "runs": results, "decision": final["decision"], "consistent": final["consistent"]}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":  # vLLM may spawn processes that re-import the main module: keep this guard
    sys.exit(main())
