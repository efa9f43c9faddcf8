"""The measured runs of chapter 08 (specdec.measure.alternatives) on the tiny random-weight pair:
configurations and their lossless labels, the join of each run's outputs to its row (re-generated
from the seed the protocol gives it), per-position counts against the engine's own stats, nll
against a hand computation and a toy model, hand-worked speedup, acceptance and quality summaries.
Timings are never asserted."""

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from specdec.core.rules.alternatives import MATCH
from specdec.core.rules.approximate import top_k_accept, typical
from specdec.engine.decode import generate
from specdec.measure import alternatives as ar

K, LEN, PROMPT, SEED, TEMPS = 3, 12, 6, 7, [1.0, 0.7]
GREEDY = SimpleNamespace(name="greedy drafts", lossless=False, draws="argmax")  # a rule whose drafts are argmaxes
RULES = {"match": MATCH, "typical": typical(), "greedy": GREEDY}


@pytest.fixture(scope="module")
def prompts():
    return torch.randint(0, 64, (2, PROMPT), generator=torch.Generator().manual_seed(3))  # (2, P) random ids


@pytest.fixture(scope="module")
def runs(tiny_pair, prompts):
    target, draft = tiny_pair
    return ar.alternative_runs(target, draft, prompts, RULES, k=K, output_len=LEN, temperatures=TEMPS, repeats=2,
                               seed=SEED, min_share=0.0)


def test_configs_put_the_baseline_first_and_label_lossless(tiny_pair):
    target, draft = tiny_pair
    cfgs = ar.rule_configs(target, draft, {"match": MATCH, "typical": typical(), "top-2": top_k_accept(2),
                                           "greedy": GREEDY}, k=K, output_len=LEN)
    assert [c.name for c in cfgs] == ["autoregressive", "token", "match", "typical", "top-2"]  # greedy: skipped
    assert [c.labels["lossless"] for c in cfgs] == [True, True, True, False, False]
    assert [c.labels["algorithm"] for c in cfgs] == [c.name for c in cfgs]
    with pytest.raises(ValueError, match="reserved"):
        ar.rule_configs(target, draft, {"token": MATCH}, k=K, output_len=LEN)
    with_block = ar.rule_configs(target, draft, {"match": MATCH}, k=K, output_len=LEN, block=True)
    assert [c.name for c in with_block] == ["autoregressive", "token", "block", "match"]
    s = with_block[2].run({"ids": torch.zeros(1, 4, dtype=torch.long), "temperature": 1.0}, 0)
    assert s["verifier"] == "block" and s["lossless"] is True


def test_a_typical_run_says_lossless_false(tiny_pair, prompts):
    target, draft = tiny_pair
    cfgs = {c.name: c for c in ar.rule_configs(target, draft, {"typical": typical()}, k=K, output_len=LEN)}
    x = {"ids": prompts[:1], "temperature": 1.0}
    s = cfgs["typical"].run(x, 0)
    assert s["lossless"] is False and s["verifier"] == typical().name and len(s["continuation"]) == LEN
    assert s["prop_1"] > 0 and s["acc_1"] <= s["reach_1"] == s["prop_1"]
    for name in ("autoregressive", "token"):
        s = cfgs[name].run(x, 0)
        assert s["lossless"] is True and s["verifier"] == name
    assert cfgs["autoregressive"].run(x, 0)["prop_1"] == 0


def test_rows_join_each_run_to_the_engine_output_of_its_seed(runs, tiny_pair, prompts):
    """Every row's continuation and per-position counts equal a fresh `generate` with the seed the
    protocol gave that run (seed + 1000 repeat + cell index), so the join and the counts are right."""
    target, draft = tiny_pair
    algos = ["autoregressive", "token", "match", "typical"]
    assert len(runs) == len(algos) * len(TEMPS) * prompts.shape[0] * 2
    assert sorted({r["algorithm"] for r in runs}) == sorted(algos)
    assert all(r["lossless"] == (r["algorithm"] != "typical") for r in runs)
    verifier = {"autoregressive": None, "token": None, "match": replace(MATCH, check=False),
                "typical": replace(RULES["typical"], check=False)}
    for r in runs:
        if r["repeat"] != 1 or r["prompt"] != 1:
            continue
        cell = TEMPS.index(r["temperature"]) * prompts.shape[0] + r["prompt"]
        res = generate(target, prompts[1:2], drafter=None if r["algorithm"] == "autoregressive" else draft, k=K,
                       max_new_tokens=LEN, temperature=r["temperature"], verifier=verifier[r["algorithm"]],
                       generator=torch.Generator().manual_seed(SEED + 1000 * r["repeat"] + cell), mode="eager")
        assert r["continuation"] == " ".join(map(str, res.tokens[0].tolist())) and r["tokens"] == LEN
        by = {p["position"]: p for p in res.stats.acceptance_by_position()}
        for i in range(1, K + 1):
            assert r[f"prop_{i}"] == by.get(i, {}).get("proposed", 0)
            assert r[f"acc_{i}"] == by.get(i, {}).get("accepted", 0)
        assert r["verifier"] == res.summary()["verifier"]
    for r in runs:  # reach_i: proposed i with i-1 kept, so acc_i <= reach_i <= min(prop_i, acc_{i-1})
        assert r["reach_1"] == r["prop_1"]
        for i in range(2, K + 1):
            assert r[f"acc_{i}"] <= r[f"reach_{i}"] <= min(r[f"prop_{i}"], r[f"acc_{i - 1}"])


def test_nll_equals_a_hand_computation_from_one_forward(runs, tiny_pair, prompts):
    target, _ = tiny_pair
    r = next(r for r in runs if r["algorithm"] == "typical" and r["temperature"] == 0.7)
    cont = torch.tensor([int(t) for t in r["continuation"].split()])
    with torch.no_grad():
        logits = target(input_ids=torch.cat([prompts[r["prompt"]], cont])[None]).logits[0]  # (P + n, V)
    lp = torch.log_softmax(logits[PROMPT - 1:-1].double() / 0.7, -1)  # (n, V)
    assert r["nll"] == pytest.approx(-lp[torch.arange(LEN), cont].mean().item(), abs=1e-5)
    grams = [tuple(cont[i:i + 2].tolist()) for i in range(LEN - 1)]
    assert r["distinct_2"] == len(set(grams)) / len(grams)


def test_continuation_nll_of_a_uniform_toy_model_is_log_v():
    class Uniform(torch.nn.Module):  # two tokens, equal logits everywhere: p = 1/2 at any temperature
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids):
            return SimpleNamespace(logits=torch.zeros(*input_ids.shape, 2))

    nll = ar.continuation_nll(Uniform(), torch.zeros(3, 2, dtype=torch.long), torch.ones(3, 5, dtype=torch.long), 0.5)
    assert nll.shape == (3,) and torch.allclose(nll, torch.full((3,), math.log(2), dtype=torch.float64))


def _synthetic(times: dict, prompts=3, repeats=2):
    """AR at 2 s and each algorithm at times[alg] s per 10 tokens, on every (prompt, repeat)."""
    return [{"temperature": 1.0, "prompt": p, "repeat": rep, "algorithm": a, "lossless": a != "x", "tokens": 10,
             "wall_s": s * (1 + 0.1 * p + 0.01 * rep)} for p in range(prompts) for rep in range(repeats)
            for a, s in {"autoregressive": 2.0, **times}.items()]


def test_speedup_rows_pair_and_word_a_twice_faster_algorithm():
    out = {r["algorithm"]: r for r in ar.speedup_rows(_synthetic({"x": 1.0, "y": 2.0}))}
    assert set(out) == {"x", "y"} and out["x"]["family_size"] == 2
    x, y = out["x"], out["y"]
    assert (x["runs"], x["speedup_median"], x["speedup_lo"], x["speedup_hi"]) == (6, 2.0, 2.0, 2.0)
    assert x["verdict"] == "faster" and x["lossless"] is False
    # 6 pairs reach at most 1 - 2/64 = 96.9% for a median; the 2-comparison family needs 97.5%
    assert x["verdict_sim"] == "too few pairs for this level" and x["pairs_sim"] == 7
    x4 = {r["algorithm"]: r for r in ar.speedup_rows(_synthetic({"x": 1.0, "y": 2.0}, repeats=4))}["x"]
    assert x4["verdict_sim"] == "faster" and (x4["speedup_lo_sim"], x4["speedup_hi_sim"]) == (2.0, 2.0)
    assert y["speedup_median"] == pytest.approx(1.0) and y["verdict"] != "faster" and y["lossless"] is True
    rows = [r for r in _synthetic({"x": 1.0}) if not (r["algorithm"] == "autoregressive" and r["prompt"] == 2)]
    with pytest.raises(ValueError, match="not paired"):
        ar.speedup_rows(rows)


def test_acceptance_rows_hand_worked_and_totals(runs):
    """One run, k = 2, steps accepting [2, 0]: position 1 reached twice, kept once; position 2
    proposed twice, reached once, kept once; mean accepted (1 + 1) / 2 = 1."""
    one = {"temperature": 1.0, "algorithm": "x", "lossless": True, "prompt": 0, "prop_1": 2, "reach_1": 2,
           "acc_1": 1, "prop_2": 2, "reach_2": 1, "acc_2": 1}
    p1, p2 = ar.acceptance_rows([one], 2)
    assert (p1["proposed"], p1["reached"], p1["accepted"], p1["conditional"]) == (2, 2, 1, 0.5)
    assert (p2["proposed"], p2["reached"], p2["accepted"], p2["rate"], p2["conditional"]) == (2, 1, 1, 0.5, 1.0)
    assert p1["mean_accepted"] == 1.0 and p1["tokens_per_step"] == 2.0 and math.isnan(p1["conditional_lo_prompts"])
    rows = ar.acceptance_rows(runs, K)
    assert {r["algorithm"] for r in rows} == {"token", "match", "typical"}  # the baseline drafts nothing
    for r in rows:
        mine = [x for x in runs if (x["temperature"], x["algorithm"]) == (r["temperature"], r["algorithm"])]
        i = r["position"]
        assert r["proposed"] == sum(x[f"prop_{i}"] for x in mine) and r["accepted"] == sum(x[f"acc_{i}"] for x in mine)
        kept = sum(x[f"acc_{j}"] for x in mine for j in range(1, K + 1))
        assert r["mean_accepted"] == pytest.approx(kept / sum(x["prop_1"] for x in mine))
        assert r["tokens_per_step"] == pytest.approx(r["mean_accepted"] + 1)
        if r["reached"]:
            assert r["conditional_lo"] <= r["conditional"] <= r["conditional_hi"]
        else:  # never reached (a low-acceptance rule on random weights): no rate to state
            assert math.isnan(r["conditional"]) and r["accepted"] == 0


def test_quality_rows_against_the_autoregressive_reference(runs):
    rows = [{"temperature": 1.0, "prompt": p, "repeat": rep, "algorithm": a, "lossless": a == "autoregressive",
             "nll": 1 + 0.1 * p + 0.01 * rep + (0.5 if a == "x" else 0.0), "distinct_2": 0.9, "distinct_3": 0.95}
            for p in range(4) for rep in range(2) for a in ("x", "autoregressive")]
    ref, x = ar.quality_rows(rows)
    assert ref["algorithm"] == "autoregressive" and ref["nll_diff"] == 0.0 and ref["runs"] == 8
    assert (x["nll_diff"], x["nll_diff_lo"], x["nll_diff_hi"]) == pytest.approx((0.5, 0.5, 0.5))
    assert x["nll"] == pytest.approx(ref["nll"] + 0.5) and x["distinct_2_diff"] == 0.0
    with pytest.raises(ValueError, match="prompts"):
        ar.quality_rows([r for r in rows if not (r["algorithm"] == "autoregressive" and r["prompt"] == 3)])
    out = ar.quality_rows(runs)
    assert [(r["temperature"], r["algorithm"]) for r in out][:1] == [(0.7, "autoregressive")]
    assert all(math.isfinite(r["nll"]) and r["nll"] > 0 for r in out)



def test_measured_rules_name_the_match_rule_and_three_approximate_ones():
    rules = ar.measured_rules(0.5, 2)
    assert list(rules)[0] == MATCH.name and rules[MATCH.name].lossless
    assert [r.lossless for r in list(rules.values())[1:]] == [False, False, False]
    assert typical().name in rules and top_k_accept(2).name in rules


def _chapter_params(cli) -> dict:
    """Chapter 08's parameters as the notebook names them, set to the command line's values."""
    from specdec.chapters.ch08.tables import SHARED

    return {ours: cli.PARAMS[theirs] for theirs, ours in SHARED.items()}


def test_make_alternatives_writes_what_chapter_08_reads(tmp_path):
    # `make alternatives --smoke`: every path of the command line, then the chapter's reader: a smoke
    # run is refused, as is a run of other rules or prompts; the same run read without the check
    from specdec.chapters.ch08 import tables
    from specdec.cli import alternatives as cli

    assert cli.main(["--smoke", "--out", str(tmp_path)]) == 0
    t = tables.alternatives_tables(tmp_path, _chapter_params(cli), "", check=False)
    p = t["params"]
    assert p["smoke"] is True and p["temperatures"] == cli.SMOKE["temperatures"] and p["checksum"]
    runs = t["runs"]
    assert len(runs) == p["prompts"] * p["repeats"] * len(p["temperatures"]) * runs["algorithm"].nunique()
    assert set(t["speedup"]["algorithm"]) == set(runs["algorithm"]) - {ar.AR}
    with pytest.raises(ValueError, match="smoke"):
        tables.alternatives_tables(tmp_path, _chapter_params(cli), p["checksum"])
    other = {**_chapter_params(cli), "MEASURED_K": cli.PARAMS["k"] + 1}
    with pytest.raises(ValueError, match="MEASURED_K|'k'"):
        tables.alternatives_tables(tmp_path, other, p["checksum"])
    with pytest.raises(ValueError, match="checksum"):
        tables.alternatives_tables(tmp_path, _chapter_params(cli), "another prompt set")
    # a run on other weights than the committed ones is refused, the file named
    import json

    sidecar = tmp_path / "runs.json"
    meta = json.loads(sidecar.read_text())
    meta["provenance"]["models_sha256"]["target/model.safetensors"] = "0" * 64
    sidecar.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="target/model.safetensors"):
        tables.alternatives_tables(tmp_path, _chapter_params(cli), p["checksum"])


def test_the_committed_alternatives_run_is_chapter_08s():
    # the committed run passes the chapter's own check: its parameters as the notebook states them and
    # the checksum of the prompts the chapter draws
    import json

    from specdec.chapters.ch08 import tables
    from specdec.family.tokens import prompt_checksum
    from specdec.io.paths import RESULTS_DIR, ROOT
    from specdec.measure.subjects import load_subjects

    nb = json.loads((ROOT / "notebooks" / "08_alternatives.ipynb").read_text())
    P: dict = {}
    exec("".join(nb["cells"][1]["source"]), P)  # the parameters cell: assignments only
    prompts = load_subjects("cpu", P["DTYPE"], allow_stand_in=False, seed=P["SEED"]).prompts(
        P["PROMPTS"], P["PROMPT_LEN"], seed=P["SEED"])
    t = tables.alternatives_tables(RESULTS_DIR / "alternatives", P, prompt_checksum(prompts))
    assert not t["params"]["smoke"] and len(t["speedup"]) > 0
