"""The envelope's seal (docs/RULES.md#evidence): every envelope the executor writes carries a
keyed seal its action's record keeps too, so a subject changed outside bloomops, or whose
newest record was removed or made to look like another writer's, is named even where the
chains and the revisions stay whole."""

from __future__ import annotations

import json

import pytest

from bloomops.execution.chain import envelope_sealed
from bloomops.execution.verification import subject_chain_breaks, verify_chains
from bloomops.tapdb.db import execute, fetch_all
from tests.engine import act, actor, envelope, make_queue, make_subject, uid

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(tenant):
    """A subject held and released by an operator: two records that sealed its envelope."""
    make_queue("q1")
    op = actor("operator")
    subject = make_subject("q1")
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"reason": "check the label"})
    first = envelope(subject)
    act("release_execution_hold", op, subject_euid=subject, hold_euid=hold["hold_euid"],
        expected_state="HELD", payload={"reason": "label fine"})
    return {"tenant": tenant, "subject": subject, "first": first}


def _said(held: dict) -> list[tuple[str, str, str]]:
    whole = verify_chains(held["tenant"]).breaks
    inspector = subject_chain_breaks(held["tenant"], held["subject"], uid(held["subject"]))
    assert [str(b) for b in whole] == [str(b) for b in inspector]
    return [(b.what, b.record_euid, b.problem) for b in whole]


def _newest_record() -> dict:
    return fetch_all("SELECT uid, euid, json_addl FROM generic_instance WHERE type ="
                     " 'execution_queue' ORDER BY uid DESC LIMIT 1")[0]


def _set_envelope(euid: str, env: dict) -> None:
    execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,execution}', %s::jsonb) WHERE euid = %s", [json.dumps(env), euid])


def test_every_envelope_the_executor_writes_is_sealed_and_verifies(held):
    env = envelope(held["subject"])
    assert envelope_sealed(held["tenant"], held["subject"], env)
    assert _newest_record()["json_addl"]["result"]["envelope_seal"] == env["seal"]
    assert _said(held) == []


@pytest.mark.parametrize("disguise", [
    {"bench_history_uid": 1, "executed_by": "supervisor"},
    {"idempotency_scope": None, "executed_by": "supervisor"}])
def test_the_newest_record_made_to_look_like_another_writers_is_named(held, disguise):
    """Its seal stripped and a mark of another writer added, the newest record (the release)
    read as Bloom's: the revisions started again after it, and the inspector showed the
    supervisor as the one who released the hold."""
    record = _newest_record()
    body = {k: v for k, v in record["json_addl"].items() if k != "chain"}
    body.update(disguise)
    if disguise.get("idempotency_scope", 1) is None:
        body.pop("idempotency_scope")
    execute("UPDATE generic_instance SET json_addl = %s::jsonb WHERE uid = %s",
            [json.dumps(body), record["uid"]])
    assert _said(held) == [("subject", held["subject"], (
        "carries the seal of an action of bloomops whose record is not among its records:"
        " that record was removed, or made to look like another writer's"))]


@pytest.mark.parametrize("edit", [
    {"state": "COMPLETED", "terminal": True}, {"priority": 999}, {"revision": None}])
def test_an_envelope_changed_in_the_database_is_named(held, edit):
    """COMPLETED written over a READY subject, its revision kept: every check verified, and
    the inspector showed it finished. Dropping the revision turned the revision check off."""
    env = {**envelope(held["subject"]), **edit}
    _set_envelope(held["subject"], {k: v for k, v in env.items() if v is not None})
    assert _said(held) == [("record", _newest_record()["euid"], (
        "is the newest record that sealed the subject's envelope, which has changed since"
        " with no record: changed outside bloomops"))]


def test_an_envelope_stripped_of_its_seal_is_named(held):
    env = envelope(held["subject"])
    env.pop("seal")
    _set_envelope(held["subject"], env)
    assert _said(held) == [("record", _newest_record()["euid"], (
        "sealed the subject's envelope, which now carries no seal: the envelope was"
        " rewritten outside bloomops"))]


def test_an_envelope_set_back_to_an_earlier_sealed_one_is_named(held):
    """The envelope of the hold, its seal and all, put back after the release (at today's
    revision, as the revisions would say it otherwise): held again, unseen."""
    _set_envelope(held["subject"], {**held["first"],
                                    "revision": envelope(held["subject"])["revision"]})
    [(what, record, problem)] = _said(held)
    assert (what, record) == ("record", _newest_record()["euid"])
    assert problem.endswith("carries an earlier record's seal: it was set back to an"
                            " earlier state")


def test_another_writer_changing_the_envelope_with_its_own_record_is_not_flagged(held):
    """Bloom keeps the keys it does not know, the seal among them, and records its own
    actions: an envelope it changed after bloomops is later history."""
    from tests.test_evidence_chain import act_by_another_writer

    env = envelope(held["subject"])
    _set_envelope(held["subject"], {**env, "state": "HELD", "hold_state": "ACTIVE"})
    assert len(_said(held)) == 1
    act_by_another_writer(held["subject"])
    assert _said(held) == []
