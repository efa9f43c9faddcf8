"""The decoding engine: autoregressive baseline and speculative decoding with KV rollback.

One loop serves both.  Each step feeds the target the row's last token plus k drafts, processes
the k+1 logits with the sampling rules into p, and verifies (Leviathan et al. 2022, Algorithm 1;
Sun et al. 2025 for method="block", both in `specdec.core.verify`); with no drafter, k = 0 and the
step is plain autoregressive decoding with a KV cache, through the same sampling code.  A step is
five small functions -- draft, forward, accept, emit, settle (+ compact) -- of one `Decoder`
(`specdec.engine.step`, shared with continuous batching), and `generate` only sequences its steps.

Ragged batches (rows accept different counts and finish at different times) -- the scheme:
  * per-row valid slots in one shared cache (`specdec.engine.kv.new_cache`: a DynamicCache, or a
    compiled model's preallocated SlotCache).  Every row is fed the same number of slots
    per step; a rejected draft's slot is not cropped but masked (attention mask 0), and only the
    trailing slots rejected by every row are cropped (`cache.crop(-n)`, transformers 5.24).
  * explicit position_ids that count only valid slots, so a masked hole never shifts positions:
    row b's logits are those of its own unpadded sequence (fp32: equal within ~1e-6).
  * prompts of different lengths are left-padded the same way (masked slots, positions from 0).
  * finished rows leave the batch (`cache.batch_select_indices`), so they cost no compute.
Why not crop every row to the shortest accepted prefix and re-feed the rest: that repeats target
work each step; holes cost only memory (at most k slots per step) and one mask column each.

Stops and budget: a row ends right after a stop token (accepted draft or target token) or at
exactly max_new_tokens; the draft length is clipped to the largest remaining budget minus one and
rows with less budget are cut at theirs, so nothing overshoots.  It is also capped where it cannot
pay (`specdec.engine.inputs.next_k_cap`): a step drafts at most max(8, 2 (n + 1)) tokens, n the
longest run of drafts any row had accepted in the previous drafting step -- a k of 8 or less is
never touched, a drafter accepted all the way doubles its way up to the requested k, and a huge k
with a drafter accepted a few tokens at a time drafts about 8 per step, not hundreds (a one-row
run drafts at most 10 tokens per token it emits).  `cancel` (a threading.Event or a
callable) is checked before each step and after each draft: generation returns the consistent
prefix so far, marked cancelled; caches live only inside the call, so models are reusable at once.

Overhead: per step the engine does vectorized tensor work and ONE host sync: a `.tolist()` of each
row's accepted count and new tokens together with the checks of the step's logits (target and draft:
is every row's maximum finite? -- false exactly when a row has a NaN or +inf or is all -inf; only
then does a second sync find which, for the error); the bookkeeping of a few rows (stops, budgets,
who finished) is then host arithmetic.  Nothing else syncs: p and q are built unchecked and verified
by `verify_unchecked`.  Between model forwards that leave the CPU's caches cold each small tensor
operation costs several microseconds, so the step is written with few of them.  Greedy decoding
(temperature 0) skips building distributions: `greedy_verify` on the argmax, tested equal to
`verify` on one-hot p and q for both methods.

A `verifier` replaces `verify` for a caller that names one (same signature: drafts, q, p, method=,
generator= -> VerifyResult): the measurement code passes its controlled-acceptance
instrumentation this way (`specdec.measure.controlled`); the algorithm itself has no branch for it.

Example: generate(target, torch.tensor([1, 2, 3]), drafter=draft, k=4, max_new_tokens=8,
temperature=0).tokens[0] == generate(target, torch.tensor([1, 2, 3]), max_new_tokens=8,
temperature=0).tokens[0]  (greedy speculative output is token-identical to the baseline).
"""

from __future__ import annotations

import torch

from specdec.core.sampling import SamplingConfig
from specdec.core.verify import greedy_verify
from specdec.engine.drafters import as_drafter, can
from specdec.engine.inputs import check_arguments, check_generator, clip_k, peak_memory, prompts_of, stop_tokens
from specdec.engine.kv import engine_model, now
from specdec.engine.modes import forward_for, mode_of
from specdec.engine.schedule import History, as_schedule
from specdec.engine.stats import DecodeStats, GenerateResult
from specdec.engine.step import Decoder

__all__ = ["generate", "GenerateResult", "DecodeStats", "as_drafter", "greedy_verify"]


def generate(target, input_ids, *, drafter=None, k=4, method: str = "token", max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             stop_token_ids=(), generator: torch.Generator | None = None, cancel=None,
             verifier=None, mode: str = "auto") -> GenerateResult:
    """Generate up to max_new_tokens per row from `target` (a Hugging Face causal LM).

    drafter=None: autoregressive baseline; a causal LM or a drafter object: speculative decoding
    with k drafts per step -- an integer, or a schedule (`specdec.engine.schedule`: a callable
    given the run's `History` before each step; each step's k is capped where it cannot pay, see
    the module docstring) -- verified by `method` ("token" or "block"), or
    by `verifier` when a caller names one (module docstring; an approximate rule of
    `specdec.core.rules.approximate` is reached only this way, and its stats say lossless False).  Sampling rules as in
    `specdec.core.sampling.process_logits` (temperature 0 = greedy).  All randomness from `generator`
    (None, a torch.Generator, or a `RowGenerators` with one per row; anything else is a TypeError at
    every temperature).  Every argument is checked before the first forward (`specdec.engine.inputs`).

    mode: which forward the target and a causal-LM drafter run (`specdec.engine.modes.forward_for`):
    "auto" (the default) the engine's lean forward where it runs the model, else the model's own;
    "lean"; "eager" (the model's own forward, as a measurement of the modules as written names it).
    Every mode gives the same tokens up to fp32 rounding of the logits (tested); ``stats.mode`` says
    which one ran.

    The loop runs under `torch.inference_mode` (about 5% faster per forward on this CPU than
    no_grad, and what Hugging Face's generate uses); the returned tokens are cloned outside it, so
    they are ordinary tensors.
    """
    res = _generate(target, input_ids, drafter=drafter, k=k, method=method, max_new_tokens=max_new_tokens,
                    temperature=temperature, top_k=top_k, top_p=top_p, stop_token_ids=stop_token_ids,
                    generator=generator, cancel=cancel, verifier=verifier, mode=mode)
    res.tokens = [t.clone() for t in res.tokens]
    return res


@torch.inference_mode()
def _generate(target, input_ids, *, drafter, k, method, max_new_tokens, temperature, top_k, top_p, stop_token_ids,
              generator, cancel, verifier, mode) -> GenerateResult:
    sampling = SamplingConfig(temperature, top_k, top_p)
    target, drafter = forward_for(target, mode), forward_for(drafter, mode)
    drafter, target, schedule = as_drafter(drafter), engine_model(target), as_schedule(k)
    if drafter is not None and not isinstance(k, int) and not can(drafter, "advance"):
        raise ValueError("a draft-length schedule can choose k = 0, after which the drafter is told the target's "
                         f"token with advance(next_token); {type(drafter).__name__} has no advance method")
    device = next(target.parameters()).device
    V = int(target.config.vocab_size)
    ids, mask = prompts_of(input_ids, V, device)  # (B, T), (B, T)
    check_arguments(target, drafter, ids, method, max_new_tokens, verifier, cancel)
    check_generator(generator, ids.shape[0])
    stops = stop_tokens(stop_token_ids, V, device)
    is_cancelled = (cancel.is_set if hasattr(cancel, "is_set") else cancel) if cancel is not None else (lambda: False)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t_start = now(device)
    k_max = 0 if drafter is None else k if isinstance(k, int) else getattr(schedule, "k_max", 8)
    ahead = (max_new_tokens + k_max) * (2 if k_max and ids.shape[0] > 1 else 1)  # slots a compiled model
    # preallocates beyond the prompt: enough for what one row can fill, twice that for a ragged batch's holes
    dec = Decoder(target, drafter, ids, mask, max_new_tokens=max_new_tokens, stops=stops, sampling=sampling,
                   method=method, generator=generator, verifier=verifier, slots_ahead=ahead)
    if drafter is not None:
        drafter.slots_ahead = ahead
    stats, history, cancelled = DecodeStats(mode=mode_of(target)), History(), False
    if verifier is not None and drafter is not None:  # a caller's rule: lossless only if it says so
        stats.lossless = getattr(verifier, "lossless", False) is True
        stats.verifier = str(getattr(verifier, "name", type(verifier).__name__))
    else:
        stats.verifier = method if drafter is not None else "autoregressive"
    if drafter is not None:
        drafter.begin(ids, mask)
    stats.prefill_seconds = now(device) - t_start  # the prompt itself is fed with the first step
    while dec.active:
        if is_cancelled():
            cancelled = True
            break
        rows = dec.row_ids
        history.running = len(rows)  # what a load-aware schedule sees
        ks = 0 if drafter is None else clip_k(schedule(history), dec.max_rem, dec.k_cap)
        res = dec.step(ks, is_cancelled)
        if res is None:  # cancelled mid-draft: the drafts are dropped, the committed prefix stands
            cancelled = True
            break
        t4 = res.ended
        history.update(ks, len(rows), res.accepted, res.stopped)
        stats.emitted.append((t4 - t_start, rows, res.emitted))
        stats.accepted.append((rows, res.accepted_rows))
        dec.settle(res)
        t5 = now(device)
        dec.compact(res)
        t6 = now(device)
        stats.steps.append({"step": len(stats.steps), "k": ks, "active": len(rows), "t_draft": res.t_draft,
                            "t_draft_forward": res.t_draft_forward, "t_target": res.t_target,
                            "t_accept": res.t_accept, "t_rollback": t5 - t4,
                            "t_other": res.t_emit + (t6 - t5), "t_step": t6 - res.started,
                            "emitted": sum(res.emitted)})
    stats.total_seconds = now(device) - t_start
    stats.peak_memory_bytes, stats.memory_kind = peak_memory(device)
    stats.kv_slots = int(dec.tmask.shape[1])  # the target cache's length per row at the end, holes included
    return dec.result(stats, cancelled)
