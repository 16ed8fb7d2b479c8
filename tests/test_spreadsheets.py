"""Cells of the console's CSV downloads: nothing a spreadsheet runs as a formula, numbers
kept as numbers (web/spreadsheets.py)."""

from __future__ import annotations

import pytest

from bloomops.web.spreadsheets import csv_cell, csv_response


@pytest.mark.parametrize(("value", "cell"), [
    ("=HYPERLINK(1)", "'=HYPERLINK(1)"), ("+1", "'+1"), ("@SUM(A1)", "'@SUM(A1)"),
    ("-1+1", "'-1+1"), ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("\n=1", "'\n=1"),
    ("\uff1d1+1", "'\uff1d1+1"), ("\uff0b1", "'\uff0b1"),  # full-width = and +
    ("-5", "-5"), ("-5.5", "-5.5"), ("Tube 1", "Tube 1"), (None, ""), (300, "300"),
])
def test_no_cell_starts_a_formula_and_numbers_stay_numbers(value, cell):
    assert csv_cell(value) == cell


@pytest.mark.parametrize(("value", "cell"), [
    ("a: \x1b[31mred\x07", "a: \\x1b[31mred\\x07"), ("\u202eevil: 1", "\\u202eevil: 1"),
    ("two\nlines\tand a tab", "two\nlines\tand a tab"),
])
def test_a_cell_writes_out_what_a_terminal_or_viewer_would_obey(value, cell):
    """Results another writer stored with a terminal escape or a right-to-left override were
    downloaded as they were, where the pages had written them out."""
    assert csv_cell(value) == cell


def test_a_download_s_name_cannot_end_its_header_early():
    """A name is built from keys another writer may have stored: a quote ended the header's
    filename and the rest read as parameters of its own."""
    response = csv_response('results-q"1; filename=evil.exe-2026-11-01.csv')
    assert response["Content-Disposition"] == \
        'attachment; filename="results-q_1__filename_evil.exe-2026-11-01.csv"'
