"""The queue summaries as they are read now (per queue over the order index, the envelope
read once, failures counted in the window, totals from the counters) give, column by column,
what the earlier formulation gave (one pass over every routed subject), and totals equal to
the counters' definition over every finished record, on data with every state, holds,
retries, dead letters, leases active, past expiry and expired, broken envelopes, foreign
timestamps and other tenants' rows. The earlier statements live here only, as the
reference."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.db import connection

from bloomops.demo.data import EXTRACTED
from bloomops.execution import clock, selectors
from bloomops.execution.envelope import parse_ts, ts
from bloomops.execution.selectors.base import read_params
from bloomops.execution.selectors.queues import minus_minutes
from bloomops.execution.sql import (
    BLOCKED_SUBJECTS,
    CANCEL_REQUESTED,
    DISPATCH_PRIORITY,
    ENV,
    HAS_ENVELOPE,
    HELD_IN_SET,
    LEASED_BY_SETS,
    QP,
    QUEUES,
    READY_TS,
    RETRY_PENDING,
    TEMPLATES,
    TERMINAL_FLAG,
    held,
    lease_active,
    on_envelope,
    priority_band,
    visibility,
)
from bloomops.execution.states import ALL_STATES
from bloomops.tapdb.db import fetch_all, fetch_value
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    register,
)

pytestmark = pytest.mark.django_db
PROPS = "(s.json_addl->'properties')"

# The rules over the stored row with the lease and hold sets (what the depths and a page's
# total counted before they read plain values too), with the flags, the scopes and the
# priority written as they were before the reads were made cheaper, so that a change to the
# fragments the summaries share is compared too.
def _json_flag(name: str) -> str:
    return f"coalesce({ENV}->'{name}' = 'true'::jsonb, false)"


REF_TERMINAL = (f"({_json_flag('terminal')}"
                f" OR ({ENV}->>'state') IN ('CANCELED', 'COMPLETED', 'FAILED_TERMINAL'))")
REF_SCOPE = " AND ".join(
    f"(jsonb_array_length(q.{f}_scope) = 0 OR q.{f}_scope ? coalesce({PROPS}->>'{f}', ''))"
    for f in ("site", "platform", "assay"))
REF_PRIORITY = f"coalesce(({ENV}->>'priority')::numeric, 0)"
VISIBLE_BY_SETS = visibility(leased=LEASED_BY_SETS, held=HELD_IN_SET, terminal=REF_TERMINAL,
                             cancel_requested=_json_flag("cancel_requested"), scope=REF_SCOPE)
HELD_BY_SETS = held(HELD_IN_SET)

REFERENCE_SUBJECTS = f"""
    WITH {BLOCKED_SUBJECTS},
    routed AS MATERIALIZED (
        SELECT q.uid AS queue_uid, s.uid, {READY_TS} AS ready_ts, {REF_PRIORITY} AS prio,
               {VISIBLE_BY_SETS} AS vis, (NOT {REF_TERMINAL} AND {HELD_BY_SETS}) AS held,
               {RETRY_PENDING} AS retry_pending
        FROM ({QUEUES}) q
        JOIN generic_instance s ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = {QP}->>'queue_key'
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid),
    per_queue AS (
        SELECT queue_uid, count(*) FILTER (WHERE vis) AS depth,
               min(ready_ts) FILTER (WHERE vis) AS oldest,
               max(ready_ts) FILTER (WHERE vis) AS newest,
               count(*) FILTER (WHERE vis AND {priority_band("STAT", "prio")}) AS stat_count,
               count(*) FILTER (WHERE vis AND {priority_band("URGENT", "prio")})
                   AS urgent_count,
               count(*) FILTER (WHERE held) AS held_count,
               count(*) FILTER (WHERE retry_pending) AS retry_pending_count
        FROM routed GROUP BY queue_uid)
    SELECT q.queue_key, coalesce(a.depth, 0) AS depth, a.oldest, a.newest,
           coalesce(a.stat_count, 0) AS stat_count, coalesce(a.urgent_count, 0) AS urgent_count,
           coalesce(a.held_count, 0) AS held_count,
           coalesce(a.retry_pending_count, 0) AS retry_pending_count
    FROM ({QUEUES}) q LEFT JOIN per_queue a ON a.queue_uid = q.uid
    ORDER BY {DISPATCH_PRIORITY} DESC, {QP}->>'queue_key'"""

REFERENCE_LEASES = f"""
    SELECT x.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
           count(*) FILTER (WHERE {lease_active()}) AS active_leases
    FROM generic_instance x
    WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted
      AND x.type = 'execution' AND x.subtype = 'queue_lease'
      AND (x.json_addl->'properties'->>'status' IN ('ACTIVE', 'EXPIRED'))
    GROUP BY 1"""

# The counters' definition (RULES.md#statistics) over every finished record: with no
# recorder pass yet, the summaries' totals are exactly these.
REFERENCE_RECORDS = """
    SELECT r.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
           count(*) FILTER (WHERE st = 'SUCCEEDED' AND fin >= %(window_start)s)
               AS successes_window,
           count(*) FILTER (WHERE st IN ('FAILED_RETRYABLE', 'FAILED_TERMINAL')
                              AND fin >= %(window_start)s) AS failures_window,
           count(*) FILTER (WHERE st = 'EXPIRED' AND fin <= %(now)s) AS expired_leases_total,
           count(*) FILTER (WHERE st = 'FAILED_RETRYABLE' AND fin <= %(now)s)
               AS retryable_failures_total,
           count(*) FILTER (WHERE st = 'FAILED_TERMINAL' AND fin <= %(now)s)
               AS terminal_failures_total
    FROM generic_instance r
    CROSS JOIN LATERAL (SELECT r.json_addl->'properties'->>'status' AS st,
                               r.json_addl->'properties'->>'finished_at' AS fin) f
    WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
      AND r.type = 'execution' AND r.subtype = 'execution_record'
      AND r.json_addl->'properties'->>'finished_at' IS NOT NULL
    GROUP BY 1"""

REFERENCE_DEAD_LETTERS = """
    SELECT d.json_addl->'properties'->>'queue_lookup_key' AS queue_key,
           count(*) AS dead_letter_count
    FROM generic_instance d
    WHERE d.tenant_id = %(tenant)s AND NOT d.is_deleted
      AND d.type = 'execution' AND d.subtype = 'dead_letter'
      AND d.json_addl->'properties'->>'resolution_state' = 'OPEN'
    GROUP BY 1"""

COLUMNS = ("queue_key", "depth", "oldest_ready_at", "newest_ready_at", "stat_count",
           "urgent_count", "held_count", "retry_pending_count", "active_leases",
           "expired_leases_total", "dead_letter_count", "successes_window", "failures_window",
           "retryable_failures_total", "terminal_failures_total")


def reference(now) -> list[dict]:
    """The earlier formulation's answer, one dict per queue in dispatch order."""
    params = read_params(now, None, window_start=ts(minus_minutes(now)))
    out = []
    for row in fetch_all(REFERENCE_SUBJECTS, params):
        out.append({**dict.fromkeys(COLUMNS, 0), **row,
                    "oldest_ready_at": parse_ts(row["oldest"]),
                    "newest_ready_at": parse_ts(row["newest"])})
    by_key = {r["queue_key"]: r for r in out}
    for statement in (REFERENCE_LEASES, REFERENCE_RECORDS, REFERENCE_DEAD_LETTERS):
        for row in fetch_all(statement, params):
            if row["queue_key"] in by_key:
                by_key[row["queue_key"]].update(row)
    return [{c: r[c] for c in COLUMNS} for r in out]


def current(now) -> list[dict]:
    return [{c: getattr(s, c) for c in COLUMNS} for s in selectors.queue_summaries(now=now)]


def _raw(euid: str, path: list[str], value) -> None:
    """What another writer may leave (raw SQL, no checks)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, %s,"
                    " %s::jsonb) WHERE euid = %s", [path, json.dumps(value), euid])


def _finish(action: str, svc, worker: str, claimed: dict, payload: dict) -> None:
    act(action, svc, lease_euid=claimed["lease_euid"], worker_euid=worker,
        expected_state=envelope(claimed["subject_euid"])["state"], payload=payload)


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cur:
        cur.execute(statement, params)


@pytest.fixture
def lab(tenant):
    """Three queues and a subject of every kind the summaries count or must not count."""
    start = clock.now()
    clock.freeze(start)
    make_queue("q1", max_attempts_default=3, lease_ttl_seconds=60, dispatch_priority=10)
    make_queue("q2", site_scope=["sfo"], platform_scope=["illumina"],
               subject_template_codes=[EXTRACTED], eligible_states=["READY", "FAILED_RETRYABLE"])
    make_queue("q3", enabled=False)  # disabled: still summarised
    make_queue("empty")
    svc, op, admin = actor(*SERVICE), actor("operator"), actor("admin")
    worker = register(svc, max_concurrent_leases=50)

    # every state, and the priority bands
    for i, state in enumerate(ALL_STATES):
        make_subject("q1", name=f"state-{state}", state=state, priority=(0, 150, 300)[i % 3])
    make_subject("q1", name="stat", priority=300)
    make_subject("q1", name="urgent", priority=250)
    # each side of each class's bounds, and below the lowest class (the summaries read one
    # range of the order index per class)
    for n, priority in enumerate((200, 199.999, 299.5, 1e6, -5, -0.5)):
        make_subject("q1", name=f"bound-{n}", priority=priority)
    # a retry window open and one still waiting; foreign timestamp forms
    make_subject("q1", name="retry-due", state="FAILED_RETRYABLE",
                 retry_at=ts(start - timedelta(minutes=5)))
    make_subject("q1", name="retry-wait", state="FAILED_RETRYABLE",
                 retry_at=ts(start + timedelta(days=1)))
    foreign = make_subject("q1", name="foreign-ts")
    _raw(foreign, ["properties", "execution", "ready_at"], "2026-01-01T09:00:00+02:00")
    foreign_retry = make_subject("q1", name="foreign-retry", state="FAILED_RETRYABLE")
    _raw(foreign_retry, ["properties", "execution", "retry_at"], "2099-01-01T00:00:00")
    make_subject("q1", name="not-ready-yet", ready_at=ts(start + timedelta(hours=2)))
    # flags: cancel requested, terminal by flag, held by the envelope only
    flagged = make_subject("q1", name="cancel")
    _raw(flagged, ["properties", "execution", "cancel_requested"], True)
    terminal = make_subject("q1", name="terminal-flag")
    _raw(terminal, ["properties", "execution", "terminal"], True)
    env_held = make_subject("q1", name="env-held")
    _raw(env_held, ["properties", "execution", "hold_state"], "ACTIVE")
    # broken envelopes: not in any queue read
    for n, (field, value) in enumerate([("attempt_count", "x"), ("state", "BOGUS"),
                                        ("ready_at", "yesterday"), ("terminal", "x")]):
        bad = make_subject("q1", name=f"broken-{n}")
        _raw(bad, ["properties", "execution", field], value)
    # scopes and templates of q2
    make_subject("q2", name="in-scope", code=EXTRACTED)
    make_subject("q2", name="wrong-site", code=EXTRACTED, props={"site": "rtp"})
    make_subject("q2", name="wrong-platform", code=EXTRACTED, props={"platform": "ont"})
    make_subject("q2", name="wrong-template")
    make_subject("q2", name="no-site", code=EXTRACTED, props={"site": None})
    make_subject("q3", name="disabled-queue", priority=300)
    make_subject("nowhere", name="unknown-queue")

    # lineage: a hold, a lease, a lease past expiry, an expired lease, a dead letter,
    # successes and failures in and out of the window
    for n in range(6):
        make_subject("q1", name=f"work-{n}", priority=400 - n)
    held = make_subject("q1", name="lineage-held", priority=999)
    clock.advance(60)  # everything made above is ready
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "qa"})
    old_ok = claim(svc, worker)
    _finish("complete_queue_execution", svc, worker, old_ok, {})
    old_fail = claim(svc, worker)
    _finish("fail_queue_execution", svc, worker, old_fail,
            {"retryable": True, "error_class": "TRANSIENT_SYSTEM"})
    past = claim(svc, worker)  # its 60 s run out below: active, then past expiry
    clock.advance(3 * 3600)  # what came before is outside the window now
    ok = claim(svc, worker)
    _finish("complete_queue_execution", svc, worker, ok, {})
    dead = claim(svc, worker)
    _finish("fail_queue_execution", svc, worker, dead, {"error_class": "PERMANENT_INPUT",
                                                        "error_message": "label unreadable"})
    swept = claim(svc, worker)
    act("expire_queue_lease", admin, lease_euid=swept["lease_euid"],
        payload={"reason": "stuck"})
    claim(svc, worker)  # active
    assert past["lease_euid"]

    # another tenant's rows and a lease another writer left without a tenant
    other = str(uuid.uuid4())
    theirs = make_subject("q1", name="other-tenant", priority=300)
    _sql("UPDATE generic_instance SET tenant_id = %s WHERE euid = %s", [other, theirs])
    foreign_lease = claim(svc, worker)
    _sql("UPDATE generic_instance SET tenant_id = NULL WHERE euid = %s",
         [foreign_lease["lease_euid"]])
    return clock.now()


def test_every_column_equals_the_earlier_formulation(lab):
    now = lab
    got, want = current(now), reference(now)
    assert sorted(r["queue_key"] for r in got) == ["empty", "q1", "q2", "q3"]
    assert got == want  # in the same (dispatch) order
    rows = {r["queue_key"]: r for r in got}
    q1 = rows["q1"]
    # the data set is not trivial: every counter has something to count
    assert [c for c in COLUMNS if not q1[c]] == [], q1
    assert q1["stat_count"] < q1["depth"]
    assert rows["q2"]["depth"] == 1 and rows["q3"]["depth"] == 1


def test_equal_again_when_the_clock_moves(lab):
    """Leases run past expiry, retry windows open, the window moves off the failures."""
    for hours in (0.5, 2, 30, 24 * 400):
        now = lab + timedelta(hours=hours)
        assert current(now) == reference(now), hours


def test_the_failure_totals_count_outside_the_window(lab):
    (q1,) = [r for r in current(lab) if r["queue_key"] == "q1"]
    assert q1["retryable_failures_total"] == 1 and q1["terminal_failures_total"] == 1
    assert q1["failures_window"] == 1 and q1["successes_window"] == 1


SUBJECT_COLUMNS = COLUMNS[:COLUMNS.index("retry_pending_count") + 1]


def test_equal_at_the_instant_a_subject_was_made(lab):
    """The summaries decide "ready by now" for a subject without a stated instant from its
    created_dt as a timestamp, the reference from created_dt written out as text: equal at
    the microsecond a subject was made, just before it and just after it, when the oldest
    and newest come from created_dt and from stated instants."""
    with connection.cursor() as cur:
        cur.execute("SELECT created_dt FROM generic_instance WHERE name = 'state-READY'")
        (made,) = cur.fetchone()
    for delta in (timedelta(0), timedelta(microseconds=-1), timedelta(microseconds=1)):
        now = made + delta
        got, want = current(now), reference(now)
        assert len(got) == len(want) == 4
        # the subjects' columns (the records' window is not meant for an instant before the
        # records were written)
        assert [{c: r[c] for c in SUBJECT_COLUMNS} for r in got] == [
            {c: r[c] for c in SUBJECT_COLUMNS} for r in want], delta
    q1 = {r["queue_key"]: r for r in current(made)}["q1"]
    assert q1["depth"] > 0 and q1["oldest_ready_at"] <= made


@pytest.mark.parametrize("stored", [True, False, "true", "TRUE", None, 1, "x", {"a": 1}, "absent"])
def test_an_envelope_flag_is_json_true_and_nothing_else(stored):
    """The flags are compared as text with their JSON type asked (cheaper than comparing
    JSON): the string "true" is not the flag, and no stored value makes the read fail."""
    envelope = {} if stored == "absent" else {"terminal": stored, "cancel_requested": stored}
    for fragment in (TERMINAL_FLAG, CANCEL_REQUESTED):
        value = fetch_value(f"SELECT {on_envelope(fragment, '(%(env)s::jsonb)')}",
                            {"env": json.dumps(envelope)})
        assert value is (stored is True), (fragment, stored)
