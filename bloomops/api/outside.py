"""GET /outside-work: work under way outside whose result has not come back
(RULES.md#reconciliation), the longest waiting first, as the workbench lists it: for a LIMS or
a monitor to find the runs that will not report back and reconcile them with the requeue,
hold and cancel actions (each takes the listed state and revision as its expectation)."""

# No "from __future__ import annotations": django-ninja reads the endpoint annotations.

from typing import Any

from django.http import HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from bloomops.api.schemas import TOTAL_DOCUMENTED, query_integer, query_text, say_total
from bloomops.execution import selectors


class OutsideQuery(Schema):
    queue_key: str | None = query_text(description="Only work this queue sent out.")
    overdue: query_integer(0, 0, 1, description=(  # type: ignore[valid-type]
        "1: only work waiting longer than its queue's outside_overdue_seconds."))
    limit: query_integer(200, 1, 1000)  # type: ignore[valid-type]


class OutsideOut(Schema):
    subject_euid: str
    subject_name: str | None
    subject_state: str = Field(description="WAITING_EXTERNAL, or RUNNING as another writer"
                                           " stored it.")
    subject_revision: int | None
    queue_key: str | None = Field(description="The queue that sent it out (for RUNNING, the"
                                              " queue it is routed to).")
    waiting_since: str = Field(description="When it was sent out, in UTC; for RUNNING, the"
                                           " row's last change.")
    dispatch: dict[str, Any] | None = Field(description=(
        "What the completion that sent it out said (`external`), with bloomops'"
        " dispatched_at, lease_euid and queue_key; null for RUNNING."))
    overdue: bool = Field(description="Waiting longer than the sending queue's"
                                      " outside_overdue_seconds.")
    overdue_after_seconds: int | float | None = Field(description=(
        "The sending queue's outside_overdue_seconds; null when it flags none (or for"
        " RUNNING)."))


def _whole(seconds: float | None) -> int | float | None:
    return int(seconds) if seconds is not None and seconds.is_integer() else seconds


def add_outside_route(router: Router, responses: dict) -> None:
    @router.get("/outside-work", response={200: list[OutsideOut], **responses},
                summary="Work waiting on outside results, the longest waiting first",
                openapi_extra=TOTAL_DOCUMENTED)
    def outside_work(request, response: HttpResponse, query: Query[OutsideQuery]):
        rows = selectors.outside_work(queue_key=query.queue_key, limit=query.limit,
                                      overdue_only=bool(query.overdue), counted=True)
        say_total(response, rows)
        return [{
            "subject_euid": r["subject_euid"], "subject_name": r["subject_name"],
            "subject_state": r["subject_state"], "subject_revision": r["subject_revision"],
            "queue_key": r["queue_key"], "waiting_since": r["since"],
            "dispatch": r["dispatch"], "overdue": r["overdue"],
            # as the queue's setting says it: 1800, not 1800.0
            "overdue_after_seconds": _whole(r["overdue_after"]),
        } for r in rows]
