"""Thin raw-SQL helpers over Django's connection; selectors and the executor build on these."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection

# Django turns off psycopg2's JSON decoding (JSONField decodes itself); raw reads decode here.
_JSON_OIDS = {114, 3802}


def fetch_all(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> list[dict]:
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


def fetch_one(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> dict | None:
    rows = fetch_all(sql, params)
    return rows[0] if rows else None


def fetch_value(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        return row[0] if row else None


def execute(sql: str, params: Mapping[str, Any] | Iterable[Any] | None = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
