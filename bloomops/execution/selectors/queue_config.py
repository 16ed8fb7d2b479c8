"""A queue's change history: who changed its configuration, when, why and what changed,
across the queue objects it replaced (RULES.md#queue-configuration)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bloomops.execution.selectors.base import read_params
from bloomops.tapdb.db import fetch_all

# The lineage edge from a retired queue object to its successor (written by replace_queue).
SUCCESSOR_REL = "execution_queue_successor"


@dataclass
class QueueChange:
    action_euid: str
    action_key: str
    queue_euid: str
    executed_by: str
    executed_at: str
    reason: str | None
    changes: dict[str, list[Any]]
    retired_queue_euid: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def queue_history(queue_key: str, *, tenant: str | None = None,
                  limit: int = 200) -> list[QueueChange]:
    """The configuration actions on this queue's object and on every object it replaced,
    newest first. One query (a recursive walk back through the successor edges)."""
    rows = fetch_all(
        """
        WITH RECURSIVE chain(uid, euid) AS (
            SELECT q.uid, q.euid FROM generic_instance q
            WHERE q.tenant_id = %(tenant)s AND NOT q.is_deleted AND q.type = 'execution'
              AND q.subtype = 'queue' AND q.json_addl->'properties'->>'queue_key' = %(key)s
            UNION
            SELECT p.uid, p.euid FROM chain c
            JOIN generic_instance_lineage l ON l.child_instance_uid = c.uid
             AND l.relationship_type = %(rel)s AND NOT l.is_deleted
            JOIN generic_instance p ON p.uid = l.parent_instance_uid AND p.tenant_id = %(tenant)s
        )
        SELECT DISTINCT ON (a.uid) a.euid, a.subtype AS action_key, c.euid AS queue_euid,
               a.json_addl AS body
        FROM chain c
        JOIN generic_instance_lineage e ON e.child_instance_uid = c.uid
         AND e.relationship_type = 'executed_on' AND NOT e.is_deleted
        JOIN generic_instance a ON a.uid = e.parent_instance_uid AND NOT a.is_deleted
         AND a.type = 'execution_queue' AND a.tenant_id = %(tenant)s
        ORDER BY a.uid DESC
        LIMIT %(limit)s
        """,
        read_params(None, tenant, key=queue_key, rel=SUCCESSOR_REL, limit=limit),
    )
    out = []
    for row in rows:
        body = row["body"] or {}
        result = body.get("result") or {}
        out.append(QueueChange(
            action_euid=row["euid"], action_key=row["action_key"], queue_euid=row["queue_euid"],
            executed_by=body.get("executed_by") or "", executed_at=body.get("executed_at") or "",
            reason=body.get("reason"), changes=result.get("changes") or {},
            retired_queue_euid=result.get("retired_queue_euid")))
    return out
