"""The claim path's reads (RULES.md#claims): a worker's lease count reads its active leases
only, however many it held before; a claim whose first candidates are all locked by other
claimers still takes the next one in order."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.statements import CLAIM_AHEAD, WORKER_ACTIVE_LEASE_COUNT
from bloomops.tapdb.db import fetch_one, fetch_value
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register


def _release(svc, worker: str, lease: dict) -> None:
    act("release_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY")


def _uid(euid: str) -> int:
    return fetch_value("SELECT uid FROM generic_instance WHERE euid = %s", [euid])


@pytest.mark.django_db
def test_the_lease_count_is_the_active_leases_whatever_the_past(tenant):
    svc = actor(*SERVICE)
    make_queue("q1")
    for n in range(12):
        make_subject("q1", name=f"s{n}", priority=100 - n)
    worker = register(svc, max_concurrent_leases=3)
    first = claim(svc, worker)  # the oldest of the worker's leases stays active
    for _ in range(8):
        _release(svc, worker, claim(svc, worker))
    second = claim(svc, worker)
    expired = claim(svc, worker)
    clock.advance(10)
    act("expire_queue_lease", actor("admin"), lease_euid=expired["lease_euid"],
        payload={"reason": "stuck"})
    params = {"worker_uid": _uid(worker), "worker_euid": worker, "now": ts(clock.now())}
    assert fetch_one(WORKER_ACTIVE_LEASE_COUNT, params)["n"] == 2
    (row,) = [w for w in selectors.workers() if w.euid == worker]
    assert row.active_leases == 2
    assert first["lease_euid"] and second["lease_euid"]
    # The limit counts the same leases: a third one is allowed, a fourth is not.
    claim(svc, worker)
    with pytest.raises(ActionError) as refused:
        claim(svc, worker)
    assert refused.value.code == "MAX_LEASES_REACHED"
    # Leases past their expiry are not active (the sweeper has not marked them yet).
    clock.advance(901)
    assert fetch_one(WORKER_ACTIVE_LEASE_COUNT, {**params, "now": ts(clock.now())})["n"] == 0


@pytest.mark.django_db
def test_the_lease_count_reads_active_leases_not_past_ones(tenant):
    """Its plan starts from the worker's active leases (bloomops_lease_worker_active) and
    probes each one's lineage edge: the worker's lease edges, past leases included, are not
    walked."""
    svc = actor(*SERVICE)
    make_queue("q1")
    make_subject("q1")
    worker = register(svc)
    claim(svc, worker)
    with connection.cursor() as cur:
        cur.execute("ANALYZE generic_instance, generic_instance_lineage")
        for knob in ("enable_seqscan", "enable_bitmapscan", "enable_hashjoin",
                     "enable_mergejoin"):
            cur.execute(f"SET LOCAL {knob} = off")
        cur.execute("EXPLAIN " + WORKER_ACTIVE_LEASE_COUNT,
                    {"worker_uid": _uid(worker), "worker_euid": worker, "now": ts(clock.now())})
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "bloomops_lease_worker_active" in plan, plan
    assert "(child_instance_uid = x.uid)" in plan, plan


@pytest.mark.django_db
def test_lineage_decides_whose_lease_counts(tenant):
    """A lease whose copied worker EUID names another worker is not that worker's lease:
    only the lineage edge makes a lease count toward a worker's limit."""
    svc = actor(*SERVICE)
    make_queue("q1")
    make_subject("q1")
    holder, other = register(svc, worker_key="w-holder"), register(svc, worker_key="w-other")
    lease = claim(svc, holder)
    with connection.cursor() as cur:
        cur.execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
                       '{properties,worker_lookup_euid}', to_jsonb(%s::text))
                       WHERE euid = %s""", [other, lease["lease_euid"]])
    params = {"worker_uid": _uid(other), "worker_euid": other, "now": ts(clock.now())}
    assert fetch_one(WORKER_ACTIVE_LEASE_COUNT, params)["n"] == 0
    (row,) = [w for w in selectors.workers() if w.euid == other]
    assert row.active_leases == 0


@pytest.mark.usefixtures("committed")
def test_a_claim_takes_the_next_subject_when_the_first_ones_are_locked(tenant):
    """Other claimers hold the first CLAIM_AHEAD + 1 candidates locked (mid-claim): the
    claim takes the next subject in order, not NO_WORK."""
    svc = actor(*SERVICE)
    make_queue("q1")
    made = [make_subject("q1", name=f"s{n}", priority=1000 - n) for n in range(CLAIM_AHEAD + 3)]
    clock.advance(1)
    worker = register(svc, max_concurrent_leases=2)
    locked, done = threading.Event(), threading.Event()

    def hold_locks() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SELECT uid FROM generic_instance WHERE euid = ANY(%s) FOR UPDATE",
                            [made[:CLAIM_AHEAD + 1]])
                locked.set()
                done.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_locks)
    holder.start()
    try:
        assert locked.wait(30)
        assert claim(svc, worker)["subject_euid"] == made[CLAIM_AHEAD + 1]
    finally:
        done.set()
        holder.join()
    assert claim(svc, worker)["subject_euid"] == made[0]
