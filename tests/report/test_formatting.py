import pandas as pd
import pytest

from specdec.report.formatting import fraction_text, p_value_text, with_p_values


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
