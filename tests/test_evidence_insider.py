# ruff: noqa: F811  (the history fixture, imported, is each test's argument)
"""What an insider with the database alone, or a hostile file, could
still do unseen or turn into a 500, each held to what RULES.md#evidence promises."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bloomops.execution.chain import canonical_bytes, content_hash
from bloomops.execution.evidence import verify_bundle
from bloomops.execution.exports import export_evidence
from bloomops.execution.verification import verify_chains
from bloomops.tapdb.db import execute, fetch_all
from tests.approval_support import person
from tests.engine import act
from tests.test_evidence_bundle import history  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def _record(action_key: str) -> dict:
    [row] = fetch_all("SELECT uid, euid, json_addl FROM generic_instance WHERE type ="
                      " 'execution_queue' AND subtype = %s ORDER BY uid DESC LIMIT 1",
                      [action_key])
    return row


def _write(uid: int, body: dict) -> None:
    execute("UPDATE generic_instance SET json_addl = %s::jsonb WHERE uid = %s",
            [json.dumps(body), uid])


def _rewrite_decision(reason: str, *, strip: str) -> dict:
    """The newest decide_approval record and its approval rewritten, consistently, by
    someone without the seal key: its chain entry removed (``chain``) or re-sealed with a
    new sha256 and no keyed seal (``keyed``)."""
    row = _record("decide_approval")
    body = row["json_addl"]
    body["reason"] = body["captured_data"]["reason"] = reason
    body["result"]["signature"]["reason"] = reason
    if strip == "chain":
        body.pop("chain")
    else:
        for k in ("hmac", "key_id"):
            body["chain"].pop(k)
        body["chain"]["sha256"] = content_hash(body)
    _write(row["uid"], body)
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,
               '{properties,signature,reason}', %s::jsonb), '{properties,decision_reason}',
               %s::jsonb) WHERE euid = %s""",
            [json.dumps(reason), json.dumps(reason), body["result"]["approval_euid"]])
    return row


@pytest.mark.parametrize("strip", ["chain", "keyed"])
def test_the_newest_record_rewritten_without_the_key_fails_a_fresh_export(history, strip):
    row = _rewrite_decision("a reason nobody gave", strip=strip)
    assert not verify_chains(history["tenant"]).ok
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any(row["euid"] in p for p in verdict.problems), verdict.problems


def test_key_chains_keys_no_record_written_after_the_first_keyed_one(history):
    _rewrite_decision("a reason nobody gave", strip="keyed")
    with pytest.raises(CommandError, match="written after the seal key carry no keyed seal"):
        call_command("key_chains", stdout=io.StringIO())
    assert not verify_chains(history["tenant"]).ok


def test_the_newest_record_unlinked_from_its_subject_is_named(history):
    row = _record("release_execution_hold")
    # make it the newest on the subject's chain: the decision is on the approval's chain
    execute("""UPDATE generic_instance_lineage SET is_deleted = true
               WHERE parent_instance_uid = %s AND relationship_type = 'executed_on'""",
            [row["uid"]])
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any(row["euid"] in p and "not in the subject's history" in p
               for p in verdict.problems), verdict.problems


def test_a_hold_rewritten_in_the_database_fails_a_fresh_export(history):
    hold = _record("place_execution_hold")["json_addl"]["result"]["hold_euid"]
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
               '{properties,hold_code}', '"OPERATOR_HOLD"') WHERE euid = %s""", [hold])
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any(f"holds[{hold}].properties.hold_code" in p for p in verdict.problems)


@pytest.mark.parametrize("edit", [
    lambda d: d["action_records"][0]["record"]["chain"].__setitem__("key_id", ["x"]),
    lambda d: d["action_records"][0]["record"]["chain"].__setitem__("key", {"a": 1}),
    lambda d: d["action_records"][0]["record"]["chain"].__setitem__("previous_euid", []),
    lambda d: d["action_records"][0].__setitem__("euid", []),
    lambda d: d["approvals"][0].__setitem__("euid", ["Z"]),
    lambda d: d["holds"][0].__setitem__("euid", {}),
    lambda d: d["subject"].__setitem__("properties", True),
])
def test_a_malformed_bundle_is_answered_not_a_500(history, edit):
    doc = json.loads(export_evidence(history["subject"], history["op"]).data)
    edit(doc)
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert not verdict.ok


def test_a_malformed_key_id_in_the_database_is_a_break_not_a_crash(history):
    row = _record("place_execution_hold")
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
               '{chain,key_id}', '[1]') WHERE uid = %s""", [row["uid"]])
    report = verify_chains(history["tenant"])
    assert [b.record_euid for b in report.breaks] == [row["euid"]]


def test_a_requeue_after_a_cancel_is_later_history_not_tampering(tenant):
    from tests.approval_support import dead_lettered, decide
    from tests.engine import make_queue

    make_queue("q1")
    op, asker = person("qa-lead", "operator"), person("lead", "operator")
    subject = dead_lettered()
    act("cancel_subject_execution", op, subject_euid=subject, expected_state="FAILED_TERMINAL",
        payload={"reason": "give up"})
    before = export_evidence(subject, op)
    asked = act("request_approval", asker, subject_euid=subject, expected_state="CANCELED",
                payload={"action_key": "requeue_subject", "parameters": {},
                         "reason": "retry it after all"})["approval_euid"]
    decide(op, asked, reason="retry it")
    verdict = verify_bundle(before.data, tenant)
    assert verdict.ok, verdict.problems


def test_a_queue_export_holds_the_subjects_whose_only_actions_name_no_queue(history, tmp_path):
    from bloomops.execution import clock
    from bloomops.execution.envelope import ts

    [decided] = fetch_all("SELECT json_addl->>'executed_at' AS at FROM generic_instance WHERE"
                          " type = 'execution_queue' AND subtype = 'decide_approval'")
    out = tmp_path / "set"
    call_command("export_evidence", "--since", decided["at"], "--until",
                 ts(clock.now()), "--queue", "q2", "--out", str(out), "--as", "qa-lead",
                 stdout=io.StringIO())
    manifest = json.loads((out / "manifest.json").read_bytes())
    assert [b["subject_euid"] for b in manifest["bundles"]] == [history["subject"]]


def test_bloom_moving_its_copy_of_the_queue_is_later_history_not_tampering(history):
    """Bloom's own queue actions set the subject's current_queue on a shared database: a
    bundle recorded before read NOT VERIFIED, "subject.properties.current_queue" tampered."""
    before = export_evidence(history["subject"], history["op"])
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
               '{properties,current_queue}', '"q2"') WHERE euid = %s""", [history["subject"]])
    act("place_execution_hold", history["op"], subject_euid=history["subject"],
        expected_state="READY", payload={"reason": "a later action"})
    verdict = verify_bundle(before.data, history["tenant"])
    assert verdict.ok, verdict.problems


def _props(euid: str, **changes) -> None:
    for name, value in changes.items():
        execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, %s::text[],"
                " %s::jsonb) WHERE euid = %s", [["properties", name], json.dumps(value), euid])


def test_a_requester_renamed_in_the_database_still_cannot_decide_their_request(tenant):
    """One UPDATE of the approval's requested_by (the runtime role may write it) let the
    asker approve their own integrity-hold release, and a bundle exported after verified."""
    from tests.approval_support import decide, integrity_held, request_release
    from tests.engine import envelope, refused

    ann, bob = person("ann", "operator"), person("bob", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    _props(approval, requested_by="bob")
    err = refused("APPROVAL_TAMPERED", lambda: decide(ann, approval))
    assert "its requested_by reads 'bob', its sealed request record" in err.message
    # nor does the renamed "requester" decide it, or withdraw it as theirs
    refused("APPROVAL_TAMPERED", lambda: decide(bob, approval))
    refused("APPROVAL_TAMPERED", lambda: act("cancel_approval", bob, subject_euid=subject,
                                             payload={"approval_euid": approval,
                                                      "reason": "mine"}))
    assert envelope(subject)["state"] == "HELD"
    # so do the terms the second person signs for: a hold swapped for another
    _props(approval, requested_by="ann", hold_euids=["Z-HD-OTHER"])
    err = refused("APPROVAL_TAMPERED", lambda: decide(bob, approval))
    assert "its hold_euids reads" in err.message
    _props(approval, hold_euids=[hold])
    assert decide(bob, approval)["state"] == "READY"  # as asked, it is decided


def test_a_hold_code_rewritten_in_the_database_still_needs_a_second_person(tenant):
    """An integrity hold's code changed from QC_FAIL to OPERATOR_HOLD in the database was
    then released by one person alone."""
    from tests.approval_support import integrity_held
    from tests.engine import envelope, refused

    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    _props(hold, hold_code="OPERATOR_HOLD")
    for action in ("release_execution_hold", "cancel_subject_execution"):
        refused("APPROVAL_REQUIRED", lambda action=action: act(
            action, ann, subject_euid=subject, hold_euid=hold if "release" in action else None,
            expected_state="HELD", payload={"reason": "label fixed"}))
    assert envelope(subject)["state"] == "HELD"


def test_who_asked_and_who_ended_a_hold_rewritten_fail_a_fresh_export(tenant):
    """A hold's releaser and reason, and an approval's requester, rewritten in the database
    were shown as fact, and a bundle exported afterwards verified."""
    from tests.approval_support import decide, integrity_held, request_release

    ann, bob = person("ann", "operator"), person("bob", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    decide(bob, approval)
    assert verify_bundle(export_evidence(subject, ann).data, tenant).ok
    _props(hold, released_by_lookup_euid="ann", release_reason="released by ann alone",
           released_on_approval=None)
    _props(approval, requested_by="bob", reason="bob's own idea")
    text = "\n".join(verify_bundle(export_evidence(subject, ann).data, tenant).problems)
    for field in ("released_by_lookup_euid", "release_reason", "released_on_approval"):
        assert f"holds[{hold}].properties.{field}: the hold says" in text, field
    for field in ("requested_by", "reason"):
        assert f"approvals[{approval}].properties.{field}: the approval says" in text, field


@pytest.mark.parametrize("hide", ["deleted", "resealed", "renamed", "removed"])
def test_a_hold_code_rewritten_and_its_record_hidden_still_needs_a_second_person(tenant, hide):
    """With the placing record also soft-deleted, rewritten to the new code (and its
    sha256 made again, which the seal key cannot be), its row's action column renamed
    (which the seal does not cover: the gate found the record by it), or removed outright,
    the gate trusted the code again."""
    from tests.approval_support import integrity_held
    from tests.engine import envelope, refused

    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    _props(hold, hold_code="OPERATOR_HOLD")
    if hide == "deleted":
        execute("UPDATE generic_instance SET is_deleted = true WHERE type = 'execution_queue'"
                " AND subtype = 'place_execution_hold'"
                " AND json_addl->'result'->>'hold_euid' = %s", [hold])
    elif hide == "resealed":
        row = _record("place_execution_hold")
        body = row["json_addl"]
        body["captured_data"]["hold_code"] = "OPERATOR_HOLD"
        body["chain"]["sha256"] = content_hash(body)
        _write(row["uid"], body)
    elif hide == "renamed":
        execute("UPDATE generic_instance SET subtype = 'place_execution_hold_' WHERE uid = %s",
                [_record("place_execution_hold")["uid"]])
        [said] = verify_chains(tenant, subject).breaks
        assert said.problem == ("is stored as an action 'place_execution_hold_', but sealed"
                                " as 'place_execution_hold': renamed outside bloomops")
    else:
        uid = _record("place_execution_hold")["uid"]
        execute("SET LOCAL session_replication_role = replica")
        execute("DELETE FROM generic_instance_lineage WHERE parent_instance_uid = %s", [uid])
        execute("DELETE FROM generic_instance WHERE uid = %s", [uid])
        execute("SET LOCAL session_replication_role = DEFAULT")
    refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "released alone"}))
    refused("APPROVAL_REQUIRED", lambda: act(
        "cancel_subject_execution", ann, subject_euid=subject, expected_state="HELD",
        payload={"reason": "cancelled alone"}))
    assert envelope(subject)["state"] == "HELD"


def test_an_approval_moved_to_another_subject_is_decided_by_nobody(tenant):
    """An approval to cancel A rewritten to name B was decided and cancelled B."""
    from tests.approval_support import decide, integrity_held
    from tests.engine import envelope, refused

    ann, bob = person("ann", "operator"), person("bob", "operator")
    a, _ = integrity_held(ann)
    b, _ = integrity_held(ann)
    approval = act("request_approval", ann, subject_euid=a, payload={
        "action_key": "cancel_subject_execution", "reason": "A is spoilt",
        "parameters": {"reason": "A is spoilt"}})["approval_euid"]
    _props(approval, subject_lookup_euid=b)
    err = refused("APPROVAL_TAMPERED", lambda: decide(bob, approval))
    assert "subject_lookup_euid" in err.message
    assert envelope(a)["state"] == envelope(b)["state"] == "HELD"


def test_a_hold_released_on_approval_before_it_was_kept_on_the_hold_verifies(tenant):
    """Holds released on approval before the hold kept released_on_approval have none: their
    subjects' bundles must not fail for it."""
    from tests.approval_support import decide, integrity_held, request_release

    ann, bob = person("ann", "operator"), person("bob", "operator")
    subject, hold = integrity_held(ann)
    decide(bob, request_release(ann, subject, hold)["approval_euid"])
    execute("UPDATE generic_instance SET json_addl = json_addl #- "
            "'{properties,released_on_approval}' WHERE euid = %s", [hold])
    assert verify_bundle(export_evidence(subject, ann).data, tenant).ok


def test_an_integrity_hold_ended_in_the_database_still_needs_a_second_person(tenant):
    """An integrity hold's status set to RELEASED in the database let one person cancel the
    subject alone, and every check verified: no record ended it."""
    from tests.approval_support import integrity_held
    from tests.engine import envelope, refused

    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    _props(hold, status="RELEASED")
    refused("APPROVAL_REQUIRED", lambda: act(
        "cancel_subject_execution", ann, subject_euid=subject, expected_state="HELD",
        payload={"reason": "cancelled alone"}))
    assert envelope(subject)["state"] == "HELD"
    said = [(b.key, b.record_euid, b.problem, b.what) for b in verify_chains(tenant).breaks]
    assert said == [(subject, hold, "reads RELEASED, but no action record ended it: changed"
                     " outside bloomops", "hold")]
    assert said == [(b.key, b.record_euid, b.problem, b.what)
                    for b in verify_chains(tenant, subject).breaks]


def test_an_approval_marked_approved_in_the_database_fails_a_fresh_export(tenant):
    """An open request set to APPROVED, decided by a supervisor with a reason, in the
    database (no decision, no signature, no record): a bundle exported after verified, and
    its readable verdict said who approved it."""
    from tests.approval_support import integrity_held, request_release

    ann = person("ann", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    _props(approval, status="APPROVED", decided_by="supervisor",
           decided_at="2026-11-27T10:00:00.000000Z", decision_reason="checked photo")
    report = verify_bundle(export_evidence(subject, ann).data, tenant)
    said = (f"approvals[{approval}]: carries a decision, but no sealed record of that"
            " decision is in the bundle")
    assert [f"file: {said}", f"database: {said}"] == report.problems
