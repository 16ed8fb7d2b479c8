"""Thin raw-SQL helpers over Django's connection; selectors and the executor build on these."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import connection

from bloomops.tapdb.tenancy import for_tenant

# Django turns off psycopg2's JSON decoding (JSONField decodes itself); raw reads decode here.
_JSON_OIDS = {114, 3802}
_NAMED = re.compile(r"%\((\w+)\)s")
# Statements prepared on each database session (keyed by the psycopg2 connection object, so a
# reconnect starts afresh).
_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=512)
def _numbered(name: str, sql: str) -> tuple[str, str, tuple[str, ...]]:
    """A %(name)s statement as $n text, its session-wide name and its parameter order (worked
    out once per process: the claim path runs these for every statement)."""
    order: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    body = _NAMED.sub(number, sql)
    return f"bloomops_{name}_{hashlib.sha1(body.encode()).hexdigest()[:10]}", body, tuple(order)


def _prepared_call(name: str, sql: str, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """Turn a %(name)s statement into PREPARE once per session and EXECUTE each time.

    The hot statements of the claim path are large; planning them costs more than running
    them. A prepared statement is planned once per session (PostgreSQL re-plans by itself when
    the schema or statistics change)."""
    ident, body, order = _numbered(name, sql)
    raw = connection.connection
    known = _prepared.setdefault(raw, set())
    if ident not in known:
        with connection.cursor() as cursor:
            cursor.execute(f"PREPARE {ident} AS {body}")
        known.add(ident)
    args = ", ".join(["%s"] * len(order))
    return f"EXECUTE {ident}({args})" if order else f"EXECUTE {ident}", [params[k] for k in order]


def fetch_all(
    sql: str,
    params: Mapping[str, Any] | Iterable[Any] | None = None,
    *,
    prepare: str | None = None,
) -> list[dict]:
    sql = for_tenant(sql, params)
    if prepare and settings.BLOOMOPS_PREPARED_STATEMENTS:
        connection.ensure_connection()
        sql, params = _prepared_call(prepare, sql, params)  # type: ignore[arg-type]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.description is None:
            return []
        columns = [col[0] for col in cursor.description]
        json_cols = [i for i, col in enumerate(cursor.description) if col[1] in _JSON_OIDS]
        rows = cursor.fetchall()
        if json_cols:
            rows = [list(row) for row in rows]
            for row in rows:
                for i in json_cols:
                    if isinstance(row[i], str):
                        row[i] = json.loads(row[i])
        return [dict(zip(columns, row, strict=True)) for row in rows]


def fetch_one(
    sql: str,
    params: Mapping[str, Any] | Iterable[Any] | None = None,
    *,
    prepare: str | None = None,
) -> dict | None:
    rows = fetch_all(sql, params, prepare=prepare)
    return rows[0] if rows else None


def fetch_value(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> Any:
    sql = for_tenant(sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        return row[0] if row else None


def execute(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> int:
    sql = for_tenant(sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
