"""Approvals over the JSON API (docs/API.md, "Approvals"): the gated action's 409 says what
to request; deciding takes the decider's password as its signature (a token alone is not
one); wrong passwords count toward the sign-in lockout; the password is never kept."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from bloomops.tapdb.db import fetch_value
from tests.api_helpers import api_for, error_code
from tests.approval_support import integrity_held, password_of, person
from tests.engine import counts, envelope, make_queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(tenant):
    make_queue("q1")
    person("ann", "operator")
    person("bob", "operator")
    return {name: api_for(User.objects.get(username=name)) for name in ("ann", "bob")}


def test_request_list_and_decide_over_the_api(people, settings):
    settings.AXES_FAILURE_LIMIT = 2
    ann, bob = people["ann"], people["bob"]
    from tests.engine import actor

    subject, hold = integrity_held(actor("operator"))
    direct = ann.act("release-hold", subject_euid=subject, hold_euid=hold,
                     expected_state="HELD", reason="rerun passed")
    assert direct.status_code == 409 and error_code(direct) == "APPROVAL_REQUIRED"
    # what to request instead, sendable as it is (an "action" field and no reason made
    # it a 400 when sent as documented)
    ask = direct.json()["error"]["details"]["request"]
    asked = ann.act("request-approval", **ask)
    assert asked.status_code == 200, asked.content
    approval = asked.json()["approval_euid"]

    waiting = bob.get("/approvals", status="REQUESTED").json()
    assert [(a["approval_euid"], a["requested_by"], a["hold_euid"], a["reason"])
            for a in waiting] == [(approval, "ann", hold, "rerun passed")]
    assert bob.get("/approvals", subject_euid=subject).json()[0]["status"] == "REQUESTED"
    assert bob.get("/approvals", status="BOGUS").status_code == 400
    # how many match, beyond the limit
    assert bob.get("/approvals", status="REQUESTED", limit="1")["X-Total-Count"] == "1"
    assert bob.get("/approvals", status="APPROVED")["X-Total-Count"] == "0"

    before = counts()
    missing = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                      reason="ok")
    assert missing.status_code == 400 and counts() == before
    # naming no approval is said before the password is weighed: it counts towards no
    # lockout (a fuzzer's garbage locked people out of signing and signing in)
    for n in range(3):
        nothing = bob.act("decide-approval", approval_euid=f"Z-EX-NOPE{n}",
                          decision="APPROVED", reason="ok", password="not-bobs")
        assert nothing.status_code == 404 and error_code(nothing) == "NOT_FOUND"
    wrong = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                    reason="ok", password="not-bobs")
    assert wrong.status_code == 403 and error_code(wrong) == "SIGNATURE_INVALID"
    assert "locked" not in wrong.json()["error"]["message"]
    assert counts() == before
    # A second wrong password reaches the lockout: even the right one no longer signs.
    bob.act("decide-approval", approval_euid=approval, decision="APPROVED", reason="ok",
            password="still-not")
    locked = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                     reason="ok", password=password_of("bob"))
    assert locked.status_code == 403 and "locked" in locked.json()["error"]["message"]
    # for how long, not "a while": the cool-off (BLOOMOPS_SIGNIN_COOLOFF_MINUTES)
    assert "locked for 15 minutes after the last wrong one" in locked.json()["error"]["message"]
    assert locked["Content-Type"].startswith("application/json")
    assert counts() == before
    from axes.utils import reset

    reset(username="bob")
    done = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                   reason="rerun checked", password=password_of("bob"))
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["approval_status"] == "APPROVED" and body["state"] == "READY"
    assert envelope(subject)["state"] == "READY"
    assert body["signature"]["signer"] == "bob"
    for secret in (password_of("bob"), "not-bobs", "still-not"):
        assert fetch_value("SELECT count(*) FROM generic_instance WHERE json_addl::text"
                           " LIKE %s", [f"%{secret}%"]) == 0
    [row] = bob.get("/approvals", subject_euid=subject).json()
    assert row["status"] == "APPROVED" and row["signature"]["method"] == "password re-entry"


def test_an_approval_another_writer_left_malformed_fails_no_list(people):
    """An approval whose signature or parameters another writer (raw SQL) made a plain text
    turned the approvals list into a 500 with a plain-text traceback: each field not of its
    type reads as absent, and the rest of the list is answered."""
    import json

    from bloomops.tapdb.db import execute
    from tests.engine import actor

    subject, hold = integrity_held(actor("operator"))
    asked = people["ann"].act("request-approval", subject_euid=subject, hold_euid=hold,
                              action_key="release_execution_hold",
                              parameters={"reason": "rerun"}, reason="QC rerun passed")
    approval = asked.json()["approval_euid"]
    for field, value in (("signature", "signed"), ("parameters", "x"), ("hold_euids", 5),
                         ("hold_codes", 5), ("requested_by", 7),
                         ("subject_revision_at_request", "3")):
        execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                " %s::text[], %s::jsonb) WHERE euid = %s",
                [["properties", field], json.dumps(value), approval])
    listed = people["bob"].get("/approvals")
    assert listed.status_code == 200, listed.content
    [row] = listed.json()
    assert row["approval_euid"] == approval and row["signature"] is None
    assert row["parameters"] == {} and row["hold_euids"] == []
    assert row["requested_by"] is None and row["subject_revision_at_request"] is None
    assert row["subject_euid"] == subject and row["reason"] == "QC rerun passed"
    # the console's inbox reads the same approval with its holds' reasons: no 500 either
    console = Client()
    console.force_login(User.objects.get(username="bob"))
    assert console.get("/approvals/").status_code == 200


def test_a_bad_parameter_of_an_approval_is_named_as_the_request_names_it(people):
    """A requeue's priority "SOON" in parameters was refused with details.field "payload"
    (or "priority"), neither of which the request holds; it is parameters.priority."""
    from tests.approval_support import dead_lettered

    dead = dead_lettered()
    before = counts()
    for parameters, field in (({"priority": "SOON"}, "parameters.priority"),
                              ({"reset_attempts": "maybe"}, "parameters.reset_attempts"),
                              ({"teleport": True}, "parameters")):
        r = people["ann"].act("request-approval", subject_euid=dead,
                              expected_state="FAILED_TERMINAL", action_key="requeue_subject",
                              parameters=parameters, reason="rerun it")
        assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
        assert r.json()["error"]["details"]["field"] == field, (parameters, r.json())
    assert counts() == before


def test_a_withdrawn_request_says_who_withdrew_it_when_and_why(people):
    """The API's list gave who withdrew a request and when, never why: RULES.md says a
    withdrawal keeps all three, and the console and a bundle show them."""
    from tests.engine import actor

    ann, bob = people["ann"], people["bob"]
    subject, hold = integrity_held(actor("operator"))
    asked = ann.act("request-approval", subject_euid=subject, hold_euid=hold,
                    action_key="release_execution_hold", reason="rerun passed",
                    parameters={"reason": "rerun passed"})
    approval = asked.json()["approval_euid"]
    withdrawn = ann.act("cancel-approval", approval_euid=approval,
                        reason="asked on the wrong tube")
    assert withdrawn.status_code == 200, withdrawn.content
    [listed] = bob.get("/approvals", status="CANCELED").json()
    assert (listed["approval_euid"], listed["canceled_by"], listed["cancel_reason"]) == (
        approval, "ann", "asked on the wrong tube")
    assert listed["canceled_at"]
