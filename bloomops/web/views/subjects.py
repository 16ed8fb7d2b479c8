"""The subject inspector and the operator actions on a subject."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from bloomops.execution import selectors
from bloomops.execution.context import Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionResult
from bloomops.execution.exports import export_evidence
from bloomops.web import services
from bloomops.web.views.approvals import offer_approval, take_offer
from bloomops.web.views.common import (
    answer,
    as_human,
    forbidden,
    guards,
    is_human,
    reader,
    reason_of,
)


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
    worker_euid = services.my_worker_euid(request.user) if is_human(request) else None
    diag = selectors.subject_diagnostics(euid, worker_euid=worker_euid)
    if diag is None:
        return render(request, "web/subject_missing.html", {"euid": euid}, status=404)
    return render(request, "web/subject.html", {
        "d": diag,
        "history": selectors.subject_history(diag.uid),
        "lineage": selectors.lineage_of(diag.uid),
        "actions": selectors.action_history(diag.uid),
        "audit": selectors.audit_trail(diag.uid, limit=100),
        "approvals": selectors.approvals(subject_euid=diag.euid, limit=20),
        "approval_offer": take_offer(request, diag.euid),
    })


@require_POST
def claim_subject(request: HttpRequest, euid: str) -> HttpResponse:
    def run() -> ActionResult:
        return as_human(request, "claim_queue_item", subject_euid=euid, **guards(request))

    return answer(request, run, lambda r: f"Claimed {euid} ({r['queue_key']}).",
                   reverse("my_work"))


def _operator_action(request: HttpRequest, euid: str, action_key: str,
                     success: Callable[[ActionResult], str], *, reason_required: bool = True
                     ) -> HttpResponse:
    def run() -> ActionResult:
        reason = reason_of(request)
        payload = {"reason": reason} if (reason or reason_required) else {}
        hold_euid = request.POST.get("hold_euid") or None
        try:
            return services.perform(request.user, action_key, subject_euid=euid,
                                    hold_euid=hold_euid, payload=payload, **guards(request))
        except ActionError as err:
            offer_approval(request, euid, err)  # the inspector offers "Request approval"
            raise

    return answer(request, run, success, reverse("subject", args=[euid]))


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


@require_POST
def subject_evidence(request: HttpRequest, euid: str) -> HttpResponse:
    """The evidence bundle as a download, its sha256 recorded (RULES.md#evidence). A POST:
    exporting writes the record of who generated it."""
    try:
        export = export_evidence(euid, Actor.of(request.user))
    except ActionError as err:
        if err.code == "FORBIDDEN":
            return forbidden(request, err.message)
        messages.error(request, err.message)
        return redirect("subject", euid=euid)
    response = HttpResponse(export.data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["X-Evidence-Sha256"] = export.sha256
    return response
