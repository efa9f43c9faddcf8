"""Drafters: q is the processed distribution each draft was sampled from, rollback keeps the
drafter's state equal to a fresh encoding of the committed prefix, and the model drafter never
re-encodes what it cached.  Checked against independent references (no-cache forwards, the
n-gram table itself) and a hand-worked prompt-lookup case."""

import pytest
import torch

from specdec.core.sampling import SamplingConfig as Sampling
from specdec.engine.drafters import ModelDrafter
from specdec.engine.history import NGramDrafter, PromptLookupDrafter

V = 64


def _gpt2(seed):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)  # model construction only, in the test
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V, n_positions=128,
                                      bos_token_id=0, eos_token_id=0, initializer_range=0.05)).eval()


class _Trigram:
    """Random trigram table with the NGramModel interface: logits(ids (B, W)) -> (B, V) log-probs."""

    order = 3

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.log_softmax(2 * torch.randn(V, V, V, generator=g), -1)
        self.vocab_size = V
        self.seen = []

    def logits(self, ids):
        self.seen.append(ids.shape[1])
        return self.table[ids[:, -2], ids[:, -1]]


def _left_pad(rows):
    T = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, T - len(r):], mask[b, T - len(r):] = torch.tensor(r), 1
    return ids, mask


def _drive(drafter, rows, plans, sampling, check):
    """Run propose/commit with scripted accepted counts; `check(history_b, drafts_b, q_b, b)`
    is called for every row after each propose.  Returns the final histories."""
    hist = [list(r) for r in rows]
    drafter.begin(*_left_pad(rows))
    g = torch.Generator().manual_seed(0)
    for k, ns, nxt in plans:  # ns: accepted per row, nxt: the target's token per row
        d, q = drafter.propose(k, sampling, g)
        assert d.shape == (len(rows), k) and q.shape == (len(rows), k, V)
        assert torch.allclose(q.sum(-1), torch.ones(len(rows), k), atol=1e-5)
        assert (q.gather(-1, d[..., None]) > 0).all(), "a draft outside the support of its q"
        for b in range(len(rows)):
            check(hist[b], d[b], q[b], b)
        n = torch.tensor(ns)
        drafter.commit(n, torch.tensor(nxt), int(n.max()))
        for b in range(len(rows)):
            hist[b] += d[b, : ns[b]].tolist() + [nxt[b]]
    return hist


PLANS = [(3, [0, 3, 1], [7, 8, 9]), (4, [4, 2, 0], [10, 11, 12]), (2, [1, 2, 2], [13, 14, 15]),
         (5, [5, 5, 3], [16, 17, 18]), (1, [0, 1, 1], [19, 20, 21])]
ROWS = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10, 11]]


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.7, top_k=5), Sampling(1.0, top_p=0.8), Sampling(0.0)],
                         ids=["T1", "topk", "topp", "greedy"])
def test_model_drafter_q_equals_fresh_forward_after_rollbacks(sampling):
    model = _gpt2(1)
    fed = []
    hook = model.register_forward_pre_hook(lambda m, a, kw: fed.append(kw["input_ids"].shape[1]),
                                                       with_kwargs=True)

    def check(h, d, q, b):
        ctx = torch.tensor(h + d.tolist())
        with torch.no_grad():
            ref = sampling.process(model(input_ids=ctx[None]).logits[0, len(h) - 1:len(h) - 1 + len(d)])  # (k, V)
        assert torch.allclose(q, ref, atol=1e-5), f"row {b}: q differs from a fresh forward"

    d = ModelDrafter(model)
    n_checks = [0]

    def counting_check(*a):
        fed_now = list(fed)
        check(*a)
        fed[:] = fed_now  # reference forwards are not the drafter's
        n_checks[0] += 1

    _drive(d, ROWS, PLANS, sampling, counting_check)
    hook.remove()
    assert n_checks[0] == len(PLANS) * len(ROWS)
    # never re-encodes: per propose one call of the 1-2 uncached tokens (the first also feeds the
    # prompt before its last token: T-1 more) and k-1 calls of one
    calls = fed
    i = 0
    prev_all = False
    for k, ns, _ in PLANS:
        first = max(len(r) for r in ROWS) - 1 if i == 0 else 0
        assert calls[i] == first + (2 if prev_all else 1), "the tail fed to the draft is 1 token (2 after a full accept)"
        assert calls[i + 1:i + k] == [1] * (k - 1)
        i += k
        prev_all = max(ns) == k
    assert i == len(calls)


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.5, top_k=4), Sampling(0.0)], ids=["T1", "topk", "greedy"])
def test_ngram_drafter_q_is_processed_table(sampling):
    m = _Trigram(2)

    def check(h, d, q, b):
        ctx = h + d.tolist()
        for i in range(len(d)):
            a, c = ctx[len(h) - 2 + i], ctx[len(h) - 1 + i]
            assert torch.allclose(q[i], sampling.process(m.table[a, c]), atol=1e-6)

    final = _drive(NGramDrafter(m), ROWS, PLANS, sampling, check)
    assert set(m.seen) == {2}  # order - 1 tokens of context
    assert len(final[0]) == len(ROWS[0]) + sum(p[1][0] + 1 for p in PLANS)


def test_prompt_lookup_worked_example_and_rules():
    d = PromptLookupDrafter(V, max_ngram=2)
    d.begin(*_left_pad([[5, 6, 7, 5]]))
    toks, q = d.propose(3, Sampling(1.0), None)
    assert toks.tolist() == [[6, 7, 5]]  # "5" matched at 0: copy 6, 7, then continue periodically
    assert torch.equal(q, torch.nn.functional.one_hot(toks, V).float())
    d.commit(torch.tensor([1]), torch.tensor([9]), 1)  # history 5 6 7 5 6 9
    assert d.propose(2, Sampling(0.0), None)[0].tolist() == [[9, 9]]  # no match: repeat the last token
    d2 = PromptLookupDrafter(V, max_ngram=2)
    d2.begin(*_left_pad([[1, 2, 3, 9, 2, 4, 1, 2]]))
    assert d2.propose(2, Sampling(1.0), None)[0].tolist() == [[3, 9]]  # longest n-gram "1 2" wins over "2"
    with pytest.raises(ValueError):
        PromptLookupDrafter(V, max_ngram=0)
