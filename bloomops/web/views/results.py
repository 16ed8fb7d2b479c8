"""Results (every role): what one queue's step recorded over a period of days
(RULES.md#results), each completed attempt with the value of each result field the queue
declares, every field tallied over the whole period, and the same as a spreadsheet. What QA
answers "every RIN of last week" and "how many failed QC in October" with. Reads only."""

from __future__ import annotations

import csv
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from bloomops.execution import selectors
from bloomops.execution.results import (
    DEFAULT_DAYS,
    SAID_KINDS,
    declared_results,
    result_row,
    said_keys,
    tallied,
    value_text,
)
from bloomops.text import readable_line
from bloomops.web import services
from bloomops.web.periods import days_asked
from bloomops.web.spreadsheets import csv_cell, csv_response
from bloomops.web.views.common import EXPORT_LIMIT, reader

SHOWN = 500


def _asked(request: HttpRequest) -> dict[str, Any]:
    """The queue and the days the form asks for: the queue named (none named: the first, in
    dispatch order, that declares result fields), its declared fields, each problem said."""
    days = days_asked(request, DEFAULT_DAYS)
    queues = services.queues(request)
    asked = request.GET.get("queue", "").strip()[:200]
    by_key = {q["queue_key"]: q for q in queues}
    declaring = [q for q in queues if declared_results(q["config"])]
    problems = list(days.problems)
    queue = by_key.get(asked) if asked else (declaring[0] if declaring else None)
    if asked and queue is None:
        problems.append(f"No queue is called {readable_line(asked)!r}: choose one.")
    fields = declared_results(queue["config"]) if queue else []
    return {"days": days, "queues": queues, "declaring": {q["queue_key"] for q in declaring},
            "queue": queue, "fields": fields, "problems": problems,
            "said": _said(request, fields, problems)}


def _said(request: HttpRequest, fields: list[dict[str, Any]],
          problems: list[str]) -> tuple[str, str] | None:
    """The value a tally's count leads to (``field`` and ``value``: the attempts whose QC is
    fail): a pass/fail or choice field the queue declares, any value (another writer's too)."""
    key = request.GET.get("field", "").strip()[:40]
    value = request.GET.get("value", "")[:200]
    if not key and not value.strip():
        return None
    field = next((f for f in fields if f["key"] == key), None)
    if not key:
        problems.append("A value was given without the field it is of: every attempt is"
                        " listed.")
    elif field is None or field["kind"] not in SAID_KINDS:
        problems.append(f"This queue declares no pass/fail or choice called"
                        f" {readable_line(key)!r}: every attempt is listed.")
    elif not value.strip():
        problems.append(f"No value of {field['label']} was given: every attempt is listed.")
    else:
        return key, value
    return None


def _found(asked: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    queue, days = asked["queue"], asked["days"]
    if queue is None:
        return []
    return selectors.results_recorded(queue["queue_key"], since=days.since, until=days.until,
                                      limit=limit, said=asked["said"])


@require_GET
@reader
def results(request: HttpRequest) -> HttpResponse:
    asked = _asked(request)
    queue, days, fields = asked["queue"], asked["days"], asked["fields"]
    found = _found(asked, SHOWN + 1)
    tally, attempts, counted = [], 0, 0
    if queue is not None:
        rows = selectors.results_tally(
            queue["queue_key"], [f["key"] for f in fields], since=days.since, until=days.until,
            said_keys=said_keys(fields))
        counted = attempts = next((int(r["given"]) for r in rows if r["key"] is None), 0)
        if asked["said"]:  # those the count led to: how many of them there are
            attempts = next((int(r["given"]) for r in rows
                             if (r["key"], r["said"]) == asked["said"]), 0)
        tally = tallied(fields, rows, counted)
    shown = []
    for r in found[:SHOWN]:
        values, others = result_row(fields, r["result"])
        # the unit is the column's (its heading; a phone's card says it beside each value)
        shown.append({**r, "values": [(f, "" if v is None else readable_line(value_text(v)))
                                      for f, v in zip(fields, values, strict=True)],
                      "others": [(readable_line(k), readable_line(v)) for k, v in others]})
    said = asked["said"]
    return render(request, "web/results.html", {
        **asked, "found": shown, "attempts": attempts, "counted": counted, "tally": tally,
        "said_label": next((f["label"] for f in fields if said and f["key"] == said[0]), ""),
        "export_query": _query(asked, request, with_said=True), "export_limit": EXPORT_LIMIT,
        "shown_limit": SHOWN, "period_query": _query(asked, request)})


def _query(asked: dict[str, Any], request: HttpRequest, *, with_said: bool = False) -> str:
    """The page's queue and days as read (a date that was none: the one read instead) as a
    query: where a count leads (``with_said`` false) and what the download exports."""
    query = QueryDict(mutable=True)
    query.update({"queue": asked["queue"]["queue_key"] if asked["queue"] else "",
                  "from": str(asked["days"].first), "to": str(asked["days"].last),
                  "tz": asked["days"].zone if request.GET.get("tz") else ""})
    if with_said and asked["said"]:
        query.update({"field": asked["said"][0], "value": asked["said"][1]})
    return query.urlencode()


def column_name(field: dict[str, Any]) -> str:
    """A declared field's column in a download: its key, which a program reads it by, and
    its unit, which travels with the file: "concentration [ng/µL]"."""
    return f"{field['key']} [{field['unit']}]" if field.get("unit") else field["key"]


# The columns of a results export before the queue's own fields, and after them.
LEADING_COLUMNS = ("finished_at_utc", "subject_euid", "subject", "attempt", "worker_euid",
                   "worker")
TRAILING_COLUMNS = ("other", "execution_record_euid")


@require_GET
@reader
def results_export(request: HttpRequest) -> HttpResponse:
    """The period's completed attempts of the queue as a spreadsheet, up to EXPORT_LIMIT:
    a column per declared field by its key (with its unit: "concentration [ng/µL]"), its
    value as recorded (a number stays a number a spreadsheet can add up), then any other keys
    as words. A query the page would say a problem of is refused (400), not exported as
    read."""
    asked = _asked(request)
    queue, days, fields = asked["queue"], asked["days"], asked["fields"]
    if asked["problems"] or queue is None:
        # a download is what was asked for or nothing: an auditor's file of the wrong days
        # or of every attempt would be taken for the one asked for
        return HttpResponse("\n".join(asked["problems"] or ["Choose a queue."]) + "\n",
                            status=400, content_type="text/plain; charset=utf-8")
    response = csv_response(f"results-{queue['queue_key']}-{days.first}-{days.last}.csv")
    out = csv.writer(response)
    out.writerow([*LEADING_COLUMNS, *(column_name(f) for f in fields), *TRAILING_COLUMNS])
    found = _found(asked, EXPORT_LIMIT + 1)
    for r in found[:EXPORT_LIMIT]:
        values, others = result_row(fields, r["result"])
        out.writerow([csv_cell(r["finished_at"], instant=True), csv_cell(r["subject_euid"]),
                      csv_cell(r["subject_name"]), csv_cell(r["attempt"]),
                      csv_cell(r["worker_euid"]), csv_cell(r["worker_name"]),
                      *(csv_cell(None if v is None else value_text(v)) for v in values),
                      csv_cell("; ".join(f"{k}: {v}" for k, v in others)),
                      csv_cell(r["record_euid"])])
    if len(found) > EXPORT_LIMIT:
        out.writerow([csv_cell(f"# only the newest {EXPORT_LIMIT} attempts: narrow the days"
                               " to export the rest")])
    return response
