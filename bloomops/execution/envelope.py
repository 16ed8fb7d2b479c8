"""The execution envelope at ``subject.json_addl.properties.execution`` (RULES.md#envelope).

Timestamps inside TapDB JSON are stored as fixed-width UTC text (``...T..:..:..ffffffZ``) so
that text order equals time order and the queue SQL can compare them without casts.
"""

from __future__ import annotations

import re
from copy import deepcopy
from datetime import UTC, datetime
from typing import Any

from bloomops.execution.states import ALL_STATES

DEFAULT_ENVELOPE: dict[str, Any] = {
    "state": "PENDING",
    "revision": 1,
    "next_queue_key": None,
    "next_action_key": None,
    "priority": 0,
    "ready_at": None,
    "due_at": None,
    "attempt_count": 0,
    "max_attempts_override": None,
    "retry_at": None,
    "hold_state": "NONE",
    "hold_reason": None,
    "cancel_requested": False,
    "terminal": False,
    "last_execution_record_euid": None,
    "queue_cache": {"current_queue_key": None, "computed_at": None},
}

TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# What the SQL side also checks of a timestamp (sql.ENVELOPE_VALID): a date and a time.
_ISO_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def ts(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime(TS_FORMAT)


def parse_ts(value: Any) -> datetime | None:
    """Parse any ISO-8601 timestamp (with Z or offset); naive values are taken as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value).strip()
    if text.endswith("Z") or text.endswith("z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_ts_or_none(value: Any) -> datetime | None:
    """For display of values any writer may have stored: unreadable is shown as unknown."""
    try:
        return parse_ts(value)
    except (TypeError, ValueError):
        return None


def parse_stored_ts(value: Any) -> datetime | None:
    """A timestamp from a stored envelope, as far as it can be read: the whole of it, else
    to the second (the part the envelope's validity checks: sql.ENVELOPE_VALID), else None.
    Another writer's "...:00.abcdefZ" passes that check and bloomops_utc's shape test."""
    moment = parse_ts_or_none(value)
    if moment is None and isinstance(value, str) and len(value) > 19:
        moment = parse_ts_or_none(value[:19])
    return moment


# The years a request's instant may name: stored as fixed-width text (four digits) whose
# order is time order, and convertible to UTC without leaving what Python's dates hold.
YEARS = (1000, 9998)


# An instant as a request must give it: a date, a time, its zone (Z or an offset). A time
# without a zone was taken as UTC, "...:00.Z" as :00, and "" as none given.
# (The API's schema states it as its pattern, around white space the engine strips.)
REQUEST_INSTANT_PATTERN = (r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}"
                           r"(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})")
REQUEST_INSTANT = re.compile(REQUEST_INSTANT_PATTERN)


def request_ts(value: Any) -> str | None:
    """A request's instant as the envelope stores it (normalize_ts); ValueError unless it is
    a date, a time and its zone (REQUEST_INSTANT). None: none given (null, never "")."""
    if isinstance(value, str) and not REQUEST_INSTANT.fullmatch(value.strip()):
        raise ValueError(f"{value[:40]!r} is not a date, time and zone")
    return normalize_ts(value)


def normalize_ts(value: Any) -> str | None:
    """An instant as the envelope stores it (UTC, fixed width), read as bloomops_utc reads
    another writer's (a time without a zone is UTC); ValueError when it is no ISO 8601
    instant within YEARS."""
    try:
        moment = parse_ts(value)
    except ValueError as exc:  # Python's words ("offset must be a timedelta ...") are no one's
        raise ValueError(f"{str(value)[:40]!r} is not a date, time and zone") from exc
    if moment is None:
        return None
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not YEARS[0] <= utc.year <= YEARS[1]:
        raise ValueError(f"{str(value)[:40]!r} is outside the years {YEARS[0]} to {YEARS[1]}"
                         " (in UTC)")
    return ts(utc)


HOLD_STATES = ("NONE", "ACTIVE", "TERMINAL")
# The SQL twin of these checks is sql.ENVELOPE_VALID; tests hold the two to the same rows.
_TEXT_FIELDS = ("next_queue_key", "next_action_key", "hold_reason", "last_execution_record_euid")
_TS_FIELDS = ("ready_at", "due_at", "retry_at")
_FLAG_FIELDS = ("cancel_requested", "terminal")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def envelope_problems(raw: Any) -> list[tuple[str, str]]:
    """Every field of a stored envelope whose type or value the engine cannot work with, as
    (field, plain problem). Any TapDB writer (another system, an old row, raw SQL) may have
    written it, so nothing here assumes the envelope was built by ``new_envelope``.
    See docs/RULES.md#envelope."""
    if not isinstance(raw, dict):
        return [("execution", "the envelope is not an object")]
    problems: list[tuple[str, str]] = []

    def bad(name: str, what: str) -> None:
        problems.append((name, f"{name} must be {what} (found {raw.get(name)!r:.60})"))

    if raw.get("state") not in ALL_STATES:
        bad("state", "one of " + ", ".join(ALL_STATES))
    for name in ("revision", "attempt_count"):
        if name in raw and raw[name] is not None and not (_is_int(raw[name]) and raw[name] >= 0):
            bad(name, "a whole number >= 0")
    if raw.get("max_attempts_override") is not None and not (
        _is_int(raw["max_attempts_override"]) and raw["max_attempts_override"] >= 1
    ):
        bad("max_attempts_override", "a whole number >= 1 or null")
    if raw.get("priority") is not None and not _is_number(raw["priority"]):
        bad("priority", "a number")
    for name in _TEXT_FIELDS:
        if raw.get(name) is not None and not isinstance(raw[name], str):
            bad(name, "text or null")
    for name in _TS_FIELDS:
        value = raw.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not _ISO_PREFIX.match(value):
            bad(name, "an ISO 8601 timestamp or null")
            continue
        try:
            parse_ts(value)
        except ValueError:
            bad(name, "an ISO 8601 timestamp or null")
    for name in _FLAG_FIELDS:
        if raw.get(name) is not None and not isinstance(raw[name], bool):
            bad(name, "true or false")
    if raw.get("hold_state") is not None and raw["hold_state"] not in HOLD_STATES:
        bad("hold_state", "one of " + ", ".join(HOLD_STATES))
    if raw.get("queue_cache") is not None and not isinstance(raw["queue_cache"], dict):
        bad("queue_cache", "an object or null")
    return problems


def new_envelope(**fields: Any) -> dict[str, Any]:
    env = deepcopy(DEFAULT_ENVELOPE)
    unknown = set(fields) - set(env)
    if unknown:
        raise ValueError(f"unknown envelope fields: {sorted(unknown)}")
    env.update(fields)
    for key in ("ready_at", "due_at", "retry_at"):
        env[key] = normalize_ts(env[key])
    return env


def properties_of(json_addl: Any) -> dict[str, Any]:
    """An object's properties: {} where another writer stored something other than an
    object there (a text, a list), so no reader trips over it."""
    props = json_addl.get("properties") if isinstance(json_addl, dict) else None
    return dict(props) if isinstance(props, dict) else {}


def read_envelope(json_addl: dict | None) -> dict[str, Any]:
    """The envelope of a subject, with defaults for any field a writer left out or wrote
    with a wrong type (see ``envelope_problems``), so no reader ever trips over a value."""
    return clean_envelope(properties_of(json_addl).get("execution"))


def clean_envelope(raw: Any) -> dict[str, Any]:
    current = raw if isinstance(raw, dict) else {}
    broken = {name for name, _ in envelope_problems(current)} if current else set()
    env = deepcopy(DEFAULT_ENVELOPE)
    env.update({k: v for k, v in current.items() if k != "queue_cache" and k not in broken})
    cache = current.get("queue_cache") if "queue_cache" not in broken else None
    env["queue_cache"] = {**DEFAULT_ENVELOPE["queue_cache"], **(cache or {})}
    if "state" in broken:
        # An unknown state must never read as claimable: PENDING is in no queue's states.
        env["state"] = "PENDING"
    return env
