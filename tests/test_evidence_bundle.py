"""Evidence bundles (docs/RULES.md#evidence): deterministic, recorded through the executor,
and verifiable: an edited file or a database row edited after the export is named."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from bloomops.execution.chain import canonical_bytes
from bloomops.execution.errors import ActionError
from bloomops.execution.evidence import build_bundle, verify_bundle
from bloomops.execution.exports import export_evidence
from bloomops.tapdb.db import execute, fetch_all
from tests.approval_support import decide, person, request_release
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    counts,
    make_queue,
    make_subject,
    refused,
    register,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(tenant):
    make_queue("q1")
    make_queue("q2")
    svc, op = actor(*SERVICE), person("qa-lead", "operator")
    asker = person("bench-lead", "operator")
    worker = register(svc, capabilities=[])
    subject = make_subject("q1")
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": "q2"})
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"hold_code": "QC_FAIL", "reason": "bad run"})
    # An integrity hold: released by a second person's signed approval.
    approval = request_release(asker, subject, hold["hold_euid"],
                               parameters={"reason": "rerun passed"})["approval_euid"]
    decide(op, approval, reason="rerun checked")
    return {"subject": subject, "tenant": tenant, "op": op, "svc": svc, "worker": worker,
            "approval": approval}


def test_a_bundle_checks_out_by_rules_recipe_alone(history):
    """An auditor followed RULES.md's "Checking a file without bloomops" to the letter (the
    sha256 of a record with chain.sha256 alone left out) and no record matched: the recipe,
    done here with json and hashlib only, holds for every record and every predecessor the
    file holds."""
    import hashlib

    data = build_bundle(history["subject"], history["tenant"]).data

    def canonical(value) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False).encode()

    doc = json.loads(data)
    assert canonical(doc) == data  # re-written in canonical form: byte-identical
    sealed = {}
    for entry in doc["action_records"]:
        record = json.loads(json.dumps(entry["record"]))
        chain = record["chain"]
        kept = {k: v for k, v in chain.items() if k not in ("sha256", "hmac", "key_id")}
        assert hashlib.sha256(canonical({**record, "chain": kept})).hexdigest() == \
            chain["sha256"], entry["euid"]
        sealed[entry["euid"]] = chain
    held = [c for c in sealed.values() if c.get("previous_euid") in sealed]
    assert held and all(sealed[c["previous_euid"]]["sha256"] == c["previous_sha256"]
                        for c in held)


def test_bundle_holds_the_whole_history_in_canonical_form(history):
    bundle = build_bundle(history["subject"], history["tenant"])
    doc = bundle.document
    assert bundle.data == canonical_bytes(json.loads(bundle.data))
    assert doc["subject"]["euid"] == history["subject"]
    assert doc["subject"]["properties"]["execution"]["state"] == "READY"
    assert len(doc["leases"]) == 1 and len(doc["execution_records"]) == 1
    assert [h["properties"]["hold_code"] for h in doc["holds"]] == ["QC_FAIL"]
    keys = [r["action_key"] for r in doc["action_records"]]
    assert keys == ["claim_queue_item", "complete_queue_execution", "place_execution_hold",
                    "request_approval", "release_execution_hold", "decide_approval"]
    released = doc["action_records"][-2]["record"]
    assert released["executed_by"] == "qa-lead" and released["reason"] == "rerun passed"
    assert released["result"]["approval"]["requested_by"] == "bench-lead"
    [approval] = doc["approvals"]
    assert approval["euid"] == history["approval"]
    signature = approval["properties"]["signature"]
    assert (signature["meaning"], signature["signer"], signature["method"]) == (
        "approved", "qa-lead", "password re-entry")
    assert released["payload_hash"] and released["chain"]["sha256"]
    assert any(e["relationship_type"] == "execution_subject_hold" for e in doc["lineage"])
    assert any(a["object_euid"] == history["subject"] for a in doc["audit"])
    assert doc["bloomops_version"]


def test_two_exports_of_an_unchanged_history_are_byte_identical(history):
    first = export_evidence(history["subject"], history["op"])
    admin = actor("admin")
    second = export_evidence(history["subject"], admin)
    assert first.data == second.data and first.sha256 == second.sha256
    # Each person's export is recorded once: who generated it and when.
    assert second.result["evidence_euid"] != first.result["evidence_euid"]
    again = export_evidence(history["subject"], history["op"])
    assert again.result.replayed and again.data == first.data
    recorded = fetch_all("SELECT json_addl->'properties' AS p FROM generic_instance"
                         " WHERE subtype = 'evidence_bundle' ORDER BY uid")
    assert [r["p"]["generated_by"] for r in recorded] == ["qa-lead", "admin"]
    assert {r["p"]["bundle_sha256"] for r in recorded} == {first.sha256}


def test_an_untouched_export_verifies(history, tmp_path, capsys):
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert verdict.ok, verdict.problems
    assert verdict.recorded[0]["generated_by"] == "qa-lead"
    path = tmp_path / export.filename
    path.write_bytes(export.data)
    call_command("verify_evidence", str(path))
    assert "VERIFIED" in capsys.readouterr().out


def test_later_actions_are_reported_not_taken_for_tampering(history):
    export = export_evidence(history["subject"], history["op"])
    act("cancel_subject_execution", history["op"], subject_euid=history["subject"],
        expected_state="READY", payload={"reason": "withdrawn"})
    verdict = verify_bundle(export.data, history["tenant"])
    assert verdict.ok, verdict.problems
    assert any(line.startswith("action_records[") for line in verdict.later)


def test_an_edited_file_is_detected_and_the_edit_named(history, tmp_path, capsys):
    export = export_evidence(history["subject"], history["op"])
    doc = json.loads(export.data)
    doc["action_records"][-1]["record"]["reason"] = "nothing to see"
    edited = canonical_bytes(doc)
    verdict = verify_bundle(edited, history["tenant"])
    assert not verdict.ok
    text = "\n".join(verdict.problems)
    assert "matches no evidence bundle recorded" in text and "file was edited" in text
    euid = doc["action_records"][-1]["euid"]
    assert f"action_records[{euid}].record.reason" in text
    # the edited record no longer matches its own seal: that check, and the ones the edit
    # reaches, are marked failed
    assert verdict.outcomes == ["passed", "failed", "failed", "failed", "passed", "passed"]
    path = tmp_path / "edited.json"
    path.write_bytes(edited)
    with pytest.raises(CommandError, match="NOT VERIFIED"):
        call_command("verify_evidence", str(path))
    printed = capsys.readouterr().out
    assert "FAILED: every action record in the file matches its own seal" in printed
    assert "PASSED: every hash chain the subject's action records are on" in printed


def test_an_edit_inside_an_audit_rows_json_is_named_by_its_field(history):
    """An audit row's values are JSON texts: an edit deep inside one was said as two values
    cut at 80 characters, identical as shown."""
    export = export_evidence(history["subject"], history["op"])
    doc = json.loads(export.data)
    row = next(a for a in doc["audit"] if a["column_name"] == "json_addl"
               and (a["new_value"] or "").startswith("{"))
    value = json.loads(row["new_value"])
    value["properties"]["name_note"] = "added in the file"
    row["new_value"] = json.dumps(value)
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert (f"file: audit[{row['euid']}].new_value.properties.name_note: the file has"
            ' "added in the file", the database null') in verdict.problems, verdict.problems


@pytest.mark.usefixtures("committed")  # each action its own transaction, its own instant
@pytest.mark.parametrize("section", ["holds", "action_records"])
def test_an_entry_removed_from_the_file_is_named_missing_not_later(history, section):
    """A hold (or its action record) cut out of a downloaded bundle was listed as "added
    since", harmless later history, though it was there before the bundle was made."""
    export = export_evidence(history["subject"], history["op"])
    doc = json.loads(export.data)
    gone = doc[section].pop(0)
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert not verdict.ok
    named = [p for p in verdict.problems if f"{section}[{gone['euid']}]" in p]
    assert named and "missing from the file" in named[0]
    assert not any(gone["euid"] in line for line in verdict.later)


def test_a_reformatted_file_is_detected(history):
    export = export_evidence(history["subject"], history["op"])
    pretty = json.dumps(json.loads(export.data), indent=2).encode()
    verdict = verify_bundle(pretty, history["tenant"])
    assert not verdict.ok
    assert any("canonical form" in p for p in verdict.problems)


def test_a_database_row_edited_after_export_is_named(history):
    export = export_evidence(history["subject"], history["op"])
    victim = json.loads(export.data)["action_records"][2]
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{reason}',"
            " '\"routine\"') WHERE euid = %s", [victim["euid"]])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok and verdict.recorded
    text = "\n".join(verdict.problems)
    assert f"database: action_records[{victim['euid']}].record.reason" in text
    assert f"record {victim['euid']}: content differs from its seal" in text


def test_an_envelope_edited_outside_the_executor_is_named(history):
    export = export_evidence(history["subject"], history["op"])
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,execution,priority}', '99') WHERE euid = %s", [history["subject"]])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any(p.startswith("database: subject.properties.execution.priority")
               for p in verdict.problems), verdict.problems


def test_a_removed_record_is_named(history):
    export = export_evidence(history["subject"], history["op"])
    victim = json.loads(export.data)["action_records"][1]["euid"]
    execute("DELETE FROM generic_instance WHERE euid = %s", [victim])
    verdict = verify_bundle(export.data, history["tenant"])
    assert f"database: action_records[{victim}]: in the file, no longer in the database" \
        in verdict.problems


def test_a_mismatching_hash_is_refused_and_writes_nothing(history):
    before = counts()
    with pytest.raises(ActionError) as err:
        act("record_evidence_bundle", history["op"], subject_euid=history["subject"],
            payload={"bundle_sha256": "0" * 64})
    assert err.value.code == "EVIDENCE_MISMATCH"
    assert counts() == before


@pytest.mark.parametrize("roles", [SERVICE, ("worker_human",)])
def test_workers_may_not_export_and_nothing_is_written(history, roles):
    before = counts()
    with pytest.raises(ActionError) as err:
        export_evidence(history["subject"], actor(*roles))
    assert err.value.code == "FORBIDDEN"
    assert counts() == before


@pytest.mark.parametrize("sha", ["", "abc", "G" * 64, "A" * 64])
def test_a_malformed_hash_is_refused_and_writes_nothing(history, sha):
    before = counts()
    with pytest.raises(ActionError) as err:
        act("record_evidence_bundle", history["op"], subject_euid=history["subject"],
            payload={"bundle_sha256": sha})
    assert err.value.code == "VALIDATION_ERROR"
    assert counts() == before


def test_not_a_bundle_is_refused_by_name(history):
    assert verify_bundle(b"\xff", history["tenant"]).problems == [
        "file: not a bundle's JSON (it is not UTF-8 text)"]
    assert "not a bloomops.evidence/1" in verify_bundle(b"{}", history["tenant"]).problems[0]


@pytest.mark.parametrize("euid", ["Z\u0000", "", "Z-MX-1\n", "Z-MX\u200b-1"])
def test_a_subject_euid_no_bundle_can_hold_is_refused_by_name(history, euid):
    """A NUL in the file's subject EUID reached PostgreSQL, which refuses it: a 500 from the
    API and a traceback from manage.py verify_evidence."""
    doc = json.loads(export_evidence(history["subject"], history["op"]).data)
    doc["subject"]["euid"] = euid
    assert verify_bundle(canonical_bytes(doc), history["tenant"]).problems == [
        "file: not a bundle's JSON (subject.euid contains a NUL character)" if "\x00" in euid
        else "file: not a bloomops.evidence/1 evidence bundle (subject.euid is not an EUID)"]


@pytest.mark.parametrize("section,field", [("approvals", "decided_by"),
                                           ("holds", "released_by_lookup_euid"),
                                           ("leases", "worker_lookup_euid"),
                                           ("execution_records", "status")])
def test_a_final_object_changed_is_tampering_whatever_acted_since(history, section, field):
    """A decided approval's signer rewritten in the database read as "changed by a later
    action" once any unrelated action followed: a decided approval, a released hold, an
    ended lease or a finished record is never changed again by the executor."""
    export = export_evidence(history["subject"], history["op"])
    [entry] = [e for e in json.loads(export.data)[section]]
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                    " ARRAY['properties', %s], '\"admin\"') WHERE euid = %s",
                    [field, entry["euid"]])
    act("place_execution_hold", history["op"], subject_euid=history["subject"],
        expected_state="READY", payload={"reason": "unrelated later hold"})
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any(p.startswith(f"database: {section}[{entry['euid']}].properties.{field}")
               for p in verdict.problems), verdict.problems


def test_a_worker_restart_is_history_not_tampering(tenant):
    """A crash-restart ends the leases of the worker's previous process; the restart's
    action record was not linked to their subjects, so the subject's bundle read the ended
    lease as tampering."""
    make_queue("q1")
    svc, op = actor(*SERVICE), person("qa-lead", "operator")
    worker = register(svc, worker_key="wk-1", process_identity="proc-A")
    subject = make_subject("q1")
    claim(svc, worker)
    export = export_evidence(subject, op)
    register(svc, worker_key="wk-1", process_identity="proc-B")
    verdict = verify_bundle(export.data, tenant)
    assert verdict.ok, verdict.problems
    assert any("changed by a later action" in line for line in verdict.later)
    assert any(a["action_key"] == "register_worker"
               for a in build_bundle(subject, tenant).document["action_records"])


@pytest.mark.usefixtures("committed")
def test_an_action_stamped_before_a_file_but_committed_after_it_is_later_history(history):
    """A row is stamped when its transaction starts: an action that began before a bundle
    was made and committed after it read as cut out of the file ("missing"), a false alarm
    of tampering on an untouched, recorded file."""
    import threading

    from django.db import transaction

    started, go, done = threading.Event(), threading.Event(), threading.Event()

    def slow_hold() -> None:
        try:
            with transaction.atomic():
                fetch_all("SELECT now() AS t")  # the transaction's instant, taken now
                started.set()
                go.wait(10)
                act("place_execution_hold", history["op"], subject_euid=history["subject"],
                    expected_state="READY", payload={"hold_code": "OPERATOR_HOLD",
                                                     "reason": "late"})
        finally:
            done.set()
            connection.close()

    thread = threading.Thread(target=slow_hold)
    thread.start()
    assert started.wait(10)
    # work done meanwhile: the file's newest entries are newer than the hold's stamp
    lease = claim(history["svc"], history["worker"], "q2")
    act("release_queue_lease", history["svc"], lease_euid=lease["lease_euid"],
        worker_euid=history["worker"], expected_state="READY", payload={"reason": "swap"})
    export = export_evidence(history["subject"], history["op"])
    go.set()
    thread.join()
    verdict = verify_bundle(export.data, history["tenant"])
    assert verdict.ok, verdict.problems
    assert any(line.startswith("holds[") and "added since" in line for line in verdict.later)


def test_an_euid_in_a_records_free_text_is_no_claim_that_the_file_lacks_it(tenant):
    """Any EUID anywhere in the file's records (a result snapshot, a reason) was taken as
    one the file must hold: a container another writer linked later, named in a completed
    step's snapshot, made an untouched recorded file fail as cut."""
    from bloomops.execution.objects import load
    from bloomops.tapdb.instances import link

    make_queue("q1")
    svc, op = actor(*SERVICE), person("qa-lead", "operator")
    worker = register(svc, capabilities=[])
    subject, container = make_subject("q1"), make_subject(None, name="Run container")
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"result_snapshot": {"run_container": container}})
    export = export_evidence(subject, op)
    link(load(euid=container, tenant=tenant).uid, load(euid=subject, tenant=tenant).uid,
         "contains", tenant_id=tenant)  # another writer, as Bloom would after the run
    verdict = verify_bundle(export.data, tenant)
    assert verdict.ok, verdict.problems
    assert any(container in line and "added since" in line for line in verdict.later)


def test_two_long_texts_that_part_late_are_shown_where_they_part():
    """Cut at 80 characters, two long texts differing further on read as one."""
    from bloomops.execution.binding import first_difference

    said = first_difference("record.note", "x" * 100 + " tube A", "x" * 100 + " tube B")
    assert said is not None and "(from character 87)" in said  # 20 before the "A"
    assert "tube A" in said and "tube B" in said


def test_a_bundle_nesting_deep_inside_an_audit_value_is_answered_not_a_500(history):
    """A JSON text 2,000 levels deep inside an audit row's value raised RecursionError while
    the verdict looked inside it."""
    export = export_evidence(history["subject"], history["op"])
    doc = json.loads(export.data)
    row = next(a for a in doc["audit"] if a["column_name"] == "json_addl")
    row["new_value"] = "{" + '"a":{' * 2000 + "}" * 2001
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert not verdict.ok
    assert any(p.startswith(f"file: audit[{row['euid']}].new_value") for p in verdict.problems)


def test_an_audit_text_rewritten_to_the_same_json_is_still_an_edit():
    """'{"a":1}' against '{"a": 1}': the same JSON, other bytes than the database holds."""
    from bloomops.execution.binding import first_difference

    said = first_difference("audit[x].new_value", '{"a":1}', '{"a": 1}')
    assert said is not None and said.startswith("audit[x].new_value: the file has")
    assert first_difference("audit[x].new_value", '{"a": 1}', '{"a": 1}') is None


def test_a_signature_edited_in_the_database_fails_even_a_fresh_export(history):
    """An insider rewrites who signed an approval, then exports: the file agrees with the
    database, but not with the sealed decision record inside it (audit finding)."""
    execute(
        """UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
           '{properties,signature,signer}', '"bench-lead"') WHERE euid = %s""",
        [history["approval"]])
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    text = "\n".join(verdict.problems)
    assert f"approvals[{history['approval']}].signature.signer" in text
    assert '"qa-lead"' in text and verdict.outcomes[-1] == "failed"


def test_a_record_unlinked_from_its_subject_fails_a_fresh_export(history):
    """Soft-deleting the executed_on edge of a middle record hides it from the subject's
    history and bundle, while its chain stays intact: the next record names it."""
    execute(
        """UPDATE generic_instance_lineage l SET is_deleted = true
           FROM generic_instance a WHERE a.uid = l.parent_instance_uid
           AND l.relationship_type = 'executed_on' AND a.subtype = 'place_execution_hold'""")
    export = export_evidence(history["subject"], history["op"])
    verdict = verify_bundle(export.data, history["tenant"])
    assert not verdict.ok
    assert any("is missing from the bundle" in p for p in verdict.problems)


def test_an_output_moving_on_is_later_history_not_tampering(history, tenant):
    """An output's own envelope moves with its own actions: verifying the parent's bundle
    afterwards is not a problem."""
    bundle = build_bundle(history["subject"], history["tenant"])
    doc = json.loads(bundle.data)
    doc["outputs"] = [{"euid": "Z-MX-OUT", "name": "x", "created_dt": None,
                       "properties": {"execution": {"state": "READY"}}}]
    now = {**doc, "outputs": [{"euid": "Z-MX-OUT", "name": "x", "created_dt": None,
                               "properties": {"execution": {"state": "COMPLETED"}}}]}
    from bloomops.execution.evidence import _compare
    changed, explicable, _added, _acted = _compare(doc, now)
    assert changed == [] and explicable == []


def test_a_later_action_excuses_no_change_an_action_cannot_make(history):
    """A hold's code rewritten from QC_FAIL to OPERATOR_HOLD let it be released with no
    second person, and the bundle recorded before then read VERIFIED, the change "explained"
    by that release; a subject's site rewritten was not named at all. Only what actions
    change (the envelope, a hold's standing) may differ after later actions."""
    hold = act("place_execution_hold", history["op"], subject_euid=history["subject"],
               expected_state="READY",
               payload={"hold_code": "QC_FAIL", "reason": "second look"})["hold_euid"]
    before = export_evidence(history["subject"], history["op"])
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,
               '{properties,hold_code}', '"OPERATOR_HOLD"'), '{properties,reason}',
               '"routine"') WHERE euid = %s""", [hold])
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
               '{properties,site}', '"elsewhere"') WHERE euid = %s""", [history["subject"]])
    # its release still needs a second person (the gate reads the code its placing sealed)
    refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", history["op"], subject_euid=history["subject"],
        hold_euid=hold, expected_state="HELD", payload={"reason": "looked again"}))
    act("place_execution_hold", history["op"], subject_euid=history["subject"],
        expected_state="HELD", payload={"hold_code": "LABEL_ISSUE", "reason": "relabel"})
    verdict = verify_bundle(before.data, history["tenant"])
    assert not verdict.ok
    text = "\n".join(verdict.problems)
    assert f"holds[{hold}].properties.hold_code" in text and '"QC_FAIL"' in text
    assert f"holds[{hold}].properties.reason" in text
    assert "subject.properties.site" in text and '"elsewhere"' in text


def test_a_record_re_sealed_in_the_file_is_named_by_its_keyed_seal(history):
    """Re-sealing an edited record in the file makes its sha256 agree again; its keyed seal
    cannot be remade without the server's key, and says so."""
    from bloomops.execution.chain import content_hash

    doc = json.loads(export_evidence(history["subject"], history["op"]).data)
    entry = doc["action_records"][0]
    entry["record"]["reason"] = "nothing happened"
    entry["record"]["chain"]["sha256"] = content_hash(entry["record"])
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert not verdict.ok and verdict.outcomes[1] == "failed"
    assert any(p.startswith(f"file: action_records[{entry['euid']}]") and "keyed seal" in p
               for p in verdict.problems), verdict.problems


def test_a_record_re_sealed_in_the_database_is_named_by_what_was_changed(history):
    """The verdict named record.chain.sha256 (the first key in order), not executed_by,
    the field the insider changed before re-sealing."""
    from bloomops.execution.chain import content_hash

    before = export_evidence(history["subject"], history["op"])
    [row] = fetch_all("SELECT uid, json_addl FROM generic_instance WHERE subtype ="
                      " 'place_execution_hold' AND json_addl->'chain'->>'key' = %s",
                      [history["subject"]])
    body = dict(row["json_addl"], executed_by="supervisor")
    body["chain"] = {**body["chain"], "sha256": content_hash(body)}
    execute("UPDATE generic_instance SET json_addl = %s::jsonb WHERE uid = %s",
            [canonical_bytes(body).decode(), row["uid"]])
    verdict = verify_bundle(before.data, history["tenant"])
    changed = [p for p in verdict.problems if p.startswith("database: action_records[")]
    assert changed and ".record.executed_by: the file has \"qa-lead\"" in changed[0], changed


def test_an_auditor_exports_a_period_of_a_queue_each_bundle_verifiable(history, tmp_path):
    """Only one subject's bundle could be exported at a time, and the people's changes in
    none: an auditor asked for a period and a queue. Each subject acted on in it gets its
    recorded bundle, and the manifest names each file by its sha256."""
    from datetime import timedelta

    from bloomops.accounts.profiles import add_person
    from bloomops.execution import clock
    from bloomops.execution.chain import sha256_hex
    from bloomops.execution.envelope import ts

    other = make_subject("q2")  # in q2 only: not in a q1 export
    add_person("newbie", first_name="New", last_name="Starter", password="Glacier-Copper-58",
               roles=["operator"], reason="joined QA", admin_username="adm")
    day = clock.now()
    out = tmp_path / "set"
    call_command("export_evidence", "--since", ts(day - timedelta(days=1)), "--until",
                 ts(day + timedelta(days=1)), "--queue", "q1", "--out", str(out),
                 "--as", "qa-lead", stdout=io.StringIO())
    manifest = json.loads((out / "manifest.json").read_bytes())
    assert manifest["format"] == "bloomops.evidence-set/1" and manifest["queue_key"] == "q1"
    assert [b["subject_euid"] for b in manifest["bundles"]] == [history["subject"]]
    for entry in manifest["bundles"]:
        data = (out / entry["file"]).read_bytes()
        assert sha256_hex(data) == entry["sha256"]
        assert verify_bundle(data, history["tenant"]).ok
    assert other not in json.dumps(manifest)
    [joined] = [c for c in manifest["people_changes"] if c["username"] == "newbie"]
    assert joined["changed_by"] == "adm" and joined["after"]["roles"] == ["operator"]
    with pytest.raises(CommandError, match="not empty"):
        call_command("export_evidence", "--since", "2026-01-01", "--until", "2027-01-01",
                     "--out", str(out), "--as", "qa-lead")
    with pytest.raises(CommandError, match="FORBIDDEN"):
        call_command("export_evidence", "--since", "2026-01-01", "--until", "2027-01-01",
                     "--out", str(tmp_path / "nobody"), "--as", "worker_service")
    with pytest.raises(CommandError, match="has no zone"):
        call_command("export_evidence", "--since", "2026-01-01T00:00", "--until",
                     "2027-01-01", "--out", str(tmp_path / "z"), "--as", "qa-lead")
    # a misspelt queue exported nothing, and the empty set verified
    with pytest.raises(CommandError, match="No queue 'q1x', and no action names one"):
        call_command("export_evidence", "--since", "2026-01-01", "--until", "2027-01-01",
                     "--queue", "q1x", "--out", str(tmp_path / "typo"), "--as", "qa-lead")
    assert not (tmp_path / "typo").exists()
    # a queue no longer there (replaced under another key, removed by another writer) whose
    # records name it is exported all the same
    execute("UPDATE generic_instance SET is_deleted = true WHERE type = 'execution'"
            " AND subtype = 'queue' AND json_addl->'properties'->>'queue_key' = 'q1'")
    call_command("export_evidence", "--since", ts(day - timedelta(days=1)), "--until",
                 ts(day + timedelta(days=1)), "--queue", "q1", "--out", str(tmp_path / "gone"),
                 "--as", "qa-lead", stdout=io.StringIO())
    gone = json.loads((tmp_path / "gone" / "manifest.json").read_bytes())
    assert [b["subject_euid"] for b in gone["bundles"]] == [history["subject"]]


def test_an_auditor_verifies_a_whole_export_in_one_command(history, tmp_path):
    """A period's export could only be checked bundle by bundle, by hand against its
    manifest: verify_evidence --set checks the manifest, each file's sha256 and each bundle."""
    from datetime import timedelta

    from bloomops.execution import clock
    from bloomops.execution.envelope import ts

    day, out = clock.now(), tmp_path / "set"
    said = io.StringIO()
    call_command("export_evidence", "--since", ts(day - timedelta(days=1)), "--until",
                 ts(day + timedelta(days=1)), "--out", str(out), "--as", "qa-lead",
                 stdout=said)
    noted = said.getvalue().split("manifest.json sha256 ")[1].split()[0]
    checked = io.StringIO()
    call_command("verify_evidence", str(out), "--set", stdout=checked)
    assert f"manifest.json sha256 {noted}" in checked.getvalue()
    assert "VERIFIED: 1 bundle(s)" in checked.getvalue()
    manifest = json.loads((out / "manifest.json").read_bytes())
    bundle = out / manifest["bundles"][0]["file"]
    bundle.write_bytes(bundle.read_bytes() + b" ")  # one byte more than was exported
    with pytest.raises(CommandError, match="1 of 1 bundle"):
        call_command("verify_evidence", str(out), "--set", stdout=io.StringIO(),
                     stderr=io.StringIO())
    (out / "manifest.json").write_bytes(b"[]")
    with pytest.raises(CommandError, match="not a bloomops evidence set"):
        call_command("verify_evidence", str(out), "--set", stdout=io.StringIO())


@pytest.mark.parametrize("properties", [[{"site": "rtp"}], [1, "site"]])
def test_a_file_whose_subject_properties_are_no_object_is_a_verdict(history, properties):
    """Anyone with a role may post a file to verify: a subject whose properties were a list
    of objects (or of mixed types) made the verdict a 500."""
    doc = json.loads(build_bundle(history["subject"], history["tenant"]).data)
    doc["subject"]["properties"] = properties
    verdict = verify_bundle(canonical_bytes(doc), history["tenant"])
    assert not verdict.ok
    assert any("subject.properties: the file has [" in p for p in verdict.problems), \
        verdict.problems


def test_a_queue_s_export_holds_the_subjects_released_and_cancelled_in_it(tenant, tmp_path):
    """A hold's release and a cancel name no queue: a q1 subject released and cancelled in
    the period was missing from q1's export."""
    from datetime import timedelta

    from bloomops.execution import clock
    from bloomops.execution.envelope import ts

    make_queue("q1")
    person("qa-lead", "operator")
    op = actor("operator")
    subject = make_subject("q1")
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"hold_code": "REAGENT_ISSUE", "reason": "bad lot"})
    clock.advance(3 * 86400)
    since = clock.now()
    act("release_execution_hold", op, subject_euid=subject, hold_euid=hold["hold_euid"],
        expected_state="HELD", payload={"reason": "new lot"})
    act("cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "withdrawn"})
    out = tmp_path / "set"
    call_command("export_evidence", "--since", ts(since - timedelta(seconds=1)), "--until",
                 ts(clock.now() + timedelta(days=1)), "--queue", "q1", "--out", str(out),
                 "--as", "qa-lead", stdout=io.StringIO())
    manifest = json.loads((out / "manifest.json").read_bytes())
    assert [b["subject_euid"] for b in manifest["bundles"]] == [subject]
    assert manifest["missing"] == []


def test_a_day_given_to_export_evidence_is_a_day_of_the_labs_zone(settings):
    """--since 2026-11-27 was the UTC day, where the Activity screen an auditor checks the
    set against reads whole days in the lab's zone: a Berlin lab's first hour was left out."""
    from datetime import UTC, datetime

    from bloomops.execution.management.commands.export_evidence import _instant

    settings.TIME_ZONE = "Europe/Berlin"
    assert _instant("2026-11-27", "since") == datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
    # a day given as --until is included whole, as Activity's To (--since D --until D was
    # refused as an empty period)
    assert _instant("2026-07-01", "until") == datetime(2026, 7, 1, 22, 0, tzinfo=UTC)
    assert _instant("2026-07-01T00:00:00+02:00", "until") == datetime(2026, 6, 30, 22, 0,
                                                                      tzinfo=UTC)
    assert _instant("2026-11-27T08:00:00Z", "since") == datetime(2026, 11, 27, 8, tzinfo=UTC)
