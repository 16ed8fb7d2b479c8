"""Who did what, when: the action records of a period (RULES.md#evidence), by person, action
and queue. What QA answers an auditor with ("everything Quinn did in October", "every
requeue last week"); each record is the sealed one a subject's evidence bundle holds."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bloomops.execution.envelope import ts
from bloomops.execution.selectors.base import ACTION_WHY, ACTION_WORKER, read_params
from bloomops.tapdb.db import fetch_all

# An action record's instant as the executor wrote it (envelope.ts: fixed-width UTC text),
# compared bytewise as the period indexes hold it (execution/indexes.py).
EXECUTED_AT = "(a.json_addl->>'executed_at') COLLATE \"C\""


def activity(*, tenant: str | None = None, people: list[str] | None = None,
             action_key: str | None = None, approval_status: str | None = None,
             queue_key: str | None = None, subject_euids: list[str] | None = None,
             leave_out: tuple[str, ...] = (),
             since: datetime | None = None, until: datetime | None = None,
             limit: int = 500) -> list[dict[str, Any]]:
    """Action records executed in [since, until), newest first; by any of ``people``
    (usernames, in any case), one action (a decision: one way, ``approval_status``), one
    queue, any of some subjects (their EUIDs), without the actions ``leave_out`` names. One
    query."""
    return fetch_all(
        f"""
        SELECT a.euid, a.subtype AS action_key, a.json_addl->>'executed_at' AS executed_at,
               a.json_addl->>'executed_by' AS executed_by,
               a.json_addl->>'executed_by_name' AS executed_by_name,
               a.json_addl->>'subject_lookup_euid' AS subject_euid,
               a.json_addl->>'queue_lookup_key' AS queue_key,
               a.json_addl->>'target_euid' AS target_euid,
               {ACTION_WHY} AS reason,
               a.json_addl->'result'->>'state' AS state_after,
               coalesce(a.json_addl->'result'->>'requested_by',
                        a.json_addl->'result'->'approval'->>'requested_by') AS asked_by,
               coalesce(a.json_addl->'result'->>'gated_action_key', CASE
                   WHEN a.subtype = 'cancel_approval' THEN (
                       SELECT ap.json_addl->'properties'->>'action_key'
                       FROM generic_instance ap WHERE ap.tenant_id = %(tenant)s
                         AND ap.euid = a.json_addl->'captured_data'->>'approval_euid')
                   END) AS gated_action_key,
               a.json_addl->'result'->>'approval_status' AS approval_status,
               -- what the record's words leave out: a hold's code (QC_FAIL needs a second
               -- person to end, AWAITING_INFORMATION not), where a completion sent the item
               -- (the code as the hold keeps it, "qc_fail" typed is QC_FAIL)
               CASE WHEN a.subtype = 'place_execution_hold' THEN coalesce((
                       SELECT h.json_addl->'properties'->>'hold_code'
                       FROM generic_instance h WHERE h.tenant_id = %(tenant)s
                         AND h.euid = a.json_addl->'result'->>'hold_euid'),
                   upper(btrim(a.json_addl->'captured_data'->>'hold_code')))
                   END AS hold_code,
               a.json_addl->'result'->>'next_queue_key' AS next_queue_key,
               {ACTION_WORKER}
        FROM generic_instance a
        WHERE a.tenant_id = %(tenant)s AND a.type = 'execution_queue' AND NOT a.is_deleted
          AND (%(people)s::text[] IS NULL
               OR lower(a.json_addl->>'executed_by') = ANY(%(people)s::text[]))
          AND (%(action)s::text IS NULL OR a.subtype = %(action)s)
          AND (%(decision)s::text IS NULL
               OR a.json_addl->'result'->>'approval_status' = %(decision)s)
          AND (%(queue)s::text IS NULL OR a.json_addl->>'queue_lookup_key' = %(queue)s)
          AND (%(subjects)s::text[] IS NULL
               OR a.json_addl->>'subject_lookup_euid' = ANY(%(subjects)s::text[])
               -- a sweep names each subject whose claim it ended (a list: as a period's
               -- export reads it, selectors.evidence.subjects_acted_on)
               OR (jsonb_typeof(a.json_addl->'result'->'subject_euids') = 'array'
                   AND a.json_addl->'result'->'subject_euids' ?| %(subjects)s::text[]))
          AND NOT a.subtype = ANY(%(leave_out)s::text[])
          AND (%(since)s::text IS NULL OR {EXECUTED_AT} >= %(since)s)
          AND (%(until)s::text IS NULL OR {EXECUTED_AT} < %(until)s)
        ORDER BY {EXECUTED_AT} DESC, a.uid DESC LIMIT %(limit)s
        """,
        read_params(None, tenant, people=[p.lower() for p in people] if people else None,
                    action=action_key, decision=approval_status, queue=queue_key,
                    subjects=subject_euids,
                    leave_out=list(leave_out),
                    since=ts(since) if since else None, until=ts(until) if until else None,
                    limit=limit),
    )
