"""Queue reads: definitions, depths, the summaries of RULES.md#metrics, the hourly trend."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.execution import clock
from bloomops.execution.envelope import (
    parse_ts,
    ts,
)
from bloomops.execution.selectors.base import (
    THROUGHPUT_WINDOW_MINUTES,
    read_params,
)
from bloomops.execution.sql import (
    BLOCKED_SUBJECTS,
    DISPATCH_PRIORITY,
    ENV,
    HAS_ENVELOPE,
    HELD_BY_SETS,
    PRIORITY,
    QP,
    QUEUES,
    READY_TS,
    RETRY_PENDING,
    TEMPLATES,
    TERMINAL,
    VISIBLE_BY_SETS,
    lease_active,
    lease_expired,
    priority_band,
)
from bloomops.tapdb.db import fetch_all, fetch_one


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
    # filled by selectors.overview (coverage, RULES.md#metrics)
    worker_rostered_count: int = 0
    worker_free_slots: int = 0
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
        ORDER BY {DISPATCH_PRIORITY} DESC, {QP}->>'queue_key'
        """,
        read_params(None, tenant),
    )


def queue_depths(*, now: datetime | None = None, tenant: str | None = None) -> dict[str, int]:
    """queue_key -> count of visible subjects, for every queue. One query."""
    rows = fetch_all(
        f"""
        WITH {BLOCKED_SUBJECTS}
        SELECT {QP}->>'queue_key' AS queue_key,
               count(s.uid) FILTER (WHERE {VISIBLE_BY_SETS}) AS depth
        FROM ({QUEUES}) q
        LEFT JOIN generic_instance s
          ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = {QP}->>'queue_key'
        LEFT JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        GROUP BY 1
        """,
        read_params(now, tenant),
    )
    return {r["queue_key"]: int(r["depth"]) for r in rows}


def queue_summaries(
    *, now: datetime | None = None, tenant: str | None = None
) -> list[QueueSummary]:
    """Every queue with the metrics of RULES.md#metrics, in dispatch order. Four queries in all,
    whatever the number of queues or subjects: subjects, leases, records, dead letters."""
    moment = now or clock.now()
    params = read_params(moment, tenant, window_start=ts(minus_minutes(moment)))
    subject_rows = fetch_all(
        f"""
        WITH {BLOCKED_SUBJECTS},
        routed AS MATERIALIZED (
            SELECT q.uid AS queue_uid, s.uid, {READY_TS} AS ready_ts,
                   {PRIORITY} AS prio,
                   {VISIBLE_BY_SETS} AS vis,
                   (NOT {TERMINAL} AND {HELD_BY_SETS}) AS held,
                   {RETRY_PENDING} AS retry_pending
            FROM ({QUEUES}) q
            JOIN generic_instance s ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
             AND {ENV}->>'next_queue_key' = {QP}->>'queue_key'
            JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        ),
        per_queue AS (
            SELECT queue_uid,
                   count(*) FILTER (WHERE vis) AS depth,
                   min(ready_ts) FILTER (WHERE vis) AS oldest,
                   max(ready_ts) FILTER (WHERE vis) AS newest,
                   count(*) FILTER (WHERE vis AND {priority_band("STAT", "prio")})
                       AS stat_count,
                   count(*) FILTER (WHERE vis AND {priority_band("URGENT", "prio")})
                       AS urgent_count,
                   count(*) FILTER (WHERE held) AS held_count,
                   count(*) FILTER (WHERE retry_pending) AS retry_pending_count
            FROM routed GROUP BY queue_uid
        )
        SELECT q.euid, q.queue_key, q.config,
               coalesce(a.depth, 0) AS depth, a.oldest, a.newest,
               coalesce(a.stat_count, 0) AS stat_count,
               coalesce(a.urgent_count, 0) AS urgent_count,
               coalesce(a.held_count, 0) AS held_count,
               coalesce(a.retry_pending_count, 0) AS retry_pending_count
        FROM ({QUEUES}) q
        LEFT JOIN per_queue a ON a.queue_uid = q.uid
        ORDER BY {DISPATCH_PRIORITY} DESC, {QP}->>'queue_key'
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
        f"""
        SELECT x.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
               count(*) FILTER (WHERE {lease_active()}) AS active,
               count(*) FILTER (WHERE {lease_expired()}) AS expired
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


def minus_minutes(moment: datetime, minutes: int = THROUGHPUT_WINDOW_MINUTES) -> datetime:
    from datetime import timedelta

    return moment - timedelta(minutes=minutes)

def queue_config(queue_key: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """One queue object (uid, euid, config). One query."""
    return fetch_one(
        f"""
        SELECT q.uid, q.euid, {QP}->>'queue_key' AS queue_key, {QP} AS config
        FROM ({QUEUES}) q WHERE {QP}->>'queue_key' = %(queue_key)s
        """,
        read_params(None, tenant, queue_key=queue_key),
        prepare="queue_config",
    )

def throughput_trend(
    *, hours: int = 12, now: datetime | None = None, tenant: str | None = None
) -> dict[str, list[int]]:
    """queue_key -> finished execution records per hour over the last ``hours`` hours, oldest
    first (the supervisor's trend). One query over execution records."""
    moment = now or clock.now()
    start = moment - _hours(hours)
    rows = fetch_all(
        """
        SELECT r.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
               floor(extract(epoch FROM ((r.json_addl->'properties'->>'finished_at')::timestamptz
                                          - %(start_dt)s::timestamptz)) / 3600)::int AS bucket,
               count(*) AS n
        FROM generic_instance r
        WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
          AND r.type = 'execution' AND r.subtype = 'execution_record'
          AND r.json_addl->'properties'->>'status' = 'SUCCEEDED'
          AND r.json_addl->'properties'->>'finished_at' >= %(start)s
          AND r.json_addl->'properties'->>'finished_at' <= %(now)s
        GROUP BY 1, 2
        """,
        read_params(moment, tenant, start=ts(start), start_dt=start),
    )
    out: dict[str, list[int]] = {}
    for row in rows:
        series = out.setdefault(row["queue_key"], [0] * hours)
        bucket = min(max(int(row["bucket"]), 0), hours - 1)
        series[bucket] += int(row["n"])
    return out


def _hours(n: int):
    from datetime import timedelta

    return timedelta(hours=n)
