"""Approvals over the JSON API (docs/API.md, "Approvals"): the gated action's 409 says what
to request; deciding takes the decider's password as its signature (a token alone is not
one); wrong passwords count toward the sign-in lockout; the password is never kept."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

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
    ask = direct.json()["error"]["details"]["request"]
    assert ask["action"] == "request_approval"
    asked = ann.act("request-approval", subject_euid=ask["subject_euid"],
                    hold_euid=ask["hold_euid"], action_key=ask["action_key"],
                    parameters=ask["parameters"], reason="QC rerun passed")
    assert asked.status_code == 200, asked.content
    approval = asked.json()["approval_euid"]

    waiting = bob.get("/approvals", status="REQUESTED").json()
    assert [(a["approval_euid"], a["requested_by"], a["hold_euid"]) for a in waiting] == [
        (approval, "ann", hold)]
    assert bob.get("/approvals", subject_euid=subject).json()[0]["status"] == "REQUESTED"
    assert bob.get("/approvals", status="BOGUS").status_code == 400

    before = counts()
    missing = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                      reason="ok")
    assert missing.status_code == 400 and counts() == before
    wrong = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                    reason="ok", password="not-bobs")
    assert wrong.status_code == 403 and error_code(wrong) == "SIGNATURE_INVALID"
    assert counts() == before
    # A second wrong password reaches the lockout: even the right one no longer signs.
    bob.act("decide-approval", approval_euid=approval, decision="APPROVED", reason="ok",
            password="still-not")
    locked = bob.act("decide-approval", approval_euid=approval, decision="APPROVED",
                     reason="ok", password=password_of("bob"))
    assert locked.status_code == 403 and "locked" in locked.json()["error"]["message"]
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
