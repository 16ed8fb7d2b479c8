"""Rows another writer (Bloom, on the same database) left of types the engine does not
write: one bad row is read as what it can be, and no screen, API read, metric or recorder
pass fails on it."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from bloomops.execution.errors import ActionError
from bloomops.execution.stats import recorder
from tests.api_helpers import api_for
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


def _store(euid: str, path: list[str], value) -> None:
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, %s,"
                    " %s::jsonb) WHERE euid = %s", [path, json.dumps(value), euid])


def _reads(client, api, worker: str) -> dict[str, int]:
    return {url: client.get(url).status_code for url in ("/", "/workers/", "/metrics")} | {
        path: api.get(path).status_code
        for path in ("/workers", f"/workers/{worker}", "/queues", "/leases")}


@pytest.mark.parametrize("field,value", [
    ("max_concurrent_leases", "x"), ("heartbeat_at", 5), ("worker_key", 5),
    ("site_scope", 5), ("status", 5), ("capabilities", "x"), ("heartbeat_ttl_seconds", []),
    ("drain_requested", "yes"), ("capabilities", [1, "pcr"]),
])
def test_a_badly_typed_worker_fails_no_read(client, tenant, users, field, value):
    make_queue("q1", required_worker_capabilities=[])
    make_subject("q1")
    svc = actor(*SERVICE)
    bad = register(svc)
    _store(bad, ["properties", field], value)
    client.force_login(users["admin"])
    assert set(_reads(client, api_for(users["admin"]), bad).values()) == {200}
    recorder.record(tenant=tenant)
    # the other workers go on claiming
    assert claim(svc, register(svc), "q1")["lease_euid"]


@pytest.mark.parametrize("field,value", [("expires_at", 5), ("status", 5), ("claimed_at", [])])
def test_a_badly_typed_lease_fails_no_read(client, tenant, users, field, value):
    make_queue("q1", required_worker_capabilities=[])
    make_subject("q1")
    svc = actor(*SERVICE)
    worker = register(svc)
    lease = claim(svc, worker, "q1")["lease_euid"]
    _store(lease, ["properties", field], value)
    client.force_login(users["admin"])
    assert set(_reads(client, api_for(users["admin"]), worker).values()) == {200}
    assert client.get("/admin/").status_code == 200
    human = signed_in(client, users["worker_human"])
    assert human.get("/my-work/").status_code == 200
    recorder.record(tenant=tenant)


@pytest.mark.parametrize("properties", ["text", ["ab"], 5])
def test_a_subject_whose_properties_are_not_an_object_is_shown_as_invalid(
        client, tenant, users, properties):
    make_queue("q1")
    subject = make_subject("q1")
    _store(subject, ["properties"], properties)
    client.force_login(users["operator"])
    assert client.get(f"/subjects/{subject}/").status_code == 200
    r = api_for(users["operator"]).get(f"/subjects/{subject}")
    assert r.status_code == 200, r.content
    assert r.json()["properties"] == {} and r.json()["visible"] is False
    assert client.get("/queues/q1/").status_code == 200
    # With no envelope it reads as an object never routed (PENDING), as the engine reads
    # every object without one.
    with pytest.raises(ActionError) as refused:
        act("place_execution_hold", actor("operator"), subject_euid=subject,
            expected_state="READY", payload={"reason": "x"})
    assert refused.value.code == "STATE_CONFLICT" and "PENDING" in refused.value.message


def test_a_person_s_lease_with_an_unreadable_expiry_still_shows_their_work(client, lab):
    from bloomops.web import services

    subject = make_subject("q1")
    worker = services.ensure_my_worker(lab["worker_human"])
    sci = actor("worker_human", username="sci")
    lease = act("claim_queue_item", sci, worker_euid=worker, subject_euid=subject)
    _store(lease["lease_euid"], ["properties", "expires_at"], 5)
    page = signed_in(client, lab["worker_human"]).get("/my-work/")
    assert page.status_code == 200 and subject in page.content.decode()


def test_a_hold_another_writer_stored_without_its_time_is_found_by_the_search(client, users,
                                                                             tenant):
    """A hold with no placed_at (another writer's) was left out of every hold search but
    "any time": it is as old as its row."""
    import re

    from bloomops.execution.actions.steps import HOLD_CODE
    from bloomops.execution.objects import load
    from bloomops.tapdb.instances import create_instance, link

    make_queue("q1")
    subject = make_subject("q1", name="Tube")
    hold = create_instance(HOLD_CODE, name="their hold", tenant_id=tenant,
                           properties={"status": "ACTIVE", "hold_code": "QC_FAIL"})
    link(load(euid=subject, tenant=tenant).uid, hold.uid, "execution_subject_hold",
         tenant_id=tenant)
    html = signed_in(client, users["operator"]).get("/holds/?since=1d").content.decode()
    assert re.findall(r'data-hold="([^"]+)"', html) == [hold.euid]
