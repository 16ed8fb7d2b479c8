"""An external result is the dispatching worker's (RULES.md#requests): another service account
finished any subject waiting on external work, and a worker an admin had disabled still
reported, by leaving its worker_euid out."""

from __future__ import annotations

import pytest

from tests.engine import (
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    refused,
    register,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(tenant):
    make_queue("q1")
    pipeline = actor("worker_service", username="pipeline")
    subject = make_subject("q1")
    worker = register(pipeline)
    lease = claim(pipeline, worker)["lease_euid"]
    act("complete_queue_execution", pipeline, worker_euid=worker, lease_euid=lease,
        expected_state="READY", payload={"external": {"run_id": "wf-1"}})
    return {"pipeline": pipeline, "subject": subject, "worker": worker}


def _result(who, subject: str, **fields):
    return act("record_external_result", who, subject_euid=subject,
               expected_state="WAITING_EXTERNAL", payload={"outcome": "COMPLETED"}, **fields)


def test_another_account_may_not_report_a_result_it_did_not_dispatch(waiting):
    other = actor("worker_service", username="intruder")
    theirs = register(other)
    refused("LEASE_NOT_OWNED", lambda: _result(other, waiting["subject"]))
    refused("LEASE_NOT_OWNED", lambda: _result(other, waiting["subject"], worker_euid=theirs))
    # nor its own other worker named in the dispatcher's place
    spare = register(waiting["pipeline"])
    err = refused("LEASE_NOT_OWNED", lambda: _result(waiting["pipeline"], waiting["subject"],
                                                      worker_euid=spare))
    assert err.details["dispatched_by"] == waiting["worker"]
    assert envelope(waiting["subject"])["state"] == "WAITING_EXTERNAL"
    # the dispatcher's account reports it, named or not
    assert _result(waiting["pipeline"], waiting["subject"])["state"] == "COMPLETED"


def test_a_disabled_dispatcher_s_result_is_refused_unless_an_admin_records_it(waiting):
    admin = actor("admin")
    act("set_worker_status", admin, worker_euid=waiting["worker"],
        payload={"operation": "disable", "reason": "leaking credentials"})
    for fields in ({}, {"worker_euid": waiting["worker"]}):
        refused("WORKER_UNAVAILABLE",
                 lambda f=fields: _result(waiting["pipeline"], waiting["subject"], **f))
    assert _result(admin, waiting["subject"])["state"] == "COMPLETED"
