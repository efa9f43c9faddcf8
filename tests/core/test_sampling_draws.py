"""specdec.core.sampling.draws: n draws of one uniform per row at once are the numbers n separate
draws would give, for one generator and for per-row generators (a drafter relies on it to keep the
same tokens for the same seed while drawing once per propose)."""

import torch

from specdec.core.sampling import RowGenerators, draws, uniforms


def test_draws_equal_successive_single_draws_for_both_generator_kinds():
    one = [uniforms((3,), torch.Generator().manual_seed(7), "cpu")]
    g = torch.Generator().manual_seed(7)
    singles = torch.stack([uniforms((3,), g, "cpu") for _ in range(4)])
    assert torch.equal(draws(4, 3, torch.Generator().manual_seed(7), "cpu"), singles)
    assert torch.equal(singles[0], one[0])

    def rows():
        return RowGenerators([torch.Generator().manual_seed(s) for s in (1, 2)])

    r = rows()
    per_row = torch.stack([uniforms((2,), r, "cpu") for _ in range(5)])  # (5, 2)
    got = draws(5, 2, rows(), "cpu")
    assert got.shape == (5, 2) and torch.equal(got, per_row)
    assert not torch.equal(got[:, 0], got[:, 1]), "each row draws from its own generator"


def test_sample_below_gives_the_guarded_inverse_cdfs_ids_without_the_guard():
    """Softmax rows (float32 and float64) and uniforms up to the largest below 1: `sample_below` with
    `below_one` thresholds picks exactly `sample_inverse_cdf`'s ids, a zero-probability token never;
    the negative control -- a float32 threshold of exactly 1 -- does pick the zero-probability last
    token, which is what `below_one`'s clamp prevents."""
    from specdec.core.sampling import below_one, sample_below, sample_inverse_cdf

    g = torch.Generator().manual_seed(11)
    top = torch.tensor([1 - 2.0 ** -53, 1 - 2.0 ** -30, 1 - 2.0 ** -25, 1 - 2.0 ** -24, 0.0], dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        logits = torch.randn(400, 64, generator=g, dtype=torch.float64) * 3
        logits[:, -5:] = float("-inf")  # the last tokens have probability zero
        q = torch.softmax(logits.to(dtype), -1)
        u = torch.cat([torch.rand(400 - 5, generator=g, dtype=torch.float64), top])
        got = sample_below(q, below_one(u, dtype))[:, 0]
        assert torch.equal(got, sample_inverse_cdf(q, u))
        assert (q.gather(1, got[:, None]) > 0).all()
    q = torch.tensor([[0.5, 0.5, 0.0]])
    assert sample_below(q, below_one(torch.tensor([1 - 1e-12], dtype=torch.float64), torch.float32)).item() == 1
    assert sample_below(q, torch.ones(1, 1)).item() == 2, "without the clamp a threshold of 1 reaches the zero"
