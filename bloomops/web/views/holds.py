"""Hold search (RULES.md#holds): every hold, active or ended, by code, by who placed it and
since when, with who ended it and why. What QA answers an auditor with ("every hold for
CONTAMINATION last month", "every hold I placed last week"). Reads only."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from bloomops.accounts.signatures import hold_people
from bloomops.execution import clock, selectors
from bloomops.execution.actions.subjects import hold_codes
from bloomops.web.views.common import reader

# How far back a search reaches, by its choice on the form ("today": since midnight where
# the reader is, see _midnight).
SINCE = {"today": None, "1d": timedelta(days=1), "7d": timedelta(days=7),
         "30d": timedelta(days=30), "365d": timedelta(days=365), "all": None}
SHOWN = 500


def _people(text: str | None) -> list[str] | None:
    """The usernames a "placed by" text means: itself, and the people whose name has every
    word of it ("Quinn", "quinn okafor" find qa): holds record usernames, people read names."""
    if not text:
        return None
    words = text.split()
    named = get_user_model().objects.all()
    for word in words:
        named = named.filter(Q(first_name__icontains=word) | Q(last_name__icontains=word))
    return [text, *named.values_list("username", flat=True)]


def _midnight(now: datetime, zone_name: str) -> tuple[datetime, str]:
    """The last midnight in the reader's time zone (the IANA name their browser gives,
    static/js/bloomops.js), and the zone's name; UTC when none or no such zone is named.
    "Today" is the reader's day: a QA lead in Honolulu and one in Berlin mean different
    instants."""
    name = zone_name if zone_name in available_timezones() else "UTC"
    local = now.astimezone(ZoneInfo(name))
    return local.replace(hour=0, minute=0, second=0, microsecond=0), name


@require_GET
@reader
def hold_search(request: HttpRequest) -> HttpResponse:
    code = request.GET.get("code", "").strip()[:100] or None
    placed_by = request.GET.get("by", "").strip()[:150] or None
    since_key = request.GET.get("since", "30d")
    if since_key not in SINCE:
        since_key = "30d"
    ended = request.GET.get("status", "any") != "active"
    span, now = SINCE[since_key], clock.now()
    since, zone = (_midnight(now, request.GET.get("tz", "")[:64]) if since_key == "today"
                   else (now - span if span else None, None))
    found = selectors.holds(ended=ended, code=code, placed_by=_people(placed_by),
                            since=since, limit=SHOWN + 1)
    return render(request, "web/holds.html", {
        "found": found[:SHOWN], "more": len(found) > SHOWN,
        "names": hold_people(found[:SHOWN]),
        "codes": sorted(set(hold_codes()) | ({code} if code else set())),
        "code": code or "", "by": placed_by or "", "since": since_key, "ended": ended,
        "sinces": list(SINCE), "zone": zone,
        # the reader's date, written here: the template's date filter would show it in UTC
        "day": since.strftime("%Y-%m-%d") if zone and since else None,
    })
