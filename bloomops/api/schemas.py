"""Request and response schemas of API v1 (pydantic, through django-ninja)."""

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field

StateName = Literal["PENDING", "READY", "RUNNING", "WAITING_EXTERNAL", "FAILED_RETRYABLE",
                    "FAILED_TERMINAL", "HELD", "CANCELED", "COMPLETED"]
RetryClassName = Literal["TRANSIENT_SYSTEM", "TRANSIENT_DEPENDENCY", "TRANSIENT_CAPACITY",
                         "PERMANENT_INPUT", "PERMANENT_STATE", "BUSINESS_RULE_HOLD",
                         "OPERATOR_CANCELED"]


class ErrorBody(Schema):
    code: str = Field(description="Stable error code, e.g. STATE_CONFLICT, NO_WORK.")
    message: str = Field(description="A readable explanation for an operator.")
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorOut(Schema):
    error: ErrorBody


class ActionEnvelope(Schema):
    """The request envelope of spec 7.2. Fields an action does not use may be omitted.
    Action-specific fields may be sent at the top level (as documented per action) or
    inside ``payload``; top-level values win."""

    model_config = ConfigDict(extra="forbid")

    idempotency_key: str = Field(min_length=1, max_length=200, description=(
        "Required. A retry with the same key and the same content returns the first"
        " response; the same key with other content is IDEMPOTENCY_CONFLICT."))
    subject_euid: str | None = None
    worker_euid: str | None = None
    lease_euid: str | None = None
    hold_euid: str | None = None
    queue_key: str | None = None
    expected_state: StateName | None = None
    expected_revision: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class RegisterWorkerIn(ActionEnvelope):
    worker_key: str | None = Field(None, description="Required: the worker's stable key.")
    display_name: str | None = None
    worker_type: Literal["SERVICE", "HUMAN_SESSION", "INSTRUMENT_ADAPTER"] | None = None
    capabilities: list[str] | None = None
    site_scope: list[str] | None = None
    platform_scope: list[str] | None = None
    assay_scope: list[str] | None = None
    max_concurrent_leases: int | None = None
    heartbeat_ttl_seconds: int | None = None
    build_version: str | None = None
    host: str | None = None
    process_identity: str | None = None


class HeartbeatWorkerIn(ActionEnvelope):
    status: Literal["ONLINE", "OFFLINE", "DRAINING"] | None = None
    display_name: str | None = None
    build_version: str | None = None
    host: str | None = None
    process_identity: str | None = None
    last_error_class: str | None = None


class ClaimIn(ActionEnvelope):
    pass


class RenewLeaseIn(ActionEnvelope):
    pass


class ReleaseLeaseIn(ActionEnvelope):
    reason: str | None = None


class OutputSpec(Schema):
    template_code: str
    name: str
    properties: dict[str, Any] = Field(default_factory=dict)
    execution: dict[str, Any] | None = Field(None, description=(
        "Execution envelope fields for a produced work-bearing object (state,"
        " next_queue_key, next_action_key, priority ...)."))


class CompleteIn(ActionEnvelope):
    next_queue_key: str | None = None
    next_action_key: str | None = None
    result_snapshot: dict[str, Any] | None = None
    outputs: list[OutputSpec] | None = None
    external: dict[str, Any] | None = Field(None, description=(
        "External dispatch metadata: the subject waits in WAITING_EXTERNAL for"
        " /actions/external-result."))


class FailIn(ActionEnvelope):
    retryable: bool | None = None
    error_class: RetryClassName | None = None
    error_code: str | None = None
    error_message: str | None = None
    next_queue_key: str | None = None


class HoldIn(ActionEnvelope):
    hold_code: str | None = None
    reason: str | None = Field(None, description="Required.")


class ReleaseHoldIn(ActionEnvelope):
    reason: str | None = None


class RequeueIn(ActionEnvelope):
    reason: str | None = Field(None, description="Required.")
    reset_attempts: bool | None = None
    priority: int | str | None = None
    next_action_key: str | None = None


class CancelIn(ActionEnvelope):
    reason: str | None = Field(None, description="Required.")


class ExpireLeaseIn(ActionEnvelope):
    reason: str | None = None


class ExternalResultIn(ActionEnvelope):
    outcome: Literal["READY", "COMPLETED", "FAILED_RETRYABLE", "FAILED_TERMINAL"] | None = None
    next_queue_key: str | None = None
    result_snapshot: dict[str, Any] | None = None
    outputs: list[OutputSpec] | None = None
    error_message: str | None = None


class WorkerStatusIn(ActionEnvelope):
    operation: Literal["drain", "disable", "enable", "retire"] | None = None
    reason: str | None = None


class ActionOut(Schema):
    """The result of an action. Objects are named by EUID; which fields appear depends on
    the action (claim: lease_euid, execution_record_euid, attempt_number, expires_at ...)."""

    model_config = ConfigDict(extra="allow")

    action_key: str
    action_euid: str | None = None
    replayed: bool = False
    subject_euid: str | None = None
    worker_euid: str | None = None
    lease_euid: str | None = None
    execution_record_euid: str | None = None
    hold_euid: str | None = None
    state: str | None = None
    revision: int | None = None
    attempt_number: int | None = None
    expires_at: str | None = None
    queue_key: str | None = None


class QueueSummaryOut(Schema):
    queue_key: str
    euid: str
    display_name: str
    enabled: bool
    manual_only: bool
    dispatch_priority: int
    queue_depth: int
    oldest_job_age_seconds: float
    newest_job_age_seconds: float
    active_leases: int
    expired_leases_total: int
    retryable_failures_total: int
    terminal_failures_total: int
    throughput_success_per_minute: float
    throughput_failure_per_minute: float
    failure_rate: float
    dead_letter_count: int
    held_count: int
    retry_pending_count: int
    stat_count: int
    urgent_count: int
    worker_online_count: int
    worker_heartbeat_lag_seconds: float | None
    oldest_ready_at: str | None
    newest_ready_at: str | None


class QueueDetailOut(QueueSummaryOut):
    config: dict[str, Any]


class QueueItemOut(Schema):
    position: int
    euid: str
    name: str
    template_code: str
    state: str
    revision: int
    priority: int
    priority_class: str
    due_at: str | None
    ready_at: str | None
    created_dt: str
    attempt_count: int
    next_action_key: str | None
    site: str | None
    platform: str | None
    assay: str | None


class QueueItemsOut(Schema):
    queue_key: str
    total: int
    limit: int
    offset: int
    items: list[QueueItemOut]


class ReasonOut(Schema):
    code: str
    message: str


class SubjectOut(Schema):
    euid: str
    name: str
    template_code: str
    state: str
    revision: int
    execution: dict[str, Any]
    properties: dict[str, Any]
    queue_key: str | None
    visible: bool
    derived_state: str | None
    reasons: list[ReasonOut]
    active_lease: dict[str, Any] | None
    active_holds: list[dict[str, Any]]


class HistoryOut(Schema):
    subject_euid: str
    records: list[dict[str, Any]]
    leases: list[dict[str, Any]]
    holds: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    actions: list[dict[str, Any]]


class WorkerOut(Schema):
    worker_euid: str
    worker_key: str
    display_name: str | None
    worker_type: str | None
    status: str | None = Field(description="Stored status.")
    computed_status: str = Field(description="OFFLINE when the heartbeat is older than its TTL.")
    capabilities: list[str]
    site_scope: list[str]
    platform_scope: list[str]
    assay_scope: list[str]
    max_concurrent_leases: int
    active_leases: int
    heartbeat_at: str | None
    heartbeat_lag_seconds: float | None
    heartbeat_ttl_seconds: int | None
    drain_requested: bool
    properties: dict[str, Any]


class LeaseOut(Schema):
    lease_euid: str
    status: str = Field(description="Effective status: ACTIVE past expiry reads EXPIRED.")
    stored_status: str | None
    subject_euid: str | None
    subject_state: str | None
    subject_revision: int | None
    worker_euid: str | None
    queue_key: str | None
    attempt_number: int | None
    claimed_at: str | None
    expires_at: str | None
    properties: dict[str, Any]


class DeadLetterOut(Schema):
    dead_letter_euid: str
    subject_euid: str | None
    subject_state: str | None
    subject_revision: int | None
    queue_key: str | None
    error_class: str | None
    error_message: str | None
    failure_count: int | None
    resolution_state: str | None
    dead_lettered_at: str | None
    properties: dict[str, Any]
