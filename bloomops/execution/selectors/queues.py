"""Queue reads: definitions, depths, the summaries of RULES.md#metrics, the hourly trend."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.execution import clock
from bloomops.execution.envelope import (
    parse_stored_ts,
    ts,
)
from bloomops.execution.selectors.base import (
    THROUGHPUT_WINDOW_MINUTES,
    read_params,
)
from bloomops.execution.selectors.routed import (
    QUEUES_AND_SETS,
    STATED,
    plain_subjects,
)
from bloomops.execution.sql import (
    DISPATCH_PRIORITY,
    QP,
    QUEUES,
    utc_text,
)
from bloomops.execution.states import PRIORITY_CLASSES
from bloomops.execution.stats.counting import (
    TOTALS_PARTS,
    completions,
    finished_sql,
    totals_from,
    totals_params,
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
    # Records finished since the recorder last counted (up to counting.counted_until(now)),
    # by status: what the totals above add to its counters, and what its next pass adds.
    finished_since: dict[str, int] = field(default_factory=dict)
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


def display_name(queue_key: str, config: dict[str, Any] | None) -> str:
    """A queue as people read it: its display name, else its key."""
    return (config or {}).get("display_name") or queue_key


def queue_called(queue_key: str, config: dict[str, Any] | None) -> str:
    """A queue named in a sentence or a list beside others: "Queue two (q2)", its display
    name with the key people type; the key alone when it has no display name."""
    name = display_name(queue_key, config)
    return name if name == queue_key else f"{name} ({queue_key})"


def _queue_summary_from_row(row: dict, now: datetime) -> QueueSummary:
    cfg = row["config"] or {}
    return QueueSummary(
        queue_key=row["queue_key"],
        euid=row["euid"],
        display_name=display_name(row["queue_key"], cfg),
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
        WITH {QUEUES_AND_SETS}
        SELECT q.queue_key, a.depth
        FROM queues q
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE s.vis) AS depth FROM ({plain_subjects()}) s) a
        """,
        read_params(now, tenant),
    )
    return {r["queue_key"]: int(r["depth"]) for r in rows}


_STAT, _URGENT = PRIORITY_CLASSES["STAT"], PRIORITY_CLASSES["URGENT"]
# The summaries' subject statement (RULES.md#metrics): per queue, its routed subjects as
# plain values (selectors/routed.py) counted.
_SUMMARY_SUBJECTS = f"""
    WITH {QUEUES_AND_SETS}
    SELECT q.euid, q.queue_key, q.config, coalesce(lc.n, 0) AS active_leases, a.*
    FROM queues q
    LEFT JOIN (SELECT x.queue_key, count(*) AS n FROM active_leases x
               WHERE x.tenant_id = %(tenant)s
                 AND x.type = 'execution' AND x.subtype = 'queue_lease'
               GROUP BY 1) lc ON lc.queue_key = q.queue_key
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE s.vis) AS depth,
               least(min({STATED}) FILTER (WHERE s.vis),
                     {utc_text("min(s.created_dt) FILTER (WHERE s.vis AND s.stated IS NULL)")})
                   AS oldest,
               greatest(max({STATED}) FILTER (WHERE s.vis),
                        {utc_text("max(s.created_dt) FILTER (WHERE s.vis AND s.stated IS NULL)")})
                   AS newest,
               count(*) FILTER (WHERE s.vis AND s.priority_floor = {_STAT})
                   AS stat_count,
               count(*) FILTER (WHERE s.vis AND s.priority_floor = {_URGENT})
                   AS urgent_count,
               count(*) FILTER (WHERE s.held) AS held_count,
               count(*) FILTER (WHERE s.retry_pending) AS retry_pending_count
        FROM ({plain_subjects()}) s
    ) a
    ORDER BY {DISPATCH_PRIORITY} DESC, {QP}->>'queue_key'"""


def queue_summaries(
    *, now: datetime | None = None, tenant: str | None = None
) -> list[QueueSummary]:
    """Every queue with the metrics of RULES.md#metrics, in dispatch order. Three queries in
    all, whatever the number of queues or subjects: subjects (with their active leases, read
    once for the visibility rule and the leased count), records (the window,
    and the totals: the recorder's counters plus what finished since, ``counting.TOTALS_PARTS``)
    and open dead letters. None reads history (finished leases, records outside the window),
    unless the recorder never counted the tenant."""
    moment = now or clock.now()
    params = read_params(moment, tenant, window_start=ts(minus_minutes(moment)))
    summaries = []
    by_key: dict[str, QueueSummary] = {}
    for row in fetch_all(_SUMMARY_SUBJECTS, params, prepare="summaries"):
        summary = _queue_summary_from_row(row, moment)
        summary.depth = int(row["depth"])
        summary.oldest_ready_at = parse_stored_ts(row["oldest"])
        summary.newest_ready_at = parse_stored_ts(row["newest"])
        summary.stat_count = int(row["stat_count"])
        summary.urgent_count = int(row["urgent_count"])
        summary.held_count = int(row["held_count"])
        summary.retry_pending_count = int(row["retry_pending_count"])
        summary.active_leases = int(row["active_leases"])
        summaries.append(summary)
        by_key[summary.queue_key] = summary
    if not summaries:
        return []
    params["queue_keys"] = list(by_key)
    records = fetch_all(_SUMMARY_RECORDS, {**params, **totals_params(moment, tenant)},
                        prepare="summary_records")
    window: dict[str, dict[str, int]] = {}
    for row in records:
        if row["part"] == "window":
            window.setdefault(row["queue_key"], {})[row["key"]] = int(row["n"])
    for key, counts in window.items():
        if key in by_key:
            by_key[key].successes_window, by_key[key].failures_window = completions(counts)
    totals, since = totals_from(records, list(by_key))
    for key, values in totals.items():
        for name, value in values.items():
            setattr(by_key[key], name, value)
        by_key[key].finished_since = since.get(key, {})
    for row in fetch_all(_SUMMARY_DEAD_LETTERS, params, prepare="summary_dead_letters"):
        if row["queue_key"] in by_key:
            by_key[row["queue_key"]].dead_letter_count = int(row["n"])
    return summaries

# Records finished in the throughput window by status (a range of
# bloomops_record_queue_finished per queue, read as the recorder reads them), with the
# totals' parts (``counting.TOTALS_PARTS``: the recorder's counters plus what finished
# since), in one statement. The all-time totals are never a count of every record written.
_SUMMARY_RECORDS = f"""
    SELECT 'window' AS part, w.queue_key, w.status AS key, w.n
    FROM ({finished_sql("%(window_start)s", "%(now)s")}) w
    UNION ALL {TOTALS_PARTS}"""

# Open dead letters: a range of bloomops_dead_letter_open per queue, counted where the
# index's keys decide (queue, OPEN), so no letter's JSON is read; resolved ones are not read.
_SUMMARY_DEAD_LETTERS = """
    SELECT k.queue_key, (
        SELECT count(*) FROM generic_instance d
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND d.json_addl->'properties'->>'queue_lookup_key' = k.queue_key
          AND d.json_addl->'properties'->>'resolution_state' = 'OPEN') AS n
    FROM unnest(%(queue_keys)s::text[]) AS k(queue_key)"""


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

def queue_succeeding(queue_key: str, *, tenant: str | None = None) -> dict[str, Any] | None:
    """The live queue that replaced the one that had ``queue_key`` (replace_queue): where an
    old link's reader is sent. One query."""
    return fetch_one(
        f"""
        SELECT q.euid, {QP}->>'queue_key' AS queue_key,
               coalesce({QP}->>'display_name', {QP}->>'queue_key') AS display_name
        FROM ({QUEUES}) q WHERE {QP}->>'replaces_queue_key' = %(queue_key)s
        ORDER BY q.uid DESC LIMIT 1
        """,
        read_params(None, tenant, queue_key=queue_key),
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


def queue_ever_named(queue_key: str, *, tenant: str | None = None) -> bool:
    """Whether a queue of this key exists or some action record names it (a queue replaced
    under a new key has no object of the old one; its records do). One query."""
    row = fetch_one(
        f"""SELECT EXISTS (SELECT 1 FROM ({QUEUES}) q WHERE {QP}->>'queue_key' = %(queue_key)s)
           OR EXISTS (SELECT 1 FROM generic_instance a WHERE a.tenant_id = %(tenant)s
                      AND a.type = 'execution_queue'
                      AND a.json_addl->>'queue_lookup_key' = %(queue_key)s) AS named""",
        read_params(None, tenant, queue_key=queue_key))
    return bool(row and row["named"])
