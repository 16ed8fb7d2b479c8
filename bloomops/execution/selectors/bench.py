"""Reads of the bench (a person's own work; their active leases are ``selectors.leases``): the
leases they lost without acting themselves and why, and their worker's standing
(RULES.md#leases, RULES.md#human-workers)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bloomops.execution import clock
from bloomops.execution.envelope import ts
from bloomops.execution.selectors.base import ACTION_WHY, read_params
from bloomops.execution.sql import lease_effective_status, utc, worker_active_leases
from bloomops.tapdb.db import fetch_all, fetch_one

# How far back a lost lease is still worth telling its person about.
LOST_WINDOW = timedelta(hours=24)

# A worker's leases (x) with their subjects (s), and the condition naming the worker.
_WORKER_LEASES = """
    FROM generic_instance w
    JOIN generic_instance_lineage lw ON lw.parent_instance_uid = w.uid
         AND lw.relationship_type = 'execution_worker_lease' AND NOT lw.is_deleted
    JOIN generic_instance x ON x.uid = lw.child_instance_uid AND NOT x.is_deleted
         AND x.type = 'execution' AND x.subtype = 'queue_lease' AND x.tenant_id = %(tenant)s
    LEFT JOIN generic_instance_lineage ls ON ls.child_instance_uid = x.uid
         AND ls.relationship_type = 'execution_subject_lease' AND NOT ls.is_deleted
    LEFT JOIN generic_instance s ON s.uid = ls.parent_instance_uid
         AND s.tenant_id = %(tenant)s"""
_OF_WORKER = """
    WHERE w.euid = %(worker_euid)s AND w.tenant_id = %(tenant)s"""


def lost_leases(worker_euid: str, *, now: datetime | None = None,
                tenant: str | None = None) -> list[dict[str, Any]]:
    """The worker's leases of the last day that ended other than by completing, with the
    action that ended them, if one did: the action record on the lease or its subject written
    in the same transaction (its executed_at is the lease's released_at). A lease still stored
    ACTIVE past its expiry has none yet. Newest first. One query."""
    moment = now or clock.now()
    return fetch_all(_LOST_SQL, read_params(moment, tenant, worker_euid=worker_euid,
                                            since=ts(moment - LOST_WINDOW)))


_LOST_SQL = f"""
    SELECT x.euid, x.json_addl->'properties' AS props, s.euid AS subject_euid,
           s.name AS subject_name, {lease_effective_status()} AS effective_status,
           a.subtype AS action_key, a.json_addl->>'executed_by' AS executed_by,
           a.json_addl->>'executed_by_name' AS executed_by_name,
           {ACTION_WHY} AS reason
    {_WORKER_LEASES}
    LEFT JOIN LATERAL (
        SELECT r.subtype, r.json_addl
        FROM generic_instance_lineage e
        JOIN generic_instance r ON r.uid = e.parent_instance_uid AND NOT r.is_deleted
        WHERE e.relationship_type = 'executed_on' AND NOT e.is_deleted
          AND e.child_instance_uid IN (x.uid, s.uid) AND r.tenant_id = %(tenant)s
          AND r.json_addl->>'executed_at' = x.json_addl->'properties'->>'released_at'
        ORDER BY r.uid DESC LIMIT 1
    ) a ON true
    {_OF_WORKER}
      AND {lease_effective_status()} NOT IN ('ACTIVE', 'COMPLETED')
      AND {utc("COALESCE(x.json_addl->'properties'->>'released_at',"
               " x.json_addl->'properties'->>'expires_at')")} >= %(since)s
    ORDER BY x.uid DESC
    LIMIT 20
    """


def worker_standing(worker_euid: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """The worker's status and the last status change an admin made (who, when, why). One
    query."""
    return fetch_one(
        f"""
        SELECT w.euid, w.json_addl->'properties'->>'status' AS status,
               a.json_addl->>'executed_by' AS executed_by,
               a.json_addl->>'executed_at' AS executed_at,
               {ACTION_WHY} AS reason,
               a.json_addl->'captured_data'->>'operation' AS operation
        FROM generic_instance w
        LEFT JOIN LATERAL (
            SELECT r.json_addl
            FROM generic_instance_lineage e
            JOIN generic_instance r ON r.uid = e.parent_instance_uid AND NOT r.is_deleted
            WHERE e.child_instance_uid = w.uid AND e.relationship_type = 'executed_on'
              AND NOT e.is_deleted AND r.subtype = 'set_worker_status'
              AND r.tenant_id = %(tenant)s
            ORDER BY r.uid DESC LIMIT 1
        ) a ON true
        WHERE w.euid = %(worker_euid)s AND w.tenant_id = %(tenant)s AND NOT w.is_deleted
        """,
        read_params(None, tenant, worker_euid=worker_euid),
    )


def claims_held(worker_key: str, *, tenant: str | None = None) -> int:
    """How many items the worker of ``worker_key`` holds now (0 without one): what signing
    out leaves locked for others. Only its active leases are read. One query."""
    row = fetch_one(
        f"""SELECT {worker_active_leases("w.uid", "w.euid")} AS n FROM generic_instance w
        WHERE w.tenant_id = %(tenant)s AND NOT w.is_deleted AND w.type = 'system'
          AND w.subtype = 'worker'
          AND w.json_addl->'properties'->>'worker_key' = %(key)s""",
        read_params(None, tenant, key=worker_key))
    return int(row["n"]) if row else 0
