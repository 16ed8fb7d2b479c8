"""The subject inspector and the operator actions on a subject."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from bloomops.accounts.signatures import hold_people
from bloomops.execution import selectors
from bloomops.execution.actions.fields import NAME_MAX
from bloomops.execution.actions.subjects import DEFAULT_HOLD_CODE, hold_codes
from bloomops.execution.approvals import hold_gates
from bloomops.execution.context import Actor, action_name
from bloomops.execution.errors import STALE_CODES, ActionError
from bloomops.execution.evidence import CHECKS, verify_bundle
from bloomops.execution.executor import ActionResult
from bloomops.execution.exports import export_evidence
from bloomops.execution.objects import is_subject_kind
from bloomops.execution.policy import queue_takes
from bloomops.execution.selectors.evidence import recorded_bundles
from bloomops.execution.selectors.lookup import SUGGESTED
from bloomops.execution.states import OUTSIDE_STATES
from bloomops.execution.verification import subject_chain_breaks
from bloomops.tapdb.tenancy import tenant_of
from bloomops.web import bench_words, services
from bloomops.web.evidence_readable import readable
from bloomops.web.offers import gated_controls, subject_states
from bloomops.web.views.approvals import offer_approval, take_offer
from bloomops.web.views.bench import item_view
from bloomops.web.views.common import (
    answer,
    as_human,
    back_url,
    forbidden,
    guards,
    is_human,
    is_operator,
    reader,
    reason_of,
    said_refused,
)


@require_GET
@reader
def subject_lookup(request: HttpRequest) -> HttpResponse:
    """An EUID, or the lab's own name of a subject: its page when the text means one
    subject; the ones to choose from when it means several (a name shared, or one subject's
    name that is another's EUID)."""
    label = request.GET.get("euid", "").strip()
    if not label:  # the field asks first (required); a request sent anyway is told
        messages.info(request, "Type an EUID or a subject's name to inspect it.")
        return redirect("dashboard")
    return _page_labelled(request, label)


def _page_labelled(request: HttpRequest, label: str, *, here: str | None = None
                   ) -> HttpResponse:
    """The page of the one subject ``label`` means (never ``here``, the page asked for:
    no redirect to itself), else the ones it means or what it is."""
    meant = selectors.subjects_labelled(label)
    if len(meant) == 1 and meant[0]["euid"] != here:
        return redirect("subject", euid=meant[0]["euid"])
    return _not_a_subject(request, label, meant if len(meant) > 1 else [])


# What the engine's own objects are, in words (the inspector shows subjects only).
OBJECT_WORDS = {
    ("execution", "hold"): "a hold", ("execution", "approval"): "an approval request",
    ("execution", "queue_lease"): "a claim (lease)",
    ("execution", "execution_record"): "an execution record",
    ("execution", "dead_letter"): "a dead letter", ("execution", "queue"): "a queue",
    ("system", "worker"): "a worker", ("execution", "event"): "an outbox event",
}


def _not_a_subject(request: HttpRequest, label: str, meant: list[dict]) -> HttpResponse:
    """No one subject by that label: the ones it names, or (an auditor following an EUID
    from a bundle or a screen) the engine's object it is and the subject it belongs to."""
    shown = "".join(c for c in label if c.isprintable())[:NAME_MAX]
    found = None if meant else selectors.engine_object(label)
    if found:
        kind = (found["type"], found["subtype"])
        action = action_name(found["subtype"]) if found["type"] == "execution_queue" else None
        found["words"] = OBJECT_WORDS.get(kind) or (
            f"the record of an action ({action}, {found['subtype']})" if action
            else f"an object of type {found['type']}/{found['subtype']}")
    # nothing by that label: the subjects whose name or EUID holds it ("0148", "Extract")
    like = selectors.subjects_like(label) if not meant and not found else []
    return render(request, "web/subject_missing.html",
                  {"euid": shown, "named": meant, "found": found, "like": like,
                   "like_cap": SUGGESTED},
                  status=200 if found else 404)


# The envelope's fields in words (docs/RULES.md#envelope); a field another writer added shows
# its key with the underscores as spaces.
ENVELOPE_LABELS = {
    "state": "State", "revision": "Revision", "next_queue_key": "Next queue",
    "next_action_key": "Next step", "priority": "Priority", "ready_at": "Ready from",
    "due_at": "Due", "attempt_count": "Failed attempts (toward the limit)",
    "max_attempts_override": "Attempt limit (this subject)", "retry_at": "Next retry",
    "hold_state": "Hold", "hold_reason": "Hold reason", "cancel_requested": "Cancel requested",
    "terminal": "Finished for good", "last_execution_record_euid": "Last finished attempt",
    "queue_cache": "Queue cache", "current_queue_key": "current queue",
    "computed_at": "computed",
}
TIMESTAMPS = {"ready_at", "due_at", "retry_at"}


def _label(key: str) -> str:
    return ENVELOPE_LABELS.get(key) or key.replace("_", " ").capitalize()


def _words(value: Any) -> str:
    """A value as a person reads it: no Python repr of a dict, list or boolean."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{_label(k)}: {_words(v)}" for k, v in value.items()) or "–"
    if isinstance(value, list):
        return ", ".join(_words(v) for v in value) or "–"
    return str(value)


def envelope_rows(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The inspector's envelope table: label, the value in words, timestamps marked so the
    page shows them as times."""
    return [{"key": k, "label": _label(k), "value": _words(v),
             "ts": v if k in TIMESTAMPS and v else None} for k, v in env.items()]


def _lineage(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The engine's objects (leases, holds, records, action records) and workers are not
    # subjects; anything else is, and the inspector links to it.
    return [{**e, "is_subject": is_subject_kind(e["type"], e["subtype"])} for e in edges]


@require_GET
@reader
def subject(request: HttpRequest, euid: str) -> HttpResponse:
    worker_euid = services.my_worker_euid(request.user) if is_human(request) else None
    diag = selectors.subject_diagnostics(euid, worker_euid=worker_euid)
    if diag is None:
        # a link typed or pasted as people write one ("z-mx-2dp", a space after it): the
        # subject's own page when it means one subject, as the look-up box does
        return _page_labelled(request, euid.strip(), here=euid)
    approvals = selectors.approvals(subject_euid=diag.euid, limit=20)
    actions = selectors.action_history(diag.uid)
    history = selectors.subject_history(diag.uid)
    # where an operator may requeue it: the queues that take its template and have it in
    # scope (the engine refuses the others: SUBJECT_TEMPLATE_MISMATCH, SUBJECT_OUT_OF_SCOPE)
    requeue_to = [(q["queue_key"], selectors.display_name(q["queue_key"], q["config"]))
                  for q in services.queues(request)
                  if queue_takes(q["config"], diag.template_code, diag.props)
                  ] if is_operator(request) and diag.state in subject_states()["requeue"] else []
    held_by = {h["props"].get("hold_code") for h in diag.active_holds}
    return render(request, "web/subject.html", {
        "requeue_to": requeue_to,
        "d": diag,
        "envelope": envelope_rows(diag.execution),
        "raw_envelope": json.dumps(diag.execution, indent=2, sort_keys=True, default=str),
        # a code already holding it is refused: not offered, and never the default
        "hold_codes": [c for c in hold_codes() if c not in held_by],
        "default_hold_code": DEFAULT_HOLD_CODE if DEFAULT_HOLD_CODE not in held_by else "",
        "can": subject_states(),
        "history": history,
        "names": hold_people([*diag.active_holds, *history["holds"]]),
        "lineage": _lineage(selectors.lineage_of(diag.uid)),
        "actions": services.named_actions(actions),
        # the chains of the subject's records, walked on every view: a record changed or
        # hidden outside bloomops is said where its history is read, not only when someone
        # verifies a bundle
        "chain_breaks": subject_chain_breaks(tenant_of(), diag.euid, diag.uid),
        "audit": selectors.audit_trail(diag.uid, limit=100),
        "approvals": approvals,
        "bundles": recorded_bundles(diag.uid),
        "approval_offer": take_offer(request, diag.euid),
        "gated": gated_controls(diag.uid) if is_operator(request) else {},
        "one_by_one": _releasable_one_by_one(request, diag),
        "waiting": {a.props.get("action_key") for a in approvals if a.waiting},
        # ... of which those asked before the subject changed: no longer approvable
        "stale": {a.props.get("action_key") for a in approvals if a.stale},
        # ... and those still approvable, which any change here would make unapprovable:
        # said in every confirmation (a cancel left a colleague's request dead unsaid)
        "asked_open": [a for a in approvals if a.waiting and not a.stale],
        # how long its outside work has waited and whether that is overdue: the workbench's
        # read, so the two never disagree
        "outside": next(iter(selectors.outside_work(subject_euid=diag.euid, limit=1)), None)
        if diag.state in OUTSIDE_STATES else None,
    })


def _releasable_one_by_one(request: HttpRequest, diag) -> dict[str, bool]:
    """Where several holds stop a subject (one placed on another: an escalation), each may
    be released alone: hold euid -> whether releasing it needs a second person (its code's
    gate, RULES.md#approvals). Empty when one hold or none, or for a reader who may not."""
    if (len(diag.active_holds) < 2 or not is_operator(request)
            or diag.state not in subject_states()["release"]):
        return {}
    return {h["euid"]: "release_execution_hold" in hold_gates(h["props"].get("hold_code"))
            for h in diag.active_holds}


@require_POST
def claim_subject(request: HttpRequest, euid: str) -> HttpResponse:
    """A queue row's Claim: to the item's work view, as Claim next; refused, back on the
    queue with why in the bench's words (a race lost read "Leased by worker Z-AX-80 until
    2026-11-27T14:10:30Z" on My work)."""
    def run() -> ActionResult:
        try:
            return as_human(request, "claim_queue_item", subject_euid=euid, **guards(request))
        except ActionError as err:
            mine = services.my_worker_euid(request.user)
            diag = selectors.subject_diagnostics(euid, worker_euid=mine) \
                if err.code == "NOT_VISIBLE" else None
            reasons = bench_words.scan_reasons(diag, mine) if diag is not None else []
            if not reasons:
                raise
            raise ActionError(err.code, "Not claimable: " + bench_words.reasons_said(reasons),
                              **err.details) from None

    return answer(request, run, lambda r: f"Claimed {services.item_called(r)} from"
                  f" {services.queue_said(r['queue_key'])}.", reverse("my_work"),
                  goto=lambda r: item_view(r["lease_euid"]),
                  refused_to=back_url(request, reverse("my_work")))


def _no_code_chosen() -> str:
    raise ActionError("VALIDATION_ERROR", "Choose a hold code: the item is already held with"
                      " the usual one.", field="hold_code")


def _operator_action(request: HttpRequest, euid: str, action_key: str,
                     success: Callable[[ActionResult], str]) -> HttpResponse:
    def run() -> ActionResult:
        payload = {"reason": reason_of(request)}
        if action_key == "place_execution_hold" and "hold_code" in request.POST:
            # sent empty: the form's "choose a hold code…" left as it was (no default to take
            # when the default code already holds the item)
            payload["hold_code"] = request.POST["hold_code"].strip() or _no_code_chosen()
        hold_euid = request.POST.get("hold_euid") or None
        # a requeue may name the queue (one that takes the subject); none: its own
        queue_key = (request.POST.get("queue_key", "").strip() or None
                     if action_key == "requeue_subject" else None)
        try:
            return services.perform(request.user, action_key, subject_euid=euid,
                                    hold_euid=hold_euid, queue_key=queue_key, payload=payload,
                                    **guards(request))
        except ActionError as err:
            offer_approval(request, euid, err)  # the inspector offers "Request approval"
            if err.code in STALE_CODES:
                raise ActionError(err.code, f"{euid}: {err.message}{services.last_change(euid)}",
                                  **err.details) from None
            raise

    return answer(request, run, success, reverse("subject", args=[euid]))


@require_POST
def hold_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "place_execution_hold",
                            lambda r: f"{euid} is on hold.")


@require_POST
def release_hold(request: HttpRequest, euid: str) -> HttpResponse:
    def said(result: ActionResult) -> str:
        left = result.get("active_holds_remaining") or 0
        if not left:
            return f"Hold on {euid} released."
        # one of several: the subject is still held, which "released" alone hid
        return (f"One hold on {euid} released; it is still held by {left} other"
                f" hold{'s' if left > 1 else ''}.")

    return _operator_action(request, euid, "release_execution_hold", said)


@require_POST
def requeue_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "requeue_subject",
                            lambda r: f"{euid} requeued to {r['queue_key']}.")


@require_POST
def cancel_subject(request: HttpRequest, euid: str) -> HttpResponse:
    return _operator_action(request, euid, "cancel_subject_execution",
                            lambda r: f"{euid} canceled" + (
                                "; its dead letter is closed." if r["dead_letters_resolved"]
                                else "."))


@require_POST
def subject_evidence(request: HttpRequest, euid: str) -> HttpResponse:
    """The evidence bundle as a download, its sha256 recorded (RULES.md#evidence). A POST:
    exporting writes the record of who generated it."""
    try:
        export = export_evidence(euid, Actor.of(request.user))
    except ActionError as err:
        if err.code == "FORBIDDEN":
            return forbidden(request, err.message)
        said_refused(request, err)
        return redirect("subject", euid=euid)
    response = HttpResponse(export.data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["X-Evidence-Sha256"] = export.sha256
    return response


# A bundle file larger than this is verified with manage.py verify_evidence: a web worker
# must finish well within its timeout (a subject's bundle is rarely over 1 MiB).
VERIFY_MAX_BYTES = 8 * 1024 * 1024


@require_POST
@reader
def verify_subject_evidence(request: HttpRequest, euid: str) -> HttpResponse:
    """An uploaded bundle verified against its record and the database (RULES.md#evidence):
    a report anyone who reads may ask for, and that writes nothing."""
    upload = request.FILES.get("bundle")
    if upload is None or upload.size > VERIFY_MAX_BYTES:
        messages.error(request, "Choose the bundle file as downloaded." if upload is None else
                       "That file is larger than 8 MiB: verify it with manage.py"
                       " verify_evidence.")
        return redirect("subject", euid=euid)
    verdict = verify_bundle(upload.read(), tenant_of())
    return render(request, "web/evidence_verdict.html", {
        "euid": euid, "filename": upload.name, "verdict": verdict,
        "checks": list(zip(CHECKS, verdict.outcomes, strict=True)),
        "other_subject": verdict.subject_euid not in (None, euid),
        "readable": readable(verdict.document) if verdict.document is not None else None,
    }, status=400 if verdict.subject_euid is None else 200)



