"""Two-person approvals (docs/RULES.md#approvals): the life cycle, each refusal writing
nothing, the fail-closed policy, the e-signature's password kept out of every record, and
two approvers at once."""

from __future__ import annotations

import io
import logging
import re
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import F
from django.test import Client

from bloomops.accounts.signatures import signature_problem
from bloomops.execution import clock, selectors
from bloomops.execution.approvals import SubjectFlags, check_settings, rule_for
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import load, save_props
from bloomops.tapdb.db import execute, fetch_value
from bloomops.tapdb.tenancy import tenant_of
from tests.approval_support import (
    dead_lettered,
    decide,
    integrity_held,
    password_of,
    person,
    request_release,
)
from tests.engine import (
    act,
    counts,
    envelope,
    make_queue,
    props,
    refused,
)
from tests.plans import plan_of


@pytest.fixture
def lab(db, tenant):
    make_queue("q1")
    return {"ann": person("ann", "operator", full_name="Ann Asker"),
            "bob": person("bob", "operator", full_name="Bob Checker"),
            "cat": person("cat", "operator"), "adm": person("adm", "admin")}


def test_releasing_an_integrity_hold_takes_a_second_person(lab):
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann)
    direct = refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "rerun passed"}))
    assert direct.details["request"] == {
        "subject_euid": subject, "hold_euid": hold, "queue_key": None,
        "action_key": "release_execution_hold", "parameters": {"reason": "rerun passed"},
        "reason": "rerun passed"}

    asked = request_release(ann, subject, hold)
    approval = asked["approval_euid"]
    assert asked["approval_status"] == "REQUESTED"
    assert envelope(subject)["state"] == "HELD"  # asking changes nothing on the subject
    [row] = selectors.approvals(status="REQUESTED")
    assert (row.euid, row.props["requested_by"], row.props["hold_lookup_euid"]) == (
        approval, "ann", hold)
    # the hold and the request are linked by lineage (what an auditor follows)
    assert fetch_value(
        """SELECT count(*) FROM generic_instance_lineage l
           JOIN generic_instance h ON h.uid = l.parent_instance_uid
           JOIN generic_instance a ON a.uid = l.child_instance_uid
           WHERE h.euid = %s AND a.euid = %s AND NOT l.is_deleted
             AND l.relationship_type = 'execution_hold_approval'""", [hold, approval]) == 1
    assert selectors.approvals_waiting().count == 1

    refused("SELF_APPROVAL", lambda: decide(ann, approval))
    # ... whatever password she gives: none would do, and a wrong one is not counted
    # towards locking her signing (and sign-in) out
    for _ in range(6):
        refused("SELF_APPROVAL", lambda: decide(ann, approval, password="not-it"))
    assert signature_problem("ann", password_of("ann"), None) is None
    refused("SIGNATURE_INVALID", lambda: decide(bob, approval, password="not-it"))
    refused("SIGNATURE_INVALID", lambda: decide(bob, approval, password=password_of("ann")))
    # ann's hash copied into bob's row (someone who can write auth_user): her password is
    # then bob's as far as Django knows; the hash is not sealed to his account
    stored = fetch_value("SELECT password FROM auth_user WHERE username = 'bob'")
    execute("UPDATE auth_user SET password = (SELECT password FROM auth_user WHERE username"
            " = 'ann') WHERE username = 'bob'")
    refused("SIGNATURE_INVALID", lambda: decide(bob, approval, password=password_of("ann")))
    execute("UPDATE auth_user SET password = %s WHERE username = 'bob'", [stored])

    done = decide(bob, approval)
    assert done["approval_status"] == "APPROVED" and done["state"] == "READY"
    assert envelope(subject)["state"] == "READY"
    assert props(hold)["status"] == "RELEASED"
    p = props(approval)
    assert p["status"] == "APPROVED" and p["decided_by"] == "bob"
    assert p["signature"] == {"meaning": "approved", "signer": "bob",
                              "signer_name": "Bob Checker", "signed_at": p["decided_at"],
                              "method": "password re-entry", "reason": "checked the rerun"}
    # The release's own record names the approval and both people.
    history = selectors.action_history(selectors.subject_diagnostics(subject).uid)
    by_key = {a["action_key"]: a for a in history}
    assert {"request_approval", "decide_approval", "release_execution_hold"} <= set(by_key)
    approved = by_key["release_execution_hold"]
    assert approved["executed_by"] == "bob"
    assert approved["result"]["approval"]["requested_by"] == "ann"
    assert approved["result"]["approval"]["approved_by"] == "bob"
    assert approved["result"]["approval"]["approval_euid"] == approval
    assert selectors.approvals_waiting().count == 0
    refused("APPROVAL_NOT_PENDING", lambda: decide(lab["cat"], approval))


def test_a_rejection_ends_the_request_and_changes_nothing_else(lab):
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann, "CONTAMINATION")
    approval = request_release(ann, subject, hold)["approval_euid"]
    done = decide(bob, approval, "REJECTED", reason="the rerun is not documented")
    assert done["approval_status"] == "REJECTED" and "executed_action_euid" not in done.result
    assert envelope(subject)["state"] == "HELD" and props(hold)["status"] == "ACTIVE"
    assert props(approval)["signature"]["meaning"] == "rejected"
    refused("APPROVAL_NOT_PENDING", lambda: decide(lab["cat"], approval))


def test_an_expired_request_reads_expired_and_cannot_be_decided(lab, settings):
    settings.BLOOMOPS_APPROVAL_TTL_SECONDS = 3600
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    clock.advance(3601)
    assert [a.status for a in selectors.approvals(subject_euid=subject)] == ["EXPIRED"]
    assert selectors.approvals_waiting().count == 0
    refused("APPROVAL_EXPIRED", lambda: decide(bob, approval))
    refused("APPROVAL_EXPIRED", lambda: act("cancel_approval", ann,
                                            payload={"approval_euid": approval,
                                                     "reason": "not needed"}))
    # Expired is not waiting: the same action can be asked for again.
    again = request_release(ann, subject, hold)
    assert decide(bob, again["approval_euid"])["state"] == "READY"


def test_a_subject_changed_since_the_request_must_be_asked_again(lab, tenant):
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    # Another writer changes the subject (its envelope revision moves on).
    obj = load(euid=subject, tenant=tenant)
    env = dict(obj.envelope, revision=obj.envelope["revision"] + 1, priority=5)
    save_props(obj, {**obj.props, "execution": env})
    err = refused("REVISION_CONFLICT", lambda: decide(bob, approval))
    assert "request the approval again" in err.message
    assert props(approval)["status"] == "REQUESTED"
    # A rejection needs no current revision: nothing would run.
    assert decide(bob, approval, "REJECTED")["approval_status"] == "REJECTED"


def test_the_requester_withdraws_others_may_not(lab):
    ann, bob, adm = lab["ann"], lab["bob"], lab["adm"]
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    refused("FORBIDDEN", lambda: act("cancel_approval", bob,
                                     payload={"approval_euid": approval, "reason": "mine"}))
    # withdrawing is on the record with its reason, as a decision is
    refused("VALIDATION_ERROR", lambda: act("cancel_approval", ann,
                                            payload={"approval_euid": approval, "reason": " "}))
    refused("APPROVAL_PENDING", lambda: request_release(bob, subject, hold))
    done = act("cancel_approval", ann, payload={"approval_euid": approval,
                                                "reason": "asked the wrong person"})
    assert done["approval_status"] == "CANCELED"
    assert props(approval)["canceled_by"] == "ann"
    refused("APPROVAL_NOT_PENDING", lambda: decide(bob, approval))
    other = request_release(bob, subject, hold)["approval_euid"]
    assert act("cancel_approval", adm, payload={"approval_euid": other, "reason": "stale"})[
        "approval_status"] == "CANCELED"


def test_requests_the_policy_does_not_gate_or_cannot_run_are_refused(lab):
    ann = lab["ann"]
    subject, hold = integrity_held(ann, "LABEL_ISSUE")
    refused("APPROVAL_NOT_NEEDED", lambda: request_release(ann, subject, hold))
    # Not an integrity hold: released directly.
    act("release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "relabelled"})
    subject, hold = integrity_held(ann)
    refused("VALIDATION_ERROR", lambda: request_release(
        ann, subject, hold, parameters={"reason": "x", "colour": "red"}))
    refused("VALIDATION_ERROR", lambda: request_release(ann, subject, hold,
                                                        action_key="claim_queue_item"))
    refused("VALIDATION_ERROR", lambda: request_release(ann, subject, hold, reason=" "))


def test_cancelling_an_integrity_held_subject_and_requeueing_a_dead_letter_are_gated(lab):
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann, "INTEGRITY")
    refused("APPROVAL_REQUIRED", lambda: act(
        "cancel_subject_execution", ann, subject_euid=subject, expected_state="HELD",
        payload={"reason": "sample destroyed"}))
    approval = act("request_approval", ann, subject_euid=subject, payload={
        "action_key": "cancel_subject_execution", "reason": "sample destroyed",
        "parameters": {"reason": "sample destroyed"}})["approval_euid"]
    assert decide(bob, approval)["state"] == "CANCELED"

    dead = dead_lettered()
    assert envelope(dead)["state"] == "FAILED_TERMINAL"
    _requeue_takes_a_second_person(ann, bob, dead, "FAILED_TERMINAL", "new aliquot")


def _requeue_takes_a_second_person(ann, bob, subject: str, state: str, reason: str) -> None:
    """A requeue by ann alone is refused APPROVAL_REQUIRED; asked for and approved by bob,
    it runs: the subject is READY."""
    refused("APPROVAL_REQUIRED", lambda: act(
        "requeue_subject", ann, subject_euid=subject, expected_state=state,
        payload={"reason": reason}))
    approval = act("request_approval", ann, subject_euid=subject, payload={
        "action_key": "requeue_subject", "reason": reason,
        "parameters": {"reason": reason}})["approval_euid"]
    assert decide(bob, approval)["state"] == "READY"


def test_cancelling_a_dead_letter_opens_no_way_round_the_second_person(lab):
    """Cancel closes a dead letter; a requeue of the canceled subject then ran at once, with
    its attempts reset and no second person: the requeue the rule gates, by another road.
    Once a second person lets it run again, the next cancel and requeue are the usual."""
    ann, bob = lab["ann"], lab["bob"]
    dead = dead_lettered()
    act("cancel_subject_execution", ann, subject_euid=dead, expected_state="FAILED_TERMINAL",
        payload={"reason": "specimen used up"})
    assert envelope(dead)["state"] == "CANCELED"
    _requeue_takes_a_second_person(ann, bob, dead, "CANCELED", "found another aliquot")
    # run again with a second person's signature: its letter reads REQUEUED, and what
    # follows is ordinary work again
    act("cancel_subject_execution", ann, subject_euid=dead, expected_state="READY",
        payload={"reason": "not needed after all"})
    assert act("requeue_subject", ann, subject_euid=dead, expected_state="CANCELED",
               payload={"reason": "needed after all"})["state"] == "READY"


def test_a_requeue_that_would_be_refused_is_refused_before_any_approval_is_asked(lab):
    """No one is asked to approve what would then be refused: a dead letter's requeue to a
    queue that does not take the subject is refused as such, directly and when an approval
    is requested; to its own queue it still needs the second person."""
    ann = lab["ann"]
    make_queue("q_analysis", subject_template_codes=["data/analysis/analysis_request/1.0"])
    dead = dead_lettered()
    refused("SUBJECT_TEMPLATE_MISMATCH", lambda: act(
        "requeue_subject", ann, subject_euid=dead, expected_state="FAILED_TERMINAL",
        queue_key="q_analysis", payload={"reason": "new aliquot"}))
    refused("SUBJECT_TEMPLATE_MISMATCH", lambda: act(
        "request_approval", ann, subject_euid=dead, queue_key="q_analysis", payload={
            "action_key": "requeue_subject", "reason": "new aliquot arrived",
            "parameters": {"reason": "new aliquot"}}))
    refused("APPROVAL_REQUIRED", lambda: act(
        "requeue_subject", ann, subject_euid=dead, expected_state="FAILED_TERMINAL",
        payload={"reason": "new aliquot"}))


@pytest.mark.parametrize("value", [{"a": [1, {"b": "<script>x</script>"}]}, "x" * 201,
                                   "step\none", "step\u200b", 7])
def test_a_requeue_s_next_step_is_checked_alike_when_asked_and_when_run(lab, value):
    """Through an approval a requeue stored any next_action_key (an object, 5,000
    characters): the subject's envelope was then invalid, unclaimable and its evidence
    unexportable. The engine checks it as the action itself, on every path."""
    ann = lab["ann"]
    dead = dead_lettered()
    before = counts()
    refused("VALIDATION_ERROR", lambda: act(
        "request_approval", ann, subject_euid=dead, payload={
            "action_key": "requeue_subject", "reason": "new aliquot arrived",
            "parameters": {"reason": "new aliquot", "next_action_key": value}}))
    refused("VALIDATION_ERROR", lambda: act(
        "requeue_subject", ann, subject_euid=dead, expected_state="FAILED_TERMINAL",
        payload={"reason": "new aliquot", "next_action_key": value}))
    assert counts() == before


def test_which_rules_apply_is_configurable(lab, settings):
    settings.BLOOMOPS_APPROVAL_RULES = ["requeue_dead_letter"]
    ann = lab["ann"]
    subject, hold = integrity_held(ann)
    done = act("release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
               expected_state="HELD", payload={"reason": "rule off"})
    assert done["state"] == "READY"
    settings.BLOOMOPS_APPROVAL_RULES = ["release_integrity_hold"]
    settings.BLOOMOPS_INTEGRITY_HOLD_CODES = ["LABEL_ISSUE"]
    subject, hold = integrity_held(ann, "LABEL_ISSUE")
    refused("APPROVAL_REQUIRED", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, expected_state="HELD",
        payload={"reason": "x"}))


@pytest.mark.parametrize("code", ["QC-FAIL", "QCFAIL", "qc fail", "QC_FIAL"])
def test_a_misspelt_integrity_hold_code_stops_the_start(settings, code):
    """"QC-FAIL" started without a word, and QC_FAIL holds were released by one person."""
    settings.BLOOMOPS_INTEGRITY_HOLD_CODES = [code, "CONTAMINATION"]
    with pytest.raises(ImproperlyConfigured, match=f"BLOOMOPS_INTEGRITY_HOLD_CODES: {code} is"
                                                   " spelt almost like the hold code QC_FAIL"):
        check_settings()


def test_an_integrity_code_the_operators_do_not_choose_is_taken(settings):
    """A lab that trimmed the operators' list (no INTEGRITY to choose) still starts with the
    default integrity codes, and Bloom's or a retired code may be one: only a near miss of a
    listed code is refused."""
    settings.BLOOMOPS_HOLD_CODES = ["OPERATOR_HOLD", "QC_FAIL", "CONTAMINATION", "QA_REVIEW"]
    settings.BLOOMOPS_INTEGRITY_HOLD_CODES = ["QC_FAIL", "CONTAMINATION", "INTEGRITY",
                                              "BLOOM_QC_HOLD"]
    check_settings()


@pytest.mark.parametrize(("configured", "held"), [
    (["QC_FAIL"], "qc_fail"), (["QC_FAIL"], " QC_FAIL"), (["qc_fail "], "QC_FAIL")])
def test_an_integrity_hold_is_one_in_any_case(configured, held):
    """Another writer's hold of "qc_fail" was no QC_FAIL hold to the gate."""
    flags = SubjectFlags(active_holds={"Z-HX-1": held}, dead_lettered=False)
    for action, rule in (("release_execution_hold", "release_integrity_hold"),
                         ("cancel_subject_execution", "cancel_integrity_held")):
        assert rule_for(action, flags, hold_euid=None, rules=[rule],
                        integrity_codes=configured) == rule


@pytest.mark.parametrize("broken", [
    {"BLOOMOPS_APPROVAL_RULES": ["release_integrity_hold", "two_keys_please"]},
    {"BLOOMOPS_INTEGRITY_HOLD_CODES": None},
])
def test_a_policy_that_cannot_be_evaluated_refuses_and_writes_nothing(lab, settings, broken):
    ann = lab["ann"]
    subject, hold = integrity_held(ann)
    for name, value in broken.items():
        setattr(settings, name, value)
    refused("APPROVAL_POLICY_ERROR", lambda: act(
        "release_execution_hold", ann, subject_euid=subject, hold_euid=hold,
        expected_state="HELD", payload={"reason": "x"}))
    refused("APPROVAL_POLICY_ERROR", lambda: request_release(ann, subject, hold))
    assert envelope(subject)["state"] == "HELD"
    with pytest.raises(ImproperlyConfigured):
        check_settings()


def test_the_password_is_never_stored_or_logged(lab, caplog):
    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ActionError):
            decide(bob, approval, password="wrong-Secret-1")
        decide(bob, approval)
    for secret in (password_of("bob"), "wrong-Secret-1"):
        for table, column in (("generic_instance", "json_addl"), ("audit_log", "*"),
                              ("outbox_event", "*")):
            expr = f"{table}::text" if column == "*" else column + "::text"
            found = fetch_value(f"SELECT count(*) FROM {table} WHERE {expr} LIKE %s",
                                [f"%{secret}%"])
            assert found == 0, (table, secret)
        assert secret not in caplog.text


@pytest.mark.usefixtures("committed")
def test_two_approvers_at_once_exactly_one_decision_wins(tenant):
    make_queue("q1")
    ann, bob, cat = person("ann", "operator"), person("bob", "operator"), person(
        "cat", "operator")
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def decide_as(who, decision) -> None:
        try:
            start.wait(5)
            outcomes[who.username] = decide(who, approval, decision)["approval_status"]
        except ActionError as exc:
            outcomes[who.username] = exc.code
        finally:
            connection.close()

    threads = [threading.Thread(target=decide_as, args=(bob, "APPROVED")),
               threading.Thread(target=decide_as, args=(cat, "REJECTED"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["bob", "cat"]
    won = [v for v in outcomes.values() if v in {"APPROVED", "REJECTED"}]
    lost = [v for v in outcomes.values() if v not in {"APPROVED", "REJECTED"}]
    assert len(won) == 1 and lost == ["APPROVAL_NOT_PENDING"], outcomes
    final = props(approval)
    assert final["status"] == won[0]
    decisions = fetch_value(
        "SELECT count(*) FROM generic_instance WHERE tenant_id = %s AND type ="
        " 'execution_queue' AND subtype = 'decide_approval'", [tenant])
    assert decisions == 1
    assert envelope(subject)["state"] == ("READY" if won == ["APPROVED"] else "HELD")



def test_the_waiting_count_reads_the_requests_not_every_approval_decided_before(lab, settings):
    """Every page shows how many approvals wait; a lab's decided approvals pile up for years,
    so the count reads the requests through bloomops_approval_requested and no decided one."""
    ann, bob = lab["ann"], lab["bob"]
    for decision in ("APPROVED", "REJECTED", "APPROVED"):
        subject, hold = integrity_held(ann)
        decide(bob, request_release(ann, subject, hold)["approval_euid"], decision)
    subject, hold = integrity_held(ann)
    waiting = request_release(ann, subject, hold)["approval_euid"]
    settings.BLOOMOPS_PREPARED_STATEMENTS = False
    sent = []
    with connection.execute_wrapper(lambda ex, sql, params, many, ctx: (
            sent.append((sql, params)), ex(sql, params, many, ctx))[1]):
        found = selectors.approvals_waiting()
    assert found.count == 1 and [a.euid for a in found.rows] == [waiting]
    ((sql, params),) = sent
    plan = plan_of(sql, params, off=("seqscan", "bitmapscan"), analyze=("generic_instance",))
    assert "bloomops_approval_requested" in plan, plan


def test_an_approval_asked_with_a_field_its_action_never_used_still_runs(lab, monkeypatch):
    """Before requeues refused a hold_euid (they never read one), an approval of a requeue
    could be asked with one. Signed now, it runs without it, as it was asked."""
    from bloomops.execution.actions import approvals

    ann, bob = lab["ann"], lab["bob"]
    dead = dead_lettered()
    # asked then: its record sealed no terms (they are sealed since)
    monkeypatch.setattr(approvals, "SEALED_TERMS", ())
    approval = act("request_approval", ann, subject_euid=dead, payload={
        "action_key": "requeue_subject", "reason": "new aliquot arrived",
        "parameters": {"reason": "new aliquot"}})["approval_euid"]
    monkeypatch.undo()
    stored = load(euid=approval, tenant=tenant_of())
    assert stored is not None
    save_props(stored, {**stored.props, "hold_lookup_euid": "Z-HD-1"})
    assert decide(bob, approval)["state"] == "READY"


def test_an_account_the_requester_just_set_up_is_not_a_second_person(lab, settings):
    """One admin met the two-person rule alone: they made an operator account, asked for a
    release, and approved it signed in as the new account."""
    from django.contrib.auth.models import User

    from bloomops.accounts.profiles import PersonChange, change_person

    adm = lab["adm"]
    alt = _made("quinn", ["operator"], "adm")
    subject, hold = integrity_held(adm)
    approval = request_release(adm, subject, hold)["approval_euid"]
    err = refused("SELF_APPROVAL", lambda: decide(alt, approval))
    assert (err.details["set_up_by"], err.details["chain_to_decider"]) == ("adm", ["adm", "quinn"])
    assert "adm set you up (adm > quinn)" in err.message and "Ask someone else" in err.message
    # roles given by anyone else are a second person's: bob, whom another admin promoted
    # just now, decides
    bob = User.objects.get(username="bob")
    change_person(bob.pk, PersonChange(roles=["operator", "admin"], is_active=True,
                                       profile=None, reason="covering", seen_change=None),
                  admin_username="someone-else")
    assert decide(lab["bob"], approval).result["approval_status"] == "APPROVED"
    # once the approval lifetime has passed, the roles adm gave no longer link them; the
    # password adm typed does until quinn changes it
    from bloomops.accounts.models import ProfileChange

    window = timedelta(seconds=settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    ProfileChange.objects.update(changed_at=F("changed_at") - window)
    subject, hold = integrity_held(adm)
    approval = request_release(adm, subject, hold)["approval_euid"]
    assert "password" in refused("SELF_APPROVAL", lambda: decide(alt, approval)).message
    own = ProfileChange.objects.create(username="quinn", changed_by="quinn", reason="own",
                                       before={"password": "x"},
                                       after={"password": "their own"})
    # changed only now: adm, who knew the password, could have changed it signed in as quinn
    assert "password" in refused("SELF_APPROVAL", lambda: decide(alt, approval)).message
    ProfileChange.objects.filter(pk=own.pk).update(changed_at=F("changed_at") - window)
    assert decide(alt, approval).result["approval_status"] == "APPROVED"


def _made(username: str, roles: list[str], by: str):
    """An account ``by`` added on /people/ (a change record), signing with password_of."""
    from django.contrib.auth.models import User

    from bloomops.accounts.profiles import add_person
    from bloomops.execution.executor import Actor
    from tests.approval_support import password_of

    add_person(username, first_name="", last_name="", password="Correct-Horse-Battery-9",
               roles=roles, reason="new", admin_username=by)
    user = User.objects.get(username=username)
    user.set_password(password_of(username))  # as decide() signs; not a change record
    user.save()
    return Actor(username=username, roles=frozenset(roles))


def _refused_then_a_colleague_decides(requester, cases, colleague) -> None:
    """Each (decider, words) refused SELF_APPROVAL naming the link; then ``colleague``,
    whom nobody set up in the window, approves."""
    for decider, said in cases:
        subject, hold = integrity_held(requester)
        approval = request_release(requester, subject, hold)["approval_euid"]
        err = refused("SELF_APPROVAL", lambda d=decider, a=approval: decide(d, a))
        assert said in err.message, err.message
    subject, hold = integrity_held(requester)
    approval = request_release(requester, subject, hold)["approval_euid"]
    assert decide(colleague, approval).result["approval_status"] == "APPROVED"


def test_no_chain_reset_or_record_flood_makes_one_admin_a_second_person(lab):
    """Three ways one admin still approved their own release: 50 password resets pushed the
    role grant out of the records read; an account made by an account the admin had just
    made; a colleague's password set by the admin, then used to sign."""
    from django.contrib.auth.models import User

    from bloomops.accounts.profiles import set_password
    from tests.approval_support import password_of

    flooded = _made("flood", ["operator"], "adm")
    for i in range(55):
        set_password(User.objects.get(username="flood").pk, f"Cobalt-Lantern-{i:02d}x",
                     reason="again", admin_username="someone-else")
    user = User.objects.get(username="flood")
    user.set_password(password_of("flood"))
    user.save()
    _made("deputy", ["admin"], "adm")
    chained = _made("chained", ["operator"], "deputy")
    set_password(User.objects.get(username="bob").pk, "Amber-Harbour-77", reason="reset",
                 admin_username="adm")
    bob = User.objects.get(username="bob")
    bob.set_password(password_of("bob"))  # what the admin now knows
    bob.save()
    _refused_then_a_colleague_decides(lab["adm"], (
        (flooded, "adm set you up (adm > flood)"),
        (chained, "adm set you up (adm > deputy > chained)"),
        (lab["bob"], "adm set you up (adm > bob)")), lab["cat"])


def test_the_rule_looks_both_ways_and_at_a_common_maker(lab):
    """One admin still signed both halves: a new account asked, the admin who made it
    decided; and an operator the admin also made decided that account's request."""
    puppet, other = _made("puppet", ["admin"], "adm"), _made("other", ["operator"], "adm")
    _refused_then_a_colleague_decides(puppet, (
        (lab["adm"], "you set up puppet (adm > puppet)"),
        (other, "adm set up both you (adm > other) and puppet (adm > puppet)")), lab["bob"])


def test_an_api_token_an_admin_gave_links_them_to_its_persons_requests(lab, settings):
    """An admin who gave an operator a token on the People screen could ask for a release as
    the operator through the API, then approve it as themselves: one person, both halves;
    revoking the token after asking undid nothing. A token is no signature, so it links the
    asking half only, and only its own person: the operator still decides the admin's
    requests, and the admin those of people the operator set up."""
    from bloomops.accounts.models import ApiToken, ProfileChange
    from bloomops.accounts.profiles import add_person
    from bloomops.accounts.tokens import create_token, revoke

    row, _ = create_token("bob", by="adm", reason="bob's plate-reader script")
    _refused_then_a_colleague_decides(lab["bob"], (
        (lab["adm"], "you set up bob (adm > bob)"),), lab["cat"])
    subject, hold = integrity_held(lab["adm"])
    approval = request_release(lab["adm"], subject, hold)["approval_euid"]
    assert decide(lab["bob"], approval).result["approval_status"] == "APPROVED"
    # asked as bob, then the token revoked: adm still held it when the asking was done
    subject, hold = integrity_held(lab["bob"])
    approval = request_release(lab["bob"], subject, hold)["approval_euid"]
    revoke(token_id=row.pk, by="adm", reason="script retired")
    assert "adm" in refused("SELF_APPROVAL", lambda: decide(lab["adm"], approval)).message
    # a token's link is its own person's: bob's hires are not adm's
    add_person("newbie", first_name="", last_name="", password="Correct-Horse-Battery-9",
               roles=["operator"], reason="new", admin_username="bob")
    newbie = person("newbie", "operator")
    subject, hold = integrity_held(newbie)
    approval = request_release(newbie, subject, hold)["approval_euid"]
    assert decide(lab["adm"], approval).result["approval_status"] == "APPROVED"
    # an approval's lifetime after the revoke, and with a token bob gave himself, adm
    # decides bob's requests again
    window = timedelta(seconds=settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    ApiToken.objects.filter(pk=row.pk).update(revoked_at=F("revoked_at") - window)
    ProfileChange.objects.update(changed_at=F("changed_at") - window)
    create_token("bob", by="bob", reason="my own")
    subject, hold = integrity_held(lab["bob"])
    approval = request_release(lab["bob"], subject, hold)["approval_euid"]
    assert decide(lab["adm"], approval).result["approval_status"] == "APPROVED"


def test_a_password_its_person_changed_since_is_theirs_again(lab, client, settings):
    """An admin set bob's password, then bob changed it on his own page: the admin no longer
    knows what bob signs with, and the refusal said otherwise. Not at once: the admin, who
    knew the password, could have changed it signed in as bob (an insider's attack), so the
    link lasts an approval's lifetime after the change."""
    from django.contrib.auth.models import User

    from bloomops.accounts.models import ProfileChange
    from bloomops.accounts.profiles import set_password
    from tests.approval_support import password_of

    set_password(User.objects.get(username="bob").pk, "Amber-Harbour-77", reason="forgot",
                 admin_username="adm")
    client.force_login(User.objects.get(username="bob"))
    changed = client.post("/accounts/password/", {"old_password": "Amber-Harbour-77",
                                                  "new_password1": "Glacier-Copper-58",
                                                  "new_password2": "Glacier-Copper-58"})
    assert changed.status_code == 302
    bob = User.objects.get(username="bob")
    bob.set_password(password_of("bob"))  # as decide() signs; no change record
    bob.save()
    subject, hold = integrity_held(lab["adm"])
    approval = request_release(lab["adm"], subject, hold)["approval_euid"]
    assert "adm" in refused("SELF_APPROVAL", lambda: decide(lab["bob"], approval)).message
    window = timedelta(seconds=settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    ProfileChange.objects.filter(username="bob").update(changed_at=F("changed_at") - window)
    assert decide(lab["bob"], approval).result["approval_status"] == "APPROVED"


def test_two_admins_who_both_touched_a_new_hire_are_still_two_people(lab):
    """adm made a new hire and bob, another admin, gave them a role: bob was refused as
    adm's second person for a day, linked through the new hire they had both touched."""
    from django.contrib.auth.models import User

    from bloomops.accounts.profiles import PersonChange, change_person, last_change_id

    _made("newhire", ["worker_human"], "adm")
    change_person(User.objects.get(username="newhire").pk, PersonChange(
        roles=["worker_human", "operator"], is_active=True, profile=None, reason="QA too",
        seen_change=last_change_id("newhire")), admin_username="bob")
    subject, hold = integrity_held(lab["adm"])
    approval = request_release(lab["adm"], subject, hold)["approval_euid"]
    assert decide(lab["bob"], approval).result["approval_status"] == "APPROVED"


def test_a_password_set_from_the_command_line_signs_no_approval_until_changed(
        lab, monkeypatch, settings):
    """manage.py changepassword wrote no record: whoever ran it could sign in as that person
    and approve their own request. It is recorded now, given from the command line; that
    person's sessions and tokens end, and they decide nothing until they change it."""
    from django.contrib.auth.management.commands import changepassword
    from django.core.management import call_command

    from bloomops.accounts.models import COMMAND_LINE, ProfileChange
    from bloomops.accounts.tokens import create_token, user_for_token
    from tests.engine import GIVEN

    ann, bob = lab["ann"], lab["bob"]
    subject, hold = integrity_held(ann)
    approval = request_release(ann, subject, hold)["approval_euid"]
    _, token = create_token("bob", **GIVEN)
    browser = Client()
    browser.force_login(User.objects.get(username="bob"))
    monkeypatch.setattr(changepassword.Command, "_get_pass",
                        lambda self, prompt="": "Shell-Given-Secret-71")
    call_command("changepassword", "bob", stdout=io.StringIO())
    # the session signed in before is over, as after an admin's new password
    assert browser.get("/").status_code == 302
    [change] = ProfileChange.objects.filter(username="bob", changed_by=COMMAND_LINE)
    assert change.reason.startswith("manage.py changepassword, run as ")
    assert user_for_token(token) is None  # issued before: ended, as on the console
    refusal = refused("SELF_APPROVAL", lambda: decide(bob, approval,
                                                      password="Shell-Given-Secret-71"))
    assert "set from the command line" in refusal.message
    inbox = Client()
    inbox.force_login(User.objects.get(username="bob"))
    # signed in with it, bob reaches no inbox to sign in: only the password page
    sent = inbox.get("/approvals/")
    assert sent.status_code == 302 and sent["Location"] == "/accounts/password/"
    assert envelope(subject)["state"] == "HELD"
    client = Client()
    client.post("/accounts/login/", {"username": "bob", "password": "Shell-Given-Secret-71"})
    told = client.get("/", follow=True).content.decode()
    assert "Your password was set from the command line" in told
    assert "Choose your own password before you go on: it was set from the command line" in told
    client.post("/accounts/password/", {"old_password": "Shell-Given-Secret-71",
                                        "new_password1": "Copper-Lantern-Glacier-58",
                                        "new_password2": "Copper-Lantern-Glacier-58"})
    # changed only now: whoever ran the command could have changed it as bob
    lately = refused("SELF_APPROVAL", lambda: decide(bob, approval,
                                                     password="Copper-Lantern-Glacier-58"))
    assert "only lately" in lately.message
    assert "You changed the password the command line set only lately" in client.get(
        "/").content.decode()
    window = timedelta(seconds=settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 1)
    ProfileChange.objects.filter(username="bob").update(changed_at=F("changed_at") - window)
    decide(bob, approval, password="Copper-Lantern-Glacier-58")
    assert envelope(subject)["state"] == "READY"


def test_an_account_made_with_createsuperuser_is_recorded(db, monkeypatch):
    from django.core.management import call_command

    from bloomops.accounts.models import COMMAND_LINE, ProfileChange

    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "Lab-Admin-Glacier-58")
    call_command("createsuperuser", "--noinput", "--username", "labadmin",
                 "--email", "it@lab.example", stdout=io.StringIO())
    [made] = ProfileChange.objects.filter(username="labadmin")
    assert made.changed_by == COMMAND_LINE and made.before == {}
    assert made.after["password"] == "given from the command line"
    assert made.reason.startswith("manage.py createsuperuser, run as ")


@pytest.mark.parametrize(("username", "password", "said"), [
    ("LabAdmin", "Lab-Admin-Glacier-58", "already exists (labadmin): one name in two cases"),
    ("zoë", "Lab-Admin-Glacier-58", "only the letters a-z and A-Z"),
    ("newadmin", "bloomops", "This is the demo's published password; choose another."),
])
def test_createsuperuser_asks_what_the_people_page_asks(db, monkeypatch, username, password,
                                                       said):
    """From a shell, "LabAdmin" beside "labadmin" died on the database's constraint with a
    traceback, "zoë" was made (the People page refuses a letter of another script) and the
    demo's password was taken: every one is a clear refusal, and nothing is made."""
    from django.contrib.auth import get_user_model
    from django.core.management import CommandError, call_command

    get_user_model().objects.create_user("labadmin", password="Lab-Admin-Glacier-58")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", password)
    before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=re.escape(said)):
        call_command("createsuperuser", "--noinput", "--username", username,
                     "--email", "it@lab.example", stdout=io.StringIO())
    assert get_user_model().objects.count() == before
