"""The queue dashboard and a queue's page: items in order, hidden items with reasons, CSV
export, claim next."""

from __future__ import annotations

import csv
import math

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.roles import roles_of
from bloomops.accounts.tokens import expiring
from bloomops.execution import clock, people, policy, selectors
from bloomops.execution.executor import ActionResult
from bloomops.execution.sql import SCOPE_FIELDS
from bloomops.execution.states import ALL_STATES, WorkerType
from bloomops.execution.stats import snapshot
from bloomops.execution.stats.history import RANGES, history
from bloomops.web import services
from bloomops.web.charts import dashboard_charts, history_url, recorded_since
from bloomops.web.spreadsheets import csv_cell, csv_response
from bloomops.web.tables import PER_PAGE, HiddenItemsTable, QueueItemsTable, sql_page_data
from bloomops.web.views.bench import bench_answer, work_view_url
from bloomops.web.views.common import (
    EXPORT_LIMIT,
    FILTERS,
    as_human,
    guards,
    is_human,
    known_filter,
    no_queue,
    page_number,
    reader,
)


@require_GET
@reader
def dashboard(request: HttpRequest) -> HttpResponse:
    roles = roles_of(request.user)
    admin = "admin" in roles
    if request.htmx and request.GET.get("part") == "history":
        # the charts' own poll: the samples and the queues' names, not the table's figures
        every = selectors.queues()
        names = {q["queue_key"]: selectors.display_name(q["queue_key"], q["config"])
                 for q in every if services.shown_to(q["config"], admin=admin)}
        return render(request, "web/_dashboard_history.html",
                      _history(request, names, unseen=len(every) - len(names)))
    show_trend = bool(roles & {"operator", "admin"})
    # The recorder's snapshot when fresh (one small row), else live (RULES.md#statistics).
    stats = snapshot.current(with_trend=show_trend)
    rows = services.dashboard_rows(stats.overview, stats.trend if show_trend else {},
                                   admin=admin)
    context = {
        "summaries": stats.overview.summaries,
        "rows": rows,
        "show_trend": show_trend,
        "refresh_seconds": settings.BLOOMOPS_DASHBOARD_REFRESH_SECONDS,
        "now": stats.as_of,
        "stats_source": stats.source,
        "recorder_silent": stats.recorder_silent,
        "recorded_at": stats.recorded_at,
    }
    if request.htmx:
        return render(request, "web/_dashboard_panel.html", context)
    names = {r["q"].queue_key: r["q"].display_name for r in rows}
    unseen = len(stats.overview.summaries) - len(rows)
    # an admin is told before a service's token runs out and its calls answer 401
    # (RULES.md#api-tokens); a whole page only, never its refreshes
    context["expiring_tokens"] = expiring(timezone.now()) if "admin" in roles else []
    # work a result never came back for is in no queue's figures (RULES.md#reconciliation)
    context["outside"] = stats.overview.outside
    if stats.overview.outside and stats.overview.outside.queue_key:
        key = stats.overview.outside.queue_key
        context["outside_from"] = names.get(key, key)
    return render(request, "web/dashboard.html",
                  {**context, **_history(request, names, unseen=unseen)})


def _history(request: HttpRequest, names: dict[str, str], *, unseen: int = 0) -> dict:
    """The history charts of the range asked for (RULES.md#statistics); ``names``: the
    queues in the dashboard's order, key -> display name; ``unseen``: how many queues the
    reader is not shown, which the lab's chart counts all the same (said beside it)."""
    range_notes: list[str] = []
    chart_range = known_filter(range_notes, "range", request.GET.get("range", "").strip(),
                               RANGES, "the last 1h is shown") or "1h"
    samples = history(chart_range, tenant=snapshot.tenant_key(), now=clock.now())
    return {"chart_range": chart_range, "ranges": list(RANGES), "range_notes": range_notes,
            "history_empty": samples.empty, "charts": dashboard_charts(samples, names),
            "unseen_queues": unseen,
            "recorded_since": recorded_since(samples),
            "history_refresh_seconds": settings.BLOOMOPS_HISTORY_REFRESH_SECONDS}


def _queue_filters(request: HttpRequest, choices: dict[str, list[str]],
                   notes: list[str] | None = None) -> tuple[dict[str, str], str | None]:
    """The list's filter, the page's and its export's alike: a site, platform or assay none
    of the queue's subjects has (a stale bookmark read "0 visible items" under a menu saying
    "any") or a state there is not is left out, and said in ``notes``."""
    notes = [] if notes is None else notes
    filters = {f: known_filter(notes, f, request.GET.get(f, "").strip(), choices.get(f, ()),
                               f"no subject of this queue has it; every {f} is shown")
               for f in FILTERS}
    state = known_filter(notes, "state", request.GET.get("state", "").strip(), ALL_STATES,
                         "the visible items are listed")
    return {k: v for k, v in filters.items() if v}, state


def _mark_out_of_scope(request: HttpRequest, config: dict, rows: list) -> list[str]:
    """Rows the signed-in person would be refused by their own scopes (RULES.md#claims) say
    so in place of a Claim button: a person at one site saw every site's rows claimable.
    Returns why their profile does not cover the queue at all (a capability it asks for,
    disabled): then no row offers a Claim, which would only be refused."""
    profile = people.current_profile(request.user.get_username())
    whole = [message for _, message in policy.eligibility_problems(
        {**profile, "worker_type": WorkerType.HUMAN_SESSION}, config)]
    for row in rows:
        problem = policy.worker_scope_problem(
            profile, {f: getattr(row, f) for f in SCOPE_FIELDS})
        row.out_of_scope = ("see above" if whole else
                            f"{problem[0]} {problem[1] or 'not given'}" if problem else "")
    return whole


def _mark_after_head(queue: dict, rows: list) -> None:
    """On a queue that runs strictly in order, every row but the head's says so in place of
    a Claim button, naming the head (a Claim there was only refused,
    RULES.md#queue-configuration)."""
    if not queue["config"].get("strict_order"):
        return
    head = selectors.queue_head(queue["queue_key"])
    for row in rows:
        if head is None or row.euid != head.euid:
            row.after_head = (f"{head.name or head.euid} first" if head else "not now")


@require_GET
@reader
def queue_detail(request: HttpRequest, queue_key: str) -> HttpResponse:
    queue = selectors.queue_config(queue_key)
    if queue is None:
        return no_queue(request, queue_key)
    choices, notes = selectors.queue_filter_values(queue_key), []
    filters, state = _queue_filters(request, choices, notes)
    # the queue's settings may turn off its list of the items it does not show
    diagnostics = policy.setting_on(queue["config"], "diagnostics_enabled")
    asked_hidden, state = state, state if diagnostics else None
    page = page_number(request)
    fetch = (
        (lambda offset: selectors.queue_hidden_items(
            queue_key, state=state, filters=filters, limit=PER_PAGE, offset=offset))
        if state else
        (lambda offset: selectors.queue_items(
            queue_key, filters=filters, limit=PER_PAGE, offset=offset))
    )
    rows, total = fetch((page - 1) * PER_PAGE)
    last = max(1, math.ceil(total / PER_PAGE))
    if page > last:
        page = last
        rows, total = fetch((page - 1) * PER_PAGE)
    data = sql_page_data(rows, total, (page - 1) * PER_PAGE)
    not_yours: list[str] = []
    if state:
        table = HiddenItemsTable(data)
    else:
        exclude = () if is_human(request) else ("claim",)
        if is_human(request):
            not_yours = _mark_out_of_scope(request, queue["config"], rows)
            _mark_after_head(queue, rows)
        table = QueueItemsTable(data, exclude=exclude)
    table.paginate(page=page, per_page=PER_PAGE)
    # a row's Claim comes back here when refused (its form's "next"): without the request
    # the column's template had none, and a race lost landed on My work
    table.request = request
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "web/queue_detail.html", {
        "queue": queue,
        "config": queue["config"],
        "table": table,
        "total": total,
        "filters": filters,
        "state": state or "",
        "states": ALL_STATES,
        "choices": choices,
        "notes": notes,
        "export_query": query.urlencode(),
        "history_url": history_url(queue_key),
        # the dashboard's "online of rostered", named: a supervisor asks who
        "coverage": selectors.queue_coverage(queue["config"])[0],
        "not_yours": not_yours,
        "diagnostics": diagnostics,
        "asked_hidden": asked_hidden,
    })


@require_GET
@reader
def queue_export(request: HttpRequest, queue_key: str) -> HttpResponse:
    queue = selectors.queue_config(queue_key)
    if queue is None:
        return no_queue(request, queue_key)
    filters, state = _queue_filters(request, selectors.queue_filter_values(queue_key))
    if state and not policy.setting_on(queue["config"], "diagnostics_enabled"):
        return HttpResponse(f"Queue {queue_key}'s settings turn off its list of the items it"
                            " does not show.\n", status=403, content_type="text/plain")
    response = csv_response(f"{queue_key}.csv")
    out = csv.writer(response)
    head = ["euid", "name", "state", "priority_class", "priority", "ready_at", "due_at",
            "attempts", "site", "platform", "assay"]
    if state:
        items, total = selectors.queue_hidden_items(queue_key, state=state, filters=filters,
                                                    limit=EXPORT_LIMIT)
        out.writerow(head + ["not_visible_because"])
    else:
        items, total = selectors.queue_items(queue_key, filters=filters, limit=EXPORT_LIMIT)
        out.writerow(["position"] + head)
    for it in items:
        row = [it.euid, it.name, it.state, it.priority_class, it.execution.get("priority"),
               it.ready_at, it.due_at, it.attempt_count, it.site,
               it.platform, it.assay]
        row = [*row, " ".join(r.message for r in it.reasons)] if state else [it.position, *row]
        out.writerow([csv_cell(v) for v in row])
    if total > len(items):
        # said where a spreadsheet's reader sees it: a cut list read as the whole was wrong
        out.writerow([csv_cell(f"# only the first {len(items)} of {total} items: narrow the"
                               " filter to export the rest")])
    return response


@require_POST
def claim_next(request: HttpRequest, queue_key: str) -> HttpResponse:
    def run() -> ActionResult:
        g = guards(request)
        return as_human(request, "claim_queue_item", queue_key=queue_key,
                         idempotency_key=g["idempotency_key"])

    # Straight to the claimed item's work view: what it is, its step, complete or fail.
    return bench_answer(request, run,
                        lambda r: f"Claimed {services.item_called(r)} from"
                                  f" {services.queue_said(queue_key)}.",
                        reverse("my_work"), work_view_url)
