"""Checks of an action request's payload fields (no database): every handler's
``validate`` builds on these (RULES.md#requests)."""

from __future__ import annotations

from bloomops.accounts.profiles import values_problem
from bloomops.execution.context import ActionRequest
from bloomops.execution.errors import ActionError
from bloomops.text import exact_line_problem, line_problem, prose_problem, shows_nothing

# The longest text each kind of field takes; the API's schemas state the same bounds from
# here (docs/API.md, "Limits").
KEY_MAX = 200  # a key or identifier a caller names: a step, a queue, an EUID, a template
REASON_MAX = 2000  # a person's reason, kept in the item's history
NOTE_MAX = 1000  # a shorter reason: a lease given back, a worker taken out of service
NAME_MAX = 300  # a subject's name
WORKER_TEXT_MAX = 300  # a worker's key and what it says of itself
ERROR_MESSAGE_MAX = 4000  # what went wrong, in a failing worker's words
LIST_MAX = 100  # values in one list (capabilities, scopes, template codes, queue keys)


def required_words(name: str) -> str:
    """A field left out or blank, as the engine says it (the console says it in its own
    words by this: web/bench_words.field_refusal)."""
    return f"{name} is required."


def too_long_words(name: str, most: int) -> str:
    """A text over its length, as the engine says it (and the console reads it)."""
    return f"{name} is too long ({most} max)."


def text_field(payload: dict, name: str, *, required: bool = False,
               max_len: int = REASON_MAX, line: bool = False) -> str | None:
    """Text, stripped; blank is missing, as is other text that shows nothing
    (text.shows_nothing: a reason of a zero-width space). ``line``: a key or name people
    read in a list must be one printable line: a control character (a terminal escape, a
    newline) or an invisible one (zero-width space) would make it look like another, and
    is refused as such."""
    value = payload.get(name)
    if value is None or (isinstance(value, str) and (
            not value.strip() or (not line and shows_nothing(value)))):
        if required:
            raise ActionError("VALIDATION_ERROR", required_words(name), field=name)
        return None
    if not isinstance(value, str):
        raise ActionError("VALIDATION_ERROR", f"{name} must be text.", field=name)
    if len(value) > max_len:
        raise ActionError("VALIDATION_ERROR", too_long_words(name, max_len), field=name)
    problem = line_problem(value.strip()) if line else prose_problem(value)
    if problem:
        raise ActionError("VALIDATION_ERROR", f"{name} {problem}.", field=name)
    return value.strip()


def key_problem(value: object) -> str | None:
    """Why ``value`` cannot be a key a caller names (next_action_key, next_queue_key), or
    None: text of 1 to KEY_MAX characters on one printable line."""
    if not isinstance(value, str) or not 0 < len(value) <= KEY_MAX:
        return f"must be text of 1 to {KEY_MAX} characters"
    return line_problem(value)


def key_field(payload: dict, name: str) -> str | None:
    """A key the payload names (key_problem), stripped; None when it names none. The payload
    then holds it so (blank: null, left out), as every later read matches it: "q2\n" was
    checked stripped and looked up as sent, a queue nobody has (404 for a 400)."""
    value = text_field(payload, name, max_len=KEY_MAX, line=True)
    if name in payload:
        payload[name] = value
    return value


def str_list_field(payload: dict, name: str) -> list[str] | None:
    """A list of non-empty texts, each one a line people can read (capabilities, scopes,
    template codes, queue keys: values matched exactly, so nothing invisible)."""
    value = payload.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ActionError("VALIDATION_ERROR", f"{name} must be a list of text.", field=name)
    if len(value) > LIST_MAX or any(len(v) > KEY_MAX for v in value):
        raise ActionError("VALIDATION_ERROR", f"{name} holds at most {LIST_MAX} values of at"
                          f" most {KEY_MAX} characters each.", field=name)
    for item in value:
        problem = line_problem(item)
        if problem:
            raise ActionError("VALIDATION_ERROR", f"{name}: {item[:40]!r} {problem}.",
                              field=name)
    return list(value)


def key_list_field(payload: dict, name: str) -> list[str] | None:
    """A list of capabilities or scope values, a queue's or a worker's (str_list_field), held
    to the rules a person's are (profiles.values_problem: no two differing only in case, no
    "any" scope); a value given twice is kept once, and the payload then holds it so."""
    values = str_list_field(payload, name)
    if values is None:
        return None
    values = list(dict.fromkeys(values))
    problem = values_problem(name, values)
    if problem:
        raise ActionError("VALIDATION_ERROR", f"{name}: {problem}", field=name)
    payload[name] = values
    return values


def int_field(payload: dict, name: str, *, minimum: int, maximum: int) -> int | None:
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ActionError("VALIDATION_ERROR", f"{name} must be an integer from {minimum} to"
                          f" {maximum}.", field=name)
    return value


def obj_field(payload: dict, name: str) -> dict | None:
    """An object of the caller's own data (a step's results, an external dispatch, a
    subject's properties), kept as sent and shown, exported and compared later: every key is
    one readable line, every text free of control characters but tabs and line breaks and
    of bidirectional controls (an escape sequence or a reversed key reached the results'
    spreadsheet as sent, where the pages had hidden it)."""
    value = payload.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ActionError("VALIDATION_ERROR", f"{name} must be an object.", field=name)
    _readable_data(value, name)
    return value


def _readable_data(value: object, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not str(key).strip():
                raise ActionError("VALIDATION_ERROR", f"{where}: a key must not be blank.",
                                  field=where)
            if problem := exact_line_problem(str(key)):
                raise ActionError("VALIDATION_ERROR", f"{where}: the key {str(key)[:60]!a}"
                                  f" {problem}.", field=where)
            _readable_data(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _readable_data(item, f"{where}[{i}]")
    elif isinstance(value, str) and (problem := prose_problem(value)):
        raise ActionError("VALIDATION_ERROR", f"{where} {problem}.", field=where)


def require(req: ActionRequest, *names: str) -> None:
    for name in names:
        if not getattr(req, name):
            raise ActionError("VALIDATION_ERROR", required_words(name), field=name)


def state_field(value: str | None, name: str = "expected_state") -> None:
    from bloomops.execution.states import ALL_STATES

    if value is not None and value not in ALL_STATES:
        raise ActionError("VALIDATION_ERROR", f"{name} must be one of {', '.join(ALL_STATES)}.",
                          field=name)


def common_checks(req: ActionRequest) -> None:
    state_field(req.expected_state)
    if req.expected_revision is not None and (
        isinstance(req.expected_revision, bool) or not isinstance(req.expected_revision, int)
    ):
        raise ActionError("VALIDATION_ERROR", "expected_revision must be an integer.",
                          field="expected_revision")
    if not isinstance(req.payload, dict):
        raise ActionError("VALIDATION_ERROR", "payload must be an object.", field="payload")
