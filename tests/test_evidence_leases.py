"""A lease against its records (docs/RULES.md#evidence): a claim and each renewal change
nothing on the subject, so removing the newest of them breaks no link and leaves every
revision whole; the lease, later than its newest record, still says it."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bloomops.execution import clock
from bloomops.execution.verification import subject_chain_breaks, verify_chains
from bloomops.tapdb.db import execute, fetch_all
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register, uid
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def leased(tenant):
    """A subject claimed, its lease renewed once a minute later."""
    make_queue("q1")
    svc = actor(*SERVICE)
    worker = register(svc, capabilities=[])
    subject = make_subject("q1")
    lease = claim(svc, worker)["lease_euid"]
    clock.advance(60)
    act("renew_queue_lease", svc, worker_euid=worker, lease_euid=lease)
    return {"tenant": tenant, "subject": subject, "lease": lease, "worker": worker, "svc": svc}


def _records(lease: str) -> list[dict]:
    return fetch_all("""SELECT uid, euid, subtype, json_addl FROM generic_instance
        WHERE type = 'execution_queue' AND json_addl->>'lease_lookup_euid' = %s
        ORDER BY uid""", [lease])


def _remove(uid_: int) -> None:
    """A row and its edges gone, as an owner bypassing TapDB's triggers removes rows."""
    execute("SET LOCAL session_replication_role = replica")
    execute("DELETE FROM generic_instance_lineage WHERE parent_instance_uid = %s", [uid_])
    execute("DELETE FROM generic_instance WHERE uid = %s", [uid_])
    execute("SET LOCAL session_replication_role = DEFAULT")


def _said(leased: dict) -> list[tuple[str, str, str]]:
    """What verify_chain and the inspector say, which must agree."""
    whole = verify_chains(leased["tenant"]).breaks
    inspector = subject_chain_breaks(leased["tenant"], leased["subject"],
                                     uid(leased["subject"]))
    assert [str(b) for b in whole] == [str(b) for b in inspector]
    return [(b.key, b.record_euid, b.problem) for b in whole]


def test_a_claimed_and_renewed_lease_verifies(leased):
    assert _said(leased) == []
    call_command("verify_chain")


def test_a_removed_renewal_is_named_by_the_lease(leased):
    claimed, renewed = _records(leased["lease"])
    assert renewed["subtype"] == "renew_queue_lease"
    _remove(renewed["uid"])
    lease = leased["lease"]
    gave = claimed["json_addl"]["result"]["expires_at"]
    runs = renewed["json_addl"]["result"]["expires_at"]
    assert _said(leased) == [(lease, claimed["euid"], (
        f"is the newest record of a claim or renewal of lease {lease} and gave it until"
        f" {gave}, but the lease runs until {runs} (heartbeat"
        f" {renewed['json_addl']['executed_at']}): a newer renewal's record was removed, or"
        " the lease was extended without one"))]
    with pytest.raises(CommandError, match="1 broken"):
        call_command("verify_chain")


def test_a_lease_extended_in_the_database_is_named(leased):
    """An insider keeping a claim alive for a worker that stopped: no record says so."""
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,expires_at}', '"2099-01-01T00:00:00.000000Z"') WHERE euid = %s""",
            [leased["lease"]])
    [(key, record, problem)] = _said(leased)
    assert (key, record) == (leased["lease"], _records(leased["lease"])[-1]["euid"])
    assert problem.endswith("the lease runs until 2099-01-01T00:00:00.000000Z (heartbeat"
                            f" {_records(leased['lease'])[-1]['json_addl']['executed_at']}):"
                            " a newer renewal's record was removed, or the lease was"
                            " extended without one")


def test_a_lease_set_back_in_the_database_is_named(leased):
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,heartbeat_at}', '"2001-01-01T00:00:00.000000Z"') WHERE euid = %s""",
            [leased["lease"]])
    [(_, _, problem)] = _said(leased)
    assert problem.endswith("the lease was set back without a record")


def test_a_removed_claim_record_is_named_by_its_lease(leased):
    """The claim changes no revision: while the subject is leased, removing its record left
    a lease, an attempt and a worker busy with no record of who claimed what, or when."""
    for record in _records(leased["lease"]):
        _remove(record["uid"])
    assert _said(leased) == [(leased["lease"], leased["lease"], "is named by no action"
                              " record: the record of its claim was removed, or the lease"
                              " was made without one")]
    [said] = verify_chains(leased["tenant"]).breaks
    assert str(said).startswith(f"chain {leased['lease']}: lease {leased['lease']}: is named")


def test_a_completed_lease_whose_claim_record_was_removed_is_named(leased):
    act("complete_queue_execution", leased["svc"], worker_euid=leased["worker"],
        lease_euid=leased["lease"], expected_state="READY")
    claimed, renewed, completed = _records(leased["lease"])
    assert completed["subtype"] == "complete_queue_execution"
    _remove(claimed["uid"])
    _remove(renewed["uid"])
    breaks = {(b.key, b.record_euid, b.problem) for b in verify_chains(leased["tenant"]).breaks}
    assert (leased["lease"], completed["euid"], f"names lease {leased['lease']}, but no record"
            " of its claim does: that record was removed") in breaks


def test_the_inspector_names_a_lease_no_record_accounts_for(leased, client, users):
    for record in _records(leased["lease"]):
        _remove(record["uid"])
    html = signed_in(client, users["operator"]).get(
        f"/subjects/{leased['subject']}/").content.decode()
    banner = html.split('id="chain-broken"')[1].split("</div>")[0]
    assert (f"Lease <code>{leased['lease']}</code> is named by no action record: the record"
            " of its claim was removed") in banner


def test_a_renewal_is_in_its_subjects_history_and_bundle(leased):
    """Renewals were linked to the lease alone: no subject's bundle held them, and removing
    one between two others was seen by a walk of every chain alone, never the subject's."""
    from bloomops.execution.exports import export_evidence

    svc = leased["svc"]
    act("renew_queue_lease", svc, worker_euid=leased["worker"], lease_euid=leased["lease"])
    bundle = json.loads(export_evidence(leased["subject"], actor("operator")).data)
    renewals = [r for r in bundle["action_records"]
                if r["record"]["action_key"] == "renew_queue_lease"]
    assert len(renewals) == 2
    _remove(_records(leased["lease"])[1]["uid"])  # the first renewal, between two records
    [said] = subject_chain_breaks(leased["tenant"], leased["subject"], uid(leased["subject"]))
    assert said.key == leased["lease"] and "a record was removed" in said.problem


def test_a_lease_given_to_another_worker_in_the_database_is_named(leased):
    other = register(actor("worker_service", username="svc-2"), capabilities=[])
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,worker_lookup_euid}', to_jsonb(%s::text)) WHERE euid = %s""",
            [other, leased["lease"]])
    [(key, _, problem)] = _said(leased)
    assert key == leased["lease"] and problem == (
        f"gave lease {leased['lease']} to worker {leased['worker']}, but the lease names"
        f" {other}: changed outside bloomops")


def test_an_expiry_or_renewal_is_found_by_its_subject_and_in_a_periods_export(leased):
    """An admin's forced expiry ("instrument crashed; freeing the sample") named no subject:
    Activity's search by subject and a period's export (an auditor's "every subject acted on
    between ...") left it out, and a renewal too; a sweep ending two claims named neither."""
    from bloomops.execution import selectors
    from bloomops.execution.envelope import ts
    from bloomops.execution.selectors.evidence import subjects_acted_on

    admin, svc = actor("admin", username="adm"), leased["svc"]
    start = ts(clock.now())
    clock.advance(60)
    act("expire_queue_lease", admin, lease_euid=leased["lease"],
        payload={"reason": "instrument crashed; freeing the sample"})
    clock.advance(60)
    assert subjects_acted_on(start, ts(clock.now())) == [leased["subject"]]
    found = [(a["action_key"], a["queue_key"]) for a in selectors.activity(
        subject_euids=[leased["subject"]])]
    assert ("expire_queue_lease", "q1") in found and ("renew_queue_lease", "q1") in found
    # a sweep of two claims past their time names both subjects
    make_subject("q1", name="swept")  # beside the first, ready again since its expiry
    worker = register(svc, "demo://sweep", capabilities=[], max_concurrent_leases=2)
    claims = [claim(svc, worker, subject_euid=None) for _ in range(2)]
    two = [c["subject_euid"] for c in claims]
    leases = [c["lease_euid"] for c in claims]
    clock.advance(3600)
    sweep_from = ts(clock.now())
    assert act("expire_queue_lease", admin)["expired_lease_euids"] == leases
    clock.advance(1)
    assert sorted(subjects_acted_on(sweep_from, ts(clock.now()))) == sorted(two)
    for euid in two:
        assert "expire_queue_lease" in [
            a["action_key"] for a in selectors.activity(subject_euids=[euid])]


def test_an_expiry_names_its_subject_by_lineage_not_by_the_leases_copy(leased, client, users):
    """A lease whose copy named another subject (another writer's, or "BLOOM/42") was
    expired: the record sealed the copy's subject, a period's export held the wrong bundle,
    and Activity answered 500 on a name no subject page can have."""
    from bloomops.execution import selectors
    from bloomops.execution.envelope import ts
    from bloomops.execution.selectors.evidence import subjects_acted_on

    other = make_subject("q1", name="not the leased one")
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,
        '{properties,subject_lookup_euid}', to_jsonb(%s::text)),
        '{properties,queue_lookup_key}', '{"x": 1}') WHERE euid = %s""",
            [other, leased["lease"]])
    start = ts(clock.now())
    clock.advance(60)
    act("expire_queue_lease", actor("admin", username="adm"), lease_euid=leased["lease"],
        payload={"reason": "instrument crashed"})
    clock.advance(1)
    assert subjects_acted_on(start, ts(clock.now())) == [leased["subject"]]
    # a copy's queue that is no text is not sealed as the record's queue (an object was)
    [expired] = [a for a in selectors.activity(subject_euids=[leased["subject"]])
                 if a["action_key"] == "expire_queue_lease"]
    assert expired["queue_key"] == ""
    assert "expire_queue_lease" not in [a["action_key"] for a in selectors.activity(
        subject_euids=[other])]
    # a sweep of a lease whose copy is another writer's text: named by lineage too
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,subject_lookup_euid}', '"BLOOM/42"') WHERE euid = %s""",
            [claim(leased["svc"], leased["worker"])["lease_euid"]])
    clock.advance(7200)
    swept = act("expire_queue_lease", actor("admin", username="adm"))
    assert "BLOOM/42" not in swept["subject_euids"]
    page = signed_in(client, users["operator"]).get("/activity/?housekeeping=1")
    assert page.status_code == 200
