"""What a queue's step records when it is completed (RULES.md#results): the queue's
``result_fields`` (a measurement, a note, a QC pass or fail), checked when a queue is set up,
and a completion's ``result_snapshot`` checked against them, whoever completes (a person at
the bench, a service worker, an instrument adapter)."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, localcontext
from typing import Any

from bloomops.execution.errors import ActionError, Problems
from bloomops.text import line_problem

RESULT_KINDS = ("number", "text", "pass_fail", "choice")
PASS_FAIL = ("pass", "fail")
MAX_RESULT_FIELDS = 20
RESULT_TEXT_MAX = 500  # a note recorded with a result
RESULT_LABEL_MAX = 80
RESULT_UNIT_MAX = 20
# a key a worker's JSON names and a lab's file holds: short, lowercase, no spaces
RESULT_KEY_PATTERN = r"^[a-z][a-z0-9_]{0,39}(?!\n)$"
_KEY = re.compile(RESULT_KEY_PATTERN)
RESULT_KEY_WORDS = "must be lowercase letters, digits and _ (up to 40, starting with a letter)"
# The kinds whose values are counted one by one (a note's words are not tallied), and the
# days a period of results covers when none is asked for (the page's and the API's).
SAID_KINDS = ("pass_fail", "choice")
# how a refusal names a result's field: the API's path to it in the request
RESULT_FIELD = "result_snapshot."
DEFAULT_DAYS = 7
# What a value may hold and still be no value: ASCII white space, as the tally's SQL trims
# it (selectors.results_tally), so a "\t" is blank to the check, the table and the counts.
BLANK = " \t\n\r\f\v"
RESULT_FIELD_KEYS = ("key", "label", "kind", "unit", "min", "max", "choices", "required")
MAX_CHOICES = 20
CHOICE_MAX = 40  # one choice's words ("borderline", "grade B")


def _finite(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _short_line(value: Any, what: str, longest: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > longest:
        raise ActionError("VALIDATION_ERROR", f"{what} must be text of 1 to {longest}"
                          " characters.", field="result_fields")
    if problem := line_problem(value.strip()):
        raise ActionError("VALIDATION_ERROR", f"{what} {problem}.", field="result_fields")
    return value.strip()


def _one_field(number: int, value: Any) -> dict[str, Any]:
    said = f"Result field #{number}"
    if not isinstance(value, dict):
        raise ActionError("VALIDATION_ERROR", f"{said} must be an object.",
                          field="result_fields")
    if extra := sorted(set(value) - set(RESULT_FIELD_KEYS)):
        raise ActionError("VALIDATION_ERROR", f"{said} has unknown fields {extra}: it takes"
                          f" {', '.join(RESULT_FIELD_KEYS)}.", field="result_fields")
    key = value.get("key")
    if not isinstance(key, str) or not _KEY.match(key):
        raise ActionError("VALIDATION_ERROR", f"{said}: key {RESULT_KEY_WORDS}.",
                          field="result_fields")
    said = f"Result field {key}"
    kind = value.get("kind", "number")
    if kind not in RESULT_KINDS:
        raise ActionError("VALIDATION_ERROR", f"{said}: kind must be one of"
                          f" {', '.join(RESULT_KINDS)}.", field="result_fields")
    out: dict[str, Any] = {"key": key, "kind": kind,
                           "label": _short_line(value.get("label", key), f"{said}: label",
                                                RESULT_LABEL_MAX)}
    required = value.get("required", False)
    if not isinstance(required, bool):
        raise ActionError("VALIDATION_ERROR", f"{said}: required must be true or false.",
                          field="result_fields")
    out["required"] = required
    numeric = {name: value[name] for name in ("unit", "min", "max")
               if value.get(name) is not None}
    if numeric and kind != "number":
        raise ActionError("VALIDATION_ERROR", f"{said}: {', '.join(numeric)}"
                          f" belong{'s' if len(numeric) == 1 else ''} to a number only.",
                          field="result_fields")
    if "unit" in numeric:
        out["unit"] = _short_line(numeric["unit"], f"{said}: unit", RESULT_UNIT_MAX)
    for bound in ("min", "max"):
        if bound in numeric:
            if not _finite(numeric[bound]):
                raise ActionError("VALIDATION_ERROR", f"{said}: {bound} must be a number.",
                                  field="result_fields")
            out[bound] = numeric[bound]
    if out.get("min", -math.inf) > out.get("max", math.inf):
        raise ActionError("VALIDATION_ERROR", f"{said}: min is above max.",
                          field="result_fields")
    choices = value.get("choices")
    if (choices is not None) != (kind == "choice"):
        raise ActionError("VALIDATION_ERROR", f"{said}: choices belong to a choice, and a"
                          " choice needs them.", field="result_fields")
    if choices is not None:
        if not isinstance(choices, list) or not 2 <= len(choices) <= MAX_CHOICES:
            raise ActionError("VALIDATION_ERROR", f"{said}: choices must list 2 to"
                              f" {MAX_CHOICES} values.", field="result_fields")
        out["choices"] = [_short_line(c, f"{said}: a choice", CHOICE_MAX) for c in choices]
        if len(set(out["choices"])) != len(out["choices"]):
            raise ActionError("VALIDATION_ERROR", f"{said}: a choice is listed twice.",
                              field="result_fields")
    return out


def clean_result_fields(value: Any) -> list[dict[str, Any]]:
    """A queue's result fields as a lab writes them, checked and in their stored form (label
    defaulting to the key, kind to number, required to false)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_RESULT_FIELDS:
        raise ActionError("VALIDATION_ERROR", "result_fields must be a list of up to"
                          f" {MAX_RESULT_FIELDS} fields.", field="result_fields")
    # each field's problem said at once (a form of three bad rows was refused row by row)
    problems, fields = Problems(), []
    for number, each in enumerate(value, 1):
        with problems.field():
            fields.append(_one_field(number, each))
    problems.raise_any()
    keys = [f["key"] for f in fields]
    if twice := sorted({k for k in keys if keys.count(k) > 1}):
        raise ActionError("VALIDATION_ERROR", f"result_fields names {', '.join(twice)} twice.",
                          field="result_fields")
    return fields


def declared_results(config: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The result fields a stored queue declares; none where another writer stored a list
    the engine cannot read (a wrong type reads as absent, as every field another writer
    stores: docs/ARCHITECTURE.md, "reading a stored field")."""
    try:
        return clean_result_fields((config or {}).get("result_fields"))
    except ActionError:
        return []


def _span(low: Any, high: Any) -> str:
    """A number's bounds in words: "from 1 to 10", "at least 0", "at most 5"."""
    return (f"from {low} to {high}" if low is not None and high is not None
            else f"at least {low}" if low is not None else f"at most {high}")


def bounds_words(field: dict[str, Any]) -> str:
    """A number field's bounds as the bench says them beside its input; "" without any."""
    low, high = field.get("min"), field.get("max")
    return _span(low, high) if low is not None or high is not None else ""


def described(field: Any) -> str:
    """One result field in words: "RIN (rin): number from 1 to 10, required"."""
    if not isinstance(field, dict):
        return str(field)
    kind = {"pass_fail": "pass or fail",
            "choice": "one of " + ", ".join(str(c) for c in field.get("choices") or [])
            }.get(field.get("kind"), field.get("kind") or "number")
    unit, bounds = field.get("unit"), bounds_words(field)
    bounds = f" {bounds}" if bounds else ""
    label, key = field.get("label") or field.get("key"), field.get("key")
    return (f"{label}{f' ({key})' if label != key else ''}: {kind}{bounds}"
            f"{f' {unit}' if unit else ''}{', required' if field.get('required') else ''}")


def value_problem(field: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` cannot be recorded as ``field``, or None."""
    kind = field["kind"]
    if kind == "number":
        if not _finite(value):
            return f"{field['label']} ({field['key']}) must be a number"
        low, high = field.get("min"), field.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            return f"{field['label']} ({field['key']}) must be {_span(low, high)}"
        return None
    if kind == "pass_fail":
        if value not in PASS_FAIL:
            return f"{field['label']} ({field['key']}) must be pass or fail"
        return None
    if kind == "choice":
        if value not in field["choices"]:
            return (f"{field['label']} ({field['key']}) must be one of"
                    f" {', '.join(field['choices'])}")
        return None
    if not isinstance(value, str) or len(value) > RESULT_TEXT_MAX:
        return f"{field['label']} ({field['key']}) must be text of up to {RESULT_TEXT_MAX}"\
            " characters"
    if problem := line_problem(value):
        return f"{field['label']} ({field['key']}) {problem}"
    return None


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip(BLANK))


def said_keys(fields: list[dict[str, Any]]) -> list[str]:
    """The keys whose values a tally counts one by one (SAID_KINDS)."""
    return [f["key"] for f in fields if f["kind"] in SAID_KINDS]


def check_results(fields: list[dict[str, Any]], snapshot: dict[str, Any]) -> None:
    """Refuse a completion whose result leaves out a required field or records a declared
    one out of its kind or bounds: every problem said at once (VALIDATION_ERROR, each field
    as ``result_snapshot.<key>``). Keys the queue does not declare are kept as sent (a
    service worker's own data)."""
    problems = Problems()
    for field in fields:
        with problems.field():
            value = snapshot.get(field["key"])
            where = RESULT_FIELD + field["key"]
            if not _given(value):
                if field["required"]:
                    raise ActionError("VALIDATION_ERROR", f"Record {field['label']}"
                                      f" ({field['key']}): this step requires it.",
                                      field=where)
                continue
            if problem := value_problem(field, value):
                raise ActionError("VALIDATION_ERROR", problem + ".", field=where)
    problems.raise_any()


def check_step_result(queue: dict[str, Any] | None, snapshot: dict[str, Any] | None, *,
                      finishing: bool = True) -> None:
    """A result reported for ``queue``'s step (a queue row as selectors read it) held to the
    fields the queue declares. A completion that hands the step to an external system
    (``finishing`` false) records what it has: its required fields are the external result's
    to give."""
    fields = declared_results(queue["config"] if queue else None)
    if not finishing:
        fields = [{**f, "required": False} for f in fields]
    check_results(fields, snapshot or {})


def value_text(value: Any) -> str:
    """A stored result value as text: text as it is, anything else as its JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)


def with_unit(field: dict[str, Any], value: Any) -> str:
    """A declared field's value with its unit: "45.2 ng/µL"."""
    return f"{value_text(value)} {field['unit']}" if field.get("unit") else value_text(value)


def recorded(fields: list[dict[str, Any]], snapshot: Any) -> list[tuple[str, str]]:
    """A record's result as people read it: each declared field given (label, value and
    unit), then any other key the result holds, as (label, value) pairs."""
    if not isinstance(snapshot, dict):
        return []
    out = []
    for field in fields:
        value = snapshot.get(field["key"])
        if _given(value):
            out.append((field["label"], with_unit(field, value)))
    declared = {f["key"] for f in fields}
    out += [(str(k), value_text(v)) for k, v in snapshot.items()
            if k not in declared and _given(v)]
    return out


def result_row(fields: list[dict[str, Any]],
               snapshot: Any) -> tuple[list[Any], list[tuple[str, str]]]:
    """One attempt's result as a table's row: the value of each declared field as stored
    (None where not given), and the keys the queue does not declare as (key, value) words."""
    if not isinstance(snapshot, dict):
        return [None] * len(fields), []
    values = [value if _given(value := snapshot.get(f["key"])) else None for f in fields]
    return values, recorded([], {k: v for k, v in snapshot.items()
                                 if k not in {f["key"] for f in fields}})


def _figure(value: Any, places: int | None = None) -> str:
    """A tally's figure: a stored value as written (8.40 reads 8.4), a mean or a median to
    ``places`` decimals at most; whatever its size (a precision of 28 digits failed at 1e25)."""
    number = Decimal(str(value))
    with localcontext() as context:
        context.prec = max(28, len(number.as_tuple().digits) + (places or 0) + 2,
                           number.adjusted() + (places or 0) + 2)
        if places is not None:
            number = round(number, places)
        return format(number.normalize(), "f")


def tallied(fields: list[dict[str, Any]], rows: list[dict[str, Any]],
            attempts: int) -> list[dict[str, Any]]:
    """Each declared field over a period's ``attempts`` (rows: selectors.results_tally's):
    ``words`` for a number (its count, range, median and mean) or a text (its count); for a
    pass/fail or a choice, ``counts``, each value it declares with how many gave it, in its
    order; then in ``words`` what else was given ("1 other") and how many gave none."""
    totals = {r["key"]: r for r in rows if r["said"] is None and r["key"] is not None}
    said: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["said"] is not None:
            said.setdefault(r["key"], {})[r["said"]] = int(r["given"])
    out = []
    for field in fields:
        total = totals.get(field["key"]) or {}
        given, numbers = int(total.get("given") or 0), int(total.get("numbers") or 0)
        counts: list[tuple[int, str]] = []
        words: list[str] = []
        if field["kind"] in ("pass_fail", "choice"):
            named = PASS_FAIL if field["kind"] == "pass_fail" else tuple(field["choices"])
            values = said.get(field["key"], {})
            counts = [(values.get(value, 0), value) for value in named]
            other = sum(n for value, n in values.items() if value not in named)
            not_text = given - sum(values.values())
            words += [f"{other} other"] * bool(other) + [f"{not_text} not text"] * bool(not_text)
        elif field["kind"] == "number" and given:
            unit = f" {field['unit']}" if field.get("unit") else ""
            words.append(f"{numbers} recorded, {_figure(total['least'])} to"
                         f" {_figure(total['greatest'])}{unit}, median"
                         f" {_figure(total['median'], 3)}, mean {_figure(total['mean'], 3)}"
                         if numbers else "no number recorded")
            if given > numbers:
                words.append(f"{given - numbers} not a number")
        elif given:
            words.append(f"{given} recorded")
        if attempts > given:
            words.append("none recorded" if not given else f"{attempts - given} gave none")
        out.append({"key": field["key"], "label": field["label"],
                    "kind": field["kind"], "counts": counts, "words": "; ".join(words)})
    return out
