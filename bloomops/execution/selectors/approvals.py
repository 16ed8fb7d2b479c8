"""Approvals (RULES.md#approvals): the inbox, a subject's approvals, the count waiting, and
the holds waiting for a decision. A REQUESTED approval past its expiry reads EXPIRED."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.execution.selectors.base import read_params
from bloomops.execution.sql import utc
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

    @property
    def waiting(self) -> bool:
        return self.status == "REQUESTED"

    @property
    def holds(self) -> list[tuple[str, str]]:
        """(hold euid, hold code) of the holds the request concerns."""
        codes = list(self.props.get("hold_codes") or [])
        euids = list(self.props.get("hold_euids") or [])
        return [(e, codes[i] if i < len(codes) else "") for i, e in enumerate(euids)]

    def as_dict(self) -> dict[str, Any]:
        p = self.props
        return {
            "approval_euid": self.euid, "status": self.status,
            "action_key": p.get("action_key"), "rule": p.get("rule"),
            "parameters": p.get("parameters") or {}, "reason": p.get("reason"),
            "subject_euid": p.get("subject_lookup_euid"), "subject_state": self.subject_state,
            "hold_euid": p.get("hold_lookup_euid"), "hold_euids": p.get("hold_euids") or [],
            "queue_key": p.get("queue_key"),
            "requested_by": p.get("requested_by"), "requested_at": p.get("requested_at"),
            "expires_at": p.get("expires_at"),
            "subject_revision_at_request": p.get("subject_revision_at_request"),
            "decision": p.get("decision"), "decided_by": p.get("decided_by"),
            "decided_at": p.get("decided_at"), "decision_reason": p.get("decision_reason"),
            "signature": p.get("signature"), "canceled_by": p.get("canceled_by"),
            "canceled_at": p.get("canceled_at"),
        }


def _rows(where: str, params: dict[str, Any], extra: str = "",
          prepare: str | None = None) -> list[dict[str, Any]]:
    return fetch_all(
        f"SELECT a.euid, a.created_dt, {_P} AS props, {EFFECTIVE_STATUS} AS status,"
        " s.json_addl->'properties'->'execution'->>'state' AS subject_state,"
        " s.name AS subject_name" + extra +
        " FROM generic_instance a"
        " LEFT JOIN generic_instance s ON s.euid = a.json_addl->'properties'->>"
        "'subject_lookup_euid' AND s.tenant_id = a.tenant_id AND NOT s.is_deleted"
        f" WHERE {_APPROVALS} AND {where} ORDER BY a.uid DESC LIMIT %(limit)s", params,
        prepare=prepare)


def _row(r: dict[str, Any]) -> ApprovalRow:
    return ApprovalRow(euid=r["euid"], status=r["status"], props=r["props"] or {},
                       created_dt=r["created_dt"], subject_state=r["subject_state"],
                       subject_name=r["subject_name"])


def approvals(*, status: str | None = None, subject_euid: str | None = None,
              limit: int = 200, now: datetime | None = None,
              tenant: str | None = None) -> list[ApprovalRow]:
    """Approvals newest first, by effective status and/or subject (one query)."""
    params = read_params(now, tenant, status=status, subject=subject_euid, limit=limit)
    return [_row(r) for r in _rows(
        f"(%(status)s::text IS NULL OR {EFFECTIVE_STATUS} = %(status)s)"
        f" AND (%(subject)s::text IS NULL OR {_P}->>'subject_lookup_euid' = %(subject)s)",
        params)]


@dataclass(frozen=True)
class Waiting:
    count: int
    rows: list[ApprovalRow]

    @property
    def holds(self) -> list[ApprovalRow]:
        """The waiting approvals that concern holds (holds waiting for approval)."""
        return [a for a in self.rows if a.holds]


def approvals_waiting(*, limit: int = 10, now: datetime | None = None,
                      tenant: str | None = None) -> Waiting:
    """How many approvals wait for a decision, and the newest ``limit`` of them (the
    navigation's count and the panels, on every page; one query, prepared). Written as
    "stored REQUESTED and not past its expiry" (what an effective REQUESTED is) so that it
    reads bloomops_approval_requested: the approvals decided before are never read."""
    rows = _rows(f"{_STORED} = 'REQUESTED' AND NOT {_PAST}",
                 read_params(now, tenant, limit=limit), ", count(*) OVER () AS total",
                 prepare="approvals_waiting")
    if not rows:
        return Waiting(count=0, rows=[])
    return Waiting(count=int(rows[0]["total"]), rows=[_row(r) for r in rows])
