"""Concurrency (RULES.md#claims) on committed data, each worker on its own connection."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from bloomops.execution import clock, selectors
from bloomops.execution.errors import ActionError
from bloomops.tapdb.db import fetch_all, fetch_value
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    locked_elsewhere,
    make_queue,
    make_subject,
    props,
    register,
)


def _run_threads(target, n: int) -> list:
    results: list = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except Exception as exc:  # the test inspects every outcome
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _active_leases_per_subject(tenant: str) -> Counter:
    rows = fetch_all(
        "SELECT l.parent_instance_uid AS s FROM generic_instance x JOIN generic_instance_lineage"
        " l ON l.child_instance_uid = x.uid AND l.relationship_type = 'execution_subject_lease'"
        " WHERE x.tenant_id = %s AND x.subtype = 'queue_lease'"
        " AND x.json_addl->'properties'->>'status' = 'ACTIVE'",
        [tenant],
    )
    return Counter(r["s"] for r in rows)


@pytest.mark.usefixtures("committed")
def test_parallel_worker_collision(tenant):
    svc = actor(*SERVICE)
    make_queue("q1")
    make_subject("q1")
    workers = [register(svc), register(svc)]
    assert selectors.queue_depths()["q1"] == 1

    outcomes = _run_threads(lambda i: claim(svc, workers[i]), 2)
    wins = [o for o in outcomes if not isinstance(o, Exception)]
    losses = [o for o in outcomes if isinstance(o, Exception)]
    assert len(wins) == 1 and len(losses) == 1
    assert isinstance(losses[0], ActionError) and losses[0].code == "NO_WORK"
    assert sum(_active_leases_per_subject(tenant).values()) == 1
    started = fetch_value(
        "SELECT count(*) FROM generic_instance WHERE tenant_id = %s AND subtype ="
        " 'execution_record' AND json_addl->'properties'->>'status' = 'STARTED'",
        [tenant],
    )
    assert started == 1
    assert selectors.queue_depths()["q1"] == 0


@pytest.mark.usefixtures("committed")
def test_lease_expiration_recovery(tenant):
    svc = actor(*SERVICE)
    admin = actor("admin")
    make_queue("q1", lease_ttl_seconds=60)
    subject = make_subject("q1")
    first_worker, second_worker = register(svc), register(svc)
    first = claim(svc, first_worker)
    assert selectors.queue_depths()["q1"] == 0
    clock.advance(61)
    # Visible again before any sweeper ran; the old lease is still stored as ACTIVE.
    assert props(first["lease_euid"])["status"] == "ACTIVE"
    assert selectors.queue_depths()["q1"] == 1
    assert selectors.subject_diagnostics(subject).derived_state == "VISIBLE_IN_QUEUE"
    second = claim(svc, second_worker)
    assert second["subject_euid"] == subject
    swept = act("expire_queue_lease", admin)
    assert swept["expired_lease_euids"] == [first["lease_euid"]]
    assert props(first["lease_euid"])["status"] == "EXPIRED"
    assert props(second["lease_euid"])["status"] == "ACTIVE"


@pytest.mark.usefixtures("committed")
def test_worker_crash_recovery(tenant):
    svc = actor(*SERVICE)
    make_queue("q1", lease_ttl_seconds=60)
    subject = make_subject("q1")
    crashed, healthy = register(svc), register(svc)
    stale = claim(svc, crashed)  # then the worker dies: no heartbeat, no renew
    clock.advance(90)
    fresh = claim(svc, healthy)
    assert fresh["subject_euid"] == subject
    done = act("complete_queue_execution", svc, lease_euid=fresh["lease_euid"],
               worker_euid=healthy, expected_state="READY")
    assert done["state"] == "COMPLETED"
    with pytest.raises(ActionError) as err:
        act("complete_queue_execution", svc, lease_euid=stale["lease_euid"],
            worker_euid=crashed, expected_state="READY")
    assert err.value.code == "LEASE_EXPIRED"


@pytest.mark.usefixtures("committed")
def test_stress_eight_workers_two_hundred_subjects(tenant):
    """8 workers claim from 200 subjects until none is left; no subject is ever leased twice
    at once and every subject is claimed exactly once."""
    svc = actor(*SERVICE)
    make_queue("q1", lease_ttl_seconds=3600)
    subjects = {make_subject("q1", name=f"s{i}") for i in range(200)}
    workers = [register(svc, max_concurrent_leases=1000) for _ in range(8)]
    double = []

    def drain(i: int) -> list[str]:
        mine = []
        while True:
            try:
                mine.append(claim(svc, workers[i])["subject_euid"])
            except ActionError as exc:
                if exc.code == "NO_WORK":
                    return mine
                if exc.code != "CONCURRENT_UPDATE":
                    raise
            if len(mine) % 25 == 0:
                dup = [s for s, n in _active_leases_per_subject(tenant).items() if n > 1]
                double.extend(dup)

    outcomes = _run_threads(drain, 8)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert not errors, errors
    claimed = Counter(s for batch in outcomes for s in batch)
    assert set(claimed) == subjects
    assert set(claimed.values()) == {1}
    assert double == []
    assert set(_active_leases_per_subject(tenant).values()) == {1}
    assert sum(1 for batch in outcomes if batch) >= 2  # the work really was shared
    assert selectors.queue_depths()["q1"] == 0


@pytest.mark.usefixtures("committed")
@pytest.mark.parametrize("action", [
    ("complete_queue_execution", {"expected_state": "READY"}),
    ("renew_queue_lease", {}),
])
def test_a_lease_action_held_up_past_its_lease_does_not_step_over_the_next_claim(tenant,
                                                                                 action):
    """A completion or renewal read its time before waiting for its locks. Held up (here by
    a duplicate of it in flight; a starved process does the same) until its lease had run
    out and another worker had claimed the subject, it was judged at that earlier time: a
    completion completed over the new lease (the step ran twice), a renewal kept two leases
    active on one subject (RULES.md#leases: a late call is told LEASE_EXPIRED)."""
    import time

    from bloomops.execution.context import ActionRequest
    from bloomops.execution.executor import execute
    from bloomops.execution.journal import idempotency_scope
    from tests.engine import envelope

    svc = actor(*SERVICE)
    make_queue("q1", lease_ttl_seconds=30)
    subject = make_subject("q1")
    first, second = register(svc), register(svc)
    lease = claim(svc, first)["lease_euid"]
    clock.advance(29)  # the completion is sent inside its lease
    action_key, fields = action
    late = ActionRequest(action_key=action_key, actor=svc, idempotency_key="late",
                         lease_euid=lease, worker_euid=first, payload={}, **fields)
    hold = f"{tenant}|{action_key}|{idempotency_scope(late)}|late"
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(hashtext(%s))", [hold])
    outcome: list = []

    def send() -> None:
        try:
            outcome.append(execute(late))
        except ActionError as err:
            outcome.append(err)
        finally:
            connection.close()

    thread = threading.Thread(target=send)
    thread.start()
    try:
        for _ in range(500):  # until it waits for the lock
            # this database's wait for this key: another test process's waits are not it
            if fetch_value("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                           " AND NOT granted AND objid = hashtext(%s)::oid AND database ="
                           " (SELECT oid FROM pg_database WHERE datname = current_database())",
                           [hold]):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the completion never waited for its lock")
        clock.advance(2)  # the lease runs out; another worker claims the subject
        taken = claim(svc, second)
        assert taken["subject_euid"] == subject
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(hashtext(%s))", [hold])
        thread.join()
    [answer] = outcome
    assert isinstance(answer, ActionError) and answer.code == "LEASE_EXPIRED"
    assert envelope(subject)["state"] == "READY"
    assert props(taken["lease_euid"])["status"] == "ACTIVE"
    assert [x["euid"] for x in selectors.leases(status="ACTIVE")
            if x["subject_euid"] == subject] == [taken["lease_euid"]]


@pytest.mark.usefixtures("committed")
def test_the_sweeper_need_not_wait_for_a_subject_an_action_has_locked(tenant, settings):
    """An action locks its subject, then the lease; the sweeper locks the lease, then links
    its record to the subject, whose foreign key check waited for the action's lock: a
    deadlock, one of them refused. The engine's row locks leave keys alone (NO KEY UPDATE),
    so the link no longer waits."""

    from bloomops.execution.objects import load

    settings.BLOOMOPS_LOCK_TIMEOUT_MS = 500
    svc = actor(*SERVICE)
    make_queue("q1", lease_ttl_seconds=30)
    subject = make_subject("q1")
    lease = claim(svc, register(svc))["lease_euid"]
    clock.advance(31)
    # as a completion of the subject holds it, waiting for the lease
    with locked_elsewhere(lambda: load(euid=subject, tenant=tenant, lock=True)):
        swept = act("expire_queue_lease", actor("admin"))
    assert swept["expired_lease_euids"] == [lease]


@pytest.mark.usefixtures("committed")
def test_a_strict_queue_hands_out_nothing_while_its_head_is_locked_elsewhere(tenant):
    """The claim skips a row another transaction holds locked: on a strict-order queue a
    hold of the head under way (one later refused and rolled back) let a claim take the
    second item, the work run out of order."""
    from bloomops.execution.objects import load

    svc = actor(*SERVICE)
    make_queue("q1", strict_order=True)
    head = make_subject("q1", name="first")
    make_subject("q1", name="second")
    worker = register(svc)
    with locked_elsewhere(lambda: load(euid=head, tenant=tenant, lock=True)):
        err = None
        try:
            claim(svc, worker)
        except ActionError as refused:
            err = refused
    assert err is not None and err.code == "NO_WORK", err
    assert claim(svc, worker)["subject_euid"] == head  # its turn, once the lock is gone
