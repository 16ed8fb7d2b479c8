"""The engine's core promises, one test each under its own name: idempotency, queue and state
consistency, lineage-only relationships, failures, and observability (docs/RULES.md). The
concurrency tests are in test_engine_concurrency.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import REL, load
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_all, fetch_value
from bloomops.tapdb.instances import children, parents
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    props,
    register,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def svc():
    return actor(*SERVICE)


@pytest.fixture
def op():
    return actor("operator")


def _uid(euid: str, tenant: str) -> int:
    obj = load(euid=euid, tenant=tenant)
    assert obj is not None
    return obj.uid


def _depth(queue_key: str = "q1") -> int:
    return selectors.queue_depths().get(queue_key, 0)


def _outbox_rows() -> int:
    return fetch_value("SELECT count(*) FROM outbox_event")


# Idempotency (RULES.md#idempotency) -----------------------------------------------


def test_retry_idempotency(tenant, svc):
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    request = dict(lease_euid=lease, worker_euid=worker, expected_state="READY",
                   idempotency_key="fail-once",
                   payload={"retryable": True, "error_class": "TRANSIENT_SYSTEM",
                            "error_message": "pump stalled"})
    outbox_before = _outbox_rows()
    first = act("fail_queue_execution", svc, **request)
    after_first = counts()
    second = act("fail_queue_execution", svc, **request)
    assert second.replayed and not first.replayed
    assert second.result == first.result
    assert envelope(subject)["attempt_count"] == 1
    assert counts() == after_first  # the replay wrote nothing at all
    record = props(first["execution_record_euid"])
    assert record["status"] == "FAILED_RETRYABLE"
    finished = fetch_value(
        "SELECT count(*) FROM audit_log WHERE rel_table_euid_fk = %s AND column_name ="
        " 'json_addl' AND new_value LIKE '%%FAILED_RETRYABLE%%'",
        [first["execution_record_euid"]],
    )
    assert finished == 1  # one terminal update of the execution record
    assert _outbox_rows() == outbox_before + 1  # one event emitted


def test_payload_hash_conflict(tenant, svc):
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    base = dict(lease_euid=lease, worker_euid=worker, expected_state="READY",
                idempotency_key="same-key")
    act("fail_queue_execution", svc, payload={"retryable": True, "error_message": "a"}, **base)
    before, env_before = counts(), envelope(subject)
    for _ in range(2):  # deterministic: the same refusal every time
        with pytest.raises(ActionError) as err:
            act("fail_queue_execution", svc, payload={"retryable": True, "error_message": "b"},
                **base)
        assert err.value.code == "IDEMPOTENCY_CONFLICT"
        assert err.value.http_status == 409
    assert counts() == before
    assert envelope(subject) == env_before


def test_a_target_added_to_a_retry_is_a_conflict_not_a_second_action(tenant):
    """The key's scope was the first target the request named: one key claimed three
    subjects (a subject named, another named, none), and a release retried with its subject
    named was LEASE_NOT_ACTIVE instead of its first answer."""
    tech = actor("worker_human", username="tech")
    make_queue("q1")
    first, second = make_subject("q1", name="a"), make_subject("q1", name="b")
    worker = register(tech, worker_type="HUMAN_SESSION")
    claimed = claim(tech, worker, subject_euid=first, expected_state="READY",
                    idempotency_key="K")
    before = counts()
    for fields in ({"subject_euid": second, "expected_state": "READY"}, {}):
        with pytest.raises(ActionError) as err:
            claim(tech, worker, idempotency_key="K", **fields)
        assert err.value.code == "IDEMPOTENCY_CONFLICT", fields
    assert counts() == before and envelope(second)["state"] == "READY"
    # the same request again is its first answer
    again = claim(tech, worker, subject_euid=first, expected_state="READY",
                  idempotency_key="K")
    assert again.replayed and again["lease_euid"] == claimed["lease_euid"]
    # another person's K is theirs
    other = actor("worker_human", username="other")
    theirs = claim(other, register(other, worker_type="HUMAN_SESSION"), idempotency_key="K")
    assert not theirs.replayed and theirs["subject_euid"] == second


def test_a_record_of_the_old_caller_target_scope_replays_for_its_caller_alone(tenant):
    """Records written before the scope was the caller's alone say "caller|target": their
    caller's retry still replays them, and nobody else's does. Matched with LIKE, "_" in a
    username matched any character: a_b replayed axb's records."""
    make_queue("q1")
    subject = make_subject("q1")
    op, other = actor("operator", username="axb"), actor("operator", username="a_b")
    fields = dict(subject_euid=subject, expected_state="READY", idempotency_key="old-1",
                  payload={"hold_code": "OPERATOR_HOLD", "reason": "check"})
    first = act("place_execution_hold", op, **fields)
    sql_execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                " '{idempotency_scope}', to_jsonb(%s::text)) WHERE euid = %s",
                [f"axb|{subject}", first.action_euid])
    again = act("place_execution_hold", op, **fields)
    assert again.replayed and again.action_euid == first.action_euid
    with pytest.raises(ActionError) as err:  # a_b's own request: the subject is held now
        act("place_execution_hold", other, **fields)
    assert err.value.code == "STATE_CONFLICT"


def test_a_payload_field_sent_as_null_is_the_field_left_out(tenant, svc):
    make_queue("q1")
    make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    base = dict(lease_euid=lease, worker_euid=worker, expected_state="READY",
                idempotency_key="rel-1")
    done = act("release_queue_lease", svc, payload={"reason": None}, **base)
    again = act("release_queue_lease", svc, **base)
    assert again.replayed and again.action_euid == done.action_euid


def test_completion_replay(tenant, svc):
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    request = dict(lease_euid=lease, worker_euid=worker, expected_state="READY",
                   idempotency_key="done-1", payload={"result_snapshot": {"yield_ng": 41}})
    first = act("complete_queue_execution", svc, **request)
    snapshot = counts()
    lease_props = props(lease)
    second = act("complete_queue_execution", svc, **request)
    assert second.replayed
    assert second.as_dict() | {"replayed": False} == first.as_dict()
    assert counts() == snapshot
    assert props(lease) == lease_props
    assert envelope(subject)["state"] == "COMPLETED"
    records = [r for r in selectors.subject_history(_uid(subject, tenant))["records"]]
    assert len(records) == 1


# Queue and state consistency (RULES.md#visibility, #holds, #retries) --------------


def test_queue_state_consistency(tenant, svc):
    make_queue("q1")
    make_queue("q2")
    a = make_subject("q1")
    b = make_subject("q1")
    # Corrupt the non-authoritative cache: claim a and b belong to q2 and stamp junk.
    for euid in (a, b):
        sql_execute(
            "UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,execution,queue_cache}', '{\"current_queue_key\": \"q2\","
            " \"computed_at\": \"1999-01-01\"}') WHERE euid = %s",
            [euid],
        )
    sql_execute(
        "UPDATE generic_instance SET json_addl = json_addl #- '{properties,execution,queue_cache}'"
        " WHERE euid = %s", [b],
    )
    items, total = selectors.queue_items("q1")
    assert total == 2 and {i.euid for i in items} == {a, b}
    assert selectors.queue_depths() == {"q1": 2, "q2": 0}
    # No queue-membership edge exists or is needed.
    assert fetch_value(
        "SELECT count(*) FROM generic_instance_lineage l JOIN generic_instance q"
        " ON q.uid = l.parent_instance_uid WHERE q.subtype = 'queue' AND q.tenant_id = %s",
        [tenant],
    ) == 0
    worker = register(svc)
    assert claim(svc, worker)["subject_euid"] in {a, b}


def test_held_item_removed_from_queue(tenant, op):
    make_queue("q1")
    subject = make_subject("q1")
    make_subject("q1")
    assert _depth() == 2
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"reason": "label smudged", "hold_code": "LABEL_ISSUE"})
    assert _depth() == 1
    assert envelope(subject)["state"] == "HELD"
    assert props(hold["hold_euid"])["status"] == "ACTIVE"
    act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
        payload={"reason": "relabelled"})
    act("requeue_subject", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "back to the bench"})
    assert _depth() == 2
    assert subject in {i.euid for i in selectors.queue_items("q1")[0]}
    assert props(hold["hold_euid"])["status"] == "RELEASED"


def test_cancel_removes_item_from_queue(tenant, op):
    make_queue("q1")
    subject = make_subject("q1")
    assert _depth() == 1
    act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "duplicate accession"})
    assert _depth() == 0
    env = envelope(subject)
    assert env["state"] == "CANCELED" and env["terminal"] and env["cancel_requested"]
    diag = selectors.subject_diagnostics(subject)
    assert diag is not None and not diag.visible
    assert "TERMINAL_STATE" in diag.reason_codes


def test_max_attempt_dead_letter(tenant, svc):
    make_queue("q1", max_attempts_default=3,
               retry_policy={"initial_delay_seconds": 10, "backoff_factor": 2.0,
                             "max_delay_seconds": 60})
    subject = make_subject("q1")
    worker = register(svc)
    state = "READY"
    for attempt in range(1, 4):
        lease = claim(svc, worker)
        assert lease["attempt_number"] == attempt
        result = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                     worker_euid=worker, expected_state=state,
                     payload={"retryable": True, "error_message": f"try {attempt}"})
        state = result["state"]
        clock.advance(120)
    env = envelope(subject)
    assert env["state"] == "FAILED_TERMINAL" and env["terminal"] is True
    history = selectors.subject_history(_uid(subject, tenant))
    assert len(history["dead_letters"]) == 1
    dead = history["dead_letters"][0]["props"]
    assert dead["resolution_state"] == "OPEN" and dead["failure_count"] == 3
    assert _depth() == 0
    clock.advance(10_000)
    assert _depth() == 0
    with pytest.raises(ActionError) as err:
        claim(svc, worker)
    assert err.value.code == "NO_WORK"


# Relationships are lineage only (RULES.md#objects, RULES.md#claims) ---------------


def test_relationships_are_lineage_only(tenant, svc):
    queue = make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    result = claim(svc, worker)
    lease, record = result["lease_euid"], result["execution_record_euid"]
    # Strip every lookup field from the lease and record: traversal must not care.
    for euid in (lease, record):
        sql_execute(
            "UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{properties}',"
            " (json_addl->'properties') - 'subject_lookup_euid' - 'worker_lookup_euid'"
            " - 'queue_lookup_key' - 'lease_lookup_euid') WHERE euid = %s",
            [euid],
        )
    lease_uid, record_uid = _uid(lease, tenant), _uid(record, tenant)
    assert [o.euid for o in parents(lease_uid, REL["subject_lease"])] == [subject]
    assert [o.euid for o in parents(lease_uid, REL["worker_lease"])] == [worker]
    assert [o.euid for o in parents(lease_uid, REL["queue_lease"])] == [queue["euid"]]
    assert [o.euid for o in parents(record_uid, REL["lease_record"])] == [lease]
    assert [o.euid for o in children(_uid(subject, tenant), REL["subject_record"])] == [record]
    # The engine keeps working: lease guard and history read lineage, not lookups.
    history = selectors.subject_history(_uid(subject, tenant))
    assert [r["euid"] for r in history["leases"]] == [lease]
    done = act("complete_queue_execution", svc, lease_euid=lease, worker_euid=worker,
               expected_state="READY")
    assert done["state"] == "COMPLETED"
    assert selectors.leases(status="COMPLETED")[0]["subject_euid"] == subject


def test_lineage_consistency_on_claim(tenant, svc):
    queue = make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    result = claim(svc, worker)
    lease_uid = _uid(result["lease_euid"], tenant)
    record_uid = _uid(result["execution_record_euid"], tenant)
    edges = {
        (r["parent"], r["child"], r["rel"])
        for r in fetch_all(
            "SELECT p.euid AS parent, c.euid AS child, l.relationship_type AS rel"
            " FROM generic_instance_lineage l JOIN generic_instance p ON p.uid ="
            " l.parent_instance_uid JOIN generic_instance c ON c.uid = l.child_instance_uid"
            " WHERE l.child_instance_uid IN (%s, %s) AND l.relationship_type <> 'executed_on'",
            [lease_uid, record_uid],
        )
    }
    lease, record = result["lease_euid"], result["execution_record_euid"]
    assert edges == {
        (subject, lease, "execution_subject_lease"),
        (worker, lease, "execution_worker_lease"),
        (queue["euid"], lease, "execution_queue_lease"),
        (subject, record, "execution_subject_record"),
        (worker, record, "execution_worker_record"),
        (queue["euid"], record, "execution_queue_record"),
        (lease, record, "execution_lease_record"),
    }
    # All of them in one transaction: the same xmin on every edge, lease and record.
    xmins = fetch_all(
        "SELECT DISTINCT xmin::text AS x FROM generic_instance_lineage WHERE child_instance_uid"
        " IN (%s, %s) UNION SELECT xmin::text FROM generic_instance WHERE uid IN (%s, %s)",
        [lease_uid, record_uid, lease_uid, record_uid],
    )
    assert len(xmins) == 1


def test_claim_that_fails_midway_leaves_no_partial_lineage(tenant, svc, monkeypatch):
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    before = counts()
    from bloomops.execution.actions import claim as claim_action

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(claim_action, "new_record", boom)
    with pytest.raises(RuntimeError):
        claim(svc, worker)
    assert counts() == before
    assert envelope(subject)["revision"] == 1


# Failures and guards (RULES.md#leases, RULES.md#requests) -------------------------


def test_invalid_transition_blocked(tenant, svc, op):
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    before, env_before = counts(), envelope(subject)
    with pytest.raises(ActionError) as err:
        act("complete_queue_execution", svc, lease_euid=lease, worker_euid=worker,
            expected_state="RUNNING")
    assert err.value.code == "STATE_CONFLICT"
    with pytest.raises(ActionError) as err:
        act("release_execution_hold", op, subject_euid=subject, expected_state="READY",
            payload={"reason": "x"})
    assert err.value.code == "STATE_CONFLICT"
    assert counts() == before and envelope(subject) == env_before
    assert props(lease)["status"] == "ACTIVE"


def test_renew_expired_lease_blocked(tenant, svc):
    make_queue("q1", lease_ttl_seconds=60)
    subject = make_subject("q1")
    worker = register(svc, heartbeat_ttl_seconds=600)
    lease = claim(svc, worker)["lease_euid"]
    first_expiry = parse_ts(props(lease)["expires_at"])
    clock.advance(30)
    renewed = act("renew_queue_lease", svc, lease_euid=lease, worker_euid=worker)
    # a renewal before expiry moves the expiry a whole lease TTL past now
    assert abs(parse_ts(renewed["expires_at"]) - (clock.now() + timedelta(seconds=60))) \
        < timedelta(seconds=2)
    assert parse_ts(props(lease)["expires_at"]) > first_expiry
    clock.advance(61)
    before = counts()
    with pytest.raises(ActionError) as err:
        act("renew_queue_lease", svc, lease_euid=lease, worker_euid=worker)
    assert err.value.code == "LEASE_EXPIRED"
    with pytest.raises(ActionError) as err:
        act("complete_queue_execution", svc, lease_euid=lease, worker_euid=worker,
            expected_state="READY")
    assert err.value.code == "LEASE_EXPIRED"
    assert counts() == before
    assert envelope(subject)["state"] == "READY"


def test_sweeper_idempotency(tenant, svc):
    make_queue("q1", lease_ttl_seconds=30)
    make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    admin = actor("admin")
    assert act("expire_queue_lease", admin)["expired_count"] == 0  # nothing expired yet
    clock.advance(31)
    first = act("expire_queue_lease", admin)
    assert first["expired_lease_euids"] == [lease]
    assert props(lease)["status"] == "EXPIRED"
    assert props(lease)["release_reason"] == "HEARTBEAT_TIMEOUT"
    snapshot = counts()
    second = act("expire_queue_lease", admin)
    assert second["expired_count"] == 0 and second.get("noop") is True
    assert counts() == snapshot
    third = act("expire_queue_lease", admin, lease_euid=lease, payload={"reason": "stuck"})
    assert third.get("noop") is True and counts() == snapshot


def test_no_hidden_direct_writes(tenant, svc, op):
    """Every mutation creates an action instance (with its executed_on edge) and the audit
    trail names the acting user; and no module outside the TapDB boundary writes TapDB rows."""
    make_queue("q1")
    subject = make_subject("q1")
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    act("complete_queue_execution", svc, lease_euid=lease, worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": "q1"})
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "check"})
    actions = selectors.action_history(_uid(subject, tenant))
    assert [a["action_key"] for a in actions] == [
        "claim_queue_item", "complete_queue_execution", "place_execution_hold"
    ]
    assert {a["executed_by"] for a in actions} == {svc.username, op.username}
    writers = fetch_all(
        "SELECT DISTINCT changed_by FROM audit_log WHERE rel_table_euid_fk = %s", [subject]
    )
    assert {w["changed_by"] for w in writers} >= {svc.username, op.username}
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parent.parent / "bloomops"
    pattern = re.compile(r"(INSERT\s+INTO|UPDATE)\s+generic_instance\b", re.I)
    writers_found = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if pattern.search(p.read_text())
    )
    allowed = {"tapdb/instances.py", "execution/objects.py", "bench/data.py", "bench/inserts.py",
               "tapdb/bootstrap.py"}
    assert set(writers_found) <= allowed, writers_found


# Observability (RULES.md#metrics, RULES.md#visibility) ----------------------------


def test_queue_metrics_correctness(tenant, svc, op):
    make_queue("q1", max_attempts_default=1)
    visible_old = make_subject("q1", name="old", ready_at="2026-01-01T00:00:00Z")
    make_subject("q1", name="new", priority=300)
    held = make_subject("q1", name="held")
    leased = make_subject("q1", name="leased", priority=500)
    dead = make_subject("q1", name="dead", priority=400)
    retry = make_subject("q1", name="retry", state="FAILED_RETRYABLE",
                         retry_at="2099-01-01T00:00:00Z")
    worker = register(svc, max_concurrent_leases=5)
    assert claim(svc, worker)["subject_euid"] == leased
    dl_lease = claim(svc, worker)
    assert dl_lease["subject_euid"] == dead
    act("fail_queue_execution", svc, lease_euid=dl_lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"error_class": "PERMANENT_INPUT",
                                         "error_message": "tube empty"})
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "qa"})
    now = clock.now()
    summary = next(s for s in selectors.queue_summaries(now=now) if s.queue_key == "q1")
    assert summary.depth == 2
    assert summary.held_count == 1
    assert summary.active_leases == 1
    assert summary.dead_letter_count == 1
    assert summary.retry_pending_count == 1
    assert summary.stat_count == 1

    expected_age = (now - parse_ts("2026-01-01T00:00:00Z")).total_seconds()
    assert summary.oldest_job_age_seconds == pytest.approx(expected_age, abs=1)
    assert summary.terminal_failures_total == 1
    assert summary.failures_window == 1 and summary.failure_rate == 1.0
    assert visible_old in {i.euid for i in selectors.queue_items("q1")[0]}
    assert retry not in {i.euid for i in selectors.queue_items("q1")[0]}


# Each exclusion reason, the case that makes it, and what its explanation must say (the
# inspector's words; {worker}: the claiming worker's EUID).
WHY_NOT_CASES = {
    "ACTIVE_HOLD": ("hold", "An active hold: smudge."),
    "ACTIVE_LEASE": ("lease", "Leased by worker {worker} until "),
    "RETRY_WINDOW_NOT_REACHED": ("retry", "Retry is not due until 2099-01-01T00:00:00"),
    "NEXT_QUEUE_KEY_MISSING": ("unrouted", "The subject is not routed to a queue."),
    "STATE_NOT_ELIGIBLE": ("pending",
                           "State PENDING is not eligible in q1 (READY, FAILED_RETRYABLE)."),
    "QUEUE_DISABLED": ("disabled", "Queue off is disabled: instrument down."),
    "WORKER_NOT_ELIGIBLE": ("capability", "Missing capabilities: wetlab.extraction."),
    "CANCEL_REQUESTED": ("cancel_requested", "Cancellation was requested."),
    "TERMINAL_STATE": ("terminal", "The subject is in terminal state COMPLETED."),
}


@pytest.mark.parametrize("code", list(WHY_NOT_CASES))
def test_why_not_visible_diagnostics(tenant, svc, op, code):
    make_queue("q1", required_worker_capabilities=["wetlab.extraction"])
    make_queue("off", enabled=False, disabled_reason="instrument down")
    case, explained = WHY_NOT_CASES[code]
    worker = register(svc, capabilities=["wetlab.extraction"], max_concurrent_leases=3)
    weak = register(svc, capabilities=[])
    if case == "hold":
        s = make_subject("q1")
        act("place_execution_hold", op, subject_euid=s, expected_state="READY",
            payload={"reason": "smudge"})
    elif case == "lease":
        s = make_subject("q1")
        claim(svc, worker)
    elif case == "retry":
        s = make_subject("q1", state="FAILED_RETRYABLE", retry_at="2099-01-01T00:00:00Z")
    elif case == "unrouted":
        s = make_subject(None)
    elif case == "pending":
        s = make_subject("q1", state="PENDING")
    elif case == "disabled":
        s = make_subject("off")
    elif case == "capability":
        s = make_subject("q1")
    elif case == "cancel_requested":
        s = make_subject("q1", cancel_requested=True)
    else:
        s = make_subject("q1", state="COMPLETED", terminal=True)
    diag = selectors.subject_diagnostics(s, worker_euid=weak if case == "capability" else None)
    assert diag is not None
    assert code in diag.reason_codes, diag.reasons
    if case != "capability" and case != "disabled":
        assert diag.visible is False
    if case == "capability":
        assert diag.visible is True  # visible in the queue, but not to this worker
    message = next(r.message for r in diag.reasons if r.code == code)
    assert message.startswith(explained.format(worker=worker)), message


def test_visible_subject_has_no_reasons(tenant):
    make_queue("q1")
    s = make_subject("q1")
    diag = selectors.subject_diagnostics(s)
    assert diag is not None and diag.visible and diag.reasons == []
    assert diag.derived_state == "VISIBLE_IN_QUEUE"


def test_unknown_template_is_not_a_subject_of_the_queue(tenant):
    make_queue("q1", subject_template_codes=["content/material/pool/1.0"])
    s = make_subject("q1", code=SPECIMEN)
    diag = selectors.subject_diagnostics(s)
    assert diag is not None and "TEMPLATE_NOT_ACCEPTED" in diag.reason_codes
    assert _depth() == 0
