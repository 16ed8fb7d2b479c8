"""The worker runtime when its lease is refused renewal mid-job: a passing conflict is
tried again, and a lease that is gone stops the work instead of finishing it for nothing
(the item would be done twice: by this worker, and by whoever claims it after expiry)."""

from __future__ import annotations

import time
import uuid

import pytest

from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.worker.handling import HandlerSet, Job, Outcome
from bloomops.worker.runtime import WorkerRuntime
from bloomops.worker.transport import DirectTransport
from tests.conftest import make_user
from tests.engine import envelope, make_queue, make_subject

ACTION = "create_extraction"


@pytest.fixture
def lab(committed, settings):
    settings.TAPDB_TENANT_ID = str(uuid.uuid4())
    make_user("svc-ll", "worker_service")
    # a 1 s lease: the runtime renews it every third of a second
    make_queue("rq", required_worker_capabilities=["wetlab.extraction"],
               lease_ttl_seconds=1, default_next_action_key=ACTION)
    return make_subject("rq", next_action_key=ACTION)


class Slow(HandlerSet):
    CAPABILITIES = ["wetlab.extraction"]
    HANDLERS = {ACTION: "work"}

    def __init__(self, seconds: float, during=None) -> None:
        super().__init__()
        self.seconds, self.during, self.worked = seconds, during, 0.0

    def work(self, job: Job) -> Outcome:
        started = time.monotonic()
        try:
            if self.during:
                self.during(job)
            job.sleep(self.seconds)
            return Outcome(result_snapshot={"done": True})
        finally:
            self.worked = time.monotonic() - started


class OneConflict(DirectTransport):
    """The first renewal meets a lock held elsewhere: CONCURRENT_UPDATE, nothing written."""

    renews = 0

    def act(self, action_key, **kw):
        if action_key == "renew_queue_lease":
            self.renews += 1
            if self.renews == 1:
                raise ActionError("CONCURRENT_UPDATE")
        return super().act(action_key, **kw)


def _runtime(transport, handlers, key: str) -> WorkerRuntime:
    return WorkerRuntime(transport, handlers, worker_key=key, exit_when_idle=True,
                         poll_min=0.0, fault_min=0.0, heartbeat_ttl_seconds=5)


def _admin(username: str, action_key: str, **fields) -> None:
    admin = Actor.of(make_user(username, "admin"))
    execute(ActionRequest(action_key, actor=admin, idempotency_key=uuid.uuid4().hex,
                          **fields))


def test_a_renewal_refused_for_a_conflict_is_tried_again(lab):
    """One CONCURRENT_UPDATE ended the renewals: the lease expired under the work, whose
    result was refused, and the item was claimed and done a second time."""
    transport = OneConflict("svc-ll")
    runtime = _runtime(transport, Slow(2.0), "ll-conflict")
    runtime.run()
    assert (runtime.stats.claimed, runtime.stats.completed, runtime.stats.lost) == (1, 1, 0)
    assert transport.renews >= 4 and envelope(lab)["state"] == "COMPLETED"


def test_a_lease_ended_under_the_work_stops_it_and_reports_nothing(lab):
    def expire(job: Job) -> None:
        _admin("adm-ll", "expire_queue_lease", lease_euid=job.lease_euid,
               payload={"reason": "instrument down"})

    handlers = Slow(5.0, during=expire)
    runtime = _runtime(DirectTransport("svc-ll"), handlers, "ll-expired")
    runtime.max_items = 1
    runtime.run()
    assert handlers.worked < 3.0  # stopped at the next renewal, not after 5 s
    assert runtime.stats.lost >= 1 and runtime.stats.completed == 0
    assert envelope(lab)["state"] != "COMPLETED"


def test_a_worker_disabled_during_its_work_gives_the_item_back(lab):
    """The disabled worker could not renew, yet its completion was taken."""
    def disable(job: Job) -> None:
        _admin("adm-ll2", "set_worker_status", worker_euid=job.worker_euid,
               payload={"operation": "disable", "reason": "bad reagent lot"})

    runtime = _runtime(DirectTransport("svc-ll"), Slow(0.1, during=disable), "ll-disabled")
    runtime.max_items = 1
    runtime.run()
    assert runtime.stats.completed == 0 and runtime.stats.released == 1
    assert envelope(lab)["state"] == "READY"  # for another worker to claim
