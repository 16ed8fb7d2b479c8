"""The API document's patterns for "one printable line" say what text.line_problem refuses,
character by character, across the Basic Multilingual Plane (the composed form and the
unassigned code points are the rule's alone: a pattern of a few ranges cannot say them)."""

from __future__ import annotations

import re
import unicodedata

from bloomops.text import (
    REFUSED_AT_ENDS,
    REFUSED_IN_LINE,
    REFUSED_IN_PROSE,
    REFUSED_IN_STRIPPED_LINE,
    exact_line_problem,
    line_problem,
    prose_problem,
)

ASSIGNED = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF
            and unicodedata.category(chr(c)) != "Cn"]


def refused(value: str) -> bool:
    """line_problem's answer, the composed form aside (a combining mark after "x" composes)."""
    return line_problem(unicodedata.normalize("NFC", value)) is not None


def test_a_line_as_given():
    wrong = [c for c in ASSIGNED
             if bool(re.search(REFUSED_IN_LINE, f"x{c}y")) != refused(f"x{c}y")]
    assert wrong == []


def test_a_line_the_engine_strips_first():
    # Inside, a character is refused as it is in a line as given ...
    inside = [c for c in ASSIGNED if bool(re.search(REFUSED_IN_STRIPPED_LINE, f"x{c}y"))
              != refused(f"x{c}y")]
    assert inside == []
    # ... and white space at either end is stripped before the rule is applied.
    ends = [c for c in ASSIGNED if c.isspace()
            and bool(re.search(REFUSED_IN_STRIPPED_LINE, f"{c}{c}x y{c}"))
            != refused(f"{c}{c}x y{c}".strip())]
    assert ends == []
    assert not re.search(REFUSED_IN_STRIPPED_LINE, " \t\n ")  # blank: the field is missing


def test_a_text_of_several_lines():
    """A reason or a failure's words: the document's pattern refuses what prose_problem does,
    character by character; tabs and line breaks are text, escapes and bidi controls not."""
    every = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    wrong = [c for c in every if bool(re.search(REFUSED_IN_PROSE, f"x{c}y"))
             != (prose_problem(f"x{c}y") is not None)]
    assert wrong == []
    assert prose_problem("line one\r\nline two\tend") is None
    assert prose_problem("\x1b[2J") and prose_problem("\u202eRTL") and prose_problem("\x07")


def test_a_line_matched_exactly_begins_and_ends_with_no_white_space():
    """An idempotency key or a key of a caller's data "k " was another key than "k" that
    shows as one (a retry with a trailing newline claimed a second item): refused, by the
    document's pattern as by the engine, for every white space character at either end."""
    ends = [c for c in ASSIGNED if c.isspace()
            for value in (f"{c}x", f"x{c}", f"x y{c}")
            if not re.search(REFUSED_AT_ENDS, value) or exact_line_problem(value) is None]
    assert ends == []
    assert not re.search(REFUSED_AT_ENDS, "x y") and exact_line_problem("x y") is None
