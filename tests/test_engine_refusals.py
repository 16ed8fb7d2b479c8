"""Every refusal code of the executor: the right code, and nothing written."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from bloomops.execution import clock
from bloomops.execution.errors import HTTP_STATUS, ActionError
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.execution.objects import load, save_props
from tests import test_bench_rules as bench_rules
from tests import test_service_bounds as service_bounds
from tests.approval_support import decide, integrity_held, person, request_release
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    counts,
    envelope,
    key,
    locked_elsewhere,
    make_queue,
    make_subject,
    register,
)


def _claimed(svc):
    subject = make_subject("q1")
    worker = register(svc)
    return subject, worker, claim(svc, worker)


def s_validation(svc, op):
    subject = make_subject("q1")
    return lambda: act("place_execution_hold", op, subject_euid=subject,
                       expected_state="READY", payload={"reason": "  "})


def s_validation_priority(svc, op):
    subject = make_subject("q1")
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="READY",
                       payload={"reason": "x", "priority": "SOON"})


def s_validation_retry_class(svc, op):
    subject, worker, lease = _claimed(svc)
    return lambda: act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"error_class": "GREMLINS"})


def s_validation_idempotency_key(svc, op):
    subject = make_subject("q1")
    return lambda: act("cancel_subject_execution", op, subject_euid=subject,
                       expected_state="READY", idempotency_key=" ", payload={"reason": "x"})


def s_validation_unknown_action(svc, op):
    return lambda: execute(ActionRequest("teleport", actor=op, idempotency_key="k"))


def s_forbidden_human_holds(svc, op):
    subject = make_subject("q1")
    human = actor("worker_human")
    return lambda: act("place_execution_hold", human, subject_euid=subject,
                       expected_state="READY", payload={"reason": "x"})


def s_forbidden_operator_expires(svc, op):
    return lambda: act("expire_queue_lease", op)


def s_forbidden_service_requeues(svc, op):
    subject = make_subject("q1", state="FAILED_TERMINAL", terminal=True)
    return lambda: act("requeue_subject", svc, subject_euid=subject,
                       expected_state="FAILED_TERMINAL", payload={"reason": "x"})


def s_forbidden_no_role(svc, op):
    subject = make_subject("q1")
    nobody = Actor(username="visitor", roles=frozenset())
    return lambda: act("cancel_subject_execution", nobody, subject_euid=subject,
                       expected_state="READY", payload={"reason": "x"})


def s_not_found_subject(svc, op):
    return lambda: act("cancel_subject_execution", op, subject_euid="Z-MX-NOPE",
                       expected_state="READY", payload={"reason": "x"})


def s_not_found_queue(svc, op):
    worker = register(svc)
    return lambda: claim(svc, worker, "no_such_queue")


def s_state_conflict(svc, op):
    subject = make_subject("q1")
    return lambda: act("cancel_subject_execution", op, subject_euid=subject,
                       expected_state="FAILED_RETRYABLE", payload={"reason": "x"})


def s_revision_conflict(svc, op):
    subject = make_subject("q1")
    return lambda: act("cancel_subject_execution", op, subject_euid=subject,
                       expected_state="READY", expected_revision=7, payload={"reason": "x"})


def s_idempotency_conflict(svc, op):
    subject = make_subject("q1")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        idempotency_key="dup", payload={"reason": "first"})
    return lambda: act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
                       idempotency_key="dup", payload={"reason": "second"})


def s_lease_expired(svc, op):
    from bloomops.execution import clock

    subject, worker, lease = _claimed(svc)
    clock.advance(901)  # the default lease TTL is 900 s
    return lambda: act("release_queue_lease", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY")


def s_lease_not_owned_other_worker(svc, op):
    subject, worker, lease = _claimed(svc)
    other = register(svc)
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=other, expected_state="READY")


def s_lease_not_owned_other_user(svc, op):
    subject, worker, lease = _claimed(svc)
    intruder = actor("worker_service", username="intruder")
    return lambda: act("complete_queue_execution", intruder, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY")


def s_lease_not_active(svc, op):
    subject, worker, lease = _claimed(svc)
    act("release_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY")
    return lambda: act("renew_queue_lease", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker)


def s_not_visible(svc, op):
    make_queue("bench", manual_only=True)
    subject = make_subject("bench")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "x"})
    human = actor("worker_human")
    worker = register(human, worker_type="HUMAN_SESSION")
    return lambda: act("claim_queue_item", human, worker_euid=worker, subject_euid=subject)


def s_no_work(svc, op):
    worker = register(svc)
    return lambda: claim(svc, worker)


def s_worker_unavailable(svc, op):
    make_subject("q1")
    worker = register(svc)
    act("set_worker_status", actor("admin"), worker_euid=worker,
        payload={"operation": "drain", "reason": "service window"})
    return lambda: claim(svc, worker)


def s_worker_not_eligible(svc, op):
    make_queue("caps", required_worker_capabilities=["wetlab.extraction"])
    make_subject("caps")
    worker = register(svc, capabilities=["compute.qc"])
    return lambda: claim(svc, worker, "caps")


def s_worker_not_eligible_manual_only(svc, op):
    make_queue("bench", manual_only=True)
    make_subject("bench")
    worker = register(svc)
    return lambda: claim(svc, worker, "bench")


def s_max_leases(svc, op):
    make_subject("q1")
    make_subject("q1")
    worker = register(svc, max_concurrent_leases=1)
    claim(svc, worker)
    return lambda: claim(svc, worker)


def s_queue_disabled(svc, op):
    make_queue("off", enabled=False)
    make_subject("off")
    worker = register(svc)
    return lambda: claim(svc, worker, "off")


def s_subject_held(svc, op):
    subject = make_subject("q1")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "x"})
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="HELD",
                       payload={"reason": "y"})


def s_hold_not_active(svc, op):
    subject = make_subject("q1")
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"reason": "x"})["hold_euid"]
    act("place_execution_hold", op, subject_euid=make_subject("q1"), expected_state="READY",
        payload={"reason": "other"})
    act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
        payload={"reason": "checked"})
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "again"})
    return lambda: act("release_execution_hold", op, subject_euid=subject,
                       expected_state="HELD", hold_euid=hold, payload={"reason": "checked"})


def s_invalid_envelope(svc, op):
    subject = make_subject("q1")
    with connection.cursor() as cur:  # another TapDB writer's broken row
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                    " '{properties,execution,attempt_count}', '\"x\"') WHERE euid = %s",
                    [subject])
    return lambda: act("place_execution_hold", op, subject_euid=subject,
                       expected_state="READY", payload={"reason": "x"})


def s_output_not_allowed(svc, op):
    subject, worker, lease = _claimed(svc)
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"outputs": [{"template_code": "data/execution/queue/1.0",
                                             "name": "forged"}]})


def s_forbidden_human_key_of_another(svc, op):
    mallory = actor("worker_human", username="mallory")
    return lambda: act("register_worker", mallory, payload={
        "worker_key": "human://alice", "worker_type": "HUMAN_SESSION"})


def s_validation_unknown_payload_field(svc, op):
    subject = make_subject("q1")
    return lambda: act("cancel_subject_execution", op, subject_euid=subject,
                       expected_state="READY", payload={"reason": "x", "extra": 1})


def s_template_mismatch(svc, op):
    make_queue("q_analysis", subject_template_codes=["data/analysis/analysis_request/1.0"])
    subject = make_subject(None, state="PENDING")
    return lambda: act("route_subject", op, subject_euid=subject, queue_key="q_analysis")


# A subject sent on to a queue that does not take its template (RULES.md#visibility): by a
# completion, a retryable failure naming the next queue, an external result, a requeue.
ANALYSIS_ONLY = {"subject_template_codes": ["data/analysis/analysis_request/1.0"]}


def s_template_mismatch_complete(svc, op):
    make_queue("q_analysis", **ANALYSIS_ONLY)
    subject, worker, lease = _claimed(svc)
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"next_queue_key": "q_analysis"})


def s_template_mismatch_fail(svc, op):
    make_queue("q_analysis", **ANALYSIS_ONLY)
    subject, worker, lease = _claimed(svc)
    return lambda: act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"retryable": True, "next_queue_key": "q_analysis"})


def s_template_mismatch_external_result(svc, op):
    make_queue("q_analysis", **ANALYSIS_ONLY)
    subject, worker, lease = _claimed(svc)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"external": {"run_id": "wf-1"}})
    return lambda: act("record_external_result", svc, subject_euid=subject,
                       expected_state="WAITING_EXTERNAL",
                       payload={"outcome": "READY", "next_queue_key": "q_analysis"})


def s_template_mismatch_requeue(svc, op):
    make_queue("q_analysis", **ANALYSIS_ONLY)
    subject = make_subject("q1")
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="READY",
                       queue_key="q_analysis", payload={"reason": "move it"})


def s_template_mismatch_requeue_own_queue(svc, op):
    # another writer left it in a queue that does not take it: requeued where it is, refused
    make_queue("q_analysis", **ANALYSIS_ONLY)
    subject = make_subject("q_analysis")
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="READY",
                       payload={"reason": "try again"})


def s_template_mismatch_register(svc, op):
    return lambda: act("register_subject", svc, queue_key="q1", payload={
        "template_code": "content/material/library/1.0", "name": "L-1"})


def s_already_routed(svc, op):
    subject = make_subject("q1")
    return lambda: act("route_subject", op, subject_euid=subject, queue_key="q1")


def s_subject_terminal(svc, op):
    subject = make_subject("q1", state="COMPLETED", terminal=True)
    return lambda: act("route_subject", svc, subject_euid=subject, queue_key="q1")


def s_out_of_scope(svc, op):
    make_queue("q_rtp", site_scope=["rtp"])
    return lambda: act("register_subject", op, queue_key="q_rtp", payload={
        "template_code": "content/material/specimen/1.0", "name": "S-1",
        "properties": {"site": "sfo"}})


@pytest.mark.django_db
def test_a_subject_without_the_scoped_property_is_said_to_have_none(tenant):
    """"this subject's site is None": Python's word for nothing, in a lab's refusal."""
    make_queue("q_bldg7", site_scope=["bldg7"])
    with pytest.raises(ActionError) as err:
        act("register_subject", actor("operator", username="op"), queue_key="q_bldg7",
            payload={"template_code": "content/material/specimen/1.0", "name": "S-2"})
    assert err.value.code == "SUBJECT_OUT_OF_SCOPE"
    assert err.value.message == ("Queue 'q_bldg7' serves site bldg7; this subject's site is"
                                 " not given.")


# Sent on to a queue whose site/platform/assay scope the subject is outside: never
# visible there either (RULES.md#visibility), by a requeue, a completion or a step's output.
def s_out_of_scope_requeue(svc, op):
    make_queue("q_rtp", site_scope=["rtp"])
    subject = make_subject("q1")  # site sfo
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="READY",
                       queue_key="q_rtp", payload={"reason": "move it"})


def s_out_of_scope_complete(svc, op):
    make_queue("q_ont", platform_scope=["ont"])
    subject, worker, lease = _claimed(svc)  # platform illumina
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"next_queue_key": "q_ont"})


# Into a queue that never offers items in the state they arrive in (it takes retries
# alone): they waited there unseen by every worker.
def s_not_offered_intake(svc, op):
    make_queue("q_retries", eligible_states=["FAILED_RETRYABLE"])
    return lambda: act("register_subject", op, queue_key="q_retries", payload={
        "template_code": "content/material/specimen/1.0", "name": "S-1"})


def s_not_offered_complete(svc, op):
    make_queue("q_retries", eligible_states=["FAILED_RETRYABLE"])
    subject, worker, lease = _claimed(svc)
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"next_queue_key": "q_retries"})


def s_not_offered_retry(svc, op):
    make_queue("q_fresh", eligible_states=["READY"])
    subject, worker, lease = _claimed(svc)
    return lambda: act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"retryable": True, "error_message": "scanner down",
                                "next_queue_key": "q_fresh"})


def s_out_of_scope_output(svc, op):
    library = "content/material/library/1.0"
    make_queue("q_lib_rtp", subject_template_codes=[library], site_scope=["rtp"])
    make_queue("q_prep", output_template_codes=[library])
    make_subject("q_prep")
    lease = claim(svc, register(svc), "q_prep")
    worker = lease["worker_euid"]
    return lambda: act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"outputs": [{"template_code": library, "name": "L",
                                             "properties": {"site": "sfo"},
                                             "execution": {"next_queue_key": "q_lib_rtp"}}]})


def s_forbidden_human_routes(svc, op):
    subject = make_subject(None, state="PENDING")
    return lambda: act("route_subject", actor("worker_human"), subject_euid=subject,
                       queue_key="q1")


def s_not_found_route_object(svc, op):
    return lambda: act("route_subject", op, subject_euid="Z-MX-999999", queue_key="q1")
def s_evidence_mismatch(svc, op):
    subject = make_subject("q1")
    return lambda: act("record_evidence_bundle", op, subject_euid=subject,
                       payload={"bundle_sha256": "0" * 64})
def _managed_queue(key_: str = "cq") -> str:
    act("create_queue", actor("admin"), queue_key=key_,
        payload={"subject_template_codes": ["content/material/specimen/1.0"], "reason": "r"})
    return key_


def s_queue_exists(svc, op):
    queue = _managed_queue()
    return lambda: act("create_queue", actor("admin"), queue_key=queue,
                       payload={"subject_template_codes": ["content/material/specimen/1.0"],
                                "reason": "again"})


def s_queue_not_managed(svc, op):
    # q1 was made directly, as another system (Bloom) writes its queues.
    return lambda: act("update_queue", actor("admin"), queue_key="q1", expected_revision=1,
                       payload={"lease_ttl_seconds": 60, "reason": "r"})


def s_replacement_required(svc, op):
    queue = _managed_queue()
    return lambda: act("update_queue", actor("admin"), queue_key=queue, expected_revision=1,
                       payload={"subject_template_codes": ["content/material/library/1.0"],
                                "reason": "r"})


def s_queue_in_use(svc, op):
    queue = _managed_queue()
    make_subject(queue)  # routed to the key a rename would leave behind
    return lambda: act("replace_queue", actor("admin"), queue_key=queue, expected_revision=1,
                       payload={"new_queue_key": "cq2", "reason": "r",
                                "subject_template_codes": ["content/material/specimen/1.0"]})


def s_revision_conflict_queue(svc, op):
    queue = _managed_queue()
    return lambda: act("set_queue_enabled", actor("admin"), queue_key=queue,
                       expected_revision=7, payload={"enabled": False, "reason": "r"})


def s_validation_queue_ttl(svc, op):
    return lambda: act("create_queue", actor("admin"), queue_key="cq",
                       payload={"subject_template_codes": ["content/material/specimen/1.0"],
                                "lease_ttl_seconds": 1, "reason": "r"})


def s_forbidden_operator_creates_queue(svc, op):
    return lambda: act("create_queue", op, queue_key="cq",
                       payload={"subject_template_codes": ["content/material/specimen/1.0"],
                                "reason": "r"})


def s_queue_head_mismatch(svc, op):
    act("create_queue", actor("admin"), queue_key="line", payload={
        "subject_template_codes": ["content/material/specimen/1.0"], "strict_order": True,
        "reason": "r"})
    make_subject("line", priority=5)
    second = make_subject("line", priority=0)
    instrument = register(svc, worker_type="INSTRUMENT_ADAPTER")
    return lambda: act("claim_queue_item", svc, worker_euid=instrument, subject_euid=second)


# ------------------------------------------------------------------ approvals


def _asked(op_name: str = "ann"):
    ann = person(op_name, "operator")
    subject, hold = integrity_held(ann)
    return ann, subject, hold, request_release(ann, subject, hold)["approval_euid"]


def s_approval_required(svc, op):
    subject, hold = integrity_held(op)
    return lambda: act("release_execution_hold", op, subject_euid=subject, hold_euid=hold,
                       expected_state="HELD", payload={"reason": "x"})


def s_approval_policy_error(svc, op):
    subject, hold = integrity_held(op)

    def attempt():
        with override_settings(BLOOMOPS_APPROVAL_RULES=["no_such_rule"]):
            act("release_execution_hold", op, subject_euid=subject, hold_euid=hold,
                expected_state="HELD", payload={"reason": "x"})
    return attempt


def s_approval_not_needed(svc, op):
    subject, hold = integrity_held(op, "LABEL_ISSUE")
    return lambda: request_release(op, subject, hold)


def s_approval_pending(svc, op):
    ann, subject, hold, _ = _asked()
    return lambda: request_release(op, subject, hold)


def s_approval_not_pending(svc, op):
    ann, subject, hold, approval = _asked()
    act("cancel_approval", ann, payload={"approval_euid": approval, "reason": "not needed"})
    return lambda: decide(person("bob", "operator"), approval)


def s_approval_expired(svc, op):
    ann, subject, hold, approval = _asked()
    clock.advance(settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    return lambda: decide(person("bob", "operator"), approval)


def s_self_approval(svc, op):
    ann, subject, hold, approval = _asked()
    return lambda: decide(ann, approval)


def s_approval_tampered(svc, op):
    ann, subject, hold, approval = _asked()
    obj = load(euid=approval, tenant=settings.TAPDB_TENANT_ID)
    save_props(obj, {**obj.props, "requested_by": "bob"})  # rewritten outside bloomops
    return lambda: decide(person("bob", "operator"), approval)


def s_signature_invalid(svc, op):
    ann, subject, hold, approval = _asked()
    return lambda: decide(person("bob", "operator"), approval, password="guess")


def s_revision_conflict_approval(svc, op):
    ann, subject, hold, approval = _asked()
    obj = load(euid=subject, tenant=settings.TAPDB_TENANT_ID)
    save_props(obj, {**obj.props, "execution": {**obj.envelope,
                                                "revision": obj.envelope["revision"] + 1}})
    return lambda: decide(person("bob", "operator"), approval)


SCENARIOS = {
    "VALIDATION_ERROR": [s_validation, s_validation_priority, s_validation_retry_class,
                         s_validation_idempotency_key, s_validation_unknown_action,
                         s_validation_unknown_payload_field, s_validation_queue_ttl],
    "FORBIDDEN": [s_forbidden_human_holds, s_forbidden_operator_expires,
                  s_forbidden_service_requeues, s_forbidden_no_role,
                  s_forbidden_human_key_of_another, s_forbidden_operator_creates_queue],
    "NOT_FOUND": [s_not_found_subject, s_not_found_queue],
    "STATE_CONFLICT": [s_state_conflict],
    "REVISION_CONFLICT": [s_revision_conflict, s_revision_conflict_queue],
    "IDEMPOTENCY_CONFLICT": [s_idempotency_conflict],
    "LEASE_EXPIRED": [s_lease_expired],
    "LEASE_NOT_OWNED": [s_lease_not_owned_other_worker, s_lease_not_owned_other_user],
    "LEASE_NOT_ACTIVE": [s_lease_not_active],
    "NOT_VISIBLE": [s_not_visible],
    "NO_WORK": [s_no_work],
    "WORKER_UNAVAILABLE": [s_worker_unavailable],
    "WORKER_NOT_ELIGIBLE": [s_worker_not_eligible, s_worker_not_eligible_manual_only],
    "MAX_LEASES_REACHED": [s_max_leases],
    "QUEUE_DISABLED": [s_queue_disabled],
    "SUBJECT_HELD": [s_subject_held],
    "HOLD_NOT_ACTIVE": [s_hold_not_active],
    "INVALID_ENVELOPE": [s_invalid_envelope],
    "OUTPUT_NOT_ALLOWED": [s_output_not_allowed],
    "SUBJECT_TEMPLATE_MISMATCH": [s_template_mismatch, s_template_mismatch_register,
                                  s_template_mismatch_complete, s_template_mismatch_fail,
                                  s_template_mismatch_external_result,
                                  s_template_mismatch_requeue,
                                  s_template_mismatch_requeue_own_queue],
    "SUBJECT_ALREADY_ROUTED": [s_already_routed],
    "SUBJECT_TERMINAL": [s_subject_terminal],
    "SUBJECT_OUT_OF_SCOPE": [s_out_of_scope, s_out_of_scope_requeue, s_out_of_scope_complete,
                             s_out_of_scope_output, s_not_offered_intake,
                             s_not_offered_complete, s_not_offered_retry],
    "EVIDENCE_MISMATCH": [s_evidence_mismatch],
    "QUEUE_EXISTS": [s_queue_exists],
    "QUEUE_NOT_MANAGED": [s_queue_not_managed],
    "REPLACEMENT_REQUIRED": [s_replacement_required],
    "QUEUE_IN_USE": [s_queue_in_use],
    "QUEUE_HEAD_MISMATCH": [s_queue_head_mismatch],
    "APPROVAL_REQUIRED": [s_approval_required],
    "APPROVAL_POLICY_ERROR": [s_approval_policy_error],
    "APPROVAL_NOT_NEEDED": [s_approval_not_needed],
    "APPROVAL_PENDING": [s_approval_pending],
    "APPROVAL_NOT_PENDING": [s_approval_not_pending],
    "APPROVAL_EXPIRED": [s_approval_expired],
    "SELF_APPROVAL": [s_self_approval],
    "APPROVAL_TAMPERED": [s_approval_tampered],
    "SIGNATURE_INVALID": [s_signature_invalid],
}
SCENARIOS["REVISION_CONFLICT"] += [s_revision_conflict_approval]
SCENARIOS["FORBIDDEN"] += [s_forbidden_human_routes]
SCENARIOS["NOT_FOUND"] += [s_not_found_route_object]

# Reasons (RULES.md#holds, RULES.md#leases): an action that stops, ends or changes someone's
# work says why; blank is missing. A hold code is one of the lab's configured codes.
def s_validation_release_without_reason(svc, op):
    subject = make_subject("q1")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "x"})
    return lambda: act("release_execution_hold", op, subject_euid=subject,
                       expected_state="HELD")


def s_validation_force_expiry_blank_reason(svc, op):
    subject, worker, lease = _claimed(svc)
    return lambda: act("expire_queue_lease", actor("admin"), lease_euid=lease["lease_euid"],
                       payload={"reason": " \n "})


def s_validation_drain_without_reason(svc, op):
    worker = register(svc)
    return lambda: act("set_worker_status", actor("admin"), worker_euid=worker,
                       payload={"operation": "drain"})


def s_validation_disable_blank_reason(svc, op):
    worker = register(svc)
    return lambda: act("set_worker_status", actor("admin"), worker_euid=worker,
                       payload={"operation": "disable", "reason": "   "})


def s_validation_unknown_hold_code(svc, op):
    subject = make_subject("q1")
    return lambda: act("place_execution_hold", op, subject_euid=subject,
                       expected_state="READY",
                       payload={"reason": "x", "hold_code": "COFFEE_BREAK"})


SCENARIOS["VALIDATION_ERROR"] += [
    s_validation_release_without_reason, s_validation_force_expiry_blank_reason,
    s_validation_drain_without_reason, s_validation_disable_blank_reason,
    s_validation_unknown_hold_code]
SCENARIOS["FORBIDDEN"] += [bench_rules.s_forbidden_human_cancels]
SCENARIOS["OUTSIDE_PROFILE"] = [service_bounds.s_outside_profile_register,
                                service_bounds.s_outside_profile_claim]
SCENARIOS["NEXT_QUEUE_NOT_ALLOWED"] = [bench_rules.s_next_queue_not_allowed,
                                      bench_rules.s_retry_elsewhere_not_allowed]
CASES = [(code, fn) for code, fns in SCENARIOS.items() for fn in fns]


@pytest.mark.django_db
@pytest.mark.parametrize(("code", "scenario"), CASES, ids=[f.__name__ for _, f in CASES])
def test_refusal_writes_nothing(tenant, code, scenario):
    svc, op = actor(*SERVICE), actor("operator")
    make_queue("q1")
    attempt = scenario(svc, op)
    before = counts()
    with pytest.raises(ActionError) as err:
        attempt()
    assert err.value.code == code
    assert err.value.http_status == HTTP_STATUS[code]
    assert err.value.message  # a readable reason for the operator
    assert counts() == before


def test_every_code_is_covered():
    assert set(SCENARIOS) | {"UNAUTHENTICATED", "CONCURRENT_UPDATE",
                             "WORKER_LIMIT_REACHED"} == set(HTTP_STATUS)


@pytest.mark.django_db
def test_an_account_registers_workers_up_to_its_limit(tenant, settings):
    """One service token registered 1,200 workers, and every read of workers, the statistics
    and /metrics slowed with them. Past the limit a new key is refused and nothing is
    written; its own workers re-register, a retired one frees its place, and other
    accounts and people's own workers are not counted against it."""
    settings.BLOOMOPS_MAX_WORKERS_PER_ACCOUNT = 2
    svc, other, adm = actor(*SERVICE), actor("worker_service", username="svc-2"), \
        actor("admin", username="adm")
    first = register(svc, "lab://one")
    register(svc, "lab://two")
    before = counts()
    with pytest.raises(ActionError) as err:
        register(svc, "lab://three")
    assert err.value.code == "WORKER_LIMIT_REACHED" and err.value.http_status == 409
    assert "(2)" in err.value.message and counts() == before
    assert register(svc, "lab://one") == first  # a worker starting again is no new one
    register(other, "lab://other")
    register(actor("worker_human", username="sam"), worker_type="HUMAN_SESSION")
    act("set_worker_status", adm, worker_euid=first,
        payload={"operation": "retire", "reason": "instrument sold"})
    register(svc, "lab://three")


@pytest.mark.usefixtures("committed")
def test_concurrent_update_when_a_row_stays_locked(tenant, settings):
    """A subject row held by another transaction longer than the lock timeout is refused
    with CONCURRENT_UPDATE, and nothing is written."""
    settings.BLOOMOPS_LOCK_TIMEOUT_MS = 200
    op = actor("operator")
    make_queue("q1")
    subject = make_subject("q1")
    def lock() -> None:
        with connection.cursor() as cur:
            cur.execute("SELECT 1 FROM generic_instance WHERE euid = %s FOR UPDATE", [subject])

    with locked_elsewhere(lock):
        before = counts()
        with pytest.raises(ActionError) as err:
            act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
                idempotency_key=key("c"), payload={"reason": "x"})
        assert err.value.code == "CONCURRENT_UPDATE"
        assert counts() == before
    assert envelope(subject)["state"] == "READY"


@pytest.mark.parametrize("payload", [
    {"retryable": False, "error_class": "PERMANENT_INPUT", "error_message": "tube cracked"},
    {"error_class": "BUSINESS_RULE_HOLD", "error_message": "consent withdrawn"}])
@pytest.mark.django_db
def test_a_failure_that_sends_the_item_nowhere_may_name_a_queue_offering_no_retries(
        tenant, payload):
    """A failure that ends or holds the item was refused for naming a queue that offers no
    FAILED_RETRYABLE items ("it would arrive FAILED_RETRYABLE"): no retry follows, and the
    lease stayed until it ran out."""
    svc = actor(*SERVICE)
    make_queue("q1")
    make_queue("q_fresh", eligible_states=["READY"])
    subject, worker, lease = _claimed(svc)
    done = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
               expected_state="READY", payload={**payload, "next_queue_key": "q_fresh"})
    assert done["state"] in ("FAILED_TERMINAL", "HELD")
