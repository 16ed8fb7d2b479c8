"""Every envelope field an action takes is checked, and every other one is refused.

For each action, a request the engine accepts is built; then each of the request envelope
fields (subject, worker, lease, hold, queue, expected state and revision) is sent wrong,
one at a time. A field the action declares it uses (``Handler.uses``) must then be refused
by the action's own checks; any other is refused as not applying to the action. Either
way nothing is written; the request as built is then accepted. A field the engine took and
did not check would be a guard that silently does not guard: a caller would believe its
expected state or its queue was held to, and it was not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bloomops.execution.actions import HANDLERS
from bloomops.execution.context import ENVELOPE_FIELDS
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.execution.exports import export_evidence
from tests.approval_support import integrity_held, password_of, person, request_release
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    counts,
    key,
    make_queue,
    make_subject,
    register,
)

pytestmark = pytest.mark.django_db

# A request: who sends it, its fields (the payload among them), and an e-signature.
Request = tuple[Actor, dict[str, Any], str | None]

WRONG: dict[str, Any] = {
    "subject_euid": "Z-MX-999999", "worker_euid": "Z-AX-999999", "lease_euid": "Z-LS-999999",
    "hold_euid": "Z-HD-999999", "queue_key": "no_such_queue", "expected_state": "CANCELED",
    "expected_revision": 999,
}


def send(action_key: str, request: Request, **changed: Any):
    who, fields, password = request
    fields = {**fields, **changed}
    return execute(ActionRequest(action_key=action_key, actor=who,
                                 idempotency_key=key(action_key),
                                 payload=fields.pop("payload", {}),
                                 signature_password=password, **fields))


def _svc() -> Actor:
    return actor(*SERVICE)


def _leased() -> tuple[Actor, str, str, str]:
    svc = _svc()
    subject = make_subject("q1")
    worker = register(svc)
    return svc, subject, worker, claim(svc, worker)["lease_euid"]


def _lease_action(payload: dict[str, Any]) -> Request:
    svc, _, worker, lease = _leased()
    return svc, {"worker_euid": worker, "lease_euid": lease, "expected_state": "READY",
                 "payload": payload}, None


def _on_subject(payload: dict[str, Any], state: str = "READY") -> Request:
    return actor("operator"), {"subject_euid": make_subject("q1"), "expected_state": state,
                               "payload": payload}, None


def _waiting_external() -> Request:
    svc, subject, worker, lease = _leased()
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease,
        expected_state="READY", payload={"external": {"run_id": "wf-1"}})
    return svc, {"subject_euid": subject, "expected_state": "WAITING_EXTERNAL",
                 "payload": {"outcome": "COMPLETED"}}, None


def _managed_queue(payload: dict[str, Any]) -> Request:
    admin = actor("admin")
    act("create_queue", admin, queue_key="cq",
        payload={"subject_template_codes": [SPECIMEN], "reason": "r"})
    return admin, {"queue_key": "cq", "expected_revision": 1, "payload": payload}, None


def _released_hold() -> Request:
    op = actor("operator")
    subject, hold = integrity_held(op, "LABEL_ISSUE")  # no second person needed
    return op, {"subject_euid": subject, "hold_euid": hold, "expected_state": "HELD",
                "payload": {"reason": "relabelled"}}, None


def _evidence() -> Request:
    op = person("qa-lead", "operator")
    subject = make_subject("q1")
    sha = export_evidence(subject, op).sha256
    return op, {"subject_euid": subject, "payload": {"bundle_sha256": sha}}, None


def _asked_release() -> tuple[Actor, str, str]:
    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    return ann, subject, request_release(ann, subject, hold)["approval_euid"]


def _request_approval() -> Request:
    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    return ann, {"subject_euid": subject, "hold_euid": hold, "payload": {
        "action_key": "release_execution_hold", "parameters": {"reason": "rerun passed"},
        "reason": "QC rerun passed, please release"}}, None


def _decide() -> Request:
    _, subject, approval = _asked_release()
    bob = person("bob", "operator")
    return bob, {"subject_euid": subject, "payload": {
        "approval_euid": approval, "decision": "APPROVED", "reason": "checked"}}, (
        password_of("bob"))


def _cancel_approval() -> Request:
    ann, subject, approval = _asked_release()
    return ann, {"subject_euid": subject, "payload": {"approval_euid": approval,
                                                      "reason": "asked the wrong person"}}, None


def _heartbeat() -> Request:
    svc = _svc()
    return svc, {"worker_euid": register(svc)}, None


def _claim() -> Request:
    svc = _svc()
    make_subject("q1")
    return svc, {"worker_euid": register(svc), "queue_key": "q1"}, None


def _renew() -> Request:
    svc, _, worker, lease = _leased()
    return svc, {"worker_euid": worker, "lease_euid": lease}, None


def _expire() -> Request:
    _, _, _, lease = _leased()
    return actor("admin"), {"lease_euid": lease, "payload": {"reason": "bench crashed"}}, None


def _worker_status() -> Request:
    return actor("admin"), {"worker_euid": register(_svc()), "payload": {
        "operation": "drain", "reason": "maintenance"}}, None


SCENARIOS: dict[str, Callable[[], Request]] = {
    "register_worker": lambda: (_svc(), {"payload": {"worker_key": "w-new",
                                                     "capabilities": []}}, None),
    "heartbeat_worker": _heartbeat,
    "claim_queue_item": _claim,
    "renew_queue_lease": _renew,
    "release_queue_lease": lambda: _lease_action({"reason": "back"}),
    "complete_queue_execution": lambda: _lease_action({}),
    "fail_queue_execution": lambda: _lease_action({"retryable": True,
                                                   "error_message": "timeout"}),
    "place_execution_hold": lambda: _on_subject({"hold_code": "LABEL_ISSUE",
                                                 "reason": "label smudged"}),
    "release_execution_hold": _released_hold,
    "requeue_subject": lambda: _on_subject({"reason": "try again"}),
    "cancel_subject_execution": lambda: _on_subject({"reason": "withdrawn"}),
    "expire_queue_lease": _expire,
    "record_external_result": _waiting_external,
    "set_worker_status": _worker_status,
    "route_subject": lambda: (actor("operator"), {
        "subject_euid": make_subject(None, state="PENDING"), "queue_key": "q1"}, None),
    "register_subject": lambda: (actor("operator"), {"queue_key": "q1", "payload": {
        "template_code": SPECIMEN, "name": "S-1"}}, None),
    "record_evidence_bundle": _evidence,
    "create_queue": lambda: (actor("admin"), {"queue_key": "cq", "payload": {
        "subject_template_codes": [SPECIMEN], "reason": "r"}}, None),
    "update_queue": lambda: _managed_queue({"lease_ttl_seconds": 60, "reason": "r"}),
    "set_queue_enabled": lambda: _managed_queue({"enabled": False, "reason": "r"}),
    # another template: a replacement that changes nothing is refused
    "replace_queue": lambda: _managed_queue({"subject_template_codes": [
        SPECIMEN, "content/material/extracted_sample/1.0"], "reason": "r"}),
    "request_approval": _request_approval,
    "decide_approval": _decide,
    "cancel_approval": _cancel_approval,
}
# Where a field's wrong value is not one that names nothing: the queue a new queue takes
# is wrong when it exists already.
WRONG_FOR: dict[tuple[str, str], Any] = {("create_queue", "queue_key"): "q1"}

# What each wrong value is refused with: what it names does not exist, or the subject is
# not in the state or at the revision the caller expects...
REFUSED = {"subject_euid": "NOT_FOUND", "worker_euid": "NOT_FOUND", "lease_euid": "NOT_FOUND",
           "hold_euid": "NOT_FOUND", "queue_key": "NOT_FOUND",
           "expected_state": "STATE_CONFLICT", "expected_revision": "REVISION_CONFLICT"}
# ... except where the field is held to another one of the request first.
REFUSED_FOR: dict[tuple[str, str], str] = {
    # only human workers and instrument adapters choose their subject
    ("claim_queue_item", "subject_euid"): "FORBIDDEN",
    # a lease's own worker and subject
    **{(key, "worker_euid"): "LEASE_NOT_OWNED" for key in (
        "renew_queue_lease", "release_queue_lease", "complete_queue_execution",
        "fail_queue_execution")},
    ("renew_queue_lease", "subject_euid"): "LEASE_NOT_OWNED",
    # an approval's own subject
    ("decide_approval", "subject_euid"): "VALIDATION_ERROR",
    ("cancel_approval", "subject_euid"): "VALIDATION_ERROR",
    # a hold is listed in its subject's queue; an external result came from one queue
    ("place_execution_hold", "queue_key"): "VALIDATION_ERROR",
    ("record_external_result", "queue_key"): "VALIDATION_ERROR",
    # the approval asked is of releasing a hold, which no queue is named for
    ("request_approval", "queue_key"): "VALIDATION_ERROR",
    ("create_queue", "queue_key"): "QUEUE_EXISTS",
}


@pytest.mark.parametrize("action_key", sorted(HANDLERS))
def test_every_envelope_field_is_checked_or_refused(tenant, action_key):
    make_queue("q1", required_worker_capabilities=[])
    request = SCENARIOS[action_key]()
    uses = HANDLERS[action_key].uses
    before = counts()
    for name in ENVELOPE_FIELDS:
        wrong = WRONG_FOR.get((action_key, name), WRONG[name])
        with pytest.raises(ActionError) as refused:
            send(action_key, request, **{name: wrong})
        # Refused by the action's own checks (an approval's by its gated action's), or
        # as a field it does not take, naming it.
        not_taken = f"{name} does not apply to {action_key}:" in refused.value.message
        if name in uses:
            assert not not_taken, refused.value
            assert refused.value.code == REFUSED_FOR.get((action_key, name), REFUSED[name]), (
                name, refused.value)
        else:
            assert refused.value.code == "VALIDATION_ERROR", (name, refused.value)
            assert refused.value.details["field"] == name
        assert counts() == before, name
    send(action_key, request)
    assert counts() != before


def test_every_action_has_a_request_here():
    assert set(SCENARIOS) == set(HANDLERS)


@pytest.mark.parametrize("action_key,field", [("requeue_subject", "hold_euid"),
                                              ("cancel_subject_execution", "queue_key"),
                                              ("release_execution_hold", "queue_key")])
def test_an_approval_is_not_asked_for_a_field_its_action_would_refuse(
        tenant, action_key, field):
    """The approval was recorded with the field, and its action refused when it ran: an
    approver signed what could not run."""
    make_queue("q1")
    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    before = counts()
    fields = {"hold_euid": hold, "queue_key": "q1"}
    with pytest.raises(ActionError) as refused:
        act("request_approval", ann, subject_euid=subject, **{field: fields[field]}, payload={
            "action_key": action_key, "parameters": {"reason": "x"}, "reason": "please"})
    assert refused.value.details["not_applicable"] == [field]
    assert f"does not apply to {action_key}" in refused.value.message
    assert counts() == before


def test_an_external_result_names_the_queue_that_dispatched_the_work_or_none(tenant):
    """queue_key was read only when the subject did not say where its external work came
    from: another queue named was taken without a word."""
    make_queue("q1", required_worker_capabilities=[])
    make_queue("q2")
    request = _waiting_external()
    before = counts()
    with pytest.raises(ActionError) as refused:
        send("record_external_result", request, queue_key="q2")
    assert refused.value.details["field"] == "queue_key"
    assert counts() == before
    assert send("record_external_result", request, queue_key="q1")["state"] == "COMPLETED"


def _another_subject_s_hold(action_key: str, request: Request) -> dict[str, Any]:
    _, hold = integrity_held(actor("operator"))
    return {"hold_euid": hold}


def _a_retired_worker(action_key: str, request: Request) -> dict[str, Any]:
    svc = _svc()
    worker = register(svc)
    act("set_worker_status", actor("admin"), worker_euid=worker,
        payload={"operation": "retire", "reason": "replaced"})
    return {"worker_euid": worker}


# A value that names something real that this request may not act through. (A retired
# worker's heartbeat is taken: it answers the worker with its status, which stops it.)
@pytest.mark.parametrize("action_key,wrong,code", [
    ("release_execution_hold", _another_subject_s_hold, "NOT_FOUND"),
    ("request_approval", _another_subject_s_hold, "NOT_FOUND"),
    ("claim_queue_item", _a_retired_worker, "WORKER_UNAVAILABLE"),
    ("renew_queue_lease", _a_retired_worker, "LEASE_NOT_OWNED"),
    ("complete_queue_execution", _a_retired_worker, "LEASE_NOT_OWNED"),
    ("record_external_result", _a_retired_worker, "WORKER_UNAVAILABLE"),
])
def test_a_real_object_the_request_may_not_act_through_is_refused(
        tenant, action_key, wrong, code):
    make_queue("q1", required_worker_capabilities=[])
    request = SCENARIOS[action_key]()
    changed = wrong(action_key, request)
    before = counts()
    with pytest.raises(ActionError) as refused:
        send(action_key, request, **changed)
    assert refused.value.code == code, refused.value
    assert counts() == before
