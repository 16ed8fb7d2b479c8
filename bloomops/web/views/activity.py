"""Activity (operators and admins): who did what, when, from the sealed action records, by
person, action, queue and period, on screen and as a spreadsheet (RULES.md#evidence). What QA
answers an auditor with: "everything Quinn did in October", "every requeue last week".
Reads only."""

from __future__ import annotations

import csv

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from bloomops.execution import selectors
from bloomops.execution.actions import ACTIONS
from bloomops.execution.context import action_name
from bloomops.web import services
from bloomops.web.periods import days_asked
from bloomops.web.spreadsheets import csv_cell, csv_response
from bloomops.web.templatetags.approvals_ui import DECIDED, asked_for
from bloomops.web.templatetags.bloomops_ui import person
from bloomops.web.views.common import EXPORT_LIMIT, forbidden, is_operator, known_filter
from bloomops.web.views.holds import usernames_meant

SHOWN = 500
# A worker's housekeeping: hundreds an hour from each service, deciding nothing. Left out
# unless asked for (or chosen as the action), so a person's decisions are not buried.
HOUSEKEEPING = ("heartbeat_worker", "renew_queue_lease")
# A period a person leaves out: the week up to today, their own days.
DEFAULT_DAYS = 7


def _search(request: HttpRequest, limit: int) -> dict:
    """The search the form asks for: its period whole days (from the first day's midnight to
    the end of the last) in the reader's time zone, as the holds' "today" is."""
    get = request.GET
    days = days_asked(request, DEFAULT_DAYS)
    problems = list(days.problems)
    by = get.get("by", "").strip()[:150]
    notes: list[str] = []
    action = known_filter(notes, "action", get.get("action", "").strip(),
                          [*ACTIONS, *DECIDED_CHOICES], "every action is listed") or ""
    # "Approved" and "Rejected" are one action, decide_approval, which way as its record sealed
    action_key, _, decision = action.partition(":")
    queue = get.get("queue", "").strip()[:200]
    subject = get.get("subject", "").strip()[:64]
    # a subject as people name it too (its name, in any case): every one so called
    meant = [m["euid"] for m in selectors.subjects_labelled(subject)] if subject else []
    if len(meant) > 1:
        notes.append(f"{len(meant)} subjects are called {subject!r}: the actions on each"
                        f" are listed ({', '.join(meant[:5])}{', …' if len(meant) > 5 else ''}).")
    housekeeping = get.get("housekeeping") == "1"
    found = selectors.activity(
        people=usernames_meant(by or None), action_key=action_key or None,
        approval_status=decision or None,
        queue_key=queue or None, subject_euids=meant or ([subject.upper()] if subject else None),
        leave_out=() if housekeeping or action else HOUSEKEEPING,
        since=days.since, until=days.until, limit=limit)
    return {"found": found, "by": by, "action": action, "subject": subject,
            "housekeeping": housekeeping, "queue": queue, "first": days.first,
            "last": days.last, "zone": days.zone, "problems": problems, "notes": notes}


# QA asked for "every approval Robin rejected": the Action filter's choices beside the actions
DECIDED_CHOICES = {f"decide_approval:{status}": words for status, words in DECIDED.items()}


def _rows(found: list[dict]) -> list[dict]:
    """Each record with its person as the inspector's history names them (the name the
    record kept), with the username beside it, and what was done in words; a decision on
    an approval with the person who asked for it and what they asked (the decider's name
    alone read as if they had released the hold of their own accord)."""
    rows = []
    for r in services.named_actions(found):
        what, key, gated = r["what"] or r["action_key"], r["action_key"], r["gated_action_key"]
        if key == "decide_approval" and r.get("approval_status") in DECIDED:
            what = DECIDED[r["approval_status"]]  # which way it went, as the record sealed
        asked = person(r["asked_by"], {r["asked_by"]: r["asker"]})
        if gated and (asked or key in ("request_approval", "cancel_approval")):
            what += asked_for(gated)
        if asked:
            what += f", asked by {asked}"
        if key == "place_execution_hold" and r.get("hold_code"):
            what += f" ({r['hold_code']})"
        if key == "complete_queue_execution":
            what += f", sent to {r['next_queue_key']}" if r.get("next_queue_key") else \
                ", finished" if r.get("state_after") == "COMPLETED" else ""
        rows.append({**r, "who": person(r["executed_by"], {r["executed_by"]: r["who"]}),
                     "what": what, "asked_by": asked})
    return rows


@require_GET
def activity(request: HttpRequest) -> HttpResponse:
    if not is_operator(request):
        return forbidden(request, "Only operators and admins read the lab's activity.")
    search = _search(request, SHOWN + 1)
    return render(request, "web/activity.html", {
        **search, "found": _rows(search["found"][:SHOWN]), "more": len(search["found"]) > SHOWN,
        "actions": sorted([*((action_name(k) or k, k) for k in ACTIONS),
                           *((words, key) for key, words in DECIDED_CHOICES.items())]),
        "export_query": request.GET.urlencode(), "export_limit": EXPORT_LIMIT})


# The columns of an activity export and the field of a row each is.
EXPORT_COLUMNS = (("executed_at_utc", "executed_at"), ("who", "who"), ("action", "what"),
                  ("action_key", "action_key"), ("subject_euid", "subject_euid"),
                  ("queue", "queue_key"), ("target_euid", "target_euid"),
                  ("state_after", "state_after"), ("reason", "reason"),
                  ("action_record_euid", "euid"), ("asked_by", "asked_by"),
                  ("worker_euid", "worker_euid"), ("worker", "worker_name"))


@require_GET
def activity_export(request: HttpRequest) -> HttpResponse:
    """The search as a spreadsheet, every record up to EXPORT_LIMIT, each with the EUID of
    the sealed record an evidence bundle holds."""
    if not is_operator(request):
        return forbidden(request, "Only operators and admins read the lab's activity.")
    search = _search(request, EXPORT_LIMIT + 1)
    response = csv_response(f"activity-{search['first']}-{search['last']}.csv")
    out = csv.writer(response)
    out.writerow([column for column, _ in EXPORT_COLUMNS])
    for r in _rows(search["found"][:EXPORT_LIMIT]):
        out.writerow([csv_cell(r[field], instant=column.endswith("_utc"))
                      for column, field in EXPORT_COLUMNS])
    if len(search["found"]) > EXPORT_LIMIT:
        out.writerow([csv_cell(f"# only the newest {EXPORT_LIMIT} records: narrow the search"
                               " to export the rest")])
    return response
