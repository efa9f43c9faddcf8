"""Chapter 01's computations (`specdec.chapters.ch01.one_step`): the toy pair worked by hand, the edge
cases, the sampled verify against p with a negative control, and the replacement rules."""

import math

import pytest
import torch

from specdec.core.stats import gof_test
from specdec.chapters.ch01 import one_step

F64 = torch.float64
P_TOY = torch.tensor([1 / 3, 2 / 3], dtype=F64)  # target of the two-token toy pair
Q_TOY = torch.tensor([2 / 3, 1 / 3], dtype=F64)  # its draft


def test_per_token_rows_on_the_toy_pair_by_hand():
    # a = [1/2, 1], accepted q a = min{p, q} = [1/3, 1/3], beta = 2/3, missing [p - q]+ = [0, 1/3],
    # r = [0, 1], rejection branch (1 - beta) r = [0, 1/3], pi = accepted + rejected = p
    rows = one_step.per_token_rows(P_TOY, Q_TOY)
    want = [dict(a=0.5, accepted_qa=1 / 3, missing=0.0, r=0.0, rejected_mass_r=0.0, pi=1 / 3),
            dict(a=1.0, accepted_qa=1 / 3, missing=1 / 3, r=1.0, rejected_mass_r=1 / 3, pi=2 / 3)]
    for row, w in zip(rows, want):
        for col, v in w.items():
            assert row[col] == pytest.approx(v, abs=1e-15), (row["token"], col)
        assert abs(row["pi_minus_p"]) < 1e-15
        assert row["accepted_qa"] + row["rejected_mass_r"] == pytest.approx(row["pi"], abs=1e-15)


def test_mass_decomposition_adds_up_to_p():
    p, q = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(0))
    rows = one_step.mass_decomposition_rows(one_step.per_token_rows(p, q))
    assert [r["token"] for r in rows] == list(range(8))
    for r in rows:
        assert r["accepted"] + r["residual_part"] == pytest.approx(r["p"], abs=1e-15)


def test_example_pair_is_seeded_and_truncated():
    a = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(3))
    b = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(3))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
        assert x.dtype == F64 and float(x.sum()) == pytest.approx(1.0) and int((x == 0).sum()) >= 2  # top-6 of 8


def test_random_pairs_and_their_errors():
    P, Q = one_step.random_pairs(300, 8, torch.Generator().manual_seed(1))
    assert P.shape == Q.shape == (300, 8)
    assert torch.allclose(P.sum(-1), torch.ones(300, dtype=F64)) and torch.allclose(Q.sum(-1), torch.ones(300, dtype=F64))
    errs = one_step.pair_errors(P, Q)
    assert errs["err_random"] < 1e-14 and errs["mass_identity"] < 1e-14


def test_edge_cases_are_exact_with_the_betas_they_must_have():
    P, Q = one_step.random_pairs(2, 8, torch.Generator().manual_seed(2))
    rows = {r["case"]: r for r in one_step.edge_case_rows(one_step.edge_cases(8, P[0], Q[1]))}
    assert len(rows) == 6
    assert all(r["max_abs_pi_minus_p"] < 1e-15 and not r["any_nan"] for r in rows.values())
    assert rows["equal"]["beta"] == pytest.approx(1.0)
    assert rows["p zero where q positive"]["beta"] == pytest.approx(0.5)  # min{uniform on 4, uniform on 8}
    assert rows["q zero where p positive"]["beta"] == pytest.approx(0.5)
    assert rows["disjoint supports"]["beta"] == 0.0
    assert rows["both greedy, different argmax"]["beta"] == 0.0


def test_sampled_verify_follows_p_and_a_wrong_law_fails():
    p, q = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(0))
    n = 20_000
    run = one_step.sampled_verify(p, q, n, torch.Generator().manual_seed(5))
    rows = run.rows()
    counts = [r["count"] for r in rows]
    assert sum(counts) == n and [r["token"] for r in rows] == list(range(8))
    assert rows[0]["expected"] == pytest.approx(float(p[0]) * n)
    assert gof_test(counts, p.numpy()).p_value > 1e-3
    assert gof_test(counts, q.numpy()).p_value < 1e-6  # negative control: the draft's law is caught
    beta = float(torch.minimum(p, q).sum())
    assert abs(run.accept_rate - beta) < 4 * math.sqrt(beta * (1 - beta) / n)


def test_replacement_rules_on_the_toy_pair_by_hand():
    # beta = 2/3; fresh sample from p: [1/3 + p/3] = [4/9, 5/9], TV 1/9;
    # uniform over both tokens: [1/3 + 1/6, 1/3 + 1/6], TV 1/6; argmax (token 1) is the residual here: TV 0
    laws = one_step.replacement_laws(P_TOY, Q_TOY, spread=2)
    tv = {r["rule"]: r["tv_from_p"] for r in one_step.replacement_tv_rows(laws, P_TOY)}
    assert tv == pytest.approx({"residual r (correct)": 0.0, "fresh sample from p": 1 / 9, "argmax of p": 0.0,
                                "uniform over top-2 of p": 1 / 6}, abs=1e-15)
    rows = one_step.replacement_rule_rows(laws, P_TOY)
    assert len(rows) == 4 * 2 and rows[2] == dict(rule="fresh sample from p", token=0, probability=pytest.approx(4 / 9),
                                                  target=pytest.approx(1 / 3))


def test_replacement_laws_are_distributions_and_only_the_residual_is_p():
    p, q = one_step.example_pair(8, 0.9, 6, torch.Generator().manual_seed(0))
    laws = one_step.replacement_laws(p, q)
    tv = {r["rule"]: r["tv_from_p"] for r in one_step.replacement_tv_rows(laws, p)}
    assert all(float(law.sum()) == pytest.approx(1.0) for law in laws.values())
    assert tv.pop("residual r (correct)") < 1e-15
    assert min(tv.values()) > 0.01
