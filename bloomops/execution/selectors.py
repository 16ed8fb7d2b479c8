"""Reads of the execution engine. Each public function issues one SQL query (or a constant
number, stated in its docstring), never a query per row and never a Python loop over
subjects. "now" is always a parameter, defaulting to the engine clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from bloomops.execution import clock
from bloomops.execution.envelope import parse_ts, ts
from bloomops.execution.sql import (
    ENV,
    HAS_ENVELOPE,
    ORDER_BY,
    QP,
    QUEUES,
    READY_TS,
    TEMPLATE_CODE,
    VISIBLE,
)
from bloomops.execution.states import priority_class
from bloomops.tapdb.db import fetch_all, fetch_one

THROUGHPUT_WINDOW_MINUTES = 60


def _params(now: datetime | None, tenant: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "now": ts(now or clock.now()),
        "tenant": str(tenant or settings.TAPDB_TENANT_ID),
        **extra,
    }


@dataclass
class QueueSummary:
    queue_key: str
    euid: str
    display_name: str
    enabled: bool
    manual_only: bool
    dispatch_priority: int
    config: dict[str, Any]
    depth: int = 0
    oldest_ready_at: datetime | None = None
    newest_ready_at: datetime | None = None
    stat_count: int = 0
    urgent_count: int = 0
    held_count: int = 0
    retry_pending_count: int = 0
    active_leases: int = 0
    expired_leases_total: int = 0
    dead_letter_count: int = 0
    successes_window: int = 0
    failures_window: int = 0
    retryable_failures_total: int = 0
    terminal_failures_total: int = 0
    now: datetime | None = None
    worker_online_count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def oldest_job_age_seconds(self) -> float:
        if self.oldest_ready_at is None or self.now is None:
            return 0.0
        return max(0.0, (self.now - self.oldest_ready_at).total_seconds())

    @property
    def newest_job_age_seconds(self) -> float:
        if self.newest_ready_at is None or self.now is None:
            return 0.0
        return max(0.0, (self.now - self.newest_ready_at).total_seconds())

    @property
    def throughput_success_per_minute(self) -> float:
        return self.successes_window / THROUGHPUT_WINDOW_MINUTES

    @property
    def throughput_failure_per_minute(self) -> float:
        return self.failures_window / THROUGHPUT_WINDOW_MINUTES

    @property
    def failure_rate(self) -> float:
        total = self.successes_window + self.failures_window
        return self.failures_window / total if total else 0.0

    @property
    def straggler_threshold_seconds(self) -> int:
        return int(self.config.get("straggler_threshold_seconds") or 0)

    @property
    def is_straggling(self) -> bool:
        threshold = self.straggler_threshold_seconds
        return bool(threshold and self.depth and self.oldest_job_age_seconds > threshold)


def _queue_summary_from_row(row: dict, now: datetime) -> QueueSummary:
    cfg = row["config"] or {}
    return QueueSummary(
        queue_key=row["queue_key"],
        euid=row["euid"],
        display_name=cfg.get("display_name") or row["queue_key"],
        enabled=bool(cfg.get("enabled", True)),
        manual_only=bool(cfg.get("manual_only", False)),
        dispatch_priority=int(cfg.get("dispatch_priority") or 0),
        config=cfg,
        now=now,
    )


def queues(*, tenant: str | None = None) -> list[dict[str, Any]]:
    """Queue objects of the tenant (config only), in dispatch order. One query."""
    return fetch_all(
        f"""
        SELECT q.uid, q.euid, {QP}->>'queue_key' AS queue_key, {QP} AS config
        FROM ({QUEUES}) q
        ORDER BY coalesce(({QP}->>'dispatch_priority')::int, 0) DESC, {QP}->>'queue_key'
        """,
        _params(None, tenant),
    )


def queue_depths(*, now: datetime | None = None, tenant: str | None = None) -> dict[str, int]:
    """queue_key -> count of visible subjects, for every queue. One query."""
    rows = fetch_all(
        f"""
        SELECT {QP}->>'queue_key' AS queue_key, count(s.uid) AS depth
        FROM ({QUEUES}) q
        LEFT JOIN generic_instance s
          ON s.tenant_id = q.tenant_id AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = {QP}->>'queue_key'
        LEFT JOIN generic_template t ON t.uid = s.template_uid
        WHERE s.uid IS NULL OR {VISIBLE}
        GROUP BY 1
        """,
        _params(now, tenant),
    )
    return {r["queue_key"]: int(r["depth"]) for r in rows}


def queue_summaries(
    *, now: datetime | None = None, tenant: str | None = None
) -> list[QueueSummary]:
    """Every queue with the metrics of spec 9.1, in dispatch order. Four queries in all,
    whatever the number of queues or subjects: subjects, leases, records, dead letters."""
    moment = now or clock.now()
    params = _params(moment, tenant, window_start=ts(_minus_minutes(moment)))
    subject_rows = fetch_all(
        f"""
        SELECT q.euid, {QP}->>'queue_key' AS queue_key, {QP} AS config,
               count(s.uid) FILTER (WHERE vis) AS depth,
               min(ready_ts) FILTER (WHERE vis) AS oldest,
               max(ready_ts) FILTER (WHERE vis) AS newest,
               count(s.uid) FILTER (WHERE vis AND prio >= 300) AS stat_count,
               count(s.uid) FILTER (WHERE vis AND prio >= 200 AND prio < 300) AS urgent_count,
               count(s.uid) FILTER (WHERE held) AS held_count,
               count(s.uid) FILTER (WHERE retry_pending) AS retry_pending_count
        FROM ({QUEUES}) q
        LEFT JOIN LATERAL (
            SELECT s.uid, {READY_TS} AS ready_ts,
                   coalesce(({ENV}->>'priority')::numeric, 0) AS prio,
                   {VISIBLE} AS vis,
                   (coalesce(({ENV}->>'terminal')::boolean, false) = false AND (
                        {ENV}->>'state' = 'HELD' OR {ENV}->>'hold_state' = 'ACTIVE')) AS held,
                   ({ENV}->>'state' = 'FAILED_RETRYABLE'
                        AND coalesce(({ENV}->>'terminal')::boolean, false) = false
                        AND {ENV}->>'retry_at' > %(now)s) AS retry_pending
            FROM generic_instance s
            JOIN generic_template t ON t.uid = s.template_uid
            WHERE s.tenant_id = q.tenant_id AND {HAS_ENVELOPE}
              AND {ENV}->>'next_queue_key' = {QP}->>'queue_key'
        ) s ON true
        GROUP BY q.euid, q.json_addl
        ORDER BY coalesce(({QP}->>'dispatch_priority')::int, 0) DESC, {QP}->>'queue_key'
        """,
        params,
    )
    summaries = []
    by_key: dict[str, QueueSummary] = {}
    for row in subject_rows:
        summary = _queue_summary_from_row(row, moment)
        summary.depth = int(row["depth"])
        summary.oldest_ready_at = parse_ts(row["oldest"])
        summary.newest_ready_at = parse_ts(row["newest"])
        summary.stat_count = int(row["stat_count"])
        summary.urgent_count = int(row["urgent_count"])
        summary.held_count = int(row["held_count"])
        summary.retry_pending_count = int(row["retry_pending_count"])
        summaries.append(summary)
        by_key[summary.queue_key] = summary
    if not summaries:
        return []

    for row in fetch_all(
        """
        SELECT x.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
               count(*) FILTER (WHERE x.json_addl->'properties'->>'status' = 'ACTIVE'
                                  AND x.json_addl->'properties'->>'expires_at' > %(now)s)
                   AS active,
               count(*) FILTER (WHERE x.json_addl->'properties'->>'status' = 'EXPIRED'
                                   OR (x.json_addl->'properties'->>'status' = 'ACTIVE'
                                       AND x.json_addl->'properties'->>'expires_at' <= %(now)s))
                   AS expired
        FROM generic_instance x
        WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted
          AND x.type = 'execution' AND x.subtype = 'queue_lease'
          AND (x.json_addl->'properties'->>'status' IN ('ACTIVE', 'EXPIRED'))
        GROUP BY 1
        """,
        params,
    ):
        if row["queue_key"] in by_key:
            by_key[row["queue_key"]].active_leases = int(row["active"])
            by_key[row["queue_key"]].expired_leases_total = int(row["expired"])

    for row in fetch_all(
        """
        SELECT r.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
               count(*) FILTER (WHERE st = 'SUCCEEDED' AND fin >= %(window_start)s) AS ok_w,
               count(*) FILTER (WHERE st IN ('FAILED_RETRYABLE', 'FAILED_TERMINAL')
                                  AND fin >= %(window_start)s) AS fail_w,
               count(*) FILTER (WHERE st = 'FAILED_RETRYABLE') AS retryable_total,
               count(*) FILTER (WHERE st = 'FAILED_TERMINAL') AS terminal_total
        FROM generic_instance r
        CROSS JOIN LATERAL (SELECT r.json_addl->'properties'->>'status' AS st,
                                   r.json_addl->'properties'->>'finished_at' AS fin) f
        WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
          AND r.type = 'execution' AND r.subtype = 'execution_record'
          AND r.json_addl->'properties'->>'finished_at' IS NOT NULL
        GROUP BY 1
        """,
        params,
    ):
        if row["queue_key"] in by_key:
            s = by_key[row["queue_key"]]
            s.successes_window = int(row["ok_w"])
            s.failures_window = int(row["fail_w"])
            s.retryable_failures_total = int(row["retryable_total"])
            s.terminal_failures_total = int(row["terminal_total"])

    for row in fetch_all(
        """
        SELECT d.json_addl->'properties'->>'queue_lookup_key' AS queue_key, count(*) AS n
        FROM generic_instance d
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND d.json_addl->'properties'->>'resolution_state' = 'OPEN'
        GROUP BY 1
        """,
        params,
    ):
        if row["queue_key"] in by_key:
            by_key[row["queue_key"]].dead_letter_count = int(row["n"])
    return summaries


def _minus_minutes(moment: datetime, minutes: int = THROUGHPUT_WINDOW_MINUTES) -> datetime:
    from datetime import timedelta

    return moment - timedelta(minutes=minutes)


ITEM_COLUMNS = f"""
    s.uid, s.euid, s.name, s.created_dt, {ENV} AS execution,
    s.json_addl->'properties'->>'site' AS site,
    s.json_addl->'properties'->>'platform' AS platform,
    s.json_addl->'properties'->>'assay' AS assay,
    {READY_TS} AS ready_ts, {TEMPLATE_CODE} AS template_code"""


@dataclass
class QueueItem:
    uid: int
    euid: str
    name: str
    execution: dict[str, Any]
    site: str | None
    platform: str | None
    assay: str | None
    ready_at: datetime | None
    template_code: str
    created_dt: datetime
    position: int = 0

    @property
    def priority(self) -> int:
        return int(self.execution.get("priority") or 0)

    @property
    def priority_class(self) -> str:
        return priority_class(self.priority)

    @property
    def state(self) -> str:
        return self.execution.get("state", "")

    @property
    def revision(self) -> int:
        return int(self.execution.get("revision") or 0)

    @property
    def due_at(self) -> datetime | None:
        return parse_ts(self.execution.get("due_at"))

    @property
    def attempt_count(self) -> int:
        return int(self.execution.get("attempt_count") or 0)


def _item(row: dict, position: int = 0) -> QueueItem:
    return QueueItem(
        uid=row["uid"],
        euid=row["euid"],
        name=row["name"],
        execution=row["execution"] or {},
        site=row["site"],
        platform=row["platform"],
        assay=row["assay"],
        ready_at=parse_ts(row["ready_ts"]),
        template_code=row["template_code"],
        created_dt=row["created_dt"],
        position=position,
    )


def _filters_sql(filters: dict[str, str] | None, params: dict[str, Any]) -> str:
    clauses = []
    for name in ("site", "platform", "assay"):
        value = (filters or {}).get(name)
        if value:
            params[f"f_{name}"] = value
            clauses.append(f"s.json_addl->'properties'->>'{name}' = %(f_{name})s")
    return "".join(f" AND {c}" for c in clauses)


def queue_items(
    queue_key: str,
    *,
    now: datetime | None = None,
    tenant: str | None = None,
    limit: int = 50,
    offset: int = 0,
    filters: dict[str, str] | None = None,
) -> tuple[list[QueueItem], int]:
    """Visible items of a queue in execution order (3.1, 3.4), one page, with the total
    count of visible items matching the filters. One query."""
    params = _params(now, tenant, queue_key=queue_key, limit=limit, offset=offset)
    extra = _filters_sql(filters, params)
    rows = fetch_all(
        f"""
        SELECT {ITEM_COLUMNS}, count(*) OVER () AS total
        FROM ({QUEUES}) q
        JOIN generic_instance s
          ON s.tenant_id = q.tenant_id AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN generic_template t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s AND {VISIBLE}{extra}
        ORDER BY {ORDER_BY}
        LIMIT %(limit)s OFFSET %(offset)s
        """,
        params,
    )
    total = int(rows[0]["total"]) if rows else 0
    if not rows and offset:
        total = queue_items(queue_key, now=now, tenant=tenant, limit=1, filters=filters)[1]
    return [_item(r, offset + i + 1) for i, r in enumerate(rows)], total


def queue_head(
    queue_key: str, *, now: datetime | None = None, tenant: str | None = None
) -> QueueItem | None:
    """The item a claim on this queue would take next (seed 001 section 5), or None."""
    items, _ = queue_items(queue_key, now=now, tenant=tenant, limit=1)
    return items[0] if items else None


def queue_config(queue_key: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """One queue object (uid, euid, config). One query."""
    return fetch_one(
        f"""
        SELECT q.uid, q.euid, {QP}->>'queue_key' AS queue_key, {QP} AS config
        FROM ({QUEUES}) q WHERE {QP}->>'queue_key' = %(queue_key)s
        """,
        _params(None, tenant, queue_key=queue_key),
    )
