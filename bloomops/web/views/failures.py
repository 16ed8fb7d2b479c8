"""The failures view: what is retrying and what failed for good, grouped by queue and error
class, and bulk requeue, hold or cancel on a selection or on everything a filter matches
(the count shown and confirmed before anything is written); and the failed attempts of a
recent range, where the dashboard's failure bars lead."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from bloomops.execution import clock, selectors
from bloomops.execution.actions.subjects import DEFAULT_HOLD_CODE, hold_codes
from bloomops.execution.approvals import dead_letter_gate
from bloomops.execution.envelope import normalize_ts, parse_ts_or_none
from bloomops.execution.selectors.failures import FAILED, KINDS, group_failures
from bloomops.execution.stats.history import RANGES
from bloomops.web import bulk, services
from bloomops.web.bulk import (
    BULK_ACTIONS,
    UNREADABLE_PICK,
    Pick,
    picks_from,
    too_many,
)
from bloomops.web.offers import requests_waiting, requeues_asked
from bloomops.web.periods import days_spanning
from bloomops.web.views.common import (
    answer_bulk,
    forbidden,
    is_operator,
    known_filter,
    reader,
    reason_of,
)

VERBS = ("requeue", "hold", "cancel", "ask_requeue")
CONFIRM_LIST = 50
ATTEMPTS_SHOWN = 200


def _filters(data: QueryDict, queues: list[dict],
             notes: list[str] | None = None) -> dict[str, str | None]:
    """The list's filter, read the same way by the page and by its bulk form (which acts on
    what the page listed): a queue or kind it does not know is left out, and said."""
    notes = [] if notes is None else notes
    return {"queue_key": known_filter(notes, "queue", data.get("queue", "").strip(),
                                      (q["queue_key"] for q in queues), "every queue is shown"),
            "error_class": data.get("class", "").strip() or None,
            "kind": known_filter(notes, "kind", data.get("kind", "").strip(), KINDS,
                                 "every kind is shown")}


def _query(filters: dict[str, str | None]) -> str:
    q = QueryDict(mutable=True)
    for name, key in (("queue", "queue_key"), ("class", "error_class"), ("kind", "kind")):
        if filters[key]:
            q[name] = filters[key]
    return q.urlencode()


def _counted(data: QueryDict, now: datetime) -> tuple[datetime, datetime] | None:
    """The window a failure bar counted (``since``/``until``, in the form the charts write,
    ``envelope.ts``), when it is one: since before until, until not in the future; None
    for anything else (then the whole range is listed)."""
    since, until = (_instant(data.get(name)) for name in ("since", "until"))
    if since is None or until is None or not since < until <= now:
        return None
    return since, until


def _instant(text: str | None) -> datetime | None:
    """An instant of the engine's years (normalize_ts): the year 1 has no day in a zone west
    of UTC, and the days a range falls on were a 500 (periods.days_spanning)."""
    try:
        return parse_ts_or_none(normalize_ts(text)) if text else None
    except ValueError:
        return None


def _attempts(request: HttpRequest, queue_key: str | None,
              queues: list[dict], outcome: str = "failed") -> dict[str, object]:
    """The failed (completed) attempts over the chosen range (the dashboard's ranges; 24 h
    unless another is asked for), or those a failure (completion) bar counted: what the
    charts' bars count, and where each subject is now."""
    notes: list[str] = []
    chart_range = known_filter(notes, "range", request.GET.get("range", "").strip(), RANGES,
                               "the last 24h is shown") or "24h"
    until = clock.now()
    counted = _counted(request.GET, until)
    since, until = counted or (until - timedelta(seconds=RANGES[chart_range][0]), until)
    keys = [q["queue_key"] for q in queues if queue_key in (None, q["queue_key"])]
    # one more than shown: whether there were more to show
    rows = selectors.finished_attempts(keys, outcome=outcome, since=since, until=until,
                                       limit=ATTEMPTS_SHOWN + 1)
    first, last = days_spanning(since, until, request)
    return {"attempts": rows[:ATTEMPTS_SHOWN], "attempts_range": chart_range, "notes": notes,
            "attempts_days": {"from": first, "to": last},
            "ranges": list(RANGES), "attempts_counted": counted,
            "attempts_capped": len(rows) > ATTEMPTS_SHOWN}


@require_GET
@reader
def failures(request: HttpRequest) -> HttpResponse:
    queues, notes = services.queues(request), []
    filters = _filters(request.GET, queues, notes)
    # the list: the newest that match the whole filter (filtered in SQL, before the limit);
    # the groups: every failing subject of the queue, counted in SQL
    items = selectors.failures(**filters)
    counts = selectors.failure_counts(queue_key=filters["queue_key"])
    gated = dead_letter_gate() and any(r["kind"] == FAILED for r in items)
    return render(request, "web/failures.html", {
        # a dead letter whose requeue is asked for already says so (asking again is refused)
        "requeue_asked": requeues_asked(requests_waiting()) if gated else set(),
        "groups": group_failures(items, counts=counts), "items": items, "filters": filters,
        "matching": sum(int(c["n"]) for c in counts
                        if filters["error_class"] in (None, c["error_class"])
                        and filters["kind"] in (None, c["kind"])),
        "filter_query": _query(filters), "queues": queues, "kinds": KINDS,
        # "all matching" is offered only where one action takes them (bulk.too_many)
        "bulk_max": bulk.BULK_MAX,
        "filtered": any(filters.values()),
        **(attempts := _attempts(request, filters["queue_key"], queues)),
        "notes": notes + attempts["notes"],
    })


@require_GET
@reader
def completions(request: HttpRequest) -> HttpResponse:
    """The completed attempts a completion bar counted (or of a range), each with where its
    subject is now: the charts' other half, as the failures page is for failure bars."""
    queues, notes = services.queues(request), []
    queue_key = known_filter(notes, "queue", request.GET.get("queue", "").strip(),
                             (q["queue_key"] for q in queues), "every queue is shown")
    attempts = _attempts(request, queue_key, queues, "completed")
    return render(request, "web/completions.html", {
        "queue_key": queue_key, **attempts, "notes": notes + attempts["notes"]})


@require_POST
def failures_bulk(request: HttpRequest) -> HttpResponse:
    """Step one renders the confirmation (how many, what happens to them, a reason); step
    two (``confirmed``) acts on exactly the subjects that were counted."""
    filters = _filters(request.POST, services.queues(request))
    back = reverse("failures") + ("?" + q if (q := _query(filters)) else "")
    # (every step carries the filter, so the person comes back to the list they acted on)
    if not is_operator(request):
        return forbidden(request, "Bulk actions on failures are for operators.")
    verb = request.POST.get("verb", "")
    if verb not in VERBS:
        messages.error(request, "Choose requeue, hold or cancel.")
        return redirect(back)
    listed = selectors.failures(**filters)
    if request.POST.get("scope") == "filter":
        picks = [Pick(r["subject_euid"], r["subject_state"], r["subject_revision"])
                 for r in listed]
    else:
        try:
            picks = picks_from(request.POST.getlist("pick"))
        except ValueError:
            messages.error(request, UNREADABLE_PICK)
            return redirect(back)
    if not picks:
        messages.error(request, "Nothing selected: tick items or act on the whole filter.")
        return redirect(back)
    if problem := too_many(picks):
        messages.error(request, f"Nothing done: {problem}")
        return redirect(back)
    reason, confirmed = reason_of(request), request.POST.get("confirmed") == "1"
    if not confirmed or not reason:
        names = {r["subject_euid"]: r["subject_name"] for r in listed}
        # said before the reason is typed: these will be refused, one by one, when run (the
        # gate's condition, an open dead letter, is what a "failed" row of the list is)
        gate = dead_letter_gate() if verb == "requeue" else None
        dead = {r["subject_euid"] for r in listed if r["kind"] == FAILED}
        gated = [p.euid for p in picks if gate and p.euid in dead]
        asked = requeues_asked(requests_waiting()) if gated else set()
        return render(request, "web/failures_confirm.html", {
            "gate": gate, "gated": gated, "asked": [e for e in gated if e in asked],
            # what the button runs: the gated ones would only be refused one by one
            "runnable": [p for p in picks if p.euid not in gated],
            # what may be asked for: asking again for one waiting would be refused
            "gated_picks": [p for p in picks if p.euid in gated and p.euid not in asked],
            "verb": verb, "words": BULK_ACTIONS[verb], "picks": picks, "filters": filters,
            "shown": [(p.euid, names.get(p.euid)) for p in picks[:CONFIRM_LIST]],
            "more": max(0, len(picks) - CONFIRM_LIST),
            "reason": reason, "hold_codes": hold_codes(),
            "hold_code": request.POST.get("hold_code", "") or DEFAULT_HOLD_CODE,
            "missing_reason": confirmed and not reason, "back": back,
        })
    return answer_bulk(request, verb, picks, reason=reason, back=back)
