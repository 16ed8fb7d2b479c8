"""Two-person approvals in the console (RULES.md#approvals): the inbox, approving or
rejecting as an electronic signature (reason + password re-entered), withdrawing, and
asking for an approval from the subject inspector after a gated action was refused."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.signatures import display_names
from bloomops.execution import selectors
from bloomops.execution.approvals import RULE_TEXT, RULES
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionResult
from bloomops.execution.guards import load_json
from bloomops.web import services
from bloomops.web.views.common import answer, forbidden, guards, is_operator, reader, reason_of

# Where the inspector keeps the request a refused gated action named, until it is shown.
OFFER_KEY = "approval_offer:{euid}"
# The approvals no longer waiting shown below the waiting ones, newest first.
DECIDED_SHOWN = 20


@require_GET
@reader
def approvals_waiting(request: HttpRequest) -> HttpResponse:
    """The waiting panel again, with the navigation's count swapped in beside it: what an
    open dashboard or workbench asks every PANEL_REFRESH_SECONDS."""
    if not is_operator(request):
        return forbidden(request, "Only operators and admins see the approvals waiting.")
    return render(request, "web/_approvals_poll.html", {"is_operator": True})


@require_GET
@reader
def approvals_inbox(request: HttpRequest) -> HttpResponse:
    waiting = selectors.approvals(status="REQUESTED", context=True, oldest_first=True)
    recent = selectors.approvals(decided=True, limit=DECIDED_SHOWN)
    return render(request, "web/approvals.html", {
        # the oldest first: they expire soonest (a lab that asked 1,000 at once saw the
        # newest 200, and the other 800 expired unseen), and how many wait in all
        "waiting": waiting,
        "waiting_count": selectors.approvals_waiting(limit=1).count,
        "recent": recent,
        # who asked, as people read a person (one query for all)
        "names": display_names(a.props.get("requested_by") for a in [*waiting, *recent]),
    })


@sensitive_post_parameters("password")
@require_POST
def decide_approval(request: HttpRequest, approval_euid: str) -> HttpResponse:
    def run() -> ActionResult:
        # A refusal keeps the reason for the page shown next (answer: web/drafts.py); the
        # password never.
        fields = guards(request)
        decisions = request.POST.getlist("decision")
        if len(decisions) != 1:  # a signature means one thing
            raise ActionError("VALIDATION_ERROR", "The page sent no single decision:"
                              " approve or reject.", field="decision")
        return services.perform(
            request.user, "decide_approval", idempotency_key=fields["idempotency_key"],
            payload={"approval_euid": approval_euid, "decision": decisions[0],
                     "reason": reason_of(request)},
            signature_password=request.POST.get("password", ""), origin=request)

    def said(result: ActionResult) -> str:
        if result["approval_status"] == "APPROVED":
            key = result["gated_action_key"]
            what = next((RULE_TEXT[r] for r, gated in RULES.items() if gated == key), key)
            return (f"Approved and signed: {what} done on {result['subject_euid']}"
                    f" (now {result['state']}).")
        return f"Rejected and signed: {result['subject_euid']} stays as it was."

    return answer(request, run, said, reverse("approvals"))


@require_POST
def cancel_approval(request: HttpRequest, approval_euid: str) -> HttpResponse:
    def run() -> ActionResult:
        return services.perform(
            request.user, "cancel_approval",
            idempotency_key=guards(request)["idempotency_key"],
            payload={"approval_euid": approval_euid, "reason": reason_of(request)})

    return answer(request, run, lambda r: "Approval request withdrawn.", reverse("approvals"))


def offer_approval(request: HttpRequest, euid: str, err: ActionError) -> None:
    """A gated action was refused: keep what to request, for the inspector to offer."""
    ask = err.details.get("request")
    if err.code == "APPROVAL_REQUIRED" and isinstance(ask, dict):
        request.session[OFFER_KEY.format(euid=euid)] = ask


def take_offer(request: HttpRequest, euid: str) -> dict | None:
    return request.session.pop(OFFER_KEY.format(euid=euid), None)


@require_POST
def request_approval(request: HttpRequest, euid: str) -> HttpResponse:
    def run() -> ActionResult:
        try:
            parameters = load_json(request.POST.get("parameters") or "{}")
        except ValueError:
            raise ActionError("VALIDATION_ERROR", "The page sent invalid parameters.",
                              field="parameters") from None
        action_key = request.POST.get("action_key", "")
        if action_key == "requeue_subject" and isinstance(parameters, dict):
            parameters.update(_requeue_terms(request))
        # with the state and revision the page showed: a stale page (the subject cancelled
        # meanwhile) asked a second person to sign for what its asker never saw
        return services.perform(
            request.user, "request_approval", **guards(request), subject_euid=euid,
            hold_euid=request.POST.get("hold_euid") or None,
            queue_key=request.POST.get("queue_key") or None,
            payload={"action_key": action_key,
                     "parameters": parameters, "reason": reason_of(request)})

    return answer(request, run, lambda r: f"Approval requested ({r['approval_euid']}): a"
                  " second person decides it in Approvals.", reverse("subject", args=[euid]))


def _requeue_terms(request: HttpRequest) -> dict[str, Any]:
    """The priority and attempts the form chose for a requeue to be approved (empty: as the
    requeue does by default); the engine checks them as it checks the requeue's own."""
    terms: dict[str, Any] = {}
    if priority := request.POST.get("priority", "").strip():
        terms["priority"] = priority
    reset = request.POST.get("reset_attempts", "")
    if reset not in ("", "yes", "no"):
        raise ActionError("VALIDATION_ERROR", "Choose whether the failed attempts are reset.",
                          field="reset_attempts")
    if reset:
        terms["reset_attempts"] = reset == "yes"
    return terms
