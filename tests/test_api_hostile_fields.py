"""Fields a careless or hostile caller sends that once passed: each refused with a clear
error and nothing written (they were stored, ignored or answered as something else)."""

from __future__ import annotations

import pytest

from tests.api_helpers import api_for, error_code
from tests.engine import SPECIMEN, act, actor, counts, make_queue, make_subject, refused

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
                                 "atk://\u2028x", "atk://svc-1\u3164", "atk://svc-1\u2800",
                                 "atk://svc-1\u034f", "atk://svc-1\ufe0f",
                                 "atk://cafe\u0301"])
def test_a_worker_key_with_invisible_or_control_characters_is_refused(apis, key):
    """A zero-width space made a key read exactly like another account's worker in every
    list; a terminal escape coloured every log line that printed it."""
    before = counts()
    r = apis["worker_service"].act("register-worker", worker_key=key)
    message = refused_field(r, "worker_key")
    assert "printable" in message or "composed form (NFC)" in message
    r = apis["worker_service"].act("register-worker", worker_key="atk://B",
                                   display_name=f"Extractor {key}")
    refused_field(r, "display_name")
    assert counts() == before
    assert apis["worker_service"].act("register-worker",
                                      worker_key="atk://svc-1@host:9").status_code == 200


@pytest.mark.parametrize("key", ["HUMAN://scientist", "Human://qa", "human:\u2215\u2215scientist",
                                 "atk://Ünïcödé-1", "atk://svc 1", "atk://ѕvc-1"])
def test_a_worker_key_cannot_read_as_a_persons_or_another_workers(apis, key):
    """A service worker took "HUMAN://scientist" and "human:∕∕scientist" (division slashes):
    with the display name defaulting to the key, it read as Sam's own worker."""
    before = counts()
    message = refused_field(apis["worker_service"].act("register-worker", worker_key=key),
                            "worker_key")
    assert "ASCII" in message or "human://" in message
    assert counts() == before


@pytest.mark.parametrize("values", [["wetlab.qc\n\u200b"], ["\u001b[31mred"], ["ok", "x\u3164"]])
def test_capabilities_and_scopes_are_readable_lines_too(apis, values):
    before = counts()
    r = apis["worker_service"].act("register-worker", worker_key="atk://caps",
                                   capabilities=values)
    refused_field(r, "capabilities")
    r = apis["admin"].act("create-queue", queue_key="capq", subject_template_codes=[SPECIMEN],
                          reason="x", site_scope=values)
    refused_field(r, "site_scope")
    assert counts() == before


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
    human = apis["worker_human"]
    own = human.act("register-worker", worker_type="HUMAN_SESSION").json()["worker_euid"]
    for euid in (worker, claim["lease_euid"], claim["action_euid"]):
        r = reader.get(f"/subjects/{euid}")
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", euid
        r = reader.get(f"/subjects/{euid}/evidence")  # was 400 for a worker, 404 for others
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", euid
        r = reader.act("hold", subject_euid=euid, expected_state="READY", reason="x")
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", euid
        r = human.act("claim", worker_euid=own, subject_euid=euid)  # was 409 NOT_VISIBLE
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", (euid, r.content)


# ------------------------------------------------------------------ words


def test_the_intake_batch_refusal_names_what_was_refused(apis):
    r = apis["worker_human"].post("/actions/intake-batch", {"items": [{
        "action": "register_subject", "request": {
            "idempotency_key": "b1", "queue_key": "q1", "template_code": SPECIMEN,
            "name": "Tube"}}]})
    assert r.status_code == 403 and error_code(r) == "FORBIDDEN"
    message = r.json()["error"]["message"]
    assert "route or register subjects" in message and "route subject." not in message


# ------------------------------------------------------------------ instants and numbers


@pytest.mark.parametrize("due", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00",
                                 "0001-01-01T00:00:00Z", "0999-06-01T00:00:00Z"])
def test_an_instant_outside_four_digit_years_is_refused(apis, due):
    """9999-12-31 at -05:00 overflowed to a 500; year 1 was stored as "1-01-01..." (no
    padding), an envelope the engine then called invalid."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Tube", due_at=due)
    assert "within the years 1000 to 9998" in refused_field(r, "due_at")
    assert counts() == before


def test_a_bad_instant_in_a_batch_is_that_item_s_refusal(apis):
    """A 500 in the middle of a batch kept the items before it and answered none."""
    items = [{"action": "register_subject", "request": {
        "idempotency_key": f"b-{i}", "queue_key": "q1", "template_code": SPECIMEN,
        "name": f"Tube {i}", **extra}} for i, extra in enumerate(
            [{}, {"due_at": "9999-12-31T23:59:59-05:00"}])]
    r = apis["operator"].post("/actions/intake-batch", {"items": items})
    assert r.status_code == 200, r.content
    assert [i["ok"] for i in r.json()["items"]] == [True, False]
    assert r.json()["items"][1]["error"]["details"]["field"] == "due_at"


def _claimed_in_prep(apis, **queue):
    library = "content/material/library/1.0"
    make_queue("pool", subject_template_codes=[library])
    make_queue("prep", output_template_codes=[library], **queue)
    subject = make_subject("prep")
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="w-out").json()["worker_euid"]
    lease = api.act("claim", worker_euid=worker, queue_key="prep").json()
    return api, worker, lease, subject, library


@pytest.mark.parametrize("execution,problem", [
    ({"next_queue_key": "pool", "due_at": "0001-01-01T00:00:00-05:00"}, "within the years"),
    # refused by the document's schema before the engine: the message names the field
    ({"next_queue_key": "pool", "priority": 10**30}, "outputs.0.execution.priority: "),
    ({"next_queue_key": "pool", "priority": "99999999999999999999999999999999999999"},
     "outputs.0.execution.priority: "),
    ({"next_queue_key": "pool", "priority": [1]}, "outputs.0.execution.priority: "),
    ({"next_queue_key": "pool\x1b[2J"}, "execution.next_queue_key may hold only printable"),
])
def test_an_output_s_envelope_is_bounded_as_an_intake_s(apis, execution, problem):
    """An output's priority 10**30 was stored and sorted ahead of every STAT item."""
    api, worker, lease, subject, library = _claimed_in_prep(apis)
    before = counts()
    r = api.act("complete", worker_euid=worker, lease_euid=lease["lease_euid"],
                expected_state="READY",
                outputs=[{"template_code": library, "name": "L", "execution": execution}])
    assert r.status_code == 400 and problem in r.json()["error"]["message"], r.content
    assert counts() == before


def test_a_failure_naming_a_queue_that_does_not_exist_is_refused_whatever_its_class(apis):
    api, worker, lease, subject, library = _claimed_in_prep(apis)
    before = counts()
    r = api.act("fail", worker_euid=worker, lease_euid=lease["lease_euid"],
                expected_state="READY", error_class="PERMANENT_INPUT",
                error_message="label unreadable", next_queue_key="no_such_queue")
    assert r.status_code == 404 and error_code(r) == "NOT_FOUND"
    assert counts() == before


def test_a_partial_retry_policy_may_not_put_the_cap_below_the_initial_delay(apis):
    admin = apis["admin"]
    r = admin.act("create-queue", queue_key="rq", subject_template_codes=[SPECIMEN],
                  reason="x", retry_policy={"initial_delay_seconds": 60})
    assert r.status_code == 200, r.content
    before = counts()
    r = admin.act("update-queue", queue_key="rq", expected_revision=1, reason="x",
                  retry_policy={"max_delay_seconds": 30})
    assert "below initial_delay_seconds" in refused_field(r, "retry_policy.max_delay_seconds")
    assert counts() == before


# ------------------------------------------------------------------ more that does not apply


def test_a_renewal_names_its_own_subject_or_none(apis):
    """A renewal with another subject's EUID, a state and a revision renewed the lease and
    checked none of them."""
    api, worker, lease, subject, library = _claimed_in_prep(apis)
    other = make_subject("prep")
    before = counts()
    r = api.act("renew-lease", worker_euid=worker, lease_euid=lease["lease_euid"],
                subject_euid=other)
    assert r.status_code == 409 and error_code(r) == "LEASE_NOT_OWNED"
    r = api.act("renew-lease", worker_euid=worker, lease_euid=lease["lease_euid"],
                expected_state="CANCELED")
    refused_field(r, "expected_state")
    assert counts() == before
    r = api.act("renew-lease", worker_euid=worker, lease_euid=lease["lease_euid"],
                subject_euid=subject)
    assert r.status_code == 200, r.content


@pytest.mark.parametrize("path,fields,field", [
    ("create-queue", {"queue_key": "nq", "subject_template_codes": [SPECIMEN],
                      "subject_euid": "Z-MX-1"}, "subject_euid"),
    ("create-queue", {"queue_key": "nq", "subject_template_codes": [SPECIMEN],
                      "expected_state": "HELD"}, "expected_state"),
    ("requeue", {"worker_euid": "Z-AX-1"}, "worker_euid"),
    ("hold", {"lease_euid": "Z-LS-1"}, "lease_euid"),
])
def test_operator_and_admin_actions_refuse_what_they_do_not_act_on(apis, path, fields, field):
    subject = make_subject("q1")
    before = counts()
    body = {"reason": "x", **fields}
    if path in ("requeue", "hold"):
        body.update(subject_euid=subject, expected_state="READY")
    r = apis["admin"].act(path, **body)
    assert "does not apply to" in refused_field(r, field)
    assert counts() == before


def test_an_expected_state_is_checked_wherever_the_action_has_its_subject(apis):
    """request-approval on a dead-lettered subject with expected_state READY was accepted."""
    subject = make_subject("q1", state="FAILED_TERMINAL", terminal=True)
    before = counts()
    r = apis["operator"].act("request-approval", subject_euid=subject, expected_state="READY",
                             action_key="requeue_subject", reason="retry it",
                             parameters={"reason": "retry it"})
    assert r.status_code == 409 and error_code(r) == "STATE_CONFLICT"
    assert counts() == before


def test_a_heartbeat_holds_worker_texts_to_the_registration_s_rule(apis):
    """Refused at registration, a name with a terminal escape came in by heartbeat."""
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="w-hb").json()["worker_euid"]
    before = counts()
    r = api.act("heartbeat-worker", worker_euid=worker, display_name="Extractor\x1b[2J")
    refused_field(r, "display_name")
    assert counts() == before
    assert api.act("heartbeat-worker", worker_euid=worker,
                   display_name="  Extractor 2 ").status_code == 200
    from bloomops.execution.objects import load
    from bloomops.tapdb.tenancy import tenant_of

    assert load(euid=worker, tenant=tenant_of()).props["display_name"] == "Extractor 2"


@pytest.mark.parametrize("path,fields,field", [
    ("complete", {"queue_key": "pool"}, "queue_key"),  # a slip for next_queue_key
    ("expire-lease", {"subject_euid": "Z-MX-1", "reason": "x"}, "subject_euid"),
])
def test_a_lease_action_refuses_what_it_would_not_check(apis, path, fields, field):
    api, worker, lease, subject, library = _claimed_in_prep(apis)
    before = counts()
    who = apis["admin"] if path == "expire-lease" else api
    body = {"lease_euid": lease["lease_euid"], **fields}
    if path == "complete":
        body.update(worker_euid=worker, expected_state="READY")
    r = who.act(path, **body)
    assert "does not apply to" in refused_field(r, field)
    assert counts() == before


def test_a_field_name_the_caller_wrote_is_named_back(apis):
    r = apis["operator"].act("hold", subject_euid=make_subject("q1"), reason="x",
                             expected_state="READY", **{"expected-state": "READY"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "expected-state"


def test_head_on_an_evidence_export_is_refused_it_would_record_one(apis, users):
    subject = make_subject("q1")
    api = apis["operator"]
    before = counts()
    r = api.client.head(f"/api/v1/execution/subjects/{subject}/evidence", **api._headers())
    assert r.status_code == 405 and r["Allow"] == "GET"
    assert counts() == before


def test_a_chosen_claim_of_an_unknown_subject_naming_a_queue_is_404(apis):
    """With a queue_key it was a 500 (an assertion in the claim's walk)."""
    human = apis["worker_human"]
    own = human.act("register-worker", worker_type="HUMAN_SESSION").json()["worker_euid"]
    before = counts()
    r = human.act("claim", worker_euid=own, subject_euid="Z-NOPE-4", queue_key="q1")
    assert r.status_code == 404 and error_code(r) == "NOT_FOUND"
    assert counts() == before


@pytest.mark.parametrize("path,fields,field", [
    ("cancel", {"hold_euid": "Z-NOPE"}, "hold_euid"),
    ("cancel", {"queue_key": "nonexistent"}, "queue_key"),
    ("release-hold", {"queue_key": "nonexistent"}, "queue_key"),
])
def test_an_operator_action_refuses_a_field_it_would_ignore(apis, path, fields, field):
    subject = make_subject("q1")
    state = "READY"
    if path == "release-hold":
        apis["operator"].act("hold", subject_euid=subject, expected_state="READY", reason="x")
        state = "HELD"
    before = counts()
    r = apis["admin"].act(path, subject_euid=subject, expected_state=state, reason="x",
                          **fields)
    assert "does not apply to" in refused_field(r, field)
    assert counts() == before


def test_a_hold_names_the_subject_s_own_queue_or_none(apis):
    """A hold named another queue and was listed there, not where the subject is."""
    make_queue("other")
    subject = make_subject("q1")
    before = counts()
    r = apis["operator"].act("hold", subject_euid=subject, expected_state="READY", reason="x",
                             queue_key="other")
    assert "is in q1, not other" in refused_field(r, "queue_key")
    assert counts() == before


def test_releasing_another_subject_s_hold_says_so(apis):
    a, b = make_subject("q1"), make_subject("q1")
    op = apis["operator"]
    hold_b = op.act("hold", subject_euid=b, expected_state="READY", reason="x").json()
    op.act("hold", subject_euid=a, expected_state="READY", reason="x")
    r = op.act("release-hold", subject_euid=a, expected_state="HELD",
               hold_euid=hold_b["hold_euid"], reason="x")
    assert r.status_code == 404 and f"No such hold on {a}" in r.json()["error"]["message"]


def test_a_heartbeat_s_error_class_is_a_readable_line_too(apis):
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="w-ec").json()["worker_euid"]
    r = api.act("heartbeat-worker", worker_euid=worker,
                last_error_class="\x1b[31mRED\u200b\u202eevil")
    refused_field(r, "last_error_class")


def test_an_external_result_names_a_next_queue_only_to_move_there(apis):
    """With outcome FAILED_RETRYABLE the next queue was dropped unchecked (out of scope too)."""
    subject = make_subject("q1", state="WAITING_EXTERNAL")
    before = counts()
    r = apis["admin"].act("external-result", subject_euid=subject,
                          expected_state="WAITING_EXTERNAL", outcome="FAILED_RETRYABLE",
                          next_queue_key="q1")
    assert "applies only to outcome READY" in refused_field(r, "next_queue_key")
    assert counts() == before


@pytest.mark.parametrize("due", ["2016-12-31T23:59:60Z", "2026-02-29T10:00:00Z",
                                 "2026-11-25T24:00:00Z"])
def test_an_instant_that_does_not_exist_is_told_as_such(apis, due):
    """A leap second, 29 February 2026 or 24:00 were refused as if their year were wrong
    ("within the years 1000 to 9998")."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Tube", due_at=due)
    assert "a date and time that exist, such as 2026-11-25T14:05:00Z" in refused_field(
        r, "due_at")
    assert counts() == before


VALUE0 = ["a\u200bb", "x\n\u001b[31m"]


@pytest.mark.parametrize("value", [VALUE0, ["sfo"], 123, True, "", "   "])
def test_a_site_is_one_line_of_text_in_a_new_subject_and_an_output(apis, value):
    """A list (its items' control characters unchecked), a number, true or a blank was
    stored as sent, and matched no queue's scope ever after."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Tube", properties={"site": value})
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    # an escape sequence in a list is named where it is before the template is read
    assert ("properties.site[1] may hold no control characters" if value == VALUE0 else
            "'site' must be one line of text") in r.json()["error"]["message"]
    assert counts() == before
    api, worker, lease, subject, library = _claimed_in_prep(apis)
    before = counts()
    r = api.act("complete", worker_euid=worker, lease_euid=lease["lease_euid"],
                expected_state="READY",
                outputs=[{"template_code": library, "name": "L", "properties": {"site": value}}])
    assert r.status_code == 400 and "'site' must be one line of text" in r.json()[
        "error"]["message"], r.content
    assert counts() == before
    ok = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                              name="Tube ok", properties={"site": "sfo", "assay": None})
    assert ok.status_code == 200, ok.content


def test_a_person_s_worker_goes_by_their_name_not_one_a_request_gives(apis, users):
    """A scientist named their own worker "Supervisor Sasha Lindqvist" through a heartbeat,
    and the workers page showed it: identity comes from the account."""
    human = apis["worker_human"]
    person = users["worker_human"]
    person.first_name, person.last_name = "Sam", "Rivera"
    person.save()
    own = human.act("register-worker", worker_type="HUMAN_SESSION").json()["worker_euid"]
    shown = human.get(f"/workers/{own}").json()
    assert shown["display_name"] == "Sam Rivera"
    before = counts()
    for path, fields in (("heartbeat-worker", {"worker_euid": own}),
                         ("register-worker", {"worker_type": "HUMAN_SESSION"})):
        r = human.act(path, display_name="Supervisor Sasha Lindqvist", **fields)
        assert "goes by their name" in refused_field(r, "display_name")
    assert counts() == before
    person.first_name = "Samantha"
    person.save()
    assert human.act("heartbeat-worker", worker_euid=own, display_name="Samantha Rivera"
                     ).status_code == 200
    assert human.get(f"/workers/{own}").json()["display_name"] == "Samantha Rivera"


@pytest.mark.parametrize("field", ["queue_key", "subject_euid"])
@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_id_is_refused_not_read_as_none_given(apis, field, blank):
    """A claim naming queue_key "" claimed from any queue: a worker whose queue setting was
    blank drained the others."""
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="svc-blank").json()["worker_euid"]
    make_subject("q1")
    before = counts()
    r = api.act("claim", worker_euid=worker, **{field: blank})
    refused_field(r, field)
    assert counts() == before


@pytest.mark.parametrize("key", ["q2\u202e", "q2\u200b", "q\n2"])
def test_an_external_result_s_next_queue_is_a_readable_line(apis, key):
    """A next queue of an outside result with a right-to-left override or a zero-width space
    was looked up as sent: 404 'No queue', where the rule is a 400 naming the field."""
    make_queue("q2")
    subject = make_subject("q1", state="WAITING_EXTERNAL")
    before = counts()
    r = apis["admin"].act("external-result", subject_euid=subject,
                          expected_state="WAITING_EXTERNAL", outcome="READY",
                          next_queue_key=key)
    refused_field(r, "next_queue_key")
    assert counts() == before


@pytest.mark.parametrize("path", ["external-result", "complete"])
def test_a_next_queue_with_white_space_around_it_is_the_queue(apis, path):
    """Checked stripped, it was looked up as sent: 'q2\\n' was a 404 'No queue'. The
    document says the engine strips it first, and so it does."""
    make_queue("q2")
    if path == "complete":
        api = apis["worker_service"]
        worker = api.act("register-worker", worker_key="svc-ws").json()["worker_euid"]
        make_subject("q1")
        lease = api.act("claim", worker_euid=worker, queue_key="q1").json()
        r = api.act("complete", worker_euid=worker, lease_euid=lease["lease_euid"],
                    expected_state="READY", next_queue_key=" q2\n")
        subject = lease["subject_euid"]
    else:
        subject = make_subject("q1", state="WAITING_EXTERNAL")
        r = apis["admin"].act("external-result", subject_euid=subject,
                              expected_state="WAITING_EXTERNAL", outcome="READY",
                              next_queue_key="q2\n")
    assert r.status_code == 200, r.content
    from tests.engine import envelope

    assert envelope(subject)["next_queue_key"] == "q2"


@pytest.mark.parametrize("words", ["\x1b[2J", "ok\u202eLTR", "bell\x07", "\x1b]0;pwned\x07"])
def test_a_reason_or_a_failure_s_words_hold_no_escape_or_reordering(apis, words):
    """A terminal escape or a right-to-left override was stored in a reason and a failure's
    words, and served in every history, export and bundle; a screen-clear sequence counted
    as the words a permanent failure needs."""
    subject = make_subject("q1")
    before = counts()
    refused_field(apis["operator"].act("hold", subject_euid=subject, expected_state="READY",
                                       reason=words), "reason")
    api = apis["worker_service"]
    worker = api.act("register-worker", worker_key="svc-words").json()["worker_euid"]
    lease = api.act("claim", worker_euid=worker, queue_key="q1").json()
    after_claim = counts()
    refused_field(api.act("fail", worker_euid=worker, lease_euid=lease["lease_euid"],
                          expected_state="READY", error_class="PERMANENT_INPUT",
                          error_message=words), "error_message")
    refused_field(api.act("fail", worker_euid=worker, lease_euid=lease["lease_euid"],
                          expected_state="READY", error_class="PERMANENT_INPUT",
                          error_message="bad", error_code="E1\nE2"), "error_code")
    assert counts() == after_claim and after_claim != before
    ok = apis["operator"].act("hold", subject_euid=make_subject("q1"), expected_state="READY",
                              reason="seen twice:\n\tonce at 09:00\r\n\tagain at 10:00")
    assert ok.status_code == 200, ok.content


# ------------------------------------------------------------------ a caller's own data


def _leased(api) -> dict:
    """A service worker's claim on a new subject of q1."""
    worker = api.act("register-worker", worker_key="w-data", capabilities=[]).json()[
        "worker_euid"]
    make_subject("q1")
    make_queue("q2")
    return api.act("claim", worker_euid=worker, queue_key="q1").json()


@pytest.mark.parametrize(("field", "data", "named"), [
    ("result_snapshot", {"a": "\x1b[31mred\x07"}, "result_snapshot.a"),
    ("result_snapshot", {"\u202eevil": 1}, "result_snapshot"),
    ("result_snapshot", {"a\nb": 1}, "result_snapshot"),
    ("result_snapshot", {"": 1}, "result_snapshot"),
    ("result_snapshot", {"run": {"log": ["ok", "cut\x1b[2J"]}}, "result_snapshot.run.log[1]"),
    ("external", {"run_id": "wf-\u202e1-lave"}, "external.run_id"),
])
def test_a_callers_own_data_with_unreadable_text_is_refused_and_writes_nothing(
        apis, field, data, named):
    """A step's own results and an external dispatch were stored as sent, escape sequences
    and reversing characters in keys and values, and reached the results' spreadsheet so
    (the pages hid them). Refused now, naming where, and nothing is written."""
    svc = apis["worker_service"]
    c = _leased(svc)
    extra = {"next_queue_key": "q2"} if field != "external" else {}
    before = counts()
    refused_field(svc.act("complete", lease_euid=c["lease_euid"], worker_euid=c["worker_euid"],
                          expected_state="READY", **extra, **{field: data}), named)
    assert counts() == before


def test_a_callers_own_data_keeps_its_lines_tabs_and_values(apis):
    svc = apis["worker_service"]
    c = _leased(svc)
    kept = {"notes": "line one\nline two\twith a tab", "n": 1.5, "ok": True, "none": None,
            "list": [1, "a", {"deep": "é"}]}
    r = svc.act("complete", lease_euid=c["lease_euid"], worker_euid=c["worker_euid"],
                expected_state="READY", next_queue_key="q2", result_snapshot=kept)
    assert r.status_code == 200, r.content
    records = apis["operator"].get(f"/subjects/{c['subject_euid']}/history").json()["records"]
    assert records[0]["result_snapshot"] == kept


@pytest.mark.parametrize("key", ["k-1\n", " k-1", "k-1\t", "k-1\u3000", "k-1 "])
def test_an_idempotency_key_with_white_space_at_an_end_is_refused(apis, key):
    """The key was checked stripped and matched as sent: a retry whose key gained a trailing
    newline was a new request (a second claim, a second hold)."""
    subject = make_subject("q1")
    before = counts()
    r = apis["operator"].act("hold", subject_euid=subject, expected_state="READY",
                             reason="check", idempotency_key=key)
    refused_field(r, "idempotency_key")
    assert counts() == before
    engine = refused("VALIDATION_ERROR", lambda: act(
        "place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="READY", payload={"reason": "check"}, idempotency_key=key))
    assert engine.details.get("field") == "idempotency_key"
    assert "may not begin or end with white space" in engine.message
    assert counts() == before


@pytest.mark.parametrize("key", ["site ", " site", "site\u3000"])
def test_a_key_of_a_callers_data_with_white_space_at_an_end_is_refused(apis, key):
    """{"yield": 1, "yield ": 2} was stored, exported and tallied as two results that show
    as one."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Tube", properties={"site": "sfo", key: "x"})
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert counts() == before
    engine = refused("VALIDATION_ERROR", lambda: act(
        "register_subject", actor("operator"), queue_key="q1",
        payload={"template_code": SPECIMEN, "name": "Tube", "properties": {key: "x"}}))
    assert "may not begin or end with white space" in engine.message


@pytest.mark.parametrize("code", ["qc_fa\u0131l", "contam\u0131nat\u0131on", "\u0131ntegr\u0131ty"])
def test_a_hold_code_spelt_with_a_look_alike_letter_is_refused(apis, code):
    """Unicode's upper() made a dotless "ı" an "I": "qc_faıl" was stored as QC_FAIL."""
    subject = make_subject("q1")
    before = counts()
    r = apis["operator"].act("hold", subject_euid=subject, expected_state="READY",
                             reason="check", hold_code=code)
    assert refused_field(r, "hold_code").startswith("Unknown hold code")
    assert counts() == before
    ok = apis["operator"].act("hold", subject_euid=subject, expected_state="READY",
                              reason="check", hold_code="qc_fail")
    assert ok.status_code == 200, ok.content
    from bloomops.tapdb.db import fetch_value

    assert fetch_value("SELECT json_addl->'properties'->>'hold_code' FROM generic_instance"
                       " WHERE euid = %s", [ok.json()["hold_euid"]]) == "QC_FAIL"
