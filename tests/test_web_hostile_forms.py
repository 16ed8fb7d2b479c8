"""Console forms sent as no page of ours sends them: each is refused in words, or taken for
what it can only mean, and never answered with a server error after a write."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from bloomops.execution import selectors
from tests.approval_support import integrity_held, person, request_release
from tests.engine import act, actor, counts, envelope, make_subject
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db
SPECIMEN = "content/material/specimen/1.0"


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("next_", ["foo", "workbench", "javascript:alert(1)",
                                   "//evil.example/", "https://evil.example/"])
def test_an_action_s_next_page_is_a_path_here_or_the_default(client, lab, next_):
    """next=foo was taken for a URL name: the hold was written, then the answer was 500."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/hold/",
                    reason="label smudged", next=next_)
    response = client.post(f"/subjects/{subject}/hold/", data)
    assert response.status_code == 302 and response["Location"] == f"/subjects/{subject}/"
    assert envelope(subject)["state"] == "HELD"


def test_a_path_here_is_where_an_action_goes_back_to(client, lab):
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/hold/",
                    reason="label smudged", next="/workbench/")
    assert client.post(f"/subjects/{subject}/hold/", data)["Location"] == "/workbench/"


@pytest.mark.parametrize("revision", ["\u00b2", "7x", "-1", "1.0", "9" * 13])
def test_a_bulk_pick_the_page_cannot_have_sent_is_refused(client, lab, revision):
    """'²' passed isdigit() and failed int() (500); '7x' dropped the revision guard."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    before = counts()
    response = client.post("/workbench/bulk/", {
        "action": "hold", "idempotency_key": "b1", "reason": "x",
        "pick": [f"{subject}|READY|{revision}"]})
    assert response.status_code == 302
    assert any("The page sent a selection it could not read" in m for m in said(response))
    assert counts() == before


def test_a_bulk_pick_without_its_guard_is_refused_as_unreadable(client, lab):
    """A pick of a bare word (no state, no revision) was acted on and refused item by item
    as "nonsense: expected_state is required.", in the engine's words."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    before = counts()
    for pick in ("nonsense", subject):
        response = client.post("/workbench/bulk/", {
            "action": "hold", "idempotency_key": "b1", "reason": "x", "pick": [pick]})
        assert set(said(response)) == {
            "The page sent a selection it could not read: reload it and select again."}
    assert counts() == before


def test_a_subject_picked_twice_is_acted_on_once(client, lab):
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    pick = f"{subject}|READY|{envelope(subject)['revision']}"
    response = client.post("/workbench/bulk/", {
        "action": "hold", "idempotency_key": "b2", "reason": "x", "pick": [pick, pick]})
    assert any(m.startswith("Held 1") for m in said(response)), said(response)
    assert not any("already done" in m for m in said(response))
    other = client.post("/workbench/bulk/", {
        "action": "hold", "idempotency_key": "b3", "reason": "x",
        "pick": [f"{subject}|HELD|9", f"{subject}|READY|1"]})
    assert any("The page sent a selection it could not read" in m for m in said(other))
    assert envelope(subject)["state"] == "HELD"


@pytest.fixture
def managed(lab):
    act("create_queue", actor("admin", username="adm"), queue_key="cfg",
        payload={"subject_template_codes": [SPECIMEN], "reason": "first",
                 "display_name": "Config queue"})
    return lab


@pytest.mark.parametrize("revision", ["abc", "1.5", "9" * 5000, "\u0663"])
def test_a_settings_preview_with_a_broken_revision_is_refused_keeping_the_form(
        client, managed, revision):
    """It was a 500 (the revision read outside the refusal's reach)."""
    client = signed_in(client, managed["admin"])
    page = client.get("/settings/queues/cfg/")
    data = form_for(page, "/settings/queues/cfg/", display_name="My carefully typed name",
                    reason="why I change it", expected_revision=revision)
    response = client.post("/settings/queues/cfg/", data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "The page sent an invalid revision." in html
    assert 'value="My carefully typed name"' in html and 'value="why I change it"' in html


def test_a_refused_settings_preview_shows_what_was_typed(client, managed):
    """The form was redrawn from the stored queue: the new name and the reason were gone."""
    client = signed_in(client, managed["admin"])
    data = form_for(client.get("/settings/queues/cfg/"), "/settings/queues/cfg/",
                    display_name="My carefully typed name", lease_ttl_seconds="abc",
                    reason="longer leases")
    response = client.post("/settings/queues/cfg/", data)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Lease TTL seconds (lease_ttl_seconds) must be a number." in html
    assert 'value="My carefully typed name"' in html and 'value="abc"' in html
    assert 'value="longer leases"' in html
    assert selectors.queue_config("cfg")["config"]["display_name"] == "Config queue"


def test_every_unreadable_number_is_named_in_one_refusal(client, managed):
    """Only the first was named, by its key; fixing it, the next was dropped unseen."""
    client = signed_in(client, managed["admin"])
    data = form_for(client.get("/settings/queues/cfg/"), "/settings/queues/cfg/",
                    lease_ttl_seconds="abc", retry_backoff_factor="two", reason="r")
    html = client.post("/settings/queues/cfg/", data).content.decode()
    assert ("Lease TTL seconds (lease_ttl_seconds), Retry backoff factor"
            " (retry_policy.backoff_factor) must be numbers.") in html
    assert 'value="two"' in html


@pytest.mark.parametrize("written", ["1e3", "nan", "inf", "\u0661\u0662\u0660", "1,5"])
def test_a_setting_s_number_is_written_in_decimal_digits(client, managed, written):
    client = signed_in(client, managed["admin"])
    data = form_for(client.get("/settings/queues/cfg/"), "/settings/queues/cfg/",
                    lease_ttl_seconds=written)
    response = client.post("/settings/queues/cfg/", data)
    assert response.status_code == 400
    assert "(lease_ttl_seconds) must be a number." in response.content.decode()


@pytest.mark.parametrize("enabled", [None, "TRUE", "1", "on", "yes"])
def test_a_queue_is_disabled_only_when_the_form_says_so(client, managed, enabled):
    """Any value but "true" disabled the queue."""
    client = signed_in(client, managed["admin"])
    data = form_for(client.get("/settings/queues/cfg/"), "/settings/queues/cfg/enabled/",
                    reason="maintenance")
    data.pop("enabled", None)
    if enabled is not None:
        data["enabled"] = enabled
    before = counts()
    response = client.post("/settings/queues/cfg/enabled/", data)
    assert "The page sent neither enable nor disable." in said(response)
    assert selectors.queue_config("cfg")["config"].get("enabled", True) is True
    assert counts() == before


def test_a_decision_sent_twice_is_no_decision(client, lab):
    """APPROVED and REJECTED together were signed as whichever came last."""
    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    bob = person("bob", "operator")
    from django.contrib.auth.models import User

    client = signed_in(client, User.objects.get(username=bob.username))
    page = client.get("/approvals/")
    data = form_for(page, f"/approvals/{approval}/decide/", reason="checked",
                    password="pw-bob-sign")
    data["decision"] = ["APPROVED", "REJECTED"]
    before = counts()
    response = client.post(f"/approvals/{approval}/decide/", data)
    assert "The page sent no single decision: approve or reject." in said(response)
    assert counts() == before
    assert selectors.approvals(status="REQUESTED")[0].euid == approval


def test_a_reason_refused_for_reordering_text_is_said_back_written_out(client, lab):
    """A reason holding a right-to-left override was refused, and the banner giving it back
    obeyed the override: the words read reversed ("edirrevo-LTR")."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/cancel/",
                    reason="tube \u202eoverride-RTL")
    refused = client.post(f"/subjects/{subject}/cancel/", data)
    page = client.get(refused["Location"]).content.decode()
    assert "Your reason was not recorded: \u201ctube \\u202eoverride-RTL\u201d" in page
    assert "\u202e" not in page.split("was not recorded")[1].split("</li>")[0]


def test_a_refused_action_gives_the_typed_reason_back_once(client, lab):
    """The inspector's reason field came back empty after a refusal (a stale page)."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/cancel/",
                    reason="Sample withdrawn by the clinic, see ticket 4411")
    act("place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="READY", payload={"reason": "someone else was quicker"})
    before = counts()
    refused = client.post(f"/subjects/{subject}/cancel/", data)
    assert refused.status_code == 302 and counts() == before
    page = client.get(refused["Location"]).content.decode()
    assert "This subject changed" in page
    # who changed it, and why: what the person needs to decide again
    assert f"{subject}: This subject changed" in page
    assert "Last change: place hold by operator, just now: \u201csomeone else was quicker" in page
    assert 'value="Sample withdrawn by the clinic, see ticket 4411"' in page
    assert "Your reason was not recorded: \u201cSample withdrawn" in page
    again = client.get(refused["Location"]).content.decode()
    assert "ticket 4411" not in again  # given back once, not kept forever


def test_a_draft_never_reaches_a_later_page(client, lab):
    """A refused reason whose form was gone from the next page stayed in the session and
    filled the same form days later: one click from a cancel nobody chose."""
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/cancel/",
                    reason="WB-CANCEL: customer withdrew the study", next="/workbench/")
    act("place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="READY", payload={"reason": "someone else was quicker"})
    refused = client.post(f"/subjects/{subject}/cancel/", data)
    workbench = client.get(refused["Location"]).content.decode()  # no cancel form of it here
    assert "Your reason was not recorded: \u201cWB-CANCEL" in workbench
    later = client.get(f"/subjects/{subject}/").content.decode()
    assert "WB-CANCEL" not in later


def test_a_refused_hold_keeps_its_code(client, lab):
    subject = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{subject}/"), f"/subjects/{subject}/hold/",
                    reason="contamination suspected", hold_code="QC_FAIL",
                    expected_revision="99")
    refused = client.post(f"/subjects/{subject}/hold/", data)
    page = client.get(refused["Location"]).content.decode()
    assert '<option value="QC_FAIL" selected>' in page
    assert 'value="contamination suspected"' in page


def test_a_refused_failure_gives_the_typed_words_back(client, lab):
    from bloomops.web import services

    subject = make_subject("q1")
    worker = services.ensure_my_worker(lab["worker_human"])
    sci = actor("worker_human", username="sci")
    lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=subject)
    client = signed_in(client, lab["worker_human"])
    url = f"/leases/{lease['lease_euid']}/fail/"
    data = form_for(client.get("/my-work/"), url, error_message="Tube cracked in the rotor",
                    expected_state="HELD")
    refused = client.post(url, data)
    page = client.get("/my-work/").content.decode()
    assert refused.status_code == 302 and 'value="Tube cracked in the rotor"' in page
    assert "What went wrong, as you wrote it, was not recorded: \u201cTube cracked" in page
