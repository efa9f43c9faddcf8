"""Chapter 06's measurement and summaries (specdec.measure.decoding_runs / decoding_summary) on the
tiny random-weight pair: the rows' shape and labels, seeding that does not depend on run order, a
hand-worked summary, and the figures drawn from the tables.  Timings are never asserted."""

import math

import pytest
import torch

from specdec.core.cost import speedup
from specdec.measure import decoding_runs as dr
from specdec.measure import decoding_summary as ds
from specdec.report import plotting

KS, LENS, BATCHES = [1, 2], [12], [1, 2]


@pytest.fixture(scope="module")
def measured(tiny_pair):
    target, draft = tiny_pair
    prompts = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(3))  # (B_max, T) random ids
    curve = dr.cost_curves(target, draft, "draft", BATCHES, [1, 2, 3], context=8, repeats=2,
                           generator=torch.Generator().manual_seed(0))
    curves, cs = dr.curves_by_batch(curve)
    runs = dr.decoding_runs(target, draft, prompts, LENS, BATCHES, KS, curves, cs, temperature=1.0, warmup_steps=2,
                            k_start=2, repeats=2, warmup=1, seed=5)
    return dict(curve=curve, curves=curves, cs=cs, runs=runs, prompts=prompts)


def test_cost_curves_per_batch(measured):
    curve, curves, cs = measured["curve"], measured["curves"], measured["cs"]
    assert [(r["model"], r["n"], r["batch"]) for r in curve] == [
        (m, n, B) for B in BATCHES for m, n in [("target", 1), ("target", 2), ("target", 3), ("draft", 1)]]
    for B in BATCHES:
        draft_t1 = next(r["median_s"] for r in curve if r["model"] == "draft" and r["batch"] == B)
        assert set(curves[B]) == {1, 2, 3} and cs[B] == pytest.approx(draft_t1 / curves[B][1])


def test_decoding_runs_rows(measured):
    runs = measured["runs"]
    configs = ["baseline", "k=1", "k=2", "dynamic"]
    assert len(runs) == len(LENS) * len(BATCHES) * len(configs) * 2  # cells x configs x timed rounds
    assert all(tuple(r) == dr.TABLE_COLUMNS for r in runs)
    assert [r["config"] for r in runs[:4]] == configs  # interleaved: every configuration once per round
    assert all(r["tokens"] == r["output_len"] * r["batch"] for r in runs)  # no stop token: exactly L per row
    for r in runs:
        k = {"baseline": 0, "dynamic": -1}.get(r["config"], r["k"])
        assert r["k"] == k
        if r["config"].startswith("k="):
            assert r["k_chosen"] == r["k"] and 0 <= r["alpha_mle"] <= 1 and r["alpha_steps"] > 0
        elif r["config"] == "baseline":
            assert r["k_chosen"] == 0 and math.isnan(r["alpha_mle"]) and r["alpha_steps"] == 0
        else:
            assert 0 <= r["k_chosen"] <= max(KS)  # the rule's choice (or the pilot's k, also <= max(KS))


def test_runs_are_seeded_by_round_not_by_order(tiny_pair, measured):
    """A configuration's tokens depend on its seed (seed + round), not on what ran before it."""
    target, draft = tiny_pair
    alone = dr.decoding_runs(target, draft, measured["prompts"], LENS, [2], [2], measured["curves"], measured["cs"],
                             temperature=1.0, warmup_steps=2, k_start=2, repeats=2, warmup=1, seed=5)
    key = lambda r: (r["config"], r["batch"], r["repeat"])  # noqa: E731
    full = {key(r): r for r in measured["runs"]}
    for r in alone:
        if r["config"] in ("baseline", "k=2"):
            assert (r["steps"], r["alpha_steps"]) == (full[key(r)]["steps"], full[key(r)]["alpha_steps"])
            assert r["alpha_mle"] == full[key(r)]["alpha_mle"] or r["config"] == "baseline"


def test_hf_runs_rows(tiny_pair, measured):
    target, draft = tiny_pair
    rows = dr.hf_runs(target, draft, measured["prompts"], [6], 2, temperature=1.0, repeats=1, warmup=0, seed=0)
    assert [r["config"] for r in rows] == ["HF generate", "HF assisted k=2"]
    assert all(tuple(r) == dr.HF_COLUMNS and r["tokens"] == 6 and r["batch"] == 1 for r in rows)
    s = ds.summarize_hf(rows)
    assert [r["config"] for r in s] == ["HF generate", "HF assisted k=2"] and all(r["runs"] == 1 for r in s)


def test_summaries_and_figures_of_a_real_run(measured):
    summary = ds.summarize_runs(measured["runs"], measured["curves"], measured["cs"])
    assert [r["config"] for r in summary] == ["baseline", "k=1", "k=2", "dynamic"] * len(BATCHES)
    for r in summary:
        assert r["runs"] == 2
        if r["config"] == "baseline":
            assert r["speedup"] == 1.0 and r["predicted_ext"] == 1.0 and r["measured_over_predicted"] == 1.0
        elif r["config"] == "dynamic":
            assert math.isnan(r["predicted_ext"]) and math.isnan(r["alpha_mle"])
        else:
            c, curve = measured["cs"][r["batch"]], measured["curves"][r["batch"]]
            assert r["predicted_ext"] == speedup(r["alpha_mle"], r["k"], c, verify_cost=curve[r["k"] + 1] / curve[1])
    vs_k = ds.speedup_vs_k(summary)
    assert [r["config"] for r in vs_k] == ["k=1", "k=2", "dynamic"] * len(BATCHES)
    assert all(r["q1"] <= r["q3"] for r in vs_k if r["config"] != "dynamic")
    breakdown = ds.time_breakdown(summary, LENS[0], BATCHES[0])
    assert len(breakdown) == len(ds.BREAKDOWN_PARTS) * 4
    for config in ("baseline", "k=2"):
        total = sum(r["share_of_total"] for r in breakdown if r["config"] == config)
        assert 0.5 < total < 1.05  # medians of shares: prefill + step parts, about all of the wall time
    v = ds.breakdown_values(breakdown, "k=2")
    assert 0 < v["target_share_kref"] < 1 and 0 <= v["overhead_share_kref"] < 1
    h = ds.headline(summary, 2, BATCHES[0])
    assert h["n_spec"] == 3 * len(BATCHES) and 0 <= h["n_slower"] <= h["n_spec"] and h["best_speedup"] > 0
    cv = ds.curve_values(measured["curve"], BATCHES[0], 3)
    assert cv["c_b1"] == pytest.approx(measured["cs"][BATCHES[0]]) and cv["tk_n"] == 3

    import pandas as pd

    from specdec.report.plotting import visible_series

    figs = [plotting.cost_curve(pd.DataFrame(measured["curve"])), plotting.speedup_vs_k(pd.DataFrame(vs_k)),
            plotting.time_breakdown(pd.DataFrame(breakdown))]
    for fig in figs:
        assert visible_series(fig) and all(seen for _, _, seen in visible_series(fig))


def _run(config, k, tps, tokens=10, total=1.0, alpha=float("nan")):
    row = {c: 0.1 for c in dr.TABLE_COLUMNS}
    row.update(output_len=10, batch=1, config=config, k=k, tokens=tokens, total_s=total, tokens_per_s=tps,
               alpha_mle=alpha, k_chosen=max(k, 0), peak_memory_bytes=2**20)
    return row


def test_summary_hand_worked():
    """Baseline rates 10 and 12 (median 11); k=1 at 22 twice with alpha 0.5: speedup 2, and with
    c = 0.25, T(2)/T(1) = 1.5 the predictions are 1.5 / 1.25 and 1.5 / 1.75."""
    runs = [_run("baseline", 0, 10.0), _run("baseline", 0, 12.0), _run("k=1", 1, 22.0, alpha=0.5),
            _run("k=1", 1, 22.0, alpha=0.5)]
    base, spec = ds.summarize_runs(runs, {1: {1: 1.0, 2: 1.5}}, {1: 0.25})
    assert base["tokens_per_s"] == 11.0 and base["speedup"] == 1.0 and base["runs"] == 2
    assert spec["speedup"] == 2.0 and spec["alpha_mle"] == 0.5
    assert spec["predicted_toy"] == pytest.approx(1.5 / 1.25) and spec["predicted_ext"] == pytest.approx(1.5 / 1.75)
    assert spec["measured_over_predicted"] == pytest.approx(2.0 * 1.75 / 1.5)
    assert spec["peak_rss_mib"] == 1.0 and spec["t_target_share"] == pytest.approx(0.1)
    h = ds.headline([base, spec], 1, 1)
    assert h["best_config"] == "k=1, batch 1, 10 tokens" and h["n_slower"] == 0 and h["alpha_kref"] == 0.5


def test_curves_by_batch_hand_worked():
    rows = [{"model": "target", "n": 1, "batch": 1, "median_s": 0.01},
            {"model": "target", "n": 2, "batch": 1, "median_s": 0.012},
            {"model": "draft-small", "n": 1, "batch": 1, "median_s": 0.002}]
    curves, cs = dr.curves_by_batch(rows)
    assert curves == {1: {1: 0.01, 2: 0.012}} and cs == {1: pytest.approx(0.2)}


class _Subjects:
    kind, notes, sha256 = "stand-in", ["a note"], {"target/model.safetensors": "ab"}
    drafts = {"ngram": object(), "draft-small": object(), "draft-medium": object()}

    def prompts(self, n, prompt_len, seed=0):
        return torch.zeros(n, prompt_len, dtype=torch.long)


def test_embedded_pair_chooses_the_draft_and_notes_what_it_ignores():
    pair = dr.EmbeddedPair(draft_wanted="draft-medium")
    pair.__dict__["subjects"] = _Subjects()  # no model loading in this test
    assert pair.draft_name == "draft-medium" and pair.describe()["notes"] == ["a note"]
    other = dr.EmbeddedPair(draft_wanted="nope", target_wanted="gpt2", n_prompts=3, prompt_len=5)
    other.__dict__["subjects"] = _Subjects()
    d = other.describe()
    assert other.draft_name == "draft-small" and len(d["notes"]) == 3 and d["models_sha256"] == {
        "target/model.safetensors": "ab"}
    assert other.prompts.shape == (3, 5) and len(d["prompt_sha256"]) == 16
