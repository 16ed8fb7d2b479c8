"""Fields a careless or hostile caller sends that once passed: each refused with a clear
error and nothing written (they were stored, ignored or answered as something else)."""

from __future__ import annotations

import pytest

from tests.api_helpers import api_for, error_code
from tests.engine import SPECIMEN, counts, make_queue, make_subject

pytestmark = pytest.mark.django_db


@pytest.fixture
def apis(tenant, users):
    make_queue("q1")
    return {role: api_for(user) for role, user in users.items()}


def refused_field(response, field: str) -> str:
    assert response.status_code == 400, response.content
    assert error_code(response) == "VALIDATION_ERROR"
    assert response.json()["error"]["details"]["field"] == field
    return response.json()["error"]["message"]


# ------------------------------------------------------------------ queue keys


@pytest.mark.parametrize("fields,field", [
    ({"queue_key": "atk\n"}, "queue_key"),
    ({"queue_key": "atk", "default_next_queue_key": "q1\n"}, "default_next_queue_key"),
    ({"queue_key": "atk", "next_queue_keys": ["q1\n"]}, "next_queue_keys.0"),
])
def test_a_queue_key_ending_in_a_newline_is_refused(apis, fields, field):
    """Python's "$" matched before a final newline: "q1\\n" was stored as a next queue that
    no subject could ever be routed to."""
    before = counts()
    r = apis["admin"].act("create-queue", subject_template_codes=[SPECIMEN], reason="x",
                          **fields)
    refused_field(r, field)
    assert counts() == before


def test_next_queue_keys_are_stored_as_the_engine_reads_them(tenant, users):
    """The engine strips what it reads: a key sent padded is kept stripped, not as sent."""
    from bloomops.execution.actions.queue_fields import clean_settings

    assert clean_settings({"next_queue_keys": [" q1 ", "q1", "q2"]})["next_queue_keys"] == [
        "q1", "q2"]


# ------------------------------------------------------------------ keys and names people read


@pytest.mark.parametrize("key", ["atk://A\u200b", "atk://\u0085x\u001b[31m", "a\nb",
                                 "atk://\u2028x"])
def test_a_worker_key_with_invisible_or_control_characters_is_refused(apis, key):
    """A zero-width space made a key read exactly like another account's worker in every
    list; a terminal escape coloured every log line that printed it."""
    before = counts()
    r = apis["worker_service"].act("register-worker", worker_key=key)
    assert "printable" in refused_field(r, "worker_key")
    r = apis["worker_service"].act("register-worker", worker_key="atk://B",
                                   display_name=f"Extractor {key}")
    refused_field(r, "display_name")
    assert counts() == before
    assert apis["worker_service"].act("register-worker",
                                      worker_key="atk://Ünïcödé 1").status_code == 200


def test_a_queue_display_name_must_be_one_printable_line(apis):
    before = counts()
    r = apis["admin"].act("create-queue", queue_key="atk", subject_template_codes=[SPECIMEN],
                          reason="x", display_name="Extraction\u001b[2J")
    refused_field(r, "display_name")
    assert counts() == before


# ------------------------------------------------------------------ guards with nothing to guard


@pytest.mark.parametrize("fields,field", [
    ({"expected_state": "COMPLETED"}, "expected_state"),
    ({"expected_revision": 5}, "expected_revision"),
    ({"worker_euid": "Z-AX-1"}, "worker_euid"),
])
def test_register_subject_refuses_envelope_fields_it_cannot_honour(apis, fields, field):
    """A new subject has no state or revision to expect: the guard was silently skipped and
    the subject made READY."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Tube", **fields)
    assert "does not apply to register_subject" in refused_field(r, field)
    assert counts() == before


def test_a_worker_action_refuses_a_subject_it_does_not_act_on(apis):
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="w1").json()["worker_euid"]
    subject = make_subject("q1")
    before = counts()
    r = api.act("heartbeat-worker", worker_euid=worker, subject_euid=subject)
    refused_field(r, "subject_euid")
    r = api.act("register-worker", worker_key="w1", expected_state="READY")
    refused_field(r, "expected_state")
    assert counts() == before


# ------------------------------------------------------------------ what a subject is


def test_the_engine_s_own_objects_are_not_subjects(apis):
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="w1").json()["worker_euid"]
    subject = make_subject("q1")
    claim = api.act("claim", worker_euid=worker, queue_key="q1").json()
    assert claim["subject_euid"] == subject
    reader = apis["operator"]
    assert reader.get(f"/subjects/{subject}").status_code == 200
    for euid in (worker, claim["lease_euid"], claim["action_euid"]):
        r = reader.get(f"/subjects/{euid}")
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", euid


# ------------------------------------------------------------------ words


def test_the_intake_batch_refusal_names_what_was_refused(apis):
    r = apis["worker_human"].post("/actions/intake-batch", {"items": [{
        "action": "register_subject", "request": {
            "idempotency_key": "b1", "queue_key": "q1", "template_code": SPECIMEN,
            "name": "Tube"}}]})
    assert r.status_code == 403 and error_code(r) == "FORBIDDEN"
    message = r.json()["error"]["message"]
    assert "route or register subjects" in message and "route subject." not in message
