"""Work under way outside whose result does not come back (RULES.md#reconciliation): QA finds
it on the workbench, the longest waiting first, and reconciles it from there; each way of doing
so records that the outside run was given up (tests/test_engine_flows.py holds the record)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bloomops.execution import clock, selectors
from bloomops.execution.objects import REL
from bloomops.execution.stats.recorder import record
from bloomops.tapdb.db import fetch_all
from bloomops.tapdb.instances import children
from tests.api_helpers import api_for, error_code
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    register,
    uid,
)
from tests.test_operator_controls import confirm_of
from tests.web_support import EXTRACTION, QC, forms, signed_in

pytestmark = pytest.mark.django_db
MORNING = "2026-11-26T08:00:00Z"


def sent_outside(svc, worker: str, queue_key: str, run_id: str) -> str:
    subject = make_subject(queue_key, name=f"tube {run_id}", ready_at=MORNING)
    lease = claim(svc, worker, queue_key)
    assert lease["subject_euid"] == subject
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"external": {"run_id": run_id, "lane": 3}})
    return subject


@pytest.fixture
def outside(tenant):
    """Three items sent out an hour apart (two from q1, one from q2), one another writer left
    RUNNING, and one still in its queue."""
    make_queue("q1", required_worker_capabilities=EXTRACTION)
    make_queue("q2", required_worker_capabilities=QC)
    clock.freeze(datetime(2026, 11, 26, 8, tzinfo=UTC))
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=[*EXTRACTION, *QC])
    first = sent_outside(svc, worker, "q1", "wf-1")
    clock.advance(3600)
    second = sent_outside(svc, worker, "q2", "wf-2")
    clock.advance(3600)
    third = sent_outside(svc, worker, "q1", "wf-3")
    running = make_subject("q1", state="RUNNING", name="on the sequencer",
                           ready_at=MORNING)
    make_subject("q1", ready_at=MORNING)  # waiting in its queue: not outside
    clock.advance(600)
    return {"first": first, "second": second, "third": third, "running": running}


def test_the_workbench_lists_work_waiting_outside_the_longest_waiting_first(outside):
    rows = selectors.outside_work(counted=True)
    sent = [r for r in rows if r["subject_state"] == "WAITING_EXTERNAL"]
    assert [(r["subject_euid"], r["queue_key"], r["dispatch"]["run_id"]) for r in sent] == [
        (outside["first"], "q1", "wf-1"), (outside["second"], "q2", "wf-2"),
        (outside["third"], "q1", "wf-3")]
    assert [r["since"] for r in sent] == [
        "2026-11-26T08:00:00.000000Z", "2026-11-26T09:00:00.000000Z",
        "2026-11-26T10:00:00.000000Z"]
    (running,) = [r for r in rows if r["subject_state"] == "RUNNING"]
    assert running["subject_euid"] == outside["running"] and running["dispatch"] is None
    assert {r["total"] for r in rows} == {4}
    # narrowed by the queue that sent it out, and by the run id QA has from the instrument
    narrowed = selectors.outside_work(queue_key="q1", counted=True)
    assert {r["subject_euid"] for r in narrowed} == {
        outside["first"], outside["third"], outside["running"]}
    assert {r["total"] for r in narrowed} == {3}
    assert [r["subject_euid"] for r in selectors.outside_work(text="WF-2")] == [
        outside["second"]]
    # the longest waiting first, whatever says since when (another writer's RUNNING: the
    # row's last change)
    assert [r["since"] for r in rows] == sorted(r["since"] for r in rows)
    (head,) = selectors.outside_work(limit=1, counted=True)
    assert head["subject_euid"] == min(rows, key=lambda r: r["since"])["subject_euid"]
    assert head["total"] == 4


def test_a_dispatch_of_an_earlier_step_says_nothing_of_work_running_now(outside):
    """A subject another writer moved from waiting outside to RUNNING keeps the earlier
    step's dispatch among its properties: listed with it, it read as the old run, sent by the
    old queue, waiting since the old instant."""
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,"
              " '{properties,execution,state}', '\"RUNNING\"'),"
              " '{properties,execution,next_queue_key}', '\"q2\"')"
              " WHERE euid = %s RETURNING uid", [outside["first"]])
    (row,) = [r for r in selectors.outside_work() if r["subject_euid"] == outside["first"]]
    assert (row["dispatch"], row["queue_key"]) == (None, "q2")
    assert row["since"] > "2026-11-26T08:00:00.000000Z"  # its row's change, not the dispatch


def _row(html: str, euid: str) -> str:
    return html.split(f'<tr data-euid="{euid}">')[1].split("</tr>")[0]


@pytest.mark.parametrize("role", ["worker_human", "operator"])
def test_qa_sees_what_waits_outside_and_an_operator_may_act_on_it(outside, users, role):
    html = signed_in(Client(), users[role]).get("/workbench/").content.decode()
    section = html.split('id="h-outside"')[1].split("</section>")[0]
    assert "Waiting on outside work (4)" in section
    row = _row(section, outside["first"])
    assert "lane: 3; run_id: wf-1" in row and "2 h 10 min" in row
    assert "lease_euid" not in row and "dispatched_at" not in row  # bloomops' own fields
    assert "running elsewhere" in _row(section, outside["running"])
    assert ('id="bulk-outside"' in section) is (role == "operator")
    assert section.index(outside["first"]) < section.index(outside["third"])


def test_an_operator_holds_work_that_will_not_come_back_from_the_workbench(outside, users):
    client = signed_in(Client(), users["operator"])
    html = client.get("/workbench/").content.decode()
    data = next(f["fields"] for f in forms(html) if f["id"] == "bulk-outside")
    pick = f"{outside['first']}|WAITING_EXTERNAL|{envelope(outside['first'])['revision']}"
    response = client.post("/workbench/bulk/", {**data, "action": "hold", "pick": [pick],
                                                 "reason": "pipeline lost the run"})
    assert any(str(m).startswith("Held 1") for m in get_messages(response.wsgi_request))
    assert envelope(outside["first"])["state"] == "HELD"
    statuses = [o.json_addl["properties"]["status"]
                for o in children(uid(outside["first"]), REL["subject_record"])]
    assert statuses == ["SUCCEEDED", "CANCELED"]  # the dispatch, then the run given up
    assert outside["first"] not in {r["subject_euid"] for r in selectors.outside_work()}


@pytest.mark.parametrize("role", ["worker_human", "operator"])
def test_the_subject_page_says_what_its_outside_work_is_and_who_reconciles_it(
        outside, users, role):
    """The inspector showed a subject waiting outside as "in q1, not claimable now" and its
    state alone: nothing said since when, which run, or that someone must act if the result
    never comes."""
    html = signed_in(Client(), users[role]).get(
        f"/subjects/{outside['first']}/").content.decode()
    notice = html.split('id="outside-work">')[1].split("</p>")[0]
    assert "Sent out by q1" in notice and "2 h 10 min ago" in notice
    assert "The dispatch said: lane: 3; run_id: wf-1." in notice
    if role == "operator":
        assert "requeue it to run again, hold it or cancel its work below" in notice
        # each asks first, saying the run is given up for good (the hold asked nothing)
        for action in ("requeue", "hold", "cancel"):
            asked = confirm_of(html, f"/subjects/{outside['first']}/{action}/")
            assert "outside run" in asked and "comes back later is refused" in asked, action
    else:
        assert "QA requeues, holds or cancels it" in notice
    running = signed_in(Client(), users[role]).get(
        f"/subjects/{outside['running']}/").content.decode()
    assert "Running elsewhere (another system set it so)" in running


def test_the_api_lists_work_waiting_outside_as_the_workbench_does(outside, users):
    """A LIMS finds the runs that will not report back and reconciles them by action, the
    state and revision listed as its expectation."""
    api = api_for(users["worker_service"])
    r = api.get("/outside-work")
    assert r.status_code == 200, r.content
    listed = r.json()
    assert [w["subject_euid"] for w in listed] == [
        row["subject_euid"] for row in selectors.outside_work()]
    first = next(w for w in listed if w["subject_euid"] == outside["first"])
    assert (first["subject_state"], first["queue_key"], first["waiting_since"]) == (
        "WAITING_EXTERNAL", "q1", "2026-11-26T08:00:00.000000Z")
    assert (first["dispatch"]["run_id"], first["dispatch"]["lane"]) == ("wf-1", 3)
    running = next(w for w in listed if w["subject_euid"] == outside["running"])
    assert (running["subject_state"], running["dispatch"]) == ("RUNNING", None)
    assert [w["subject_euid"] for w in api.get("/outside-work", queue_key="q2").json()] == [
        outside["second"]]
    assert len(api.get("/outside-work", limit="1").json()) == 1
    held = api_for(users["operator"]).act(
        "hold", subject_euid=outside["first"], expected_state="WAITING_EXTERNAL",
        expected_revision=first["subject_revision"], payload={"reason": "run lost"})
    assert held.status_code == 200, held.content
    assert outside["first"] not in {w["subject_euid"] for w in api.get("/outside-work").json()}


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"limit": "ten"}, "limit"),
    ({"queue_key": " "}, "queue_key"), ({"queue_key": "q" * 300}, "queue_key"),
    ({"since": "2026-01-01T00:00:00Z"}, "since")])
def test_the_api_refuses_a_malformed_outside_work_query(tenant, users, params, field):
    r = api_for(users["operator"]).get("/outside-work", **params)
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert r.json()["error"]["details"]["field"] == field


def test_the_workbench_says_so_when_its_queue_filter_names_no_queue(outside, users):
    """A stale bookmark's queue showed every list at (0), "Nothing is waiting on outside
    work": the desk looked clear while it was not. It is said, and the whole desk shown."""
    client = signed_in(Client(), users["operator"])
    html = client.get("/workbench/?queue=nope").content.decode()
    note = html.split('class="notice filter-note"')[1].split("</p>")[0]
    assert "No queue &#x27;nope&#x27;: the whole desk is shown." in note
    assert outside["first"] in html.split('id="h-outside"')[1]
    for plain in ("/workbench/?queue=q1", "/workbench/"):
        assert "filter-note" not in client.get(plain).content.decode()


def test_the_dashboard_says_how_much_waits_outside_and_for_how_long(outside, users):
    """Work sent out whose result never came is in no queue's depth, age or dead letters: the
    morning overview showed nothing of an item stuck for hours."""
    client = signed_in(Client(), users["operator"])
    line = client.get("/").content.decode().split('id="outside-waiting">')[1].split("</p>")[0]
    assert "4 items waiting on outside work" in line and 'href="/workbench/#h-outside"' in line
    assert "the longest for 2 h 10 min, from q1." in line  # the first sent out, at 08:00
    # computed once for every viewer by the recorder, like the queues' figures: a
    # dashboard read from its snapshot says the same
    record()
    with CaptureQueriesContext(connection) as read:
        html = client.get("/").content.decode()
    assert not [q for q in read.captured_queries if "external_dispatch" in q["sql"]]
    assert "4 items waiting on outside work" in html
    assert "the longest for 2 h 10 min, from q1." in html
