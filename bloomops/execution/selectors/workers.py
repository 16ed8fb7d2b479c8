"""Workers with computed status and lease counts; leases by effective status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.execution import clock
from bloomops.execution.policy import liveness, readable_worker
from bloomops.execution.selectors.base import (
    read_params,
    tenant_parent,
    total_column,
)
from bloomops.execution.sql import (
    ENV,
    SCOPE_FIELDS,
    SUBJECT_REVISION,
    TEMPLATES,
    lease_effective_status,
    lease_past_expiry,
    worker_active_leases,
)
from bloomops.execution.states import DEFAULT_MAX_LEASES
from bloomops.tapdb.db import fetch_all


@dataclass
class WorkerRow:
    uid: int
    euid: str
    props: dict[str, Any]
    active_leases: int
    heartbeat_lag_seconds: float | None
    computed_status: str
    total: int | None = None  # how many workers in all, beyond the page (``counted``)

    @property
    def worker_key(self) -> str:
        return self.props.get("worker_key", "")

    @property
    def max_concurrent_leases(self) -> int:
        return int(self.props.get("max_concurrent_leases") or DEFAULT_MAX_LEASES)


def workers(*, now: datetime | None = None, tenant: str | None = None,
            euid: str | None = None, limit: int | None = None,
            offset: int = 0, counted: bool = False) -> list[WorkerRow]:
    """Workers with computed status (OFFLINE when the heartbeat is older than its TTL) and
    active nonexpired lease counts, by key (``limit``: one page of them; ``counted``: each
    with ``total``). One query."""
    moment = now or clock.now()
    params = read_params(moment, tenant, euid=euid, limit=limit, offset=offset)
    rows = fetch_all(
        f"""
        SELECT w.uid, w.euid, w.json_addl->'properties' AS props,
               {worker_active_leases("w.uid", "w.euid")} AS active_leases,
               {total_column(counted)} AS total
        FROM generic_instance w
        WHERE w.tenant_id = %(tenant)s AND NOT w.is_deleted
          AND w.type = 'system' AND w.subtype = 'worker'
          AND (%(euid)s::text IS NULL OR w.euid = %(euid)s)
        ORDER BY w.json_addl->'properties'->>'worker_key', w.uid
        LIMIT %(limit)s OFFSET %(offset)s
        """,
        params,
    )
    out = []
    for row in rows:
        props = readable_worker(row["props"])
        status, lag = liveness(props, moment)
        out.append(WorkerRow(uid=row["uid"], euid=row["euid"], props=props,
                             active_leases=int(row["active_leases"]),
                             heartbeat_lag_seconds=lag, computed_status=status,
                             total=row["total"]))
    return out


def leases(*, status: str | None = None, now: datetime | None = None,
           tenant: str | None = None, worker_euid: str | None = None,
           queue_key: str | None = None, limit: int = 500,
           oldest_first: bool = False, unswept: bool = False,
           per_worker: int | None = None, counted: bool = False) -> list[dict[str, Any]]:
    """Leases by status; ACTIVE means active and unexpired, EXPIRED includes ACTIVE leases
    past expiry that no sweeper has marked yet. Subject and worker come from lineage; with
    the subject's envelope (``execution``). Active leases are found among the leases stored
    ACTIVE (a partial index), and a worker's by the EUID copied into its leases, lineage
    deciding (RULES.md#leases): neither reads the lab's history of leases. ``queue_key``:
    the leases taken in that queue (before the limit, not among the first ``limit``).
    ``unswept``: only the leases stored ACTIVE past their expiry, that no sweeper has marked
    yet (found among the ACTIVE ones too). ``per_worker``: at most that many of each
    worker's (the workers page: every worker's newest, not the lab's newest 500).
    ``counted``: each row carries ``total``, how many match before the limit. One query."""
    params = read_params(now, tenant, status=status, worker_euid=worker_euid,
                         queue_key=queue_key, limit=limit)
    narrow = ""
    if status == "ACTIVE":  # stored ACTIVE (the partial index); the status test decides
        narrow += "\n          AND x.json_addl->'properties'->>'status' = 'ACTIVE'"
    if unswept:
        narrow += f"\n          AND {lease_past_expiry('x')}"
    if worker_euid:
        narrow += ("\n          AND x.json_addl->'properties'->>'worker_lookup_euid'"
                   " = %(worker_euid)s")
    if queue_key:
        narrow += "\n          AND x.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s"
    # by the worker lineage names, as the rows are grouped (the copied EUID only finds)
    nth = "row_number() OVER (PARTITION BY w.euid ORDER BY x.uid DESC)" if per_worker else "1"
    return fetch_all(
        f"""
        SELECT x.*, {total_column(counted)} AS total FROM (
        SELECT x.uid AS lease_uid, x.euid, x.created_dt, x.json_addl->'properties' AS props,
               {nth} AS nth,
               {lease_effective_status()} AS effective_status,
               s.euid AS subject_euid, s.name AS subject_name, w.euid AS worker_euid,
               w.json_addl->'properties'->>'display_name' AS worker_name,
               {ENV} AS execution, {ENV}->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision, t.code AS subject_template_code,
               jsonb_build_object({", ".join(f"'{f}', s.json_addl->'properties'->'{f}'"
                                             for f in SCOPE_FIELDS)}) AS subject_scope
        FROM generic_instance x
        {tenant_parent("x.uid", "execution_subject_lease", "s")}
        LEFT JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        {tenant_parent("x.uid", "execution_worker_lease", "w")}
        WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted
          AND x.type = 'execution' AND x.subtype = 'queue_lease'{narrow}
          AND (%(worker_euid)s::text IS NULL OR w.euid = %(worker_euid)s)
          AND (%(status)s::text IS NULL OR {lease_effective_status()} = %(status)s)
        ) x WHERE x.nth <= %(per_worker)s
        ORDER BY x.lease_uid {"ASC" if oldest_first else "DESC"}
        LIMIT %(limit)s
        """,
        {**params, "per_worker": per_worker or 1},
    )
