import pandas as pd
import pytest

from specdec.core.sampling import SamplingConfig
from specdec.report.formatting import config_label, fraction_text, p_value_text, with_p_values


def test_p_values_that_underflow_read_as_a_bound_not_zero():
    assert p_value_text(0.0) == "< 1e-300"
    assert p_value_text(1e-310) == "< 1e-300"
    assert p_value_text(3.2e-12) == "3.2e-12"
    assert p_value_text(0.0123) == "0.012"
    assert p_value_text(0.5) == "0.5"
    assert p_value_text(1.0) == "1"


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5])
def test_a_p_value_outside_0_1_is_refused(bad):
    with pytest.raises(ValueError, match="p-value"):
        p_value_text(bad)


def test_exact_rationals_read_as_fractions():
    assert fraction_text(10 / 9) == "10/9"
    assert fraction_text(2.0) == "2"
    assert fraction_text(-7 / 3) == "-7/3"
    with pytest.raises(ValueError, match="no fraction"):
        fraction_text(2 ** 0.5)


def test_table_p_values_become_text_and_the_input_is_not_changed():
    df = pd.DataFrame({"p_value": [0.0, 0.25, float("nan")], "x": [1, 2, 3]})
    shown = with_p_values(df)
    assert list(shown["p_value"]) == ["< 1e-300", "0.25", "n/a"] and df["p_value"].dtype == float


def test_markdown_table_keeps_long_cells_and_blanks_missing_values():
    from specdec.report.formatting import markdown_table

    long = "a sentence much longer than the fifty characters pandas shows before cutting it"
    df = pd.DataFrame({"a": [1.0, float("nan"), 0.123456], "b": ["x|y", long, None]})
    assert markdown_table(df).splitlines() == ["| a | b |", "|---|---|", "| 1 | x\\|y |", f"|  | {long} |",
                                               "| 0.123 |  |"]


def test_show_selects_renames_and_rounds_without_the_index():
    from specdec.report.formatting import table_text

    df = pd.DataFrame({"k": [1, 2], "speedup": [1.23456, 0.9], "tokens_per_step": [1.5, 2.25], "noise": [0, 0]},
                      index=[10, 11])
    assert table_text(df, ["k", "tokens_per_step"]).splitlines() == [
        "| $k$ | tokens per step |", "|---|---|", "| 1 | 1.5 |", "| 2 | 2.25 |"]
    text = table_text(df, {"speedup": "Speedup over plain", "k": None}, digits=2)
    assert text.splitlines()[0] == "| Speedup over plain | $k$ |" and "| 1.2 | 1 |" in text
    assert "10" not in text  # the unnamed index is dropped


def test_show_keeps_a_named_index_and_formats_p_values_and_own_columns():
    from specdec.report.formatting import table_text

    df = pd.DataFrame({"draft": ["a", "b"], "p_value": [0.0, 0.5], "tv": [1e-5, 0.25]}).set_index("draft")
    lines = table_text(df, formats={"tv": "{:.1e}"}).splitlines()
    assert lines[0] == "| draft | p-value | TV |" and lines[2] == "| a | < 1e-300 | 1.0e-05 |"


def test_show_refuses_a_raw_snake_case_header_and_a_missing_column():
    from specdec.report.formatting import table_text

    df = pd.DataFrame({"made_up_thing": [1]})
    with pytest.raises(ValueError, match="made_up_thing.*no human header"):
        table_text(df)
    assert table_text(df, {"made_up_thing": "made-up thing"}).startswith("| made-up thing |")
    with pytest.raises(ValueError, match="no column"):
        table_text(df, ["absent"])


def test_a_table_too_large_to_read_becomes_a_link_to_its_csv_never_a_cut_table():
    from specdec.report.formatting import MAX_COLUMNS, table_text
    from specdec.io.paths import ROOT

    wide = pd.DataFrame({f"c{i}": [1.0] * 3 for i in range(MAX_COLUMNS + 1)})
    with pytest.raises(ValueError, match="too large to read"):
        table_text(wide)
    text = table_text(wide, csv="data/results/06_measured_decoding/surface.csv")
    assert text == "{download}`Full table: surface.csv (3 rows, 8 columns) <../data/results/06_measured_decoding/surface.csv>`"
    long = pd.DataFrame({"k": range(100)})
    assert "100 rows, 1 column)" in table_text(long, csv=ROOT / "data/results/x/long.csv")
    shown = table_text(wide, ["c0", "c1"], csv="data/results/x/wide.csv")  # a selection that fits, and the link
    assert shown.startswith("| c0 | c1 |") and shown.endswith("\n\n{download}`Data (CSV) <../data/results/x/wide.csv>`")
    # a run written outside the repository (SMOKE, tests) links where the committed table lives
    assert table_text(long, csv="/elsewhere/08_x/long.csv").endswith("<../data/results/08_x/long.csv>`")


def test_booleans_read_yes_no_and_counts_take_their_plural():
    from specdec.report.formatting import counted, markdown_table

    df = pd.DataFrame({"any NaN": [False, True]})
    assert markdown_table(df).splitlines()[2:] == ["| no |", "| yes |"]
    assert counted(1, "thread") == "1 thread" and counted(2, "thread") == "2 threads"
    assert counted(0, "query", "queries") == "0 queries"


def test_an_interval_reads_as_one_column():
    from specdec.report.formatting import interval_column

    df = pd.DataFrame({"lo": [0.9, float("nan"), None], "hi": [1.1234, 2.0, None]})
    assert interval_column(df, "lo", "hi") == ["[0.900, 1.123]", "[n/a, 2.000]", ""]
    assert interval_column(df, "lo", "hi", digits=1) == ["[0.9, 1.1]", "[n/a, 2.0]", ""]


def test_number_lists_read_integers_without_a_decimal_point():
    from specdec.report.formatting import number_list

    assert number_list([1.0, 4.0, 256.0]) == "1, 4, 256" and number_list([0.5]) == "0.5"
    assert number_list([1, 2]) == "1, 2"


def test_detecting_sample_sizes_read_as_words_and_powers():
    from specdec.report.formatting import detect_text

    assert [detect_text(v) for v in (0, 78, 1279, 2.6e16, float("nan"))] == ["never", "78", "1,279", "2.6e+16", ""]


def test_an_estimate_and_its_interval_read_as_one_cell_and_a_missing_one_as_blank():
    from specdec.report.formatting import estimate_cell

    assert estimate_cell(2, 1, 3, digits=0) == "2 [1, 3]"
    assert estimate_cell(1.0, 0.95, 1.105) == "1.00 [0.95, 1.10]"  # the same digits for a point and its bounds
    assert estimate_cell(0.5, -0.25, 1, digits=1, signed=True) == "+0.5 [-0.2, +1.0]"
    assert estimate_cell(float("nan"), 1, 2) == ""


def test_config_label():
    assert config_label(SamplingConfig(1.2, 3, 0.8)) == "τ=1.2, top-k 3, top-p 0.8"
    assert config_label(SamplingConfig(0.9, None, 0.7)) == "τ=0.9, top-p 0.7"
    assert config_label(SamplingConfig(0.0)) == "τ=0"
