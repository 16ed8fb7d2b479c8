"""The failures view: retrying and failed work grouped by queue and error class, and bulk
retry-now, hold and cancel on a selection or on a whole filter, confirmed with the count
before anything is written."""

from __future__ import annotations

import importlib
import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.messages import get_messages

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts, ts
from bloomops.execution.objects import load
from bloomops.tapdb.db import execute
from tests.engine import SERVICE, act, actor, claim, counts, envelope, make_subject, register
from tests.web_support import forms, signed_in

pytestmark = pytest.mark.django_db

CAPS = ["wetlab.extraction", "wetlab.qc"]
# the module (the package exports its view function under the same name)
failures_view = importlib.import_module("bloomops.web.views.failures")


def fail(svc, worker: str, name: str, queue_key: str = "q1", **payload) -> str:
    """A subject of the queue claimed by the service worker and failed with ``payload``."""
    euid = make_subject(queue_key, name=name, ready_at="2020-01-01T00:00:00.000000Z")
    lease = claim(svc, worker, queue_key, subject_euid=None)
    assert lease["subject_euid"] == euid
    act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload=payload)
    return euid


def held_and_dead(held_queue: str, dead_queue: str) -> tuple[str, str]:
    """A subject of ``held_queue`` an operator put on hold, and one of ``dead_queue`` failed
    for good (a dead letter): their EUIDs."""
    held = make_subject(held_queue, name="Specimen held")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=held,
        expected_state="READY", payload={"reason": "check the label"})
    svc = actor(*SERVICE)
    return held, fail(svc, register(svc, capabilities=CAPS), "Tube cracked", dead_queue,
                      error_class="PERMANENT_INPUT", error_message="tube cracked")


@pytest.fixture
def failing(lab):
    """Two subjects waiting to retry (scanner offline), one failed for good (tube cracked)."""
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=CAPS, max_concurrent_leases=10)
    retry = {"error_class": "TRANSIENT_DEPENDENCY", "error_message": "scanner offline"}
    return {
        "retry_a": fail(svc, worker, "Tube A", **retry),
        "retry_b": fail(svc, worker, "Tube B", **retry),
        "dead": fail(svc, worker, "Tube C", error_class="PERMANENT_INPUT",
                     error_message="tube cracked"),
    }


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def bulk_form(html: str) -> dict:
    """The fields of the page's bulk form as a browser posts them: every hidden pick."""
    fields = next(f for f in forms(html) if f["action"] == "/failures/bulk/")["fields"]
    hidden = re.findall(r'type="hidden" name="pick" value="([^"]+)"', html)
    return {**fields, "pick": hidden} if hidden else fields


def test_failures_are_grouped_by_queue_and_error_class_with_counts_and_messages(failing):
    groups = selectors.group_failures(selectors.failures())
    assert [(g.queue_key, g.error_class, g.retrying, g.failed, g.messages) for g in groups] == [
        ("q1", "TRANSIENT_DEPENDENCY", 2, 0, ["scanner offline"]),
        ("q1", "PERMANENT_INPUT", 0, 1, ["tube cracked"]),
    ]
    rows = {r["subject_euid"]: r for r in selectors.failures()}
    assert rows[failing["dead"]]["kind"] == "failed"
    assert rows[failing["retry_a"]]["kind"] == "retrying" and rows[failing["retry_a"]]["retry_at"]


def test_the_page_shows_groups_in_words_and_filters_by_class(client, lab, failing):
    client = signed_in(client, lab["operator"])
    html = client.get("/failures/").content.decode()
    assert "Waiting on something else" in html and "scanner offline" in html
    assert "Cannot be done: the sample or its data is unusable" in html and "tube cracked" in html
    assert "All failing items (3)" in html
    narrowed = client.get("/failures/?queue=q1&class=PERMANENT_INPUT").content.decode()
    assert "Items matching the filter (1)" in narrowed and "Tube C" in narrowed
    assert "Tube A" not in narrowed.split('id="failure-items"')[1].split("</table>")[0]


def test_a_dead_letter_of_a_retryable_class_is_not_told_to_try_again(client, lab, tenant):
    """Its last attempt used up, a scanner-offline failure sat among the dead letters as
    "Try again later: waiting on something else", though nothing would try it again."""
    from tests.engine import make_queue

    make_queue("q_once", max_attempts_default=1, required_worker_capabilities=[])
    svc = actor(*SERVICE)
    dead = fail(svc, register(svc, capabilities=[]), "Tube D", "q_once",
                error_class="TRANSIENT_DEPENDENCY", error_message="scanner offline")
    assert envelope(dead)["state"] == "FAILED_TERMINAL"
    client = signed_in(client, lab["operator"])
    for page in ("/workbench/", "/failures/"):
        html = client.get(page).content.decode()
        assert "Waiting on something else: a reagent, another step, a service (retryable)" \
            in html and "Try again later" not in html, page


def test_a_retry_whose_time_has_come_reads_as_claimable_not_expired(client, lab, failing):
    """Past its retry time an item is claimable again; the page said "retrying expired", as
    if it had given up."""
    client = signed_in(client, lab["operator"])
    items = client.get("/failures/").content.decode().split('id="failure-items"')[1]
    row = items.split(f'data-euid="{failing["retry_a"]}"')[1].split("</tr>")[0]
    assert "retrying <time" in row and "expired" not in row
    clock.advance(7 * 86400)
    items = client.get("/failures/").content.decode().split('id="failure-items"')[1]
    row = items.split(f'data-euid="{failing["retry_a"]}"')[1].split("</tr>")[0]
    # said as the workbench says it (next_try): due, since when
    assert re.search(r'retrying <span class="badge ok due">due</span> <span class="muted">'
                     r'since <time datetime="[^"]+Z"[^>]*><span class="ago"[^>]*>'
                     r"6 d 23 h ago</span>", row)
    assert "expired" not in row


def test_retry_now_on_everything_a_filter_matches_is_counted_then_confirmed(client, lab, tenant,
                                                                          failing):
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/?queue=q1&kind=retrying").content.decode()
    data = {**bulk_form(page), "verb": "requeue", "scope": "filter"}
    before = counts()
    confirm = client.post("/failures/bulk/", data)
    text = confirm.content.decode()
    assert confirm.status_code == 200 and "Requeue 2 items?" in text
    assert "go back to the queue and can be claimed again" in text
    assert counts() == before  # the count is shown before anything is written
    step_two = {**bulk_form(text), "reason": "scanner is back"}
    done = client.post("/failures/bulk/", step_two)
    assert done.status_code == 302
    assert any(m.startswith("Requeued 2:") for m in said(done))
    for euid in (failing["retry_a"], failing["retry_b"]):
        assert envelope(euid)["state"] == "READY"
    assert envelope(failing["dead"])["state"] == "FAILED_TERMINAL"  # not matched, not touched
    history = selectors.action_history(load(euid=failing["retry_a"], tenant=tenant).uid)
    assert [(a["action_key"], a["reason"]) for a in history][-1] == (
        "requeue_subject", "scanner is back")


def test_a_bulk_action_without_a_reason_asks_again_and_writes_nothing(client, lab, failing):
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    confirm = client.post("/failures/bulk/", {**bulk_form(page), "verb": "cancel",
                                              "scope": "filter"}).content.decode()
    before = counts()
    again = client.post("/failures/bulk/", {**bulk_form(confirm), "reason": "   "})
    assert again.status_code == 200 and "A reason is required" in again.content.decode()
    assert counts() == before


def test_bulk_hold_on_a_selection_holds_only_the_selected(client, lab, failing):
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    form = bulk_form(page)
    pick = next(v for v in _picks(page) if v.startswith(failing["retry_b"]))
    confirm = client.post("/failures/bulk/", {**form, "verb": "hold", "scope": "selected",
                                              "pick": [pick]}).content.decode()
    assert "Hold 1 item?" in confirm and "nothing held can be claimed" in confirm
    client.post("/failures/bulk/", {**bulk_form(confirm), "reason": "check the rack",
                                    "hold_code": "QA_REVIEW"})
    assert envelope(failing["retry_b"])["hold_state"] == "ACTIVE"
    assert envelope(failing["retry_a"]).get("hold_state") in (None, "NONE")


def test_an_item_that_changed_after_the_count_is_left_alone_and_named(client, lab, failing):
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/?kind=retrying").content.decode()
    confirm = client.post("/failures/bulk/", {**bulk_form(page), "verb": "cancel",
                                              "scope": "filter"}).content.decode()
    # the confirmation's button says what it does: "Cancel 2" read as "don't"
    assert ">End the work on 2</button>" in confirm and "<h1>End the work on 2 items?" in confirm
    act("requeue_subject", actor("operator"), subject_euid=failing["retry_a"],
        expected_state="FAILED_RETRYABLE", payload={"reason": "someone else fixed it"})
    done = client.post("/failures/bulk/", {**bulk_form(confirm), "reason": "obsolete"})
    messages = said(done)
    assert f"Canceled 1: {failing['retry_b']}." in messages
    assert any(m.startswith(f"{failing['retry_a']}:") for m in messages)
    assert envelope(failing["retry_a"])["state"] == "READY"


@pytest.mark.parametrize("role", ["worker_human", "worker_service"])
def test_only_operators_act_in_bulk(client, lab, failing, role):
    client = signed_in(client, lab[role])
    page = client.get("/failures/")
    assert page.status_code == 200 and "/failures/bulk/" not in page.content.decode()
    before = counts()
    for confirmed in ("", "1"):
        refused = client.post("/failures/bulk/", {
            "verb": "cancel", "scope": "filter", "reason": "x", "confirmed": confirmed,
            "idempotency_key": "k-role"})
        assert refused.status_code == 403
    assert counts() == before


def _picks(html: str) -> list[str]:
    return re.findall(r'name="pick" value="([^"]+)"', html)


def test_an_item_claimed_again_is_not_listed_while_someone_works_on_it(lab, failing):
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=CAPS, max_concurrent_leases=10)
    clock.advance(24 * 3600)  # past its retry time: claimable again, still FAILED_RETRYABLE
    lease = claim(svc, worker, "q1", subject_euid=None)
    assert lease["subject_euid"] == failing["retry_a"]
    assert envelope(failing["retry_a"])["state"] == "FAILED_RETRYABLE"
    listed = {r["subject_euid"] for r in selectors.failures(kind="retrying")}
    assert listed == {failing["retry_b"]}


def test_the_failed_attempts_of_a_range_and_where_their_subjects_are_now(client, lab, tenant,
                                                                      failing):
    """Where the dashboard's failure bars lead: every attempt that failed in the range (a
    retried one too, though it is no longer failing), newest first, with its subject's state
    now; another queue's and older attempts are not listed; an unknown range is 24 h."""
    client = signed_in(client, lab["operator"])

    def listed(query: str) -> list[str]:
        page = client.get(f"/failures/?{query}").content.decode()
        table = page.split('id="attempts"')[1]
        return re.findall(r'<tr data-record="[^"]+">\s*<td>.*?</td>\s*<td>([^<]*)</td>\s*'
                          r'<td><a href="/subjects/([^/]+)/"', table, re.S)

    everything = listed("range=1h")
    assert sorted(e for _, e in everything) == sorted(failing.values())
    assert {q for q, _ in everything} == {"Queue one (q1)"}  # as the dashboard names it
    clock.advance(2 * 3600)
    assert listed("range=1h") == []
    assert sorted(e for _, e in listed("range=24h")) == sorted(failing.values())
    assert sorted(e for _, e in listed("range=1y")) == sorted(failing.values())
    assert listed("queue=q2&range=24h") == []
    # retried and completed since: its failed attempt stays listed, with where it is now
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=CAPS)
    lease = claim(svc, worker, "q1", subject_euid=None)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        subject_euid=lease["subject_euid"], expected_state="FAILED_RETRYABLE")
    page = client.get("/failures/?range=24h").content.decode()
    attempts = page.split('id="attempts"')[1]
    row = attempts.split(f'/subjects/{lease["subject_euid"]}/')[1].split("</tr>")[0]
    assert "failed, to be retried" in row and ">COMPLETED</td>" in row
    row = attempts.split(f'/subjects/{failing["dead"]}/')[1].split("</tr>")[0]
    assert "failed for good" in row and "FAILED_TERMINAL in Queue one (q1)" in row


def test_an_attempt_put_on_hold_for_a_decision_is_not_called_a_retry(client, lab):
    svc = actor(*SERVICE)
    held = fail(svc, register(svc, capabilities=CAPS), "Tube D",
                error_class="BUSINESS_RULE_HOLD", error_message="needs a decision")
    page = signed_in(client, lab["operator"]).get("/failures/?range=24h").content.decode()
    row = page.split('id="attempts"')[1].split(f"/subjects/{held}/")[1].split("</tr>")[0]
    assert "put on hold for a decision" in row and "to be retried" not in row


def _attempts_section(client, query: str) -> str:
    return client.get(f"/failures/?{query}").content.decode().split('id="attempts"')[1]


def test_a_failure_bar_leads_to_the_attempts_it_counted(client, lab, failing):
    """``since``/``until`` (a sample's counted window, as the charts write it) narrow the
    list to the attempts finished in (since, until]; anything that is not such a window is
    the whole range."""
    client = signed_in(client, lab["operator"])
    now = clock.now()
    finished = sorted(r["finished_at"] for r in selectors.finished_attempts(
        ["q1"], outcome="failed", since=now - timedelta(hours=1), until=now))
    assert len(finished) == 3

    def rows(query: str) -> str:
        return _attempts_section(client, query)

    around = {"since": ts(parse_ts(finished[0]) - timedelta(seconds=1)), "until": finished[1]}
    section = rows(urlencode({"range": "1h", **around}))
    assert section.count("<tr data-record=") == 2
    assert "Failed attempts counted from " in section and "the whole last 1h" in section
    before = {"since": ts(now - timedelta(hours=1)), "until": ts(now - timedelta(minutes=30))}
    section = rows(urlencode({"range": "24h", **before}))
    assert "<tr data-record=" not in section and "No attempt failed in that time" in section
    for odd in ({"since": finished[2], "until": finished[0]},  # backwards
                {"since": finished[0], "until": ts(now + timedelta(minutes=5))},  # future
                {"since": "yesterday", "until": finished[2]}, {"since": finished[0]}):
        section = rows(urlencode({"range": "1h", **odd}))
        assert section.count("<tr data-record=") == 3 and "in the last 1h" in section, odd


def test_an_attempt_whose_subject_is_gone_says_so(client, lab, failing):
    execute("UPDATE generic_instance SET is_deleted = true WHERE euid = %(e)s",
            {"e": failing["dead"]})
    section = _attempts_section(signed_in(client, lab["operator"]), "range=1h")
    row = section.split(f'<code>{failing["dead"]}</code>')[1].split("</tr>")[0]
    assert ">removed</td>" in row
    assert f'/subjects/{failing["dead"]}/' not in section
    assert section.count(failing["dead"]) == 1  # named once, not linked


def test_the_range_and_the_filters_keep_each_other(client, lab, failing, monkeypatch):
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/?queue=q1&kind=retrying&range=1h").content.decode()
    form = next(f for f in forms(page) if f["action"] in ("", "/failures/"))
    assert form["fields"]["range"] == "1h"
    section = page.split('id="attempts"')[1]
    assert 'href="?queue=q1&amp;kind=retrying&amp;range=7d#attempts"' in section
    # "the newest N" only when there were more than N
    monkeypatch.setattr(failures_view, "ATTEMPTS_SHOWN", 3)
    assert "(3)</h2>" in _attempts_section(client, "range=1h")
    monkeypatch.setattr(failures_view, "ATTEMPTS_SHOWN", 2)
    assert "(the newest 2)</h2>" in _attempts_section(client, "range=1h")


@pytest.mark.parametrize("query", ["queue=%00", "class=a%00b", "page=1&%00=x"])
def test_a_query_no_database_can_hold_is_a_400_on_every_page(client, lab, query):
    client = signed_in(client, lab["operator"])
    for path in ("/failures/", "/", "/queues/q1/", "/workbench/"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, path
        # a page a person reads, saying what was wrong and the way back (it was plain text)
        page = response.content.decode()
        assert response["Content-Type"].startswith("text/html")
        assert "Bad request: Query parameter" in page.split('id="bad-request">')[1]
        assert "Nothing was looked up or changed" in page and 'href="/"' in page


def test_a_requeue_that_needs_a_second_person_is_said_before_the_reason(client, lab, failing):
    """Retry now on a dead letter was refused (it needs an approval) only after the reason
    was typed and confirmed, in plain text without a way to the subject."""
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    dead = next(v for v in _picks(page) if v.startswith(failing["dead"]))
    retry = next(v for v in _picks(page) if v.startswith(failing["retry_a"]))
    confirm = client.post("/failures/bulk/", {**bulk_form(page), "verb": "requeue",
                                              "scope": "selected", "pick": [dead, retry]})
    html = confirm.content.decode()
    warning = html[html.index('id="gated-picks"'):].split("</p>")[0]
    assert "Requeueing a dead-lettered subject needs a second person" in warning
    assert "1 of these are left out here" in warning
    assert f'href="/subjects/{failing["dead"]}/"' in warning
    assert failing["retry_a"] not in warning
    # the button runs what it can: the one that needs a second person is not sent
    assert ">Requeue 1 of 2</button>" in html
    ask = html.split('id="ask-gated"')[1].split("</form>")[0]
    run = html.split('name="verb" value="requeue"')[1].split("</form>")[0]
    assert re.findall(r'name="pick" value="([^"]*)"', run) == [retry]
    # the one left out is asked for instead, on the same page; one primary button (the run),
    # and the list says which is left out, not "asked for" before anyone asked
    assert re.findall(r'name="pick" value="([^"]*)"', ask) == [dead]
    assert html.count('class="primary"') == 1 and 'class="primary"' in run
    listed = html.split('class="confirm-list"')[1]
    row = listed.split(f"<code>{failing['dead']}</code>")[1].split("</li>")[0]
    assert "left out here: needs a second person's approval" in row
    assert "asked for" not in listed


def test_dead_letters_are_asked_for_in_one_go_when_requeues_need_a_second_person(
        client, lab, failing):
    """Retry now on dead letters alone led to "Requeue 0 items?" with a reason box that did
    nothing and only "Go back": each had to be asked for on its own page."""
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    dead = next(v for v in _picks(page) if v.startswith(failing["dead"]))
    html = client.post("/failures/bulk/", {**bulk_form(page), "verb": "requeue",
                                           "scope": "selected", "pick": [dead]}).content.decode()
    ask = next(f for f in forms(html) if f["id"] == "ask-gated")
    assert ">Ask a second person to approve requeueing 1</button>" in html
    # nothing else to run: no "Requeue 0 items?", no second reason box that did nothing
    assert "<h1>Ask a second person to approve requeueing 1 item?</h1>" in html
    assert "Requeue 0" not in html and html.count("<textarea") == 1
    before = counts()
    done = client.post("/failures/bulk/", {**ask["fields"], "pick": [dead],
                                           "reason": "new aliquot from the freezer"})
    assert said(done) == [f"Asked a second person to approve requeueing 1: {failing['dead']}."]
    [asked] = selectors.approvals(subject_euid=failing["dead"])
    assert (asked.status, asked.props["action_key"], asked.props["reason"]) == (
        "REQUESTED", "requeue_subject", "new aliquot from the freezer")
    assert envelope(failing["dead"])["state"] == "FAILED_TERMINAL"  # nothing ran yet
    assert counts() != before
    # asked for: the list says so, and asking again is not offered (it would be refused)
    page = client.get("/failures/").content.decode()
    row = page[page.index(f'value="{failing["dead"]}|'):].split("</tr>")[0]
    assert "requeue asked for: waiting for a second person" in row
    html = client.post("/failures/bulk/", {**bulk_form(page), "verb": "requeue",
                                           "scope": "selected", "pick": [dead]}).content.decode()
    assert "Asked for already, waiting for a second person" in html
    assert re.findall(r'name="pick" value="([^"]*)"',
                      html.split('id="ask-gated"')[1].split("</form>")[0]) == []


def test_which_requeues_need_a_second_person_is_judged_by_the_dead_letter(client, lab, failing):
    """The confirmation judged the gate by the state the page had posted, not by the
    engine's condition (an open dead letter): a dead letter another writer left in another
    state read as free to requeue, and was then refused."""
    from django.db import connection

    with connection.cursor() as cur:  # the dead letter stays open; the state is another's
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                    " '{properties,execution,state}', '\"FAILED_RETRYABLE\"') WHERE euid = %s",
                    [failing["dead"]])
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    dead = next(v for v in _picks(page) if v.startswith(failing["dead"]))
    retry = next(v for v in _picks(page) if v.startswith(failing["retry_a"]))
    assert "|FAILED_RETRYABLE|" in dead
    confirm = client.post("/failures/bulk/", {**bulk_form(page), "verb": "requeue",
                                              "scope": "selected", "pick": [dead, retry]})
    html = confirm.content.decode()
    warning = html[html.index('id="gated-picks"'):].split("</p>")[0]
    assert "1 of these are left out here" in warning
    assert f'href="/subjects/{failing["dead"]}/"' in warning


def test_more_than_one_bulk_action_takes_is_refused_in_words_and_writes_nothing(
        client, lab, failing, monkeypatch):
    """"Select all" over 2,000 failures posted 2,000 fields: Django's limit of 1,000 answered
    with a bare 400, and under it one request ran for most of a minute. Past BULK_MAX the
    page says how many and what to do, and nothing is written."""
    from bloomops.web import bulk

    client = signed_in(client, lab["operator"])
    page = client.get("/failures/").content.decode()
    form = {**bulk_form(page), "verb": "hold"}
    before = counts()
    many = [f"Z-MX-{n}|FAILED_RETRYABLE|1" for n in range(1100)]
    refused = client.post("/failures/bulk/", {**form, "scope": "selected", "pick": many})
    assert refused.status_code == 302 and counts() == before
    assert said(refused) == [f"Nothing done: 1100 items are more than one bulk action takes"
                             f" ({bulk.BULK_MAX} at most). Narrow the filter or tick fewer,"
                             " then run it again for the rest."]
    monkeypatch.setattr(bulk, "BULK_MAX", 2)
    listed = client.get("/failures/").content.decode()  # not offered where it would be refused
    assert 'value="filter"' not in listed and "More than 2 match" in listed
    whole = client.post("/failures/bulk/", {**form, "scope": "filter"})
    assert "3 items are more than one bulk action takes" in said(whole)[-1]
    confirmed = client.post("/failures/bulk/", {**form, "scope": "selected", "confirmed": "1",
                                                "reason": "rack check", "pick": _picks(page)})
    assert "Nothing done: 3 items" in said(confirmed)[-1] and counts() == before


def test_the_groups_count_every_failure_when_the_list_shows_the_newest(
        client, lab, failing, monkeypatch):
    """The page read the newest 2,000 failures and counted its groups and filters from them:
    at lab scale a group of 1,503 read 204. The groups are counted in SQL; the list says
    when it shows only the newest."""
    listed = selectors.failures
    monkeypatch.setattr(failures_view.selectors, "failures",
                        lambda **kw: listed(**{**kw, "limit": 1}))
    html = signed_in(client, lab["operator"]).get("/failures/").content.decode()
    assert "All failing items (the newest 1 of 3)" in html
    counted = {cls: tuple(re.sub(r"<[^>]+>", "", n) for n in ns) for cls, *ns in
               re.findall(r'<tr data-group="q1\|([A-Z_]+)">.*?<td class="num">(.*?)</td>\s*'
                          r'<td class="num">(.*?)</td>', html, re.S)}
    assert counted == {"TRANSIENT_DEPENDENCY": ("2", "0"), "PERMANENT_INPUT": ("0", "1")}
    narrowed = signed_in(client, lab["operator"]).get("/failures/?kind=retrying")
    assert "Items matching the filter (the newest 1 of 2)" in narrowed.content.decode()


def test_every_group_keeps_its_messages_whatever_the_list_is_filtered_to(client, lab, failing):
    """Filtering the list to one class emptied the other groups' example messages: they
    came from the list shown."""
    html = signed_in(client, lab["operator"]).get(
        "/failures/?class=PERMANENT_INPUT").content.decode()
    groups = html.split('id="failure-groups"')[1].split("</table>")[0]
    retrying = groups[groups.index('data-group="q1|TRANSIENT_DEPENDENCY"'):].split("</tr>")[0]
    assert "scanner offline" in retrying


def test_a_filter_the_page_does_not_know_is_said_not_read_as_another(client, lab, failing):
    """/failures/?queue=nope read "in nope (0)", a kind or range nobody offers was dropped, and
    /completions/?range=99y showed the last 24 h, each without a word."""
    client = signed_in(client, lab["operator"])
    html = client.get("/failures/?queue=nope&kind=zzz&range=99y").content.decode()
    for note in ("No queue &#x27;nope&#x27;: every queue is shown.",
                 "No kind &#x27;zzz&#x27;: every kind is shown.",
                 "No range &#x27;99y&#x27;: the last 24h is shown."):
        assert note in html
    assert "All failing items (3)" in html  # everything, as said
    done = client.get("/completions/?queue=nope&range=99y").content.decode()
    assert "No queue &#x27;nope&#x27;: every queue is shown." in done
    assert "No range &#x27;99y&#x27;: the last 24h is shown." in done
    plain = client.get("/failures/?queue=q1&range=7d").content.decode()
    assert "filter-note" not in plain


def test_the_bulk_form_reads_a_filter_as_the_page_does(client, lab, failing):
    """The page read an unknown queue as every queue and its bulk step as no queue at all: a
    form sent with the filter of the address (queue=nope) found nothing to act on while the
    page had listed three failures."""
    client = signed_in(client, lab["operator"])
    page = client.get("/failures/?queue=nope&kind=zzz").content.decode()
    assert "All failing items (3)" in page
    confirm = client.post("/failures/bulk/", {**bulk_form(page), "queue": "nope", "kind": "zzz",
                                              "verb": "hold", "scope": "filter"})
    assert confirm.status_code == 200, said(confirm)
    assert "Hold 3 items?" in confirm.content.decode()


def test_the_workers_page_says_a_status_or_type_it_does_not_know(client, lab):
    client = signed_in(client, lab["operator"])
    # an unknown queue: said, and every worker shown (it read "no queue nope" over none)
    register(actor(*SERVICE), capabilities=CAPS)
    html = client.get("/workers/?queue=nope").content.decode()
    assert "No queue &#x27;nope&#x27;: every worker is shown." in html
    assert "No worker matches the filter" not in html
    html = client.get("/workers/?status=zzz&type=robot").content.decode()
    assert "No worker status &#x27;ZZZ&#x27;: every status is shown." in html
    assert "No worker type &#x27;ROBOT&#x27;: every type is shown." in html
    assert "filter-note" not in client.get("/workers/?status=online").content.decode()


def test_the_workbench_says_how_many_retrying_items_are_due_now(client, lab, failing):
    """The dashboard's Retry pending said 0 while the workbench listed Retrying (2): both
    were past their retry time. The list says how many are due now."""
    client = signed_in(client, lab["operator"])
    heading = client.get("/workbench/").content.decode().split('id="h-retrying">')[1]
    assert heading.startswith("Retrying (2)</h2>")
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,execution,retry_at}', '"2020-01-01T00:00:00.000000Z"') WHERE euid = %s""",
            [failing["retry_a"]])
    heading = client.get("/workbench/").content.decode().split('id="h-retrying">')[1]
    assert heading.startswith("Retrying (2; 1 due now, claimable, the rest waiting for their"
                              " time)</h2>")
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,execution,retry_at}', '"2020-01-01T00:00:00.000000Z"') WHERE euid = %s""",
            [failing["retry_b"]])
    heading = client.get("/workbench/").content.decode().split('id="h-retrying">')[1]
    assert heading.startswith("Retrying (2; all due now, claimable)</h2>")


def test_a_hold_a_workers_failure_placed_names_the_worker(client, lab, tenant):
    """"Placed by svc-extractor": the service account, not which instrument or worker."""
    svc = actor(*SERVICE)
    worker = register(svc, "adapter://centrifuge-2", display_name="Centrifuge 2 adapter",
                      capabilities=CAPS)
    fail(svc, worker, "Tube H", error_class="BUSINESS_RULE_HOLD", error_message="QA to see")
    client = signed_in(client, lab["operator"])
    for page in ("/workbench/", "/holds/"):
        html = client.get(page).content.decode()
        assert "worker Centrifuge 2 adapter" in html, page
