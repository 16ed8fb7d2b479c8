"""The worker runtime drives subjects through the demo wet-lab chain and the compute flow,
in-process (the executor directly, and over the API through the test client)."""

from __future__ import annotations

import pytest

from bloomops.execution import clock, selectors
from bloomops.worker.handlers import compute, wetlab
from bloomops.worker.runtime import WorkerRuntime
from bloomops.worker.transport import DirectTransport
from tests.api_helpers import api_for  # noqa: F401
from tests.engine import act, actor, envelope, make_subject
from tests.worker_support import client_transport, demo_queues, history, produced_by_record

pytestmark = pytest.mark.django_db
SPECIMEN = "content/material/specimen/1.0"
ANALYSIS = "data/analysis/analysis_request/1.0"


@pytest.fixture
def lab(tenant, users):
    demo_queues()
    return users


def specimen(platform: str = "illumina") -> str:
    return make_subject("extraction_prod", code=SPECIMEN, name="Specimen T",
                        props={"site": "sfo", "platform": platform},
                        next_action_key="create_extraction")


def run(handlers, key: str = "w", transport=None) -> WorkerRuntime:
    runtime = WorkerRuntime(transport or DirectTransport("svc"), handlers, worker_key=key,
                            exit_when_idle=True, poll_min=0.0)
    runtime.run()
    return runtime


@pytest.mark.parametrize("platform,prefix", [("illumina", "ilmn"), ("ont", "ont")])
def test_wetlab_chain_end_to_end(lab, platform, prefix):
    subject = specimen(platform)
    runtime = run(wetlab.Handlers(seed=7))
    assert runtime.stats.completed == 5 and runtime.stats.failed == 0

    chain = [subject]
    queues_seen = []
    for _ in range(4):
        h = history(chain[-1])
        queues_seen += [r["props"]["queue_lookup_key"] for r in h["records"]]
        assert all(r["props"]["status"] == "SUCCEEDED" for r in h["records"])
        assert envelope(chain[-1])["state"] == "COMPLETED"
        (output,) = h["outputs"]
        # the output is linked from the execution record that produced it
        assert produced_by_record(output["euid"]) == [h["records"][-1]["euid"]]
        chain.append(output["euid"])
    assert queues_seen == ["extraction_prod", "post_extract_qc", f"{prefix}_lib_prep",
                           f"{prefix}_seq_pool", f"{prefix}_start_seq_run"]
    run_obj = history(chain[-2])["outputs"][0]
    assert run_obj["props"]["domain_state"] == "run_started"
    # the worker signed off honestly
    (worker,) = selectors.workers()
    assert worker.props["status"] == "OFFLINE"


def test_qc_places_a_hold(lab):
    specimen()
    run(wetlab.Handlers(seed=1, qc_hold_rate=1.0))
    (held,) = selectors.active_holds()
    assert held["props"]["hold_code"] == "BUSINESS_RULE_HOLD"
    assert held["subject_state"] == "HELD"
    assert "QC borderline" in held["props"]["reason"]


def test_retryable_failure_backs_off(lab):
    subject = specimen()
    runtime = run(wetlab.Handlers(seed=1, failure_rate=1.0))
    assert runtime.stats.failed == 1
    env = envelope(subject)
    assert env["state"] == "FAILED_RETRYABLE" and env["attempt_count"] == 1
    assert env["retry_at"] > clock.now().isoformat()
    (record,) = history(subject)["records"]
    assert record["props"]["error_class"] == "TRANSIENT_DEPENDENCY"
    clock.advance(3600)
    runtime = run(wetlab.Handlers(seed=1), key="w2")
    assert runtime.stats.completed >= 1 and envelope(subject)["state"] == "COMPLETED"


def test_compute_flow_over_the_api_and_reprocessing(lab):
    request = make_subject("analysis_dispatch", code=ANALYSIS, name="Analysis T",
                           next_action_key="start_analysis_run")
    token = api_for(lab["worker_service"]).token
    runtime = run(compute.Handlers(seed=3), transport=client_transport(token))
    assert runtime.stats.completed == 2  # dispatch, analysis QC
    assert envelope(request)["state"] == "COMPLETED"
    h = history(request)
    statuses = [(r["props"]["queue_lookup_key"], r["props"]["status"]) for r in h["records"]]
    assert statuses == [("analysis_dispatch", "SUCCEEDED"), ("analysis_dispatch", "SUCCEEDED"),
                        ("analysis_qc", "SUCCEEDED")]
    first_artifacts = [o["euid"] for o in h["outputs"]]
    assert len(first_artifacts) == 3
    # the external-result record produced them
    assert {produced_by_record(a)[0] for a in first_artifacts} == {h["records"][1]["euid"]}

    # reprocessing: an operator requeues against the existing artifacts
    act("requeue_subject", actor("operator"), subject_euid=request, expected_state="COMPLETED",
        queue_key="analysis_dispatch", payload={"reason": "reprocess with new reference"})
    run(compute.Handlers(seed=4), transport=client_transport(token), key="w2")
    assert envelope(request)["state"] == "COMPLETED"
    h2 = history(request)
    assert len(h2["records"]) == 6 and len(h2["outputs"]) == 6
    assert [o["euid"] for o in h2["outputs"]][:3] == first_artifacts
    dispatch2 = h2["records"][3]["props"]["result_snapshot"]["external_dispatch"]
    assert dispatch2["reprocess_of"] == first_artifacts


def test_a_worker_that_claims_is_online_again(tenant):
    """A service worker that reported OFFLINE, or whose heartbeats stopped, was handed work
    and kept reading OFFLINE while it held the lease: every count said nobody served the
    queue. Its claim now brings it back; an online worker's claim writes nothing to it."""
    from bloomops.execution.objects import load
    from tests.engine import SERVICE, claim, make_queue, register

    svc = actor(*SERVICE)
    make_queue("q1")
    for _ in range(3):
        make_subject("q1")
    worker = register(svc, heartbeat_ttl_seconds=60, max_concurrent_leases=5)
    act("heartbeat_worker", svc, worker_euid=worker, payload={"status": "OFFLINE"})
    [row] = selectors.workers(euid=worker)
    assert row.computed_status == "OFFLINE"
    claim(svc, worker)
    [row] = selectors.workers(euid=worker)
    assert (row.props["status"], row.computed_status, row.active_leases) == (
        "ONLINE", "ONLINE", 1)
    clock.advance(120)  # its heartbeats stopped
    assert selectors.workers(euid=worker)[0].computed_status == "OFFLINE"
    claim(svc, worker)
    [row] = selectors.workers(euid=worker)
    assert row.computed_status == "ONLINE" and row.heartbeat_lag_seconds < 5
    modified = load(euid=worker, tenant=tenant).props
    claim(svc, worker)  # online: the worker is not written
    assert load(euid=worker, tenant=tenant).props == modified


def test_a_pipeline_result_that_comes_back_after_its_run_was_given_up_is_refused(lab):
    """QA gave up an analysis run (requeued it) while the pipeline was still at it; the item
    was sent out again, and then the first run's result came back: it was taken as the
    item's result (WAITING_EXTERNAL, as expected) and the item moved on on the run QA had
    given up, leaving the new run's result nowhere to go. The callback names the revision
    its dispatch left, so the late one is refused and the new run's result is the one kept."""
    request = make_subject("analysis_dispatch", code=ANALYSIS, name="Analysis L",
                           next_action_key="start_analysis_run")
    given_up: list[str] = []

    class QaGivesUpTheFirstRun(compute.Handlers):
        def after_complete(self, runtime, job, outcome, result):
            super().after_complete(runtime, job, outcome, result)
            if not given_up:  # the first dispatch: QA requeues it before its result is in
                given_up.append(outcome.external["run_id"])
                act("requeue_subject", actor("operator"), subject_euid=request,
                    expected_state="WAITING_EXTERNAL",
                    payload={"reason": "pipeline node lost, run again"})

    # the pipeline takes a moment: the item is sent out again before the first result is in
    runtime = run(QaGivesUpTheFirstRun(seed=5, pipeline_seconds=0.5))
    assert envelope(request)["state"] == "COMPLETED"
    records = history(request)["records"]
    outside = [r["props"] for r in records
               if r["props"]["correlation"]["action_key"] == "record_external_result"]
    (kept,) = outside  # one outside result only: the late one wrote nothing
    assert kept["result_snapshot"]["run_id"] != given_up[0]
    assert [r["props"]["error_message"] for r in records
            if r["props"]["status"] == "CANCELED"] == [
        f"requeued by operator: pipeline node lost, run again (outside run {given_up[0]}"
        " given up)"]
    assert runtime.stats.completed == 3  # two dispatches, the analysis QC


def test_a_worker_without_a_handler_for_an_items_step_releases_it_and_stops(tenant, users):
    """A lab's robot given the capability of a lab queue its handler module does not know
    failed each item it claimed there as FAILED_TERMINAL ("No handler for action None"),
    dead-lettering the lab's work one item after another. The item is not at fault: it is
    released (no attempt counted) and the worker stops, saying what it lacks."""
    from tests.engine import make_queue

    make_queue("receipt", required_worker_capabilities=["lab.receipt"])
    first = make_subject("receipt", name="tube 1")
    second = make_subject("receipt", name="tube 2")
    runtime = WorkerRuntime(DirectTransport("svc"), wetlab.Handlers(), worker_key="robot",
                            capabilities=["lab.receipt"], poll_min=0.0)
    runtime.run()  # stops by itself: no exit_when_idle, no max_items
    assert runtime.unhandled == "no handler for items without an action key of queue 'receipt'"
    assert (runtime.stats.claimed, runtime.stats.released, runtime.stats.failed) == (1, 1, 0)
    env = envelope(first)
    assert (env["state"], env["attempt_count"]) == ("READY", 0)
    assert selectors.dead_letters() == []
    assert history(second)["records"] == []  # it stopped at the first
    (record,) = history(first)["records"]
    assert record["props"]["status"] == "CANCELED"
    assert record["props"]["error_message"] == (
        "NO_HANDLER: worker robot has no handler for items without an action key of queue"
        " 'receipt'")
    (worker,) = selectors.workers()
    assert worker.props["status"] == "OFFLINE"  # signed off: nobody counts on it


def test_run_worker_without_a_handler_exits_4_saying_what_to_mend(tenant, users, capsys):
    """A supervisor restarts a worker that exits; one that lacks a handler would only claim
    and release again, so it exits 4 (docs/DEPLOY.md: RestartPreventExitStatus=3 4)."""
    from django.core.management import call_command

    from bloomops.worker.management.commands.run_worker import EXIT_NO_HANDLER
    from tests.engine import make_queue

    make_queue("receipt", required_worker_capabilities=["lab.receipt"])
    make_subject("receipt", name="tube 1")
    with pytest.raises(SystemExit) as stopped:
        call_command("run_worker", "--worker-key", "robot", "--user", "svc",
                     "--capabilities", "lab.receipt", "--handlers",
                     "bloomops.worker.handlers.wetlab", "--poll-max", "0.01")
    assert stopped.value.code == EXIT_NO_HANDLER == 4
    said = capsys.readouterr().err
    assert "no handler for items without an action key of queue 'receipt'" in said
    assert "(the item was not failed)" in said and "bloomops.worker.handlers.wetlab" in said


def test_a_release_refused_is_not_counted_as_made(tenant, users):
    """The worker counted the item released even when its release was refused (the claim
    already gone): it is counted lost instead, and the worker still stops."""
    from bloomops.execution.errors import ActionError
    from tests.engine import make_queue

    class ClaimGoneOnRelease(DirectTransport):
        def act(self, action_key, **fields):
            if action_key == "release_queue_lease":
                raise ActionError("LEASE_NOT_ACTIVE", lease_euid=fields.get("lease_euid"))
            return super().act(action_key, **fields)

    make_queue("receipt", required_worker_capabilities=["lab.receipt"])
    make_subject("receipt", name="tube 1")
    runtime = WorkerRuntime(ClaimGoneOnRelease("svc"), wetlab.Handlers(), worker_key="robot",
                            capabilities=["lab.receipt"], poll_min=0.0)
    runtime.run()
    assert runtime.unhandled and (runtime.stats.released, runtime.stats.lost) == (0, 1)
