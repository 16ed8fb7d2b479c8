"""The plan PostgreSQL chooses for a statement, with some of its other choices switched off:
what the plan tests assert on (an index used, no sort, a probe per row rather than a scan of
history)."""

from __future__ import annotations

from typing import Any

from django.db import connection


def plan_of(sql: str, params: Any = None, *, off: tuple[str, ...] = (),
            analyze: tuple[str, ...] = ()) -> str:
    """EXPLAIN of ``sql`` as text, after ANALYZE of ``analyze`` (fresh statistics for the
    rows the test made) with each planner method of ``off`` (``seqscan``, ``hashjoin`` ...)
    switched off for the rest of the test's transaction."""
    with connection.cursor() as cur:
        if analyze:
            cur.execute(f"ANALYZE {', '.join(analyze)}")
        for method in off:
            cur.execute(f"SET LOCAL enable_{method} = off")
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(r[0] for r in cur.fetchall())
