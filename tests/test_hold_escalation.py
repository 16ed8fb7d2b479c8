"""A hold placed on a held subject (docs/RULES.md#holds): QA turns an operator's hold into an
integrity hold without a moment unheld. Holding a HELD subject was refused, so QA had to
release the operator's hold (the item claimable again) and hold it anew."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User

from bloomops.execution.errors import ActionError
from tests.approval_support import decide, person
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    register,
)
from tests.web_support import form_for, forms, signed_in

pytestmark = pytest.mark.django_db


def _hold(who, subject: str, code: str, state: str) -> str:
    return act("place_execution_hold", who, subject_euid=subject, expected_state=state,
               payload={"hold_code": code, "reason": f"{code.lower()} seen"})["hold_euid"]


def _release(who, subject: str, hold: str | None = None):
    return act("release_execution_hold", who, subject_euid=subject, hold_euid=hold,
               expected_state="HELD", payload={"reason": "checked"})


@pytest.fixture
def qa(tenant):
    make_queue("q1")
    return actor("operator", username="qa")


def test_an_operator_hold_becomes_an_integrity_hold_with_no_moment_unheld(qa):
    svc = actor(*SERVICE)
    subject = make_subject("q1")
    first = _hold(qa, subject, "OPERATOR_HOLD", "READY")
    integrity = _hold(qa, subject, "QC_FAIL", "HELD")
    assert first != integrity and envelope(subject)["state"] == "HELD"
    _release(qa, subject, first)  # the operator's own hold goes; QA's stays
    env = envelope(subject)
    assert (env["state"], env["hold_state"]) == ("HELD", "ACTIVE")
    with pytest.raises(ActionError) as err:
        claim(svc, register(svc))
    assert err.value.code == "NO_WORK"
    # the integrity hold's release takes a second person, as any integrity hold's does
    with pytest.raises(ActionError) as err:
        _release(qa, subject, integrity)
    assert err.value.code == "APPROVAL_REQUIRED"
    approval = act("request_approval", qa, subject_euid=subject, hold_euid=integrity,
                   payload={"action_key": "release_execution_hold", "reason": "rerun passed",
                            "parameters": {"reason": "rerun passed"}})["approval_euid"]
    decide(person("bob", "operator"), approval)
    # released last, it returns to where the first hold found it
    assert envelope(subject)["state"] == "READY"


def test_released_last_a_subject_returns_to_where_the_first_hold_found_it(qa):
    pending = make_subject(None, state="PENDING")
    _hold(qa, pending, "OPERATOR_HOLD", "PENDING")
    _hold(qa, pending, "QA_REVIEW", "HELD")
    _release(qa, pending)
    assert envelope(pending)["state"] == "PENDING"


def test_the_same_code_twice_is_refused_and_writes_nothing(qa):
    subject = make_subject("q1")
    first = _hold(qa, subject, "QA_REVIEW", "READY")
    before = counts()
    with pytest.raises(ActionError) as err:
        _hold(qa, subject, "QA_REVIEW", "HELD")
    assert err.value.code == "VALIDATION_ERROR" and err.value.details["field"] == "hold_code"
    assert first in err.value.message and counts() == before


def test_the_subject_page_releases_one_of_several_holds(client, qa):
    subject = make_subject("q1")
    first = _hold(qa, subject, "OPERATOR_HOLD", "READY")
    integrity = _hold(qa, subject, "QC_FAIL", "HELD")
    page = signed_in(client, User.objects.get(username="qa")).get(f"/subjects/{subject}/")
    html = page.content.decode()
    assert "Place another hold" in html
    # the codes already holding it are not offered (each would be refused), nor preselected
    menu = html.split('id="hold-code"')[1].split("</select>")[0]
    assert 'value="OPERATOR_HOLD"' not in menu and 'value="QC_FAIL"' not in menu
    assert 'value="CONTAMINATION"' in menu
    # ... nor the first left (a browser selects it): the person chooses one
    assert re.findall(r'<option value="([^"]*)" selected', menu) == [""]
    # the operator's hold alone may go; the integrity hold's release is a second person's
    released_alone = {f["fields"].get("hold_euid") for f in forms(html)
                      if f["action"] == f"/subjects/{subject}/release-hold/"}
    asked_alone = {f["fields"].get("hold_euid") for f in forms(html)
                   if f["action"] == f"/subjects/{subject}/request-approval/"}
    assert first in released_alone and integrity not in released_alone
    assert integrity in asked_alone and "Ask for approval to release this hold" in html
    action = f"/subjects/{subject}/release-hold/"
    fields = {**form_for(page, action), "hold_euid": first, "reason": "operator checked"}
    fields.pop("csrfmiddlewaretoken", None)
    done = client.post(action, fields)
    assert done.status_code == 302
    env = envelope(subject)
    assert (env["state"], env["hold_state"]) == ("HELD", "ACTIVE")
    # it said "released" while the subject stayed held
    from django.contrib.messages import get_messages

    assert [str(m) for m in get_messages(done.wsgi_request)] == [
        f"One hold on {subject} released; it is still held by 1 other hold."]
