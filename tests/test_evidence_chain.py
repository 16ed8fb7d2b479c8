"""The hash chain of action records (docs/RULES.md#evidence): a record altered or removed by
raw SQL is found and named by verify_chain, which exits non-zero."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bloomops.execution.chain import canonical_bytes, content_hash, verify_chains
from bloomops.tapdb.db import execute, fetch_all
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
    assert [b.record_euid for b in report.breaks] == [records[1]["euid"]]
    assert "re-sealed" in report.breaks[0].problem


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
