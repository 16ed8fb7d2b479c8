"""A password someone else set is no one's own (RULES.md#approvals): the person signed in with
it goes nowhere but the password page, and it signs no approval, whoever asked."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from bloomops.accounts.profiles import add_person, set_password
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import Actor
from tests.approval_support import decide, integrity_held, person, request_release
from tests.engine import counts, envelope, make_queue, make_subject

GIVEN_PW = "Correct-Horse-Battery-9"
OWN_PW = "Glacier-Copper-Lantern-58"


@pytest.fixture
def lab(db, tenant):
    make_queue("q1")
    return {"ann": person("ann", "operator"), "adm": person("adm", "admin")}


def _added(username: str, roles: list[str]) -> None:
    add_person(username, first_name="", last_name="", password=GIVEN_PW, roles=roles,
               reason="new starter", admin_username="adm")


def _signed_in(username: str, password: str = GIVEN_PW) -> Client:
    browser = Client()
    assert browser.post("/accounts/login/", {"username": username,
                                             "password": password}).status_code == 302
    return browser


def _changed(browser: Client, old: str = GIVEN_PW) -> None:
    done = browser.post("/accounts/password/", {"old_password": old, "new_password1": OWN_PW,
                                                "new_password2": OWN_PW})
    assert done.status_code == 302 and done["Location"] == "/accounts/password/done/"


def test_a_new_person_changes_the_given_password_before_anything_else(lab):
    """The admin who typed a new starter's first password could sign in as them until they
    changed it; the console only asked, in a banner, and the starter could work without."""
    _added("tess", ["worker_human", "operator"])
    browser = _signed_in("tess")
    for page in ("/", "/my-work/", "/approvals/", "/queues/q1/"):
        sent = browser.get(page)
        assert (sent.status_code, sent["Location"]) == (302, "/accounts/password/"), page
    told = browser.get("/", follow=True).content.decode()
    assert "Choose your own password before you go on: adm gave you the one you signed in" \
        " with, so they know it." in told
    # a panel's refresh moves the whole page, not a sign-in form into the panel
    panel = browser.get("/", headers={"HX-Request": "true"})
    assert panel["HX-Redirect"] == "/accounts/password/"
    # what they send is not done
    subject = make_subject("q1")
    before = counts()
    scan = browser.post(f"/subjects/{subject}/claim/")
    assert scan.status_code == 302 and scan["Location"] == "/accounts/password/"
    assert counts() == before and envelope(subject)["state"] == "READY"
    # the password page, its styles and signing out are reachable
    assert browser.get("/accounts/password/").status_code == 200
    _changed(browser)
    assert browser.get("/accounts/password/done/").status_code == 200
    assert browser.get("/my-work/").status_code == 200
    # signed in again with their own, nothing stands in the way
    assert _signed_in("tess", OWN_PW).get("/").status_code == 200


def test_an_admin_s_reset_sends_the_person_to_the_password_page_again(lab):
    _added("tess", ["operator"])
    _changed(_signed_in("tess"))
    set_password(User.objects.get(username="tess").pk, "Amber-Harbour-77x", reason="forgot",
                 admin_username="adm")
    browser = _signed_in("tess", "Amber-Harbour-77x")
    assert browser.get("/").status_code == 302
    assert browser.post("/accounts/logout/").status_code == 302
    assert Client().get("/").status_code == 302  # signed out: to the sign-in page


def test_a_given_password_signs_no_approval_of_anyone(lab):
    """adm gave tess her password, so adm could sign as tess. The rule refused tess only
    adm's requests (and those of people adm set up): ann's it let adm approve as tess."""
    _added("tess", ["operator"])
    tess = Actor(username="tess", roles=frozenset({"operator"}))
    subject, hold = integrity_held(lab["ann"])
    approval = request_release(lab["ann"], subject, hold)["approval_euid"]
    before = counts()
    with pytest.raises(ActionError) as err:
        decide(tess, approval, password=GIVEN_PW)
    assert err.value.code == "SELF_APPROVAL" and err.value.details["set_up_by"] == "adm"
    assert "given to you by adm, who knows it" in err.value.message
    assert counts() == before and envelope(subject)["state"] == "HELD"
    # her own password signs ann's request (adm's own would wait an approval's lifetime)
    _changed(_signed_in("tess"))
    assert decide(tess, approval, password=OWN_PW).result["approval_status"] == "APPROVED"


def test_the_api_refuses_the_given_password_as_a_signature(lab):
    from bloomops.accounts.tokens import create_token
    from tests.api_helpers import Api, error_code

    _added("tess", ["operator"])
    _, token = create_token("tess", by="adm", reason="tess's script")
    subject, hold = integrity_held(lab["ann"])
    approval = request_release(lab["ann"], subject, hold)["approval_euid"]
    before = counts()
    answer = Api(token).act("decide-approval", approval_euid=approval, decision="APPROVED",
                            reason="checked", password=GIVEN_PW)
    assert answer.status_code == 403 and error_code(answer) == "SELF_APPROVAL"
    assert counts() == before
