"""What another writer may leave in a queue's config or a subject's envelope (raw SQL, no
checks) fails no read: not of that queue, not of the others, whatever plan PostgreSQL picks
(RULES.md#envelope, RULES.md#visibility)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from bloomops.execution import selectors
from tests.engine import SERVICE, actor, claim, make_queue, make_subject, register
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


def _raw(euid: str, path: list[str], value) -> None:
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, %s,"
                    " %s::jsonb) WHERE euid = %s", [path, json.dumps(value), euid])


def _depths() -> dict[str, int]:
    return {s.queue_key: s.depth for s in selectors.queue_summaries()}


@pytest.mark.parametrize("scope, visible", [
    (None, ["rtp", "sfo"]),  # JSON null: no scope, as absent
    ("sfo", ["sfo"]),  # a text: one value
    (5, []),  # anything else matches nothing
    ([], ["rtp", "sfo"]),
])
def test_a_scope_left_malformed_fails_no_read(tenant, scope, visible):
    make_queue("qa")
    mine = make_subject("qa", name="mine")
    queue = make_queue("qz", site_scope=["sfo"])
    for site in ("sfo", "rtp"):
        make_subject("qz", name=f"z-{site}", props={"site": site})
    _raw(queue["euid"], ["properties", "site_scope"], scope)

    assert _depths() == {"qa": 1, "qz": len(visible)}
    assert selectors.queue_depths() == {"qa": 1, "qz": len(visible)}
    items, total = selectors.queue_items("qz")
    assert total == len(visible)
    assert sorted(i.name.removeprefix("z-") for i in items) == visible
    assert selectors.queue_items("qa")[1] == 1
    svc = actor(*SERVICE)
    assert claim(svc, register(svc), "qa")["subject_euid"] == mine


@pytest.mark.parametrize("plan", ["as planned", "no index scans"])
def test_a_priority_left_unreadable_fails_no_read_whatever_the_plan(tenant, settings, plan):
    """A subject whose priority is a text has an invalid envelope: hidden, with that reason,
    and ordered as priority 0; the reads that filter rows by priority (the summaries read one
    range of it per class) do not fail on it when the plan tests the range before validity."""
    settings.BLOOMOPS_PREPARED_STATEMENTS = False  # a cached generic plan would ignore SET
    make_queue("qa")
    good = make_subject("qa", name="good", priority=250)
    bad = make_subject("qa", name="bad", priority=250)
    _raw(bad, ["properties", "execution", "priority"], "high")
    if plan == "no index scans":
        with connection.cursor() as cur:
            cur.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")

    (summary,) = selectors.queue_summaries()
    assert (summary.depth, summary.urgent_count, summary.stat_count) == (1, 1, 0)
    assert selectors.queue_depths() == {"qa": 1}
    items, total = selectors.queue_items("qa")
    assert total == 1 and [i.euid for i in items] == [good]
    hidden, _ = selectors.queue_hidden_items("qa")
    assert [h.euid for h in hidden] == [bad]
    assert "INVALID_ENVELOPE" in {r.code for r in hidden[0].reasons}
    svc = actor(*SERVICE)
    assert claim(svc, register(svc), "qa")["subject_euid"] == good


def test_a_timestamp_with_a_malformed_fraction_fails_no_summary(client, tenant, users):
    """"2000-01-01T09:00:00.abcdefZ" passes the envelope's check in SQL (to the second) and
    bloomops_utc's shape test as it is: the summaries read it to the second, the queue page
    lists the item, and the dashboard (computed live here) answers."""
    make_queue("qa")
    odd = make_subject("qa", name="odd")
    make_subject("qa", name="fine")
    _raw(odd, ["properties", "execution", "ready_at"], "2000-01-01T09:00:00.abcdefZ")

    (summary,) = selectors.queue_summaries()
    assert summary.depth == 2
    assert summary.oldest_ready_at == datetime(2000, 1, 1, 9, tzinfo=UTC)
    items, total = selectors.queue_items("qa")
    assert total == 2 and [i.name for i in items] == ["odd", "fine"]
    page = signed_in(client, users["operator"])
    assert page.get("/").status_code == 200
    assert "odd" in page.get("/queues/qa/").content.decode()


@pytest.mark.parametrize("stored, offered", [
    ([["READY"]], False),  # a list inside the list: not a state (SQL unwrapped it)
    ([["READY"], "FAILED_RETRYABLE"], False),
    ("READY", True),  # a text alone is one state
    (["READY", "READY"], True),
    (["WAITING_EXTERNAL", "READY"], True),
    (5, False), ({"READY": 1}, False), (None, False), (["ready"], False),
])
def test_the_queue_offers_what_the_inspector_says_whatever_its_states_hold(
        client, tenant, users, stored, offered):
    """[["READY"]] was unwrapped by the SQL (the queue listed and claimed its items) while
    the inspector said READY was not eligible: two answers to one rule. And the queue's
    settings page was a 500 for a number stored there."""
    queue = make_queue("q1", required_worker_capabilities=[])
    subject = make_subject("q1")
    _raw(queue["euid"], ["properties", "eligible_states"], stored)
    diag = selectors.subject_diagnostics(subject)
    said_not = any(r.code == "STATE_NOT_ELIGIBLE" for r in diag.reasons)
    assert (_depths()["q1"], diag.visible, said_not) == (
        (1, True, False) if offered else (0, False, True))
    admin = signed_in(client, users["admin"])
    assert admin.get("/settings/queues/q1/").status_code == 200
    assert admin.get("/people/sci/").status_code == 200


@pytest.mark.parametrize("caps", [5, [["wetlab.qc"]], "wetlab.qc"])
def test_a_queues_capabilities_left_malformed_fail_no_persons_page(client, tenant, users,
                                                                   caps):
    queue = make_queue("q1", required_worker_capabilities=["wetlab.qc"])
    _raw(queue["euid"], ["properties", "required_worker_capabilities"], caps)
    page = signed_in(client, users["admin"]).get("/people/sci/")
    html = page.content.decode()
    assert page.status_code == 200
    assert ("Steps the queues ask for: wetlab.qc" in html) == (caps == "wetlab.qc")
