"""The engine's rules behind the bench's choices: the next queues a flow allows on complete
(next_queue_keys, NEXT_QUEUE_NOT_ALLOWED) and the retry classes a person may fail with
(OPERATOR_CANCELED is an operator's)."""

from __future__ import annotations

import pytest

from bloomops.execution.errors import ActionError
from bloomops.execution.policy import failure_classes_for, next_queues_allowed
from bloomops.execution.states import RetryClass
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    register,
)


def _human_claim(queue_key: str = "q1"):
    human = actor("worker_human", username="bench-person")
    worker = register(human, worker_type="HUMAN_SESSION")
    subject = make_subject(queue_key)
    lease = claim(human, worker, queue_key)
    return human, worker, subject, lease


def s_forbidden_human_cancels(svc, op):
    human, worker, subject, lease = _human_claim()
    return lambda: act("fail_queue_execution", human, lease_euid=lease["lease_euid"],
                       worker_euid=worker, expected_state="READY",
                       payload={"error_class": "OPERATOR_CANCELED", "error_message": "no"})


def _leaving_a_flow(svc, action_key: str, payload: dict):
    """A subject claimed from "lim", whose flow leads to q2 and q3 only, and the request
    that sends it to "ont" instead."""
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=["q3"])
    for other in ("q2", "q3", "ont"):
        make_queue(other)
    subject = make_subject("lim")
    worker = register(svc)
    lease = claim(svc, worker, "lim")
    return lambda: act(action_key, svc, lease_euid=lease["lease_euid"], worker_euid=worker,
                       expected_state="READY", subject_euid=subject,
                       payload={**payload, "next_queue_key": "ont"})


def s_next_queue_not_allowed(svc, op):
    return _leaving_a_flow(svc, "complete_queue_execution", {})


def s_retry_elsewhere_not_allowed(svc, op):
    """A retryable failure naming another queue for its retry left the queue's flow behind:
    the subject retried on a line the flow never leads to."""
    return _leaving_a_flow(svc, "fail_queue_execution", {"error_class": "TRANSIENT_SYSTEM"})


def test_a_retry_may_stay_in_its_queue_or_follow_the_flow(db, tenant):
    svc = actor(*SERVICE)
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=["q3"],
               required_worker_capabilities=[])
    make_queue("q3", required_worker_capabilities=[])
    worker = register(svc, max_concurrent_leases=2)
    for target in ("lim", "q3"):
        subject = make_subject("lim")
        lease = claim(svc, worker, "lim")
        act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
            expected_state="READY", subject_euid=subject,
            payload={"error_class": "TRANSIENT_SYSTEM", "next_queue_key": target})
        assert envelope(subject)["next_queue_key"] == target


def test_the_allowed_next_queues_are_the_default_then_the_listed():
    assert next_queues_allowed({}) is None
    assert next_queues_allowed({"default_next_queue_key": "q2"}) is None
    assert next_queues_allowed({"default_next_queue_key": "q2",
                                "next_queue_keys": ["q3", "q2"]}) == ["q2", "q3"]
    assert next_queues_allowed({"next_queue_keys": []}) == []


def test_only_operators_admins_and_services_may_cancel_through_a_failure():
    assert RetryClass.OPERATOR_CANCELED not in failure_classes_for({"worker_human"})
    assert len(failure_classes_for({"worker_human"})) == len(RetryClass) - 1
    for role in ("operator", "admin", "worker_service"):
        assert RetryClass.OPERATOR_CANCELED in failure_classes_for({role})


@pytest.mark.django_db
@pytest.mark.parametrize("target", ["q2", "q3"])
def test_completing_to_a_queue_the_flow_allows_moves_the_item(tenant, target):
    svc = actor(*SERVICE)
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=["q3"])
    make_queue("q2")
    make_queue("q3")
    subject = make_subject("lim")
    worker = register(svc)
    lease = claim(svc, worker, "lim")
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": target})
    assert envelope(subject)["next_queue_key"] == target


@pytest.mark.django_db
def test_a_refused_next_queue_names_the_allowed_ones_and_writes_nothing(tenant):
    attempt = s_next_queue_not_allowed(actor(*SERVICE), actor("operator"))
    before = counts()
    with pytest.raises(ActionError) as err:
        attempt()
    assert err.value.code == "NEXT_QUEUE_NOT_ALLOWED"
    assert err.value.details["allowed"] == ["q2", "q3"]
    assert "q2, q3" in err.value.message
    assert counts() == before


@pytest.mark.django_db
def test_a_queue_without_next_queue_keys_lets_a_completion_go_anywhere(tenant):
    svc = actor(*SERVICE)
    make_queue("q1", default_next_queue_key="q2")
    make_queue("q2")
    make_queue("elsewhere")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": "elsewhere"})
    assert envelope(subject)["next_queue_key"] == "elsewhere"


@pytest.mark.django_db
def test_a_person_fails_with_any_other_class(tenant):
    make_queue("q1")
    human, worker, subject, lease = _human_claim()
    act("fail_queue_execution", human, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"error_class": "PERMANENT_INPUT",
                                         "error_message": "label unreadable"})
    assert envelope(subject)["state"] == "FAILED_TERMINAL"


@pytest.mark.django_db
@pytest.mark.parametrize("value", [["Bad Key"], "q2", [""], ["q2"] * 101])
def test_next_queue_keys_are_checked_when_a_queue_is_made(tenant, value):
    with pytest.raises(ActionError) as err:
        act("create_queue", actor("admin"), queue_key="lim", payload={
            "subject_template_codes": ["content/material/specimen/1.0"],
            "next_queue_keys": value, "reason": "r"})
    assert err.value.code == "VALIDATION_ERROR"


@pytest.mark.django_db
def test_next_queue_keys_are_kept_in_the_queue_configuration(tenant):
    from bloomops.execution import selectors

    act("create_queue", actor("admin"), queue_key="lim", payload={
        "subject_template_codes": ["content/material/specimen/1.0"],
        "default_next_queue_key": "q2", "next_queue_keys": ["q3", "q3"], "reason": "r"})
    assert selectors.queue_config("lim")["config"]["next_queue_keys"] == ["q3"]


@pytest.mark.django_db
def test_a_template_another_writer_adds_is_read_as_visibility_reads_it(tenant):
    """A template added after this process read its templates (another writer, e.g. Bloom
    seeding its pack) is known to the completion's check as it is to visibility: a subject
    of it completes into another queue that takes it, and not into one that does not."""
    from django.db import connection

    from bloomops.tapdb.templates import template


    specimen = template(SPECIMEN)  # the process has read its templates
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO generic_template (euid, euid_prefix, euid_seq, name,"
            " polymorphic_discriminator, category, type, subtype, version, instance_prefix,"
            " instance_polymorphic_identity, json_addl, bstatus)"
            " SELECT '', '', 0, 'swab', polymorphic_discriminator, category, type, 'swab',"
            " version, instance_prefix, instance_polymorphic_identity, json_addl, bstatus"
            " FROM generic_template WHERE uid = %s RETURNING uid", [specimen.uid])
        (swab_uid,) = cur.fetchone()
    swab = "content/material/swab/1.0"
    make_queue("q1")  # specimens only
    make_queue("swabs", subject_template_codes=[swab])
    make_queue("swabs_next", subject_template_codes=[swab])
    svc = actor(*SERVICE)
    subject = make_subject("swabs")
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET template_uid = %s WHERE euid = %s",
                    [swab_uid, subject])
    worker = register(svc)
    lease = claim(svc, worker, "swabs")
    assert lease["subject_euid"] == subject
    with pytest.raises(ActionError) as err:
        act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
            worker_euid=worker, expected_state="READY", payload={"next_queue_key": "q1"})
    assert err.value.code == "SUBJECT_TEMPLATE_MISMATCH" and swab in err.value.message
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": "swabs_next"})
    assert envelope(subject)["next_queue_key"] == "swabs_next"


@pytest.mark.django_db
def test_an_external_result_moves_the_item_where_its_step_s_flow_allows(tenant):
    """An external system reporting READY finishes the step its queue dispatched: it was
    free to send the item to any queue the flow of that step does not list."""
    svc = actor(*SERVICE)
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=["q3"])
    for other in ("q2", "q3", "ont"):
        make_queue(other)
    subject = make_subject("lim")
    worker = register(svc)
    lease = claim(svc, worker, "lim")
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"external": {"run_id": "wf-7"}})
    before = counts()
    with pytest.raises(ActionError) as err:
        act("record_external_result", svc, subject_euid=subject,
            expected_state="WAITING_EXTERNAL", payload={"outcome": "READY",
                                                        "next_queue_key": "ont"})
    assert err.value.code == "NEXT_QUEUE_NOT_ALLOWED"
    assert err.value.details["allowed"] == ["q2", "q3"]
    assert counts() == before
    act("record_external_result", svc, subject_euid=subject, expected_state="WAITING_EXTERNAL",
        payload={"outcome": "READY", "next_queue_key": "q3"})
    assert envelope(subject)["next_queue_key"] == "q3"


@pytest.mark.django_db
def test_what_a_step_makes_goes_only_where_its_flow_lets_items_go(tenant):
    """A completion's outputs were sent to any queue that took them: a step limited to
    q2 and q3 routed its library into a queue its flow does not list."""
    svc = actor(*SERVICE)
    library = "content/material/library/1.0"
    make_queue("lim", default_next_queue_key="q2", next_queue_keys=["q3"],
               output_template_codes=[library])
    for other in ("q2", "q3", "ont"):
        make_queue(other, subject_template_codes=[SPECIMEN, library])
    make_subject("lim")
    worker = register(svc)
    lease = claim(svc, worker, "lim")

    def complete(output_queue: str):
        return act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                   worker_euid=worker, expected_state="READY", payload={
                       "next_queue_key": "q2", "outputs": [{
                           "template_code": library, "name": "L1",
                           "execution": {"state": "READY", "next_queue_key": output_queue}}]})

    before = counts()
    with pytest.raises(ActionError) as err:
        complete("ont")
    assert err.value.code == "NEXT_QUEUE_NOT_ALLOWED" and err.value.details["index"] == 0
    assert err.value.message.startswith("outputs[0]: ") and "q2, q3" in err.value.message
    assert counts() == before
    made = complete("q3")["output_euids"]
    assert envelope(made[0])["next_queue_key"] == "q3"
