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
from bloomops.execution.envelope import (
    clean_envelope,
    envelope_problems,
    parse_ts,
    parse_ts_or_none,
    ts,
)
from bloomops.execution.sql import (
    BLOCKED_SUBJECTS,
    CANCEL_REQUESTED,
    DISPATCH_PRIORITY,
    ENV,
    ENVELOPE_VALID,
    HAS_ENVELOPE,
    ORDER_BY,
    ORDER_BY_COLUMNS,
    ORDER_COLUMNS,
    QP,
    QUEUES,
    READY_TS,
    SCOPE_MATCH,
    SUBJECT_REVISION,
    TEMPLATE_CODE,
    TEMPLATES,
    TERMINAL,
    VISIBLE,
    VISIBLE_BY_SETS,
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
        ORDER BY {DISPATCH_PRIORITY} DESC, {QP}->>'queue_key'
        """,
        _params(None, tenant),
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
        WITH {BLOCKED_SUBJECTS},
        routed AS MATERIALIZED (
            SELECT q.uid AS queue_uid, s.uid, {READY_TS} AS ready_ts,
                   coalesce(({ENV}->>'priority')::numeric, 0) AS prio,
                   {VISIBLE_BY_SETS} AS vis,
                   (NOT {TERMINAL} AND (
                        {ENV}->>'state' = 'HELD' OR {ENV}->>'hold_state' = 'ACTIVE')) AS held,
                   ({ENV}->>'state' = 'FAILED_RETRYABLE'
                        AND NOT {TERMINAL}
                        AND {ENV}->>'retry_at' > %(now)s) AS retry_pending
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
                   count(*) FILTER (WHERE vis AND prio >= 300) AS stat_count,
                   count(*) FILTER (WHERE vis AND prio >= 200 AND prio < 300) AS urgent_count,
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


class EnvelopeView:
    """Readable fields of a row's execution envelope (``self.execution``)."""

    execution: dict[str, Any]

    @property
    def state(self) -> str:
        return self.execution.get("state", "")

    @property
    def revision(self) -> int:
        return int(self.execution.get("revision") or 0)

    @property
    def priority(self) -> int:
        return int(self.execution.get("priority") or 0)

    @property
    def priority_class(self) -> str:
        return priority_class(self.priority)

    @property
    def due_at(self) -> datetime | None:
        return parse_ts(self.execution.get("due_at"))

    @property
    def attempt_count(self) -> int:
        return int(self.execution.get("attempt_count") or 0)


@dataclass
class QueueItem(EnvelopeView):
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


def _item(row: dict, position: int = 0, cls: type[QueueItem] | None = None,
          **extra: Any) -> QueueItem:
    return (cls or QueueItem)(
        uid=row["uid"],
        euid=row["euid"],
        name=row["name"],
        execution=clean_envelope(row["execution"]),
        site=row["site"],
        platform=row["platform"],
        assay=row["assay"],
        ready_at=parse_ts_or_none(row["ready_ts"]),
        template_code=row["template_code"],
        created_dt=row["created_dt"],
        position=position,
        **extra,
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
    count of visible items matching the filters. One query: the page walks the ordered
    index and stops; the total counts with the set form of the predicate."""
    params = _params(now, tenant, queue_key=queue_key, limit=limit, offset=offset)
    extra = _filters_sql(filters, params)
    routed = f"""
        FROM ({QUEUES}) q
        JOIN generic_instance s
          ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s"""
    rows = fetch_all(
        f"""
        WITH {BLOCKED_SUBJECTS},
        total AS (SELECT count(*) AS n {routed} AND {VISIBLE_BY_SETS}{extra}),
        page AS (
            SELECT {ITEM_COLUMNS}, {ORDER_COLUMNS} {routed} AND {VISIBLE}{extra}
            ORDER BY {ORDER_BY}
            LIMIT %(limit)s OFFSET %(offset)s)
        SELECT total.n AS total, page.* FROM total LEFT JOIN page ON true
        ORDER BY {ORDER_BY_COLUMNS}
        """,
        params,
    )
    total = int(rows[0]["total"]) if rows else 0
    page = [r for r in rows if r["uid"] is not None]
    return [_item(r, offset + i + 1) for i, r in enumerate(page)], total


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
        prepare="queue_config",
    )


def is_visible(
    subject_uid: int, queue_key: str, *, now: datetime | None = None, tenant: str | None = None
) -> bool:
    """The full predicate of 3.1 for one subject and one queue. One query. The claim calls it
    in a new statement after locking the subject, so it sees leases committed meanwhile."""
    row = fetch_one(
        f"""
        SELECT {VISIBLE} AS visible
        FROM ({QUEUES}) q
        JOIN generic_instance s ON s.uid = %(uid)s AND s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s
        """,
        _params(now, tenant, uid=subject_uid, queue_key=queue_key),
    )
    return bool(row and row["visible"])


@dataclass
class Reason:
    code: str
    message: str


# The "why not in queue" vocabulary of spec 9.3, in plain words. subject_diagnostics adds the
# particulars (which hold, until when); list views show these.
REASON_TEXT: dict[str, str] = {
    "TERMINAL_STATE": "Terminal state.",
    "CANCEL_REQUESTED": "Cancellation was requested.",
    "ACTIVE_HOLD": "An active hold.",
    "ACTIVE_LEASE": "Leased by a worker.",
    "RETRY_WINDOW_NOT_REACHED": "Retry window not reached.",
    "NOT_READY_YET": "Not ready yet.",
    "NEXT_QUEUE_KEY_MISSING": "Not routed to any queue.",
    "QUEUE_NOT_FOUND": "Routed to a queue that does not exist.",
    "STATE_NOT_ELIGIBLE": "State not eligible in this queue.",
    "TEMPLATE_NOT_ACCEPTED": "The queue does not take this kind of subject.",
    "SCOPE_MISMATCH": "Site/platform/assay outside the queue's scope.",
    "QUEUE_DISABLED": "The queue is disabled.",
    "WORKER_UNAVAILABLE": "The worker may not take work.",
    "CAPABILITY_MISMATCH": "The worker's capabilities or scopes do not cover the queue.",
    "INVALID_ENVELOPE": "Its execution envelope has a field the engine cannot read.",
}


@dataclass
class Diagnostics(EnvelopeView):
    uid: int
    euid: str
    name: str
    template_code: str
    execution: dict[str, Any]
    props: dict[str, Any]
    created_dt: datetime
    queue_key: str | None
    queue: dict[str, Any] | None
    visible: bool
    derived_state: str | None
    reasons: list[Reason]
    active_lease: dict[str, Any] | None
    active_holds: list[dict[str, Any]]
    worker: dict[str, Any] | None = None

    @property
    def reason_codes(self) -> list[str]:
        return [r.code for r in self.reasons]


DIAG_SQL = f"""
    SELECT s.uid, s.euid, s.name, s.created_dt, s.json_addl->'properties' AS props,
           {TEMPLATE_CODE} AS template_code, {ENV} AS execution, {READY_TS} AS ready_ts,
           q.euid AS queue_euid, {QP} AS queue,
           (q.uid IS NOT NULL AND {VISIBLE}) AS visible,
           (q.uid IS NULL OR q.template_codes ? {TEMPLATE_CODE}) AS template_ok,
           (q.uid IS NULL OR ({SCOPE_MATCH})) AS scope_ok,
           (SELECT jsonb_build_object('euid', x.euid, 'props', x.json_addl->'properties')
              FROM generic_instance_lineage l
              JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
             WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
               AND l.relationship_type = 'execution_subject_lease'
               AND x.json_addl->'properties'->>'status' = 'ACTIVE'
             ORDER BY x.uid DESC LIMIT 1) AS active_lease,
           (SELECT coalesce(jsonb_agg(jsonb_build_object('euid', x.euid,
                                                         'props', x.json_addl->'properties')
                                      ORDER BY x.uid), '[]'::jsonb)
              FROM generic_instance_lineage l
              JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
             WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
               AND l.relationship_type = 'execution_subject_hold'
               AND x.json_addl->'properties'->>'status' = 'ACTIVE') AS active_holds,
           (SELECT jsonb_build_object('euid', w.euid, 'props', w.json_addl->'properties')
              FROM generic_instance w
             WHERE w.euid = %(worker_euid)s AND w.tenant_id = s.tenant_id
               AND w.type = 'system' AND w.subtype = 'worker') AS worker
    FROM generic_instance s
    JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
    LEFT JOIN ({QUEUES}) q ON {QP}->>'queue_key' = {ENV}->>'next_queue_key'
    WHERE s.euid = %(euid)s AND s.tenant_id = %(tenant)s AND NOT s.is_deleted
"""


def subject_diagnostics(
    euid: str,
    *,
    now: datetime | None = None,
    tenant: str | None = None,
    worker_euid: str | None = None,
) -> Diagnostics | None:
    """Envelope, derived visibility and every "why not in queue" reason of 9.3 (for a given
    worker too, when worker_euid is passed). One query."""
    from bloomops.execution.envelope import read_envelope
    from bloomops.execution.policy import eligibility_problems, worker_status_problem

    moment = now or clock.now()
    row = fetch_one(DIAG_SQL, _params(moment, tenant, euid=euid, worker_euid=worker_euid))
    if row is None:
        return None
    env = read_envelope({"properties": {"execution": row["execution"] or {}}})
    now_ts = ts(moment)
    queue = row["queue"]
    reasons: list[Reason] = [
        Reason("INVALID_ENVELOPE", f"The execution envelope cannot be used: {problem}.")
        for _, problem in (envelope_problems(row["execution"])
                           if row["execution"] is not None else [])
    ]
    lease = row["active_lease"]
    holds = row["active_holds"] or []
    state = env["state"]
    if env.get("terminal") or state in ("COMPLETED", "CANCELED", "FAILED_TERMINAL"):
        reasons.append(Reason("TERMINAL_STATE", f"The subject is in terminal state {state}."))
    if env.get("cancel_requested"):
        reasons.append(Reason("CANCEL_REQUESTED", "Cancellation was requested."))
    if holds or env.get("hold_state") == "ACTIVE":
        why = "; ".join(h["props"].get("reason") or "" for h in holds) or env.get("hold_reason")
        reasons.append(Reason("ACTIVE_HOLD", f"An active hold: {why}."))
    derived = None
    if lease:
        if (lease["props"].get("expires_at") or "") > now_ts:
            derived = "LEASED"
            reasons.append(Reason("ACTIVE_LEASE", "Leased by worker "
                                  f"{lease['props'].get('worker_lookup_euid')} until "
                                  f"{lease['props'].get('expires_at')}."))
        else:
            derived = "LEASE_EXPIRED"
    if not env.get("next_queue_key"):
        reasons.append(Reason("NEXT_QUEUE_KEY_MISSING", "The subject is not routed to a queue."))
    elif queue is None:
        reasons.append(Reason("QUEUE_NOT_FOUND", f"No queue {env['next_queue_key']!r} exists."))
    else:
        if state not in (queue.get("eligible_states") or []) and "TERMINAL_STATE" not in [
            r.code for r in reasons
        ]:
            eligible = ", ".join(queue.get("eligible_states") or [])
            reasons.append(Reason("STATE_NOT_ELIGIBLE", f"State {state} is not eligible in"
                                  f" {queue['queue_key']} ({eligible})."))
        if env.get("retry_at") and env["retry_at"] > now_ts:
            reasons.append(Reason("RETRY_WINDOW_NOT_REACHED",
                                  f"Retry is not due until {env['retry_at']}."))
        elif row["ready_ts"] > now_ts:
            reasons.append(Reason("NOT_READY_YET", f"Not ready until {row['ready_ts']}."))
        if not row["template_ok"]:
            reasons.append(Reason("TEMPLATE_NOT_ACCEPTED", f"{queue['queue_key']} does not take"
                                  f" {row['template_code']} subjects."))
        if not row["scope_ok"]:
            reasons.append(Reason("SCOPE_MISMATCH", "The subject's site/platform/assay is"
                                  " outside the queue's scope."))
        if not queue.get("enabled", True):
            reasons.append(Reason("QUEUE_DISABLED", f"Queue {queue['queue_key']} is disabled."))
    worker = row["worker"]
    if worker and queue is not None:
        problem = worker_status_problem(worker["props"])
        if problem:
            reasons.append(Reason("WORKER_UNAVAILABLE", problem))
        for code, message in eligibility_problems(worker["props"], queue):
            if code == "QUEUE_DISABLED":
                continue
            reasons.append(Reason("CAPABILITY_MISMATCH", message))
    visible = bool(row["visible"])
    if visible:
        derived = "VISIBLE_IN_QUEUE"
    return Diagnostics(
        uid=row["uid"], euid=row["euid"], name=row["name"], template_code=row["template_code"],
        execution=env, props=row["props"] or {}, created_dt=row["created_dt"],
        queue_key=env.get("next_queue_key"), queue=queue, visible=visible,
        derived_state=derived, reasons=reasons,
        active_lease=lease, active_holds=holds, worker=worker,
    )


def subject_history(subject_uid: int) -> dict[str, list[dict[str, Any]]]:
    """Leases, execution records, holds, dead letters and outputs of a subject, found through
    lineage only (1.1). One query."""
    rows = fetch_all(
        """
        SELECT l.relationship_type AS rel, x.euid, x.name, x.created_dt,
               x.json_addl->'properties' AS props
        FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
        WHERE l.parent_instance_uid = %s AND NOT l.is_deleted
          AND l.relationship_type IN ('execution_subject_lease', 'execution_subject_record',
                'execution_subject_hold', 'execution_subject_dead_letter',
                'execution_subject_output')
        ORDER BY x.uid
        """,
        [subject_uid],
    )
    out: dict[str, list[dict[str, Any]]] = {
        "leases": [], "records": [], "holds": [], "dead_letters": [], "outputs": []
    }
    key = {
        "execution_subject_lease": "leases",
        "execution_subject_record": "records",
        "execution_subject_hold": "holds",
        "execution_subject_dead_letter": "dead_letters",
        "execution_subject_output": "outputs",
    }
    for row in rows:
        out[key[row["rel"]]].append(row)
    return out


def lineage_of(instance_uid: int) -> list[dict[str, Any]]:
    """Every live lineage edge touching an instance, both directions. One query."""
    return fetch_all(
        """
        SELECT 'child' AS direction, l.relationship_type, x.euid, x.name, x.type, x.subtype,
               l.created_dt
        FROM generic_instance_lineage l JOIN generic_instance x ON x.uid = l.child_instance_uid
        WHERE l.parent_instance_uid = %(uid)s AND NOT l.is_deleted
        UNION ALL
        SELECT 'parent', l.relationship_type, x.euid, x.name, x.type, x.subtype, l.created_dt
        FROM generic_instance_lineage l JOIN generic_instance x ON x.uid = l.parent_instance_uid
        WHERE l.child_instance_uid = %(uid)s AND NOT l.is_deleted
        ORDER BY 7, 1
        """,
        {"uid": instance_uid},
    )


def action_history(instance_uid: int) -> list[dict[str, Any]]:
    """Action records executed on an instance: who, when, what, why. One query."""
    return fetch_all(
        """
        SELECT a.euid, a.subtype AS action_key, a.json_addl->>'executed_by' AS executed_by,
               a.json_addl->>'executed_at' AS executed_at, a.json_addl->>'reason' AS reason,
               a.json_addl->'result' AS result, a.json_addl->'captured_data' AS payload
        FROM generic_instance_lineage l
        JOIN generic_instance a ON a.uid = l.parent_instance_uid AND NOT a.is_deleted
        WHERE l.child_instance_uid = %s AND l.relationship_type = 'executed_on'
          AND NOT l.is_deleted
        ORDER BY a.uid
        """,
        [instance_uid],
    )


def audit_trail(instance_uid: int, *, limit: int = 200) -> list[dict[str, Any]]:
    """TapDB's own audit rows for an instance (its triggers write them). One query."""
    return fetch_all(
        """
        SELECT changed_at, changed_by, operation_type, column_name,
               left(old_value, 400) AS old_value, left(new_value, 400) AS new_value
        FROM audit_log WHERE rel_table_name = 'generic_instance' AND rel_table_uid_fk = %s
        ORDER BY uid DESC LIMIT %s
        """,
        [instance_uid, limit],
    )


@dataclass
class WorkerRow:
    uid: int
    euid: str
    props: dict[str, Any]
    active_leases: int
    heartbeat_lag_seconds: float | None
    computed_status: str

    @property
    def worker_key(self) -> str:
        return self.props.get("worker_key", "")

    @property
    def max_concurrent_leases(self) -> int:
        return int(self.props.get("max_concurrent_leases") or 1)


def workers(*, now: datetime | None = None, tenant: str | None = None,
            euid: str | None = None) -> list[WorkerRow]:
    """Workers with computed status (OFFLINE when the heartbeat is older than its TTL) and
    active nonexpired lease counts. One query."""
    moment = now or clock.now()
    params = _params(moment, tenant, euid=euid)
    rows = fetch_all(
        """
        SELECT w.uid, w.euid, w.json_addl->'properties' AS props,
               (SELECT count(*) FROM generic_instance_lineage l
                  JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
                 WHERE l.parent_instance_uid = w.uid AND NOT l.is_deleted
                   AND l.relationship_type = 'execution_worker_lease'
                   AND x.json_addl->'properties'->>'status' = 'ACTIVE'
                   AND x.json_addl->'properties'->>'expires_at' > %(now)s) AS active_leases
        FROM generic_instance w
        WHERE w.tenant_id = %(tenant)s AND NOT w.is_deleted
          AND w.type = 'system' AND w.subtype = 'worker'
          AND (%(euid)s::text IS NULL OR w.euid = %(euid)s)
        ORDER BY w.json_addl->'properties'->>'worker_key'
        """,
        params,
    )
    out = []
    for row in rows:
        props = row["props"] or {}
        hb = parse_ts(props.get("heartbeat_at"))
        lag = (moment - hb).total_seconds() if hb else None
        status = props.get("status") or "OFFLINE"
        ttl = float(props.get("heartbeat_ttl_seconds") or 60)
        if status in ("ONLINE", "DRAINING") and (lag is None or lag > ttl):
            status = "OFFLINE"
        out.append(WorkerRow(uid=row["uid"], euid=row["euid"], props=props,
                             active_leases=int(row["active_leases"]),
                             heartbeat_lag_seconds=lag, computed_status=status))
    return out


def leases(*, status: str | None = None, now: datetime | None = None,
           tenant: str | None = None, worker_euid: str | None = None,
           limit: int = 500) -> list[dict[str, Any]]:
    """Leases by status; ACTIVE means active and unexpired, EXPIRED includes ACTIVE leases
    past expiry that no sweeper has marked yet. Subject and worker come from lineage.
    One query."""
    params = _params(now, tenant, status=status, worker_euid=worker_euid, limit=limit)
    return fetch_all(
        f"""
        SELECT x.euid, x.created_dt, x.json_addl->'properties' AS props,
               CASE WHEN x.json_addl->'properties'->>'status' = 'ACTIVE'
                         AND x.json_addl->'properties'->>'expires_at' <= %(now)s
                    THEN 'EXPIRED' ELSE x.json_addl->'properties'->>'status'
               END AS effective_status,
               s.euid AS subject_euid, s.name AS subject_name, w.euid AS worker_euid,
               w.json_addl->'properties'->>'display_name' AS worker_name,
               s.json_addl->'properties'->'execution'->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision
        FROM generic_instance x
        LEFT JOIN generic_instance_lineage ls ON ls.child_instance_uid = x.uid
             AND ls.relationship_type = 'execution_subject_lease' AND NOT ls.is_deleted
        LEFT JOIN generic_instance s ON s.uid = ls.parent_instance_uid
        LEFT JOIN generic_instance_lineage lw ON lw.child_instance_uid = x.uid
             AND lw.relationship_type = 'execution_worker_lease' AND NOT lw.is_deleted
        LEFT JOIN generic_instance w ON w.uid = lw.parent_instance_uid
        WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted
          AND x.type = 'execution' AND x.subtype = 'queue_lease'
          AND (%(worker_euid)s::text IS NULL OR w.euid = %(worker_euid)s)
          AND (%(status)s::text IS NULL
               OR (%(status)s = 'ACTIVE' AND x.json_addl->'properties'->>'status' = 'ACTIVE'
                   AND x.json_addl->'properties'->>'expires_at' > %(now)s)
               OR (%(status)s = 'EXPIRED' AND (x.json_addl->'properties'->>'status' = 'EXPIRED'
                   OR (x.json_addl->'properties'->>'status' = 'ACTIVE'
                       AND x.json_addl->'properties'->>'expires_at' <= %(now)s)))
               OR (%(status)s NOT IN ('ACTIVE', 'EXPIRED')
                   AND x.json_addl->'properties'->>'status' = %(status)s))
        ORDER BY x.uid DESC
        LIMIT %(limit)s
        """,
        params,
    )


def dead_letters(*, tenant: str | None = None, resolution: str | None = "OPEN",
                 queue_key: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Dead letters with their subject (through lineage). One query."""
    return fetch_all(
        f"""
        SELECT d.euid, d.created_dt, d.json_addl->'properties' AS props, s.euid AS subject_euid,
               s.name AS subject_name,
               s.json_addl->'properties'->'execution'->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision
        FROM generic_instance d
        LEFT JOIN generic_instance_lineage l ON l.child_instance_uid = d.uid
             AND l.relationship_type = 'execution_subject_dead_letter' AND NOT l.is_deleted
        LEFT JOIN generic_instance s ON s.uid = l.parent_instance_uid
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND (%(resolution)s::text IS NULL
               OR d.json_addl->'properties'->>'resolution_state' = %(resolution)s)
          AND (%(queue_key)s::text IS NULL
               OR d.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s)
        ORDER BY d.uid DESC LIMIT %(limit)s
        """,
        _params(None, tenant, resolution=resolution, queue_key=queue_key, limit=limit),
    )


def active_holds(*, tenant: str | None = None, queue_key: str | None = None,
                 limit: int = 500) -> list[dict[str, Any]]:
    """Active holds with their subject (through lineage). One query."""
    return fetch_all(
        f"""
        SELECT h.euid, h.created_dt, h.json_addl->'properties' AS props, s.euid AS subject_euid,
               s.name AS subject_name,
               s.json_addl->'properties'->'execution'->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision
        FROM generic_instance h
        JOIN generic_instance_lineage l ON l.child_instance_uid = h.uid
             AND l.relationship_type = 'execution_subject_hold' AND NOT l.is_deleted
        JOIN generic_instance s ON s.uid = l.parent_instance_uid
        WHERE h.tenant_id = %(tenant)s AND NOT h.is_deleted
          AND h.type = 'execution' AND h.subtype = 'hold'
          AND h.json_addl->'properties'->>'status' = 'ACTIVE'
          AND (%(queue_key)s::text IS NULL
               OR h.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s)
        ORDER BY h.uid DESC LIMIT %(limit)s
        """,
        _params(None, tenant, queue_key=queue_key, limit=limit),
    )


# ---------------------------------------------------------------- operator UI reads (issue 4)


@dataclass
class HiddenItem(QueueItem):
    """A subject routed to a queue but not visible in it, with why (spec 9.3)."""

    reasons: list[Reason] = field(default_factory=list)


# SQL flag column of queue_hidden_items -> reason code (REASON_TEXT says it in words).
HIDDEN_REASONS = (
    ("terminal", "TERMINAL_STATE"),
    ("cancel_requested", "CANCEL_REQUESTED"),
    ("held", "ACTIVE_HOLD"),
    ("leased", "ACTIVE_LEASE"),
    ("retry_wait", "RETRY_WINDOW_NOT_REACHED"),
    ("not_ready", "NOT_READY_YET"),
    ("state_bad", "STATE_NOT_ELIGIBLE"),
    ("template_bad", "TEMPLATE_NOT_ACCEPTED"),
    ("scope_bad", "SCOPE_MISMATCH"),
    ("queue_disabled", "QUEUE_DISABLED"),
    ("envelope_bad", "INVALID_ENVELOPE"),
)


def queue_hidden_items(
    queue_key: str,
    *,
    state: str | None = None,
    now: datetime | None = None,
    tenant: str | None = None,
    limit: int = 50,
    offset: int = 0,
    filters: dict[str, str] | None = None,
) -> tuple[list[HiddenItem], int]:
    """Subjects routed to a queue (next_queue_key) that are NOT visible in it, optionally in
    one state, each with the reasons why not, in execution order; plus the total. One query;
    the reasons are columns built from the same fragments as VISIBLE."""
    from bloomops.execution.sql import ACTIVE_HOLD_EXISTS, ACTIVE_LEASE_EXISTS

    params = _params(now, tenant, queue_key=queue_key, limit=limit, offset=offset, state=state)
    extra = _filters_sql(filters, params)
    rows = fetch_all(
        f"""
        SELECT {ITEM_COLUMNS}, count(*) OVER () AS total,
               {TERMINAL} AS terminal,
               {CANCEL_REQUESTED} AS cancel_requested,
               (coalesce({ENV}->>'hold_state', 'NONE') = 'ACTIVE' OR {ACTIVE_HOLD_EXISTS})
                   AS held,
               {ACTIVE_LEASE_EXISTS} AS leased,
               coalesce({ENV}->>'retry_at' > %(now)s, false) AS retry_wait,
               ({READY_TS} > %(now)s AND coalesce({ENV}->>'retry_at' > %(now)s, false) = false)
                   AS not_ready,
               NOT coalesce(q.eligible_states ? ({ENV}->>'state'), false) AS state_bad,
               NOT coalesce(q.template_codes ? {TEMPLATE_CODE}, false)
                   AS template_bad,
               NOT ({SCOPE_MATCH}) AS scope_bad,
               coalesce({QP}->'enabled' = 'false'::jsonb, false) AS queue_disabled,
               NOT ({ENVELOPE_VALID}) AS envelope_bad
        FROM ({QUEUES}) q
        JOIN generic_instance s
          ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s AND NOT {VISIBLE}
          AND (%(state)s::text IS NULL OR {ENV}->>'state' = %(state)s){extra}
        ORDER BY {ORDER_BY}
        LIMIT %(limit)s OFFSET %(offset)s
        """,
        params,
    )
    total = int(rows[0]["total"]) if rows else 0
    items = []
    for row in rows:
        reasons = [Reason(code, REASON_TEXT[code]) for flag, code in HIDDEN_REASONS if row[flag]]
        items.append(_item(row, offset + len(items) + 1, HiddenItem, reasons=reasons))
    return items, total


def queue_filter_values(queue_key: str, *, tenant: str | None = None) -> dict[str, list[str]]:
    """Distinct site, platform and assay values of the subjects routed to a queue (for the
    filter menus). One query."""
    row = fetch_one(
        f"""
        SELECT coalesce(array_agg(DISTINCT s.json_addl->'properties'->>'site')
                        FILTER (WHERE s.json_addl->'properties'->>'site' IS NOT NULL), '{{}}')
                   AS site,
               coalesce(array_agg(DISTINCT s.json_addl->'properties'->>'platform')
                        FILTER (WHERE s.json_addl->'properties'->>'platform' IS NOT NULL), '{{}}')
                   AS platform,
               coalesce(array_agg(DISTINCT s.json_addl->'properties'->>'assay')
                        FILTER (WHERE s.json_addl->'properties'->>'assay' IS NOT NULL), '{{}}')
                   AS assay
        FROM generic_instance s
        WHERE s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
          AND {ENV}->>'next_queue_key' = %(queue_key)s
        """,
        _params(None, tenant, queue_key=queue_key),
    )
    return {k: sorted(row[k] or []) for k in ("site", "platform", "assay")} if row else {}


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
        _params(moment, tenant, start=ts(start), start_dt=start),
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
