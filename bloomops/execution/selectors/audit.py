"""TapDB's own audit rows of an instance (its triggers write them), as the inspector shows
them: what each change changed, not two long JSON texts alike in their first lines."""

from __future__ import annotations

import json
from typing import Any

from bloomops.execution.envelope import parse_ts_or_none
from bloomops.execution.guards import load_json
from bloomops.tapdb.db import fetch_all

# The fields of one change the inspector lists (the rest are counted).
CHANGES_SHOWN = 12


def audit_trail(instance_uid: int, *, limit: int = 200) -> list[dict[str, Any]]:
    """The rows, newest first, each with ``changes``: for a JSON column, every field that
    differs (``json_changes``); and ``same_instant`` when it rewrote a timestamp to the same
    instant in another text form (TapDB's update trigger does so for created_dt: "+00"
    became "+00:00"), which read as if someone had changed when the object was created. A
    JSON column's values come whole (a cut one cannot be compared); others cut at 400
    characters. One query."""
    rows = fetch_all(
        """
        SELECT changed_at, changed_by, operation_type, column_name,
               CASE WHEN column_name = 'json_addl' THEN old_value
                    ELSE left(old_value, 400) END AS old_value,
               CASE WHEN column_name = 'json_addl' THEN new_value
                    ELSE left(new_value, 400) END AS new_value
        FROM audit_log WHERE rel_table_name = 'generic_instance' AND rel_table_uid_fk = %s
        ORDER BY uid DESC LIMIT %s
        """,
        [instance_uid, limit],
    )
    for row in rows:
        old, new = parse_ts_or_none(row["old_value"]), parse_ts_or_none(row["new_value"])
        row["same_instant"] = (str(row["column_name"] or "").endswith("_dt")
                               and old is not None and old == new)
        row["changes"] = json_changes(row["old_value"], row["new_value"])
    return rows


def json_changes(old: str | None, new: str | None) -> list[tuple[str, str, str]] | None:
    """(dotted path, before, after) of every value that differs between two JSON texts,
    each value as compact JSON cut at 120 characters ("–" where absent); None unless both
    are JSON objects."""
    try:  # as outside JSON is read: another writer's 2,000-deep nest is no 500 (guards)
        before, after = load_json(old or ""), load_json(new or "")
    except ValueError:
        return None
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    out: list[tuple[str, str, str]] = []
    _walk(before, after, "", out)
    return out


_ABSENT = object()


def _walk(a: Any, b: Any, path: str, out: list[tuple[str, str, str]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _walk(a.get(key, _ABSENT), b.get(key, _ABSENT), f"{path}.{key}" if path else key,
                  out)
    elif a is _ABSENT or b is _ABSENT or _shown(a, cut=False) != _shown(b, cut=False):
        # compared as written: 1 and true, 0 and false, 1 and 1.0 are equal to Python
        out.append((path, _shown(a), _shown(b)))


def _shown(value: Any, *, cut: bool = True) -> str:
    if value is _ABSENT:
        return "–"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text if not cut or len(text) <= 120 else text[:119] + "…"
