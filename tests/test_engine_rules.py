"""Engine rules beyond test_engine_spec.py: priority classes and ordering, worker lifecycle, retry
classes and backoff, holds, the outbox and the audit trail."""

from __future__ import annotations

import random

import pytest

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from bloomops.execution.errors import ActionError
from bloomops.execution.policy import retry_delay_seconds
from bloomops.execution.states import PRIORITY_CLASSES, parse_priority, priority_class
from bloomops.tapdb.db import fetch_all, fetch_value
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    props,
    register,
)

pytestmark = pytest.mark.django_db


def test_priority_classes_map_to_ordered_numbers():
    assert parse_priority("STAT") > parse_priority("urgent") > parse_priority("ROUTINE")
    assert parse_priority(250) == 250 and parse_priority("17") == 17
    assert priority_class(PRIORITY_CLASSES["URGENT"] + 50) == "URGENT"
    with pytest.raises(ValueError):
        parse_priority("ASAP")


@pytest.mark.parametrize("text", ["\u0663", "1_0", "12.0", "0x10", "1e2"])
def test_a_priority_is_written_in_ascii_digits(text):
    """int() alone reads Arabic-Indic digits and "1_0" (as 10)."""
    with pytest.raises(ValueError, match="or an integer"):
        parse_priority(text)


@pytest.mark.parametrize("text", ["9" * 30, "-" + "9" * 30, "9223372036854775808",
                                  "99999999", "1000", "-1000", 3000])
def test_a_priority_too_large_is_told_its_range(text):
    """It was told to be "an integer", which it is. A slip of the keys (99999999, 3000 for
    300) was accepted, and put ahead of every STAT sample."""
    with pytest.raises(ValueError, match="priority must be within -999 to 999"):
        parse_priority(text)


def test_the_priorities_a_lab_uses_are_accepted():
    assert [parse_priority(v) for v in ("999", "-999", 350, "stat", "")] == [999, -999, 350,
                                                                             300, 0]


def test_queue_order_is_priority_due_ready_created_euid(tenant):
    make_queue("q1")
    routine_late = make_subject("q1", name="r-late", priority=0,
                                ready_at="2026-01-01T10:00:00Z")
    routine_early = make_subject("q1", name="r-early", priority=0,
                                 ready_at="2026-01-01T09:00:00Z")
    routine_due = make_subject("q1", name="r-due", priority=0, due_at="2026-01-03T00:00:00Z",
                               ready_at="2026-01-01T11:00:00Z")
    urgent = make_subject("q1", name="urgent", priority=parse_priority("URGENT"))
    stat = make_subject("q1", name="stat", priority=parse_priority("STAT"))
    tie_a = make_subject("q1", name="tie-a", priority=0, ready_at="2026-01-01T12:00:00Z")
    tie_b = make_subject("q1", name="tie-b", priority=0, ready_at="2026-01-01T12:00:00Z")
    items, total = selectors.queue_items("q1")
    assert total == 7
    order = [i.euid for i in items]
    assert order[:5] == [stat, urgent, routine_due, routine_early, routine_late]
    assert set(order[5:]) == {tie_a, tie_b}  # same priority/ready: created_dt then euid
    assert selectors.queue_head("q1").euid == stat
    svc = actor(*SERVICE)
    worker = register(svc, max_concurrent_leases=10)
    assert [claim(svc, worker)["subject_euid"] for _ in range(3)] == order[:3]


def test_pagination_and_filters(tenant):
    make_queue("q1")
    for i in range(7):
        make_subject("q1", name=f"s{i}", props={"site": "rtp" if i % 2 else "sfo"})
    page1, total = selectors.queue_items("q1", limit=3)
    page3, _ = selectors.queue_items("q1", limit=3, offset=6)
    assert total == 7 and len(page1) == 3 and len(page3) == 1 and page3[0].position == 7
    rtp, rtp_total = selectors.queue_items("q1", filters={"site": "rtp"})
    assert rtp_total == 3 and {i.site for i in rtp} == {"rtp"}


def test_register_worker_upserts_by_key(tenant):
    svc = actor(*SERVICE)
    first = act("register_worker", svc, payload={"worker_key": "worker://x", "host": "a"})
    second = act("register_worker", svc, payload={"worker_key": "worker://x", "host": "b",
                                                  "capabilities": ["compute.qc"]})
    assert first["worker_euid"] == second["worker_euid"]
    assert first["created"] and not second["created"]
    assert props(first["worker_euid"])["host"] == "b"
    assert fetch_value("SELECT count(*) FROM generic_instance WHERE tenant_id = %s AND"
                       " subtype = 'worker'", [tenant]) == 1
    other = actor("worker_service", username="someone-else")
    with pytest.raises(ActionError) as err:
        act("register_worker", other, payload={"worker_key": "worker://x"})
    assert err.value.code == "LEASE_NOT_OWNED"


def test_drain_disable_enable_and_offline(tenant):
    svc, admin = actor(*SERVICE), actor("admin")
    make_queue("q1")
    make_subject("q1")
    make_subject("q1")
    worker = register(svc, max_concurrent_leases=5, heartbeat_ttl_seconds=30)
    lease = claim(svc, worker)
    act("set_worker_status", admin, worker_euid=worker, payload={"operation": "drain",
                                                                 "reason": "end of run"})
    with pytest.raises(ActionError) as err:
        claim(svc, worker)
    assert err.value.code == "WORKER_UNAVAILABLE"
    # Draining workers still heartbeat and renew: draining stops only new claims
    assert act("heartbeat_worker", svc, worker_euid=worker)["status"] == "DRAINING"
    act("renew_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker)
    act("set_worker_status", admin, worker_euid=worker, payload={"operation": "disable",
                                                                 "reason": "bad firmware"})
    with pytest.raises(ActionError) as err:
        act("renew_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker)
    assert err.value.code == "WORKER_UNAVAILABLE"
    act("set_worker_status", admin, worker_euid=worker, payload={"operation": "enable"})
    assert claim(svc, worker)["subject_euid"]
    row = selectors.workers()[0]
    assert row.computed_status == "ONLINE" and row.active_leases == 2
    clock.advance(31)
    assert selectors.workers()[0].computed_status == "OFFLINE"
    act("heartbeat_worker", svc, worker_euid=worker)
    assert selectors.workers()[0].computed_status == "ONLINE"


def test_backoff_grows_exponentially_with_cap_and_bounded_jitter():
    policy = {"initial_delay_seconds": 60, "backoff_factor": 2.0, "max_delay_seconds": 300}
    assert [retry_delay_seconds(policy, n) for n in (1, 2, 3, 4)] == [60, 120, 240, 300]
    jittered = {**policy, "jitter_ratio": 0.2}
    rng = random.Random(1)
    delays = [retry_delay_seconds(jittered, 2, rng) for _ in range(50)]
    assert all(96 <= d <= 144 for d in delays) and len(set(delays)) > 40


def test_retryable_failure_sets_retry_at_from_policy(tenant):
    svc = actor(*SERVICE)
    make_queue("q1", retry_policy={"initial_delay_seconds": 60, "backoff_factor": 3.0,
                                   "max_delay_seconds": 3600})
    subject = make_subject("q1", ready_at="2026-01-01T00:00:00Z")
    worker = register(svc)
    clock.freeze(parse_ts("2026-03-01T00:00:00Z"))
    lease = claim(svc, worker)
    act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"error_class": "TRANSIENT_DEPENDENCY"})
    assert envelope(subject)["retry_at"] == "2026-03-01T00:01:00.000000Z"
    assert selectors.queue_depths()["q1"] == 0
    clock.advance(60)
    lease = claim(svc, worker)
    act("fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="FAILED_RETRYABLE", payload={"error_class": "TRANSIENT_CAPACITY"})
    assert envelope(subject)["retry_at"] == "2026-03-01T00:04:00.000000Z"  # 60 + 180 s
    assert envelope(subject)["attempt_count"] == 2


@pytest.mark.parametrize(("error_class", "state", "dead_letter"), [
    ("PERMANENT_INPUT", "FAILED_TERMINAL", True),
    ("PERMANENT_STATE", "FAILED_TERMINAL", True),
    ("BUSINESS_RULE_HOLD", "HELD", False),
    ("OPERATOR_CANCELED", "CANCELED", False),
])
def test_failure_classes(tenant, error_class, state, dead_letter):
    svc = actor(*SERVICE)
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)
    result = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                 worker_euid=worker, expected_state="READY",
                 payload={"error_class": error_class, "error_message": "why"})
    assert result["state"] == state
    assert ("dead_letter_euid" in result.result) is dead_letter
    if state == "HELD":
        assert props(result["hold_euid"])["hold_code"] == "BUSINESS_RULE_HOLD"
        released = act("release_execution_hold", actor("operator"), subject_euid=subject,
                       expected_state="HELD", payload={"reason": "rule reviewed"})
        assert released["state"] == "READY"


def test_release_hold_returns_a_retrying_subject_to_failed_retryable(tenant):
    op = actor("operator")
    make_queue("q1")
    subject = make_subject("q1", state="FAILED_RETRYABLE", retry_at="2026-01-01T00:00:00Z")
    act("place_execution_hold", op, subject_euid=subject, expected_state="FAILED_RETRYABLE",
        payload={"reason": "check reagent lot"})
    assert act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
               payload={"reason": "lot fine"})["state"] == "FAILED_RETRYABLE"


@pytest.mark.parametrize(("state", "queue_key", "after"), [
    ("PENDING", None, "PENDING"), ("RUNNING", "q1", "READY"),
    # the result refused while held is not sent again: claimable, as before
    ("WAITING_EXTERNAL", "q1", "READY")])
def test_release_hold_returns_the_subject_where_it_was(tenant, state, queue_key, after):
    """A PENDING subject held and released came back READY with no queue: in no queue's
    work, and refused by route_subject as already routed."""
    op = actor("operator")
    make_queue("q1")
    subject = make_subject(queue_key, state=state)
    act("place_execution_hold", op, subject_euid=subject, expected_state=state,
        payload={"reason": "check"})
    released = act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
                   payload={"reason": "fine"})
    assert released["state"] == after
    if after == "PENDING":
        routed = act("route_subject", op, subject_euid=subject, queue_key="q1")
        assert routed["state"] == "READY"


def test_hold_cancels_the_active_lease(tenant):
    svc, op = actor(*SERVICE), actor("operator")
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "contamination suspected"})
    assert props(lease["lease_euid"])["status"] == "CANCELED"
    assert props(lease["execution_record_euid"])["status"] == "CANCELED"
    with pytest.raises(ActionError) as err:
        act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
            worker_euid=worker, expected_state="HELD")
    assert err.value.code == "LEASE_NOT_ACTIVE"


def test_human_worker_claims_a_chosen_subject_on_a_manual_only_queue(tenant):
    human = actor("worker_human", username="bench-sci")
    make_queue("bench", manual_only=True)
    first = make_subject("bench", priority=300)
    chosen = make_subject("bench")
    worker = register(human, worker_type="HUMAN_SESSION")
    result = act("claim_queue_item", human, worker_euid=worker, subject_euid=chosen)
    assert result["subject_euid"] == chosen and result["queue_key"] == "bench"
    assert selectors.queue_head("bench").euid == first
    with pytest.raises(ActionError) as err:
        act("claim_queue_item", actor(*SERVICE), worker_euid=register(actor(*SERVICE)),
            subject_euid=first)
    assert err.value.code == "FORBIDDEN"


def test_claim_without_queue_follows_dispatch_priority(tenant):
    svc = actor(*SERVICE)
    make_queue("low", dispatch_priority=10)
    make_queue("high", dispatch_priority=90)
    make_queue("mid", dispatch_priority=50, required_worker_capabilities=["x"])
    make_subject("low")
    make_subject("mid")
    high = make_subject("high")
    worker = register(svc, max_concurrent_leases=3)
    assert act("claim_queue_item", svc, worker_euid=worker)["subject_euid"] == high
    assert act("claim_queue_item", svc, worker_euid=worker)["queue_key"] == "low"


def test_outbox_event_carries_correlation_ids_not_names(tenant):
    op = actor("operator")
    make_queue("q1")
    subject = make_subject("q1", name="Jane Doe tube 7")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "x"})
    rows = fetch_all(
        "SELECT o.destination, o.dedupe_key, m.json_addl::text AS body FROM outbox_event o"
        " JOIN generic_instance m ON m.uid = o.message_uid WHERE o.tenant_id = %s", [tenant])
    assert len(rows) == 1
    assert subject in rows[0]["body"] and "Jane Doe" not in rows[0]["body"]
    assert rows[0]["dedupe_key"].startswith(f"execution.place_execution_hold:{subject}:")


def test_audit_trail_names_the_acting_user(tenant):
    op = actor("operator", username="qa-lead")
    make_queue("q1")
    subject = make_subject("q1")
    act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "withdrawn"})
    rows = selectors.audit_trail(
        fetch_value("SELECT uid FROM generic_instance WHERE euid = %s", [subject]))
    assert any(r["changed_by"] == "qa-lead" and r["operation_type"] == "UPDATE" for r in rows)


def test_expected_revision_detects_a_stale_page(tenant):
    op = actor("operator")
    make_queue("q1")
    subject = make_subject("q1")
    seen = envelope(subject)["revision"]
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        expected_revision=seen, payload={"reason": "a"})
    act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
        payload={"reason": "b"})
    with pytest.raises(ActionError) as err:  # state is READY again, revision is not
        act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
            expected_revision=seen, payload={"reason": "stale"})
    assert err.value.code == "REVISION_CONFLICT"
    # said to a LIMS over the API as much as to a page: no "since you loaded the page"
    assert "changed after you last read it" in err.value.message
    assert "page" not in err.value.message


@pytest.mark.parametrize("prepared", [True, False])
def test_claim_path_with_and_without_prepared_statements(tenant, settings, prepared):
    settings.BLOOMOPS_PREPARED_STATEMENTS = prepared
    svc = actor(*SERVICE)
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    from bloomops.tapdb.db import execute as sql_execute

    sql_execute("DEALLOCATE ALL")
    from bloomops.tapdb import db

    db._prepared.clear()
    assert claim(svc, worker)["subject_euid"] == subject
    names = {r["name"] for r in fetch_all("SELECT name FROM pg_prepared_statements")}
    assert any(n.startswith("bloomops_claim_candidate_") for n in names) is prepared


@pytest.mark.django_db
def test_a_completion_goes_where_it_names_and_the_default_is_never_supplied(tenant):
    """RULES.md#queue-configuration: the default next queue is the flow's next step as the
    bench and the built-in workers offer it; a completion naming none finishes the work,
    as the request says, and one naming the next queue routes there."""
    svc = actor(*SERVICE)
    make_queue("q1", default_next_queue_key="q2")
    make_queue("q2")
    finished, routed = make_subject("q1"), make_subject("q1")
    worker = register(svc)
    for subject, named in ((finished, {}), (routed, {"next_queue_key": "q2"})):
        lease = claim(svc, worker, subject_euid=None)
        assert lease["subject_euid"] == subject
        act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
            worker_euid=worker, expected_state="READY", payload=named)
    assert (envelope(finished)["state"], envelope(finished)["next_queue_key"]) == (
        "COMPLETED", None)
    assert (envelope(routed)["state"], envelope(routed)["next_queue_key"]) == ("READY", "q2")
