"""The claim path's reads (RULES.md#claims): a worker's lease count reads its active leases
only, however many it held before; a claim whose first candidates are all locked by other
claimers still takes the next one in order; the walk finds leased subjects by the copy and
lineage decides."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection, transaction

from bloomops.execution import clock, selectors
from bloomops.execution.actions.claim import ClaimQueueItem
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.sql import BLOCKED_SUBJECTS
from bloomops.execution.statements import WORKER_ACTIVE_LEASE_COUNT
from bloomops.tapdb.db import fetch_all, fetch_one, fetch_value
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, refused, register
from tests.plans import plan_of

TABLES = ("generic_instance", "generic_instance_lineage")


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
    walked, and neither are the other workers' active leases (the lab's unexpired leases
    are one range of bloomops_active_expiry, which a whole-queue read starts from)."""
    svc = actor(*SERVICE)
    make_queue("q1")
    for n in range(6):
        make_subject("q1", name=f"s{n}")
    worker, others = register(svc), register(svc, max_concurrent_leases=5)
    claim(svc, worker)
    for _ in range(5):
        claim(svc, others)
    plan = plan_of(WORKER_ACTIVE_LEASE_COUNT,
                   {"worker_uid": _uid(worker), "worker_euid": worker, "now": ts(clock.now())},
                   off=("seqscan", "bitmapscan", "hashjoin", "mergejoin"), analyze=TABLES)
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
    """Other claimers hold the first candidates locked (mid-claim), more of them than the
    claim gives up after when it finds candidates leased: the claim takes the next subject in
    order, not NO_WORK."""
    svc = actor(*SERVICE)
    make_queue("q1")
    locked_count = ClaimQueueItem.MAX_CANDIDATES + 1
    made = [make_subject("q1", name=f"s{n}", priority=1000 - n) for n in range(locked_count + 2)]
    clock.advance(1)
    worker = register(svc, max_concurrent_leases=2)
    locked, done = threading.Event(), threading.Event()

    def hold_locks() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SELECT uid FROM generic_instance WHERE euid = ANY(%s) FOR UPDATE",
                            [made[:locked_count]])
                locked.set()
                done.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_locks)
    holder.start()
    try:
        assert locked.wait(30)
        assert claim(svc, worker)["subject_euid"] == made[locked_count]
    finally:
        done.set()
        holder.join()
    assert claim(svc, worker)["subject_euid"] == made[0]


@pytest.mark.django_db
def test_the_claim_walk_offers_by_the_copy_and_lineage_decides(tenant):
    """The claim's walk finds leased subjects through the lease's copied subject EUID
    (sql.ACTIVE_LEASE_FOUND) and lineage confirms each. A lease whose copy names another
    subject neither hides that other subject nor frees its own: the walk offers its own
    subject, the re-read of lineage after the lock refuses it, and the walk goes on."""
    svc = actor(*SERVICE)
    make_queue("q1")
    first, second, third = (make_subject("q1", name=f"s{n}", priority=100 - n) for n in range(3))
    worker = register(svc, max_concurrent_leases=5)
    lease = claim(svc, worker)
    assert lease["subject_euid"] == first
    with connection.cursor() as cur:  # another writer rewrites the copy, not the lineage
        cur.execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
                       '{properties,subject_lookup_euid}', to_jsonb(%s::text))
                       WHERE euid = %s""", [third, lease["lease_euid"]])
    assert claim(svc, worker)["subject_euid"] == second
    assert claim(svc, worker)["subject_euid"] == third
    with pytest.raises(ActionError) as refused:
        claim(svc, worker)
    assert refused.value.code == "NO_WORK"
    holders = fetch_value(
        """SELECT count(*) FROM generic_instance_lineage l JOIN generic_instance s
           ON s.uid = l.parent_instance_uid WHERE s.euid = %s AND NOT l.is_deleted
           AND l.relationship_type = 'execution_subject_lease'""", [first])
    assert holders == 1


@pytest.mark.django_db
def test_the_leased_set_probes_each_active_lease_never_every_lease_edge(tenant):
    """The set of leased subjects every whole-queue read starts from (sql.BLOCKED_SUBJECTS:
    the summaries, depths, a queue page's total) probes each active lease's subject edge; it
    never reads the subject-lease edges of the lab's history (one per claim ever made), even
    when the planner would rather hash or merge than loop."""
    svc = actor(*SERVICE)
    make_queue("q1")
    for n in range(8):
        make_subject("q1", name=f"s{n}")
    worker = register(svc, max_concurrent_leases=5)
    for _ in range(6):
        _release(svc, worker, claim(svc, worker))
    active = claim(svc, worker)
    statement = f"WITH {BLOCKED_SUBJECTS} SELECT uid FROM leased_subjects"
    params = {"now": ts(clock.now())}
    assert [r["uid"] for r in fetch_all(statement, params)] == [
        _uid(active["subject_euid"])]
    plan = plan_of(statement, params, off=("nestloop", "seqscan"), analyze=TABLES)
    leased = plan.split("CTE leased_subjects")[1].split("CTE held_subjects")[0]
    assert "Hash Join" not in leased and "Merge Join" not in leased, plan
    assert re.search(r"\(child_instance_uid = x(_[0-9]+)?\.uid\)", leased), plan


@pytest.mark.django_db
def test_a_worker_is_handed_only_subjects_within_its_own_scopes(tenant):
    """A person scoped to site sfo claimed an rtp sample: the scopes were only compared with
    the queue's (which took both sites). Their own scopes now hold each subject they take."""
    make_queue("q1", site_scope=["sfo", "rtp"])
    rtp = make_subject("q1", name="RTP tube", props={"site": "rtp"}, priority=10)  # head
    sfo = make_subject("q1", name="SFO tube", props={"site": "sfo"})
    other = make_subject("q1", name="Another RTP tube", props={"site": "rtp"})
    svc = actor(*SERVICE)
    sfo_only = register(svc, site_scope=["sfo"], max_concurrent_leases=5)
    assert claim(svc, sfo_only)["lease_euid"]
    leased = {r["subject_euid"] for r in selectors.leases()}
    assert leased == {sfo}  # past the head, which is rtp's
    with pytest.raises(ActionError) as err:
        claim(svc, sfo_only)  # nothing else is sfo's
    assert err.value.code == "NO_WORK"
    # an adapter naming the subject it has loaded is told why it may not take it
    adapter = register(svc, worker_type="INSTRUMENT_ADAPTER", site_scope=["sfo"])
    with pytest.raises(ActionError) as err:
        claim(svc, adapter, queue_key=None, subject_euid=rtp)
    assert err.value.code == "WORKER_NOT_ELIGIBLE"
    assert err.value.message == ("This item's site is rtp; the worker's site scope is sfo.")
    # a worker of any site takes the head as before
    anywhere = register(svc)
    claim(svc, anywhere)
    assert {r["subject_euid"] for r in selectors.leases()} == {sfo, rtp}
    assert other not in {r["subject_euid"] for r in selectors.leases()}


@pytest.mark.django_db
def test_a_scoped_worker_never_jumps_the_head_of_a_strict_order_queue(tenant):
    """On a strict-order queue an sfo-only adapter was refused the sfo item it named (the
    head is rtp's) yet handed that same item by claim next: strict order broken."""
    make_queue("strict", strict_order=True, site_scope=["sfo", "rtp"])
    head = make_subject("strict", name="RTP head", props={"site": "rtp"}, priority=100)
    make_subject("strict", name="SFO next", props={"site": "sfo"}, priority=10)
    svc = actor(*SERVICE)
    sfo_only = register(svc, site_scope=["sfo"])
    with pytest.raises(ActionError) as err:
        claim(svc, sfo_only, queue_key="strict")
    assert err.value.code == "NO_WORK"
    assert selectors.leases() == []
    anyone = register(svc)
    assert claim(svc, anyone, queue_key="strict")["lease_euid"]
    assert [r["subject_euid"] for r in selectors.leases()] == [head]


@pytest.mark.usefixtures("committed")
def test_a_head_a_scoped_worker_may_not_take_is_not_left_locked(tenant):
    """Claim next over every queue locked a strict queue's out-of-scope head, then took work
    elsewhere with the lock still held: every other claimer skipped the head meanwhile."""
    from django.db import connection

    make_queue("strict", strict_order=True, dispatch_priority=90)
    make_queue("other", dispatch_priority=10)
    head = make_subject("strict", name="RTP head", props={"site": "rtp"}, priority=100)
    make_subject("strict", name="SFO next", props={"site": "sfo"})
    make_subject("other", name="SFO elsewhere", props={"site": "sfo"})
    svc = actor(*SERVICE)
    sfo_only = register(svc, site_scope=["sfo"])
    free: list[int] = []

    def probe() -> None:  # another connection: may it lock the head now?
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM (SELECT 1 FROM generic_instance WHERE euid = %s"
                        " FOR NO KEY UPDATE SKIP LOCKED) x", [head])
            free.append(cur.fetchone()[0])
        connection.close()

    with transaction.atomic():
        claim(svc, sfo_only, queue_key=None)  # takes the other queue's item
        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
    assert free == [1]


def _store_scope(worker: str, value) -> None:
    """Another writer's site_scope on a worker row, as stored JSON."""
    import json

    from bloomops.tapdb.db import execute

    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,site_scope}', %(v)s::jsonb) WHERE euid = %(e)s",
            {"v": json.dumps(value), "e": worker})


@pytest.mark.django_db
@pytest.mark.parametrize(("stored", "gets"), [("sfo", "sfo"), ("rtp", "rtp"), (5, None),
                                              ([1], None), ({"sites": ["sfo"]}, None)])
def test_a_worker_scope_another_writer_stored_otherwise_fails_closed(tenant, stored, gets):
    """A worker whose site_scope was stored as the text "sfo" was handed every site's
    subjects: anything not a list read as "any". A text is one value (as a queue's is), and
    anything else admits nothing."""
    make_queue("q1")
    # "(unreadable)": what the workers page shows of such a scope, never a value it admits
    subjects = {site: make_subject("q1", name=site, props={"site": site})
                for site in ("sfo", "rtp", "(unreadable)")}
    svc = actor(*SERVICE)
    worker = register(svc, max_concurrent_leases=5)
    _store_scope(worker, stored)
    for _ in range(2):
        try:
            claim(svc, worker)
        except ActionError as err:
            assert err.code == "NO_WORK"
    leased = [r["subject_euid"] for r in selectors.leases()]
    assert leased == ([subjects[gets]] if gets else [])


@pytest.mark.django_db
def test_a_number_stored_as_a_site_is_read_as_stored_by_both_claims(tenant):
    """A site stored as the number 1.50 was "1.50" to claim next and "1.5" to a chosen
    claim: a worker scoped "1.50" was handed one such subject and refused another."""
    from bloomops.tapdb.db import execute

    make_queue("q1")
    odd = make_subject("q1", name="numbered")
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,site}', '1.50'::jsonb) WHERE euid = %(e)s", {"e": odd})
    svc = actor(*SERVICE)
    adapter = register(svc, worker_type="INSTRUMENT_ADAPTER", site_scope=["1.50"])
    assert claim(svc, adapter, queue_key=None, subject_euid=odd)["lease_euid"]


@pytest.mark.django_db
def test_claim_next_and_a_chosen_claim_read_an_odd_property_alike(tenant):
    """A subject whose site another writer stored as true was handed by claim next to a
    worker scoped "true" and refused to the same worker choosing it ("True" in Python)."""
    make_queue("q1")
    odd = make_subject("q1", name="odd", props={"site": True})
    svc = actor(*SERVICE)
    adapter = register(svc, worker_type="INSTRUMENT_ADAPTER", site_scope=["true"])
    assert claim(svc, adapter, queue_key=None, subject_euid=odd)["lease_euid"]
    act("release_queue_lease", svc, worker_euid=adapter, expected_state="READY",
        lease_euid=selectors.leases()[0]["euid"])
    assert claim(svc, adapter)["lease_euid"]
    assert [r["subject_euid"] for r in selectors.leases()
            if r["effective_status"] == "ACTIVE"] == [odd]


@pytest.mark.django_db
def test_a_chosen_subject_in_another_queue_says_where_it_is(tenant):
    """A claim of a subject by EUID naming the wrong queue was NOT_VISIBLE with an empty
    reasons list and "not available in that queue right now": nothing a caller could act on."""
    make_queue("q1")
    make_queue("q2")
    subject = make_subject("q2")
    human = actor("worker_human")
    worker = register(human, worker_type="HUMAN_SESSION")
    with pytest.raises(ActionError) as err:
        act("claim_queue_item", human, worker_euid=worker, subject_euid=subject,
            queue_key="q1")
    assert err.value.code == "NOT_VISIBLE"
    assert err.value.details["reasons"] == [
        {"code": "IN_ANOTHER_QUEUE", "message": "It is in queue q2, not q1."}]
    assert err.value.message == "Not claimable: It is in queue q2, not q1."
    # said first too when the subject, where it is, is not claimable either (held)
    act("place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="READY", payload={"reason": "QA look"})
    with pytest.raises(ActionError) as err:
        act("claim_queue_item", human, worker_euid=worker, subject_euid=subject,
            queue_key="q1")
    assert err.value.details["reasons"][0]["code"] == "IN_ANOTHER_QUEUE"
    assert "ACTIVE_HOLD" in [r["code"] for r in err.value.details["reasons"]]


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "values", "words"), [
    ("site_scope", ["SFO", "sfo"], "differ only in case"),
    ("capabilities", ["wetlab.QC", "wetlab.qc"], "differ only in case"),
    ("site_scope", ["any"], "Leave it empty for any site"),
    ("assay_scope", ["ALL"], "Leave it empty for any assay"),
])
def test_a_worker_s_lists_follow_the_rules_of_a_queue_s_and_a_person_s(tenant, field, values,
                                                                       words):
    """A worker registered with "SFO" and "sfo" (one matches no subject) or a scope of "any"
    (a site of that name: handed nothing) was stored; the queue and person forms refuse
    both (docs/RULES.md#human-workers)."""
    err = refused("VALIDATION_ERROR", lambda: register(actor(*SERVICE), **{field: values}))
    assert err.details["field"] == field and words in err.message


@pytest.mark.django_db
def test_a_worker_s_value_given_twice_is_kept_once(tenant):
    worker = register(actor(*SERVICE), capabilities=["wetlab.qc", "wetlab.qc"])
    row = next(w for w in selectors.workers() if w.euid == worker)
    assert row.props["capabilities"] == ["wetlab.qc"]
