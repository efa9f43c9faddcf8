"""The decoding engine on tiny seeded random GPT-2 models: greedy identity with the baseline,
KV rollback vs recompute, stops, exact length, cancellation, ragged batches, bad input, stats.

Random weights are valid here: every property tested is about the engine, not the model.
Weights use initializer_range 0.5 so logits are spread out (no near-ties by construction); a
greedy mismatch is still checked for a tie before it counts as a failure.
"""

import threading

import pytest
import torch

from specdec.engine.decode import generate, greedy_verify
from specdec.engine.history import NGramDrafter, PromptLookupDrafter
from specdec.core.sampling import process_logits
from specdec.core.verify import verify

V = 96


def _gpt2(seed, n_layer=2, n_embd=64, vocab=V, n_positions=128, init=0.5):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)  # model construction only, in the test
    return GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=2, vocab_size=vocab,
                                      n_positions=n_positions, bos_token_id=0, eos_token_id=0,
                                      initializer_range=init)).eval()


class _Bigram:
    """A fixed random bigram log-prob table with the NGramModel interface (order 2)."""

    order = 2

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.log_softmax(3 * torch.randn(V, V, generator=g), -1)
        self.vocab_size = V

    def logits(self, ids):
        return self.table[ids[:, -1]]


@pytest.fixture(scope="module")
def models():
    return _gpt2(0), _gpt2(1, n_layer=1, n_embd=32)


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(7)
    return torch.randint(0, V, (5, 10), generator=g)


def _drafters(draft):
    return {"model": draft, "ngram": NGramDrafter(_Bigram(3)), "lookup": PromptLookupDrafter(V)}


def _assert_same_or_tie(target, prompt, a, b):
    """a == b, or they first differ where the target's top two logits tie exactly."""
    if torch.equal(a, b):
        return
    i = int((a[: len(b)] != b[: len(a)]).nonzero()[0]) if min(len(a), len(b)) else 0
    with torch.no_grad():
        top = target(input_ids=torch.cat([prompt, a[:i]])[None]).logits[0, -1].topk(2).values
    assert top[0] == top[1], f"greedy outputs differ at token {i} without a logit tie ({top.tolist()})"


def test_greedy_identical_to_baseline_batched_and_single(models, prompts):
    target, draft = models
    n_new = 24
    base = generate(target, prompts, max_new_tokens=n_new, temperature=0).tokens
    for i in range(2):  # the batched baseline equals single-row baseline runs
        _assert_same_or_tie(target, prompts[i], generate(target, prompts[i], max_new_tokens=n_new,
                                                         temperature=0).tokens[0], base[i])
    for name, d in _drafters(draft).items():
        for k in (1, 3, 8):
            for method in ("token", "block"):
                out = generate(target, prompts, drafter=d, k=k, method=method, max_new_tokens=n_new, temperature=0)
                for i in range(len(prompts)):
                    _assert_same_or_tie(target, prompts[i], out.tokens[i], base[i])
        single = generate(target, prompts[3], drafter=d, k=4, max_new_tokens=n_new, temperature=0)
        _assert_same_or_tie(target, prompts[3], single.tokens[0], base[3])


def test_ragged_prompts_equal_single_runs(models):
    target, draft = models
    g = torch.Generator().manual_seed(11)
    rows = [torch.randint(0, V, (n,), generator=g) for n in (3, 9, 1, 6)]
    out = generate(target, rows, drafter=draft, k=3, max_new_tokens=16, temperature=0)
    for r, t in zip(rows, out.tokens):
        _assert_same_or_tie(target, r, t, generate(target, r, max_new_tokens=16, temperature=0).tokens[0])


class _Trace:
    """Wraps the target; records each call's fed tokens from the first kept logit on (the first step
    also feeds the prompt: its logits are not kept) and that first kept slot's logits."""

    def __init__(self, model):
        self.model, self.config, self.calls = model, model.config, []

    def parameters(self):
        return self.model.parameters()

    def __call__(self, **kw):
        out = self.model(**kw)
        kept = out.logits.shape[1]
        self.calls.append((kw["input_ids"][:, -kept:].clone(), out.logits[:, 0].clone()))
        return out


def test_rollback_matches_recompute(models, prompts):
    """After every verification (rejections included), the next step's first logits -- computed
    from the cropped/masked cache -- equal a no-cache forward of the committed prefix (fp32, 1e-5).
    Weights at GPT-2's usual scale (init 0.05): logits of order 1, as in a trained model."""
    target, draft = _gpt2(4, init=0.05), _gpt2(5, n_layer=1, n_embd=32, init=0.05)
    for batch in (prompts[:1], prompts[:3]):
        tr = _Trace(target)
        out = generate(tr, batch, drafter=draft, k=4, max_new_tokens=30, temperature=1.0,
                       generator=torch.Generator().manual_seed(0))
        steps = out.stats.steps
        assert any(r["accepted"] < r["k"] for r in out.stats.accept_rows()), "no rejection happened"
        rows = torch.arange(len(batch))
        done = torch.zeros(len(batch), dtype=torch.long)
        checked = 0
        for s, (ids, first) in enumerate(tr.calls):  # one call per step: the prompt comes with the first
            rows_s = torch.tensor(out.stats.accepted[s][0])
            for a, r in enumerate(rows_s.tolist()):
                prefix = torch.cat([batch[r], out.tokens[r][: done[r]]])
                with torch.no_grad():
                    ref = target(input_ids=prefix[None]).logits[0, -1]
                assert ids[a, 0] == prefix[-1]
                assert torch.allclose(first[a], ref, atol=1e-5, rtol=0), f"step {s} row {r}"
                checked += 1
            done[rows_s] += torch.tensor(out.stats.emitted[s][2])
        assert checked >= len(steps)
        assert rows.numel() == len(out.tokens)


def test_stop_tokens_end_output(models, prompts):
    target, draft = models
    base = generate(target, prompts[0], max_new_tokens=30, temperature=0).tokens[0]
    stop = int(base[12])
    first = int((base == stop).nonzero()[0])
    expect = base[: first + 1]
    # drafter = target: the stop is among accepted drafts; a weak drafter: often the target's token
    for d in (target, draft, None):
        for k in (2, 5):
            out = generate(target, prompts[0], drafter=d, k=k, max_new_tokens=30, temperature=0,
                           stop_token_ids=[stop])
            assert torch.equal(out.tokens[0], expect) and out.finish == ["stop"]


def test_exact_max_length_no_overshoot(models, prompts):
    target, draft = models
    for n_new in (0, 1, 2, 5, 17):
        for d in (None, draft, target):
            out = generate(target, prompts[:3], drafter=d, k=8, max_new_tokens=n_new, temperature=1.0,
                           generator=torch.Generator().manual_seed(n_new))
            assert [len(t) for t in out.tokens] == [n_new] * 3
            assert out.finish == ["length"] * 3
            one = generate(target, prompts[0], drafter=d, k=8, max_new_tokens=n_new, temperature=0)
            emitted = 0
            for s in one.stats.steps:  # the draft is clipped to the remaining budget minus one
                assert s["k"] == (0 if d is None else min(8, n_new - emitted - 1))
                emitted += s["emitted"]
            assert emitted == n_new


def test_cancel_returns_consistent_prefix_and_models_reusable(models, prompts):
    target, draft = models
    full = generate(target, prompts, drafter=draft, k=3, max_new_tokens=20, temperature=0,
                    stop_token_ids=[5])
    calls = {"n": 0}

    def after_three():
        calls["n"] += 1
        return calls["n"] > 3

    cut = generate(target, prompts, drafter=draft, k=3, max_new_tokens=20, temperature=0,
                   stop_token_ids=[5], cancel=after_three)
    assert cut.cancelled
    for a, b, f in zip(cut.tokens, full.tokens, cut.finish):
        assert torch.equal(a, b[: len(a)])
        assert f in ("cancelled", "stop", "length")
    assert sum(len(t) for t in cut.tokens) < sum(len(t) for t in full.tokens)
    again = generate(target, prompts, drafter=draft, k=3, max_new_tokens=20, temperature=0, stop_token_ids=[5])
    assert all(torch.equal(a, b) for a, b in zip(again.tokens, full.tokens))


class _CancelInDraft(PromptLookupDrafter):
    """Sets the event while proposing its `at`-th draft: cancellation mid-draft."""

    def __init__(self, event, at):
        super().__init__(V)
        self.event, self.at, self.n = event, at, 0

    def propose(self, k, sampling, generator):
        self.n += 1
        if self.n == self.at:
            self.event.set()
        return super().propose(k, sampling, generator)


def test_cancel_mid_draft_mid_batch(models, prompts):
    target, _ = models
    full = generate(target, prompts, drafter=PromptLookupDrafter(V), k=4, max_new_tokens=20, temperature=0)
    ev = threading.Event()
    d = _CancelInDraft(ev, at=3)
    cut = generate(target, prompts, drafter=d, k=4, max_new_tokens=20, temperature=0, cancel=ev)
    assert cut.cancelled and len(cut.stats.steps) == 2
    for a, b in zip(cut.tokens, full.tokens):
        assert torch.equal(a, b[: len(a)]) and 0 < len(a) < 20
    pre = generate(target, prompts, max_new_tokens=5, temperature=0, cancel=threading.Event())
    ev_set = threading.Event()
    ev_set.set()
    assert generate(target, prompts, max_new_tokens=5, temperature=0, cancel=ev_set).tokens[0].numel() == 0
    assert not pre.cancelled and [len(t) for t in pre.tokens] == [5] * len(prompts)


def test_rows_finish_at_different_times(models, prompts):
    """Per-row stop tokens end rows at different steps; the survivors stay identical to single runs."""
    target, draft = models
    base = [generate(target, p, max_new_tokens=25, temperature=0).tokens[0] for p in prompts]
    stop = int(base[0][4])
    out = generate(target, prompts, drafter=draft, k=3, max_new_tokens=25, temperature=0, stop_token_ids=[stop])
    lens = set()
    for p, b, t, f in zip(prompts, base, out.tokens, out.finish):
        hits = (b == stop).nonzero()
        end = int(hits[0]) + 1 if len(hits) else 25
        assert torch.equal(t, b[:end]) and f == ("stop" if len(hits) else "length")
        lens.add(end)
    assert len(lens) > 1, "the test needs rows that finish at different times"
    assert min(s["active"] for s in out.stats.steps) < len(prompts)  # finished rows left the batch


def test_a_named_verifier_replaces_verify(models, prompts):
    """verifier=...: the engine calls it with verify's arguments instead of verify (how measurement
    code passes instrumentation in); here one that accepts every draft and emits -1 never."""
    target, draft = models
    calls = []

    def accept_all(drafts, q, p, *, method, generator):
        calls.append((drafts.shape, q.shape, p.shape, method))
        A, k = drafts.shape
        return verify(drafts, p[:, :k].clone(), p, method=method, generator=generator)  # q := p: all accepted

    out = generate(target, prompts, drafter=draft, k=3, max_new_tokens=12, temperature=1.0, method="block",
                   generator=torch.Generator().manual_seed(1), verifier=accept_all)
    assert calls and all(m == "block" and d[1] == 3 and q[1] == 3 and p[1] == 4 for d, q, p, m in calls)
    assert all(r["accepted"] == r["k"] for r in out.stats.accept_rows())
    assert all(len(t) == 12 for t in out.tokens)


def test_stats_tidy_and_consistent(models, prompts):
    target, draft = models
    out = generate(target, prompts[:2], drafter=draft, k=3, max_new_tokens=12, temperature=0)
    assert not any(t.is_inference() for t in out.tokens)  # the loop runs in inference mode; its output does not
    st = out.stats
    steps = st.step_rows()
    assert len({tuple(r) for r in steps}) == 1  # same columns in every row
    assert sum(r["emitted"] for r in steps) == sum(len(t) for t in out.tokens)
    for r in steps:
        parts = r["t_draft"] + r["t_target"] + r["t_accept"] + r["t_rollback"] + r["t_other"]
        assert abs(parts - r["t_step"]) < 1e-9 and r["t_draft_forward"] <= r["t_draft"] + 1e-9
    toks = st.token_rows()
    assert len(toks) == sum(len(t) for t in out.tokens)
    assert all(t["latency_s"] >= 0 for t in toks)
    summ = st.summary()
    assert summ["ttft_s"] > 0 and summ["peak_memory_bytes"] > 0 and 0 <= summ["overhead_share"] <= 1
    assert sum(p["accepted"] for p in st.acceptance_by_position()) == sum(r["accepted"] for r in st.accept_rows())


@pytest.mark.parametrize("kw, match", [
    (dict(input_ids=torch.tensor([], dtype=torch.long)), "empty prompt"),
    (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), "empty prompt"),
    (dict(input_ids=torch.zeros(129, dtype=torch.long)), "longer than the target's context"),
    (dict(input_ids=torch.zeros(120, dtype=torch.long)), "exceeds the target's context"),
    (dict(input_ids=torch.tensor([1.0, 2.0])), "integer"),
    (dict(input_ids=torch.tensor([1, V])), r"token ids must lie"),
    (dict(k=0), "k must be"),
    (dict(max_new_tokens=-1), "max_new_tokens"),
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(method="tree"), "method"),
    (dict(drafter="draft"), "drafter"),
    (dict(cancel=3), "cancel"),
    (dict(verifier=1.5), "verifier"),
    (dict(stop_token_ids=[V]), "stop_token_ids"),
    (dict(stop_token_ids=3), "stop_token_ids"),
    (dict(k=-1), "k must be"),
    (dict(k=True), "k must be"),
    (dict(k=2.5), "k must be"),
    (dict(cancel="stop"), "cancel"),
    (dict(cancel=object()), "cancel"),
    (dict(temperature=float("inf")), "temperature"),
    (dict(top_k=1.5), "top_k"),
    (dict(top_p=float("nan")), "top_p"),
    (dict(max_new_tokens=2.0), "max_new_tokens"),
    (dict(input_ids=[]), "empty prompt"),
    (dict(input_ids=[torch.tensor([1, 2]), torch.tensor([], dtype=torch.long)]), "empty prompt"),
    (dict(input_ids=torch.zeros(2, 2, 2, dtype=torch.long)), "input_ids"),
    (dict(input_ids=[[1, 2]]), "input_ids"),
])
def test_bad_input_raises(models, kw, match):
    target, draft = models
    args = dict(input_ids=torch.tensor([1, 2, 3]), drafter=draft, max_new_tokens=10)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        generate(target, args.pop("input_ids"), **args)


def test_vocab_mismatch_raises(models):
    target, _ = models
    other = _gpt2(2, n_layer=1, n_embd=32, vocab=V + 1)
    with pytest.raises(ValueError, match="vocabulary"):
        generate(target, torch.tensor([1, 2]), drafter=other, max_new_tokens=4)
    with pytest.raises(ValueError, match="vocabulary"):
        generate(target, torch.tensor([1, 2]), drafter=PromptLookupDrafter(V - 1), max_new_tokens=4)


def test_inputs_not_mutated(models, prompts):
    target, draft = models
    before = prompts.clone()
    generate(target, prompts, drafter=draft, k=3, max_new_tokens=8, temperature=1.0,
             generator=torch.Generator().manual_seed(0))
    assert torch.equal(prompts, before)


def test_greedy_fast_path_equals_verify_on_one_hot():
    """The engine's greedy path against specdec.verify on one-hot p and q (both methods), with
    logits rounded to a coarse grid so exact ties occur, and drafts that often match."""
    g = torch.Generator().manual_seed(0)
    for k in (1, 3, 6):
        logits = (torch.randn(200, k + 1, 12, generator=g) * 2).round()  # (A, k+1, V), many ties
        best = logits.argmax(-1)
        drafts = torch.where(torch.rand(200, k, generator=g) < 0.7, best[:, :k], torch.randint(0, 12, (200, k), generator=g))
        n, toks = greedy_verify(drafts, logits)
        p = process_logits(logits, temperature=0)
        q = torch.nn.functional.one_hot(drafts, 12).float()
        for method in ("token", "block"):
            ref = verify(drafts, q, p, method=method, generator=torch.Generator().manual_seed(1))
            assert torch.equal(n, ref.num_accepted) and torch.equal(toks, ref.tokens)
        assert 0 < int((n == k).sum()) < 200  # both full acceptance and rejections occurred
