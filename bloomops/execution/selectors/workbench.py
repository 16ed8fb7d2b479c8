"""The QA workbench: dead letters, active holds and work under way outside, with their
subjects."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bloomops.execution.envelope import ts
from bloomops.execution.selectors.base import (
    read_params,
    tenant_parent,
    text_found,
    total_column,
)
from bloomops.execution.sql import (
    ENV,
    OUTSIDE_WORK,
    QP,
    QUEUES,
    SUBJECT_REVISION,
    hold_active,
    utc,
    utc_text,
)
from bloomops.tapdb.db import fetch_all


# What the workbench's free text is looked for in: the subject, the why and the who.
def _searched(alias: str) -> str:
    p = f"{alias}.json_addl->'properties'"
    return text_found("s.euid", "s.name", f"{p}->>'reason'", f"{p}->>'error_message'",
                      f"{p}->>'error_class'", f"{p}->>'hold_code'",
                      f"{p}->>'placed_by_lookup_euid'", f"{p}->>'queue_lookup_key'")


def dead_letters(*, tenant: str | None = None, resolution: str | None = "OPEN",
                 queue_key: str | None = None, text: str | None = None, limit: int = 500,
                 offset: int = 0, counted: bool = False) -> list[dict[str, Any]]:
    """Dead letters with their subject (through lineage), newest first; with ``counted``,
    each with ``total``, how many match in all (every match is then read). One query."""
    return fetch_all(
        f"""
        SELECT d.euid, d.created_dt, d.json_addl->'properties' AS props, s.euid AS subject_euid,
               s.name AS subject_name,
               s.json_addl->'properties'->'execution'->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision, {total_column(counted)} AS total
        FROM generic_instance d
        {tenant_parent("d.uid", "execution_subject_dead_letter", "s")}
        WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
          AND d.type = 'execution' AND d.subtype = 'dead_letter'
          AND (%(resolution)s::text IS NULL
               OR d.json_addl->'properties'->>'resolution_state' = %(resolution)s)
          AND (%(queue_key)s::text IS NULL
               OR d.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s)
          AND {_searched("d")}
        ORDER BY d.uid DESC LIMIT %(limit)s OFFSET %(offset)s
        """,
        read_params(None, tenant, resolution=resolution, queue_key=queue_key, limit=limit,
                    offset=offset, text=text or None),
    )


def active_holds(*, tenant: str | None = None, queue_key: str | None = None,
                 text: str | None = None, limit: int = 500,
                 counted: bool = False) -> list[dict[str, Any]]:
    """Active holds with their subject (through lineage). One query."""
    return holds(tenant=tenant, queue_key=queue_key, text=text, limit=limit, counted=counted)


def holds(*, tenant: str | None = None, queue_key: str | None = None, ended: bool = False,
          code: str | None = None, placed_by: list[str] | None = None,
          since: datetime | None = None, text: str | None = None,
          limit: int = 500, counted: bool = False) -> list[dict[str, Any]]:
    """Holds with their subject (through lineage), newest first: the active ones, or with
    ``ended`` those released or ended too (what QA answers an auditor with: every hold for
    CONTAMINATION, every hold a person placed last week); by code, by who placed it, placed
    since (``placed_by``: the usernames, in any case; a hold another writer stored without
    ``placed_at`` is as old as its row). One query."""
    return fetch_all(
        f"""
        SELECT h.euid, h.created_dt, h.json_addl->'properties' AS props, s.euid AS subject_euid,
               s.name AS subject_name,
               -- the worker that placed it (a failure's hold), beside its account
               (SELECT w.json_addl->'properties'->>'display_name'
                FROM generic_instance_lineage aw
                JOIN generic_instance w ON w.uid = aw.parent_instance_uid
                     AND w.tenant_id = %(tenant)s
                WHERE aw.child_instance_uid = h.uid AND NOT aw.is_deleted
                  AND aw.relationship_type = 'execution_actor_hold'
                ORDER BY aw.uid LIMIT 1) AS placed_by_worker,
               s.json_addl->'properties'->'execution'->>'state' AS subject_state,
               {SUBJECT_REVISION} AS subject_revision, {total_column(counted)} AS total
        FROM generic_instance h
        JOIN generic_instance_lineage l ON l.child_instance_uid = h.uid
             AND l.relationship_type = 'execution_subject_hold' AND NOT l.is_deleted
        JOIN generic_instance s ON s.uid = l.parent_instance_uid AND s.tenant_id = %(tenant)s
        WHERE h.tenant_id = %(tenant)s AND NOT h.is_deleted
          AND h.type = 'execution' AND h.subtype = 'hold'
          AND (%(ended)s OR {hold_active("h")})
          AND (%(queue_key)s::text IS NULL
               OR h.json_addl->'properties'->>'queue_lookup_key' = %(queue_key)s)
          AND (%(code)s::text IS NULL OR h.json_addl->'properties'->>'hold_code' = %(code)s)
          AND (%(placed_by)s::text[] IS NULL
               OR lower(h.json_addl->'properties'->>'placed_by_lookup_euid')
                  = ANY(%(placed_by)s::text[]))
          AND (%(since)s::text IS NULL
               OR coalesce({utc("h.json_addl->'properties'->>'placed_at'")},
                           {utc_text("h.created_dt")}) >= %(since)s)
          AND {_searched("h")}
        ORDER BY h.uid DESC LIMIT %(limit)s
        """,
        read_params(None, tenant, queue_key=queue_key, ended=ended, code=code,
                    placed_by=[p.lower() for p in placed_by] if placed_by else None,
                    since=ts(since) if since else None, text=text or None,
                    limit=limit),
    )


_DISPATCH = "s.json_addl->'properties'->'external_dispatch'"
# A dispatch is what a WAITING_EXTERNAL subject waits on; on a subject another writer moved
# (RUNNING, say) it is an earlier step's, which says nothing of the work under way now.
_WAITING = f"({ENV}->>'state') = 'WAITING_EXTERNAL' AND jsonb_typeof({_DISPATCH}) = 'object'"


# How long the queue that sent work out expects its result to take (its
# outside_overdue_seconds: a number of seconds, one at least; anything else another writer
# stored, never: 1e-400 is a JSON number no float holds)
_OVERDUE_AFTER = (f"CASE WHEN jsonb_typeof({QP}->'outside_overdue_seconds') = 'number'"
                  f" AND ({QP}->>'outside_overdue_seconds')::numeric >= 1"
                  f" THEN ({QP}->>'outside_overdue_seconds')::numeric END")


def outside_work(*, tenant: str | None = None, queue_key: str | None = None,
                 text: str | None = None, subject_euid: str | None = None,
                 overdue_only: bool = False, limit: int = 500,
                 counted: bool = False) -> list[dict[str, Any]]:
    """Subjects whose work is under way outside (RULES.md#reconciliation), the longest
    waiting first: the queue that sent each out, since when (its dispatch's instant, else the
    row's last change: another writer's RUNNING says no more), what the dispatch said (a
    run id), and whether it is overdue (waiting longer than the sending queue's
    ``outside_overdue_seconds``; only work sent out by a dispatch is). What QA reconciles
    when a result does not come back. With ``counted``, each row also carries
    ``overdue_total``. One query."""
    return fetch_all(
        f"""
        SELECT w.*, {total_column(counted)} AS total,
               {"count(*) FILTER (WHERE w.overdue) OVER ()" if counted else "NULL::bigint"}
                   AS overdue_total
        FROM (
            -- as a number a page can show (another writer may have stored any size)
            SELECT o.*, (CASE WHEN t.after > 1e9 THEN 1e9 ELSE t.after END)::float8
                       AS overdue_after,
                   coalesce(extract(epoch FROM %(now)s::timestamptz - o.since::timestamptz)
                            >= t.after, false) AS overdue
            FROM (
                SELECT s.euid AS subject_euid, s.name AS subject_name,
                       {ENV}->>'state' AS subject_state, {SUBJECT_REVISION} AS subject_revision,
                       CASE WHEN {_WAITING} THEN {_DISPATCH} END AS dispatch,
                       coalesce(CASE WHEN {_WAITING} THEN {_DISPATCH}->>'queue_key' END,
                                {ENV}->>'next_queue_key') AS queue_key,
                       coalesce(CASE WHEN {_WAITING}
                                     THEN {utc(f"{_DISPATCH}->>'dispatched_at'")} END,
                                {utc_text("s.modified_dt")}) AS since,
                       ({_WAITING}) AS waiting
                FROM generic_instance s
                WHERE s.tenant_id = %(tenant)s AND NOT s.is_deleted AND {OUTSIDE_WORK}
                  AND (%(subject)s::text IS NULL OR s.euid = %(subject)s)
            ) o
            -- the queues read once, whatever the number of items (a key is one live queue)
            LEFT JOIN (
                SELECT DISTINCT ON (q.queue_key) q.queue_key, {_OVERDUE_AFTER} AS after
                FROM ({QUEUES}) q ORDER BY q.queue_key, q.uid
            ) t ON o.waiting AND t.queue_key = o.queue_key
        ) w
        WHERE (%(queue_key)s::text IS NULL OR w.queue_key = %(queue_key)s)
          AND (NOT %(overdue_only)s OR w.overdue)
          AND {text_found("w.subject_euid", "w.subject_name", "w.dispatch::text")}
        ORDER BY w.since, w.subject_euid LIMIT %(limit)s
        """,
        read_params(None, tenant, queue_key=queue_key, text=text or None, limit=limit,
                    subject=subject_euid, overdue_only=overdue_only),
    )
