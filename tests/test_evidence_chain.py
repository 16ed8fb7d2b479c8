"""The hash chain of action records (docs/RULES.md#evidence): a record altered or removed by
raw SQL is found and named by verify_chain, which exits non-zero."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bloomops.execution.chain import (
    canonical_bytes,
    content_hash,
    with_keyed_seal,
)
from bloomops.execution.context import ACTION_CODE
from bloomops.execution.objects import REL
from bloomops.execution.verification import verify_chains
from bloomops.tapdb.db import execute, fetch_all
from bloomops.tapdb.instances import create_instance, link_many
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(tenant):
    """A subject with four actions on it (claim, complete, hold, release) and a worker."""
    make_queue("q1")
    make_queue("q2")
    svc, op = actor(*SERVICE), actor("operator")
    worker = register(svc, capabilities=[])
    subject = make_subject("q1")
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"next_queue_key": "q2"})
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"hold_code": "REAGENT_ISSUE", "reason": "bad run"})
    act("release_execution_hold", op, subject_euid=subject, hold_euid=hold["hold_euid"],
        expected_state="HELD", payload={"reason": "rerun passed"})
    return {"subject": subject, "worker": worker, "tenant": tenant}


def _chain(key: str) -> list[dict]:
    return fetch_all("SELECT uid, euid, json_addl FROM generic_instance WHERE type ="
                     " 'execution_queue' AND json_addl->'chain'->>'key' = %s ORDER BY uid", [key])


def test_canonical_form_is_stable_across_spellings_of_one_value():
    assert canonical_bytes({"b": 2.0, "a": [1e2, 0.5, "é"]}) == \
        '{"a":[100,0.5,"é"],"b":2}'.encode()
    with pytest.raises(ValueError):
        canonical_bytes({"x": float("nan")})


def test_each_record_links_to_the_previous_record_on_its_target(history):
    records = _chain(history["subject"])
    assert len(records) >= 3
    previous = None
    for row in records:
        entry = row["json_addl"]["chain"]
        assert entry["sha256"] == content_hash(row["json_addl"])
        assert entry["previous_euid"] == (previous["euid"] if previous else None)
        previous = row
    report = verify_chains(history["tenant"])
    assert report.ok and report.records >= 5 and report.chains >= 2


def test_a_record_altered_by_raw_sql_is_named(history):
    records = _chain(history["subject"])
    victim = records[1]
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{executed_by}',"
            " '\"mallory\"') WHERE uid = %s", [victim["uid"]])
    report = verify_chains(history["tenant"], history["subject"])
    assert [b.record_euid for b in report.breaks] == [victim["euid"]]
    assert "content differs from its seal" in report.breaks[0].problem
    with pytest.raises(CommandError, match=victim["euid"]):
        call_command("verify_chain", history["subject"])
    # The other chains are intact, and the command says which chain broke.
    assert verify_chains(history["tenant"], history["worker"]).ok


def test_a_resealed_record_breaks_the_next_link(history):
    records = _chain(history["subject"])
    victim = records[0]
    body = dict(victim["json_addl"], reason="forged")
    body["chain"] = dict(body["chain"])
    body["chain"]["sha256"] = content_hash(body)
    execute("UPDATE generic_instance SET json_addl = %s::jsonb WHERE uid = %s",
            [canonical_bytes(body).decode(), victim["uid"]])
    report = verify_chains(history["tenant"], history["subject"])
    # the keyed seal names the re-sealed record itself, before the next link would
    assert [b.record_euid for b in report.breaks] == [victim["euid"]]
    assert "re-sealed outside bloomops" in report.breaks[0].problem


def _reseal_from(records: list[dict], first: int, edit, keyed) -> None:
    """What an insider with the database alone can do: edit a record, then re-seal it and
    every later one so each sha256 and each previous link agree again."""
    previous = records[first - 1]["json_addl"]["chain"]["sha256"] if first else None
    for i, row in enumerate(records[first:]):
        body = dict(row["json_addl"])
        if i == 0:
            body = edit(body)
        entry = {k: v for k, v in body["chain"].items() if k not in ("hmac", "key_id")}
        entry["previous_sha256"] = previous
        body["chain"] = entry
        entry["sha256"] = content_hash(body)
        body["chain"] = keyed(entry)
        previous = entry["sha256"]
        execute("UPDATE generic_instance SET json_addl = %s::jsonb WHERE uid = %s",
                [canonical_bytes(body).decode(), row["uid"]])


@pytest.mark.parametrize("keyed, said", [
    (lambda e: e, "carries no keyed seal"),  # the keyed seals dropped
    (lambda e: {**e, "key_id": "0" * 16, "hmac": "f" * 64}, "a key this server does not hold"),
    (lambda e: {**e, "key_id": with_keyed_seal(e)["key_id"], "hmac": "f" * 64}, "does not match"),
])
def test_a_chain_re_sealed_without_the_seal_key_does_not_verify(history, keyed, said):
    """An auditor edited a record and re-sealed every later one from the canonical form the
    docs give: verify_chain read "intact". The keyed seal needs a key the database does not
    hold: dropped, made with another key, or forged, the first re-sealed record is named."""
    records = _chain(history["subject"])
    _reseal_from(records, 1, lambda body: {**body, "executed_by": "supervisor"}, keyed)
    report = verify_chains(history["tenant"], history["subject"])
    assert [b.record_euid for b in report.breaks] == [records[1]["euid"]]
    assert said in report.breaks[0].problem


def test_a_removed_record_is_named_by_the_next_link(history):
    records = _chain(history["subject"])
    victim = records[1]
    # TapDB's triggers turn a DELETE into a soft delete; an owner bypassing them removes rows.
    execute("SET LOCAL session_replication_role = replica")
    execute("DELETE FROM generic_instance_lineage WHERE parent_instance_uid = %s",
            [victim["uid"]])
    execute("DELETE FROM generic_instance WHERE uid = %s", [victim["uid"]])
    execute("SET LOCAL session_replication_role = DEFAULT")
    report = verify_chains(history["tenant"])
    assert len(report.breaks) == 1, [str(b) for b in report.breaks]
    assert report.breaks[0].record_euid == records[2]["euid"]
    assert victim["euid"] in report.breaks[0].problem
    with pytest.raises(CommandError, match="1 broken"):
        call_command("verify_chain")


def _remove(record: dict) -> None:
    """A record and its edges gone, as an owner bypassing TapDB's triggers removes rows."""
    execute("SET LOCAL session_replication_role = replica")
    execute("DELETE FROM generic_instance_lineage WHERE parent_instance_uid = %s",
            [record["uid"]])
    execute("DELETE FROM generic_instance WHERE uid = %s", [record["uid"]])
    execute("SET LOCAL session_replication_role = DEFAULT")


def test_a_removed_newest_record_is_named_by_the_subjects_revision(history, capsys):
    """No next link names a chain's newest record: removing the hold's release left every
    chain intact, a released hold with no record of who released it or why."""
    records = _chain(history["subject"])
    newest, before = records[-1], records[-2]
    assert newest["json_addl"]["action_key"] == "release_execution_hold"
    _remove(newest)
    left = before["json_addl"]["result"]["revision"]
    hold = newest["json_addl"]["result"]["hold_euids"][0]
    for report in (verify_chains(history["tenant"]),
                   verify_chains(history["tenant"], history["subject"])):
        assert [(b.key, b.record_euid, b.problem) for b in report.breaks] == [(
            history["subject"], before["euid"], "is the subject's newest action record and"
            f" left it at revision {left}, but the subject is at revision {left + 1}: a newer"
            " record was removed, or the subject was changed without one"), (
            history["subject"], hold, "reads RELEASED, but no action record ended it: changed"
            " outside bloomops")]
    with pytest.raises(CommandError, match="2 broken"):
        call_command("verify_chain")
    # the next action's record links to the one before the removed one, the chain intact
    # again: the jump of its revision still says a record is missing
    later = act("place_execution_hold", actor("operator"), subject_euid=history["subject"],
                expected_state="READY", payload={"hold_code": "REAGENT_ISSUE",
                                                 "reason": "again"})
    report = verify_chains(history["tenant"], history["subject"])
    assert [(b.record_euid, b.problem) for b in report.breaks] == [(
        later.action_euid, f"left the subject at revision {left + 2}, but the record before"
        f" it, {before['euid']}, left it at {left}: a record between them was removed"), (
        hold, "reads RELEASED, but no action record ended it: changed outside bloomops")]


def act_by_another_writer(subject: str) -> None:
    """A record as Bloom writes one of its actions on the subject: no idempotency scope, no
    revision kept, no seal; linked to the subject by its executed_on edge."""
    target = fetch_all("SELECT uid, tenant_id FROM generic_instance WHERE euid = %s",
                       [subject])[0]
    made = create_instance(ACTION_CODE.format(key="place_execution_hold"),
                           name=f"place_execution_hold@{subject}", properties={},
                           tenant_id=target["tenant_id"], extra={
                               "action_group": "execution_queue",
                               "action_key": "place_execution_hold",
                               "result": {"status": "success"}, "executed_by": "bloom",
                               "executed_at": "2026-11-27T11:00:00.000000+00:00",
                               "subject_lookup_euid": subject, "target_euid": subject})
    link_many([(made.uid, target["uid"], REL["executed_on"])], tenant_id=target["tenant_id"])

def test_a_subject_changed_by_another_writer_with_its_own_record_is_not_flagged(history):
    """Bloom writes its own records (no revision kept) when it changes a subject: the
    subject's newest record is then Bloom's, and nothing is said of the revision."""
    subject = history["subject"]
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,execution,revision}', to_jsonb(
            (json_addl->'properties'->'execution'->>'revision')::int + 1))
        WHERE euid = %s""", [subject])
    assert len(verify_chains(history["tenant"], subject).breaks) == 1  # no record: said
    act_by_another_writer(subject)
    assert verify_chains(history["tenant"], subject).breaks == []


def test_a_record_stripped_of_its_seal_is_named(history):
    victim = _chain(history["subject"])[1]
    execute("UPDATE generic_instance SET json_addl = json_addl - 'chain' WHERE uid = %s",
            [victim["uid"]])
    report = verify_chains(history["tenant"], history["subject"])
    assert [(b.record_euid, b.problem) for b in report.breaks] == [
        (victim["euid"], "carries no chain entry (its seal was removed)")]


def test_a_deleted_record_is_named(history):
    victim = _chain(history["subject"])[0]
    execute("DELETE FROM generic_instance WHERE uid = %s", [victim["uid"]])
    report = verify_chains(history["tenant"], history["subject"])
    assert report.breaks[0].record_euid == victim["euid"]
    assert "deleted" in report.breaks[0].problem


def test_intact_chains_pass_the_command(history, capsys):
    call_command("verify_chain")
    assert "intact" in capsys.readouterr().out


@pytest.mark.usefixtures("committed")
def test_concurrent_actions_on_one_target_keep_one_linear_chain(tenant):
    """Racing heartbeats of one worker, each on its own connection: its chain stays one line
    (no two records name the same predecessor)."""
    from tests.test_engine_concurrency import _run_threads

    svc = actor(*SERVICE)
    worker = register(svc, capabilities=[])
    outcomes = _run_threads(lambda i: act("heartbeat_worker", svc, worker_euid=worker), 5)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    chain = _chain(worker)
    assert len(chain) == 6  # registered, five heartbeats
    named = [r["json_addl"]["chain"]["previous_euid"] for r in chain]
    assert named == [None, *(r["euid"] for r in chain[:-1])]
    assert verify_chains(tenant).ok


def _strip_keyed_seals() -> None:
    """The records as a deployment had them before it had a seal key."""
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{chain}',"
            " (json_addl->'chain') - 'hmac' - 'key_id') WHERE json_addl ? 'chain'")


def test_records_from_before_the_seal_key_are_keyed_once_and_old_bundles_still_verify(
        history, capsys):
    from bloomops.execution.evidence import verify_bundle
    from bloomops.execution.exports import export_evidence

    _strip_keyed_seals()
    before = export_evidence(history["subject"], actor("operator"))
    report = verify_chains(history["tenant"], history["subject"])
    assert report.breaks and "carries no keyed seal" in report.breaks[0].problem
    call_command("key_chains")
    assert "record(s) keyed" in capsys.readouterr().out
    assert verify_chains(history["tenant"]).ok
    # keying added a seal, not a change to what was done: the bundle made before verifies
    assert verify_bundle(before.data, history["tenant"]).ok


def test_a_broken_chain_is_not_keyed(history):
    _strip_keyed_seals()
    [victim, *_] = _chain(history["subject"])
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, '{reason}',"
            " '\"forged\"') WHERE uid = %s", [victim["uid"]])
    with pytest.raises(CommandError, match="a chain is broken"):
        call_command("key_chains")
    assert fetch_all("SELECT uid FROM generic_instance WHERE json_addl->'chain' ? 'hmac'") == []


def test_a_chain_re_sealed_without_the_key_is_not_keyed_by_key_chains(history):
    """The break's own words send the admin to key_chains: keying every unkeyed record
    whose sha256 chain held laundered an insider's re-sealed edit. A record written after
    the seal key that carries none was re-sealed outside bloomops, never from before it."""
    records = _chain(history["subject"])
    _reseal_from(records, 1, lambda body: {**body, "executed_by": "supervisor"}, lambda e: e)
    with pytest.raises(CommandError, match="written after the seal key"):
        call_command("key_chains")
    assert not verify_chains(history["tenant"], history["subject"]).ok


@pytest.mark.parametrize("value", [6.02e23, 1.2345678901234567e19, -3e17, 1e39])
def test_a_large_measurement_leaves_its_record_and_bundle_intact(tenant, value):
    """PostgreSQL gives a float of 1e16 or more back as the integer its digits spell: the
    record, sealed over the float, then read as tampered, and its bundle did not verify."""
    from bloomops.execution.evidence import verify_bundle
    from bloomops.execution.exports import export_evidence

    make_queue("q1")
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=[])
    subject = make_subject("q1")
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"result_snapshot": {"copies_per_ul": value}})
    report = verify_chains(tenant, subject)
    assert report.ok, [b.problem for b in report.breaks]
    export = export_evidence(subject, actor("operator"))
    verdict = verify_bundle(export.data, tenant)
    assert verdict.ok, verdict.problems


@pytest.mark.parametrize("value", [1e40, -2.5e300])
def test_a_number_no_stored_integer_can_hold_is_refused(tenant, value):
    """From 1e40 up PostgreSQL would keep an integer of more than 40 digits, which no
    bundle's reader takes: the server refused to verify its own export."""
    from bloomops.execution.errors import ActionError
    from tests.engine import counts

    make_queue("q1")
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=[])
    make_subject("q1")
    lease = claim(svc, worker)
    before = counts()
    with pytest.raises(ActionError) as refused:
        act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
            worker_euid=worker, expected_state="READY",
            payload={"result_snapshot": {"reads": [1, value]}})
    assert refused.value.code == "VALIDATION_ERROR"
    assert refused.value.details["field"] == "payload.result_snapshot.reads[1]"
    assert counts() == before


def test_a_subject_set_back_to_an_earlier_state_is_named(history):
    """An envelope written back as it was before its last action (a held subject made READY
    again in the database) matched no seal and broke no link."""
    subject = history["subject"]
    records = _chain(subject)
    left = records[-1]["json_addl"]["result"]["revision"]
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,execution,revision}', to_jsonb(%s::int)) WHERE euid = %s""",
            [left - 1, subject])
    report = verify_chains(history["tenant"], subject)
    assert [(b.record_euid, b.problem) for b in report.breaks] == [(
        records[-1]["euid"], f"is the subject's newest action record and left it at revision"
        f" {left}, but the subject is at revision {left - 1}: the subject was set back to an"
        " earlier state without a record")]
