"""The execution envelope at ``subject.json_addl.properties.execution`` (spec 1.3).

Timestamps inside TapDB JSON are stored as fixed-width UTC text (``...T..:..:..ffffffZ``) so
that text order equals time order and the queue SQL can compare them without casts.
"""

from __future__ import annotations

from copy import deepcopy
from datetime import UTC, datetime
from typing import Any

AUTHORITATIVE_FIELDS = (
    "state",
    "revision",
    "next_queue_key",
    "next_action_key",
    "priority",
    "ready_at",
    "due_at",
    "attempt_count",
    "max_attempts_override",
    "retry_at",
    "hold_state",
    "hold_reason",
    "cancel_requested",
    "terminal",
)
CACHE_FIELDS = ("last_execution_record_euid", "queue_cache")

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


def normalize_ts(value: Any) -> str | None:
    return ts(parse_ts(value))


def new_envelope(**fields: Any) -> dict[str, Any]:
    env = deepcopy(DEFAULT_ENVELOPE)
    unknown = set(fields) - set(env)
    if unknown:
        raise ValueError(f"unknown envelope fields: {sorted(unknown)}")
    env.update(fields)
    for key in ("ready_at", "due_at", "retry_at"):
        env[key] = normalize_ts(env[key])
    return env


def read_envelope(json_addl: dict | None) -> dict[str, Any]:
    """The envelope of a subject, with defaults for any field a writer left out."""
    props = (json_addl or {}).get("properties") or {}
    current = props.get("execution") or {}
    env = deepcopy(DEFAULT_ENVELOPE)
    env.update({k: v for k, v in current.items() if k != "queue_cache"})
    env["queue_cache"] = {**DEFAULT_ENVELOPE["queue_cache"], **(current.get("queue_cache") or {})}
    return env
