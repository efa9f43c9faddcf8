"""The engines against each other (`specdec.audit.versus`) and the breakdown's head-to-head matchups
(`specdec.audit.breakdown.head_to_head`): each engine paired with the reference in every matchup it
is named in, vLLM's calls paired ABBA with the reference's last rounds first, its patched option
passed through, a different output recorded, bad matchups refused before anything runs, and the best
k and best exact configuration read from the speculative rows as the protocol states."""

import pytest

from specdec.audit import breakdown, design, versus
from specdec.peers.interface import Continuations
from specdec.peers.ours import OursEngine

PROMPTS = [[348, 891, 452, 264, 1125, 321], [47, 809, 600, 259, 12, 14]]
DRAFT = "draft-distilled"


@pytest.fixture(scope="module")
def engines():
    eager = OursEngine(mode="eager")
    return {"ours": eager, "lean": OursEngine(mode="lean", _models=eager._models)}


def _spec(engine, k):
    return breakdown._draft_model(engine, k, DRAFT)


def test_each_engine_is_paired_with_the_reference_in_the_matchups_that_name_it(engines):
    m = [versus.Matchup("plain decoding", "greedy", 1, versus.plain_configs(("ours", "lean"))),
         versus.Matchup("best k, greedy", "greedy", 2, (("ours", _spec("ours", 2)), ("lean", _spec("ours", 1))))]
    rows = versus.versus_rows(engines, "ours", PROMPTS, m, length=5, rounds=2, seed=0)
    assert [(r["comparison"], r["engine"], r["batch"], r["configuration"]) for r in rows] == [
        ("plain decoding", "lean", 1, "plain decoding"), ("best k, greedy", "lean", 2, "token verification, k = 1")]
    assert all(r["pairs"] == 4 and r["prompts"] == 2 and r["relative_lo"] <= r["relative_speed"] <= r["relative_hi"]
               for r in rows)
    assert all(r["same_tokens"] for r in rows)  # greedy: lean = eager, speculative = plain, on these prompts


class _Wrong:
    """Our engine keeping every draft (a named wrong rule): its greedy tokens differ from plain decoding's."""

    def __init__(self, ours):
        self.ours = ours

    def continue_prompts(self, prompts, n, max_new_tokens, sampling, spec, seed):
        wrong = design.NegativeControl(self.ours.model("target"), self.ours.model(DRAFT), "always_accept")
        return wrong.continue_prompts(prompts, n, max_new_tokens, sampling, spec, seed)


def test_a_different_output_is_recorded(engines):
    m = [versus.Matchup("best k, greedy", "greedy", 1, (("ours", versus.plain_configs(["ours"])[0][1]),
                                                       ("wrong", _spec("ours", 2))))]
    rows = versus.versus_rows({"ours": engines["ours"], "wrong": _Wrong(engines["ours"])}, "ours", PROMPTS, m,
                              length=12, rounds=2, seed=0)
    assert rows[0]["same_tokens"] is False


class _Failing:
    """An engine whose call number ``at`` (0: the untimed one) raises, as a crashed server would."""

    def __init__(self, ours, at):
        self.ours, self.at, self.calls = ours, at, 0

    def continue_prompts(self, *args):
        self.calls += 1
        if self.calls - 1 == self.at:
            raise RuntimeError("llama-server exited with status 1")
        return self.ours.continue_prompts(*args)


def test_an_engine_that_fails_gets_a_not_timed_row_and_the_run_goes_on(engines):
    plain = versus.plain_configs(["ours", "lean", "bad"])
    m = [versus.Matchup("plain decoding", "greedy", 1, plain),
         versus.Matchup("again", "greedy", 1, plain[:2])]
    bad = _Failing(engines["ours"], at=2)  # fails in the timed rounds, after the warm-up and one call
    rows = versus.versus_rows({"ours": engines["ours"], "lean": engines["lean"], "bad": bad}, "ours", PROMPTS, m,
                              length=4, rounds=2, seed=0)
    assert [(r["comparison"], r["engine"], r["verdict"].startswith("not timed")) for r in rows] == [
        ("plain decoding", "lean", False), ("plain decoding", "bad", True), ("again", "lean", False)]
    assert rows[1]["verdict"] == "not timed: bad failed: RuntimeError: llama-server exited with status 1"
    assert bad.calls == 3  # no call after the failure
    # the reference fails at its first matchup's warm-up: that matchup is not timed (vLLM's calls of it
    # not even sent), the next one is
    session = _Session([[[1, 2]]])
    two = [versus.Matchup("first", "greedy", 1, (*plain[:2], ("vllm", plain[0][1]))),
           versus.Matchup("second", "greedy", 1, plain[:2])]
    ref = _Failing(engines["ours"], at=0)
    rows = versus.versus_rows({"ours": ref, "lean": engines["lean"]}, "ours", PROMPTS, two, length=4, rounds=2,
                              seed=0, vllm=session)
    assert [(r["comparison"], r["engine"], r["verdict"].startswith("not timed: ours failed")) for r in rows] == [
        ("first", "lean", True), ("first", "vllm", True), ("second", "lean", False)]
    assert session.jobs == [] and rows[2]["pairs"] == 4


class _Session:
    """What a vLLM session returns (its contract: per job, the tokens of the first call and the wall
    time of each of ``repeats`` calls), recording the jobs it was given."""

    def __init__(self, tokens):
        self.jobs, self.tokens = [], tokens

    def run_many(self, jobs, hold=1):
        self.jobs += jobs
        return [Continuations(self.tokens, {}, {"generate_each_s": [1.0 + r for r in range(job[6])]}) for job in jobs]


class _Scripted:
    """An engine whose calls take the scripted seconds, in order (its first: the untimed one)."""

    def __init__(self, seconds):
        self.seconds = iter(seconds)


def test_pairs_are_formed_by_round_and_abba_for_vllm(monkeypatch):
    monkeypatch.setattr(versus, "timed_call", lambda eng, job: (next(eng.seconds), [[[1, 2]]], ({}, None)))
    session = _Session([[[1, 2]]])
    session.run_many = lambda jobs, hold=1: [  # vLLM's four calls in time order: 6, 8, then 2, 4 seconds
        Continuations([[[1, 2]]], {}, {"generate_each_s": [6.0, 8.0, 2.0, 4.0]}) for _ in jobs]
    m = [versus.Matchup("plain decoding", "greedy", 1, versus.plain_configs(("ours", "x", "vllm")))]
    engines = {"ours": _Scripted([99.0, 1.0, 2.0, 3.0, 4.0]), "x": _Scripted([99.0, 2.0, 4.0, 6.0, 8.0])}
    rows = versus.versus_rows(engines, "ours", PROMPTS[:1], m, length=2, rounds=4, seed=0, vllm=session)
    # round r of x pairs with round r of ours (every ratio 0.5: a shifted or warm-up pair would differ);
    # vLLM's calls 3, 4, 1, 2 pair with ours' rounds 1-4 (ratios 0.5 again only if paired ABBA)
    for r in rows:
        assert (r["relative_speed"], r["relative_lo"], r["relative_hi"]) == (0.5, 0.5, 0.5), r
    assert [r["engine"] for r in rows] == ["x", "vllm"] and all(r["same_tokens"] for r in rows)


def test_vllm_calls_pair_abba_and_carry_the_patched_option(engines):
    ours = engines["ours"].continue_prompts([PROMPTS[0]], 1, 4, design.SETTINGS["greedy"], None, 0).tokens
    session = _Session(ours)
    cfg = breakdown._draft_model("vllm", 2, DRAFT, sampled=True)
    m = [versus.Matchup("temperature 1, k = 2", "temperature 1", 1, (("ours", _spec("ours", 2)), ("vllm", cfg))),
         versus.Matchup("plain decoding", "greedy", 1, versus.plain_configs(("ours", "vllm")))]
    rows = versus.versus_rows({"ours": engines["ours"]}, "ours", PROMPTS[:1], m, length=4, rounds=4, seed=0,
                              vllm=session)
    assert [j[7] for j in session.jobs] == [{"patched": True}, {"patched": False}] and cfg.label.endswith(", patched")
    assert [j[6] for j in session.jobs] == [4, 4] and session.jobs[0][4] == cfg.spec
    assert [r["pairs"] for r in rows] == [4, 4] and [r["same_tokens"] for r in rows] == [None, True]
    assert rows[0]["tokens_per_s"] == pytest.approx(4 / 2.5)  # vLLM's median call: 2.5 s for 4 tokens


def test_bad_matchups_are_refused_before_anything_runs(engines):
    plain = versus.plain_configs(("ours", "lean"))
    with pytest.raises(ValueError, match="one configuration per engine"):
        versus.Matchup("x", "greedy", 1, plain + plain[:1])
    with pytest.raises(ValueError, match="unknown setting"):
        versus.Matchup("x", "temperature 2", 1, plain)
    with pytest.raises(ValueError, match="batch"):
        versus.Matchup("x", "greedy", 0, plain)
    with pytest.raises(ValueError, match="no configuration of the reference"):
        versus.versus_rows(engines, "ours", PROMPTS, [versus.Matchup("x", "greedy", 1, plain[1:])], length=2,
                           rounds=2, seed=0)
    with pytest.raises(ValueError, match="without an adapter"):
        versus.versus_rows(engines, "ours", PROMPTS, [versus.Matchup("x", "greedy", 1, versus.plain_configs(
            ("ours", "vllm")))], length=2, rounds=2, seed=0)
    with pytest.raises(ValueError, match="even"):
        versus.versus_rows(engines, "ours", PROMPTS, [versus.Matchup("x", "greedy", 1, plain)], length=2, rounds=3,
                           seed=0)


def _row(engine, batch, k, speedup, verdict, law="greedy outputs equal", tps=100.0):
    return {"engine": engine, "batch": batch, "k": k, "setting": "greedy", "speedup": speedup, "tokens_per_s": tps,
            "verdict": verdict, "law": law}


def test_an_engine_without_a_timed_greedy_row_sits_out_and_ours_is_required():
    rows = [_row("ours", 1, 2, 1.1, "faster"), _row("vllm", 1, 2, 1.0, "undecided"),
            _row("llama.cpp", 1, 2, 0.9, "slower", law="greedy outputs differ"), _row("vllm", 8, 2, 1.0, "undecided")]
    m = {(x.comparison, x.batch): dict(x.configs) for x in
         breakdown.head_to_head(rows, ("ours", "llama.cpp", "vllm"), (1, 8), DRAFT)}
    assert list(m["best k, greedy", 1]) == ["ours", "vllm"]  # llama.cpp's outputs differed: no best k
    assert ("best k, greedy", 8) not in m and ("temperature 1, k = 2", 8) in m  # ours has no batch-8 row


def test_best_k_and_best_exact_follow_the_speculative_rows():
    rows = [_row("ours", 1, 1, 0.9, "slower", tps=300.0), _row("ours", 1, 2, 1.0, "undecided"),
            _row("ours", 8, 2, 1.1, "faster"), _row("ours", 8, 4, 1.3, "faster", law="greedy outputs differ"),
            _row("vllm", 1, 4, 1.2, "faster"), _row("vllm", 8, 2, 0.8, "slower"),
            _row("llama.cpp", 1, 1, 0.7, "slower")]
    assert breakdown.best_k(rows, "ours", 1) == (2, "undecided")  # paired speedup, not a drifting cell's tokens/s
    assert breakdown.best_k(rows, "ours", 8) == (2, "faster")  # a row whose outputs differ is no candidate
    assert breakdown.best_k(rows, "llama.cpp", 8) is None
    m = {(x.comparison, x.batch): dict(x.configs) for x in
         breakdown.head_to_head(rows, ("ours", "llama.cpp", "vllm"), (1, 8), DRAFT)}
    assert m["best k, greedy", 1]["vllm"].spec.k == 4 and m["best k, greedy", 1]["ours"].spec.k == 2
    assert [c.spec is None for c in m["best exact, greedy", 1].values()] == [True, True, False]  # ours, llama, vllm
    assert m["best exact, greedy", 8]["ours"].spec.k == 2 and m["best exact, greedy", 8]["vllm"].spec is None
    assert "llama.cpp" not in m["best k, greedy", 8]
    t1 = m["temperature 1, k = 2", 1]
    assert t1["vllm"].patched and t1["llama.cpp"].spec.options == (("draft_sampling", "probabilistic"),)
    assert t1["ours"].spec.method == "token" and not t1["ours"].patched
