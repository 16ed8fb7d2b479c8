"""Failing work across the lab: subjects waiting to retry (not held: holds have their own
list; not claimed again: someone is working on it) and subjects that failed for good (an open
dead letter), with the failure that put them there (RULES.md#retries). The failures view and
the workbench's retrying list read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bloomops.execution.selectors.base import read_params
from bloomops.execution.sql import (
    ACTIVE_LEASE_EXISTS,
    ENV,
    HELD_BY_ENVELOPE,
    ROUTED,
    SUBJECT_REVISION,
    TERMINAL,
)
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
            WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
              AND l.relationship_type = 'execution_subject_record'
              AND x.json_addl->'properties'->>'status' = 'FAILED_RETRYABLE'
            ORDER BY x.uid DESC LIMIT 1) r ON true
        WHERE s.tenant_id = %(tenant)s AND {ROUTED}
          AND {ENV}->>'state' = 'FAILED_RETRYABLE' AND NOT {TERMINAL}
          AND NOT {HELD_BY_ENVELOPE} AND NOT {ACTIVE_LEASE_EXISTS}
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
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND d.json_addl->'properties'->>'resolution_state' = 'OPEN'
    ) f
    WHERE (%(queue_key)s::text IS NULL OR f.queue_key = %(queue_key)s)
      AND (%(error_class)s::text IS NULL OR f.error_class = %(error_class)s)
      AND (%(kind)s::text IS NULL OR f.kind = %(kind)s)
    ORDER BY f.failed_at DESC NULLS LAST, f.subject_euid
    LIMIT %(limit)s
"""


def failures(*, queue_key: str | None = None, error_class: str | None = None,
             kind: str | None = None, tenant: str | None = None,
             limit: int = 2000) -> list[dict[str, Any]]:
    """Retrying and failed subjects matching the filter, newest failure first. One query."""
    return fetch_all(_FAILURES, read_params(None, tenant, queue_key=queue_key,
                                            error_class=error_class, kind=kind, limit=limit))


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


def group_failures(rows: list[dict[str, Any]], *, messages: int = 3) -> list[FailureGroup]:
    """Rows of ``failures`` (newest first) grouped by queue and error class, the largest
    group first. No queries."""
    groups: dict[tuple[str, str], FailureGroup] = {}
    for row in rows:
        key = (row["queue_key"] or "", row["error_class"] or "")
        group = groups.setdefault(key, FailureGroup(*key, latest_at=row["failed_at"]))
        if row["kind"] == RETRYING:
            group.retrying += 1
        else:
            group.failed += 1
        text = (row["error_message"] or "").strip()
        if text and text not in group.messages and len(group.messages) < messages:
            group.messages.append(text)
    return sorted(groups.values(), key=lambda g: (-g.total, g.queue_key, g.error_class))
