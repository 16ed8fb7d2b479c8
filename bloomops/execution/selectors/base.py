"""What every read shares: its parameters (``params.read_params``, imported from here), the
envelope fields of a row, the columns of a queue item, and an object's lineage parent of the
tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bloomops.execution.envelope import (
    parse_ts,
)
from bloomops.execution.objects import tenant_parent_sql
from bloomops.execution.params import read_params  # noqa: F401 - the selectors' import
from bloomops.execution.policy import is_terminal
from bloomops.execution.sql import (
    ENV,
    READY_TS,
    TEMPLATE_CODE,
)
from bloomops.execution.states import priority_class

THROUGHPUT_WINDOW_MINUTES = 60


def total_column(counted: bool) -> str:
    """How many rows match before the limit (``total``), for a page that says "the newest N
    of M": every match is then read, so only such a page asks (NULL otherwise)."""
    return "count(*) OVER ()" if counted else "NULL::bigint"


def total_of(rows: list[Any]) -> int:
    """The ``total`` a counted read carries on each row (``total_column``), a dict's or a
    row object's: 0 for none."""
    if not rows:
        return 0
    return int(rows[0]["total"] if isinstance(rows[0], dict) else rows[0].total)


def text_found(*fields: str) -> str:
    """The workbench's free-text filter (``%(text)s``, any case; NULL: none) over a row's
    fields, in SQL, so it finds what a page's limit would have cut off."""
    return (f"(%(text)s::text IS NULL OR strpos(lower(concat_ws(' ', {', '.join(fields)})),"
            " lower(%(text)s)) > 0)")


def tenant_parent(child: str, rel: str, alias: str) -> str:
    """A LEFT JOIN LATERAL of objects.tenant_parent_sql: one row or none, so another
    tenant's edge to the child never shows it twice."""
    return f"LEFT JOIN LATERAL ({tenant_parent_sql(child, rel, alias)}) {alias} ON true"

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
    def terminal(self) -> bool:
        """RULES.md#envelope: by its flag or by its state (policy.is_terminal)."""
        return is_terminal(self.execution)

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


# The worker an action record ``a`` was taken through, and its name as the record kept it
# when the action was taken (a heartbeat renamed "Fluorometer A" and every past action read
# "Fluorometer B"); a record from before it kept one: the name now (the worker of our
# tenant only: another tenant's of that EUID is no one's here).
ACTION_WORKER = """a.json_addl->>'worker_lookup_euid' AS worker_euid,
    coalesce(nullif(a.json_addl->>'worker_name', ''),
      (SELECT w.json_addl->'properties'->>'display_name' FROM generic_instance w
        WHERE w.euid = a.json_addl->>'worker_lookup_euid'
          AND w.tenant_id = %(tenant)s)) AS worker_name"""

# Why an action was taken, as its record ``a`` says it: the reason given, or for a failure or
# an external result (their payloads have no reason) its error class and message.
ACTION_WHY = """coalesce(a.json_addl->>'reason', CASE
    WHEN a.json_addl->'captured_data'->>'error_message' IS NOT NULL THEN concat_ws(': ',
        a.json_addl->'captured_data'->>'error_class',
        a.json_addl->'captured_data'->>'error_message') END)"""
