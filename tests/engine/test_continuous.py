"""The continuous-batching loop (`specdec.engine.continuous.serve`): arrivals and admission, ragged
departures, batch invariance of each request's tokens (greedy and sampled, each request with its own
generator), cancellation with memory release, idle time skipped, and bad inputs named."""

import numpy as np
import pytest
import torch
from shared_helpers import serving_jobs

from specdec.engine.cache import join_caches, kv_bytes
from specdec.engine.continuous import Job, serve
from specdec.engine.decode import generate
from specdec.engine.history import PromptLookupDrafter
from specdec.engine.schedule import LoadAware


def _jobs(n=7, gap=0.001, cancel=None, seed=5):
    """n requests with ragged prompts (3..11 tokens) and budgets (4..19), arriving `gap` seconds apart."""
    return serving_jobs(n, gap=gap, cancel=cancel, seed=seed)


def _alone(target, jobs, **kw):
    return [serve(target, [Job(j.prompt, j.max_new_tokens, 0.0, j.seed, j.cancel_after)], max_batch=1,
                  **kw).requests[0]["tokens"] for j in jobs]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("spec", [False, True])
def test_tokens_do_not_depend_on_the_batch(tiny_pair, temperature, spec):
    target, draft = tiny_pair
    kw = dict(drafter=draft if spec else None, k=3, temperature=temperature)
    jobs = _jobs()
    alone = _alone(target, jobs, **kw)
    for max_batch in (3, 5):  # fewer slots than requests: later ones join a running batch whatever the timing
        res = serve(target, jobs, max_batch=max_batch, **kw)
        assert [r["tokens"] for r in res.requests] == alone
        assert all(len(r["tokens"]) == j.max_new_tokens and r["finish"] == "length" for r, j in zip(res.requests, jobs))
        assert max(s["running"] for s in res.steps) <= max_batch
        assert any(s["admitted"] and s["running"] > s["admitted"] for s in res.steps)  # joined a running batch
        assert res.lossless and res.steps[-1]["kv_after_bytes"] == 0


def test_greedy_serving_matches_generate(tiny_pair):
    target, draft = tiny_pair
    job = _jobs(1)[0]
    want = generate(target, job.prompt, max_new_tokens=job.max_new_tokens, temperature=0,
                    mode="eager").tokens[0].tolist()  # serve runs the models as given
    for dr in (None, draft):
        got = serve(target, [job], drafter=dr, k=4, max_batch=1, temperature=0).requests[0]["tokens"]
        assert got == want


def test_admission_is_fifo_bounded_and_never_early(tiny_pair):
    target, draft = tiny_pair
    jobs = _jobs(6, gap=0.0)  # all arrive at once: two wait for a slot
    res = serve(target, jobs, drafter=draft, k=2, max_batch=4, temperature=1.0)
    adm = [r["admitted_s"] for r in res.requests]
    assert all(a >= j.arrival_s for a, j in zip(adm, jobs)) and adm == sorted(adm)
    assert res.steps[0]["running"] == 4 and max(adm) > min(adm)
    for r in res.requests:  # tokens arrive after admission, in order, with one time per token
        assert len(r["token_times"]) == len(r["tokens"]) and r["token_times"] == sorted(r["token_times"])
        assert r["token_times"][0] > r["admitted_s"]


def test_idle_time_is_skipped_not_slept(tiny_pair):
    target, _ = tiny_pair
    jobs = [Job(torch.tensor([1, 2, 3]), 4, 0.0, 0), Job(torch.tensor([4, 5]), 4, 1000.0, 1)]
    res = serve(target, jobs, max_batch=2, temperature=0)
    assert res.requests[1]["admitted_s"] >= 1000.0  # it waited for its arrival on the clock ...
    assert res.requests[1]["token_times"][-1] - 1000.0 < 60  # ... and the run did not sleep through it
    assert sum(s["admitted"] for s in res.steps) == 2 and res.steps[-1]["kv_after_bytes"] == 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cancellation_keeps_others_and_releases_memory(tiny_pair, temperature):
    target, draft = tiny_pair
    kw = dict(drafter=draft, k=3, temperature=temperature, max_batch=4)
    full = serve(target, _jobs(), **kw)
    cut = serve(target, _jobs(cancel={1: 2, 4: 5}), **kw)
    for i, (a, b) in enumerate(zip(full.requests, cut.requests)):
        if i in (1, 4):
            assert b["finish"] == "cancelled" and b["tokens"] == a["tokens"][:len(b["tokens"])]
            assert len(b["tokens"]) >= {1: 2, 4: 5}[i] and len(b["tokens"]) < len(a["tokens"])
            assert b["step_released_bytes"] >= b["step_departed"] * b["row_kv_bytes"] > 0  # every leaving row went
            assert 0 < b["needed_kv_bytes"] <= b["row_kv_bytes"]
        else:
            assert b["tokens"] == a["tokens"] and b["finish"] == "length"
    assert cut.steps[-1]["kv_after_bytes"] == 0
    for s in cut.steps[:-1]:  # after a step, the caches hold at most the rows that stayed
        total = s["kv_target_bytes"] + s["kv_draft_bytes"]
        assert s["kv_after_bytes"] * s["running"] <= total * (s["running"] - s["departed"])
        if s["departed"] == 0:
            assert s["kv_after_bytes"] == total


def test_a_departed_long_prompt_frees_its_leading_slots(tiny_pair):
    target, _ = tiny_pair
    jobs = [Job(torch.arange(60) % 64, 2, 0.0, 0), Job(torch.tensor([3, 4]), 12, 0.0, 1)]
    res = serve(target, jobs, max_batch=2, temperature=0)
    per_row = [s["kv_target_bytes"] / s["running"] for s in res.steps]
    assert res.steps[0]["running"] == 2 and res.steps[-1]["running"] == 1
    assert per_row[-1] < per_row[0] / 4  # the short prompt's row no longer carries 60 padding slots


def test_drafters_catch_up_after_steps_without_drafts(tiny_pair):
    """A load-aware policy drafts nothing while the batch is large; when it resumes, the drafter must
    know every token emitted meanwhile.  With the target as its own drafter every greedy draft is then
    accepted; a stale drafter context would reject some."""
    target, _ = tiny_pair
    res = serve(target, _jobs(gap=0.0), drafter=target, k=LoadAware(3, max_batch=2), max_batch=4, temperature=0)
    ks = [s["k"] for s in res.steps]
    assert 0 in ks and any(k > 0 and i > ks.index(0) for i, k in enumerate(ks))  # off, then on again
    assert all(s["accepted"] == s["drafted"] for s in res.steps)
    toggle = lambda h: 0 if h.steps % 3 else 3  # noqa: E731
    one = generate(target, _jobs(1)[0].prompt, drafter=target, k=toggle, max_new_tokens=24, temperature=0)
    assert all(s["emitted"] == s["k"] + 1 for s in one.stats.steps[:-1])
    d = PromptLookupDrafter(64)
    ids = torch.tensor([5, 6, 7, 5, 6])
    out = generate(target, ids, drafter=d, k=toggle, max_new_tokens=12, temperature=0).tokens[0]
    seen = torch.cat([ids, out]).tolist()
    assert d.hist[0, :int(d.lens[0])].tolist() == seen[:int(d.lens[0])] and int(d.lens[0]) > len(ids) + 4


def test_join_caches_pads_on_the_left():
    from transformers import DynamicCache

    a, b = DynamicCache(), DynamicCache()
    ka, kb = torch.randn(2, 1, 5, 3), torch.randn(1, 1, 3, 3)
    a.update(ka, ka + 1, 0)
    b.update(kb, kb + 1, 0)
    c = join_caches(a, b, 2, 1)
    keys = c.layers[0].keys
    assert keys.shape == (3, 1, 5, 3) and torch.equal(keys[:2], ka) and torch.equal(keys[2, :, 2:], kb[0])
    assert torch.count_nonzero(keys[2, :, :2]) == 0 and kv_bytes(c) == 2 * 3 * 5 * 3 * 4


@pytest.mark.parametrize("jobs, kw, match", [
    ([], {}, "empty workload"),
    (None, dict(max_batch=0), "max_batch"),
    ([Job(torch.tensor([1]), 4, -1.0, 0)], {}, "arrival_s"),
    ([Job(torch.tensor([1]), 0, 0.0, 0)], {}, "max_new_tokens"),
    ([Job(torch.tensor([1]), 4, 0.0, 0, cancel_after=0)], {}, "cancel_after"),
    ([Job(torch.arange(200) % 64, 4, 0.0, 0)], {}, "longer than the target's context"),
    ([Job(torch.tensor([1, 99]), 4, 0.0, 0)], {}, "token ids"),
    (["not a job"], {}, "not a Job"),
    ([Job(torch.tensor([1]), 4, 0.0, 1.5), Job(torch.tensor([1]), 4, 0.0, 1)], {},
     r"job 0: seed must be an integer .*got 1\.5 \(float\)"),  # never seed 1, as the second job's
    ([Job(torch.tensor([1]), 4, 0.0, 0), Job(torch.tensor([1]), 4, 0.0, "abc")], {},
     r"job 1: seed must be an integer .*got 'abc' \(str\)"),
    ([Job(torch.tensor([1]), 4, 0.0, True)], {}, "job 0: seed must be an integer"),
])
def test_bad_inputs_are_named(tiny_pair, jobs, kw, match):
    target, _ = tiny_pair
    with pytest.raises(ValueError, match=match):
        serve(target, [Job(torch.tensor([1]), 4, 0.0, 0)] if jobs is None else jobs, **{"max_batch": 2, **kw})


def test_row_generators_give_each_row_its_own_stream():
    from specdec.core.sampling import RowGenerators, uniforms

    gens = RowGenerators([torch.Generator().manual_seed(s) for s in (1, 2)])
    u = uniforms((2, 3), gens, "cpu")
    assert torch.equal(u[1], torch.rand(3, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    assert torch.equal(uniforms((1, 2), gens.select([1]), "cpu")[0],
                       torch.rand(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)[3:5])
    with pytest.raises(ValueError, match="row generators"):
        uniforms((3, 2), gens, "cpu")


def test_a_drafter_without_the_serving_methods_is_named(tiny_pair):
    target, _ = tiny_pair

    from specdec.engine.drafters import Drafter

    class Old(Drafter):  # a drafter without the optional methods: no joining rows, no steps without drafts
        vocab_size = 64

        def begin(self, ids, mask): ...

        def propose(self, k, sampling, generator): ...

        def commit(self, n, next_token, n_max): ...

        def select(self, rows): ...

    with pytest.raises(ValueError, match="lacks advance, admit"):
        serve(target, _jobs(2), drafter=Old(), k=2, max_batch=2)
    with pytest.raises(ValueError, match="no advance method"):
        generate(target, torch.tensor([1, 2]), drafter=Old(), k=LoadAware(2, max_batch=1), max_new_tokens=4)


def test_ngram_drafts_do_not_depend_on_the_batch():
    """Each row of the n-gram drafter sees its own window (its order - 1 tokens, or all of a shorter
    history), so a row drafts the same alone and beside a shorter row (greedy drafts: deterministic)."""
    from specdec.core.sampling import SamplingConfig
    from specdec.engine.history import NGramDrafter
    from specdec.engine.inputs import prompts_of
    from specdec.family.ngram import NGramModel

    g = torch.Generator().manual_seed(3)
    rule, noise = torch.randint(0, 8, (8, 8), generator=g), torch.randint(0, 8, (8000,), generator=g)
    text = [0, 1]  # mostly the next token from the last two, one token in five at random (no short cycle)
    for i in range(8000):
        text.append(int(noise[i]) if i % 5 == 0 else int(rule[text[-2], text[-1]]))
    model = NGramModel.fit(np.array(text), 64)  # a trigram model: its window is 2 tokens
    prompts = [torch.tensor(text[7 * i: 7 * i + 1 + i % 2]) for i in range(6)]  # 1 or 2 tokens of the text

    def drafts(rows):
        d = NGramDrafter(model)
        d.begin(*prompts_of(rows, 64, "cpu"))
        return d.propose(3, SamplingConfig(0.0), None)[0].tolist()

    assert drafts(prompts) == [drafts([p])[0] for p in prompts]
