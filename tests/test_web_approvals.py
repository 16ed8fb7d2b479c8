"""Approvals in the console (docs/RULES.md#approvals), through Django's test client: who sees
and may use which control, and every refusal of a form writing nothing."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client

from bloomops.execution import selectors
from tests.approval_support import (
    decide,
    integrity_held,
    password_of,
    person,
    request_release,
)
from tests.engine import counts, envelope
from tests.web_support import flow, form_for, forms, has_form, signed_in

pytestmark = pytest.mark.django_db


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def desk(tenant, users):
    flow()
    ann, bob = person("ann", "operator"), person("bob", "operator")
    subject, hold = integrity_held(ann)
    return {"ann": User.objects.get(username="ann"), "bob": User.objects.get(username="bob"),
            "subject": subject, "hold": hold, "ann_actor": ann, "bob_actor": bob,
            "users": users}


def test_the_inspector_offers_to_ask_instead_of_a_release_it_would_refuse(client, desk):
    euid = desk["subject"]
    client = signed_in(client, desk["ann"])
    page = client.get(f"/subjects/{euid}/")
    html = page.content.decode()
    assert not has_form(page, f"/subjects/{euid}/release-hold/")
    assert "Releasing an integrity hold needs a second person's approval." in html
    asks = [f["fields"]["action_key"] for f in forms(html)
            if f["action"] == f"/subjects/{euid}/request-approval/"]
    assert asks == ["release_execution_hold", "cancel_subject_execution"]
    # A release posted anyway (an older page, another tab) is refused, writes nothing, and the
    # inspector offers the request it needs.
    before = counts()
    refused = client.post(f"/subjects/{euid}/release-hold/", {
        "idempotency_key": "older-page", "expected_state": "HELD", "reason": "rerun passed"},
        follow=True)
    assert any("second person's approval" in m for m in said(refused))
    assert counts() == before
    offer = next(f["fields"] for f in forms(refused.content.decode())
                 if f["id"] == "approval-offer")
    data = {**offer, "reason": "QC rerun ok"}
    assert data["action_key"] == "release_execution_hold" and "hold_euid" not in data
    # A tampered page is refused in plain words and writes nothing.
    bad = client.post(f"/subjects/{euid}/request-approval/", {**data, "parameters": "{"},
                      follow=True)
    assert "The page sent invalid parameters." in said(bad) and counts() == before
    done = client.post(f"/subjects/{euid}/request-approval/", data, follow=True)
    assert any(m.startswith("Approval requested") for m in said(done))
    [approval] = selectors.approvals(subject_euid=euid)
    assert approval.props["hold_euids"] == [desk["hold"]]  # every integrity hold it releases
    # The offer is shown once; the subject lists its waiting approval and asks no more.
    again = client.get(f"/subjects/{euid}/")
    assert 'id="approval-offer"' not in again.content.decode()
    asks = [f["fields"]["action_key"] for f in forms(again.content.decode())
            if f["action"] == f"/subjects/{euid}/request-approval/"]
    assert asks == ["cancel_subject_execution"]
    assert "a request is waiting" in again.content.decode()
    assert "QC rerun ok" in again.content.decode()


def test_an_integrity_hold_among_several_is_asked_and_released_alone(client, desk):
    """Asking to release an integrity hold ended every hold of the item, an unrelated
    label hold among them, and the form, the inbox and the signer said only "Releasing an
    integrity hold"; there was no way to ask for the one hold."""
    from bloomops.web.templatetags.approvals_ui import terms
    from tests.engine import act

    euid, qc = desk["subject"], desk["hold"]
    label = act("place_execution_hold", desk["ann_actor"], subject_euid=euid,
                expected_state="HELD", payload={"hold_code": "LABEL_ISSUE",
                                                "reason": "label smudged"})["hold_euid"]
    ann = signed_in(client, desk["ann"])
    html = ann.get(f"/subjects/{euid}/").content.decode()
    assert "All 2 holds on it end with this release" in html
    ask = next(f["fields"] for f in forms(html)
               if f["action"] == f"/subjects/{euid}/request-approval/"
               and f["fields"].get("hold_euid") == qc)
    done = ann.post(f"/subjects/{euid}/request-approval/", {**ask, "reason": "rerun ok"},
                    follow=True)
    assert any(m.startswith("Approval requested") for m in said(done)), said(done)
    [approval] = selectors.approvals(subject_euid=euid)
    assert approval.props["hold_euids"] == [qc]
    assert terms(approval) == "only its QC_FAIL hold"
    bob = signed_in(Client(), desk["bob"])
    assert "only its QC_FAIL hold" in bob.get("/approvals/").content.decode()
    decide(desk["bob_actor"], approval.euid)
    assert {h["euid"] for h in selectors.active_holds()} == {label}
    assert envelope(euid)["state"] == "HELD"  # the label hold still stops it


def test_the_workbench_offers_no_cancel_an_integrity_hold_of_the_item_would_refuse(
        client, desk):
    """An item held by an operator's hold and by QC_FAIL: the operator hold's row offered
    "Cancel the work", asked to confirm, and was then refused as needing approval."""
    from tests.engine import act

    euid = desk["subject"]
    label = act("place_execution_hold", desk["ann_actor"], subject_euid=euid,
                expected_state="HELD", payload={"hold_code": "LABEL_ISSUE",
                                                "reason": "label smudged"})["hold_euid"]
    html = signed_in(client, desk["ann"]).get("/workbench/").content.decode()
    row = html.split(f'value="{euid}|HELD|')[1].split("</tr>")[0]
    assert label in row and f"/subjects/{euid}/cancel/" not in row
    assert "Cancelling its work needs a second person" in row


def test_the_inbox_asks_the_requester_to_withdraw_and_others_to_sign(client, desk):
    approval = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    mine = signed_in(client, desk["ann"]).get("/approvals/")
    assert has_form(mine, f"/approvals/{approval}/cancel/")
    assert not has_form(mine, f"/approvals/{approval}/decide/")
    assert 'id="nav-approvals"' in mine.content.decode()
    theirs = signed_in(client, desk["bob"]).get("/approvals/")
    data = form_for(theirs, f"/approvals/{approval}/decide/", reason="checked",
                    password=password_of("bob"), decision="APPROVED")
    done = client.post(f"/approvals/{approval}/decide/", data, follow=True)
    assert said(done)[-1].startswith(f"Approved and signed: Releasing an integrity hold done"
                                     f" on {desk['subject']}")
    recent = done.content.decode().split('id="approvals-recent"')[1]
    assert "Releasing an integrity hold" in recent and "release_execution_hold</code>" not in recent
    assert "signed by password re-entry; reason: checked" in recent
    assert envelope(desk["subject"])["state"] == "READY"


def test_withdrawing_a_request_asks_first_and_keeps_why(client, desk):
    """Withdraw ran on one click with the reason left blank, and the history read CANCELED
    with no time: it asks first, needs a reason, and reads as a decision's signature does:
    "withdrawn by ann, <when>; reason: <why>"."""
    approval = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    ann = signed_in(client, desk["ann"])
    form = next(f for f in forms(ann.get("/approvals/").content.decode())
                if f["action"] == f"/approvals/{approval}/cancel/")
    page = ann.get("/approvals/").content.decode()
    tag = page[page.index(f'action="/approvals/{approval}/cancel/"'):]
    assert 'data-confirm="Your request on' in tag[:tag.index(">")]
    before = counts()
    blank = client.post(form["action"], {**form["fields"], "reason": " "}, follow=True)
    assert said(blank)[-1].startswith("Give a reason") and counts() == before
    done = client.post(form["action"], {**form["fields"], "reason": "asked the wrong queue"},
                       follow=True)
    recent = done.content.decode().split('id="approvals-recent"')[1]
    row = recent[recent.index(f'data-approval="{approval}"'):].split("</tr>")[0]
    assert '<span class="badge">WITHDRAWN</span>' in row
    assert re.search(r"withdrawn by ann, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; reason: asked the"
                     r" wrong queue", row), row


def test_a_mistyped_signature_keeps_the_reason_not_the_password(client, desk):
    """The reason typed was gone after "The password does not match."; it is shown once
    more, the password never."""
    approval = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    bob = signed_in(client, desk["bob"])
    data = form_for(bob.get("/approvals/"), f"/approvals/{approval}/decide/",
                    reason="re-quant record checked", password="not-my-password",
                    decision="APPROVED")
    before = counts()
    page = bob.post(f"/approvals/{approval}/decide/", data, follow=True)
    assert any("password does not match" in m for m in said(page))
    assert counts() == before
    form = form_for(page, f"/approvals/{approval}/decide/")
    assert form["reason"] == "re-quant record checked"
    assert "not-my-password" not in page.content.decode()
    assert form_for(bob.get("/approvals/"), f"/approvals/{approval}/decide/")["reason"] == ""


def test_people_without_the_role_see_no_inbox_and_cannot_sign(client, desk):
    approval = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    scientist = desk["users"]["worker_human"]
    scientist.set_password("pw-sci")
    scientist.save()
    client = signed_in(client, scientist)
    assert 'id="nav-approvals"' not in client.get("/").content.decode()
    before = counts()
    response = client.post(f"/approvals/{approval}/decide/", {
        "idempotency_key": "k1", "decision": "APPROVED", "reason": "x",
        "password": "pw-sci"})
    assert response.status_code == 403 and counts() == before
    assert envelope(desk["subject"])["state"] == "HELD"


def test_the_signer_sees_every_parameter_of_the_requeue_they_approve(client, desk):
    """The inbox showed only the rule ("Requeueing a dead-lettered subject"): a requeue to
    another queue at STAT, with its attempts reset and another next step, was signed
    blind."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    make_queue("q_rework", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    act("request_approval", desk["ann_actor"], subject_euid=dead, queue_key="q_rework",
        payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                 "parameters": {"reason": "new aliquot", "priority": "STAT",
                                "reset_attempts": True, "next_action_key": "qc_rerun"}})
    client = signed_in(client, desk["bob"])
    row = client.get("/approvals/").content.decode().split(f"{dead}</code>")[1].split("</tr>")[0]
    assert ("to queue q_rework · priority STAT (300) · attempts reset to 0"
            " · next step qc_rerun") in row
    subject_page = client.get(f"/subjects/{dead}/").content.decode()
    assert "to queue q_rework · priority STAT (300)" in subject_page


def test_the_signer_sees_the_defaults_the_requeue_will_take(client, desk):
    """Asked with its reason only, a dead letter's requeue read "to its own queue", and
    then reset the subject's attempts to 0: a default signed for unseen."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    act("request_approval", desk["ann_actor"], subject_euid=dead,
        payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                 "parameters": {"reason": "new aliquot"}})
    client = signed_in(client, desk["bob"])
    row = client.get("/approvals/").content.decode().split(f"{dead}</code>")[1].split("</tr>")[0]
    assert "to its own queue · attempts reset to 0" in row


def test_the_terms_judge_terminal_as_the_requeue_does(client, desk):
    """The inbox judged "finished for good" by the subject's state alone, the requeue by its
    flag or its state (RULES.md#envelope): on another writer's terminal envelope whose state
    is not a terminal one, the signer read "attempts kept" and the approved requeue reset
    them to 0."""
    from django.db import connection

    from tests.approval_support import dead_lettered, decide
    from tests.engine import act, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    with connection.cursor() as cur:  # another TapDB writer: terminal by flag only
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                    " '{properties,execution,state}', '\"FAILED_RETRYABLE\"') WHERE euid = %s",
                    [dead])
    assert envelope(dead)["terminal"] is True and envelope(dead)["attempt_count"] == 1
    form = signed_in(Client(), desk["ann"]).get(f"/subjects/{dead}/").content.decode()
    assert "reset to 0 (the default for finished work)" in form
    asked = act("request_approval", desk["ann_actor"], subject_euid=dead,
                payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                         "parameters": {"reason": "new aliquot"}})
    client = signed_in(client, desk["bob"])
    row = client.get("/approvals/").content.decode().split(f"{dead}</code>")[1].split("</tr>")[0]
    assert "to its own queue · attempts reset to 0" in row
    decide(desk["bob_actor"], asked["approval_euid"])
    assert envelope(dead)["state"] == "READY" and envelope(dead)["attempt_count"] == 0


def test_a_requeue_is_asked_with_its_queue_priority_and_attempts(client, desk):
    """The request form had only "Why requeue": a requeue could not be asked to another
    queue or at STAT, and the approver signed "to its own queue" against a reason that
    said otherwise."""
    from tests.approval_support import dead_lettered
    from tests.engine import make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    make_queue("q_rework", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    ann = signed_in(client, desk["ann"])
    page = ann.get(f"/subjects/{dead}/")
    ask = next(f for f in forms(page.content.decode())
               if f["action"] == f"/subjects/{dead}/request-approval/"
               and f["fields"].get("action_key") == "requeue_subject")
    data = {**ask["fields"], "queue_key": "q_rework", "priority": "STAT",
            "reset_attempts": "no", "reason": "re-extract on the rework line at STAT"}
    before = counts()
    bad = ann.post(f"/subjects/{dead}/request-approval/", {**data, "reset_attempts": "maybe"},
                   follow=True)
    assert "Choose whether the failed attempts are reset." in said(bad)
    assert counts() == before
    done = ann.post(f"/subjects/{dead}/request-approval/", data, follow=True)
    assert any(m.startswith("Approval requested") for m in said(done))
    [approval] = selectors.approvals(subject_euid=dead)
    assert approval.props["queue_key"] == "q_rework"
    assert approval.props["parameters"]["priority"] == "STAT"
    assert approval.props["parameters"]["reset_attempts"] is False
    bob = signed_in(Client(), desk["bob"])
    row = bob.get("/approvals/").content.decode().split(f"{dead}</code>")[1].split("</tr>")[0]
    assert "to queue q_rework · priority STAT (300) · attempts kept" in row


def test_the_inbox_shows_what_the_decision_weighs(client, desk):
    """An integrity hold's release showed only "QC_FAIL", a requeue nothing of the failure:
    the approver had to open each subject to learn why it was held or why it failed."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    act("request_approval", desk["ann_actor"], subject_euid=dead,
        payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                 "parameters": {"reason": "new aliquot"}})
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    held = html.split(f"{desk['subject']}</code>")[1].split("</tr>")[0]
    assert "Held because: control out of range" in held
    failed = html.split(f"{dead}</code>")[1].split("</tr>")[0]
    assert "Failed for good: tube cracked" in failed


def test_the_navigation_counts_only_what_the_person_may_decide(client, desk):
    """The requester's own request lit their navigation badge: a call to act on something
    only another person may decide."""
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    ann = signed_in(client, desk["ann"]).get("/").content.decode()
    nav = ann[ann.index('id="nav-approvals"'):].split("</a>")[0]
    assert "badge" not in nav
    bob = signed_in(Client(), desk["bob"]).get("/").content.decode()
    nav = bob[bob.index('id="nav-approvals"'):].split("</a>")[0]
    # the count in words too, for a screen reader ("Approvals 1" said nothing of what)
    assert ('<span class="badge warn" title="waiting for a decision">1<span class="sr-only">'
            ' waiting for a decision</span></span>') in nav


def test_recent_decisions_stay_listed_behind_many_waiting_requests(client, desk):
    """The recent decisions were picked out of the newest 70 approvals after the read: with
    70 requests waiting, the panel said nothing had been decided."""
    from tests.approval_support import decide

    rejected = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    decide(desk["bob_actor"], rejected, "REJECTED")
    for _ in range(70):
        subject, hold = integrity_held(desk["ann_actor"])
        request_release(desk["ann_actor"], subject, hold)
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    recent = html[html.index('id="approvals-recent"'):]
    assert rejected in recent and "REJECTED" in recent


def test_a_request_its_subject_outran_says_so_and_offers_no_approval(client, desk):
    """Two requests on one held subject: once one was approved, the other stayed in the
    inbox as if it could be signed, and every approval of it was refused until it expired a
    day later."""
    from tests.approval_support import decide
    from tests.engine import act

    release = request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    cancel = act("request_approval", desk["ann_actor"], subject_euid=desk["subject"],
                 payload={"action_key": "cancel_subject_execution", "reason": "withdrawn",
                          "parameters": {"reason": "withdrawn"}})
    decide(desk["bob_actor"], release["approval_euid"])
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    row = html.split(f'data-approval="{cancel["approval_euid"]}"')[1].split("</tr>")[0]
    assert "has changed since this was asked" in row and "can no longer be approved" in row
    assert 'value="APPROVED"' not in row and 'value="REJECTED"' in row
    [stale] = [a for a in selectors.approvals(status="REQUESTED")]
    assert stale.euid == cancel["approval_euid"] and stale.stale
    decide(desk["bob_actor"], cancel["approval_euid"], "REJECTED", reason="outrun")
    assert selectors.approvals(status="REQUESTED") == []


def test_the_subject_page_says_a_waiting_request_it_outran_cannot_be_approved(client, desk):
    """The subject changed after a release was asked (another hold placed): its page still
    said "a request is waiting", which nobody could approve any more."""
    from tests.engine import act

    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    ann = signed_in(client, desk["ann"])
    top = ann.get(f"/subjects/{desk['subject']}/").content.decode()
    assert "a request is waiting (see Approvals below)" in top
    act("place_execution_hold", desk["bob_actor"], subject_euid=desk["subject"],
        expected_state="HELD", payload={"hold_code": "OPERATOR_HOLD", "reason": "and this"})
    html = ann.get(f"/subjects/{desk['subject']}/").content.decode()
    said = html.split('data-gated="release_execution_hold"')[1].split("</p>")[0]
    assert "can no longer be approved: withdraw or reject it in" in said
    assert 'href="/approvals/"' in said and "a request is waiting" not in said


def test_a_change_to_the_subject_says_it_ends_a_waiting_request(client, desk):
    """Placing another hold on an item whose release was asked for said nothing of the
    request, which no one could approve once the hold was placed."""
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    bob = signed_in(client, desk["bob"])
    html = bob.get(f"/subjects/{desk['subject']}/").content.decode()
    tag = html.split(f'action="/subjects/{desk["subject"]}/hold/"')[1].split(">")[0]
    confirm = re.search(r'data-confirm="([^"]*)"', tag).group(1)
    assert "Waiting for a second person: releasing an integrity hold, asked by ann." in confirm
    assert "after this it can no longer be approved" in confirm
    [waiting] = selectors.approvals(status="REQUESTED")
    decide(desk["bob_actor"], waiting.euid, "REJECTED", reason="not yet")
    quiet = bob.get(f"/subjects/{desk['subject']}/").content.decode()
    assert "Waiting for a second person" not in quiet


def test_cancelling_a_dead_letter_on_the_workbench_says_its_requeue_request_ends(client,
                                                                                 desk):
    """The workbench's cancel of a dead letter whose requeue was asked for said nothing of
    the request, which nobody could approve once the work was canceled."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    make_queue("dl")  # takes any worker
    dead = dead_lettered("dl")
    bob = signed_in(client, desk["bob"])

    def cancel_confirm() -> str:
        html = bob.get("/workbench/").content.decode()
        tag = html.split(f'action="/subjects/{dead}/cancel/"')[1].split(">")[0]
        return re.search(r'data-confirm="([^"]*)"', tag).group(1)

    assert "second person" not in cancel_confirm()
    act("request_approval", desk["ann_actor"], subject_euid=dead, payload={
        "action_key": "requeue_subject", "reason": "new aliquot", "parameters": {}})
    assert "Its requeue, asked for and waiting for a second person, can then no longer be" \
        " approved" in cancel_confirm()


def test_the_terms_signed_for_read_the_same_once_decided(client, desk):
    """Once the requeue had run, the subject was no longer terminal, and the approval just
    signed for "attempts reset to 0" read "attempts kept" in the decisions and on the
    subject page: the record of what was signed changed after the signature."""
    from tests.approval_support import dead_lettered, decide
    from tests.engine import act, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    asked = act("request_approval", desk["ann_actor"], subject_euid=dead,
                payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                         "parameters": {"reason": "new aliquot"}})
    decide(desk["bob_actor"], asked["approval_euid"])
    assert envelope(dead)["state"] == "READY" and envelope(dead)["attempt_count"] == 0
    client = signed_in(client, desk["bob"])
    html = client.get("/approvals/").content.decode()
    recent = html[html.index('id="approvals-recent"'):]
    row = recent.split(f'data-approval="{asked["approval_euid"]}"')[1].split("</tr>")[0]
    assert "to its own queue · attempts reset to 0" in row
    subject_page = client.get(f"/subjects/{dead}/").content.decode()
    assert "attempts reset to 0" in subject_page and "attempts kept" not in subject_page


def test_the_history_says_whose_words_an_approved_action_carries(client, desk):
    """The inspector's history read "bob · release_execution_hold · QC rerun passed, please
    release": the requester's words under the approver's name, the request nowhere."""
    from bloomops.execution.context import Actor
    from tests.approval_support import decide

    asked = request_release(desk["ann_actor"], desk["subject"], desk["hold"],
                            parameters={"reason": "rerun passed"})
    User.objects.filter(username="bob").update(first_name="Bob", last_name="Marley")
    decide(Actor.of(User.objects.get(username="bob")), asked["approval_euid"])
    html = signed_in(client, desk["bob"]).get(f"/subjects/{desk['subject']}/").content.decode()
    actions = html[html.index('id="actions"'):].split("</table>")[0]
    row = next(r for r in actions.split("<tr>") if "release_execution_hold" in r)
    assert (f"Approved by bob on request <code>{asked['approval_euid']}</code> by ann:"
            " “rerun passed”") in row
    # who did it, by name as people read a person (the username beside it), as they were
    # named when they did it
    assert "<td>Bob Marley (bob)" in row
    User.objects.filter(username="bob").update(first_name="Robert")
    html = signed_in(client, desk["bob"]).get(f"/subjects/{desk['subject']}/").content.decode()
    actions = html[html.index('id="actions"'):].split("</table>")[0]
    row = next(r for r in actions.split("<tr>") if "release_execution_hold" in r)
    assert "<td>Bob Marley (bob)" in row


def test_a_hold_released_on_approval_says_whose_words_end_it(client, desk):
    """The hold read "Ended by bob · Why it ended: rerun passed": the requester's words
    credited to the approver, the request nowhere."""
    from tests.approval_support import decide

    asked = request_release(desk["ann_actor"], desk["subject"], desk["hold"],
                            parameters={"reason": "rerun passed"})
    decide(desk["bob_actor"], asked["approval_euid"])
    client = signed_in(client, desk["bob"])
    for page in (f"/subjects/{desk['subject']}/", "/holds/?since=all"):
        html = client.get(page).content.decode()
        row = html[html.index(desk["hold"]):].split("</tr>")[0]
        assert ("rerun passed <span class=\"muted\">(asked by ann; approval"
                f" <code>{asked['approval_euid']}</code>)</span>") in row, page


def test_the_asker_sees_on_the_workbench_that_their_request_was_rejected(client, desk):
    """A rejected release left the workbench row offering "Ask on its page" as if nothing
    had been asked; the rejection, by whom and why, now heads the row until it is asked
    again."""
    approval = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    ann = signed_in(client, desk["ann"])
    row = _hold_row(ann.get("/workbench/").content.decode(), desk["hold"])
    assert "Release requested: waiting" in row and "rejected" not in row
    decide(desk["bob_actor"], approval, "REJECTED", reason="the QC trace is missing")
    row = _hold_row(ann.get("/workbench/").content.decode(), desk["hold"])
    assert f'data-rejected="{approval}"' in row
    assert "Its release was rejected by bob" in row and ": the QC trace is missing" in row
    assert "Ask again on its page" in row
    again = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    row = _hold_row(ann.get("/workbench/").content.decode(), desk["hold"])
    assert "Release requested: waiting" in row and "rejected" not in row, again


def test_a_rejection_asked_past_and_withdrawn_no_longer_heads_the_row(client, desk):
    """The workbench showed the last rejection whatever came after it: asked again and then
    withdrawn, the row still read "rejected by bob", which was no longer the last word."""
    from tests.engine import act

    first = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    decide(desk["bob_actor"], first, "REJECTED", reason="the QC trace is missing")
    again = request_release(desk["ann_actor"], desk["subject"], desk["hold"])["approval_euid"]
    act("cancel_approval", desk["ann_actor"],
        payload={"approval_euid": again, "reason": "asked too soon"})
    ann = signed_in(client, desk["ann"])
    row = _hold_row(ann.get("/workbench/").content.decode(), desk["hold"])
    assert "data-rejected" not in row and "rejected by bob" not in row, row
    assert "Release requested: waiting" not in row and "Ask on its page" in row


def _hold_row(html: str, hold: str) -> str:
    holds = html.split('id="holds"')[1]
    start = holds.index(f'data-gated="{hold}"')
    return holds[holds.rfind("<tr", 0, start):holds.index("</tr>", start)]


def test_a_dead_letter_says_its_requeue_was_rejected(client, desk):
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    asked = act("request_approval", desk["ann_actor"], subject_euid=dead,
                payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                         "parameters": {"reason": "new aliquot"}})["approval_euid"]
    decide(desk["bob_actor"], asked, "REJECTED", reason="the aliquot is from another lot")
    html = signed_in(client, desk["ann"]).get("/workbench/").content.decode()
    letters = html.split('id="dead-letters"')[1].split("</table>")[0]
    row = letters[letters.index(f'data-euid="{dead}"'):].split("</tr>")[0]
    assert f'data-rejected="{asked}"' in row
    assert "Its requeue was rejected by bob" in row and "another lot" in row
    again = act("request_approval", desk["ann_actor"], subject_euid=dead,
                payload={"action_key": "requeue_subject", "reason": "a second aliquot",
                         "parameters": {"reason": "new aliquot"}})["approval_euid"]
    act("cancel_approval", desk["ann_actor"],
        payload={"approval_euid": again, "reason": "asked too soon"})
    html = signed_in(client, desk["ann"]).get("/workbench/").content.decode()
    letters = html.split('id="dead-letters"')[1].split("</table>")[0]
    row = letters[letters.index(f'data-euid="{dead}"'):].split("</tr>")[0]
    assert "data-rejected" not in row and "rejected by bob" not in row, row


def test_the_dashboard_panel_sends_a_requester_to_see_not_to_decide(client, desk):
    """The asker of the only waiting request was told "Decide in Approvals", where all they
    could do was withdraw it."""
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    panel = signed_in(client, desk["ann"]).get("/").content.decode().split(
        'id="approvals-panel"')[1].split("</section>")[0]
    assert "Decide in Approvals" not in panel
    assert "Your own request, waiting for a second person" in panel
    panel = signed_in(client, desk["bob"]).get("/").content.decode().split(
        'id="approvals-panel"')[1].split("</section>")[0]
    assert "Decide in Approvals" in panel and "your own" not in panel


def test_the_inbox_lists_the_requests_that_expire_soonest_and_how_many_wait(
        client, desk, monkeypatch):
    """QA asked 1,002 requeues at once: the inbox showed the newest 200 of them, and the
    other 802 expired unseen. It lists the oldest first (they expire soonest) and says of
    how many."""
    from bloomops.execution import selectors

    asked = []
    for _ in range(3):
        subject, hold = integrity_held(desk["ann_actor"])
        asked.append(request_release(desk["ann_actor"], subject, hold)["approval_euid"])
    listed = selectors.approvals
    monkeypatch.setattr("bloomops.web.views.approvals.selectors.approvals",
                        lambda **kw: listed(**{**kw, "limit": 2}))
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    waiting = html.split('id="h-waiting"')[1].split("</section>")[0]
    assert "Waiting for a decision (the 2 that expire soonest, of 3)" in html
    assert asked[0] in waiting and asked[1] in waiting and asked[2] not in waiting


def test_the_inbox_orders_by_expiry_not_by_when_asked(client, desk, settings):
    settings.BLOOMOPS_APPROVAL_TTL_SECONDS = 86400
    subject, hold = integrity_held(desk["ann_actor"])
    long_lived = request_release(desk["ann_actor"], subject, hold)["approval_euid"]
    settings.BLOOMOPS_APPROVAL_TTL_SECONDS = 600
    subject, hold = integrity_held(desk["ann_actor"])
    short_lived = request_release(desk["ann_actor"], subject, hold)["approval_euid"]
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    waiting = html.split('id="h-waiting"')[1].split("</section>")[0]
    assert waiting.index(short_lived) < waiting.index(long_lived)


def test_the_inbox_names_who_asked_as_people_read_a_person(client, desk):
    User.objects.filter(username="ann").update(first_name="Ann", last_name="Asker")
    subject, hold = integrity_held(desk["ann_actor"])
    request_release(desk["ann_actor"], subject, hold)
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    waiting = html.split('id="h-waiting"')[1].split("</section>")[0]
    assert '<td data-label="Asked by">Ann Asker (ann)</td>' in waiting


def test_a_dead_letter_says_who_closed_it_when_and_why_each_time(client, desk, settings):
    """The subject page said only "REQUEUED" of a dead letter, with when it was made; who
    closed it, when and why were not said, and its earlier cancel vanished."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, make_queue

    settings.BLOOMOPS_APPROVAL_RULES = []
    make_queue("q_dead", required_worker_capabilities=[])
    euid = dead_lettered("q_dead")
    ann = desk["ann_actor"]
    act("cancel_subject_execution", ann, subject_euid=euid, expected_state="FAILED_TERMINAL",
        payload={"reason": "tube lost in transit"})
    act("requeue_subject", ann, subject_euid=euid, expected_state="CANCELED",
        payload={"reason": "tube found in the cold room"})
    html = signed_in(client, desk["ann"]).get(f"/subjects/{euid}/").content.decode()
    section = html.split('id="h-dl"')[1].split("</section>")[0]
    assert "closed CANCELED by" in section and "tube lost in transit" in section
    assert "closed REQUEUED by" in section and "tube found in the cold room" in section


def test_a_request_from_a_page_the_subject_has_left_is_refused(client, desk):
    """A workbench open since before a colleague cancelled a dead-lettered item asked for
    its requeue, and the approver revived it unaware: the request carries the state and
    revision the page showed."""
    from tests.approval_support import dead_lettered
    from tests.engine import act, actor, make_queue

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    ann = signed_in(client, desk["ann"])
    for page in (f"/subjects/{dead}/", "/workbench/"):
        ask = next(f for f in forms(ann.get(page).content.decode())
                   if f["action"] == f"/subjects/{dead}/request-approval/")
        assert ask["fields"]["expected_state"] == "FAILED_TERMINAL", page
    act("cancel_subject_execution", actor("operator"), subject_euid=dead,
        expected_state="FAILED_TERMINAL", payload={"reason": "duplicate tube"})
    before = counts()
    done = ann.post(f"/subjects/{dead}/request-approval/",
                    {**ask["fields"], "reason": "rerun it"}, follow=True)
    assert not any(m.startswith("Approval requested") for m in said(done))
    assert any("CANCELED" in m or "changed" in m for m in said(done)), said(done)
    assert counts() == before
    assert selectors.approvals(subject_euid=dead) == []


def test_an_open_dashboard_hears_of_a_new_request_without_a_reload(client, desk):
    """A supervisor's dashboard said "Approvals waiting (0)", with no badge in the menu, long
    after QA had asked: only a reload showed it. The panel asks again on its own, and its
    answer brings the menu's count with it."""
    from django.test import Client

    from tests.approval_support import request_release

    bob = signed_in(client, desk["bob"])
    page = bob.get("/").content.decode()
    panel = page.split('id="approvals-panel"')[1].split(">")[0]
    assert 'hx-get="/approvals/waiting/"' in panel and "data-poll" in panel
    assert "Approvals waiting (0)" in page
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    polled = bob.get("/approvals/waiting/", HTTP_X_BLOOMOPS_POLL="1").content.decode()
    assert "Approvals waiting (1)" in polled
    nav = polled.split('id="nav-approvals"')[1].split("</a>")[0]
    assert 'hx-swap-oob="true"' in nav and ">1<" in nav
    human = signed_in(Client(), desk["users"]["worker_human"])
    assert human.get("/approvals/waiting/").status_code == 403


def test_the_waiting_panel_names_the_asker_as_the_inbox_does(client, desk):
    """The dashboard's panel said "asked by ann" where the inbox said the person's name."""
    from django.contrib.auth.models import User

    ann = User.objects.get(username="ann")
    ann.first_name, ann.last_name = "Ann", "Asker"
    ann.save()
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    panel = signed_in(client, desk["bob"]).get("/").content.decode().split(
        'id="approvals-panel"')[1].split("</section>")[0]
    assert "asked by Ann Asker (ann)" in panel


def test_a_request_that_expired_says_when_among_the_recent(client, desk, settings):
    """The inbox's recent list read "–" where an expired request's signature would be: when
    it expired, undecided, was not said."""
    from bloomops.execution import clock

    asked = request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    clock.advance(settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 60)
    html = signed_in(client, desk["bob"]).get("/approvals/").content.decode()
    recent = html[html.index('id="approvals-recent"'):]
    row = recent.split(f'data-approval="{asked["approval_euid"]}"')[1].split("</tr>")[0]
    assert "EXPIRED" in row and "none: expired undecided" in row


def test_the_dashboard_puts_the_requests_waiting_before_the_charts(client, desk):
    """On a tablet QA scrolled past every chart to find the request waiting on them."""
    request_release(desk["ann_actor"], desk["subject"], desk["hold"])
    html = signed_in(client, desk["bob"]).get("/").content.decode()
    assert html.index('id="approvals-panel"') < html.index('id="history"')
    assert html.index('id="queue-table"') < html.index('id="approvals-panel"')
