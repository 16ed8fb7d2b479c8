"""Every operator-UI action posts through the executor — success, replay of a double
submit, stale pages, and each refusal in plain words with nothing written."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from bloomops.web import services
from tests.engine import act, actor, counts, envelope, make_queue, make_subject, register
from tests.web_support import form_for, forms, signed_in

pytestmark = pytest.mark.django_db


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def active_leases(user) -> list[dict]:
    worker = services.my_worker_euid(user)
    return selectors.leases(status="ACTIVE", worker_euid=worker) if worker else []


def action_count(action_key: str) -> int:
    from tests.engine import fetch_value

    return fetch_value("SELECT count(*) FROM generic_instance WHERE type = 'execution_queue'"
                       " AND subtype = %s", [action_key])


# ---------------------------------------------------------------- claiming


def test_claim_next_registers_the_human_worker_and_claims_the_head(client, lab):
    head = make_subject("q1", name="first", ready_at="2020-01-01T00:00:00.000000Z")
    make_subject("q1", name="second")
    client = signed_in(client, lab["worker_human"])
    page = client.get("/queues/q1/")
    response = client.post("/queues/q1/claim-next/", form_for(page, "/queues/q1/claim-next/"))
    lease = active_leases(lab["worker_human"])[0]["euid"]  # to the claimed item's work view
    assert response.status_code == 302 and response["Location"] == f"/my-work/?item={lease}"
    assert f"Claimed first ({head}) from Queue one (q1)." in said(response)
    worker = selectors.workers(euid=services.my_worker_euid(lab["worker_human"]))[0]
    assert worker.props["worker_type"] == "HUMAN_SESSION"
    assert worker.props["owner_username"] == "sci" and worker.max_concurrent_leases == 5
    assert worker.worker_key == "human://sci"
    assert [x["subject_euid"] for x in active_leases(lab["worker_human"])] == [head]
    assert action_count("heartbeat_worker") == 1  # the worker heartbeats when its user acts
    html = client.get("/queues/q1/").content.decode()
    assert f'data-euid="{head}"' not in html and "1 visible item" in html


def test_double_submit_replays_instead_of_claiming_twice(client, lab):
    make_subject("q1")
    make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/queues/q1/"), "/queues/q1/claim-next/")
    client.post("/queues/q1/claim-next/", data)
    again = client.post("/queues/q1/claim-next/", data)
    assert any("Already done" in m for m in said(again))
    assert len(active_leases(lab["worker_human"])) == 1
    assert action_count("claim_queue_item") == 1


def test_claim_next_on_an_empty_queue_says_so(client, lab):
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/queues/q1/"), "/queues/q1/claim-next/")
    response = client.post("/queues/q1/claim-next/", data)
    assert "There is no claimable work in the queue right now." in said(response)


def test_claim_a_row_with_a_stale_page_is_refused(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/queues/q1/"), f"/subjects/{euid}/claim/")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="READY", payload={"reason": "x"})
    act("release_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="HELD", payload={"reason": "x"})
    response = client.post(f"/subjects/{euid}/claim/", data)
    assert any("changed after you last read it" in m for m in said(response))
    assert active_leases(lab["worker_human"]) == []


def test_claim_a_row_from_the_queue_page(client, lab):
    make_subject("q1", name="first", ready_at="2020-01-01T00:00:00.000000Z")
    chosen = make_subject("q1", name="chosen")
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/queues/q1/"), f"/subjects/{chosen}/claim/")
    response = client.post(f"/subjects/{chosen}/claim/", data)
    assert f"Claimed chosen ({chosen}) from Queue one (q1)." in said(response)
    assert [x["subject_euid"] for x in active_leases(lab["worker_human"])] == [chosen]
    # to its work view, as Claim next goes (the My work list, where a tap on another
    # card's button was one slip away)
    lease = active_leases(lab["worker_human"])[0]["euid"]
    assert response["Location"] == f"/my-work/?item={lease}"


def test_a_row_claim_lost_to_another_says_who_has_it_and_stays_on_the_queue(client, lab):
    """Two scientists tapped Claim on one row: the loser landed on My work under "Leased by
    worker Z-AX-80 until 2026-11-27T14:10:30.556517Z"."""
    from tests.engine import SERVICE, claim, register

    euid = make_subject("q1", name="raced for")
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/queues/q1/"), f"/subjects/{euid}/claim/")
    svc = actor(*SERVICE)
    claim(svc, register(svc, capabilities=["wetlab.extraction"], display_name="Robot arm 2"),
          "q1")
    response = client.post(f"/subjects/{euid}/claim/", data)
    assert response["Location"] == "/queues/q1/"
    [words] = [m for m in said(response) if m.startswith("Not claimable")]
    assert "Robot arm 2 is working on it; their claim ends in " in words
    assert "Z-AX-" not in words and not re.search(r"\d{4}-\d\d-\d\dT", words)
    assert active_leases(lab["worker_human"]) == []


def test_a_strict_queue_offers_a_claim_only_at_its_head_and_names_it(client, lab):
    """Every row of a queue that runs in order offered Claim; all but the head's were
    refused, and the refusal did not say which item was the head."""
    make_queue("strict", strict_order=True, required_worker_capabilities=[])
    head = make_subject("strict", name="Block A1", priority=10)
    later = make_subject("strict", name="Block A2", priority=0)
    client = signed_in(client, lab["worker_human"])
    page = client.get("/queues/strict/")
    html = page.content.decode()
    assert f'action="/subjects/{head}/claim/"' in html
    assert f'action="/subjects/{later}/claim/"' not in html
    assert '<span class="muted in-order">In order: Block A1 first</span>' in html
    response = client.post(f"/subjects/{later}/claim/", {
        **form_for(page, f"/subjects/{head}/claim/"), "expected_state": "READY"})
    assert said(response) == ["This queue runs work strictly in order: only the item at its"
                              f" head, Block A1 ({head}), may be claimed now."]
    assert active_leases(lab["worker_human"]) == []

def test_max_leases_is_explained(client, lab):
    for _ in range(6):
        make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    for _ in range(5):
        client.post("/queues/q1/claim-next/", form_for(client.get("/queues/q1/"),
                                                         "/queues/q1/claim-next/"))
    response = client.post("/queues/q1/claim-next/", form_for(client.get("/queues/q1/"),
                                                                "/queues/q1/claim-next/"))
    assert any("You already hold 5 of the 5 items you may hold at once." in m
               for m in said(response))


# ---------------------------------------------------------------- scan to claim


def test_scan_claims_the_subject(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    data = form_for(client.get("/scan/"), "/scan/", euid=f"  {euid.lower()} ")
    response = client.post("/scan/", data)
    assert response.status_code == 302 and response["Location"] == "/scan/"
    banner = client.get("/scan/").content.decode()
    assert f"({euid})" in banner and "Queue one" in banner
    assert 'value=""' in banner  # the field is empty for the next scan
    html = client.get("/my-work/").content.decode()
    assert euid in html and "Complete" in html


def test_scan_of_a_held_subject_shows_why_and_writes_nothing(client, lab):
    euid = make_subject("q1", name="Specimen 0001")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="READY", payload={"reason": "QA hold"})
    client = signed_in(client, lab["worker_human"])
    services.ensure_my_worker(lab["worker_human"])
    data = form_for(client.get("/scan/"), "/scan/", euid=euid)
    before = counts()
    response = client.post("/scan/", data)
    html = response.content.decode()
    assert response.status_code == 409
    assert "Not claimed" in html and "ACTIVE_HOLD" in html and "QA hold" in html
    # named as the person knows it (a successful claim is), its EUID beside
    assert f"Not claimed: Specimen 0001 (<code>{euid}</code>)</h2>" in html
    # the hold says it; "State HELD is not eligible in q1" would say it again in code
    assert "STATE_NOT_ELIGIBLE" not in html
    assert counts() == before


def test_scan_of_an_unknown_euid(client, lab):
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", form_for(client.get("/scan/"), "/scan/",
                                              euid="Z-MX-404404"))
    assert response.status_code == 404
    assert "No subject has this EUID or name." in response.content.decode()
    empty = client.post("/scan/", form_for(client.get("/scan/"), "/scan/", euid=""))
    assert empty.status_code == 400 and "Scan or type an EUID or a name." in empty.content.decode()


def test_scan_of_a_subject_the_worker_may_not_serve(client, lab):
    make_queue("exotic", required_worker_capabilities=["nobody.has.this"])
    euid = make_subject("exotic")
    client = signed_in(client, lab["worker_human"])
    response = client.post("/scan/", form_for(client.get("/scan/"), "/scan/", euid=euid))
    html = response.content.decode()
    assert response.status_code == 409
    assert "Missing capabilities: nobody.has.this." in html
    assert "WORKER_NOT_ELIGIBLE" in html


# ---------------------------------------------------------------- my work


def claimed(client, user, euid=None) -> dict:
    euid = euid or make_subject("q1")
    client.post("/scan/", form_for(client.get("/scan/"), "/scan/", euid=euid))
    return next(x for x in active_leases(user) if x["subject_euid"] == euid)


def test_complete_moves_the_item_to_the_next_queue_of_the_flow(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    page = client.get("/my-work/")
    html = page.content.decode()
    assert '<option value="q2" selected>' in html  # the flow's next queue is preselected
    assert "15 min" in html or "14 min" in html  # time left of the lease
    response = client.post(f"/leases/{lease['euid']}/complete/",
                           form_for(page, f"/leases/{lease['euid']}/complete/"), follow=True)
    # the item as the cards name it: its name, then its EUID, and a link to its page (a
    # message was text that could not be followed), shown as one
    euid = lease["subject_euid"]
    shown = response.content.decode().split('class="messages"')[1].split("</ul>")[0]
    assert (f'Completed <a href="/subjects/{euid}/">s ({euid})</a>; it moved to Queue two'
            f" (q2).") in shown
    assert envelope(lease["subject_euid"])["next_queue_key"] == "q2"
    assert lease["subject_euid"] in client.get("/queues/q2/").content.decode()


def test_complete_without_next_queue_finishes_the_flow(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/complete/",
                    next_queue_key="")
    response = client.post(f"/leases/{lease['euid']}/complete/", data)
    assert any("its flow is finished" in m for m in said(response))
    assert envelope(lease["subject_euid"])["state"] == "COMPLETED"


def test_fail_with_a_retry_class(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/fail/",
                    error_class="TRANSIENT_DEPENDENCY", error_message="centrifuge busy")
    response = client.post(f"/leases/{lease['euid']}/fail/", data)
    assert said(response)[-1] == (f"Recorded the failure of s ({lease['subject_euid']}): it goes"
                                  " back to its queue to be tried again after a pause.")
    env = envelope(lease["subject_euid"])
    assert env["state"] == "FAILED_RETRYABLE" and env["retry_at"]


def test_fail_permanently_dead_letters(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/fail/",
                    error_class="PERMANENT_INPUT", error_message="sample hemolysed")
    client.post(f"/leases/{lease['euid']}/fail/", data)
    assert envelope(lease["subject_euid"])["state"] == "FAILED_TERMINAL"
    assert lease["subject_euid"] in client.get("/workbench/").content.decode()


@pytest.mark.parametrize("message", ["", "   ", "\u200b\u200b"])
def test_a_failure_without_words_is_refused_and_writes_nothing(client, lab, message):
    """The form requires the words; a request without them (the browser check removed, an
    old page) is refused by the server too: the next person and QA read them."""
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/fail/",
                    error_class="TRANSIENT_DEPENDENCY", error_message=message)
    before = counts()
    response = client.post(f"/leases/{lease['euid']}/fail/", data)
    assert said(response)[-1].startswith("Say what went wrong")
    assert counts() == before and envelope(lease["subject_euid"])["state"] != "FAILED_RETRYABLE"


def test_a_refused_failure_comes_back_open_with_the_kind_chosen(client, lab):
    """It came back closed and set to "try again later": the words added, a resubmit
    recorded a retryable failure where the person had chosen "cannot be done"."""
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    sent_to = f"/leases/{lease['euid']}/fail/"
    data = form_for(client.get("/my-work/"), sent_to, error_class="PERMANENT_INPUT",
                    error_message="  ")
    page = client.post(sent_to, data, follow=True).content.decode()
    form = page.split(f'action="{sent_to}"')[0].rsplit("<details", 1)[1]
    assert form.startswith(' class="fail" open>')
    chosen = page.split(f'action="{sent_to}"')[1].split("</select>")[0]
    assert '<option value="PERMANENT_INPUT" data-after' in chosen
    assert re.search(r'value="PERMANENT_INPUT"[^>]*selected', chosen)
    assert 'pattern=".*\\S.*"' in page  # blank words are refused before the question
    # the next page is as it was: closed, the first kind
    again = client.get("/my-work/").content.decode()
    assert '<details class="fail" open>' not in again


def test_fail_with_an_unknown_class_is_refused(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/fail/",
                    error_class="BOGUS", error_message="x")
    before = counts()
    response = client.post(f"/leases/{lease['euid']}/fail/", data)
    assert any(m.startswith("error_class must be one of") for m in said(response))
    assert counts() == before


def test_renew_extends_the_lease(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    clock.advance(600)
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/renew/")
    response = client.post(f"/leases/{lease['euid']}/renew/", data)
    # back to its card, not to the page's top
    assert response["Location"].endswith(f"#item-{lease['euid']}")
    [words] = [m for m in said(response)
               if m.startswith(f"Renewed: s ({lease['subject_euid']}) is yours for another")]
    ttl = active_leases(lab["worker_human"])[0]["props"]["ttl_seconds"]
    assert f"is yours for another {ttl // 60} min, until" in words, words
    # its time marked for the browser to say in the reader's zone (the page's other times are),
    # with its day when that is not today (a renewal just before midnight)
    renewed = active_leases(lab["worker_human"])[0]
    until, now = parse_ts(renewed["props"]["expires_at"]), clock.now()
    day = ("" if until.date() == now.date()
           else r"\d\d \w{3} " + ("" if until.year == now.year else r"\d{4} "))
    assert re.search(r'until <time datetime="[^"]+Z" title="[^"]+ UTC" data-humane>'
                     r'<span class="local">' + day + r'\d\d:\d\d UTC</span></time>\.$', words)
    assert renewed["props"]["expires_at"] > lease["props"]["expires_at"]


def test_release_puts_the_item_back_in_its_queue(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/release/")
    response = client.post(f"/leases/{lease['euid']}/release/", data)
    assert any("back to its queue" in m for m in said(response))
    assert active_leases(lab["worker_human"]) == []
    assert lease["subject_euid"] in client.get("/queues/q1/").content.decode()


def test_an_expired_lease_cannot_be_completed(client, lab):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/complete/")
    clock.advance(3600)
    before = counts()
    response = client.post(f"/leases/{lease['euid']}/complete/", data)
    # in the bench's words: how the claim ended
    assert any("This item is no longer yours: your claim ran out before it was renewed" in m
               for m in said(response)), said(response)
    assert counts() == before


def test_another_users_lease_is_not_mine(client, lab, django_user_model):
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"])
    data = form_for(client.get("/my-work/"), f"/leases/{lease['euid']}/complete/")
    from django.contrib.auth.models import Group

    other = django_user_model.objects.create_user("sci2", password="x")
    other.groups.add(Group.objects.get(name="worker_human"))
    response = signed_in(client, other).post(f"/leases/{lease['euid']}/complete/", data)
    assert response.status_code == 302
    assert any("another" in m.lower() for m in said(response))
    assert envelope(lease["subject_euid"])["next_queue_key"] == "q1"


# ---------------------------------------------------------------- operator actions


def test_hold_then_release_through_the_inspector(client, lab):
    euid = make_subject("q1", name="holdme")
    client = signed_in(client, lab["operator"])
    page = client.get(f"/subjects/{euid}/")
    response = client.post(f"/subjects/{euid}/hold/",
                           form_for(page, f"/subjects/{euid}/hold/", reason="QA review"))
    assert response["Location"] == f"/subjects/{euid}/"
    assert f"{euid} is on hold." in said(response)
    assert envelope(euid)["state"] == "HELD"
    assert "holdme" not in client.get("/queues/q1/").content.decode()
    page = client.get(f"/subjects/{euid}/")
    assert "QA review" in page.content.decode()
    response = client.post(f"/subjects/{euid}/release-hold/",
                           form_for(page, f"/subjects/{euid}/release-hold/", reason="ok"))
    assert f"Hold on {euid} released." in said(response)
    assert envelope(euid)["state"] == "READY"
    assert "holdme" in client.get("/queues/q1/").content.decode()


def test_another_hold_is_not_preset_to_a_two_person_code(client, lab):
    """With OPERATOR_HOLD already on the item, the form's first code (QC_FAIL, released only
    with a second person's approval) came preselected: a hurried second hold took it."""
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    page = client.get(f"/subjects/{euid}/")
    client.post(f"/subjects/{euid}/hold/", form_for(page, f"/subjects/{euid}/hold/",
                                                    reason="QA review"))
    page = client.get(f"/subjects/{euid}/")
    select = page.content.decode().split('id="hold-code"')[1].split("</select>")[0]
    assert ' required>' in select.split("<option")[0]
    assert '<option value="" selected>choose a hold code…</option>' in select
    assert select.count(" selected") == 1 and "OPERATOR_HOLD" not in select
    before = counts()
    response = client.post(f"/subjects/{euid}/hold/",
                           form_for(page, f"/subjects/{euid}/hold/", reason="again"))
    assert counts() == before  # the one hold stays one
    assert said(response)[0] == "Choose a hold code: the item is already held with the usual one."


def test_hold_needs_a_reason(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    before = counts()
    response = client.post(f"/subjects/{euid}/hold/",
                           form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/hold/",
                                    reason="  "))
    assert "Give a reason: left blank or spaces alone, it is not one." in said(response)
    assert counts() == before
    # too long (a page that let it through): said in the person's words, not the field key
    from bloomops.execution.actions.fields import REASON_MAX

    response = client.post(f"/subjects/{euid}/hold/",
                           form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/hold/",
                                    reason="x" * (REASON_MAX + 1)))
    assert f"The reason is too long: at most {REASON_MAX} characters." in said(response)
    assert counts() == before


def test_a_stale_page_says_the_subject_changed_and_writes_nothing(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    stale = form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/cancel/",
                     reason="duplicate")
    act("place_execution_hold", actor("operator", username="qa2"), subject_euid=euid,
        expected_state="READY", payload={"reason": "someone else"})
    before = counts()
    response = client.post(f"/subjects/{euid}/cancel/", stale)
    assert any("changed after you last read it" in m for m in said(response))
    assert counts() == before
    assert envelope(euid)["state"] == "HELD"


def test_a_stale_revision_is_refused_too(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    stale = form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/hold/", reason="x")
    # another operator's hold and release leave the state READY but move the revision on
    other = actor("operator", username="other-op")
    act("place_execution_hold", other, subject_euid=euid, expected_state="READY",
        payload={"reason": "quick look"})
    act("release_execution_hold", other, subject_euid=euid, expected_state="HELD",
        payload={"reason": "done looking"})
    before = counts()
    response = client.post(f"/subjects/{euid}/hold/", stale)
    assert any("changed after you last read it (revision" in m for m in said(response))
    assert counts() == before


def test_double_submitted_hold_replays(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/hold/", reason="x")
    client.post(f"/subjects/{euid}/hold/", data)
    before = counts()
    again = client.post(f"/subjects/{euid}/hold/", data)
    assert any("Already done" in m for m in said(again))
    assert counts() == before
    assert action_count("place_execution_hold") == 1


def test_requeue_and_cancel(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    response = client.post(f"/subjects/{euid}/requeue/", form_for(
        client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/requeue/", reason="re-run"))
    assert f"{euid} requeued to q1." in said(response)
    response = client.post(f"/subjects/{euid}/cancel/", form_for(
        client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/cancel/", reason="withdrawn"))
    assert f"{euid} canceled." in said(response)
    assert envelope(euid)["state"] == "CANCELED"
    history = client.get(f"/subjects/{euid}/").content.decode()
    assert "withdrawn" in history and "re-run" in history
    assert f"/subjects/{euid}/cancel/" not in history  # no cancel on a terminal subject


def test_requeue_of_a_held_subject_is_refused_in_plain_words(client, lab):
    euid = make_subject("q1")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="READY", payload={"reason": "x"})
    client = signed_in(client, lab["operator"])
    response = client.post(f"/subjects/{euid}/requeue/", {
        "idempotency_key": "k1", "expected_state": "HELD", "reason": "try"})
    assert "The subject is on hold; only release of the hold or cancel is allowed." in said(
        response)


def test_workbench_bulk_requeue_and_release(client, lab, settings):
    # A lab that does not ask a second person to requeue a dead letter (RULES.md#approvals).
    settings.BLOOMOPS_APPROVAL_RULES = ["release_integrity_hold", "cancel_integrity_held"]
    sci = actor("worker_human", username="sci")
    op = actor("operator", username="op")
    worker = services.ensure_my_worker(lab["worker_human"])
    dead = []
    for _ in range(2):
        euid = make_subject("q1")
        lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=euid)
        act("fail_queue_execution", sci, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"retryable": False, "error_message": "bad"})
        dead.append(euid)
    held = [make_subject("q1") for _ in range(2)]
    for euid in held:
        act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
            payload={"reason": "batch QA"})
    client = signed_in(client, lab["operator"])
    page = client.get("/workbench/")
    html = page.content.decode()
    picks = [f"{e}|FAILED_TERMINAL|{envelope(e)['revision']}" for e in dead]
    assert all(p in html for p in picks)
    # the dead letters' bulk form (its one action is the button's)
    data = {**next(f["fields"] for f in forms(html) if f["id"] == "bulk-dead"),
            "reason": "fixed reagent", "action": "requeue"}
    response = client.post("/workbench/bulk/", {**data, "pick": picks})
    assert any(m.startswith("Requeued 2") for m in said(response))
    assert all(envelope(e)["state"] == "READY" for e in dead)
    again = client.post("/workbench/bulk/", {**data, "pick": picks})
    assert "2 already done before; nothing was repeated." in said(again)
    hold_picks = [f"{e}|HELD|{envelope(e)['revision']}" for e in held]
    response = client.post("/workbench/bulk/", {
        "action": "release", "idempotency_key": "bulk-rel", "reason": "QA passed",
        "pick": hold_picks})
    assert any(m.startswith("Released the holds of 2") for m in said(response))
    assert all(envelope(e)["state"] == "READY" for e in held)
    assert client.get("/workbench/").content.decode().count("No active holds") == 1


def test_workbench_bulk_reports_each_refusal(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    response = client.post("/workbench/bulk/", {
        "action": "release", "idempotency_key": "b1", "reason": "x",
        "pick": [f"{euid}|HELD|1"]})
    assert any(m.startswith(f"{euid}: This subject changed") for m in said(response))
    nothing = client.post("/workbench/bulk/", {"action": "release", "idempotency_key": "b2"})
    assert "Select at least one item." in said(nothing)
    bogus = client.post("/workbench/bulk/", {"action": "explode", "pick": [euid]})
    assert "Choose requeue, release, hold or cancel." in said(bogus)


def test_a_bulk_refusal_of_a_changed_item_names_its_last_change(client, lab):
    """The workbench said only what each refused item is now; the person who picked it
    needs who changed it, when and why to decide again (as the inspector says)."""
    op = actor("operator", username="op")
    held = [make_subject("q1") for _ in range(2)]
    for euid in held:
        act("place_execution_hold", op, subject_euid=euid, expected_state="READY",
            payload={"reason": "batch QA"})
    client = signed_in(client, lab["operator"])
    picks = [f"{e}|HELD|{envelope(e)['revision']}" for e in held]
    act("release_execution_hold", actor("operator", username="dana"), subject_euid=held[0],
        expected_state="HELD", payload={"reason": "QA passed at the bench"})
    response = client.post("/workbench/bulk/", {
        "action": "cancel", "idempotency_key": "bulk-c", "reason": "study withdrawn",
        "pick": picks})
    messages = said(response)
    refusal = next(m for m in messages if m.startswith(f"{held[0]}: This subject changed"))
    assert ("Last change: release hold by dana, just now: \u201cQA passed at the bench"
            in refusal)
    assert any(m.startswith(f"Canceled 1: {held[1]}") for m in messages)
    assert envelope(held[0])["state"] == "READY"


# ---------------------------------------------------------------- admin actions


def test_admin_drains_disables_and_enables_a_worker(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    client = signed_in(client, lab["admin"])
    for op, status in (("drain", "DRAINING"), ("disable", "DISABLED"), ("enable", "ONLINE")):
        page = client.get("/workers/")
        data = next(f["fields"] for f in __import__("tests.web_support", fromlist=["forms"])
                    .forms(page.content.decode())
                    if f["action"] == f"/workers/{worker}/status/"
                    and f["fields"].get("operation") == op)
        response = client.post(f"/workers/{worker}/status/", {**data, "reason": "service"})
        assert any(m.startswith(f"sci ({worker}) is now {status.lower()}: ")
                   for m in said(response)), said(response)
        assert selectors.workers(euid=worker)[0].props["status"] == status


def test_admin_retires_a_disabled_service_worker_on_the_workers_page(client, lab):
    """Retiring (for good: it frees the account's place under
    BLOOMOPS_MAX_WORKERS_PER_ACCOUNT, whose refusal says "retire those no longer used") had
    been a shell's job. It is offered once a service worker is disabled, never for a
    person's own worker, and never again once retired."""

    svc = register(actor("worker_service", username="svc"), "lab://old-robot")
    human = services.ensure_my_worker(lab["worker_human"])
    adm = actor("admin", username="adm")
    for worker in (svc, human):
        act("set_worker_status", adm, worker_euid=worker,
            payload={"operation": "disable", "reason": "instrument sold"})
    client = signed_in(client, lab["admin"])

    def offered(worker: str) -> list[str]:
        return [f["fields"].get("operation") for f in forms(client.get("/workers/").content
                                                            .decode())
                if f["action"] == f"/workers/{worker}/status/"]

    assert offered(human) == ["enable"]
    assert offered(svc) == ["enable", "retire"]
    page = client.get("/workers/")
    data = next(f["fields"] for f in forms(page.content.decode())
                if f["action"] == f"/workers/{svc}/status/"
                and f["fields"].get("operation") == "retire")
    response = client.post(f"/workers/{svc}/status/", {**data, "reason": "instrument sold"})
    assert any("is now retired: it is out of service for good." in m
               for m in said(response)), said(response)
    assert selectors.workers(euid=svc)[0].props["status"] == "RETIRED"
    assert offered(svc) == []


def test_a_disabled_human_worker_cannot_claim(client, lab):
    worker = services.ensure_my_worker(lab["worker_human"])
    act("set_worker_status", actor("admin", username="adm"), worker_euid=worker,
        payload={"operation": "disable", "reason": "left the lab"})
    make_subject("q1")
    client = signed_in(client, lab["worker_human"])
    response = client.post("/queues/q1/claim-next/", form_for(client.get("/queues/q1/"),
                                                                "/queues/q1/claim-next/"))
    assert any(m.startswith("An admin has stopped new work for you") for m in said(response))


def test_admin_force_expires_a_lease_and_the_item_reappears(client, lab):
    euid = make_subject("q1", name="leased one")
    sci = signed_in(client, lab["worker_human"])
    claimed(sci, lab["worker_human"], euid)
    client = signed_in(client, lab["admin"])
    assert "leased one" not in client.get("/queues/q1/").content.decode()
    lease = selectors.leases(status="ACTIVE")[0]
    page = client.get("/admin/")
    response = client.post(f"/leases/{lease['euid']}/expire/",
                           form_for(page, f"/leases/{lease['euid']}/expire/", reason="stuck"))
    assert any("expired; its subject is back in its queue" in m for m in said(response))
    assert "leased one" in client.get("/queues/q1/").content.decode()
    again = client.post(f"/leases/{lease['euid']}/expire/", {"idempotency_key": "other",
                                                         "reason": "stuck"})
    assert any("no longer active" in m for m in said(again))


def test_admin_runs_the_sweeper(client, lab):
    sci = signed_in(client, lab["worker_human"])
    claimed(sci, lab["worker_human"])
    client = signed_in(client, lab["admin"])
    response = client.post("/admin/sweep/", form_for(client.get("/admin/"), "/admin/sweep/"))
    assert "Nothing to sweep: no expired leases." in said(response)
    clock.advance(3600)
    page = client.get("/admin/")
    assert "Past expiry, waiting for the sweeper (1)" in page.content.decode()
    response = client.post("/admin/sweep/", form_for(page, "/admin/sweep/"))
    assert "Sweeper expired 1 lease(s)." in said(response)
    assert selectors.leases(status="EXPIRED")[0]["props"]["status"] == "EXPIRED"


def test_leases_waiting_for_the_sweeper_are_found_however_many_ended_after_them(lab):
    """The admin page took the newest 500 expired leases and kept those still stored ACTIVE:
    behind 500 leases ended since, one waiting for the sweeper was never listed."""
    from tests.engine import SERVICE, claim, register

    make_queue("q_short", required_worker_capabilities=[], lease_ttl_seconds=60)
    make_queue("q_long", required_worker_capabilities=[], lease_ttl_seconds=3600)
    svc = actor(*SERVICE)
    worker = register(svc, max_concurrent_leases=2)
    make_subject("q_short")
    waiting = claim(svc, worker, "q_short")["lease_euid"]
    make_subject("q_long")
    ended = claim(svc, worker, "q_long")["lease_euid"]
    act("expire_queue_lease", actor("admin"), lease_euid=ended, payload={"reason": "stuck"})
    clock.advance(120)
    assert [x["euid"] for x in selectors.leases(status="EXPIRED", limit=1)] == [ended]
    assert [x["euid"] for x in selectors.leases(unswept=True, limit=1)] == [waiting]


def test_unsafe_next_targets_are_ignored(client, lab):
    euid = make_subject("q1")
    client = signed_in(client, lab["operator"])
    data = form_for(client.get(f"/subjects/{euid}/"), f"/subjects/{euid}/hold/", reason="x",
                    next="https://evil.example/")
    response = client.post(f"/subjects/{euid}/hold/", data)
    assert response["Location"] == f"/subjects/{euid}/"


def test_csrf_is_enforced_on_action_posts(lab):
    from django.test import Client

    euid = make_subject("q1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(lab["operator"])
    response = client.post(f"/subjects/{euid}/hold/", {"idempotency_key": "k",
                                                      "expected_state": "READY", "reason": "x"})
    assert response.status_code == 403
    assert envelope(euid)["state"] == "READY"
    page = client.get(f"/subjects/{euid}/")
    ok = client.post(f"/subjects/{euid}/hold/", form_for(page, f"/subjects/{euid}/hold/",
                                                          reason="x"))
    assert ok.status_code == 302 and envelope(euid)["state"] == "HELD"


def test_a_completion_message_shows_a_name_as_text(client, lab):
    """The message links the item; its name, whatever it holds, is text in it."""
    client = signed_in(client, lab["worker_human"])
    lease = claimed(client, lab["worker_human"], make_subject("q1", name="<b>Tube</b>"))
    page = client.get("/my-work/")
    response = client.post(f"/leases/{lease['euid']}/complete/",
                           form_for(page, f"/leases/{lease['euid']}/complete/"), follow=True)
    shown = response.content.decode().split('class="messages"')[1].split("</ul>")[0]
    assert "&lt;b&gt;Tube&lt;/b&gt;" in shown and "<b>Tube</b>" not in shown


def test_a_person_whose_profile_does_not_cover_a_queue_is_told_so_not_a_server_error(
        client, lab):
    """Claim next, and a row's Claim, on a queue a person's profile leaves out answered 500:
    the claim's refusal lists its reasons as texts, which the page read as fields."""
    from bloomops.accounts.models import PersonProfile

    make_queue("qx", required_worker_capabilities=["compute.dispatch"])
    subject = make_subject("qx", name="analysis one")
    PersonProfile.objects.create(user=lab["worker_human"], capabilities=["wetlab.extraction"])
    client = signed_in(client, lab["worker_human"])
    page = client.get("/queues/qx/")
    # the page says so first, and offers no Claim that would only be refused
    html = page.content.decode()
    assert "You cannot claim from this queue: Missing capabilities: compute.dispatch." in html
    assert 'id="claim-next"' not in html and f'aria-label="Claim {subject}"' not in html
    # a page opened before the profile changed still sends them
    for n, action in enumerate(("/queues/qx/claim-next/", f"/subjects/{subject}/claim/")):
        response = client.post(action, {"idempotency_key": f"stale-page-{n}",
                                        "expected_state": "READY", "queue_key": "qx"})
        assert response.status_code == 302, action
        told = " ".join(said(response))
        assert "compute.dispatch" in told, told
    assert envelope(subject)["state"] == "READY" and not active_leases(lab["worker_human"])
