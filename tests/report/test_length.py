"""The length measure behind the book's budget: strict token counts of a page's article body."""

import json

import pytest

from specdec.cli.words import main
from specdec.report.length import html_count, notebook_count, page_count

PAGE = """<html><head><script>var a = 'not counted';</script></head><body><nav>menu words</nav>
<article class="bd-article"><h1>Title here</h1><p>one two &amp; three</p><style>.x{}</style>
<table><tr><td>0.5</td><td>-</td></tr></table></article></body></html>"""


def test_a_page_counts_the_article_only_every_token_and_no_script():
    # "Title here" 2 + "one two & three" 4 + "0.5 -" 2
    assert page_count(PAGE) == 8
    assert page_count("<html><body><p>no article</p></body></html>") == 0
    assert page_count("<article><td>p &lt; 1e-300</td><a href='x.csv'>CSV</a></article>") == 4


def test_html_count_skips_the_search_and_index_pages(tmp_path):
    (tmp_path / "index.html").write_text(PAGE)
    (tmp_path / "search.html").write_text(PAGE)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "06_x.html").write_text(PAGE)
    assert html_count(tmp_path) == {"06_x": 8}


def _nb(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_a_notebook_counts_markdown_with_glued_values_and_displayed_output(tmp_path):
    glue = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "ratio"}},
            "data": {"application/papermill.record/text/plain": "'2.401 [2.1, 2.7]'"}}
    table = {"output_type": "execute_result", "metadata": {}, "execution_count": 1,
             "data": {"text/markdown": "| a | b |\n|---|---|\n| 1 | < 2 |", "text/plain": "ignored"}}
    nb = _nb([{"cell_type": "markdown", "metadata": {}, "source": ["The ratio is {glue:text}`ratio:.3f` here."]},
              {"cell_type": "code", "metadata": {}, "source": ["x = 1"], "outputs": [glue, table], "execution_count": 1}])
    path = tmp_path / "06_x.ipynb"
    path.write_text(json.dumps(nb))
    # "The ratio is 2.401 [2.1, 2.7] here." 7 + the table's 5 + 1 + 6 tokens
    assert notebook_count(path) == 7 + 12


def test_the_command_fails_over_budget_and_refuses_a_missing_folder(tmp_path, capsys):
    (tmp_path / "98_summary.html").write_text(PAGE.replace("one two", " ".join(["w"] * 1300)))
    assert main([str(tmp_path)]) == 1
    (tmp_path / "98_summary.html").write_text(PAGE)
    assert main([str(tmp_path)]) == 0
    with pytest.raises(SystemExit):
        main([str(tmp_path / "absent")])
    assert "is not a folder" in capsys.readouterr().err
