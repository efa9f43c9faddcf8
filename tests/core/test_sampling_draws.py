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
