"""Trust boundaries of the engine: no caller can forge objects through a step's outputs,
squat someone's human worker, or replay someone else's result; a broken envelope written by
any other TapDB writer crashes no read, page, claim or worker; a cancel ends holds; a
force-expiry is in the subject's history; a restarted worker process recovers its leases."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from bloomops.execution import clock, selectors
from bloomops.execution.actions.steps import template_code_of
from bloomops.execution.envelope import envelope_problems
from bloomops.execution.objects import load
from bloomops.tapdb.db import fetch_all, fetch_value
from bloomops.tapdb.tenancy import tenant_of
from tests.api_helpers import Api
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    props,
    refused,
    register,
)

pytestmark = pytest.mark.django_db

EXTRACTED = "content/material/extracted_sample/1.0"
SPECIMEN = "content/material/specimen/1.0"


@pytest.fixture
def flow(tenant):
    make_queue("q1", output_template_codes=[EXTRACTED], default_next_queue_key="q2")
    make_queue("q2", subject_template_codes=[EXTRACTED])
    return actor(*SERVICE)


def _claimed(svc, queue_key="q1"):
    subject = make_subject(queue_key)
    worker = register(svc)
    return subject, worker, claim(svc, worker, queue_key)


def _complete(svc, worker, lease, **payload):
    return act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
               worker_euid=worker, expected_state="READY", payload=payload)


# ------------------------------------------------------------------ outputs


@pytest.mark.parametrize("code", [
    "data/execution/queue/1.0", "actor/system/worker/1.0", "data/execution/queue_lease/1.0",
    "data/execution/hold/1.0", "message/execution/event/1.0",
    "action/execution_queue/claim_queue_item/1.0",
])
def test_a_step_cannot_create_engine_objects(flow, code):
    svc = flow
    _, worker, lease = _claimed(svc)
    err = refused("OUTPUT_NOT_ALLOWED", lambda: _complete(
        svc, worker, lease, outputs=[{"template_code": code, "name": "forged",
                                      "properties": {}}]))
    assert code in err.message
    assert selectors.queues() and {q["queue_key"] for q in selectors.queues()} == {"q1", "q2"}


def test_a_step_creates_only_what_its_queue_declares(flow):
    svc = flow
    _, worker, lease = _claimed(svc)
    err = refused("OUTPUT_NOT_ALLOWED", lambda: _complete(
        svc, worker, lease, outputs=[{"template_code": "data/analysis/artifact/1.0",
                                      "name": "bam"}]))
    assert "q1" in err.message and EXTRACTED in err.message


def test_a_step_names_its_output_template_as_its_queue_settings_do(flow):
    """The queue settings took "extracted_sample" for its outputs; a completion naming its
    output so was refused "unknown template"."""
    svc = flow
    subject, worker, lease = _claimed(svc)
    done = _complete(svc, worker, lease, outputs=[{"template_code": "extracted_sample",
                                                   "name": "Extract 1"}])
    (made,) = done.result["output_euids"]
    assert template_code_of(load(euid=made, tenant=tenant_of())) == EXTRACTED


def test_a_short_output_name_two_templates_share_is_the_queue_s_own(flow, request):
    from bloomops.tapdb import templates
    from tests.test_shared_templates import _foreign_template

    _foreign_template("BX", "sample", "extracted_sample", "content")
    request.addfinalizer(templates.clear_cache)
    svc = flow
    _, worker, lease = _claimed(svc)
    done = _complete(svc, worker, lease, outputs=[{"template_code": "extracted_sample",
                                                   "name": "Extract 2"}])
    (made,) = done.result["output_euids"]
    assert template_code_of(load(euid=made, tenant=tenant_of())) == EXTRACTED
    # its properties are held to the template meant, as a full code's are
    _, worker, lease = _claimed(svc)
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[
        {"template_code": "extracted_sample", "name": "Extract 4",
         "properties": {"owner_username": "admin"}}]))
    assert "no property 'owner_username'" in err.message
    # a queue that makes both: which one is the caller's to say
    make_queue("both", output_template_codes=[EXTRACTED, "content/sample/extracted_sample/1.0"])
    _, worker, lease = _claimed(svc, "both")
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[
        {"template_code": "extracted_sample", "name": "Extract 3"}]))
    assert "it could mean" in err.message and EXTRACTED in err.message


@pytest.mark.parametrize("stored", [5, True])
def test_a_queue_s_output_templates_another_writer_stored_otherwise_are_read_not_a_500(
        flow, stored):
    """output_template_codes stored as 5 failed a completion with outputs and a change of
    the queue's flow with a TypeError (a 500 over the API)."""
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,output_template_codes}', %s::jsonb) WHERE type = 'execution'"
              " AND subtype = 'queue' AND json_addl->'properties'->>'queue_key' = 'q1'"
              " RETURNING uid", [json.dumps(stored)])
    svc = flow
    _, worker, lease = _claimed(svc)
    err = refused("OUTPUT_NOT_ALLOWED", lambda: _complete(svc, worker, lease, outputs=[
        {"template_code": EXTRACTED, "name": "Extract 9"}]))
    assert "declares no" in err.message
    from bloomops.execution import policy

    configs = {q["queue_key"]: q["config"] for q in selectors.queues()}
    assert isinstance(policy.flow_warnings("q1", configs["q1"], configs), list)


@pytest.mark.parametrize(("output", "words"), [
    ({"properties": {"owner_username": "admin"}}, "no property 'owner_username'"),
    ({"properties": {"execution": {"state": "READY"}}}, "no property 'execution'"),
    ({"properties": {"site": {"nested": 1}}}, "must be text"),
    ({"properties": {"domain_state": 5}}, "type the template declares"),
    ({"execution": {"state": "READY", "next_queue_key": "q2", "attempt_count": "x"}},
     "execution may only set"),
    ({"execution": {"state": "COMPLETED"}}, "READY or PENDING"),
    ({"execution": {"next_queue_key": "q2", "priority": "SOON"}}, "priority"),
    ({"execution": {"next_queue_key": "q2", "due_at": "tomorrow"}}, "due_at"),
    ({"execution": {"next_queue_key": 7}}, "next_queue_key must be text"),
    ({"execution": {"next_action_key": "qc\nrerun"}}, "next_action_key may hold only printable"),
    ({"unexpected": 1}, "unknown field"),
])
def test_output_fields_are_checked_against_the_template(flow, output, words):
    svc = flow
    _, worker, lease = _claimed(svc)
    spec = {"template_code": EXTRACTED, "name": "x", **output}
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[spec]))
    assert words in err.message


@pytest.mark.parametrize(("name", "words"), [
    ("Ex\u202etcart", "invisible"), ("Ex\u200btract", "invisible"),
    ("Ex\ntract\u001b[2J", "control"), ("   ", "name is required"),
    ("x" * 301, "too long"),
])
def test_an_output_s_name_is_one_readable_line_as_a_registered_subject_s(flow, name, words):
    """A completion made subjects named with a right-to-left override, a zero-width space or
    a terminal escape, which register-subject refuses: the bench scans and lists them."""
    svc = flow
    _, worker, lease = _claimed(svc)
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[
        {"template_code": EXTRACTED, "name": name}]))
    assert err.message.startswith("outputs[0]: name") and words in err.message, err.message


def test_two_outputs_of_one_name_are_refused(flow):
    """One completion made two extracts named "Extract 7" and "extract 7 ", which the bench
    tells apart only by EUID; intake refuses a batch doing the same."""
    svc = flow
    subject, worker, lease = _claimed(svc)
    before = counts()
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[
        {"template_code": EXTRACTED, "name": "Extract 7"},
        {"template_code": EXTRACTED, "name": "Extract 8"},
        {"template_code": EXTRACTED, "name": "extract 7 "}]))
    assert err.message == ("outputs[2]: outputs[0] gives the name 'extract 7' too: two new"
                           " objects of one name are told apart only by EUID.")
    assert counts() == before and envelope(subject)["state"] == "READY"


def test_an_output_s_site_in_another_case_is_its_next_queue_s(flow):
    """As at intake (RULES.md#intake): "SFO" into a queue scoped to sfo was refused out of
    scope; it is stored as the queue spells it."""
    make_queue("sited", subject_template_codes=[EXTRACTED], site_scope=["sfo"])
    svc = flow
    _, worker, lease = _claimed(svc)
    done = _complete(svc, worker, lease, outputs=[{
        "template_code": EXTRACTED, "name": "Extract", "properties": {"site": "SFO"},
        "execution": {"next_queue_key": "sited"}}])
    assert props(done["output_euids"][0])["site"] == "sfo"


@pytest.mark.parametrize("payload", [{"next_action_key": "qc.rerun"},
                                     {"next_action_key": "qc.rerun", "external": {"run": 1}}])
def test_a_next_step_without_a_next_queue_is_refused_not_dropped(flow, payload):
    """complete with next_action_key alone finished the subject and dropped the step."""
    svc = flow
    subject, worker, lease = _claimed(svc)
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, **payload))
    assert err.details["field"] == "next_action_key"
    assert envelope(subject)["state"] == "READY"


def test_an_output_derives_only_from_the_subject_that_made_it(flow):
    """derived_from_euid named any subject of the lab: an output could claim to come from
    one the lineage says it did not."""
    svc = flow
    unrelated = make_subject("q2", code=EXTRACTED, name="elsewhere")
    subject, worker, lease = _claimed(svc)
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, outputs=[{
        "template_code": EXTRACTED, "name": "x",
        "properties": {"derived_from_euid": unrelated}}]))
    assert f"derived_from_euid names {unrelated}, but it is made from {subject}" in err.message
    done = _complete(svc, worker, lease, outputs=[{
        "template_code": EXTRACTED, "name": "x", "properties": {"derived_from_euid": subject}}])
    assert len(done["output_euids"]) == 1


def test_an_output_routed_to_a_queue_that_does_not_take_it_is_refused(flow):
    svc = flow
    make_queue("specimens_only")
    _, worker, lease = _claimed(svc)
    refused("OUTPUT_NOT_ALLOWED", lambda: _complete(svc, worker, lease, outputs=[{
        "template_code": EXTRACTED, "name": "x",
        "execution": {"next_queue_key": "specimens_only"}}]))


def test_the_engine_builds_a_declared_outputs_envelope(flow):
    svc = flow
    subject, worker, lease = _claimed(svc)
    done = _complete(svc, worker, lease, outputs=[{
        "template_code": EXTRACTED, "name": "Extract", "properties": {"site": "sfo"},
        "execution": {"next_queue_key": "q2", "priority": "STAT",
                      "due_at": "2026-12-01T10:00:00+02:00"}}])
    (out,) = done["output_euids"]
    env = envelope(out)
    assert env["state"] == "READY" and env["priority"] == 300 and env["revision"] == 1
    assert env["due_at"] == "2026-12-01T08:00:00.000000Z" and env["attempt_count"] == 0
    assert props(out)["site"] == "sfo" and props(out)["domain_state"] == "extracted"
    assert envelope_problems(props(out)["execution"]) == []
    assert selectors.queue_head("q2").euid == out


# ------------------------------------------------------------------ broken envelopes


def _poison(euid: str, **fields) -> None:
    """What another TapDB writer (or an old row, or a bug) may leave: raw SQL, no checks."""
    with connection.cursor() as cur:
        for name, value in fields.items():
            cur.execute(
                "UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                " ARRAY['properties', 'execution', %s], %s::jsonb) WHERE euid = %s",
                [name, json.dumps(value), euid])


POISONS = [
    {"attempt_count": "x"}, {"terminal": "x"}, {"cancel_requested": "maybe"},
    {"revision": "x"}, {"state": "BOGUS"}, {"ready_at": "yesterday"}, {"retry_at": 12},
    {"hold_state": "SOMETIMES"}, {"queue_cache": "x"}, {"max_attempts_override": 0},
]


@pytest.mark.parametrize("poison", POISONS, ids=[next(iter(p)) for p in POISONS])
def test_a_broken_envelope_is_shown_never_claimed_and_crashes_nothing(flow, poison, users,
                                                                       client):
    svc = flow
    good = make_subject("q1", name="good")
    bad = make_subject("q1", name="bad")
    _poison(bad, **poison)
    (field,) = poison
    # Python and SQL agree that it is broken.
    assert [f for f, _ in envelope_problems(props(bad)["execution"])] == [field]
    d = selectors.subject_diagnostics(bad)
    assert d is not None and not d.visible and "INVALID_ENVELOPE" in d.reason_codes
    assert any(field in r.message for r in d.reasons if r.code == "INVALID_ENVELOPE")
    assert selectors.queue_depths()["q1"] == 1
    items, total = selectors.queue_items("q1")
    assert [i.euid for i in items] == [good] and total == 1
    hidden, _ = selectors.queue_hidden_items("q1")
    (row,) = [h for h in hidden if h.euid == bad]  # listed among the hidden, with why
    assert "INVALID_ENVELOPE" in [r.code for r in row.reasons]
    summaries = {s.queue_key: s for s in selectors.queue_summaries()}
    assert summaries["q1"].depth == 1
    # Claims never take it; an explicit human claim says why.
    worker = register(svc, max_concurrent_leases=5)
    assert claim(svc, worker)["subject_euid"] == good
    from bloomops.execution.errors import ActionError as Refusal

    with pytest.raises(Refusal) as err:
        claim(svc, worker)
    assert err.value.code == "NO_WORK"
    human = actor("worker_human", username="sci")
    hw = register(human, worker_type="HUMAN_SESSION")
    refused("NOT_VISIBLE", lambda: act("claim_queue_item", human, worker_euid=hw,
                                        subject_euid=bad))
    # Every screen and read answers.
    client.force_login(users["operator"])
    for url in ("/", "/queues/q1/", f"/subjects/{bad}/", "/workbench/", "/workers/"):
        assert client.get(url).status_code == 200, url
    api = Api(_token(users["operator"]))
    assert api.get(f"/subjects/{bad}").status_code == 200
    assert api.get(f"/subjects/{bad}/history").status_code == 200
    assert api.get("/queues/q1/items").status_code == 200
    assert api.get("/queues").status_code == 200
    # Only the operator's way out acts on it, and it repairs the envelope.
    op = actor("operator")
    refused("INVALID_ENVELOPE", lambda: act("place_execution_hold", op, subject_euid=bad,
                                             expected_state=d.state, payload={"reason": "x"}))
    done = act("cancel_subject_execution", op, subject_euid=bad, expected_state=d.state,
               payload={"reason": "broken by another system"})
    assert done["repaired_fields"] == [field] and done["state"] == "CANCELED"
    assert envelope_problems(props(bad)["execution"]) == []


def _token(user) -> str:
    from bloomops.accounts.tokens import create_token
    from tests.engine import GIVEN

    return create_token(user.username, **GIVEN)[1]


def test_requeue_repairs_a_broken_envelope_and_the_subject_is_claimable_again(flow):
    svc, op = flow, actor("operator")
    bad = make_subject("q1")
    _poison(bad, attempt_count="x")
    done = act("requeue_subject", op, subject_euid=bad, expected_state="READY",
               payload={"reason": "fix the row"})
    assert done["repaired_fields"] == ["attempt_count"]
    assert envelope(bad)["attempt_count"] == 0
    worker = register(svc)
    assert claim(svc, worker)["subject_euid"] == bad


def test_a_broken_envelope_does_not_stop_a_service_worker(flow):
    from bloomops.worker.runtime import HandlerSet, Outcome, WorkerRuntime
    from bloomops.worker.transport import DirectTransport

    svc = flow
    bad = make_subject("q1", name="bad", next_action_key="step")
    _poison(bad, attempt_count="x", terminal="no")
    good = make_subject("q1", name="good", next_action_key="step")

    class Steps(HandlerSet):
        HANDLERS = {"step": "step"}

        def step(self, job):
            return Outcome()

    runtime = WorkerRuntime(DirectTransport(svc.username), Steps(), worker_key="w-broken",
                            capabilities=[], exit_when_idle=True, poll_min=0.0)
    runtime.run()
    assert runtime.stats.completed == 1
    assert envelope(good)["state"] == "COMPLETED"
    assert selectors.subject_diagnostics(bad).reason_codes.count("INVALID_ENVELOPE") == 2


# ------------------------------------------------------------------ human workers


def test_a_person_cannot_register_someone_elses_human_worker(tenant):
    mallory = actor("worker_human", username="mallory")
    err = refused("FORBIDDEN", lambda: act("register_worker", mallory, payload={
        "worker_key": "human://alice", "worker_type": "HUMAN_SESSION"}))
    assert "human://mallory" in err.message
    refused("FORBIDDEN", lambda: act("register_worker", mallory, payload={
        "worker_key": "human://admin", "worker_type": "HUMAN_SESSION"}))


def test_human_profiles_come_from_configuration_not_the_request(tenant, settings):
    make_queue("compute", required_worker_capabilities=["compute.qc"])
    make_subject("compute")
    sci = actor("worker_human", username="sci")
    for field, value in (("capabilities", ["compute.qc"]), ("max_concurrent_leases", 1000),
                         ("site_scope", ["sfo"])):
        refused("VALIDATION_ERROR", lambda f=field, v=value: act(
            "register_worker", sci, payload={"worker_type": "HUMAN_SESSION", f: v}))
    settings.BLOOMOPS_HUMAN_CAPABILITIES = ["wetlab.qc"]
    settings.BLOOMOPS_HUMAN_PROFILES = {"user:sci": {"max_concurrent_leases": 2}}
    worker = register(sci, worker_type="HUMAN_SESSION")
    p = load(euid=worker, tenant=tenant).props
    assert p["worker_key"] == "human://sci" and p["owner_username"] == "sci"
    assert p["capabilities"] == ["wetlab.qc"] and p["max_concurrent_leases"] == 2
    refused("WORKER_NOT_ELIGIBLE", lambda: claim(sci, worker, "compute"))
    # A change of configuration reaches the worker the next time its person acts.
    settings.BLOOMOPS_HUMAN_PROFILES = {"role:worker_human": {"capabilities": ["compute.qc"]}}
    act("heartbeat_worker", sci, worker_euid=worker)
    assert claim(sci, worker, "compute")["queue_key"] == "compute"


def test_an_admin_may_register_a_persons_worker_for_them(tenant):
    admin = actor("admin", username="boss")
    alice = actor("worker_human", username="alice")
    result = act("register_worker", admin, payload={"worker_key": "human://alice",
                                                    "worker_type": "HUMAN_SESSION"})
    p = load(euid=result["worker_euid"], tenant=tenant).props
    assert p["owner_username"] == "alice"
    # alice acts through it; another person may not.
    act("heartbeat_worker", alice, worker_euid=result["worker_euid"])
    mallory = actor("worker_human", username="mallory")
    refused("LEASE_NOT_OWNED", lambda: act("heartbeat_worker", mallory,
                                            worker_euid=result["worker_euid"]))


@pytest.mark.parametrize("key", ["human://ghost", "human://ALICE", "human:// alice",
                                 "human://gone", "human://office"])
def test_an_admin_registers_workers_only_for_people_who_work_at_the_bench(tenant, key):
    """An admin registered ONLINE human workers for nobody (a misspelt or differently cased
    username, one who left, one without the bench role): coverage counted them as people."""
    from django.contrib.auth.models import User

    actor("worker_human", username="alice")
    actor("worker_human", username="gone")
    User.objects.filter(username="gone").update(is_active=False)
    actor("operator", username="office")
    admin = actor("admin", username="boss")
    err = refused("VALIDATION_ERROR", lambda: act("register_worker", admin, payload={
        "worker_key": key, "worker_type": "HUMAN_SESSION"}))
    assert "names no person of this lab who works at the bench" in err.message


def test_service_workers_cannot_take_human_keys(tenant):
    svc = actor(*SERVICE)
    refused("VALIDATION_ERROR", lambda: act("register_worker", svc, payload={
        "worker_key": "human://alice", "worker_type": "SERVICE"}))


# ------------------------------------------------------------------ idempotency


def test_the_same_key_from_another_user_is_not_a_replay(flow):
    op1, op2 = actor("operator", username="op1"), actor("operator", username="op2")
    subject = make_subject("q1")
    first = act("place_execution_hold", op1, subject_euid=subject, expected_state="READY",
                idempotency_key="shared", payload={"reason": "x"})
    again = act("place_execution_hold", op1, subject_euid=subject, expected_state="READY",
                idempotency_key="shared", payload={"reason": "x"})
    assert again.replayed and again.action_euid == first.action_euid
    # op2's request is its own: here it meets the subject as it is now (HELD).
    err = refused("STATE_CONFLICT", lambda: act(
        "place_execution_hold", op2, subject_euid=subject, expected_state="READY",
        idempotency_key="shared", payload={"reason": "x"}))
    assert err.details.get("current_state") == "HELD"


# ------------------------------------------------------------------ payload bounds


@pytest.mark.parametrize(("payload", "words"), [
    ({"reason": "x", "junk": "y" * 10}, "Unknown payload field"),
    ({"reason": "a\x00b"}, "NUL"),
    ({"reason": "\ud800"}, "not valid Unicode"),
    ({"reason": "x", "hold_code": float("nan")}, "finite"),
    ({"reason": "x" * 3000}, "too long"),
])
def test_malformed_payloads_are_refused(flow, payload, words):
    op = actor("operator")
    subject = make_subject("q1")
    err = refused("VALIDATION_ERROR", lambda: act(
        "place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload=payload))
    assert words in err.message


def test_oversize_and_deep_payloads_are_refused(flow):
    svc = flow
    _, worker, lease = _claimed(svc)
    big = {"k": "v" * 70_000}
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease,
                                                          result_snapshot=big))
    assert "too large" in err.message
    deep: dict = {}
    node = deep
    for _ in range(12):
        node["n"] = {}
        node = node["n"]
    err = refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease,
                                                          result_snapshot=deep))
    assert "nested too deeply" in err.message


def test_a_nul_in_a_request_field_is_a_validation_error(flow):
    op = actor("operator")
    refused("VALIDATION_ERROR", lambda: act("place_execution_hold", op,
                                             subject_euid="Z-MX-1\x00",
                                             expected_state="READY", payload={"reason": "x"}))


# ------------------------------------------------------------------ holds and history


def test_cancelling_a_held_subject_ends_its_holds(flow):
    op = actor("operator")
    subject = make_subject("q1")
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"reason": "tube upside down", "hold_code": "QA_REVIEW"})["hold_euid"]
    assert [h["euid"] for h in selectors.active_holds()] == [hold]
    done = act("cancel_subject_execution", op, subject_euid=subject, expected_state="HELD",
               payload={"reason": "sample destroyed"})
    assert done["holds_ended"] == [hold]
    assert selectors.active_holds() == []
    hp = props(hold)
    assert hp["status"] == "RELEASED" and "cancel" in hp["release_reason"].lower()
    assert "sample destroyed" in hp["release_reason"]
    env = envelope(subject)
    assert env["state"] == "CANCELED" and env["hold_state"] == "NONE"
    assert {s.queue_key: s.held_count for s in selectors.queue_summaries()}["q1"] == 0


def test_a_force_expired_lease_is_in_the_subjects_history(flow):
    svc = flow
    subject, worker, lease = _claimed(svc)
    act("expire_queue_lease", actor("admin"), lease_euid=lease["lease_euid"],
        payload={"reason": "instrument jammed"})
    uid = load(euid=subject, tenant=selectors_tenant()).uid
    history = selectors.action_history(uid)
    expiry = [a for a in history if a["action_key"] == "expire_queue_lease"]
    assert len(expiry) == 1 and expiry[0]["reason"] == "instrument jammed"


def test_a_swept_lease_is_in_the_subjects_history(flow):
    svc = flow
    subject, worker, lease = _claimed(svc)
    clock.advance(3600)
    act("expire_queue_lease", actor("admin"))
    uid = load(euid=subject, tenant=selectors_tenant()).uid
    assert "expire_queue_lease" in [a["action_key"] for a in selectors.action_history(uid)]


def selectors_tenant() -> str:
    from django.conf import settings

    return settings.TAPDB_TENANT_ID


# ------------------------------------------------------------------ crash recovery


def test_a_restarted_worker_process_abandons_its_previous_leases(flow):
    svc = flow
    subject = make_subject("q1")
    worker = register(svc, worker_key="svc-1", process_identity="host:1:aaa")
    lease = claim(svc, worker)
    assert selectors.queue_depths()["q1"] == 0
    # Same process again (a re-registration): nothing is abandoned.
    again = act("register_worker", svc, payload={"worker_key": "svc-1",
                                                 "process_identity": "host:1:aaa"})
    assert again["abandoned_lease_euids"] == []
    restarted = act("register_worker", svc, payload={"worker_key": "svc-1",
                                                     "process_identity": "host:2:bbb"})
    assert restarted["abandoned_lease_euids"] == [lease["lease_euid"]]
    assert props(lease["lease_euid"])["status"] == "ABANDONED"
    record = props(lease["execution_record_euid"])
    assert record["status"] == "CANCELED" and "restarted" in record["error_message"]
    assert selectors.queue_depths()["q1"] == 1
    assert claim(svc, worker)["subject_euid"] == subject
    assert fetch_value("SELECT count(*) FROM generic_instance WHERE subtype = 'queue_lease'"
                       " AND json_addl->'properties'->>'status' = 'ACTIVE'"
                       " AND tenant_id = %s", [selectors_tenant()]) == 1


def test_requeue_with_a_null_priority_keeps_the_priority(flow):
    op = actor("operator")
    subject = make_subject("q1", priority=300)
    act("requeue_subject", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "again", "priority": None})
    assert envelope(subject)["priority"] == 300
    act("requeue_subject", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "lower it", "priority": "ROUTINE"})
    assert envelope(subject)["priority"] == 0


@pytest.mark.parametrize("value", ["qc\nrerun", "qc\x1b[2J", "qc\u200b", "x" * 201])
def test_a_step_key_is_one_printable_line_wherever_it_is_named(flow, value):
    """A completion's next step and a queue's default next step took any text (a newline,
    a terminal escape, a zero-width space) and stored it in the envelope as sent."""
    svc = flow
    _, worker, lease = _claimed(svc)
    refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, next_action_key=value))
    # a retry's queue is judged as a completion's (a failure answered NOT_FOUND instead)
    refused("VALIDATION_ERROR", lambda: _complete(svc, worker, lease, next_queue_key=value))
    refused("VALIDATION_ERROR", lambda: act(
        "fail_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"retryable": True, "next_queue_key": value}))
    refused("VALIDATION_ERROR", lambda: act(
        "update_queue", actor("admin", username="adm"), queue_key="q2",
        expected_revision=1, payload={"default_next_action_key": value, "reason": "x"}))


def test_a_step_key_is_stored_stripped(flow):
    svc = flow
    make_queue("q3")
    subject, worker, lease = _claimed(svc)
    _complete(svc, worker, lease, next_queue_key="q3", next_action_key=" qc_rerun ")
    assert envelope(subject)["next_queue_key"] == "q3"
    assert envelope(subject)["next_action_key"] == "qc_rerun"


@pytest.mark.parametrize("values", [[f"cap.{i}" for i in range(101)], ["c" * 201]])
def test_the_engine_bounds_every_list_of_keys(flow, values):
    """The engine holds the API's bounds itself (a worker another way in, a queue's file):
    at most 100 values of at most 200 characters."""
    svc = flow
    refused("VALIDATION_ERROR", lambda: register(svc, "w-big", capabilities=values))
    refused("VALIDATION_ERROR", lambda: act(
        "update_queue", actor("admin", username="adm"), queue_key="q2", expected_revision=1,
        payload={"required_worker_capabilities": values, "reason": "x"}))


@pytest.mark.parametrize("value", ["key\u200b", "\u2060", "a\nb", "k\x1b[2J"])
def test_an_idempotency_key_shows_as_what_it_is(flow, value):
    """A zero-width space, a word joiner or a newline was a key: logged, listed with leases
    and matched exactly, it read as another or as nothing."""
    svc = flow
    subject, worker, lease = _claimed(svc)
    refused("VALIDATION_ERROR", lambda: act(
        "release_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        idempotency_key=value, payload={}))


def test_a_refusal_names_a_score_of_unknown_fields_not_every_one(flow):
    """60,000 unknown payload keys made a 1 MB refusal of a 649 KB request."""
    svc = flow
    err = refused("VALIDATION_ERROR", lambda: act(
        "heartbeat_worker", svc, worker_euid="Z-AX-0",
        payload={f"junk{i:05d}": 1 for i in range(500)}))
    assert len(err.details["unknown_fields"]) == 20 and err.details["unknown_count"] == 500
    assert "and 480 more" in err.message and len(err.message) < 2000


@pytest.mark.parametrize("reason", ["\u200b", "\u2800", "\ufeff", "\u00ad", " \u200b\n"])
def test_a_reason_that_shows_nothing_is_no_reason(flow, reason):
    """A zero-width space, a braille blank, a byte-order mark or a soft hyphen passed as the
    required reason for a cancel, a request or its withdrawal: kept in the history, read by
    nobody."""
    op = actor("operator", username="qa")
    subject = make_subject("q1")
    refused("VALIDATION_ERROR", lambda: act(
        "cancel_subject_execution", op, subject_euid=subject, expected_state="READY",
        payload={"reason": reason}))
    refused("VALIDATION_ERROR", lambda: act(
        "place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": reason}))
