"""run_worker as a real process: SIGKILL mid-lease is recovered by another worker after the
TTL (and the dead worker's late completion gets LEASE_EXPIRED); SIGTERM drains and signs off.

The subprocess uses real time; the recovering worker runs in this process with the engine
clock moved past the lease TTL, so nothing here waits for a TTL to pass."""

from __future__ import annotations

import uuid

import pytest

from bloomops.execution import clock, selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.worker.handlers import wetlab
from bloomops.worker.runtime import WorkerRuntime
from bloomops.worker.transport import DirectTransport
from tests.conftest import make_user
from tests.engine import make_queue, make_subject
from tests.worker_support import start_worker, stop_worker, wait_until

TTL = 3


@pytest.fixture
def proc_env(committed, settings):
    settings.TAPDB_TENANT_ID = str(uuid.uuid4())
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = make_user("svc-proc", "worker_service")
    make_queue("pq", required_worker_capabilities=["wetlab.extraction"], lease_ttl_seconds=TTL,
               default_next_action_key="create_extraction",
               output_template_codes=["content/material/extracted_sample/1.0"])
    subject = make_subject("pq", next_action_key="create_extraction")
    return {"subject": subject, "user": user}


def start(key: str):
    return start_worker(key, "--handlers", "bloomops.worker.handlers.wetlab",
                        "--capabilities", "wetlab.extraction", "--delay", "600",
                        "--poll-max", "0.2", "--heartbeat-ttl", "30", user="svc-proc")


def wait_for_active_lease(proc) -> dict:
    def claimed():
        assert proc.poll() is None, stop_worker(proc)[1]
        return selectors.leases(status="ACTIVE")

    return wait_until(claimed, "the worker process to claim", seconds=90)[0]


def test_sigkill_mid_lease_is_recovered_after_ttl(proc_env):
    proc = start("proc-killed")
    try:
        lease = wait_for_active_lease(proc)
    finally:
        proc.kill()
        stop_worker(proc)
    assert lease["subject_euid"] == proc_env["subject"]
    dead_worker = lease["worker_euid"]

    # Before the TTL nobody can take it; after the TTL another worker does.
    assert selectors.queue_depths()["pq"] == 0
    clock.advance(TTL + 5)
    assert selectors.queue_depths()["pq"] == 1  # expired lease is inactive, no sweeper ran
    runtime = WorkerRuntime(DirectTransport("svc-proc"), wetlab.Handlers(seed=1),
                            worker_key="proc-rescuer", exit_when_idle=True, poll_min=0.0)
    runtime.run()
    assert runtime.stats.completed == 1
    d = selectors.subject_diagnostics(proc_env["subject"])
    assert d is not None and d.state == "COMPLETED"

    # the killed worker's late completion is refused
    with pytest.raises(ActionError) as refused:
        execute(ActionRequest("complete_queue_execution", actor=Actor.of(proc_env["user"]),
                              idempotency_key="late", subject_euid=proc_env["subject"],
                              worker_euid=dead_worker, lease_euid=lease["euid"],
                              expected_state="READY"))
    assert refused.value.code == "LEASE_EXPIRED"
    assert refused.value.http_status == 409


def test_sigterm_drains_releases_and_signs_off(proc_env):
    proc = start("proc-drained")
    try:
        lease = wait_for_active_lease(proc)
    finally:
        code, out = stop_worker(proc)  # SIGTERM
    assert code == 0, out
    (row,) = selectors.leases()
    assert row["euid"] == lease["euid"] and row["effective_status"] == "RELEASED"
    assert row["props"]["release_reason"] == "WORKER_STOPPING"
    (worker,) = selectors.workers()
    assert worker.props["status"] == "OFFLINE"
    assert selectors.queue_depths()["pq"] == 1
