"""The bench: scan to claim (a loop that keeps the field ready) and My work (renew,
release, complete, fail)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionResult
from bloomops.execution.states import RetryClass
from bloomops.web import services
from bloomops.web.views.common import (
    answer,
    as_human,
    forbidden,
    guards,
    reader,
    reason_of,
)

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
        result = as_human(request, "claim_queue_item", subject_euid=euid,
                           idempotency_key=guards(request)["idempotency_key"])
    except ActionError as err:
        if err.code == "FORBIDDEN" and not request.htmx:
            return forbidden(request, err.message)
        return _scan_refusal(request, euid, err, diagnose=err.code != "FORBIDDEN")
    if request.htmx:
        return _scan_page(request, {"claimed": _scan_banner(_scan_claimed(result))})
    request.session[SCAN_CLAIMED] = _scan_claimed(result)
    return redirect("scan")




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
        g = guards(request)
        return as_human(request, action_key, lease_euid=lease_euid, payload=payload, **g)

    return answer(request, run, success, reverse("my_work"))


@require_POST
def renew_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    return _lease_action(request, lease_euid, "renew_queue_lease", {},
                         lambda r: f"Lease {lease_euid} renewed.")


@require_POST
def release_lease(request: HttpRequest, lease_euid: str) -> HttpResponse:
    payload = {"reason": reason_of(request)} if reason_of(request) else {}
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
