"""Work sent outside is overdue once it has waited longer than the queue that sent it out
expects (its outside_overdue_seconds, RULES.md#reconciliation): before, the workbench showed
ages alone, so a run lost for a day looked like one sent an hour ago unless someone read every
age against what each pipeline usually takes."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from bloomops.execution import selectors
from bloomops.execution.stats.recorder import record
from bloomops.tapdb.db import fetch_all
from tests.api_helpers import api_for, error_code
from tests.engine import act, actor, make_queue, refused
from tests.test_outside_work import outside  # noqa: F401 (the fixture)
from tests.test_web_queue_settings import cfg, settings_form, world  # noqa: F401
from tests.web_support import form_for, signed_in

pytestmark = pytest.mark.django_db
# the fixture's clock stands at 10:10: q1 sent its first item out at 08:00, its third at
# 10:00; q2 its one at 09:00
NINETY_MINUTES = 5400


def expects(queue_key: str, value) -> None:
    """A queue's outside_overdue_seconds as stored, whoever wrote it."""
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,outside_overdue_seconds}', %s::jsonb)"
              " WHERE type = 'execution' AND subtype = 'queue'"
              " AND json_addl->'properties'->>'queue_key' = %s RETURNING uid",
              [json.dumps(value), queue_key])


@pytest.fixture
def overdue(outside):  # noqa: F811
    expects("q1", NINETY_MINUTES)
    return outside


def _flags(**filters) -> dict[str, tuple]:
    return {r["subject_euid"]: (r["overdue"], r["overdue_after"])
            for r in selectors.outside_work(**filters)}


def test_work_waiting_longer_than_its_queue_expects_is_overdue(overdue):
    flags = _flags()
    assert flags[overdue["first"]] == (True, NINETY_MINUTES)  # 2 h 10 min: overdue
    assert flags[overdue["third"]] == (False, NINETY_MINUTES)  # 10 min
    assert flags[overdue["second"]] == (False, None)  # q2 expects nothing: never
    # another writer's RUNNING was sent out by no queue's dispatch: never overdue
    assert flags[overdue["running"]] == (False, None)
    assert {r["overdue_total"] for r in selectors.outside_work(counted=True)} == {1}
    assert list(_flags(overdue_only=True)) == [overdue["first"]]
    assert list(_flags(overdue_only=True, queue_key="q2")) == []


@pytest.mark.parametrize("stored", ["5400", -60, 0, 0.5, True, {"s": 1}, None])
def test_a_threshold_another_writer_stored_otherwise_flags_nothing(outside, stored):  # noqa: F811
    expects("q1", stored)
    assert {r["overdue"] for r in selectors.outside_work()} == {False}
    assert {r["overdue_after"] for r in selectors.outside_work()} == {None}


def test_a_huge_threshold_another_writer_stored_is_read_not_a_500(outside):  # noqa: F811
    expects("q1", 1e300)
    flags = _flags()
    assert flags[outside["first"]] == (False, 1e9)  # shown clipped; compared in full


def test_a_tiny_threshold_another_writer_stored_is_read_not_a_500(outside, users):  # noqa: F811
    """1e-400 is a JSON number PostgreSQL keeps, and no float holds: the workbench, the
    dashboard and the recorder failed on it."""
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,outside_overdue_seconds}', '1e-400'::jsonb)"
              " WHERE type = 'execution' AND subtype = 'queue'"
              " AND json_addl->'properties'->>'queue_key' = 'q1' RETURNING uid")
    assert {r["overdue"] for r in selectors.outside_work()} == {False}
    client = signed_in(Client(), users["operator"])
    assert client.get("/workbench/").status_code == 200
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("value", [-1, 30 * 86400 + 1, True, "3600", 1.5e9])
def test_an_admin_may_not_set_an_unreadable_threshold(tenant, value):
    make_queue("q1", managed_by="bloomops")
    err = refused("VALIDATION_ERROR", lambda: act(
        "update_queue", actor("admin", username="adm"), queue_key="q1", expected_revision=1,
        payload={"outside_overdue_seconds": value, "reason": "pipeline SLA"}))
    assert [p["field"] for p in err.problems()] == ["outside_overdue_seconds"]


def test_an_admin_sets_what_a_queue_expects_on_its_settings_page(world, client):  # noqa: F811
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    assert 'name="outside_overdue_seconds"' in page.content.decode()
    assert "(0: never)" in page.content.decode()
    preview = client.post("/settings/queues/cfg/",
                          settings_form(page, outside_overdue_seconds="7200"))
    assert "<td>–</td><td>7200 (2 h)</td>" in preview.content.decode()
    save = form_for(preview, "/settings/queues/cfg/save/", reason="pipeline SLA")
    assert client.post("/settings/queues/cfg/save/", save).status_code == 302
    assert cfg()["outside_overdue_seconds"] == 7200


def test_the_workbench_marks_overdue_work_and_lists_only_it_on_asking(overdue, users):
    client = signed_in(Client(), users["operator"])
    section = client.get("/workbench/").content.decode().split(
        'id="h-outside"')[1].split("</section>")[0]
    assert "Waiting on outside work (4; " in section and ">1 overdue<" in section
    first = section.split(f'<tr data-euid="{overdue["first"]}">')[1].split("</tr>")[0]
    assert ">overdue</span>" in first and "within 1 h 30 min" in first
    third = section.split(f'<tr data-euid="{overdue["third"]}">')[1].split("</tr>")[0]
    assert "overdue" not in third
    only = client.get("/workbench/?overdue=1").content.decode().split(
        'id="h-outside"')[1].split("</section>")[0]
    assert "Waiting on outside work (1; " in only
    assert overdue["first"] in only and overdue["third"] not in only
    none = client.get("/workbench/?overdue=1&queue=q2").content.decode()
    assert "Nothing waiting on outside work is overdue." in none


def test_the_subject_page_says_when_its_outside_work_is_overdue(overdue, users):
    client = signed_in(Client(), users["operator"])

    def notice(euid: str) -> str:
        html = client.get(f"/subjects/{euid}/").content.decode()
        return html.split('id="outside-work">')[1].split("</p>")[0]

    late = notice(overdue["first"])
    assert "Overdue:</strong> its queue expects a result within 1 h 30 min" in late
    assert "it has waited 2 h 10 min" in late
    on_time = notice(overdue["third"])
    assert "Overdue" not in on_time
    assert "Its queue expects a result within 1 h 30 min." in on_time
    assert "expects" not in notice(overdue["second"])


@pytest.mark.parametrize("recorded", [False, True])
def test_the_dashboard_says_how_much_outside_work_is_overdue(overdue, users, recorded):
    if recorded:
        record()  # the recorder's snapshot carries the count, as the live read does
    html = signed_in(Client(), users["operator"]).get("/").content.decode()
    line = html.split('id="outside-waiting">')[1].split("</p>")[0]
    assert "4 items waiting on outside work" in line
    assert 'href="/workbench/?overdue=1#h-outside"' in line and "1 overdue" in line


def test_the_dashboard_says_nothing_overdue_when_nothing_is(outside, users):  # noqa: F811
    line = signed_in(Client(), users["operator"]).get("/").content.decode().split(
        'id="outside-waiting">')[1].split("</p>")[0]
    assert "4 items waiting on outside work" in line and "overdue" not in line


def test_the_api_says_which_outside_work_is_overdue(overdue, users):
    api = api_for(users["worker_service"])
    listed = {w["subject_euid"]: w for w in api.get("/outside-work").json()}
    assert (listed[overdue["first"]]["overdue"],
            listed[overdue["first"]]["overdue_after_seconds"]) == (True, NINETY_MINUTES)
    assert type(listed[overdue["first"]]["overdue_after_seconds"]) is int  # 5400, not 5400.0
    assert (listed[overdue["second"]]["overdue"],
            listed[overdue["second"]]["overdue_after_seconds"]) == (False, None)
    only = api.get("/outside-work", overdue="1")
    assert [w["subject_euid"] for w in only.json()] == [overdue["first"]]
    # how many in all, beyond the page asked for
    assert only["X-Total-Count"] == "1"
    assert api.get("/outside-work", limit="2")["X-Total-Count"] == "4"


@pytest.mark.parametrize("value", ["2", "-1", "yes", ""])
def test_the_api_refuses_an_unreadable_overdue_filter(tenant, users, value):
    r = api_for(users["operator"]).get("/outside-work", overdue=value)
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert r.json()["error"]["details"]["field"] == "overdue"


def test_metrics_count_work_waiting_outside_and_overdue(overdue, tenant):
    families = text_string_to_metric_families(Client().get("/metrics").content.decode())
    figures = {s.name: s.value for f in families for s in f.samples
               if s.name.startswith("outside_") and s.labels == {"tenant": tenant}}
    assert figures == {"outside_waiting_count": 4.0, "outside_overdue_count": 1.0}


def test_an_admin_clears_the_threshold_with_zero(overdue, tenant):
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,managed_by}', '\"bloomops\"') WHERE type = 'execution'"
              " AND subtype = 'queue' AND tenant_id = %s RETURNING uid",
              [tenant])  # as if bloomops had made them
    act("update_queue", actor("admin", username="adm"), queue_key="q1",
        expected_revision=selectors.queue_config("q1")["config"]["revision"],
        payload={"outside_overdue_seconds": 0, "reason": "no SLA"})
    assert {r["overdue"] for r in selectors.outside_work()} == {False}
