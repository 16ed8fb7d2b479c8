"""Operator UI views: parse input, call one selector per panel or the executor, render.

Every POST goes through ``executor.execute`` (via ``services``). A refusal writes nothing and
comes back in plain words; FORBIDDEN comes back as a 403 page, whatever the page showed.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.roles import roles_of
from bloomops.execution import clock, selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionResult
from bloomops.execution.states import ALL_STATES, RetryClass
from bloomops.web import services
from bloomops.web.tables import PER_PAGE, HiddenItemsTable, QueueItemsTable, sql_page_data

FILTERS = ("site", "platform", "assay")
EXPORT_LIMIT = 10000


# ---------------------------------------------------------------- plumbing


def reader(view: Callable) -> Callable:
    """Any signed-in user with one of the four roles reads every screen; others get 403."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not roles_of(request.user):
            return forbidden(request, "Your account has no bloomops role.")
        return view(request, *args, **kwargs)

    return wrapped


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "web/forbidden.html", {"message": message}, status=403)


def _back(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()},
                                                  require_https=request.is_secure()):
        return target
    return default


def _guards(request: HttpRequest) -> dict:
    """The fields every action form carries: its idempotency key (minted when the page was
    rendered) and the state and revision the page showed."""
    raw = (request.POST.get("expected_revision") or "").strip()
    try:
        revision = int(raw) if raw else None
    except ValueError:
        raise ActionError("VALIDATION_ERROR", "The page sent an invalid revision.") from None
    return {
        "idempotency_key": request.POST.get("idempotency_key", "").strip(),
        "expected_state": request.POST.get("expected_state") or None,
        "expected_revision": revision,
    }


def _reason(request: HttpRequest) -> str:
    return request.POST.get("reason", "").strip()


def _answer(request: HttpRequest, run: Callable[[], ActionResult], success: Callable[
        [ActionResult], str], default: str) -> HttpResponse:
    """Run one action; redirect back with its outcome (or 403 when the role may not)."""
    try:
        result = run()
    except ActionError as err:
        if err.code == "FORBIDDEN":
            return forbidden(request, err.message)
        messages.error(request, err.message)
        return redirect(_back(request, default))
    if result.replayed:
        messages.info(request, "Already done: this form was submitted before, so nothing"
                               " was repeated.")
    else:
        messages.success(request, success(result))
    return redirect(_back(request, default))


def _as_human(request: HttpRequest, action_key: str, **fields) -> ActionResult:
    """An action of the signed-in user's human worker (registered on first use); the worker
    heartbeats whenever its user acts."""
    worker = services.ensure_my_worker(request.user)
    result = services.perform(request.user, action_key, worker_euid=worker, **fields)
    if not result.replayed:
        services.heartbeat(request.user, worker)
    return result


def _is_human(request: HttpRequest) -> bool:
    return bool(roles_of(request.user) & {"worker_human", "admin"})


def _page(request: HttpRequest) -> int:
    try:
        return max(1, int(request.GET.get("page", "1")))
    except ValueError:
        return 1


# ---------------------------------------------------------------- 1. queue dashboard


@require_GET
@reader
def dashboard(request: HttpRequest) -> HttpResponse:
    summaries = selectors.queue_summaries()
    workers = selectors.workers()
    roles = roles_of(request.user)
    trends = selectors.throughput_trend() if roles & {"operator", "admin"} else {}
    rows = services.dashboard_rows(summaries, workers, trends)
    context = {
        "summaries": summaries,
        "rows": rows,
        "show_trend": bool(roles & {"operator", "admin"}),
        "refresh_seconds": getattr(settings, "BLOOMOPS_DASHBOARD_REFRESH_SECONDS", 5),
        "now": clock.now(),
    }
    if request.htmx:
        return render(request, "web/_dashboard_panel.html", context)
    return render(request, "web/dashboard.html", context)


# ---------------------------------------------------------------- 2. queue detail


def _queue_filters(request: HttpRequest) -> tuple[dict[str, str], str | None]:
    filters = {f: request.GET.get(f, "").strip() for f in FILTERS}
    filters = {k: v for k, v in filters.items() if v}
    state = request.GET.get("state", "").strip() or None
    if state and state not in ALL_STATES:
        state = None
    return filters, state


@require_GET
@reader
def queue_detail(request: HttpRequest, queue_key: str) -> HttpResponse:
    queue = selectors.queue_config(queue_key)
    if queue is None:
        raise Http404("No such queue.")
    filters, state = _queue_filters(request)
    page = _page(request)
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
    if state:
        table = HiddenItemsTable(data)
    else:
        exclude = () if _is_human(request) else ("claim",)
        table = QueueItemsTable(data, exclude=exclude)
    table.paginate(page=page, per_page=PER_PAGE)
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
        "choices": selectors.queue_filter_values(queue_key),
        "export_query": query.urlencode(),
    })


def _csv_cell(value) -> str:
    text = "" if value is None else str(value)
    # Spreadsheet formula injection: a cell never starts with a formula character.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@require_GET
@reader
def queue_export(request: HttpRequest, queue_key: str) -> HttpResponse:
    if selectors.queue_config(queue_key) is None:
        raise Http404("No such queue.")
    filters, state = _queue_filters(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{queue_key}.csv"'
    out = csv.writer(response)
    head = ["euid", "name", "state", "priority_class", "priority", "ready_at", "due_at",
            "attempts", "site", "platform", "assay"]
    if state:
        items, _ = selectors.queue_hidden_items(queue_key, state=state, filters=filters,
                                                limit=EXPORT_LIMIT)
        out.writerow(head + ["not_visible_because"])
    else:
        items, _ = selectors.queue_items(queue_key, filters=filters, limit=EXPORT_LIMIT)
        out.writerow(["position"] + head)
    for it in items:
        row = [it.euid, it.name, it.state, it.priority_class, it.execution.get("priority"),
               it.ready_at.isoformat() if it.ready_at else "",
               it.due_at.isoformat() if it.due_at else "", it.attempt_count, it.site,
               it.platform, it.assay]
        row = [*row, " ".join(r.message for r in it.reasons)] if state else [it.position, *row]
        out.writerow([_csv_cell(v) for v in row])
    return response


@require_POST
def claim_next(request: HttpRequest, queue_key: str) -> HttpResponse:
    def run() -> ActionResult:
        g = _guards(request)
        return _as_human(request, "claim_queue_item", queue_key=queue_key,
                         idempotency_key=g["idempotency_key"])

    return _answer(request, run, lambda r: f"Claimed {r['subject_euid']} from {queue_key}.",
                   reverse("my_work"))


# ---------------------------------------------------------------- 3. scan to claim

SCAN_CLAIMED = "bloomops_scan_claimed"  # session key: the last claim, shown once after PRG
EUID_MAX_LENGTH = 64


def _scan_claimed(result: ActionResult) -> dict:
    """What a success banner needs from a claim (or its replay), JSON-serialisable for the
    session of the no-JavaScript redirect."""
    return {"subject_euid": result["subject_euid"], "queue_key": result["queue_key"],
            "lease_euid": result["lease_euid"], "expires_at": result["expires_at"],
            "replayed": result.replayed}


def _scan_banner(claimed: dict) -> dict:
    """The claimed subject's name and the queue's display name, read now: the result stores
    EUIDs and keys only."""
    diag = selectors.subject_diagnostics(claimed["subject_euid"])
    queue = selectors.queue_config(claimed["queue_key"])
    return {**claimed, "subject_name": diag.name if diag else "",
            "queue_name": (queue["config"].get("display_name") if queue else None)
            or claimed["queue_key"]}


def _scan_page(request: HttpRequest, context: dict, status: int = 200) -> HttpResponse:
    """The whole page, or (htmx) only the outcome plus a fresh form guard: the field itself
    is never swapped, so keystrokes of the next scan typed meanwhile are kept."""
    template = "web/_scan_outcome.html" if request.htmx else "web/scan.html"
    return render(request, template, context, status=status)


def _scan_refusal(request: HttpRequest, euid: str, err: ActionError,
                  diagnose: bool = False) -> HttpResponse:
    context = {"euid": euid, "error": err.message}
    if diagnose:
        context["diagnostics"] = selectors.subject_diagnostics(
            euid, worker_euid=services.my_worker_euid(request.user))
    return _scan_page(request, context, status=err.http_status)


@reader
def scan(request: HttpRequest) -> HttpResponse:
    """Scan to claim, a loop: every outcome comes back on /scan/ with an empty, focused field
    and a fresh idempotency key. Without JavaScript a success redirects back here (so a reload
    never re-posts); with htmx only the outcome is swapped in."""
    if request.method != "POST":
        claimed = request.session.pop(SCAN_CLAIMED, None)
        return _scan_page(request, {"claimed": _scan_banner(claimed) if claimed else None})
    euid = request.POST.get("euid", "").strip().upper()
    if not euid:
        return _scan_refusal(request, euid, ActionError("VALIDATION_ERROR",
                                                        "Scan or type an EUID."))
    if len(euid) > EUID_MAX_LENGTH or not euid.isprintable():
        shown = "".join(c for c in euid if c.isprintable())[:EUID_MAX_LENGTH]
        return _scan_refusal(request, shown, ActionError(
            "VALIDATION_ERROR", "That is not an EUID; scan the label again."))
    try:
        result = _as_human(request, "claim_queue_item", subject_euid=euid,
                           idempotency_key=_guards(request)["idempotency_key"])
    except ActionError as err:
        if err.code == "FORBIDDEN" and not request.htmx:
            return forbidden(request, err.message)
        return _scan_refusal(request, euid, err, diagnose=err.code != "FORBIDDEN")
    if request.htmx:
        return _scan_page(request, {"claimed": _scan_banner(_scan_claimed(result))})
    request.session[SCAN_CLAIMED] = _scan_claimed(result)
    return redirect("scan")


# ---------------------------------------------------------------- 4. my work


@require_GET
@reader
def my_work(request: HttpRequest) -> HttpResponse:
    worker_euid = services.my_worker_euid(request.user)
    leases = selectors.leases(status="ACTIVE", worker_euid=worker_euid) if worker_euid else []
    queues = selectors.queues()
    flows = {q["queue_key"]: q["config"].get("default_next_queue_key") for q in queues}
    for lease in leases:
        lease["default_next"] = flows.get(lease["props"].get("queue_lookup_key")) or ""
    return render(request, "web/my_work.html", {
        "worker_euid": worker_euid,
        "leases": leases,
        "queues": queues,
        "retry_classes": [c.value for c in RetryClass],
    })


def _lease_action(request: HttpRequest, lease_euid: str, action_key: str, payload: dict,
                  success: Callable[[ActionResult], str]) -> HttpResponse:
    def run() -> ActionResult:
        g = _guards(request)
        return _as_human(request, action_key, lease_euid=lease_euid, payload=payload, **g)

    return _answer(request, run, success, reverse("my_work"))


@require_POST
def renew_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    return _lease_action(request, lease_euid, "renew_queue_lease", {},
                         lambda r: f"Lease {lease_euid} renewed.")


@require_POST
def release_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    payload = {"reason": _reason(request)} if _reason(request) else {}
    return _lease_action(request, lease_euid, "release_queue_lease", payload,
                         lambda r: f"Released {r['subject_euid']} back to its queue.")


@require_POST
def complete_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    next_queue = request.POST.get("next_queue_key", "").strip()
    payload = {"next_queue_key": next_queue} if next_queue else {}
    return _lease_action(
        request, lease_euid, "complete_queue_execution", payload,
        lambda r: f"Completed {r['subject_euid']}"
        + (f"; it moved to {next_queue}." if next_queue else "; its flow is finished."))


@require_POST
def fail_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    payload = {"error_class": request.POST.get("error_class", "").strip() or None,
               "error_message": request.POST.get("error_message", "").strip() or None}
    return _lease_action(
        request, lease_euid, "fail_queue_execution", {k: v for k, v in payload.items() if v},
        lambda r: f"Recorded the failure of {r['subject_euid']}: now {r['state']}.")


# ---------------------------------------------------------------- 5. subject inspector


@require_GET
@reader
def subject_lookup(request: HttpRequest) -> HttpResponse:
    euid = request.GET.get("euid", "").strip().upper()
    if not euid:
        return redirect("dashboard")
    return redirect("subject", euid=euid)


@require_GET
@reader
def subject(request: HttpRequest, euid: str) -> HttpResponse:
    worker_euid = services.my_worker_euid(request.user) if _is_human(request) else None
    diag = selectors.subject_diagnostics(euid, worker_euid=worker_euid)
    if diag is None:
        return render(request, "web/subject_missing.html", {"euid": euid}, status=404)
    return render(request, "web/subject.html", {
        "d": diag,
        "history": selectors.subject_history(diag.uid),
        "lineage": selectors.lineage_of(diag.uid),
        "actions": selectors.action_history(diag.uid),
        "audit": selectors.audit_trail(diag.uid, limit=100),
    })


@require_POST
def claim_subject(request: HttpRequest, euid: str) -> HttpResponse:
    def run() -> ActionResult:
        return _as_human(request, "claim_queue_item", subject_euid=euid, **_guards(request))

    return _answer(request, run, lambda r: f"Claimed {euid} ({r['queue_key']}).",
                   reverse("my_work"))


def _operator_action(request: HttpRequest, euid: str, action_key: str,
                     success: Callable[[ActionResult], str], *, reason_required: bool = True
                     ) -> HttpResponse:
    def run() -> ActionResult:
        reason = _reason(request)
        payload = {"reason": reason} if (reason or reason_required) else {}
        hold_euid = request.POST.get("hold_euid") or None
        return services.perform(request.user, action_key, subject_euid=euid,
                                hold_euid=hold_euid, payload=payload, **_guards(request))

    return _answer(request, run, success, reverse("subject", args=[euid]))


@require_POST
def hold_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "place_execution_hold",
                            lambda r: f"{euid} is on hold.")


@require_POST
def release_hold(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "release_execution_hold",
                            lambda r: f"Hold on {euid} released.", reason_required=False)


@require_POST
def requeue_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "requeue_subject",
                            lambda r: f"{euid} requeued to {r['queue_key']}.")


@require_POST
def cancel_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "cancel_subject_execution",
                            lambda r: f"{euid} canceled.")


# ---------------------------------------------------------------- 6. worker dashboard


@require_GET
@reader
def worker_dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "web/workers.html", {"workers": selectors.workers()})


@require_POST
def worker_status(request: HttpRequest, worker_euid: str) -> HttpResponse:
    operation = request.POST.get("operation", "")

    def run() -> ActionResult:
        payload = {"operation": operation}
        if _reason(request):
            payload["reason"] = _reason(request)
        return services.perform(request.user, "set_worker_status", worker_euid=worker_euid,
                                payload=payload,
                                idempotency_key=_guards(request)["idempotency_key"])

    return _answer(request, run, lambda r: f"Worker {worker_euid} is now {r['status']}.",
                   reverse("workers"))


# ---------------------------------------------------------------- 7. workbench


@require_GET
@reader
def workbench(request: HttpRequest) -> HttpResponse:
    queue_key = request.GET.get("queue", "").strip() or None
    text = request.GET.get("q", "").strip().lower()
    dead = selectors.dead_letters(queue_key=queue_key)
    holds = selectors.active_holds(queue_key=queue_key)
    if text:
        dead = [d for d in dead if services.matches(d, text)]
        holds = [h for h in holds if services.matches(h, text)]
    return render(request, "web/workbench.html", {
        "dead_letters": dead,
        "holds": holds,
        "queues": selectors.queues(),
        "queue_key": queue_key or "",
        "q": request.GET.get("q", ""),
    })


@require_POST
def workbench_bulk(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "")
    action_key = {"requeue": "requeue_subject", "release": "release_execution_hold"}.get(action)
    default = reverse("workbench")
    if action_key is None:
        messages.error(request, "Choose requeue or release.")
        return redirect(_back(request, default))
    picks = request.POST.getlist("pick")
    if not picks:
        messages.error(request, "Select at least one item.")
        return redirect(_back(request, default))
    key = request.POST.get("idempotency_key", "").strip()
    reason = _reason(request)
    done, replayed = [], 0
    for pick in picks:
        euid, _, rest = pick.partition("|")
        state, _, revision = rest.partition("|")
        try:
            result = services.perform(
                request.user, action_key, subject_euid=euid,
                idempotency_key=f"{key}:{euid}" if key else "",
                expected_state=state or None,
                expected_revision=int(revision) if revision.isdigit() else None,
                payload={"reason": reason} if reason or action == "requeue" else {})
        except ActionError as err:
            if err.code == "FORBIDDEN":
                return forbidden(request, err.message)
            messages.error(request, f"{euid}: {err.message}")
            continue
        if result.replayed:
            replayed += 1
        else:
            done.append(euid)
    verb = "Requeued" if action == "requeue" else "Released the holds of"
    if done:
        messages.success(request, f"{verb} {len(done)}: {', '.join(done)}.")
    if replayed:
        messages.info(request, f"{replayed} already done before; nothing was repeated.")
    return redirect(_back(request, default))


# ---------------------------------------------------------------- 8. admin


@require_GET
@reader
def admin_tools(request: HttpRequest) -> HttpResponse:
    return render(request, "web/admin_tools.html", {
        "active": selectors.leases(status="ACTIVE"),
        "expired": [x for x in selectors.leases(status="EXPIRED")
                    if x["props"].get("status") == "ACTIVE"],
    })


@require_POST
def expire_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    def run() -> ActionResult:
        payload = {"reason": _reason(request)} if _reason(request) else {}
        return services.perform(request.user, "expire_queue_lease", lease_euid=lease_euid,
                                payload=payload,
                                idempotency_key=_guards(request)["idempotency_key"])

    def text(r: ActionResult) -> str:
        if r.get("noop"):
            return f"Lease {lease_euid} was no longer active; nothing to expire."
        return f"Lease {lease_euid} expired; its subject is back in its queue."

    return _answer(request, run, text, reverse("admin_tools"))


@require_POST
def sweep(request: HttpRequest) -> HttpResponse:
    def run() -> ActionResult:
        return services.perform(request.user, "expire_queue_lease",
                                idempotency_key=_guards(request)["idempotency_key"])

    def text(r: ActionResult) -> str:
        n = r.get("expired_count") or 0
        return f"Sweeper expired {n} lease(s)." if n else "Nothing to sweep: no expired leases."

    return _answer(request, run, text, reverse("admin_tools"))
