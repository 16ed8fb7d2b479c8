"""Read parameters and response schemas of API v1 (pydantic, through django-ninja). The
actions' request schemas are in ``action_schemas``."""

import re
from typing import Annotated, Any, Literal

from ninja import Path, Schema
from pydantic import BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from bloomops.api.action_schemas import BIGINT_MAX, ID_MAX, NON_BLANK
from bloomops.execution import selectors
from bloomops.execution.states import DeadLetterResolution, LeaseStatus

LeaseStatusName = Literal[tuple(s.value for s in LeaseStatus)]  # type: ignore[valid-type]
DeadLetterResolutionName = Literal[(*(r.value for r in DeadLetterResolution), "ALL")]  # type: ignore[valid-type]


class ErrorBody(Schema):
    code: str = Field(description="Stable error code, e.g. STATE_CONFLICT, NO_WORK.")
    message: str = Field(description="A readable explanation for an operator.")
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorOut(Schema):
    error: ErrorBody


# ------------------------------------------------------------------ read parameters
# Query values arrive as text, so "50" is taken as 50; every number is bounded. Which
# parameters a path takes is checked before this (guard.refuse_unknown_query).

# a path id of spaces alone is refused (400) as the same value in a query or body is, not
# looked up as an id nobody has (404)
PathId = Annotated[str, Path(max_length=ID_MAX, pattern=NON_BLANK)]
_DIGITS = re.compile(r"[0-9]+")
# Far past any bound below, so an over-long number is refused by its range, in its words.
_DIGITS_MAX = 100


def _digits(value: Any) -> Any:
    """A query number written as decimal digits only: pydantic would also read "1.0",
    " 5", "+5" and "1_0" (as 10), none of which a caller who means a count writes."""
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise PydanticCustomError("int_parsing", "Write a whole number in decimal digits"
                                  " alone, no sign, point or space (e.g. 50).")
    if isinstance(value, str) and len(value) > _DIGITS_MAX:
        raise PydanticCustomError("int_parsing", f"At most {_DIGITS_MAX} digits.")
    return value


def query_integer(default: int, minimum: int, maximum: int,
                  description: str | None = None) -> Any:
    return Annotated[int, Field(default, ge=minimum, le=maximum, description=description),
                     BeforeValidator(_digits)]


# How many a list's filters match in all, beyond its page (limit, offset).
TOTAL_HEADER = "X-Total-Count"


# The header in the OpenAPI document of a list that says it (an operation's openapi_extra).
TOTAL_DOCUMENTED = {"responses": {200: {"headers": {TOTAL_HEADER: {
    "description": "How many match the filters in all, beyond this page (absent on a page"
                   " past the end).", "schema": {"type": "integer"}}}}}}


def say_total(response: Any, rows: list[dict[str, Any]], offset: int = 0) -> None:
    """``TOTAL_HEADER`` from a counted read's rows (``selectors.total_of``); a page past the
    end has no row to carry it, and then says none rather than a wrong 0."""
    if rows or not offset:
        response[TOTAL_HEADER] = str(selectors.total_of(rows))


def query_text(max_length: int = ID_MAX, description: str | None = None) -> Any:
    """An optional filter: left out, it filters nothing; given, it is a value, not blank
    (an empty one would be taken as no filter by one path and as a value by another, and
    one of spaces matched nothing while an empty one was refused)."""
    return Field(None, min_length=1, max_length=max_length, pattern=NON_BLANK,
                 description=description)


class ItemFilters(Schema):
    limit: query_integer(50, 1, 500)  # type: ignore[valid-type]
    offset: query_integer(0, 0, BIGINT_MAX)  # type: ignore[valid-type]
    site: str | None = query_text()
    platform: str | None = query_text()
    assay: str | None = query_text()


class SubjectQuery(Schema):
    worker_euid: str | None = query_text(description=(
        "Explain visibility for this worker too (eligibility reasons)."))


class LeaseFilters(Schema):
    status: LeaseStatusName | None = Field(None, description=(
        "Effective status: ACTIVE is active and unexpired, EXPIRED includes ACTIVE leases"
        " past expiry."))
    worker_euid: str | None = query_text()
    limit: query_integer(500, 1, 1000)  # type: ignore[valid-type]


class DeadLetterFilters(Schema):
    resolution: DeadLetterResolutionName = "OPEN"
    queue_key: str | None = query_text()
    limit: query_integer(500, 1, 1000)  # type: ignore[valid-type]
    offset: query_integer(0, 0, BIGINT_MAX)  # type: ignore[valid-type]


class WorkerPage(Schema):
    limit: query_integer(200, 1, 1000)  # type: ignore[valid-type]
    offset: query_integer(0, 0, BIGINT_MAX)  # type: ignore[valid-type]


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
    # a queue's create, update or replace saved a flow that is allowed but most often a
    # mistake (a next queue no one has made), in words
    warnings: list[str] | None = None
    attempt_number: int | None = None
    expires_at: str | None = None
    queue_key: str | None = None


class QueueSummaryOut(Schema):
    # when the figures were computed; snapshot: by the recorder, live: for this request
    as_of: str
    source: Literal["snapshot", "live"]
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
    straggling: bool
    worker_online_count: int
    worker_rostered_count: int
    worker_free_slots: int
    worker_heartbeat_lag_seconds: float | None
    oldest_ready_at: str | None
    newest_ready_at: str | None


class QueueDetailOut(QueueSummaryOut):
    config: dict[str, Any]


class QueueChangeOut(Schema):
    """One configuration action on a queue: who, when, why, and field -> [before, after]."""

    action_euid: str
    action_key: str
    queue_euid: str
    executed_by: str
    executed_at: str
    reason: str | None = None
    changes: dict[str, list[Any]]
    retired_queue_euid: str | None = None


class QueueHistoryOut(Schema):
    queue_key: str
    changes: list[QueueChangeOut]


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


class EvidenceVerdictOut(Schema):
    """verify_evidence's answer (docs/RULES.md#evidence): ok when the file is a recorded
    bundle and nothing it describes was changed or removed since."""

    ok: bool
    subject_euid: str | None
    bundle_sha256: str
    recorded: list[dict[str, Any]]
    problems: list[str]
    later: list[str]
    # what was checked, in words (evidence.CHECKS), and how each check came out, in the
    # same order: "passed", "failed" or "not run"
    checked: list[str]
    outcomes: list[str]


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
