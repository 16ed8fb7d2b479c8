"""Text people read as one line (a name, a key, a value matched exactly): the rule every
layer checks it by, from accounts (a person's name) to the engine's fields."""

from __future__ import annotations

import unicodedata

# Characters that show as nothing (Unicode's default-ignorable code points, and the blank
# fillers and braille blank that render as a space): in a key or a name people read in a
# list, they make one look like another.
_UNSEEN = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
           (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
           (0x2060, 0x206F), (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F),
           (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
           (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def _unseen(c: str) -> bool:
    return any(lo <= ord(c) <= hi for lo, hi in _UNSEEN)


def shows_nothing(value: str) -> bool:
    """Whether ``value`` shows nothing at all: white space, characters that show as nothing
    (a zero-width space, a braille blank, a byte-order mark) and control characters only. A
    required reason so written was a reason nobody can read."""
    return all(c.isspace() or _unseen(c) or not c.isprintable() for c in value)


def line_problem(value: str) -> str | None:
    """Why ``value`` cannot be a key or a name people read in a list, or None: one printable
    line, nothing that shows as nothing, in Unicode's composed form (NFC: "café" typed two
    ways is one key)."""
    if not value.isprintable() or any(_unseen(c) for c in value):
        return ("may hold only printable characters on one line (no control or invisible"
                " characters)")
    if not unicodedata.is_normalized("NFC", value):
        return "must be in Unicode's composed form (NFC)"
    return None


def exact_line_problem(value: str) -> str | None:
    """line_problem for a value matched exactly as given, never stripped (an idempotency
    key, a capability, a key of a caller's data): no white space at either end either, as
    "yield" and "yield " would be two keys that show as one."""
    if value != value.strip():
        return "may not begin or end with white space"
    return line_problem(value)


def readable_line(value: str) -> str:
    """``value`` made one that line_problem accepts: composed (NFC), without what shows as
    nothing or is not printable (a name the lab's own account records hold, not a caller's)."""
    value = unicodedata.normalize("NFC", value)
    kept = "".join(c if c.isprintable() else " " for c in value if not _unseen(c))
    return " ".join(kept.split())


def _class(chars: list[int]) -> str:
    """Code points as the inside of a regular expression's character class, in ranges."""
    ranges: list[list[int]] = []
    for c in chars:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "".join(f"\\u{lo:04x}" if lo == hi else f"\\u{lo:04x}-\\u{hi:04x}"
                   for lo, hi in ranges)


# What line_problem refuses in the Basic Multilingual Plane, unassigned code points aside:
# the rule as a pattern can say it in a few ranges (the NFC form, the other planes and the
# unassigned code points stay the engine's to refuse). White space apart from the rest, as a
# field the engine strips may begin and end with it.
_REFUSED = sorted({c for lo, hi in _UNSEEN for c in range(lo, min(hi, 0xFFFF) + 1)} | {
    c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF and not chr(c).isprintable()
    and unicodedata.category(chr(c)) != "Cn"})
_SPACE = _class([c for c in _REFUSED if chr(c).isspace()])
_OTHER = _class([c for c in _REFUSED if not chr(c).isspace()])
# What is blank to either reader of the document: Python's white space (str.isspace, what
# the engine strips: the information separators U+001C-U+001F and U+0085 among it) and
# JSON Schema's (ECMAScript's \s, which also counts U+FEFF): a pattern naming them one by one
# reads alike in both, where "\S" did not ("\x1c" was text to one, blank to the other).
STRIPPED_CHARS = _class([c for c in range(0x10000) if chr(c).isspace()])  # str.strip()'s
NON_BLANK = f"[^{STRIPPED_CHARS}\\ufeff]"
# Patterns a line must not match (JSON Schema's "not": a pattern's $ also matches before a
# final newline): a line taken as given, and one the engine strips first.
REFUSED_IN_LINE = f"[{_SPACE}{_OTHER}]"
REFUSED_IN_STRIPPED_LINE = rf"[{_OTHER}]|\S\s*[{_SPACE}]\s*\S"
# ... and, for a line taken as given, what it may not begin or end with (exact_line_problem)
REFUSED_AT_ENDS = f"^[{STRIPPED_CHARS}]|[{STRIPPED_CHARS}]$"


# What a text people read may not hold though it spans lines (a reason, a failure's words):
# control characters but tab and the line breaks (a terminal escape cleared the screen of
# whoever read a log or a CSV in a terminal, and counted as the words a failure needs), and
# the bidirectional controls that make a text read in another order ("RTL" shown as "LTR").
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_NOT_IN_PROSE = sorted({c for c in range(0x10000) if unicodedata.category(chr(c)) == "Cc"
                        and chr(c) not in "\t\n\r"} | set(_BIDI))
REFUSED_IN_PROSE = f"[{_class(_NOT_IN_PROSE)}]"


def prose_problem(value: str) -> str | None:
    """Why ``value`` cannot be a text people read over several lines, or None."""
    if any(ord(c) in _NOT_IN_PROSE_SET for c in value):
        return ("may hold no control characters but tabs and line breaks, and no characters"
                " that reorder text (bidirectional controls)")
    return None


_NOT_IN_PROSE_SET = frozenset(_NOT_IN_PROSE)


def readable_prose(value: str) -> str:
    """``value`` made one prose_problem accepts, each character it refuses written out as its
    escape ("\\x1b"): a worker's exception text with a terminal colour code is still said."""
    return "".join(c.encode("unicode_escape").decode("ascii") if ord(c) in _NOT_IN_PROSE_SET
                   else c for c in value)
