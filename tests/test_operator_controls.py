"""Safer operator controls (docs/ARCHITECTURE.md, operator console): each screen offers only
the controls a role may use and the current state allows, destructive ones carry their
consequence for the confirmation dialog and demand a reason, hold codes come from the
configured list, and a refusal through a screen writes nothing. The browser side of the
dialog is in tests/test_browser_confirm.py."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from bloomops.execution.objects import load
from bloomops.tapdb.instances import link
from bloomops.web import services
from tests.engine import act, actor, claim, counts, envelope, make_subject, register
from tests.web_support import forms, signed_in

pytestmark = pytest.mark.django_db
ROLES = ("worker_service", "worker_human", "operator", "admin")


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def actions_of(html: str) -> set[str]:
    return {f["action"] for f in forms(html)}


def confirm_of(html: str, action: str) -> str | None:
    """The data-confirm text of the form posting to ``action`` (None: it asks nothing)."""
    for tag in re.findall(r"<form [^>]*>", html):
        if f'action="{action}"' in tag:
            found = re.search(r'data-confirm="([^"]*)"', tag)
            return found.group(1) if found else None
    raise AssertionError(f"no form posting to {action}")


def page(client, user, path: str) -> str:
    return signed_in(client, user).get(path).content.decode()


# ------------------------------------------------------------------ the inspector


@pytest.mark.parametrize("role", ROLES)
def test_inspector_controls_by_role_and_state(client, lab, role):
    ready = make_subject("q1")
    held = make_subject("q1")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=held,
        expected_state="READY", payload={"reason": "check"})
    canceled = make_subject("q1")
    act("cancel_subject_execution", actor("operator", username="op"), subject_euid=canceled,
        expected_state="READY", payload={"reason": "dup"})
    operator = role in ("operator", "admin")
    verbs = ("hold", "release-hold", "requeue", "cancel")

    def offered(euid: str) -> set[str]:
        found = actions_of(page(client, lab[role], f"/subjects/{euid}/"))
        return {v for v in verbs if f"/subjects/{euid}/{v}/" in found}

    assert offered(ready) == ({"hold", "requeue", "cancel"} if operator else set())
    # another hold on a held one: an escalation without a moment unheld (RULES.md#holds)
    assert offered(held) == ({"hold", "release-hold", "cancel"} if operator else set())
    assert offered(canceled) == ({"requeue"} if operator else set())


def test_inspector_destructive_forms_spell_out_the_consequence(client, lab):
    euid = make_subject("q1")
    html = page(client, lab["operator"], f"/subjects/{euid}/")
    assert confirm_of(html, f"/subjects/{euid}/hold/") is None  # placing a hold is undone
    assert "ends for good" in confirm_of(html, f"/subjects/{euid}/cancel/")
    # the queue as chosen in the form (operator.js fills {queue} when the dialog opens)
    assert "goes to {queue} as ready" in confirm_of(html, f"/subjects/{euid}/requeue/")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="READY", payload={"reason": "check"})
    html = page(client, lab["operator"], f"/subjects/{euid}/")
    assert "returns to q1" in confirm_of(html, f"/subjects/{euid}/release-hold/")
    # every reason field of an action form is required
    reasons = re.findall(r'<input id="(\w+)-reason" name="reason"([^>]*)>', html)
    assert reasons and all("required" in attrs for _, attrs in reasons)


def test_holding_a_claimed_item_asks_first_naming_who_has_it(client, lab):
    """The hold ended the scientist's claim without a word to the operator placing it."""
    euid = make_subject("q1")
    worker = services.ensure_my_worker(lab["worker_human"])
    act("claim_queue_item", actor("worker_human", username="sci"), worker_euid=worker,
        subject_euid=euid)
    html = page(client, lab["operator"], f"/subjects/{euid}/")
    said_first = confirm_of(html, f"/subjects/{euid}/hold/")
    assert said_first.startswith("sci has " + euid + " claimed: the claim ends now")


def test_hold_codes_offered_are_the_configured_ones(client, lab, settings):
    settings.BLOOMOPS_HOLD_CODES = ["QC_FAIL", "CONTAMINATION", "OPERATOR_HOLD"]
    euid = make_subject("q1")
    html = page(client, lab["operator"], f"/subjects/{euid}/")
    select = re.search(r'<select id="hold-code" name="hold_code" required>(.*?)</select>',
                       html).group(1)
    assert re.findall(r'value="(\w+)"', select) == ["QC_FAIL", "CONTAMINATION", "OPERATOR_HOLD"]
    # which of them only a second person can release is said before the hold is placed
    assert re.findall(r'>([^<]+)</option>', select) == [
        "QC_FAIL (second person to release or cancel)",
        "CONTAMINATION (second person to release or cancel)", "OPERATOR_HOLD"]
    data = next(f["fields"] for f in forms(html) if f["action"] == f"/subjects/{euid}/hold/")
    client.post(f"/subjects/{euid}/hold/", {**data, "hold_code": "CONTAMINATION",
                                             "reason": "splash"})
    hold = selectors.active_holds()[0]
    assert (hold["props"]["hold_code"], hold["props"]["reason"]) == ("CONTAMINATION", "splash")


def test_inspector_shows_the_envelope_in_words_and_lineage_as_links(client, lab, tenant):
    parent = make_subject("q1", name="parent tube")
    child = make_subject("q1", name="child tube")
    link(load(euid=parent, tenant=tenant).uid, load(euid=child, tenant=tenant).uid,
         "derived_from", tenant_id=tenant)
    html = page(client, lab["operator"], f"/subjects/{parent}/")
    table = re.search(r'<table class="grid envelope" id="envelope">(.*?)</table>', html,
                      re.S).group(1)
    labels = re.findall(r'<th scope="row">([^<]*)</th>', table)
    assert "Next queue" in labels and "Queue cache" in labels
    assert "Failed attempts (toward the limit)" in labels
    assert not [label for label in labels if "_" in label]  # words, not snake_case keys
    assert "{&#x27;" not in table and "{'" not in table  # no Python dict repr
    assert '<details id="raw-envelope">' in html and "&quot;next_queue_key&quot;" in html
    # the actions come before the envelope
    assert html.index('id="h-ops"') < html.index('id="h-env"')
    assert f'<a href="/subjects/{child}/"><code>{child}</code></a>' in html


def test_release_without_a_reason_through_the_inspector_writes_nothing(client, lab):
    euid = make_subject("q1")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=euid,
        expected_state="READY", payload={"reason": "check"})
    html = page(client, lab["operator"], f"/subjects/{euid}/")
    data = next(f["fields"] for f in forms(html)
                if f["action"] == f"/subjects/{euid}/release-hold/")
    before = counts()
    response = client.post(f"/subjects/{euid}/release-hold/", {**data, "reason": "   "})
    assert "Give a reason: left blank or spaces alone, it is not one." in said(response)
    assert counts() == before and envelope(euid)["state"] == "HELD"
    response = client.post(f"/subjects/{euid}/release-hold/", {**data, "reason": "cleared"})
    assert f"Hold on {euid} released." in said(response)
    history = client.get(f"/subjects/{euid}/").content.decode()
    assert "<td>cleared</td>" in history


# ------------------------------------------------------------------ the workbench


def _retrying(lab) -> list[str]:
    sci = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    out = []
    for _ in range(3):
        euid = make_subject("q1")
        lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=euid)
        act("fail_queue_execution", sci, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"retryable": True, "error_message": "timeout"})
        out.append(euid)
    return out


@pytest.mark.parametrize("role", ROLES)
def test_workbench_bulk_controls_by_role(client, lab, role):
    _retrying(lab)
    html = page(client, lab[role], "/workbench/")
    operator = role in ("operator", "admin")
    assert ('data-select-all="bulk-retrying"' in html) is operator
    assert ('id="bulk-retrying"' in html) is operator
    for action in ("hold", "requeue", "cancel"):
        assert (f'name="action" value="{action}"' in html) is operator
    assert "timeout" in html  # everyone reads the list


def test_a_retry_time_that_has_come_reads_due(client, lab):
    """The Retrying list kept showing a past next try ("2026-11-26 14:05:03 UTC") as if it
    were still to come: it says when, then "due" once that time has passed."""
    euid = _retrying(lab)[0]
    retry_at = parse_ts(envelope(euid)["retry_at"])

    def next_try() -> str:
        html = page(client, lab["operator"], "/workbench/")
        row = html.split(f'<tr data-euid="{euid}">')[1].split("</tr>")[0]
        return re.sub(r"<[^>]+>", "", row.split("<td")[-1].split(">", 1)[1]).strip()

    assert next_try().startswith("in ") and "due" not in next_try()
    clock.advance((retry_at - clock.now()).total_seconds() + 60)
    # when, as the rows beside it say theirs: how long ago, and the clock in the reader's
    # zone (a UTC stamp beside "in 29 s (09:02 GMT-5)" read as another hour)
    assert re.fullmatch(r"due since 1 min ago \(\d\d:\d\d \w+\)", next_try()), next_try()


def test_bulk_hold_and_cancel_from_the_workbench(client, lab, tenant):
    items = _retrying(lab)
    html = page(client, lab["operator"], "/workbench/")
    # the confirmation says which codes' release will need a second person (only the list's
    # option said it, and the dialog asked for a yes without it)
    form = html[html.index('id="bulk-retrying"'):]
    assert ("nobody can claim them until each hold is released. Releasing a QC_FAIL,"
            " CONTAMINATION, INTEGRITY hold will need a second person's approval.") in form[
        :form.index("</form>")]
    data = next(f["fields"] for f in forms(html) if f["id"] == "bulk-retrying")
    assert data["hold_code"] == "OPERATOR_HOLD"  # the first configured code
    picks = [f"{e}|FAILED_RETRYABLE|{envelope(e)['revision']}" for e in items]
    before = counts()
    # refusals are said once and write nothing: no reason, an unknown hold code
    for bad in ({"reason": " ", "hold_code": "QC_FAIL"},
                {"reason": "x", "hold_code": "COFFEE_BREAK"}):
        response = client.post("/workbench/bulk/", {**data, **bad, "action": "hold",
                                                     "pick": picks})
        assert [m for m in said(response) if m.startswith("Nothing done")], bad
        assert counts() == before
    response = client.post("/workbench/bulk/", {**data, "action": "hold", "pick": picks[:2],
                                                 "reason": "reagent recall",
                                                 "hold_code": "QA_REVIEW"})
    assert any(m.startswith("Held 2") for m in said(response))
    holds = {h["subject_euid"]: h["props"] for h in selectors.active_holds()}
    assert {e: (holds[e]["hold_code"], holds[e]["reason"]) for e in items[:2]} == {
        e: ("QA_REVIEW", "reagent recall") for e in items[:2]}
    html = page(client, lab["operator"], "/workbench/")
    data = next(f["fields"] for f in forms(html) if f["id"] == "bulk-holds")
    # (not an integrity hold code: cancelling under one needs a second person, RULES.md#approvals)
    response = client.post("/workbench/bulk/", {
        **data, "action": "cancel", "reason": "recalled lot",
        "pick": [f"{e}|HELD|{envelope(e)['revision']}" for e in items[:2]]})
    assert any(m.startswith("Canceled 2") for m in said(response))
    assert [envelope(e)["state"] for e in items] == ["CANCELED", "CANCELED", "FAILED_RETRYABLE"]
    uid = load(euid=items[0], tenant=tenant).uid
    why = {a["action_key"]: a["reason"] for a in selectors.action_history(uid)}
    assert why["place_execution_hold"] == "reagent recall"
    assert why["cancel_subject_execution"] == "recalled lot"


def _hold(euid: str, code: str) -> str:
    state = envelope(euid)["state"]
    return act("place_execution_hold", actor("operator"), subject_euid=euid,
               expected_state=state, payload={"reason": f"{code} seen",
                                               "hold_code": code})["hold_euid"]


def test_releasing_the_ticked_holds_ends_those_holds_alone(client, lab):
    """Each row of Active holds is a hold, but its checkbox named only the subject: ticking
    an item's SAMPLE_QUALITY hold and Release selected ended its LABEL_ISSUE hold too."""
    one, two = _retrying(lab)[:2]
    sample, label = _hold(one, "SAMPLE_QUALITY"), _hold(one, "LABEL_ISSUE")
    first, second = _hold(two, "SAMPLE_QUALITY"), _hold(two, "LABEL_ISSUE")
    html = page(client, lab["operator"], "/workbench/")
    data = next(f["fields"] for f in forms(html) if f["id"] == "bulk-holds")
    ticks = {hold: value for value in re.findall(r'form="bulk-holds" name="pick" value="([^"]+)"',
                                                 html)
             for hold in (sample, label, first, second) if value.endswith(f"|{hold}")}
    response = client.post("/workbench/bulk/", {**data, "action": "release", "reason": "ok",
                                                 "pick": [ticks[sample]]})
    assert any(m.startswith(f"Released 1 hold: {sample} on {one} (still held by another)")
               for m in said(response)), said(response)
    active = {h["euid"] for h in selectors.active_holds()}
    assert sample not in active and label in active and envelope(one)["state"] == "HELD"
    # both holds of one item ticked on one page: each released, the item back in its queue
    response = client.post("/workbench/bulk/", {**data, "action": "release", "reason": "ok",
                                                 "pick": [ticks[first], ticks[second]]})
    assert any(m.startswith(f"Released 2 holds: {first} on {two} (still held by another),"
                            f" {second} on {two} (no longer held)")
               for m in said(response)), said(response)
    assert envelope(two)["state"] == "FAILED_RETRYABLE"
    assert {first, second}.isdisjoint(h["euid"] for h in selectors.active_holds())
    # a cancel from the holds' list ends each item once, however many of its holds are ticked
    third = _retrying(lab)[2]
    holds = _hold(third, "SAMPLE_QUALITY"), _hold(third, "LABEL_ISSUE")
    ticked = [f"{third}|HELD|{envelope(third)['revision']}|{h}" for h in holds]
    response = client.post("/workbench/bulk/", {**data, "action": "cancel", "reason": "gone",
                                                 "pick": ticked})
    assert any(m.startswith(f"Canceled 1: {third}") for m in said(response)), said(response)


# ------------------------------------------------------------------ workers and admin


def _worker_in(status: str) -> str:
    svc, admin = actor("worker_service"), actor("admin", username="adm")
    worker = register(svc)
    steps = {"ONLINE": [], "DRAINING": ["drain"], "DISABLED": ["disable"],
             "RETIRED": ["retire"]}[status]
    for op in steps:
        act("set_worker_status", admin, worker_euid=worker,
            payload={"operation": op, "reason": "test"})
    return worker


@pytest.mark.parametrize(("status", "offered"), [
    ("ONLINE", {"drain", "disable"}), ("DRAINING", {"disable", "enable"}),
    # a disabled service worker may be retired for good, asked first (test_web_actions)
    ("DISABLED", {"enable", "retire"}), ("RETIRED", set())])
def test_a_worker_row_offers_only_what_its_state_allows(client, lab, status, offered):
    worker = _worker_in(status)
    html = page(client, lab["admin"], "/workers/")
    ops = {f["fields"]["operation"] for f in forms(html)
           if f["action"] == f"/workers/{worker}/status/"}
    assert ops == offered
    # drain, disable and retire ask first, with the consequence; enable puts it back and asks
    # nothing
    asks = {}
    for tag, body in re.findall(rf'(<form [^>]*action="/workers/{worker}/status/"[^>]*>)'
                                r"(.*?)</form>", html, re.S):
        op = re.search(r'name="operation" value="(\w+)"', body).group(1)
        asks[op] = 'data-confirm="' in tag
    assert asks == {op: op != "enable" for op in offered}


@pytest.mark.parametrize("role", ROLES)
def test_only_admins_see_worker_and_lease_controls(client, lab, role):
    make_subject("q1")
    svc = actor("worker_service")
    worker = register(svc, capabilities=["wetlab.extraction"])
    lease = claim(svc, worker)
    workers = page(client, lab[role], "/workers/")
    admin = page(client, lab[role], "/admin/")
    is_admin = role == "admin"
    assert (f"/workers/{worker}/status/" in actions_of(workers)) is is_admin
    expire = f"/leases/{lease['lease_euid']}/expire/"
    assert (expire in actions_of(admin)) is is_admin
    if is_admin:
        assert "goes back to q1" in confirm_of(admin, expire)


def test_drain_and_force_expiry_without_a_reason_write_nothing(client, lab):
    make_subject("q1")
    svc = actor("worker_service")
    worker = register(svc, capabilities=["wetlab.extraction"])
    lease = claim(svc, worker)
    client = signed_in(client, lab["admin"])
    before = counts()
    response = client.post(f"/workers/{worker}/status/", {
        "operation": "drain", "idempotency_key": "d1", "reason": ""})
    assert "Give a reason: left blank or spaces alone, it is not one." in said(response)
    response = client.post(f"/leases/{lease['lease_euid']}/expire/", {
        "idempotency_key": "e1", "reason": "  "})
    assert "Give a reason: left blank or spaces alone, it is not one." in said(response)
    assert counts() == before
    response = client.post(f"/workers/{worker}/status/", {
        "operation": "drain", "idempotency_key": "d2", "reason": "firmware update"})
    assert any(m.endswith(f"({worker}) is now draining: it finishes what it holds and takes"
                          " no new work.") for m in said(response))


def test_the_workbench_sends_integrity_holds_to_an_approval_not_a_release(client, lab):
    op = actor("operator", username="op")
    plain, integrity = make_subject("q1", name="plain"), make_subject("q1", name="qc failed")
    act("place_execution_hold", op, subject_euid=plain, expected_state="READY",
        payload={"reason": "label", "hold_code": "LABEL_ISSUE"})
    act("place_execution_hold", op, subject_euid=integrity, expected_state="READY",
        payload={"reason": "control out of range", "hold_code": "QC_FAIL"})
    html = page(client, lab["operator"], "/workbench/")
    rows = {e: html.split(f'data-euid="{e}"')[1].split("</tr>")[0] for e in (plain, integrity)}
    assert f"/subjects/{plain}/release-hold/" in rows[plain] and 'name="pick"' in rows[plain]
    assert f"/subjects/{integrity}/release-hold/" not in rows[integrity]
    assert 'name="pick"' not in rows[integrity]
    assert "needs a second person" in rows[integrity]
    assert f'href="/subjects/{integrity}/"' in rows[integrity]
    # once asked, the row says it waits (it kept saying "Ask on its page")
    [hold] = [h["euid"] for h in selectors.active_holds() if h["subject_euid"] == integrity]
    act("request_approval", op, subject_euid=integrity, hold_euid=hold,
        payload={"action_key": "release_execution_hold", "reason": "rerun passed",
                 "parameters": {"reason": "rerun passed"}})
    html = page(client, lab["operator"], "/workbench/")
    row = html.split(f'data-euid="{integrity}"')[1].split("</tr>")[0]
    assert "Release requested: waiting for a second person" in row and "Ask on its" not in row


def test_the_workbench_asks_for_approval_to_requeue_a_dead_letter(client, lab):
    """Under the rule requeue_dead_letter (on by default), Requeue was offered on every dead
    letter and always refused, the reason typed lost: each row now asks for the approval
    with that reason, and says when one is waiting; there is no bulk requeue to refuse."""
    worker = services.ensure_my_worker(lab["worker_human"])
    sci = actor("worker_human", username="sci")
    euid = make_subject("q1")
    lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=euid)
    act("fail_queue_execution", sci, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": "bad"})
    client = signed_in(client, lab["operator"])
    html = client.get("/workbench/").content.decode()
    row = html.split(f'data-euid="{euid}"')[1].split("</tr>")[0]
    assert f"/subjects/{euid}/requeue/" not in row and 'name="pick"' not in row
    assert 'id="bulk-dead"' not in html
    assert "Requeueing a dead-lettered subject needs a second person's approval" in html
    [ask] = [f for f in forms(row) if f["action"] == f"/subjects/{euid}/request-approval/"]
    assert ask["fields"]["action_key"] == "requeue_subject"
    response = client.post(ask["action"], {**ask["fields"], "reason": "reagent lot replaced"})
    assert response.url == "/workbench/"
    [approval] = selectors.approvals(status="REQUESTED", subject_euid=euid)
    assert approval.props["action_key"] == "requeue_subject"
    assert approval.props["reason"] == "reagent lot replaced"
    row = client.get("/workbench/").content.decode().split(f'data-euid="{euid}"')[1]
    assert "Requeue requested: waiting for a second person" in row.split("</tr>")[0]
    assert envelope(euid)["state"] == "FAILED_TERMINAL"


def test_which_holds_gate_follows_the_labs_rules(settings):
    from bloomops.execution.approvals import hold_gates

    assert hold_gates("QC_FAIL") == {"release_execution_hold", "cancel_subject_execution"}
    assert hold_gates("LABEL_ISSUE") == frozenset() and hold_gates(None) == frozenset()
    settings.BLOOMOPS_APPROVAL_RULES = ["release_integrity_hold", "requeue_dead_letter"]
    assert hold_gates("QC_FAIL") == {"release_execution_hold"}
    settings.BLOOMOPS_APPROVAL_RULES = []
    assert hold_gates("QC_FAIL") == frozenset()


def test_a_dead_letter_is_closed_by_cancelling_its_work(client, lab, tenant):
    """A sample failed for good whose specimen is gone must leave the dead letters: requeue
    (with a second person's signature) was the only way out, so it stayed OPEN and counted
    for ever. Cancel closes it as CANCELED, with who and why, in one operator's hands."""
    from tests.test_failures_view import held_and_dead

    _, dead = held_and_dead("q1", "q1")
    assert selectors.queue_summaries()[0].dead_letter_count == 1
    html = page(client, lab["operator"], "/workbench/")
    # the queue as the dashboard names it (the workbench showed the key alone)
    row = html[html.index(f'<tr data-euid="{dead}"'):].split("</tr>")[0]
    assert "<td>Queue one (q1)</td>" in row
    cancel = next(f for f in forms(html) if f["action"] == f"/subjects/{dead}/cancel/")
    assert cancel["fields"]["expected_state"] == "FAILED_TERMINAL"
    response = client.post(cancel["action"], {**cancel["fields"],
                                              "reason": "specimen used up; re-extract"})
    assert said(response) == [f"{dead} canceled; its dead letter is closed."]
    assert envelope(dead)["state"] == "CANCELED"
    uid = load(euid=dead, tenant=tenant).uid
    [letter] = selectors.subject_history(uid)["dead_letters"]
    assert (letter["props"]["resolution_state"], letter["props"]["resolved_by_lookup_euid"]) \
        == ("CANCELED", lab["operator"].username)
    why = {a["action_key"]: a["reason"] for a in selectors.action_history(uid)}
    assert why["cancel_subject_execution"] == "specimen used up; re-extract"
    assert selectors.queue_summaries()[0].dead_letter_count == 0
    html = page(client, lab["operator"], "/workbench/")
    assert "No open dead letters." in html and f"/subjects/{dead}/cancel/" not in html


def test_the_inspector_offers_to_cancel_a_dead_letter(client, lab):
    """The workbench offered Cancel on a dead letter; its own page hid it, as for anything
    finished for good."""
    from tests.test_failures_view import held_and_dead

    _, dead = held_and_dead("q1", "q1")
    html = page(client, lab["operator"], f"/subjects/{dead}/")
    cancel = next(f for f in forms(html) if f["action"] == f"/subjects/{dead}/cancel/")
    assert cancel["fields"]["expected_state"] == "FAILED_TERMINAL"
    assert "its dead letter is closed as canceled" in html


def test_the_workbench_takes_no_more_than_one_bulk_action_may(client, lab, monkeypatch):
    """The workbench's select-all runs through web/bulk.py like the failures page: past
    BULK_MAX nothing is written and the page says so."""
    from bloomops.web import bulk

    items = _retrying(lab)
    monkeypatch.setattr(bulk, "BULK_MAX", 2)
    html = page(client, lab["operator"], "/workbench/")
    data = next(f["fields"] for f in forms(html) if f["id"] == "bulk-retrying")
    before = counts()
    response = client.post("/workbench/bulk/", {
        **data, "action": "hold", "reason": "rack check", "hold_code": "QA_REVIEW",
        "pick": [f"{e}|FAILED_RETRYABLE|{envelope(e)['revision']}" for e in items]})
    assert counts() == before
    assert any(m.startswith("Nothing done: 3 items are more than one bulk action takes")
               for m in said(response))


def test_the_workbench_search_finds_dead_letters_and_retrying_items_past_the_limit(
        client, lab, monkeypatch):
    from bloomops.web.views import admin

    items = _retrying(lab)
    monkeypatch.setattr(admin, "WORKBENCH_ROWS", 1)
    oldest = items[0]
    html = page(client, lab["operator"], "/workbench/")
    retrying = html.split('id="h-retrying"')[1].split("</section>")[0]
    assert "the newest 1 of 3" in retrying and oldest not in retrying
    found = page(client, lab["operator"], f"/workbench/?q={oldest}")
    retrying = found.split('id="h-retrying"')[1].split("</section>")[0]
    assert oldest in retrying and "Retrying (1)" in found
    sci = actor("worker_human", username="sci")
    worker = services.ensure_my_worker(lab["worker_human"])
    dead = make_subject("q1")
    lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=dead)
    act("fail_queue_execution", sci, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": "tube cracked"})
    found = page(client, lab["operator"], "/workbench/?q=CRACKED")
    letters = found.split('id="h-dead"')[1].split("</section>")[0]
    assert dead in letters and "Dead letters (1)" in found and "Retrying (0)" in found

