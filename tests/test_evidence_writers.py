"""Another writer's records against an insider's (docs/RULES.md#evidence, #approvals): Bloom's
own, unsealed, are later history, never tampering; a row made to pass for one, or a snapshot
rewritten beside it, is not taken for Bloom's work."""

from __future__ import annotations

import pytest

from bloomops.execution.binding import binding_problems
from bloomops.execution.evidence import verify_bundle
from bloomops.execution.exports import export_evidence
from bloomops.execution.verification import verify_chains
from bloomops.tapdb.db import execute, fetch_all
from tests.approval_support import dead_lettered, integrity_held, person
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    refused,
    register,
    uid,
)
from tests.test_evidence_chain import act_by_another_writer
from tests.test_evidence_insider import _props

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(tenant):
    make_queue("q1", required_worker_capabilities=[])
    return tenant


def test_a_forged_earlier_record_does_not_make_an_integrity_hold_ordinary(lab):
    """A copy of the placement, unsealed, saying OPERATOR_HOLD, inserted before the real one,
    and the hold's code rewritten to match: one operator released the QC_FAIL hold alone."""
    from tests.test_evidence_insider import _record

    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    real = _record("place_execution_hold")
    body = {k: v for k, v in real["json_addl"].items() if k not in ("chain",
                                                                   "idempotency_scope")}
    body["captured_data"] = {**body["captured_data"], "hold_code": "OPERATOR_HOLD"}
    from bloomops.execution.context import ACTION_CODE
    from bloomops.tapdb.instances import create_instance, link_many

    made = create_instance(ACTION_CODE.format(key="place_execution_hold"), name="forged",
                           properties={}, tenant_id=lab, extra=body)
    execute("SET LOCAL session_replication_role = replica")  # before the real one, by uid
    execute("UPDATE generic_instance SET uid = (SELECT min(uid) - 1000 FROM generic_instance)"
            " WHERE uid = %s", [made.uid])
    execute("SET LOCAL session_replication_role = DEFAULT")
    link_many([(uid(made.euid), uid(subject), "executed_on")], tenant_id=lab)
    _props(hold, hold_code="OPERATOR_HOLD")
    refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "released alone"}))
    assert envelope(subject)["state"] == "HELD"


def test_a_dead_letter_marked_requeued_in_the_database_still_needs_a_second_person(lab):
    """Its resolution set to REQUEUED by SQL lifted the requeue's two-person rule."""
    dead = dead_lettered("q1")
    [letter] = fetch_all("""SELECT x.euid FROM generic_instance x WHERE x.type = 'execution'
        AND x.subtype = 'dead_letter' AND x.json_addl->'properties'->>'subject_lookup_euid'
        = %s""", [dead])
    _props(letter["euid"], resolution_state="REQUEUED")
    refused("APPROVAL_REQUIRED", lambda: act(
        "requeue_subject", person("ann", "operator"), subject_euid=dead,
        expected_state="FAILED_TERMINAL", payload={"reason": "alone"}))


def test_an_empty_row_beside_a_subject_excuses_no_change_of_its_envelope(lab):
    """COMPLETED written over a held subject, then an empty action row linked to it: read as
    Bloom's later work, the change verified."""
    from bloomops.execution.context import ACTION_CODE
    from bloomops.tapdb.instances import create_instance, link_many

    subject, _ = integrity_held(person("ann", "operator"))
    _props(subject, execution={**envelope(subject), "state": "COMPLETED", "terminal": True})
    made = create_instance(ACTION_CODE.format(key="place_execution_hold"), name="x",
                           properties={}, tenant_id=lab, extra={})
    link_many([(made.uid, uid(subject), "executed_on")], tenant_id=lab)
    assert [b.problem for b in verify_chains(lab).breaks] == [
        "is the newest record that sealed the subject's envelope, which has changed since"
        " with no record: changed outside bloomops"]
    act_by_another_writer(subject)  # a record of an action, by whom, on what, when
    assert verify_chains(lab).breaks == []


def test_a_registered_subject_is_sealed_before_its_first_claim(lab):
    """A subject made by register_subject (an intake row) had an envelope no action sealed:
    cancelled in the database before anyone claimed it, every check verified."""
    subject = act("register_subject", actor("operator"), queue_key="q1", payload={
        "template_code": "content/material/specimen/1.0", "name": "Tube 1",
        "properties": {"site": "sfo", "platform": "illumina"}})["subject_euid"]
    env = envelope(subject)
    assert env["revision"] == 1 and env["seal"]
    assert verify_chains(lab).breaks == []
    _props(subject, execution={**env, "state": "CANCELED", "terminal": True})
    assert [b.problem for b in verify_chains(lab).breaks] == [
        "is the newest record that sealed the subject's envelope, which has changed since"
        " with no record: changed outside bloomops"]


def test_a_withdrawal_rewritten_or_invented_fails_a_fresh_export(lab):
    from tests.approval_support import request_release

    ann, bob = person("ann", "operator"), person("bob", "operator")
    subject, hold = integrity_held(ann)
    withdrawn = request_release(ann, subject, hold)["approval_euid"]
    act("cancel_approval", ann, payload={"approval_euid": withdrawn, "reason": "asked twice"})
    invented = request_release(ann, subject, hold)["approval_euid"]
    assert verify_bundle(export_evidence(subject, bob).data, lab).ok
    _props(withdrawn, canceled_by="bob", cancel_reason="bob's idea")
    _props(invented, status="CANCELED", canceled_by="ann")
    problems = verify_bundle(export_evidence(subject, bob).data, lab).problems
    assert f"database: approvals[{invented}]: reads withdrawn, but no sealed record of its" \
           " withdrawal is in the bundle" in problems
    for name, said in (("canceled_by", '"bob"'), ("cancel_reason", '"bob\'s idea"')):
        assert any(p.startswith(f"database: approvals[{withdrawn}].{name}: the approval says"
                                f" {said}, its sealed withdrawal") for p in problems), name


def test_a_lease_handed_to_another_worker_by_its_edge_is_named(lab):
    """The lease's worker edge re-pointed: the other worker completed the claim, and the
    claim's record (the first worker) and the completion's (the second) disagreed unseen."""
    svc = actor(*SERVICE)
    first, second = register(svc, "w://one"), register(svc, "w://two")
    make_subject("q1")
    lease = claim(svc, first)["lease_euid"]
    execute("""UPDATE generic_instance_lineage SET parent_instance_uid = %s
        WHERE child_instance_uid = %s AND relationship_type = 'execution_worker_lease'""",
            [uid(second), uid(lease)])
    [said] = verify_chains(lab).breaks
    assert said.problem == (f"gave lease {lease} to worker {first}, but the lease names"
                            f" {second}: changed outside bloomops")


def test_a_failures_hold_rewritten_is_named_and_gates(lab, settings):
    """A BUSINESS_RULE_HOLD a failure placed was never checked: with the code among the lab's
    integrity codes, rewriting it let one person release it."""
    settings.BLOOMOPS_INTEGRITY_HOLD_CODES = ["QC_FAIL", "BUSINESS_RULE_HOLD"]
    svc = actor(*SERVICE)
    subject = make_subject("q1")
    lease = claim(svc, register(svc))
    failed = act("fail_queue_execution", svc, worker_euid=lease["worker_euid"],
                 lease_euid=lease["lease_euid"], expected_state="READY",
                 payload={"error_class": "BUSINESS_RULE_HOLD", "error_message": "QA to see"})
    hold = failed["hold_euid"]
    _props(hold, hold_code="OPERATOR_HOLD")
    ann = person("ann", "operator")
    refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "alone"}))
    problems = verify_bundle(export_evidence(subject, ann).data, lab).problems
    assert any(f"holds[{hold}].properties.hold_code: the hold says \"OPERATOR_HOLD\"" in p
               for p in problems), problems


# ------------------------------------------------------------------ Bloom's own work


def _doc(records: list[dict], holds: list[dict]) -> dict:
    return {"subject": {"euid": "S"}, "action_records": records, "holds": holds,
            "approvals": []}


def test_blooms_hold_placement_is_not_held_to_bloomops_terms():
    """Every hold Bloom placed read as tampered in a bundle: its placer a worker EUID, its
    record's executed_by a username, and the times in two forms."""
    bloom = {"euid": "R1", "record": {
        "action_key": "place_execution_hold", "executed_by": "bloom-interop",
        "executed_at": "2026-11-27T10:53:05.075007+00:00", "target_euid": "S",
        "captured_data": {"hold_code": "QA_REVIEW"}, "result": {"hold_euid": "H"}}}
    hold = {"euid": "H", "properties": {"placed_by_lookup_euid": "Z-AX-2C",
                                        "placed_at": "2026-11-27T11:03:02+00:00",
                                        "hold_code": "QA_REVIEW"}}
    assert binding_problems(_doc([bloom], [hold])) == []


def test_a_hold_bloom_released_after_bloomops_ended_it_is_blooms_since():
    ours = {"euid": "R1", "record": {
        "action_key": "release_execution_hold", "executed_by": "operator",
        "executed_at": "2026-11-27T11:00:00.000000Z", "chain": {"key": "S"},
        "captured_data": {"reason": "fine"}, "result": {"hold_euids": ["H"]}}}
    bloom = {"euid": "R2", "record": {
        "action_key": "release_execution_hold", "executed_by": "bloom",
        "executed_at": "2026-11-27T11:05:00+00:00", "target_euid": "H",
        "result": {"hold_euid": "H"}}}
    hold = {"euid": "H", "properties": {"released_by_lookup_euid": "Z-AX-2C",
                                        "released_at": "2026-11-27T11:05:00+00:00"}}
    assert binding_problems(_doc([ours, bloom], [hold])) == []
    assert binding_problems(_doc([ours], [hold])) != []  # without Bloom's record: named


def test_another_writers_renewal_of_a_lease_is_later_history_in_a_bundle(lab):
    """Bloom records a renewal on the lease alone: the bundle had no new record of the
    subject, and the lease's new expiry read as tampering."""
    from bloomops.execution.context import ACTION_CODE
    from bloomops.tapdb.instances import create_instance, link_many

    svc = actor(*SERVICE)
    subject = make_subject("q1")
    lease = claim(svc, register(svc))["lease_euid"]
    ann = person("ann", "operator")
    file = export_evidence(subject, ann).data
    _props(lease, expires_at="2099-01-01T00:00:00+00:00")
    made = create_instance(ACTION_CODE.format(key="renew_queue_lease"), name="renew",
                           properties={}, tenant_id=lab, extra={
                               "action_group": "execution_queue",
                               "action_key": "renew_queue_lease", "executed_by": "bloom",
                               "executed_at": "2026-11-27T11:00:00+00:00",
                               "target_euid": lease, "lease_lookup_euid": lease,
                               "result": {"status": "success", "lease_euid": lease}})
    link_many([(made.uid, uid(lease), "executed_on")], tenant_id=lab)
    verdict = verify_bundle(file, lab)
    assert not any("expires_at" in p for p in verdict.problems), verdict.problems
    assert any("expires_at" in x and "changed by a later action" in x for x in verdict.later)


@pytest.mark.parametrize("how", ["unlinked", "moved", "deleted"])
def test_a_hold_taken_off_its_subject_in_the_database_is_named(lab, how):
    """The hold's edge soft-deleted or moved to another subject (or the hold itself marked
    deleted): the subject read unheld and was released without a word."""
    subject, hold = integrity_held(person("ann", "operator"))
    if how == "deleted":
        execute("UPDATE generic_instance SET is_deleted = true WHERE euid = %s", [hold])
    else:
        other = make_subject("q1")
        execute(f"""UPDATE generic_instance_lineage SET {
            "is_deleted = true" if how == "unlinked" else "parent_instance_uid = %s"}
            WHERE child_instance_uid = %s AND relationship_type = 'execution_subject_hold'""",
                ([] if how == "unlinked" else [uid(other)]) + [uid(hold)])
    said = [(b.what, b.record_euid, b.problem) for b in verify_chains(lab, subject).breaks]
    assert ("hold", hold, "is active, but " + ("marked deleted" if how == "deleted" else
            "no longer linked to the subject") + ": the subject reads unheld, changed outside"
            " bloomops") in said, said


def test_a_dead_letter_rewritten_in_the_database_fails_a_fresh_export(lab):
    """The letter's failure made an operator's cancel, its words erased: a bundle exported
    after verified, only an older one could have said otherwise."""
    dead = dead_lettered("q1")
    [letter] = fetch_all("""SELECT euid FROM generic_instance WHERE type = 'execution'
        AND subtype = 'dead_letter' AND json_addl->'properties'->>'subject_lookup_euid' = %s""",
                         [dead])
    ann = person("ann", "operator")
    assert verify_bundle(export_evidence(dead, ann).data, lab).ok
    _props(letter["euid"], error_class="OPERATOR_CANCELED", error_message="cancelled")
    problems = verify_bundle(export_evidence(dead, ann).data, lab).problems
    for name in ("error_class", "error_message"):
        assert any(p.startswith(f"database: dead_letters[{letter['euid']}].properties.{name}:"
                                " the letter says") for p in problems), (name, problems)


def test_an_empty_row_since_a_bundle_excuses_no_rewrite_of_a_finished_object(lab):
    """One empty row linked to the subject made every changed snapshot "later history", a
    finished attempt's status among them: the file verified."""
    from bloomops.execution.context import ACTION_CODE
    from bloomops.tapdb.instances import create_instance, link_many

    dead = dead_lettered("q1")
    ann = person("ann", "operator")
    file = export_evidence(dead, ann).data
    [attempt] = fetch_all("""SELECT euid FROM generic_instance WHERE type = 'execution'
        AND subtype = 'execution_record' AND json_addl->'properties'->>'subject_lookup_euid'
        = %s""", [dead])
    _props(attempt["euid"], status="SUCCEEDED")
    made = create_instance(ACTION_CODE.format(key="place_execution_hold"), name="x",
                           properties={}, tenant_id=lab, extra={})
    link_many([(made.uid, uid(dead), "executed_on")], tenant_id=lab)
    verdict = verify_bundle(file, lab)
    assert any(f"execution_records[{attempt['euid']}]" in p and "SUCCEEDED" in p
               for p in verdict.problems), verdict.problems
