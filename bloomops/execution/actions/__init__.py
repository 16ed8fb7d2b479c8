"""The action handlers, one module per topic, and the registry the executor runs.
Only the executor calls them."""

from __future__ import annotations

from dataclasses import dataclass

from bloomops.execution.actions.approvals import (
    CancelApproval,
    DecideApproval,
    RequestApproval,
)
from bloomops.execution.actions.attempts import (
    CompleteQueueExecution,
    FailQueueExecution,
    RecordExternalResult,
    ReleaseQueueLease,
    RenewQueueLease,
)
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.claim import ClaimQueueItem
from bloomops.execution.actions.evidence import RecordEvidenceBundle
from bloomops.execution.actions.intake import RegisterSubject, RouteSubject
from bloomops.execution.actions.leases import ExpireQueueLease
from bloomops.execution.actions.queues import (
    CreateQueue,
    ReplaceQueue,
    SetQueueEnabled,
    UpdateQueue,
)
from bloomops.execution.actions.subjects import (
    CancelSubjectExecution,
    PlaceExecutionHold,
    ReleaseExecutionHold,
    RequeueSubject,
)
from bloomops.execution.actions.workers import HeartbeatWorker, RegisterWorker, SetWorkerStatus


@dataclass(frozen=True)
class ActionDef:
    """One action: its key (the action template's subtype), the path it has under
    /api/v1/execution/actions/, its handler and the one-line summary the API shows."""

    key: str
    path: str
    handler: Handler
    summary: str


# The action registry: the executor runs its handlers, the API routes its paths (with a
# request schema per key), the worker's HTTP transport posts to them.
ACTIONS: dict[str, ActionDef] = {d.key: d for d in (
    ActionDef("register_worker", "register-worker", RegisterWorker(),
              "Register (upsert by worker_key) a worker"),
    ActionDef("heartbeat_worker", "heartbeat-worker", HeartbeatWorker(), "Heartbeat a worker"),
    ActionDef("claim_queue_item", "claim", ClaimQueueItem(),
              "Claim the next visible item: of queue_key, or of the first serviceable queue in"
              " dispatch order; human workers may name a subject_euid"),
    ActionDef("renew_queue_lease", "renew-lease", RenewQueueLease(),
              "Renew an own active lease"),
    ActionDef("release_queue_lease", "release-lease", ReleaseQueueLease(),
              "Release an own active lease without a result"),
    ActionDef("complete_queue_execution", "complete", CompleteQueueExecution(),
              "Complete the leased attempt: route to next_queue_key, finish, or wait for an"
              " external result (external)"),
    ActionDef("fail_queue_execution", "fail", FailQueueExecution(),
              "Fail the leased attempt with a retry class"),
    ActionDef("place_execution_hold", "hold", PlaceExecutionHold(),
              "Place a hold (stop-the-line)"),
    ActionDef("release_execution_hold", "release-hold", ReleaseExecutionHold(),
              "Release a hold"),
    ActionDef("requeue_subject", "requeue", RequeueSubject(), "Requeue a subject (operator)"),
    ActionDef("cancel_subject_execution", "cancel", CancelSubjectExecution(),
              "Cancel a subject (operator)"),
    ActionDef("expire_queue_lease", "expire-lease", ExpireQueueLease(),
              "Force-expire a lease, or sweep every expired lease without lease_euid (admin)"),
    ActionDef("record_external_result", "external-result", RecordExternalResult(),
              "Record the result of external work of a WAITING_EXTERNAL subject"),
    ActionDef("set_worker_status", "worker-status", SetWorkerStatus(),
              "Drain, disable, enable or retire a worker (admin)"),
    ActionDef("route_subject", "route-subject", RouteSubject(),
              "Route an existing object (no envelope yet, or PENDING) into a queue"),
    ActionDef("register_subject", "register-subject", RegisterSubject(),
              "Create a new subject of a template the queue takes and route it"),
    ActionDef("record_evidence_bundle", "record-evidence-bundle", RecordEvidenceBundle(),
              "Record the sha256 of a subject's evidence bundle (operator); GET"
              " /subjects/{euid}/evidence builds, records and returns one"),
    ActionDef("create_queue", "create-queue", CreateQueue(), "Create a queue (admin)"),
    ActionDef("update_queue", "update-queue", UpdateQueue(),
              "Change a queue's mutable settings at the revision you saw (admin)"),
    ActionDef("set_queue_enabled", "set-queue-enabled", SetQueueEnabled(),
              "Disable a queue in place with a reason, or enable it (admin)"),
    ActionDef("replace_queue", "replace-queue", ReplaceQueue(),
              "Retire a queue and create its successor, e.g. with new subject templates"
              " (admin)"),
    ActionDef("request_approval", "request-approval", RequestApproval(),
              "Ask a second person to approve a gated action on a subject (operator)"),
    ActionDef("decide_approval", "decide-approval", DecideApproval(),
              "Approve (running the gated action) or reject an approval request; signed by"
              " re-entering your password (another operator than the requester)"),
    ActionDef("cancel_approval", "cancel-approval", CancelApproval(),
              "Withdraw an approval request (its requester, or an admin)"),
)}
HANDLERS: dict[str, Handler] = {key: d.handler for key, d in ACTIONS.items()}

__all__ = ["ACTIONS", "HANDLERS", "ActionDef", "Handler"]
