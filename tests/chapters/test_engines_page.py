"""What chapter 10's page shows (`specdec.chapters.ch10.values`): counts of the rows that tested
what they name, and compact tables with one row per configuration whose two settings share a
cell, "-" where a setting has no number, never "nan"."""

import math

import pandas as pd

from specdec.chapters.ch10 import values

NAN = float("nan")
T1, T07 = "temperature 1", "temperature 0.7, top-p 0.9"


def _law(engine, configuration, role, setting, status, **kw):
    row = {"engine": engine, "configuration": configuration, "role": role, "setting": setting, "patched": "False",
           "ran": "tested", "status": status, "verdict": "consistent" if status == "pass" else "inconsistent",
           "verified_share": 1.0, "n": 100, "p_value": 0.5, "power": 0.9, "mdtv": 0.05, "stage": 2,
           "best_fit": "", "fit_p": NAN}
    return {**row, **kw}


LAWS = pd.DataFrame([
    _law("vllm", "plain decoding", "control", T1, "pass", verified_share=NAN, power=0.4, p_value=0.2),
    _law("vllm", "plain decoding", "control", T07, "pass", verified_share=NAN, power=0.4, p_value=0.7),
    _law("vllm", "draft", "speculative", T1, "reject", p_value=0.0, power=0.1, stage=1, best_fit="p at T'", fit_p=0.5),
    _law("vllm", "draft", "speculative", T07, "reject", p_value=0.0, power=0.1, stage=1),
    _law("vllm", "draft, patched", "speculative", T1, "pass", patched="True", power=0.93, n=200),
    _law("vllm", "draft, patched", "speculative", T07, "pass", patched="True", power=0.97, n=400, stage=3),
    *[_law("vllm", "block", "speculative", s, "ignored by this build", ran="ignored by this build", verdict="not tested",
           verified_share=NAN, n=NAN, p_value=NAN, power=NAN, mdtv=NAN, stage=NAN) for s in (T1, T07)],
    _law("ours", "wrong rule", "negative control", T1, "reject", p_value=1e-9),
    _law("ours", "token", "speculative", T1, "pass"),
    _law("hf", "assisted", "speculative", T1, "pass", mdtv=0.12)])


def test_the_counts_read_only_the_rows_that_tested_what_they_name():
    v = values.law_values(LAWS)
    assert (v["shipped_rejected"], v["shipped_n"], v["patched_pass"], v["patched_n"]) == (2, 2, 2, 2)
    assert (v["vllm_controls_pass"], v["vllm_controls"], v["neg_rejected"], v["neg_n"]) == (2, 2, 1, 1)
    assert (v["others_pass"], v["others_n"], v["leads"]) == (2, 2, 1)
    assert v["vllm_min_power"] == "0.93"  # the passing speculative rows', not the controls'
    assert values.law_values(LAWS[LAWS["engine"] != "vllm"])["vllm_min_power"] == values.MISSING
    # a rejected row fits only when the counter leaves its best rule and the same test does not reject it
    assert values.fit_values(LAWS, 0.001) == {"failed_n": 2, "fits_any": 1}
    assert values.fit_values(LAWS, 0.9)["fits_any"] == 0


def test_the_verdict_table_has_a_row_per_configuration_and_no_nan():
    t = values.law_view(LAWS, ["vllm"])
    assert list(t.columns) == ["configuration", "what ran", "verified share", "samples", "p-value", "power", "verdict"]
    assert list(t["configuration"]) == ["plain decoding", "draft", "draft, patched", "block"]
    rows = t.set_index("configuration")
    assert rows.loc["plain decoding", "p-value"] == "0.2; 0.7"  # temperature 1 first
    assert rows.loc["plain decoding", "verified share"] == "-"  # plain decoding verifies nothing
    assert rows.loc["draft", "p-value"] == "< 1e-300" and rows.loc["draft", "verdict"] == "inconsistent"
    assert rows.loc["draft, patched", "samples"] == "200; 400" and rows.loc["draft, patched", "power"] == "0.93; 0.97"
    assert rows.loc["block"].to_dict() == {"what ran": "ignored by this build", "verified share": "-", "samples": "-",
                                           "p-value": "-", "power": "-", "verdict": "not tested"}
    assert not t.astype(str).apply(lambda c: c.str.contains("nan")).any().any()
    others = values.law_view(LAWS, ["ours", "hf"], power="mdtv")
    assert list(others["configuration"]) == ["ours: wrong rule", "ours: token", "hf: assisted"]
    assert "TV detected" in others and list(others["TV detected"]) == ["0.05", "0.05", "0.12"]


def test_acceptance_shows_one_expectation_where_its_ends_agree():
    acc = pd.DataFrame([
        {"engine": "vllm", "configuration": "a", "setting": T1, "patched": "False", "measured": 0.0,
         "expected_lo": 0.0252, "expected_hi": 0.0262, "z": -5.5, "status": "misses"},
        {"engine": "vllm", "configuration": "a", "setting": T07, "patched": "False", "measured": 0.0,
         "expected_lo": 0.09901, "expected_hi": 0.09902, "z": -5.6, "status": "misses"},
        {"engine": "vllm", "configuration": "a, patched", "setting": T1, "patched": "True", "measured": 0.5,
         "expected_lo": 0.52, "expected_hi": 0.52, "z": -0.5, "status": "meets"}])
    t = values.acceptance_view(acc).set_index("configuration")
    assert t.loc["a", "exact expectation"] == "[0.0252, 0.0262]; 0.099"
    assert t.loc["a", "measured"] == "0" and t.loc["a", "$z$"] == "-5.5; -5.6" and t.loc["a", "status"] == "misses"
    v = values.acceptance_values(acc)
    assert (v["acc_patched_meet"], v["acc_patched_n"], v["acc_shipped_miss"], v["acc_shipped_n"]) == (1, 1, 2, 2)


def test_the_every_position_table_keeps_vllm_and_the_negative_controls_with_their_power():
    pit = pd.DataFrame([
        {"engine": "ours", "configuration": "wrong", "role": "negative control", "setting": s, "patched": "False",
         "status": st, "verdict": vd, "p_value": p} for s, st, vd, p in ((T1, "reject", "inconsistent", 1e-6),
                                                                          (T07, "pass", "consistent", 0.02))] + [
        {"engine": "ours", "configuration": "token", "role": "speculative", "setting": T1, "patched": "False",
         "status": "pass", "verdict": "consistent", "p_value": 0.4},
        {"engine": "vllm", "configuration": "draft", "role": "speculative", "setting": T1, "patched": "False",
         "status": "reject", "verdict": "inconsistent", "p_value": 0.0},
        {"engine": "vllm", "configuration": "block", "role": "speculative", "setting": T1, "patched": "False",
         "status": "ignored by this build", "verdict": "not tested", "p_value": NAN}])
    power = pd.DataFrame([{"configuration": "wrong", "setting": T1, "power_vllm": 0.7, "power_hf": 0.1},
                          {"configuration": "wrong", "setting": T07, "power_vllm": 0.03, "power_hf": 0.03}])
    t = values.pit_view(pit, power)
    assert list(t["configuration"]) == ["wrong", "draft"]  # our exact rule is counted, the untested row left out
    assert t.iloc[0].to_dict() == {"engine": "ours", "configuration": "wrong", "p-value": "1.0e-6; 0.02",
                                   "verdict": "inconsistent; consistent", "power at vLLM's size": "0.7; 0.03"}
    assert t.iloc[1]["power at vLLM's size"] == "-"
    v = values.pit_values(pit)
    assert v == {"pit_others_pass": 1, "pit_others_n": 1}


def test_untimed_rows_and_a_check_that_did_not_run_read_as_such():
    speed = pd.DataFrame([
        {"engine": "ours", "setting": "greedy", "batch": 1, "speedup": 1.2, "speedup_lo": 1.1, "speedup_hi": 1.3,
         "verdict": "faster"},
        {"engine": "vllm", "setting": T1, "batch": 1, "speedup": NAN, "speedup_lo": NAN, "speedup_hi": NAN,
         "verdict": "not the target's law here"}])
    t = values.speed_view(speed)
    assert list(t["95% interval"]) == ["[1.1, 1.3]", "-"] and list(t["speedup"]) == ["1.2", "-"]
    assert values.repeat_view(pd.DataFrame([{"configuration": "none", "note": "not run"}]))["samples"].tolist() == \
        ["not run"]
    ran = pd.DataFrame([{"configuration": "a, block rejection", "ran": "ignored by this build", "ignored": "x"}])
    assert values.block_values(ran) == {"block_ran": "ignored"}
    assert values.block_values(ran.assign(ran="tested")) == {"block_ran": "tested"}
    assert values.block_values(ran.assign(ran="not run")) == {"block_ran": "not run"}
    assert values.block_values(ran.iloc[:0]) == {"block_ran": "not run"}


def test_one_word_states_and_greedy_counts():
    kernel = pd.DataFrame([{"dtype": "float32", "shipped_correct": "False"}, {"dtype": "int64", "shipped_correct": "True"}])
    assert values.kernel_values(kernel) == {"kernel_affected": "affected"}
    assert values.kernel_values(kernel.iloc[1:]) == {"kernel_affected": "unaffected"}
    assert values.kernel_values(pd.DataFrame([{"dtype": "", "shipped_correct": NAN}])) == {"kernel_affected": "unchecked"}
    greedy = pd.DataFrame([
        {"engine": "vllm", "samples": 4, "identical": 4, "against_speculation": 0},
        {"engine": "vllm", "samples": NAN, "identical": NAN, "against_speculation": NAN},  # did not run: not counted
        {"engine": "ours", "samples": 4, "identical": 3, "against_speculation": 1}])
    assert values.greedy_values(greedy) == {"greedy_same": 1, "greedy_n": 2, "greedy_against": 1}
    assert math.isclose(values.prompt_values({"chosen": [{"drafts": [0.95, 0.92], "spread": [0.6, 0.7]},
                                                         {"drafts": [0.99, 0.91], "spread": [0.8, 0.55]}]})
                        ["min_share_chosen"], 0.91)


def test_llama_sample_and_match_rows_are_coupled_with_plain_decoding_only_when_every_p_value_is_its():
    """Greedy drafts and n-gram lookup both verify by sample-and-match: each of their rows must carry
    plain decoding's p-value at its setting for "equal"; one that differs makes the word "different"."""
    rows = [_law("llama", "plain decoding", "control", s, "pass", verified_share=NAN, p_value=p)
            for s, p in ((T1, 0.2), (T07, 0.7))]
    rows += [_law("llama", label, "speculative", s, "pass", p_value=p)
             for label in ("draft model, greedy drafts (sample-and-match)", "n-gram prompt lookup (ngram-simple)")
             for s, p in ((T1, 0.2), (T07, 0.7))]
    rows.append(_law("llama", "draft model, probabilistic drafts (rejection)", "speculative", T1, "pass", p_value=0.9))
    empty = pd.DataFrame(columns=["engine", "status", "role", "verdict"])
    laws = pd.DataFrame(rows)
    got = values.llama_values(laws, empty, empty)
    assert got["llama_coupled"] == "equal" and (got["llama_spec_pass"], got["llama_spec_n"]) == (5, 5)
    laws.loc[(laws["configuration"].str.contains("ngram")) & (laws["setting"] == T07), "p_value"] = 0.69
    assert values.llama_values(laws, empty, empty)["llama_coupled"] == "different"
    assert values.llama_values(laws[laws["role"] == "control"], empty, empty)["llama_coupled"] == "untested"
