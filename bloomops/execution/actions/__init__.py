"""The action handlers, one module per topic, and the registry the executor runs.
Only the executor calls them."""

from __future__ import annotations

from bloomops.execution.actions.attempts import (
    CompleteQueueExecution,
    FailQueueExecution,
    RecordExternalResult,
    ReleaseQueueLease,
    RenewQueueLease,
)
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.claim import ClaimQueueItem
from bloomops.execution.actions.leases import ExpireQueueLease
from bloomops.execution.actions.subjects import (
    CancelSubjectExecution,
    PlaceExecutionHold,
    ReleaseExecutionHold,
    RequeueSubject,
)
from bloomops.execution.actions.workers import HeartbeatWorker, RegisterWorker, SetWorkerStatus

HANDLERS: dict[str, Handler] = {
    "register_worker": RegisterWorker(),
    "heartbeat_worker": HeartbeatWorker(),
    "set_worker_status": SetWorkerStatus(),
    "claim_queue_item": ClaimQueueItem(),
    "renew_queue_lease": RenewQueueLease(),
    "release_queue_lease": ReleaseQueueLease(),
    "complete_queue_execution": CompleteQueueExecution(),
    "fail_queue_execution": FailQueueExecution(),
    "place_execution_hold": PlaceExecutionHold(),
    "release_execution_hold": ReleaseExecutionHold(),
    "requeue_subject": RequeueSubject(),
    "cancel_subject_execution": CancelSubjectExecution(),
    "expire_queue_lease": ExpireQueueLease(),
    "record_external_result": RecordExternalResult(),
}

__all__ = ["HANDLERS", "Handler"]
