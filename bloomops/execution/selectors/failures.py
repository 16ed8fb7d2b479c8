"""Failing work across the lab: subjects waiting to retry (not held: holds have their own
list; not claimed again: someone is working on it) and subjects that failed for good (an open
dead letter), with the failure that put them there (RULES.md#retries). The failures view and
the workbench's retrying list read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.execution.envelope import ts
from bloomops.execution.selectors.base import read_params, text_found, total_column
from bloomops.execution.sql import (
    ACTIVE_LEASE_EXISTS,
    ENV,
    HELD,
    ROUTED,
    SUBJECT_REVISION,
    TERMINAL,
)
from bloomops.execution.stats.counting import FAILED as FAILED_STATUSES
from bloomops.tapdb.db import fetch_all

RETRYING = "retrying"
FAILED = "failed"
KINDS = (RETRYING, FAILED)

# One row per failing subject. Retrying: the subject's newest failed execution record holds
# the failure. Failed: its open dead letter does (what QA resolves).
_FAILURES = f"""
    SELECT * FROM (
        SELECT '{RETRYING}' AS kind, s.euid AS subject_euid, s.name AS subject_name,
               {ENV}->>'state' AS subject_state, {SUBJECT_REVISION} AS subject_revision,
               {ENV}->>'next_queue_key' AS queue_key, {ENV}->>'retry_at' AS retry_at,
               {ENV}->>'attempt_count' AS attempts,
               r.props->>'error_class' AS error_class, r.props->>'error_message' AS error_message,
               coalesce(r.props->>'finished_at', s.modified_dt::text) AS failed_at
        FROM generic_instance s
        LEFT JOIN LATERAL (
            SELECT x.json_addl->'properties' AS props
            FROM generic_instance_lineage l
            JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
                 AND x.tenant_id = %(tenant)s
            WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
              AND l.relationship_type = 'execution_subject_record'
              AND x.json_addl->'properties'->>'status' = 'FAILED_RETRYABLE'
            ORDER BY x.uid DESC LIMIT 1) r ON true
        WHERE s.tenant_id = %(tenant)s AND {ROUTED}
          AND {ENV}->>'state' = 'FAILED_RETRYABLE' AND NOT {TERMINAL}
          AND NOT {HELD} AND NOT {ACTIVE_LEASE_EXISTS}
        UNION ALL
        SELECT '{FAILED}', s.euid, s.name, {ENV}->>'state', {SUBJECT_REVISION},
               d.json_addl->'properties'->>'queue_lookup_key', NULL,
               d.json_addl->'properties'->>'failure_count',
               d.json_addl->'properties'->>'error_class',
               d.json_addl->'properties'->>'error_message',
               d.json_addl->'properties'->>'dead_lettered_at'
        FROM generic_instance d
        JOIN generic_instance_lineage l ON l.child_instance_uid = d.uid
             AND l.relationship_type = 'execution_subject_dead_letter' AND NOT l.is_deleted
        JOIN generic_instance s ON s.uid = l.parent_instance_uid AND NOT s.is_deleted
             AND s.tenant_id = %(tenant)s
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND d.json_addl->'properties'->>'resolution_state' = 'OPEN'
    ) f
    WHERE (%(queue_key)s::text IS NULL OR f.queue_key = %(queue_key)s)
      AND (%(error_class)s::text IS NULL OR f.error_class = %(error_class)s)
      AND (%(kind)s::text IS NULL OR f.kind = %(kind)s)
"""
def _listed(counted: bool) -> str:
    return f"""
    SELECT f.*, {total_column(counted)} AS total FROM ({_FAILURES}) f
    WHERE {text_found("f.subject_euid", "f.subject_name", "f.error_message", "f.error_class",
                      "f.queue_key")}
    ORDER BY f.failed_at DESC NULLS LAST, f.subject_euid
    LIMIT %(limit)s
"""
# Every failing subject counted, not only the listed ones: per queue, error class and kind,
# with its newest messages (a few more than a group shows: some repeat).
_SAMPLED = 12
_COUNTED = f"""
    SELECT f.queue_key, f.error_class, f.kind, count(*) AS n, max(f.failed_at) AS latest_at,
           (array_agg(f.error_message ORDER BY f.failed_at DESC NULLS LAST)
                FILTER (WHERE f.error_message IS NOT NULL))[1:{_SAMPLED}] AS messages
    FROM ({_FAILURES}) f GROUP BY 1, 2, 3
"""


def failures(*, queue_key: str | None = None, error_class: str | None = None,
             kind: str | None = None, text: str | None = None, tenant: str | None = None,
             limit: int = 2000, counted: bool = False) -> list[dict[str, Any]]:
    """Retrying and failed subjects matching the filter (``text``: the workbench's free
    text), newest failure first; with ``counted`` each with ``total``. One query."""
    return fetch_all(_listed(counted), read_params(None, tenant, queue_key=queue_key,
                                          error_class=error_class, kind=kind, limit=limit,
                                          text=text or None))


def failure_counts(*, queue_key: str | None = None, tenant: str | None = None
                   ) -> list[dict[str, Any]]:
    """How many subjects fail, per queue, error class and kind (every one, not a page of
    them), with the newest failure of each. One query."""
    return fetch_all(_COUNTED, read_params(None, tenant, queue_key=queue_key,
                                           error_class=None, kind=None))


@dataclass
class FailureGroup:
    """The failures of one queue and error class: how many retry, how many failed for good,
    and the newest distinct messages."""

    queue_key: str
    error_class: str
    retrying: int = 0
    failed: int = 0
    latest_at: str | None = None
    messages: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.retrying + self.failed


def group_failures(rows: list[dict[str, Any]], *, messages: int = 3,
                   counts: list[dict[str, Any]] | None = None) -> list[FailureGroup]:
    """Rows of ``failures`` (newest first) grouped by queue and error class, the largest
    group first; with ``counts`` (``failure_counts``), the groups, their sizes and their
    messages are those of every failing subject, whatever the list shows. No queries."""
    if counts is None:  # each listed row a count of one
        counts = [{"queue_key": r["queue_key"], "error_class": r["error_class"],
                   "kind": r["kind"], "n": 1, "latest_at": r["failed_at"],
                   "messages": [r["error_message"]]} for r in rows]
    groups: dict[tuple[str, str], FailureGroup] = {}
    for c in counts:
        key = (c["queue_key"] or "", c["error_class"] or "")
        group = groups.setdefault(key, FailureGroup(*key, latest_at=c["latest_at"]))
        group.latest_at = max(filter(None, (group.latest_at, c["latest_at"])), default=None)
        if c["kind"] == RETRYING:
            group.retrying += int(c["n"])
        else:
            group.failed += int(c["n"])
        _said(group, c.get("messages") or [], messages)
    return sorted(groups.values(), key=lambda g: (-g.total, g.queue_key, g.error_class))


def _said(group: FailureGroup, texts: list[str | None], most: int) -> None:
    for text in texts:
        text = (text or "").strip()
        if text and text not in group.messages and len(group.messages) < most:
            group.messages.append(text)


# Finished attempts (execution records of the given statuses: counting.FAILED, which the
# charts' failure bars count, or SUCCEEDED, their completion bars) of the queues that
# finished in (since, until], newest first: a range of bloomops_record_queue_finished per
# queue, as the recorder counts them; then where each listed subject is now (subject_found
# false: no longer in the tenant's live objects).
_FINISHED_ATTEMPTS = """
    SELECT a.*, s.uid IS NOT NULL AS subject_found, s.name AS subject_name,
           s.json_addl->'properties'->'execution'->>'state' AS subject_state,
           s.json_addl->'properties'->'execution'->>'next_queue_key' AS subject_queue_key
    FROM (
    SELECT a.* FROM unnest(%(queue_keys)s::text[]) AS k(queue_key)
    CROSS JOIN LATERAL (
        SELECT r.euid AS record_euid, k.queue_key, p->>'status' AS status,
               p->>'finished_at' AS finished_at, p->>'attempt_number' AS attempt,
               p->>'error_class' AS error_class, p->>'error_message' AS error_message,
               p->>'worker_lookup_euid' AS worker_euid, p->>'subject_lookup_euid' AS subject_euid
        FROM (SELECT r.euid, r.json_addl->'properties' AS p
              FROM generic_instance r
              WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
                AND r.type = 'execution' AND r.subtype = 'execution_record'
                AND r.json_addl->'properties'->>'queue_lookup_key' = k.queue_key
                AND r.json_addl->'properties'->>'finished_at' > %(since)s
                AND r.json_addl->'properties'->>'finished_at' <= %(until)s
                AND r.json_addl->'properties'->>'status' IN ({statuses})
              ORDER BY r.json_addl->'properties'->>'finished_at' DESC
              LIMIT %(limit)s) r
    ) a
    ORDER BY a.finished_at DESC, a.record_euid
    LIMIT %(limit)s) a
    LEFT JOIN generic_instance s
      ON s.euid = a.subject_euid AND s.tenant_id = %(tenant)s AND NOT s.is_deleted
    ORDER BY a.finished_at DESC, a.record_euid
"""
_STATUSES = {"failed": FAILED_STATUSES, "completed": ("SUCCEEDED",)}


def finished_attempts(queue_keys: list[str], *, outcome: str, since: datetime,
                      until: datetime, tenant: str | None = None,
                      limit: int = 200) -> list[dict[str, Any]]:
    """The failed (or, ``outcome`` "completed", the completed) attempts of ``queue_keys``
    that finished in (since, until], newest first (at most ``limit``), each with its
    subject's name, state and queue now: what the dashboard's failure (completion) bars
    count. One query."""
    if not queue_keys:
        return []
    statuses = ", ".join(f"'{status}'" for status in _STATUSES[outcome])
    return fetch_all(_FINISHED_ATTEMPTS.format(statuses=statuses), read_params(
        until, tenant, queue_keys=list(queue_keys), since=ts(since), until=ts(until),
        limit=limit))
