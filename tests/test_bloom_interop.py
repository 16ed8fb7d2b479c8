"""bloomops and Bloom LIMS 5.0.1 on one TapDB database, tested against Bloom's own code
(docs/BLOOM.md). Bloom's ExecutionQueueService writes a lab; bloomops, with no tenant (rows
with tenant_id NULL, as Bloom writes them), must read what Bloom reads; bloomops then acts
through its executor and Bloom must read the result and work on. Every test runs on a
database Bloom created and on one bloomops created (the ``bloom_lab`` fixture)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import pytest

from bloomops.execution import clock, selectors
from bloomops.execution.verification import verify_chains
from bloomops.tapdb.tenancy import tenant_of
from tests.approval_support import decide, person
from tests.bloom.fixtures import Lab
from tests.engine import SERVICE, act, actor, claim, register

Q = "extraction_prod"  # one of Bloom's nine default queues (Bloom owns its definition)
BLOOD = "content/specimen/blood-whole/1.0"
CAPS = ["wetlab.extraction"]
LEASE_TTL = 900  # Bloom's default queue lease

# Bloom's "why not in queue" reasons and bloomops' codes for the same thing.
REASONS = {
    "terminal_state": "TERMINAL_STATE", "cancel_requested": "CANCEL_REQUESTED",
    "active_hold": "ACTIVE_HOLD", "active_lease": "ACTIVE_LEASE",
    "retry_window_not_reached": "RETRY_WINDOW_NOT_REACHED", "queue_disabled": "QUEUE_DISABLED",
    "state_not_eligible": "STATE_NOT_ELIGIBLE", "capability_mismatch": "SCOPE_MISMATCH",
    "next_queue_key_missing": "NEXT_QUEUE_KEY_MISSING",
}


def at(moment: datetime, hours: float = 0, *, utc_offset: float = 0, fraction: bool = False,
       z: bool = False) -> str:
    """An instant written the way some TapDB writer writes it."""
    local = (moment + timedelta(hours=hours)).astimezone(timezone(timedelta(hours=utc_offset)))
    text = local.isoformat(timespec="microseconds" if fraction else "seconds")
    return text.replace("+00:00", "Z") if z else text


@dataclass
class BloomLab:
    now: datetime
    s: dict[str, str] = field(default_factory=dict)  # subject name -> EUID
    w: dict[str, str] = field(default_factory=dict)  # Bloom worker name -> EUID
    leases: dict[str, str] = field(default_factory=dict)  # subject name -> lease EUID
    holds: dict[str, str] = field(default_factory=dict)  # subject name -> hold EUID


# Bloom's visible order of the lab below: priority, then due date (nulls last), then ready
# time, then creation. Due dates and ready times are written in mixed ISO 8601 forms.
BLOOM_ORDER = ["stat", "due-z", "due-bloom", "due-plus2", "due-minus5", "ready-past-east",
               "routine", "lease-expired", "released"]


def bloom_writes_lab(lab: Lab) -> BloomLab:
    """Bloom's service writes a lab into one of its own queues: varied priorities and due
    dates, an expired lease and a renewed active one, a completion, a retryable and a
    terminal failure (with its dead letter), a hold, a released hold, a cancellation."""
    b = lab.bloom
    # Bloom's clock starts ahead of the database's: subjects are ready from their creation
    # (created_dt is the server's time), however slowly they are created.
    t0 = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=10)
    b.one("set_clock", now=t0.isoformat())
    out = BloomLab(now=t0)
    for name in ("extractor-1", "extractor-2"):
        out.w[name] = b.one("register_worker", worker_key=f"bloom://{name}", display_name=name,
                            capabilities=CAPS, max_concurrent_leases=10)["worker_euid"]
    out.w["qa"] = b.one("register_worker", worker_key="bloom://qa", display_name="QA bench",
                        worker_type="HUMAN_SESSION")["worker_euid"]
    routing = {  # name -> (priority, due_at, ready_at)
        "routine": (0, None, None), "stat": (100, None, None),
        "due-plus2": (10, at(t0, 3, utc_offset=2), None),
        "due-z": (10, at(t0, 2, fraction=True, z=True), None),
        "due-minus5": (10, at(t0, 4, utc_offset=-5), None),
        "due-bloom": (10, at(t0, 2.5), None),
        "ready-past-east": (5, None, at(t0, -1, utc_offset=5)),
        "ready-future-west": (5, None, at(t0, 24, utc_offset=-8)),
        **{name: (0, None, None) for name in ("lease-expired", "leased", "completed",
                                              "retrying", "dead", "held", "released",
                                              "canceled")},
    }
    for name, (priority, due, ready) in routing.items():
        out.s[name] = b.one("create_subject", template_code=BLOOD, name=name)["euid"]
        b.one("requeue_subject", subject_euid=out.s[name], queue_key=Q, priority=priority,
              due_at=due, ready_at=ready, next_action_key="extract")
    w1, w2 = out.w["extractor-1"], out.w["extractor-2"]

    def claim_(worker: str, name: str) -> None:
        out.leases[name] = b.one("claim_queue_item", worker_euid=worker, queue_key=Q,
                                 subject_euid=out.s[name])["lease_euid"]

    claim_(w2, "lease-expired")
    claim_(w1, "leased")
    b.one("set_clock", now=(t0 + timedelta(seconds=LEASE_TTL - 100)).isoformat())
    b.one("renew_queue_lease", lease_euid=out.leases["leased"], worker_euid=w1)
    out.now = t0 + timedelta(seconds=LEASE_TTL + 100)  # the first lease has expired
    b.one("set_clock", now=out.now.isoformat())
    for name in ("completed", "retrying", "dead"):
        claim_(w1, name)
    finish = {"subject_euid": None, "worker_euid": w1, "action_key": "extract",
              "expected_state": "READY"}
    b.one("complete_queue_execution", **{**finish, "subject_euid": out.s["completed"],
          "lease_euid": out.leases["completed"], "terminal": True})
    b.one("fail_queue_execution", **{**finish, "subject_euid": out.s["retrying"],
          "lease_euid": out.leases["retrying"], "retryable": True,
          "error_class": "CentrifugeBusy", "error_message": "centrifuge busy"})
    b.one("fail_queue_execution", **{**finish, "subject_euid": out.s["dead"],
          "lease_euid": out.leases["dead"], "retryable": False,
          "error_class": "SampleQuality", "error_message": "haemolysed"})
    for name in ("held", "released"):
        out.holds[name] = b.one("place_execution_hold", subject_euid=out.s[name],
                                placed_by_worker_euid=out.w["qa"], queue_key=Q,
                                hold_code="QA_REVIEW", reason=f"check {name}")["hold_euid"]
    b.one("release_execution_hold", hold_euid=out.holds["released"],
          released_by_worker_euid=out.w["qa"])
    b.one("cancel_subject_execution", subject_euid=out.s["canceled"], reason="duplicate tube")
    return out


def names_of(lab: BloomLab, euids: list[str]) -> list[str]:
    by_euid = {v: k for k, v in lab.s.items()}
    return [by_euid.get(e, e) for e in euids]


def bloom_reads(lab: Lab, data: BloomLab) -> dict:
    b = lab.bloom
    queue, items, leases, dead = b([{"op": "get_queue", "queue_key": Q},
                                    {"op": "list_queue_items", "queue_key": Q},
                                    {"op": "list_leases"}, {"op": "list_dead_letters"}])
    details = b([{"op": "get_subject_detail", "subject_euid": e} for e in data.s.values()])
    return {"queue": queue, "order": [i["subject_euid"] for i in items], "leases": leases,
            "dead_letters": dead, "workers": b.one("list_workers"),
            "detail": {d["subject_euid"]: d for d in details}}


def active_at(lease: dict, now: datetime) -> bool:
    expires = datetime.fromisoformat(lease["expires_at"].replace("Z", "+00:00"))
    return lease["status"] == "ACTIVE" and expires > now


def assert_bloomops_reads_as_bloom(lab: Lab, data: BloomLab, *, failure_rate: bool = True) -> None:
    """bloomops' reads of the lab at Bloom's "now" against Bloom's own reads of it. The
    failure rates agree while every attempt finished within bloomops' window (the last hour,
    RULES.md#metrics); Bloom's counts all time."""
    seen = bloom_reads(lab, data)
    now = data.now
    with lab.bloomops():
        items, total = selectors.queue_items(Q, now=now, limit=500)
        summary = {s.queue_key: s for s in selectors.queue_summaries(now=now)}[Q]
        depths = selectors.queue_depths(now=now)
        diags = {e: selectors.subject_diagnostics(e, now=now) for e in data.s.values()}
        active = {r["euid"] for r in selectors.leases(status="ACTIVE", now=now)}
        holds = {r["euid"]: r for r in selectors.active_holds()}
        dead = {r["euid"]: r for r in selectors.dead_letters(resolution=None)}
        workers = {w.euid: w for w in selectors.workers(now=now)}
    q = seen["queue"]
    # Depth and order.
    assert [i.euid for i in items] == seen["order"], names_of(data, [i.euid for i in items])
    assert total == depths[Q] == summary.depth == q["queue_depth"]
    assert summary.oldest_job_age_seconds == pytest.approx(q["oldest_job_age_seconds"])
    assert summary.newest_job_age_seconds == pytest.approx(q["newest_job_age_seconds"])
    # Leases: active means ACTIVE and unexpired, for both.
    assert active == {x["lease_euid"] for x in seen["leases"] if active_at(x, now)}
    assert summary.active_leases == q["active_leases"]
    # Holds: Bloom's held_count counts released holds too; its active ones are bloomops'.
    bloom_holds = {h["hold_euid"]: h for d in seen["detail"].values() for h in d["active_holds"]}
    assert set(holds) == set(bloom_holds)
    for euid, hold in holds.items():
        assert (hold["props"]["hold_code"], hold["props"]["reason"], hold["subject_euid"]) == (
            bloom_holds[euid]["hold_code"], bloom_holds[euid]["reason"],
            bloom_holds[euid]["subject_lookup_euid"])
    assert summary.held_count == len(bloom_holds)
    # Dead letters, resolved ones too; Bloom's dead_letter_count counts those as well, so the
    # open ones of its list are what bloomops counts.
    assert set(dead) == {d["dead_letter_euid"] for d in seen["dead_letters"]}
    for d in seen["dead_letters"]:
        mine = dead[d["dead_letter_euid"]]
        assert mine["subject_euid"] == d["subject_lookup_euid"]
        assert {k: mine["props"].get(k) for k in ("queue_lookup_key", "error_class",
                "error_message", "failure_count", "resolution_state")} == {
            k: d[k] for k in ("queue_lookup_key", "error_class", "error_message",
                              "failure_count", "resolution_state")}
    assert summary.dead_letter_count == sum(d["queue_lookup_key"] == Q and d["resolution_state"]
                                            == "OPEN" for d in seen["dead_letters"])
    if failure_rate:
        assert summary.failure_rate == pytest.approx(q["failure_rate"])
    # Workers Bloom registered (they have no owner) are shown, with Bloom's lease counts.
    for w in seen["workers"]:
        assert workers[w["worker_euid"]].worker_key == w["worker_key"]
        assert workers[w["worker_euid"]].active_leases == w["active_lease_count"]
        assert workers[w["worker_euid"]].computed_status == w["status"]
    # Each subject: visibility, reasons in the vocabulary both have, its active lease.
    mine, theirs = {}, {}
    for name, euid in data.s.items():
        diag, detail = diags[euid], seen["detail"][euid]
        assert diag is not None, name
        mine[name] = (diag.visible, sorted(c for c in diag.reason_codes if c in REASONS.values()),
                      diag.active_lease["euid"] if diag.active_lease else None)
        theirs[name] = (euid in seen["order"],
                        sorted(REASONS[r] for r in detail["diagnostics"]["reasons"]),
                        (detail["active_lease"] or {}).get("lease_euid"))
    assert mine == theirs


def test_bloomops_reads_a_lab_bloom_wrote_as_bloom_reads_it(bloom_lab):
    data = bloom_writes_lab(bloom_lab)
    seen = bloom_reads(bloom_lab, data)
    # Bloom's own reads are what the lab says (the Bloom side works as expected) ...
    assert names_of(data, seen["order"]) == BLOOM_ORDER
    assert seen["queue"]["queue_depth"] == len(BLOOM_ORDER)
    assert [d["subject_lookup_euid"] for d in seen["dead_letters"]] == [data.s["dead"]]
    # ... and bloomops reads the same.
    assert_bloomops_reads_as_bloom(bloom_lab, data)


def queue_rows(lab: Lab) -> list[tuple]:
    return lab.query("SELECT euid, json_addl::text, modified_dt FROM generic_instance"
                     " WHERE type = 'execution' AND subtype = 'queue' ORDER BY euid")


# Bloom's visible order after bloomops' actions below: the three heads claimed and finished,
# a hold placed, Bloom's hold released, Bloom's active lease force-expired, Bloom's dead letter
# requeued (ready now: last), a subject canceled.
ORDER_AFTER_BLOOMOPS = ["due-minus5", "ready-past-east", "lease-expired", "leased", "held",
                        "released", "dead"]


def test_bloom_reads_and_works_on_what_bloomops_did(bloom_lab):
    data = bloom_writes_lab(bloom_lab)
    b, s = bloom_lab.bloom, data.s
    with bloom_lab.bloomops():
        queues_before = queue_rows(bloom_lab)
        clock.freeze(data.now)
        svc, qa, admin = actor(*SERVICE), actor("operator"), actor("admin")
        worker = register(svc, worker_key="bloomops://extractor", capabilities=CAPS,
                          max_concurrent_leases=5)
        done, dead, retry = (claim(svc, worker, Q) for _ in range(3))
        assert names_of(data, [x["subject_euid"] for x in (done, dead, retry)]) == BLOOM_ORDER[:3]
        finish = {"worker_euid": worker, "expected_state": "READY"}
        act("complete_queue_execution", svc, lease_euid=done["lease_euid"], **finish)
        act("fail_queue_execution", svc, lease_euid=dead["lease_euid"], **finish,
            payload={"retryable": False, "error_message": "tube cracked"})
        act("fail_queue_execution", svc, lease_euid=retry["lease_euid"], **finish,
            payload={"retryable": True, "error_message": "scanner offline"})
        hold = act("place_execution_hold", qa, subject_euid=s["due-plus2"], queue_key=Q,
                   expected_state="READY",
                   payload={"hold_code": "QA_REVIEW", "reason": "recheck volume"})["hold_euid"]
        act("release_execution_hold", qa, subject_euid=s["held"], hold_euid=data.holds["held"],
            expected_state="HELD", payload={"reason": "label fixed"})
        act("expire_queue_lease", admin, lease_euid=data.leases["leased"],
            payload={"reason": "bench closed"})
        # A dead letter is requeued with a second person's signed approval.
        approval = act("request_approval", qa, subject_euid=s["dead"], payload={
            "action_key": "requeue_subject", "reason": "new aliquot arrived",
            "parameters": {"reason": "new aliquot"}})["approval_euid"]
        decide(person("qa-second", "operator"), approval)
        act("cancel_subject_execution", qa, subject_euid=s["routine"], expected_state="READY",
            payload={"reason": "order withdrawn"})
        bloomops_history = [a["action_key"] for a in selectors.action_history(
            selectors.subject_diagnostics(s["stat"]).uid)]
        # bloomops never rewrites the queue definitions Bloom owns.
        assert queue_rows(bloom_lab) == queues_before

    # Bloom reads every change bloomops made ...
    details = {d["subject_name"]: d for d in b([
        {"op": "get_subject_detail", "subject_euid": s[n]}
        for n in ("stat", "due-z", "due-bloom", "due-plus2", "held", "leased", "dead",
                  "routine")])}
    assert details["stat"]["execution"]["state"] == "COMPLETED"
    assert details["due-z"]["execution"]["state"] == "FAILED_TERMINAL"
    assert details["due-z"]["dead_letter"]["error_message"] == "tube cracked"
    assert details["due-bloom"]["execution"]["state"] == "FAILED_RETRYABLE"
    assert "retry_window_not_reached" in details["due-bloom"]["diagnostics"]["reasons"]
    assert [(h["hold_euid"], h["reason"]) for h in details["due-plus2"]["active_holds"]] == [
        (hold, "recheck volume")]
    assert (details["held"]["execution"]["state"], details["held"]["active_holds"]) == ("READY", [])
    assert details["leased"]["active_lease"] is None
    assert details["dead"]["execution"]["state"] == "READY"
    assert details["dead"]["dead_letter"]["resolution_state"] == "REQUEUED"
    assert details["routine"]["execution"]["state"] == "CANCELED"
    assert "cancel_requested" in details["routine"]["diagnostics"]["reasons"]
    leases = {x["lease_euid"]: x["status"] for x in b.one("list_leases")}
    assert leases[data.leases["leased"]] == "EXPIRED"
    assert [leases[x["lease_euid"]] for x in (done, dead, retry)] == [
        "COMPLETED", "RELEASED", "RELEASED"]
    history = b.one("get_subject_history", subject_euid=s["stat"])
    assert [r["status"] for r in history["records"]] == ["SUCCEEDED"]
    # ... action records of both, read as history by either.
    bloom_history = [a["action_key"] for a in b.one("actions_on", euid=s["stat"])]
    assert bloom_history == bloomops_history == [
        "requeue_subject", "claim_queue_item", "complete_queue_execution"]
    # ... and reads the queue as bloomops does.
    order = [i["subject_euid"] for i in b.one("list_queue_items", queue_key=Q)]
    assert names_of(data, order) == ORDER_AFTER_BLOOMOPS
    assert_bloomops_reads_as_bloom(bloom_lab, data)

    # Bloom works on: claims its next head and the subject whose hold bloomops released, and,
    # once the retry window is over, the attempt bloomops failed retryably.
    w1 = data.w["extractor-1"]
    head = b.one("claim_queue_item", worker_euid=w1, queue_key=Q)
    assert names_of(data, [head["subject_euid"]]) == ORDER_AFTER_BLOOMOPS[:1]
    released = b.one("claim_queue_item", worker_euid=w1, queue_key=Q, subject_euid=s["held"])

    def complete(lease: dict, state: str = "READY") -> None:
        b.one("complete_queue_execution", subject_euid=lease["subject_euid"], worker_euid=w1,
              lease_euid=lease["lease_euid"], action_key="extract", expected_state=state)

    complete(head)
    complete(released)
    data.now += timedelta(hours=2)
    b.one("set_clock", now=data.now.isoformat())
    complete(b.one("claim_queue_item", worker_euid=w1, queue_key=Q, subject_euid=s["due-bloom"],
                   expected_state="FAILED_RETRYABLE"), "FAILED_RETRYABLE")
    assert b.one("get_subject_detail", subject_euid=s["due-bloom"])["execution"]["state"] == (
        "COMPLETED")
    assert_bloomops_reads_as_bloom(bloom_lab, data, failure_rate=False)
    # Bloom's records keep no revision: a subject Bloom changed after bloomops' newest record
    # is not taken for one whose record was removed
    with bloom_lab.bloomops():
        assert [str(x) for x in verify_chains(tenant_of()).breaks] == []


def snapshot(lab: Lab) -> dict[str, list[tuple]]:
    """Every row of TapDB's object tables and its identity-prefix table, by key, as a digest
    of the whole row."""
    keys = {"generic_template": "uid::text", "generic_instance": "uid::text",
            "generic_instance_lineage": "uid::text",
            "tapdb_identity_prefix_config": "issuer_app_code || '/' || entity"}
    return {table: lab.query(f"SELECT {key}, md5(t::text) FROM {table} t ORDER BY 1")
            for table, key in keys.items()}


@pytest.mark.parametrize("bloom_lab", ["bloom"], indirect=True)
def test_attaching_bloomops_to_a_bloom_lab_changes_no_row_of_it(bloom_lab):
    data = bloom_writes_lab(bloom_lab)
    before = snapshot(bloom_lab)
    with bloom_lab.bloomops():  # manage.py attach, the first time bloomops uses the lab
        pass
    after = snapshot(bloom_lab)
    for table, rows in before.items():
        kept = {uid for uid, _ in rows}
        assert [r for r in after[table] if r[0] in kept] == rows, table
    # It added no object, and identity prefixes only for its own owner repo.
    assert after["generic_instance"] == before["generic_instance"]
    assert after["generic_instance_lineage"] == before["generic_instance_lineage"]
    added = {key for key, _ in after["tapdb_identity_prefix_config"]} - {
        key for key, _ in before["tapdb_identity_prefix_config"]}
    assert added and {key.split("/")[0] for key in added} == {"bloomops"}
    # Templates: one row per semantic code (bloomops seeds only the codes Bloom lacks).
    assert bloom_lab.query(
        "SELECT coalesce(json_addl->>'semantic_category', category) || '/' || type || '/'"
        " || subtype || '/' || version AS code FROM generic_template WHERE NOT is_deleted"
        " GROUP BY 1 HAVING count(*) > 1") == []
    # Bloom reads its lab as before and works on.
    b, w1 = bloom_lab.bloom, data.w["extractor-1"]
    assert names_of(data, [i["subject_euid"] for i in b.one("list_queue_items", queue_key=Q)]
                    ) == BLOOM_ORDER
    lease = b.one("claim_queue_item", worker_euid=w1, queue_key=Q)
    b.one("complete_queue_execution", subject_euid=lease["subject_euid"], worker_euid=w1,
          lease_euid=lease["lease_euid"], action_key="extract", expected_state="READY")
    assert names_of(data, [lease["subject_euid"]]) == BLOOM_ORDER[:1]
