"""CSV files people open in a spreadsheet: every download of the console writes its cells
through ``csv_cell`` and starts with a byte-order mark, so Excel reads the file as UTF-8 (a
specimen named "Müller" or "試料" arrives as written) and runs no cell as a formula."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.http import HttpResponse

from bloomops.execution.envelope import parse_ts_or_none, ts
from bloomops.text import readable_prose

BOM = "\ufeff"


def csv_cell(value: Any, *, instant: bool = False) -> str:
    """Text a spreadsheet will not run as a formula ('=1+1' is kept as text); a negative
    number stays a number; an instant in UTC as the engine writes one
    (2026-11-26T14:05:03.000000Z), whichever download it is in: a datetime, or the stored
    text of an ``instant`` column another writer wrote otherwise (text that is no instant
    stays as it is)."""
    if instant and isinstance(value, str):
        value = parse_ts_or_none(value) or value
    text = "" if value is None else ts(value) if isinstance(value, datetime) else str(value)
    # what another writer stored with a terminal escape or a reversing character is written
    # out (\x1b), as the pages show it: a cell read in a terminal or a viewer runs neither
    text = readable_prose(text)
    if text[:1] in _FORMULA_STARTS or (text[:1] == "-" and not
                                       text[1:].replace(".", "").isdigit()):
        return "'" + text
    return text


# What a spreadsheet may read as the start of a formula: the ASCII signs, their full-width
# forms (some spreadsheets fold them), and the blanks a cell may begin with.
_FORMULA_STARTS = frozenset("=+@\t\r\n\uff1d\uff0b\uff0d\uff20")


def csv_response(filename: str) -> HttpResponse:
    """An attachment to write csv rows into, its byte-order mark already written. The name
    keeps letters, digits and ``_ . -`` (anything else an underscore): it is built from a
    key another writer may have stored, and a quote in it ended the header's name early."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", filename)
    response["Content-Disposition"] = f'attachment; filename="{safe}"'
    response.write(BOM)
    return response
