"""Hold search (RULES.md#holds): every hold, active or ended, by code, by who placed it and
since when, with who ended it and why. What QA answers an auditor with ("every hold for
CONTAMINATION last month", "every hold I placed last week"). Reads only."""

from __future__ import annotations

import csv
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from bloomops.accounts.signatures import hold_people
from bloomops.execution import clock, selectors
from bloomops.execution.actions.subjects import hold_codes
from bloomops.execution.binding import FAILURE_HOLD_CODE
from bloomops.web.periods import local_midnight, reader_zone
from bloomops.web.spreadsheets import csv_cell, csv_response
from bloomops.web.templatetags.bloomops_ui import person
from bloomops.web.views.common import EXPORT_LIMIT, known_filter, reader

# How far back a search reaches, by its choice on the form ("today": since midnight where
# the reader is, see local_midnight).
SINCE = {"today": None, "1d": timedelta(days=1), "7d": timedelta(days=7),
         "30d": timedelta(days=30), "365d": timedelta(days=365), "all": None}
SHOWN = 500


def usernames_meant(text: str | None) -> list[str] | None:
    """The usernames a "by" text means: itself, and the people whose name has every word of
    it ("Quinn", "quinn okafor" find qa): records keep usernames, people read names."""
    if not text:
        return None
    words = text.split()
    named = get_user_model().objects.all()
    for word in words:
        named = named.filter(Q(first_name__icontains=word) | Q(last_name__icontains=word))
    return [text, *named.values_list("username", flat=True)]


def _search(request: HttpRequest, limit: int) -> dict:
    """The search the form's fields ask for, with what it found (up to ``limit``)."""
    code = request.GET.get("code", "").strip()[:100] or None
    placed_by = request.GET.get("by", "").strip()[:150] or None
    notes: list[str] = []
    since_key = known_filter(notes, "period", request.GET.get("since", "").strip(), SINCE,
                             "the last 30 days are searched") or "30d"
    ended = request.GET.get("status", "any") != "active"
    span, now = SINCE[since_key], clock.now()
    since, zone = (local_midnight(now, reader_zone(request)) if since_key == "today"
                   else (now - span if span else None, None))
    found = selectors.holds(ended=ended, code=code, placed_by=usernames_meant(placed_by),
                            since=since, limit=limit)
    return {"found": found, "code": code, "by": placed_by, "since_key": since_key,
            "ended": ended, "since": since, "zone": zone, "notes": notes}


@require_GET
@reader
def hold_search(request: HttpRequest) -> HttpResponse:
    search = _search(request, SHOWN + 1)
    found, code, since, zone = (search["found"], search["code"], search["since"],
                                search["zone"])
    return render(request, "web/holds.html", {
        "found": found[:SHOWN], "more": len(found) > SHOWN,
        "names": hold_people(found[:SHOWN]),
        "codes": sorted({*hold_codes(), FAILURE_HOLD_CODE} | ({code} if code else set())),
        "code": code or "", "by": search["by"] or "", "since": search["since_key"],
        "ended": search["ended"], "sinces": list(SINCE), "zone": zone, "notes": search["notes"],
        # the reader's date, written here: the template's date filter would show it in UTC
        "day": since.strftime("%Y-%m-%d") if zone and since else None,
        "export_query": request.GET.urlencode(), "export_limit": EXPORT_LIMIT,
    })


# The columns of a holds export, each a field of the hold as stored (times in UTC).
EXPORT_COLUMNS = (
    ("hold_euid", None), ("subject_euid", None), ("subject_name", None),
    ("subject_state_now", None), ("queue", "queue_lookup_key"), ("hold_code", "hold_code"),
    ("status", "status"), ("placed_at_utc", "placed_at"),
    ("placed_by", "placed_by_lookup_euid"), ("reason", "reason"),
    ("ended_at_utc", "released_at"), ("ended_by", "released_by_lookup_euid"),
    ("end_reason", "release_reason"),
    # released on a second person's approval: ended_by approved it, end_reason is the words
    # of whoever asked (as the screen says it, _hold_ended_why.html)
    ("end_asked_by", None), ("end_approval_euid", None))


@require_GET
@reader
def hold_export(request: HttpRequest) -> HttpResponse:
    """The search as a spreadsheet, every match up to EXPORT_LIMIT, people by their names
    and usernames as the screen shows them: what QA hands an auditor."""
    found = _search(request, EXPORT_LIMIT + 1)["found"]
    names = hold_people(found[:EXPORT_LIMIT])
    response = csv_response(f"holds-{clock.now():%Y%m%d-%H%M}.csv")
    out = csv.writer(response)
    out.writerow([name for name, _ in EXPORT_COLUMNS])
    for h in found[:EXPORT_LIMIT]:
        asked = h["props"].get("released_on_approval")
        asked = asked if isinstance(asked, dict) else {}
        row = {"hold_euid": h["euid"], "subject_euid": h["subject_euid"],
               "subject_name": h["subject_name"], "subject_state_now": h["subject_state"],
               "end_asked_by": person(asked["requested_by"], names)
               if isinstance(asked.get("requested_by"), str) else "",
               "end_approval_euid": asked.get("approval_euid") or ""}
        for name, field in EXPORT_COLUMNS:
            if field is not None:
                value = h["props"].get(field)
                row[name] = (person(value, names) if field.endswith("by_lookup_euid")
                             and isinstance(value, str) else value)
        out.writerow([csv_cell(row[name], instant=name.endswith("_utc"))
                      for name, _ in EXPORT_COLUMNS])
    if len(found) > EXPORT_LIMIT:
        out.writerow([csv_cell(f"# only the newest {EXPORT_LIMIT} holds: narrow the search"
                               " to export the rest")])
    return response
