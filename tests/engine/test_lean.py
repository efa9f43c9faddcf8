"""specdec.engine.modes.lean: GPT-2's forward written out is the same model (logits to fp32 rounding), so the
engine decodes the same tokens with it, on every path (ragged batches, speculation, serving)."""

import pytest
import torch

from specdec.engine.decode import generate
from specdec.engine.kv import engine_model
from specdec.engine.modes.lean import LeanGPT2, lean


def _steps(model, rows, mask, feeds):
    """Logits of a prefill (rows, mask) and then each feed (ids (B, s), mask columns (B, s)) on one
    DynamicCache, positions counted per row from its first kept slot."""
    from transformers import DynamicCache

    cache, out, m = DynamicCache(), [], mask
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    with torch.inference_mode():
        out.append(model(input_ids=rows, attention_mask=m, position_ids=pos, cache=cache, use_cache=True).logits)
        for ids, cols in feeds:
            start = m.sum(1, keepdim=True)
            m = torch.cat([m, cols], 1)
            p = start + (cols.cumsum(1) - 1).clamp(min=0)
            out.append(model(input_ids=ids, attention_mask=m, position_ids=p, cache=cache, use_cache=True).logits)
    return out


def test_lean_logits_equal_hugging_faces_on_every_position_a_caller_reads(tiny_pair):
    """A left-padded batch of two, then one token, then three fed with a hole in the middle (a rejected
    draft's slot): the lean logits equal HF's to 1e-4 wherever the query's own slot is kept, and are
    finite everywhere; the prefill's mask lets a left-pad query attend its own slot (never nothing)."""
    target = engine_model(tiny_pair[0])
    rows = torch.tensor([[0, 0, 5, 9, 3], [4, 8, 1, 7, 2]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    feeds = [(torch.tensor([[6], [11]]), torch.ones(2, 1, dtype=torch.long)),
             (torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[1, 1, 1], [1, 0, 1]]))]
    hf, ours = _steps(target, rows, mask, feeds), _steps(lean(tiny_pair[0]), rows, mask, feeds)
    kept = [mask.bool(), feeds[0][1].bool(), feeds[1][1].bool()]
    for a, b, keep in zip(hf, ours, kept):
        assert a.shape == b.shape and torch.isfinite(b).all()
        assert torch.allclose(a[keep], b[keep], atol=1e-4, rtol=1e-4)
    assert not torch.allclose(hf[2][1, 2], hf[2][0, 2], atol=1e-2), "rows must differ for the check to mean something"
    m = lean(tiny_pair[0])._mask(mask, 2, 5, 0, "cpu")  # (2, 1, 5, 5)
    assert m[0, 0].diagonal().all() and not m[0, 0, 0, 1:].any() and m[1, 0].equal(torch.ones(5, 5).tril().bool())


def test_lean_without_cache_or_mask_is_the_causal_forward_and_keeps_the_last_logits(tiny_pair):
    """No cache and no mask: the plain causal forward; ``logits_to_keep`` keeps the last positions;
    a training-mode model with dropout 0.5 gives the inference logits (HF's then differ)."""
    from specdec.family.architectures import build_model, real_size_config

    target = tiny_pair[0]
    ids = torch.tensor([[3, 7, 1, 9, 4, 6]])
    lm = lean(target)
    with torch.inference_mode():
        a, b = target(input_ids=ids).logits, lm(input_ids=ids).logits
        last = lm(input_ids=ids, logits_to_keep=2).logits
    # the same positions to float32 rounding: a head over 2 rows need not round like one over 6 (BLAS
    # picks its kernel by shape, and CPUs differ), while a wrong slice is off by the logits' own scale
    assert torch.allclose(a, b, atol=1e-4, rtol=1e-4) and torch.allclose(last, b[:, -2:], atol=1e-6, rtol=1e-5)
    wet = build_model(real_size_config("draft-3m", vocab_size=64, n_positions=32, resid_pdrop=0.5, embd_pdrop=0.5,
                                       attn_pdrop=0.5), generator=torch.Generator().manual_seed(1)).eval()
    with torch.inference_mode():
        dry = wet(input_ids=ids).logits
        wet.train()
        torch.manual_seed(0)
        assert not torch.allclose(wet(input_ids=ids).logits, dry, atol=1e-3), "HF applies dropout in training mode"
        assert torch.allclose(lean(wet)(input_ids=ids).logits, dry, atol=1e-4, rtol=1e-4)


def test_lean_engine_decodes_what_the_eager_engine_decodes(tiny_pair):
    """Greedy on a ragged batch of two, plain and k = 2, and a seeded sampled run at batch 1, k = 3:
    token for token the eager run's (the lean forward differs from HF's only in fp32 rounding)."""
    from shared_helpers import assert_decodes_like_eager

    target, draft = tiny_pair
    lt, ld = assert_decodes_like_eager(lean, tiny_pair, 12)
    runs = [generate(t, torch.tensor([3, 7, 1, 9, 4]), drafter=d, k=3, max_new_tokens=16, temperature=1.0,
                     generator=torch.Generator().manual_seed(5), mode="eager") for t, d in ((target, draft), (lt, ld))]
    assert runs[0].tokens[0].tolist() == runs[1].tokens[0].tolist()


def test_a_plain_call_runs_the_lean_forward_and_eager_is_named(tiny_pair):
    """generate's default mode ("auto") runs a GPT-2 target and draft on the lean forward: Hugging
    Face's modules are never called (a counting wrapper of the transformer's forward says so; the
    control: mode="eager" calls it), the tokens are the eager run's, and stats.mode says which ran.
    What the lean forward would skip keeps the model's own forward: a forward hook, training mode.
    A model the lean forward cannot run decodes on its own forward under "auto" and is refused by
    "lean", naming why."""
    from specdec.engine.modes import forward_for
    from specdec.family.architectures import build_model, llama_config

    target, draft = tiny_pair
    ids, calls, inner = torch.tensor([3, 7, 1, 9, 4]), [], target.transformer.forward
    target.transformer.forward = lambda *a, **kw: (calls.append(1), inner(*a, **kw))[1]
    try:
        runs, seen = {}, {}
        for mode in ("auto", "eager"):
            runs[mode] = generate(target, ids, drafter=draft, k=2, max_new_tokens=12, temperature=1.0,
                                  generator=torch.Generator().manual_seed(2), **({} if mode == "auto" else {"mode": mode}))
            seen[mode] = len(calls) - sum(seen.values())
    finally:
        del target.transformer.forward
    assert seen["auto"] == 0 and seen["eager"] > 0, seen
    assert runs["auto"].stats.mode == "lean" and runs["eager"].stats.mode == "eager"
    assert runs["auto"].tokens[0].tolist() == runs["eager"].tokens[0].tolist()
    hooked = []
    handle = target.register_forward_hook(lambda *a: hooked.append(1))
    try:
        assert generate(target, ids, max_new_tokens=3, temperature=0).stats.mode == "eager" and hooked
    finally:
        handle.remove()
    target.train()
    try:
        assert forward_for(target, "auto") is target
    finally:
        target.eval()
    llama = build_model(llama_config("llama-1b", tiny=True))
    assert forward_for(llama, "auto") is llama
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        forward_for(llama, "lean")
    with pytest.raises(ValueError, match="mode must be one of"):
        generate(target, ids, max_new_tokens=2, mode="fast")

def test_lean_models_serve_what_eager_models_serve(tiny_pair):
    """Continuous batching (rows join: caches are padded and stacked) with a lean target and draft:
    every job's tokens equal the eager run's, greedy."""
    from shared_helpers import serving_jobs

    from specdec.engine.continuous import serve

    target, draft = tiny_pair
    jobs = serving_jobs(4, gap=0.0, seed=1)
    eager = serve(target, jobs, drafter=draft, k=2, max_batch=2, temperature=0)
    ours = serve(lean(target), jobs, drafter=lean(draft), k=2, max_batch=2, temperature=0)
    got, want = [list(r["tokens"]) for r in ours.requests], [list(r["tokens"]) for r in eager.requests]
    assert got == want and all(len(t) > 0 for t in got)


def test_lean_refuses_what_it_cannot_run_naming_why(tiny_pair):
    """Not GPT-2, another activation, a wrapper, unknown arguments, a mask of the wrong width."""
    from specdec.engine.modes.compiled import compiled
    from specdec.family.architectures import build_model, llama_config, real_size_config

    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        lean(build_model(llama_config("llama-1b", tiny=True)))
    with pytest.raises(ValueError, match="activation 'relu'"):
        lean(build_model(real_size_config("draft-3m", vocab_size=64, n_positions=32, activation_function="relu")))
    with pytest.raises(ValueError, match="not a torch.nn.Module"):
        lean(lambda **kw: None)
    with pytest.raises(ValueError, match="takes the model itself"):
        lean(compiled(tiny_pair[0]))
    with pytest.raises(ValueError, match="not a lean"):
        compiled(lean(tiny_pair[0]))
    for over, why in ((dict(add_cross_attention=True), "cross-attention"),
                      (dict(scale_attn_by_inverse_layer_idx=True), "attention scaling"),
                      (dict(scale_attn_weights=False), "attention scaling"),
                      (dict(reorder_and_upcast_attn=True), "upcast")):
        with pytest.raises(ValueError, match=why):
            lean(build_model(real_size_config("draft-3m", vocab_size=64, n_positions=32, **over)))
    lm = lean(tiny_pair[0])
    assert isinstance(lm, LeanGPT2)
    ids = torch.tensor([[3, 7, 1]])
    with pytest.raises(ValueError, match="inputs_embeds"):
        lm(input_ids=ids, inputs_embeds=torch.zeros(1, 3, 32))
    with pytest.raises(ValueError, match=r"\(1, 3\)"):
        lm(input_ids=ids, attention_mask=torch.ones(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids must be"):
        lm(input_ids=ids[0])
    with pytest.raises(ValueError, match="an int"):
        lm(input_ids=ids, logits_to_keep=torch.tensor([2]))


def test_lean_embedded_pair_gives_hugging_faces_logits_and_tokens():
    """The trained embedded target and distilled draft (activations far from GELU's linear part, so a
    wrong activation or scale shows): logits within 1e-3 of HF's over a held-out prompt, and greedy
    speculative decoding (k = 4, 48 tokens, two prompts in one ragged batch) token for token the eager
    engine's."""
    from specdec.family.loader import load_pair
    from specdec.family.tokens import heldout_prompts

    target, draft, tok = load_pair("embedded", "draft-distilled", dtype=torch.float32)
    prompts = heldout_prompts(tok, 2, 48, seed=3)
    ids = prompts[0][None]
    with torch.inference_mode():
        a, b = target(input_ids=ids).logits, lean(target)(input_ids=ids).logits
        c, d = draft(input_ids=ids).logits, lean(draft)(input_ids=ids).logits
    assert a.abs().max() > 1 and torch.allclose(a, b, atol=1e-3, rtol=1e-4) and torch.allclose(c, d, atol=1e-3, rtol=1e-4)
    batch = [prompts[0], prompts[1][8:]]
    eager = generate(target, batch, drafter=draft, k=4, max_new_tokens=48, temperature=0, mode="eager")
    ours = generate(lean(target), batch, drafter=lean(draft), k=4, max_new_tokens=48, temperature=0)
    assert [t.tolist() for t in ours.tokens] == [t.tolist() for t in eager.tokens]
