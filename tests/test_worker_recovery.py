"""Service workers survive faults, as real processes on the real database:
PostgreSQL stopped and started under running workers, a worker killed and started again with
its key, and run_demo_workers' supervisor restarting a killed child."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid

import pytest

from bloomops.execution import selectors
from bloomops.worker.management.commands.run_demo_workers import Supervisor
from bloomops.worker.management.commands.run_worker import (
    EXIT_NO_HANDLER,
    EXIT_STOPPED_BY_ADMIN,
)
from tests.conftest import make_user
from tests.engine import act, actor, envelope, make_queue, make_subject
from tests.worker_support import (
    database_outage,
    embedded_server,
    history,
    start_worker,
    stop_worker,
    wait_until,
)

QC = "record_post_extract_qc"  # the demo QC handler: no outputs, routes nowhere here
QC_WORKER = ["--handlers", "bloomops.worker.handlers.wetlab", "--capabilities", "wetlab.qc",
             "--poll-max", "0.5", "--heartbeat-ttl", "30"]


@pytest.fixture
def qc_lab(committed, settings):
    settings.TAPDB_TENANT_ID = str(uuid.uuid4())
    make_user("svc-rec", "worker_service")

    def queue(key: str, **config):
        make_queue(key, required_worker_capabilities=["wetlab.qc"],
                   default_next_action_key=QC, **config)

    return queue


def subjects(queue_key: str, n: int) -> list[str]:
    # platform "none": QC routes to the queue's default next queue, of which there is none
    return [make_subject(queue_key, name=f"s{i}", props={"platform": "none"},
                         next_action_key=QC) for i in range(n)]


def completed(euids: list[str]) -> int:
    return sum(envelope(e)["state"] == "COMPLETED" for e in euids)


@pytest.mark.serial
def test_workers_carry_on_through_a_database_restart(qc_lab):
    server = embedded_server()
    if server is None:
        pytest.skip("DATABASE_URL points to an external server; only the embedded one can"
                    " be stopped and started by a test")
    # A lease outlives the outage; an item failed by it would come back within a second.
    qc_lab("rq", lease_ttl_seconds=60, max_attempts_default=20,
           retry_policy={"initial_delay_seconds": 1, "backoff_factor": 1,
                         "max_delay_seconds": 1})
    items = subjects("rq", 24)
    workers = [start_worker(f"rec-{i}", *QC_WORKER, "--delay", "0.4", "--seed", str(i),
                            user="svc-rec") for i in range(3)]
    try:
        wait_until(lambda: completed(items) >= 6, "the workers to be under way")
        database_outage(server, seconds=3)
        wait_until(lambda: completed(items) == len(items), "every item to be completed")
        alive = [w.poll() is None for w in workers]
    finally:
        ended = [stop_worker(w) for w in workers]
    assert alive == [True, True, True], [out for _, out in ended]
    assert [code for code, _ in ended] == [0, 0, 0], [out for _, out in ended]
    logs = "".join(out for _, out in ended)
    assert "OperationalError" in logs or "InterfaceError" in logs  # the outage was felt
    assert logs.count("signed off OFFLINE") == 3

    # Nothing lost: no lease left active. Nothing doubled: one lease and one successful
    # attempt per item (a claim or completion whose answer was lost was replayed).
    assert selectors.leases(status="ACTIVE") == []
    leases = selectors.leases()
    assert sorted(lease["subject_euid"] for lease in leases) == sorted(items)
    assert {lease["effective_status"] for lease in leases} == {"COMPLETED"}
    for euid in items:
        records = history(euid)["records"]
        assert [r["props"]["status"] for r in records] == ["SUCCEEDED"], euid


def test_restarted_worker_ends_the_leases_of_its_previous_process(qc_lab):
    qc_lab("cq", lease_ttl_seconds=600)  # far longer than the test: the TTL frees nothing
    (item,) = subjects("cq", 1)
    first = start_worker("crashy", *QC_WORKER, "--delay", "600", user="svc-rec")
    try:
        lease = wait_until(lambda: selectors.leases(status="ACTIVE"), "the first claim")[0]
    finally:
        first.kill()
        stop_worker(first)
    second = start_worker("crashy", *QC_WORKER, "--exit-when-idle", user="svc-rec")
    try:
        second.wait(timeout=90)  # it exits by itself once idle
    finally:
        code, out = stop_worker(second)
    assert code == 0, out
    assert "recovered 1 lease(s) of its previous process" in out

    by_euid = {row["euid"]: row for row in selectors.leases()}
    assert by_euid[lease["euid"]]["effective_status"] == "ABANDONED"
    assert envelope(item)["state"] == "COMPLETED"
    assert sorted(row["effective_status"] for row in by_euid.values()) == [
        "ABANDONED", "COMPLETED"]
    (worker,) = selectors.workers()  # the same worker, not a second one
    assert worker.props["worker_key"] == "crashy"


SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_supervisor_restarts_a_killed_child_and_stops_all():
    supervisor = Supervisor({"a": SLEEPER, "b": SLEEPER}, restart_min=0.1)
    thread = threading.Thread(target=supervisor.run, kwargs={"poll": 0.05})
    thread.start()
    try:
        a, b = supervisor.children
        wait_until(lambda: a.process and b.process, "both children to start")
        killed, other = a.process.pid, b.process.pid
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: a.restarts == 1 and a.process.poll() is None, "the restart")
        assert a.process.pid != killed
        assert b.process.pid == other and b.restarts == 0
    finally:
        supervisor.stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert [c.process.poll() for c in supervisor.children] == [-signal.SIGTERM] * 2


def test_supervisor_backs_off_a_child_that_keeps_exiting():
    supervisor = Supervisor({"c": [sys.executable, "-c", "pass"]}, restart_min=0.1,
                            restart_max=0.4)
    (child,) = supervisor.children
    delays = []
    supervisor.check()  # starts it
    for _ in range(4):
        child.process.wait()
        supervisor.check()  # notices the exit and schedules the restart
        delays.append(child.delay)
        wait_until(lambda: (supervisor.check(), child.restart_at == 0.0)[1], "the restart",
                   every=0.05)
    assert delays == [0.1, 0.2, 0.4, 0.4]
    assert child.restarts == 4
    supervisor.terminate()


def test_a_worker_an_admin_disabled_exits_as_stopped_and_is_not_restarted(qc_lab):
    """The demo supervisor started a disabled worker again and again (back-off up to 30 s):
    each start registered it once more, an action record each time, to see it stop."""
    qc_lab("dq")
    first = start_worker("parked", *QC_WORKER, "--exit-when-idle", user="svc-rec")
    first.wait(timeout=90)  # nothing to do: it exits once idle
    code, out = stop_worker(first)
    assert code == 0, out
    (worker,) = selectors.workers()
    act("set_worker_status", actor("admin", username="adm"), worker_euid=worker.euid,
        payload={"operation": "disable", "reason": "bench moved"})
    before = len(selectors.action_history(worker.uid))
    again = start_worker("parked", *QC_WORKER, user="svc-rec")
    again.wait(timeout=90)
    code, out = stop_worker(again)
    assert code == EXIT_STOPPED_BY_ADMIN, out
    assert "is DISABLED by an admin" in out
    # it registered (the engine must hear of the new process) and did nothing else
    actions = selectors.action_history(worker.uid)[before:]
    assert [a["action_key"] for a in actions] == ["register_worker"]
    assert selectors.workers(euid=worker.euid)[0].props["status"] == "DISABLED"


def test_supervisor_parks_a_child_stopped_by_an_admin_until_it_may_restart():
    allowed = threading.Event()
    asked = []

    def may_restart(name: str) -> bool:
        asked.append(name)
        return allowed.is_set()

    stopped = [sys.executable, "-c", f"raise SystemExit({EXIT_STOPPED_BY_ADMIN})"]
    supervisor = Supervisor({"d": stopped}, restart_min=0.05, may_restart=may_restart,
                            parked_poll=0.05)
    (child,) = supervisor.children
    supervisor.check()
    child.process.wait()
    wait_until(lambda: (supervisor.check(), len(asked) >= 3)[1], "the parked child's polls",
               every=0.02)
    assert child.parked and child.restarts == 0  # asked, and never started while refused
    allowed.set()
    wait_until(lambda: (supervisor.check(), child.restarts == 1)[1], "the restart",
               every=0.02)
    assert not child.parked
    supervisor.terminate()


def test_supervisor_does_not_start_again_a_child_without_a_handler():
    """A demo worker that claimed an item it has no handler for exits 4: started again, it
    would claim and release the same item every time (docs/DEPLOY.md#workers)."""
    lacking = [sys.executable, "-c", f"raise SystemExit({EXIT_NO_HANDLER})"]
    supervisor = Supervisor({"e": lacking}, restart_min=0.01)
    (child,) = supervisor.children
    supervisor.check()
    child.process.wait()
    for _ in range(20):
        supervisor.check()
        time.sleep(0.01)
    assert child.given_up and child.restarts == 0
    supervisor.terminate()
