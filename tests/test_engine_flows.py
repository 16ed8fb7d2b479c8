"""The demo flows at the engine level: the wet-lab chain, the compute flow through
WAITING_EXTERNAL, and reprocessing against existing artifacts."""

from __future__ import annotations

import pytest

from bloomops.demo.data import (
    ANALYSIS_REQUEST,
    ARTIFACT,
    DEMO_QUEUES,
    EXTRACTED,
    LIBRARY,
    POOL,
    SPECIMEN,
)
from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import REL, load
from bloomops.tapdb.db import fetch_all
from bloomops.tapdb.instances import children
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    props,
    register,
    uid,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(tenant):
    for spec in DEMO_QUEUES:
        make_queue(**spec)
    svc = actor(*SERVICE)
    caps = sorted({c for q in DEMO_QUEUES for c in q["required_worker_capabilities"]})
    worker = register(svc, capabilities=caps, max_concurrent_leases=5)
    return svc, worker


def _step(svc, worker, queue_key, subject, *, state="READY", **payload):
    head = selectors.queue_head(queue_key)
    assert head is not None and head.euid == subject, f"{subject} not at head of {queue_key}"
    lease = claim(svc, worker, queue_key)
    assert lease["subject_euid"] == subject
    assert selectors.queue_depths()[queue_key] == 0
    return act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
               worker_euid=worker, expected_state=state, payload=payload)


def _output(name, code, queue_key, platform="illumina"):
    return {"template_code": code, "name": name,
            "properties": {"site": "sfo", "platform": platform, "assay": "wgs"},
            "execution": {"state": "READY", "next_queue_key": queue_key}}


def test_wet_lab_queue_chain_regression(lab, tenant):
    svc, worker = lab
    specimen = make_subject("extraction_prod", code=SPECIMEN, name="specimen")
    done = _step(svc, worker, "extraction_prod", specimen,
                 outputs=[_output("extract", EXTRACTED, "post_extract_qc")])
    assert envelope(specimen)["state"] == "COMPLETED"
    extract = done["output_euids"][0]
    qc = _step(svc, worker, "post_extract_qc", extract, next_queue_key="ilmn_lib_prep",
               result_snapshot={"rin": 8.1, "qc": "pass", "concentration": 35})
    assert qc["state"] == "READY" and envelope(extract)["next_queue_key"] == "ilmn_lib_prep"
    assert envelope(extract)["next_action_key"] == "create_library_prep"
    lib = _step(svc, worker, "ilmn_lib_prep", extract,
                outputs=[_output("library", LIBRARY, "ilmn_seq_pool")])["output_euids"][0]
    pool = _step(svc, worker, "ilmn_seq_pool", lib,
                 outputs=[_output("pool", POOL, "ilmn_start_seq_run")])["output_euids"][0]
    run = _step(svc, worker, "ilmn_start_seq_run", pool,
                outputs=[{"template_code": "content/material/sequencing_run/1.0",
                          "name": "run", "properties": {"flowcell": "FC1"}}])
    assert envelope(pool)["state"] == "COMPLETED"
    # The chain is traversable through lineage only.
    chain = [specimen, extract, lib, pool, run["output_euids"][0]]
    for parent, child in zip(chain, chain[1:], strict=False):
        uid = load(euid=parent, tenant=tenant).uid
        assert child in {o.euid for o in children(uid, REL["subject_output"])}
    # Every transition was an action, the first the step that made it (and sealed it).
    keys = [a["action_key"] for a in selectors.action_history(load(euid=extract,
                                                                    tenant=tenant).uid)]
    assert keys == ["complete_queue_execution"] + [
        "claim_queue_item", "complete_queue_execution"] * 2
    assert all(v == 0 for v in selectors.queue_depths().values())


def test_compute_execution_flow(lab, tenant):
    svc, worker = lab
    request = make_subject("analysis_dispatch", code=ANALYSIS_REQUEST, name="analysis")
    lease = claim(svc, worker, "analysis_dispatch")
    dispatched = act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                     worker_euid=worker, expected_state="READY",
                     payload={"external": {"pipeline": "wgs-v3", "run_id": "wf-9"}})
    assert dispatched["state"] == "WAITING_EXTERNAL"
    diag = selectors.subject_diagnostics(request)
    assert not diag.visible and "STATE_NOT_ELIGIBLE" in diag.reason_codes
    assert diag.props["external_dispatch"]["run_id"] == "wf-9"
    result = act("record_external_result", svc, subject_euid=request,
                 expected_state="WAITING_EXTERNAL",
                 payload={"outcome": "READY", "next_queue_key": "analysis_qc",
                          "result_snapshot": {"run_id": "wf-9", "status": "ok"},
                          "outputs": [{"template_code": ARTIFACT, "name": "vcf",
                                       "properties": {"uri": "s3://b/x.vcf", "kind": "vcf"}}]})
    assert result["state"] == "READY"
    artifact = result["output_euids"][0]
    assert selectors.queue_head("analysis_qc").euid == request
    final = _step(svc, worker, "analysis_qc", request, result_snapshot={"qc": "pass"})
    assert final["state"] == "COMPLETED"
    uid = load(euid=request, tenant=tenant).uid
    history = selectors.subject_history(uid)
    assert [r["props"]["status"] for r in history["records"]] == ["SUCCEEDED"] * 3
    assert [o["euid"] for o in history["outputs"]] == [artifact]


def test_artifact_reprocessing_compatibility(lab, tenant):
    svc, worker = lab
    test_compute_execution_flow(lab, tenant)
    request = fetch_all(
        "SELECT euid FROM generic_instance WHERE tenant_id = %s AND subtype = 'analysis_request'",
        [tenant],
    )[0]["euid"]
    uid = load(euid=request, tenant=tenant).uid
    before = selectors.subject_history(uid)
    tables_before = {r["t"] for r in fetch_all(
        "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public'")}
    op = actor("operator")
    requeued = act("requeue_subject", op, subject_euid=request, expected_state="COMPLETED",
                   queue_key="analysis_dispatch", payload={"reason": "reprocess with v4"})
    assert requeued["state"] == "READY"
    assert selectors.queue_head("analysis_dispatch").euid == request
    lease = claim(svc, worker, "analysis_dispatch")
    assert lease["attempt_number"] == 1
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"external": {"pipeline": "wgs-v4"}})
    after = selectors.subject_history(uid)
    assert [o["euid"] for o in after["outputs"]] == [o["euid"] for o in before["outputs"]]
    assert [r["euid"] for r in after["records"]][: len(before["records"])] == [
        r["euid"] for r in before["records"]
    ]
    assert len(after["records"]) == len(before["records"]) + 1
    assert {r["t"] for r in fetch_all(
        "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public'")} == tables_before


def test_a_requeue_told_reset_attempts_null_takes_the_default(tenant, settings):
    """A JSON client writing out what it leaves unset sent ``"reset_attempts": null``: the
    dead letter came back with its attempts kept, one new failure from the next dead
    letter, where leaving the field out resets them (RULES.md#retries)."""
    from tests.approval_support import dead_lettered

    settings.BLOOMOPS_APPROVAL_RULES = []  # the requeue itself, not its approval
    make_queue("q1", required_worker_capabilities=[])
    attempts = {}
    for told in ("absent", None, False, True):
        dead = dead_lettered("q1")
        payload = {"reason": "new aliquot"} | ({} if told == "absent" else
                                                {"reset_attempts": told})
        act("requeue_subject", actor("operator"), subject_euid=dead,
            expected_state="FAILED_TERMINAL", payload=payload)
        attempts[told] = envelope(dead)["attempt_count"]
    assert attempts == {"absent": 0, None: 0, False: 1, True: 0}


def _sent_outside(svc, worker, queue_key: str) -> str:
    """A subject whose step went to an outside system: WAITING_EXTERNAL."""
    subject = make_subject(queue_key)
    lease = claim(svc, worker, queue_key)
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"external": {"run_id": "wf-1"}})
    assert envelope(subject)["state"] == "WAITING_EXTERNAL"
    return subject


def _superseded(record: str) -> list[str]:
    """The records ``record`` supersedes."""
    return [o.euid for o in children(uid(record), REL["record_supersedes"])]


@pytest.mark.parametrize(("action", "done", "after"), [
    ("requeue_subject", "requeued", "READY"),
    ("place_execution_hold", "held", "HELD"),
    ("cancel_subject_execution", "canceled", "CANCELED")])
def test_reconciling_work_under_way_outside_records_that_it_was_given_up(
        tenant, action, done, after):
    """Work sent outside with no result back is reconciled by an operator's requeue, hold or
    cancel, each recording the attempt's end (RULES.md#reconciliation). A hold or a cancel
    wrote no record: the subject's history ended on the dispatch, as if the outside run were
    still to come back."""
    make_queue("q1", required_worker_capabilities=[])
    svc = actor(*SERVICE)
    subject = _sent_outside(svc, register(svc), "q1")
    sent = envelope(subject)["last_execution_record_euid"]
    act(action, actor("operator"), subject_euid=subject, expected_state="WAITING_EXTERNAL",
        payload={"reason": "  pipeline lost "})
    env = envelope(subject)
    assert env["state"] == after
    ended = env["last_execution_record_euid"]
    assert ended != sent
    record = props(ended)
    assert (record["status"], record["error_message"], record["subject_lookup_euid"]) == (
        "CANCELED", f"{done} by operator: pipeline lost (outside run wf-1 given up)", subject)
    # it ends where the action left the subject (not "waiting outside", which the inspector
    # reads as a dispatch), under the queue that sent the work out
    assert (record["start_state"], record["end_state"], record["queue_lookup_key"]) == (
        "WAITING_EXTERNAL", after, "q1")
    assert record["finished_at"] is not None
    assert props(sent)["status"] == "SUCCEEDED"  # the dispatch itself did succeed
    assert _superseded(ended) == [sent]
    assert sorted(records_of(subject)) == sorted([sent, ended])


def records_of(subject: str) -> list[str]:
    return [o.euid for o in children(uid(subject), REL["subject_record"])]


@pytest.mark.parametrize("action", ["place_execution_hold", "cancel_subject_execution"])
def test_work_another_writer_left_running_is_reconciled_on_the_record_too(tenant, action):
    """RUNNING is stored by other writers (Bloom's own steps): its outcome is as unknown to
    bloomops as an outside run's, so a hold or cancel records its end; with no record of its
    start, the new one supersedes nothing."""
    make_queue("q1")
    subject = make_subject("q1", state="RUNNING")
    act(action, actor("operator"), subject_euid=subject, expected_state="RUNNING",
        payload={"reason": "instrument stopped"})
    (record,) = records_of(subject)
    assert props(record)["status"] == "CANCELED"
    assert props(record)["error_message"].endswith(
        "instrument stopped (work running elsewhere given up)")
    assert envelope(subject)["last_execution_record_euid"] == record
    assert _superseded(record) == []


def test_a_reconciliation_supersedes_only_a_record_that_sent_work_outside(tenant):
    """Another writer's RUNNING subject whose last record is an earlier step's (it succeeded
    and moved on): that record sent nothing outside, and is not superseded."""
    make_queue("q1", required_worker_capabilities=[])
    svc = actor(*SERVICE)
    worker = register(svc)
    subject = make_subject("q1")
    lease = claim(svc, worker, "q1")
    act("complete_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"next_queue_key": "q1"})
    earlier = envelope(subject)["last_execution_record_euid"]
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,execution,state}', '\"RUNNING\"') WHERE euid = %s RETURNING uid",
              [subject])
    act("place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="RUNNING", payload={"reason": "instrument stopped"})
    ended = envelope(subject)["last_execution_record_euid"]
    assert ended != earlier and props(ended)["status"] == "CANCELED"
    assert _superseded(ended) == []


def test_a_dispatch_an_earlier_step_left_is_not_the_work_a_reconciliation_gives_up(tenant):
    """Another writer moved a subject that had waited outside on to RUNNING in q2; its
    properties still held q1's dispatch, and a hold filed the record under q1 as if q1's
    run were the one given up."""
    make_queue("q1", required_worker_capabilities=[])
    make_queue("q2")
    svc = actor(*SERVICE)
    subject = _sent_outside(svc, register(svc), "q1")
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,"
              " '{properties,execution,state}', '\"RUNNING\"'),"
              " '{properties,execution,next_queue_key}', '\"q2\"')"
              " WHERE euid = %s RETURNING uid", [subject])
    act("place_execution_hold", actor("operator"), subject_euid=subject,
        expected_state="RUNNING", payload={"reason": "instrument stopped"})
    record = props(envelope(subject)["last_execution_record_euid"])
    assert (record["queue_lookup_key"], record["error_message"]) == (
        "q2", "held by operator: instrument stopped (work running elsewhere given up)")


def test_holding_or_cancelling_work_not_under_way_writes_no_record(tenant):
    make_queue("q1")
    op = actor("operator")
    held, canceled = make_subject("q1"), make_subject("q1", state="FAILED_RETRYABLE",
                                                       retry_at="2026-01-01T00:00:00Z")
    act("place_execution_hold", op, subject_euid=held, expected_state="READY",
        payload={"reason": "check"})
    act("cancel_subject_execution", op, subject_euid=canceled,
        expected_state="FAILED_RETRYABLE", payload={"reason": "withdrawn"})
    assert records_of(held) == records_of(canceled) == []


def test_an_external_retryable_failure_at_the_attempt_limit_fails_for_good(tenant):
    """A retryable failure reported as an external result ignored the attempt limit: the
    item went on retrying (attempts 1, 2, 3, 4, 5 of 2) and never reached a dead letter
    (RULES.md#retries)."""
    from bloomops.execution import clock

    make_queue("q1", required_worker_capabilities=[], max_attempts_default=2,
               retry_policy={"mode": "FIXED", "initial_delay_seconds": 1})
    svc = actor(*SERVICE)
    worker = register(svc)
    subject = _sent_outside(svc, worker, "q1")
    outcomes = []
    for _ in range(2):
        if envelope(subject)["state"] != "WAITING_EXTERNAL":
            clock.advance(2)
            lease = claim(svc, worker, "q1")
            act("complete_queue_execution", svc, worker_euid=worker,
                lease_euid=lease["lease_euid"], expected_state=envelope(subject)["state"],
                payload={"external": {"run_id": "wf-2"}})
        done = act("record_external_result", svc, subject_euid=subject,
                   expected_state="WAITING_EXTERNAL",
                   payload={"outcome": "FAILED_RETRYABLE", "error_message": "sequencer down"})
        outcomes.append((done["state"], envelope(subject)["attempt_count"]))
    assert outcomes == [("FAILED_RETRYABLE", 1), ("FAILED_TERMINAL", 2)]
    [letter] = selectors.dead_letters()
    assert letter["subject_euid"] == subject
    assert letter["props"]["error_message"] == "sequencer down"


def test_an_external_result_ends_a_lease_another_writer_left_on_the_subject(tenant):
    """Another writer moved a leased subject to WAITING_EXTERNAL; the external result then
    finished it and left the lease ACTIVE, whose worker could complete the step over the
    result. The result ends the attempt: any lease too."""
    from django.db import connection

    make_queue("q1", required_worker_capabilities=[])
    svc = actor(*SERVICE)
    worker = register(svc)
    subject = make_subject("q1")
    late = claim(svc, worker, "q1")
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
                    " '{properties,execution,state}', '\"WAITING_EXTERNAL\"') WHERE euid = %s",
                    [subject])
    act("record_external_result", svc, subject_euid=subject, expected_state="WAITING_EXTERNAL",
        payload={"outcome": "COMPLETED"})
    assert envelope(subject)["state"] == "COMPLETED"
    assert [x for x in selectors.leases(status="ACTIVE") if x["subject_euid"] == subject] == []
    with pytest.raises(ActionError) as refused:
        act("complete_queue_execution", svc, worker_euid=worker, lease_euid=late["lease_euid"],
            expected_state="WAITING_EXTERNAL", payload={})
    assert refused.value.code == "LEASE_NOT_ACTIVE"


def test_a_queue_never_offers_work_that_is_out_being_done(tenant):
    """A queue another writer stored with WAITING_EXTERNAL among its eligible states offered
    a subject whose step an outside system was still doing: a second worker claimed it and
    failed it for good before the result came (RULES.md#visibility)."""
    make_queue("q1", required_worker_capabilities=[],
               eligible_states=["READY", "FAILED_RETRYABLE", "WAITING_EXTERNAL"])
    svc = actor(*SERVICE)
    worker = register(svc, max_concurrent_leases=2)
    subject = _sent_outside(svc, worker, "q1")
    assert selectors.queue_depths()["q1"] == 0
    with pytest.raises(ActionError) as refused:
        claim(svc, worker, "q1")
    assert refused.value.code == "NO_WORK"
    diag = selectors.subject_diagnostics(subject)
    assert any(r.code == "STATE_NOT_ELIGIBLE" and "(READY, FAILED_RETRYABLE)" in r.message
               for r in diag.reasons)


def test_the_inspector_tells_a_dispatch_from_its_outside_result(lab, tenant, client, users):
    """A step done outside read "attempt 1 · SUCCEEDED" twice, and its dispatch and result
    were both counted as done with nothing to tell them apart."""
    test_compute_execution_flow(lab, tenant)
    request = fetch_all("SELECT euid FROM generic_instance WHERE tenant_id = %s"
                        " AND subtype = 'analysis_request'", [tenant])[0]["euid"]
    client.force_login(users["operator"])
    html = client.get(f"/subjects/{request}/").content.decode()
    timeline = html.split('id="timeline"')[1].split("</ol>")[0]
    assert timeline.count("(dispatched; its result comes from outside)") == 1
    assert timeline.count("(the outside result)") == 1
    assert timeline.count('class="record-part"') == 2  # the QC step is neither


def test_a_failure_that_ends_the_item_always_leaves_qa_a_why(tenant):
    """An outside result FAILED_TERMINAL made a dead letter with no message; so did a
    transient failure at the attempt limit. The first is refused without one, the second's
    letter says what it is."""
    make_queue("q1", required_worker_capabilities=[], max_attempts_default=1)
    svc = actor(*SERVICE)
    worker = register(svc)
    waiting = make_subject("q1")
    lease = claim(svc, worker, "q1")
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"external": {"run_id": "wf-9"}})
    with pytest.raises(ActionError) as refused:
        act("record_external_result", svc, subject_euid=waiting,
            expected_state="WAITING_EXTERNAL", payload={"outcome": "FAILED_TERMINAL"})
    assert refused.value.code == "VALIDATION_ERROR"
    assert refused.value.details["field"] == "error_message"
    assert envelope(waiting)["state"] == "WAITING_EXTERNAL"
    bare = make_subject("q1")
    lease = claim(svc, worker, "q1")
    result = act("fail_queue_execution", svc, lease_euid=lease["lease_euid"],
                 worker_euid=worker, expected_state="READY",
                 payload={"error_class": "TRANSIENT_SYSTEM"})
    assert envelope(bare)["state"] == "FAILED_TERMINAL"
    [letter] = [d for d in selectors.dead_letters() if d["subject_euid"] == bare]
    assert letter["euid"] == result["dead_letter_euid"]
    assert letter["props"]["error_message"] == ("TRANSIENT_SYSTEM at the attempt limit; the"
                                                " last failure gave no message")


def test_an_output_is_sealed_by_the_step_that_made_it(lab, tenant):
    """An output routed READY had an envelope no action had sealed: rewritten in the
    database before its first claim, every check verified."""
    from bloomops.execution.chain import envelope_sealed
    from bloomops.execution.verification import verify_chains
    from bloomops.tapdb.db import execute

    svc, worker = lab
    specimen = make_subject("extraction_prod", code=SPECIMEN, name="specimen")
    done = _step(svc, worker, "extraction_prod", specimen,
                 outputs=[_output("extract", EXTRACTED, "post_extract_qc")])
    extract = done["output_euids"][0]
    env = envelope(extract)
    assert envelope_sealed(tenant, extract, env) and done["output_seals"] == {
        extract: env["seal"]}
    assert verify_chains(tenant).breaks == []
    execute("""UPDATE generic_instance SET json_addl = jsonb_set(json_addl,
        '{properties,execution,priority}', '999') WHERE euid = %s""", [extract])
    [said] = verify_chains(tenant, extract).breaks
    assert said.problem == ("is the newest record that sealed the subject's envelope, which"
                            " has changed since with no record: changed outside bloomops")
