"""What the engine writes beside the envelope that readers and auditors rely on: the lineage of
dead letters and holds (relationships are lineage, RULES.md#objects) and one log line for
every action, done or refused (RULES.md#requests, "Logged")."""

from __future__ import annotations

import json
import logging

import pytest

from bloomops.execution import selectors
from bloomops.tapdb.db import fetch_all
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    refused,
)
from tests.engine import register as register_worker

pytestmark = pytest.mark.django_db


def parents_of(euid: str) -> set[tuple[str, str]]:
    """(parent EUID, relationship) of every edge into ``euid`` but the action records'."""
    return {(r["euid"], r["rel"]) for r in fetch_all(
        "SELECT p.euid, l.relationship_type AS rel FROM generic_instance_lineage l"
        " JOIN generic_instance p ON p.uid = l.parent_instance_uid"
        " JOIN generic_instance c ON c.uid = l.child_instance_uid"
        " WHERE c.euid = %s AND l.relationship_type <> 'executed_on' AND NOT l.is_deleted",
        [euid])}


def test_a_dead_letter_hangs_from_its_subject_its_queue_and_the_failed_attempt(tenant):
    queue = make_queue("q1", max_attempts_default=1)
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    worker = register_worker(svc)
    lease = claim(svc, worker)
    failed = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
                 expected_state="READY", payload={"retryable": True, "error_message": "clot"})
    letter = failed["dead_letter_euid"]
    assert parents_of(letter) == {
        (subject, "execution_subject_dead_letter"),
        (queue["euid"], "execution_queue_dead_letter"),
        (lease["execution_record_euid"], "execution_record_dead_letter")}
    # the workbench and the queue's count find it by those lines
    assert [d["euid"] for d in selectors.dead_letters()] == [letter]


def test_a_hold_hangs_from_its_subject_its_queue_and_the_worker_that_placed_it(tenant):
    """A failure of class BUSINESS_RULE_HOLD is a worker's: the hold names it by lineage."""
    queue = make_queue("q1")
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    worker = register_worker(svc)
    lease = claim(svc, worker)
    held = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
               expected_state="READY",
               payload={"error_class": "BUSINESS_RULE_HOLD", "error_message": "needs a decision"})
    assert parents_of(held["hold_euid"]) == {
        (subject, "execution_subject_hold"), (queue["euid"], "execution_queue_hold"),
        (worker, "execution_actor_hold")}


def test_an_operators_hold_hangs_from_its_subject_and_its_queue(tenant):
    queue = make_queue("q1")
    subject = make_subject("q1")
    held = act("place_execution_hold", actor("operator"), subject_euid=subject,
               expected_state="READY", payload={"reason": "reagent lot recalled"})
    assert parents_of(held["hold_euid"]) == {
        (subject, "execution_subject_hold"), (queue["euid"], "execution_queue_hold")}
    assert envelope(subject)["hold_state"] == "ACTIVE"


def _lines(caplog, event: str) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records
            if r.name == "bloomops.execution" and f'"event": "{event}"' in r.getMessage()]


def test_every_action_done_or_refused_is_one_log_line_with_the_specs_fields(tenant, caplog):
    """Every queue action logs tenant, subject, worker, lease, queue key, action key,
    idempotency key, expected state, terminal status, duration. A refused one (a completion
    after its lease was ended elsewhere) wrote no line: it could not be traced."""
    make_queue("q1")
    subject = make_subject("q1")
    svc, op = actor(*SERVICE), actor("operator")
    worker = register_worker(svc)
    lease = claim(svc, worker)
    caplog.set_level(logging.INFO, logger="bloomops.execution")
    caplog.clear()
    act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
        idempotency_key="cancel-1", payload={"reason": "withdrawn by the clinic: patient X"})
    refused("LEASE_NOT_ACTIVE", lambda: act(
        "complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", idempotency_key="late-1",
        payload={"result_snapshot": {"note": "patient Y's second tube"}}))
    (done,) = _lines(caplog, "execution_action")
    assert {k: done[k] for k in ("tenant", "action_key", "subject_euid", "queue_key",
                                 "idempotency_key", "expected_state", "terminal_status",
                                 "replayed")} == {
        "tenant": tenant, "action_key": "cancel_subject_execution", "subject_euid": subject,
        "queue_key": "q1", "idempotency_key": "cancel-1", "expected_state": "READY",
        "terminal_status": "CANCELED", "replayed": False}
    assert done["duration_ms"] >= 0 and done["action_euid"]
    (refusal,) = _lines(caplog, "execution_refused")
    assert {k: refusal[k] for k in ("tenant", "action_key", "worker_euid", "lease_euid",
                                    "idempotency_key", "expected_state", "code")} == {
        "tenant": tenant, "action_key": "complete_queue_execution", "worker_euid": worker,
        "lease_euid": lease["lease_euid"], "idempotency_key": "late-1",
        "expected_state": "READY", "code": "LEASE_NOT_ACTIVE"}
    assert refusal["duration_ms"] >= 0
    assert "patient" not in caplog.text  # a payload's words are never logged


def test_an_idle_workers_poll_is_not_logged_as_a_refusal(tenant, caplog):
    make_queue("q1")
    svc = actor(*SERVICE)
    worker = register_worker(svc)
    caplog.set_level(logging.INFO, logger="bloomops.execution")
    caplog.clear()
    refused("NO_WORK", lambda: claim(svc, worker))
    assert _lines(caplog, "execution_refused") == []
    caplog.set_level(logging.DEBUG, logger="bloomops.execution")
    refused("NO_WORK", lambda: claim(svc, worker))
    assert [line["code"] for line in _lines(caplog, "execution_refused")] == ["NO_WORK"]


def test_a_refused_requests_own_words_are_logged_no_longer_than_a_line(tenant, caplog):
    """A key refused for its length was logged whole: a caller could fill the log."""
    svc = actor(*SERVICE)
    caplog.set_level(logging.INFO, logger="bloomops.execution")
    refused("VALIDATION_ERROR", lambda: act("register_worker", svc,
                                            idempotency_key="k" * 5000,
                                            payload={"worker_key": "w1"}))
    (line,) = _lines(caplog, "execution_refused")
    assert line["code"] == "VALIDATION_ERROR" and line["field"] == "idempotency_key"
    assert line["idempotency_key"] == "k" * 200


def test_a_key_another_writer_created_meanwhile_is_a_conflict_not_a_500(tenant, monkeypatch):
    """Two writers registering one worker key at once: the second's insert meets the unique
    index (the first committed after the second looked). It was an IntegrityError, a 500 on
    the API; it is CONCURRENT_UPDATE, to be tried again, and writes nothing."""
    from bloomops.execution.actions import workers

    svc = actor(*SERVICE)
    register_worker(svc, "w1")
    before = counts()
    monkeypatch.setattr(workers, "worker_by_key", lambda *a, **k: None)  # looked too early
    refused("CONCURRENT_UPDATE", lambda: register_worker(svc, "w1"))
    assert counts() == before
