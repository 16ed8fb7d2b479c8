"""Items of one queue: visible ones in order (RULES.md#order), the head, one subject's
visibility, and the routed-but-hidden ones with their reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bloomops.execution.envelope import (
    clean_envelope,
    parse_ts_or_none,
)
from bloomops.execution.selectors.base import (
    ITEM_COLUMNS,
    EnvelopeView,
    read_params,
)
from bloomops.execution.selectors.routed import (
    QUEUES_AND_SETS,
    VISIBLE_IN_SETS,
    plain_subjects,
)
from bloomops.execution.selectors.subjects import REASON_TEXT, Reason
from bloomops.execution.sql import (
    CANCEL_REQUESTED,
    ENV,
    ENVELOPE_VALID,
    HAS_ENVELOPE,
    HELD,
    ORDER_BY,
    ORDER_BY_COLUMNS,
    ORDER_COLUMNS,
    QP,
    QUEUES,
    READY_TS,
    RETRY_WAITING,
    ROUTED,
    SCOPE_MATCH,
    TEMPLATE_CODE,
    TEMPLATES,
    TERMINAL,
    VISIBLE,
)
from bloomops.tapdb.db import fetch_all, fetch_one


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


def item_from_row(row: dict, position: int = 0, cls: type[QueueItem] | None = None,
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


def filters_sql(filters: dict[str, str] | None, params: dict[str, Any]) -> str:
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
    counted: bool = True,
) -> tuple[list[QueueItem], int]:
    """Visible items of a queue in execution order (RULES.md#visibility, RULES.md#order),
    one page, with the total count of visible items matching the filters. One query: the
    page walks the ordered index and stops; the total counts the queue's subjects as plain
    values (selectors/routed.py), as the summaries do; both test leases and holds against
    the sets the statement finds once. ``counted`` False: the total is not counted (0)."""
    params = read_params(now, tenant, queue_key=queue_key, limit=limit, offset=offset)
    extra = filters_sql(filters, params)
    count_sql = (f"""SELECT count(*) FILTER (WHERE s.vis) AS n
                  FROM queues q CROSS JOIN LATERAL ({plain_subjects(extra)}) s
                  WHERE q.queue_key = %(queue_key)s""" if counted else "SELECT NULL::bigint AS n")
    routed = f"""
        FROM ({QUEUES}) q
        JOIN generic_instance s
          ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s"""
    rows = fetch_all(
        f"""
        WITH {QUEUES_AND_SETS},
        total AS ({count_sql}),
        page AS (
            SELECT {ITEM_COLUMNS}, {ORDER_COLUMNS} {routed} AND {VISIBLE_IN_SETS}{extra}
            ORDER BY {ORDER_BY}
            LIMIT %(limit)s OFFSET %(offset)s)
        SELECT total.n AS total, page.* FROM total LEFT JOIN page ON true
        ORDER BY {ORDER_BY_COLUMNS}
        """,
        params,
    )
    total = int(rows[0]["total"] or 0) if rows else 0
    page = [r for r in rows if r["uid"] is not None]
    return [item_from_row(r, offset + i + 1) for i, r in enumerate(page)], total


def queue_head(
    queue_key: str, *, now: datetime | None = None, tenant: str | None = None
) -> QueueItem | None:
    """The item a claim on this queue would take next, or None (the queue's count left out:
    a strict claim asks while it holds its candidate locked)."""
    items, _ = queue_items(queue_key, now=now, tenant=tenant, limit=1, counted=False)
    return items[0] if items else None

def is_visible(
    subject_uid: int, queue_key: str, *, now: datetime | None = None, tenant: str | None = None
) -> bool:
    """The full visibility predicate for one subject and one queue. One query. The claim calls it
    in a new statement after locking the subject, so it sees leases committed meanwhile."""
    row = fetch_one(
        f"""
        SELECT {VISIBLE} AS visible
        FROM ({QUEUES}) q
        JOIN generic_instance s ON s.uid = %(uid)s AND s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s
        """,
        read_params(now, tenant, uid=subject_uid, queue_key=queue_key),
    )
    return bool(row and row["visible"])



@dataclass
class HiddenItem(QueueItem):
    """A subject routed to a queue but not visible in it, with why (RULES.md#visibility)."""

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
    from bloomops.execution.sql import ACTIVE_LEASE_EXISTS

    params = read_params(now, tenant, queue_key=queue_key, limit=limit, offset=offset, state=state)
    extra = filters_sql(filters, params)
    rows = fetch_all(
        f"""
        SELECT {ITEM_COLUMNS}, count(*) OVER () AS total,
               {TERMINAL} AS terminal,
               {CANCEL_REQUESTED} AS cancel_requested,
               {HELD} AS held,
               {ACTIVE_LEASE_EXISTS} AS leased,
               {RETRY_WAITING} AS retry_wait,
               ({READY_TS} > %(now)s AND NOT {RETRY_WAITING}) AS not_ready,
               NOT coalesce(q.eligible_states ? ({ENV}->>'state'), false) AS state_bad,
               NOT coalesce(q.template_codes ? {TEMPLATE_CODE}, false)
                   AS template_bad,
               NOT ({SCOPE_MATCH}) AS scope_bad,
               coalesce({QP}->'enabled' = 'false'::jsonb, false) AS queue_disabled,
               NOT ({ENVELOPE_VALID}) AS envelope_bad
        FROM ({QUEUES}) q
        JOIN generic_instance s
          ON s.tenant_id = %(tenant)s AND {ROUTED}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s AND NOT ({VISIBLE} AND {ENVELOPE_VALID})
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
        items.append(item_from_row(row, offset + len(items) + 1, HiddenItem, reasons=reasons))
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
        WHERE s.tenant_id = %(tenant)s AND {ROUTED}
          AND {ENV}->>'next_queue_key' = %(queue_key)s
        """,
        read_params(None, tenant, queue_key=queue_key),
    )
    return {k: sorted(row[k] or []) for k in ("site", "platform", "assay")} if row else {}


def routed_count(queue_key: str, *, tenant: str | None = None) -> int:
    """How many live subjects a rename of the queue would leave behind: routed to its key
    and not finished (a dead letter, FAILED_TERMINAL, may still be requeued; a completed or
    canceled subject keeps its key and goes nowhere). One query."""
    row = fetch_one(
        f"""SELECT count(*) AS n FROM generic_instance s
            WHERE s.tenant_id = %(tenant)s AND {ROUTED}
              AND {ENV}->>'next_queue_key' = %(queue_key)s
              AND (NOT {TERMINAL} OR {ENV}->>'state' = 'FAILED_TERMINAL')""",
        read_params(None, tenant, queue_key=queue_key))
    return int(row["n"]) if row else 0


def scope_texts(uid: int, *, tenant: str | None = None) -> dict[str, str | None]:
    """A subject's site, platform and assay as the SQL reads them (``->>``: a number as
    stored, 1.50 not 1.5), for a test that must agree with the claim walk's. One query."""
    row = fetch_one(
        """SELECT s.json_addl->'properties'->>'site' AS site,
                  s.json_addl->'properties'->>'platform' AS platform,
                  s.json_addl->'properties'->>'assay' AS assay
           FROM generic_instance s WHERE s.uid = %(uid)s AND s.tenant_id = %(tenant)s""",
        read_params(None, tenant, uid=uid))
    return dict(row) if row else {}
