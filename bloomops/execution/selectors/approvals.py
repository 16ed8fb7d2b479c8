"""Approvals (RULES.md#approvals): the inbox, a subject's approvals, the count waiting, and
the holds waiting for a decision. A REQUESTED approval past its expiry reads EXPIRED."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.execution.selectors.base import read_params, total_column
from bloomops.execution.sql import SUBJECT_REVISION, TERMINAL, hold_active, utc
from bloomops.tapdb.db import fetch_all

_P = "a.json_addl->'properties'"
_STORED = f"{_P}->>'status'"
_EXPIRES = utc(f"{_P}->>'expires_at'")
_PAST = f"coalesce({_EXPIRES} <= %(now)s, false)"
# The status every read reports, expiry included (never stored: a refusal writes nothing).
EFFECTIVE_STATUS = (f"CASE WHEN {_STORED} = 'REQUESTED' AND {_PAST} THEN 'EXPIRED'"
                    f" ELSE {_STORED} END")
_APPROVALS = ("a.tenant_id = %(tenant)s AND NOT a.is_deleted AND a.type = 'execution'"
              " AND a.subtype = 'approval'")


@dataclass(frozen=True)
class ApprovalRow:
    euid: str
    status: str
    props: dict[str, Any]
    created_dt: datetime
    subject_state: str | None
    subject_name: str | None = None
    # RULES.md#envelope's terminal, as the requeue itself will judge it (by flag or state)
    subject_terminal: bool = False
    subject_revision: int | None = None
    # what the approver weighs besides the request (approvals(context=True)): the reasons
    # the holds were placed with, and why the subject failed for good
    hold_reasons: tuple[str, ...] = ()
    failure: str | None = None
    total: int | None = None  # how many match in all, beyond the limit (``counted``)

    @property
    def waiting(self) -> bool:
        return self.status == "REQUESTED"

    @property
    def stale(self) -> bool:
        """Waiting, but its subject has changed since it was asked: approving it is refused
        (REVISION_CONFLICT); it can only be rejected, withdrawn or asked again."""
        asked = self.props.get("subject_revision_at_request")
        return (self.waiting and asked is not None and self.subject_revision is not None
                and self.subject_revision != asked)

    @property
    def holds(self) -> list[tuple[str, str]]:
        """(hold euid, hold code) of the holds the request concerns."""
        codes, euids = (self.props.get(k) for k in ("hold_codes", "hold_euids"))
        codes = codes if isinstance(codes, list) else []  # another writer's may be anything
        return [(e, codes[i] if i < len(codes) and isinstance(codes[i], str) else "")
                for i, e in enumerate(euids if isinstance(euids, list) else [])
                if isinstance(e, str)]

    def as_dict(self) -> dict[str, Any]:
        """The API's fields, each of its type or absent: another writer's raw SQL is held to
        no type, and one malformed approval must not fail the list."""
        p = self.props

        def text(name: str) -> str | None:
            return _typed(p.get(name), str)

        return {
            "approval_euid": self.euid, "status": self.status,
            "action_key": text("action_key"), "rule": text("rule"),
            "parameters": _typed(p.get("parameters"), dict) or {}, "reason": text("reason"),
            "subject_euid": text("subject_lookup_euid"), "subject_state": self.subject_state,
            "hold_euid": text("hold_lookup_euid"),
            "hold_euids": [e for e, _ in self.holds],
            "queue_key": text("queue_key"),
            "requested_by": text("requested_by"), "requested_at": text("requested_at"),
            "expires_at": text("expires_at"),
            "subject_revision_at_request": _typed(p.get("subject_revision_at_request"), int),
            "decision": text("decision"), "decided_by": text("decided_by"),
            "decided_at": text("decided_at"), "decision_reason": text("decision_reason"),
            "signature": _typed(p.get("signature"), dict), "canceled_by": text("canceled_by"),
            "canceled_at": text("canceled_at"), "cancel_reason": text("cancel_reason"),
        }


def _typed(value: Any, kind: type) -> Any:
    """``value`` if it is a ``kind`` (a JSON true is no integer), else None."""
    return value if isinstance(value, kind) and not (
        kind is int and isinstance(value, bool)) else None


# The inbox's order: the soonest to expire first (our fixed-width UTC text orders as time).
_SOONEST = f"{_P}->>'expires_at', a.uid"


def _rows(where: str, params: dict[str, Any], extra: str = "",
          prepare: str | None = None, oldest_first: bool = False) -> list[dict[str, Any]]:
    return fetch_all(
        f"SELECT a.euid, a.created_dt, {_P} AS props, {EFFECTIVE_STATUS} AS status,"
        " s.json_addl->'properties'->'execution'->>'state' AS subject_state,"
        f" coalesce({TERMINAL}, false) AS subject_terminal,"
        f" {SUBJECT_REVISION} AS subject_revision,"
        " s.name AS subject_name" + extra +
        " FROM generic_instance a"
        " LEFT JOIN generic_instance s ON s.euid = a.json_addl->'properties'->>"
        "'subject_lookup_euid' AND s.tenant_id = %(tenant)s AND NOT s.is_deleted"
        f" WHERE {_APPROVALS} AND {where} ORDER BY {_SOONEST if oldest_first else 'a.uid DESC'}"
        " LIMIT %(limit)s", params,
        prepare=prepare)


def _row(r: dict[str, Any]) -> ApprovalRow:
    return ApprovalRow(euid=r["euid"], status=r["status"], props=r["props"] or {},
                       created_dt=r["created_dt"], subject_state=r["subject_state"],
                       subject_name=r["subject_name"], subject_terminal=r["subject_terminal"],
                       subject_revision=r["subject_revision"],
                       hold_reasons=tuple(x for x in r.get("hold_reasons") or [] if x),
                       failure=r.get("failure"), total=r.get("total"))


# The holds' own reasons (by the EUIDs the request names) and the newest dead letter's
# error, of the tenant: what a decision weighs, read for the inbox only (not for the count
# on every page).
_CONTEXT = f""",
    (SELECT jsonb_agg(h.json_addl->'properties'->>'reason' ORDER BY h.uid)
     FROM generic_instance h
     WHERE h.euid IN (SELECT jsonb_array_elements_text(CASE WHEN
                      jsonb_typeof({_P}->'hold_euids') = 'array' THEN {_P}->'hold_euids' END))
       AND h.tenant_id = %(tenant)s AND NOT h.is_deleted AND {hold_active("h")}
    ) AS hold_reasons,
    (SELECT d.json_addl->'properties'->>'error_message'
     FROM generic_instance_lineage l
     JOIN generic_instance d ON d.uid = l.child_instance_uid AND d.tenant_id = %(tenant)s
     WHERE l.parent_instance_uid = s.uid AND NOT l.is_deleted
       AND l.relationship_type = 'execution_subject_dead_letter'
     ORDER BY d.uid DESC LIMIT 1) AS failure"""


def approvals(*, status: str | None = None, subject_euid: str | None = None,
              limit: int = 200, now: datetime | None = None, tenant: str | None = None,
              context: bool = False, decided: bool = False,
              subject_euids: list[str] | None = None,
              oldest_first: bool = False, counted: bool = False) -> list[ApprovalRow]:
    """Approvals newest first (``oldest_first``: the inbox, the soonest to expire first), by
    effective status and/or subject (or any of ``subject_euids``) (one query); ``decided``:
    only those no longer waiting (the limit counts them alone); with ``context``, each with
    the holds' reasons and the subject's failure (the inbox); ``counted``: each with
    ``total``."""
    params = read_params(now, tenant, status=status, subject=subject_euid, limit=limit,
                         decided=decided, subjects=subject_euids)
    return [_row(r) for r in _rows(
        f"(%(status)s::text IS NULL OR {EFFECTIVE_STATUS} = %(status)s)"
        f" AND (NOT %(decided)s OR {EFFECTIVE_STATUS} <> 'REQUESTED')"
        f" AND (%(subject)s::text IS NULL OR {_P}->>'subject_lookup_euid' = %(subject)s)"
        f" AND (%(subjects)s::text[] IS NULL"
        f"      OR {_P}->>'subject_lookup_euid' = ANY(%(subjects)s::text[]))",
        params, (_CONTEXT if context else "") + f", {total_column(counted)} AS total",
        oldest_first=oldest_first)]


@dataclass(frozen=True)
class Waiting:
    count: int
    rows: list[ApprovalRow]
    # of ``count``, those someone else asked: what ``for_user`` may decide
    others: int = 0


def approvals_waiting(*, limit: int = 10, now: datetime | None = None,
                      tenant: str | None = None, for_user: str | None = None) -> Waiting:
    """How many approvals wait for a decision (and how many of them someone other than
    ``for_user`` asked), and the newest ``limit`` of them (the navigation's count and the
    panels, on every page; one query, prepared). Written as "stored REQUESTED and not past
    its expiry" (what an effective REQUESTED is) so that it reads
    bloomops_approval_requested: the approvals decided before are never read."""
    rows = _rows(f"{_STORED} = 'REQUESTED' AND NOT {_PAST}",
                 read_params(now, tenant, limit=limit, me=for_user),
                 ", count(*) OVER () AS total, count(*) FILTER (WHERE"
                 f" {_P}->>'requested_by' IS DISTINCT FROM %(me)s) OVER () AS others",
                 prepare="approvals_waiting")
    if not rows:
        return Waiting(count=0, rows=[])
    return Waiting(count=int(rows[0]["total"]), rows=[_row(r) for r in rows],
                   others=int(rows[0]["others"]))
