"""Vocabulary of the execution engine: states, statuses, retry and priority classes
(docs/RULES.md)."""

from __future__ import annotations

import re
from enum import StrEnum


class State(StrEnum):
    PENDING = "PENDING"
    READY = "READY"
    RUNNING = "RUNNING"
    WAITING_EXTERNAL = "WAITING_EXTERNAL"
    FAILED_RETRYABLE = "FAILED_RETRYABLE"
    FAILED_TERMINAL = "FAILED_TERMINAL"
    HELD = "HELD"
    CANCELED = "CANCELED"
    COMPLETED = "COMPLETED"


ALL_STATES = tuple(s.value for s in State)
# What a queue or worker that does not say (another writer's row, an older config) has.
DEFAULT_LEASE_TTL_SECONDS = 900
DEFAULT_MAX_LEASES = 1
DEFAULT_HEARTBEAT_TTL_SECONDS = 60
# The states a queue may offer items in (its eligible_states): waiting for work. PENDING is
# in no queue, RUNNING and WAITING_EXTERNAL are being worked on (a claim of one would run
# its step twice), HELD and the terminal states are out of every queue.
ELIGIBLE_STATES = (State.READY.value, State.FAILED_RETRYABLE.value)
TERMINAL_STATES = frozenset({State.FAILED_TERMINAL, State.CANCELED, State.COMPLETED})
# Work under way outside bloomops whose outcome it does not know: an operator reconciles it
# (RULES.md#reconciliation) and the workbench lists it.
OUTSIDE_STATES = (State.WAITING_EXTERNAL.value, State.RUNNING.value)


class DeadLetterResolution(StrEnum):
    OPEN = "OPEN"
    REQUEUED = "REQUEUED"
    CANCELED = "CANCELED"
    IGNORED = "IGNORED"


class LeaseStatus(StrEnum):
    ACTIVE = "ACTIVE"
    RELEASED = "RELEASED"
    COMPLETED = "COMPLETED"
    EXPIRED = "EXPIRED"
    ABANDONED = "ABANDONED"
    CANCELED = "CANCELED"


class WorkerStatus(StrEnum):
    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    DRAINING = "DRAINING"
    DISABLED = "DISABLED"
    RETIRED = "RETIRED"


# An admin stopped the worker: it takes, renews and completes nothing (a draining one
# finishes what it has), and its own heartbeat does not change that.
STOPPED_WORKER_STATUSES = frozenset({WorkerStatus.DISABLED, WorkerStatus.RETIRED})


class WorkerType(StrEnum):
    SERVICE = "SERVICE"
    HUMAN_SESSION = "HUMAN_SESSION"
    INSTRUMENT_ADAPTER = "INSTRUMENT_ADAPTER"


# A worker's type as people say it.
WORKER_TYPE_WORDS: dict[str, str] = {
    WorkerType.SERVICE: "service", WorkerType.HUMAN_SESSION: "person",
    WorkerType.INSTRUMENT_ADAPTER: "instrument",
}


class RetryClass(StrEnum):
    """Every failure is classified into exactly one of these (RULES.md#retries)."""

    TRANSIENT_SYSTEM = "TRANSIENT_SYSTEM"
    TRANSIENT_DEPENDENCY = "TRANSIENT_DEPENDENCY"
    TRANSIENT_CAPACITY = "TRANSIENT_CAPACITY"
    PERMANENT_INPUT = "PERMANENT_INPUT"
    PERMANENT_STATE = "PERMANENT_STATE"
    BUSINESS_RULE_HOLD = "BUSINESS_RULE_HOLD"
    OPERATOR_CANCELED = "OPERATOR_CANCELED"


TRANSIENT_CLASSES = frozenset(
    {RetryClass.TRANSIENT_SYSTEM, RetryClass.TRANSIENT_DEPENDENCY, RetryClass.TRANSIENT_CAPACITY}
)

# Each retry class in the words a person reads: as the choice made when failing an item at
# the bench, and as what happened on the failures view (RULES.md#retries).
RETRY_CLASS_WORDS: dict[str, str] = {
    RetryClass.TRANSIENT_SYSTEM: "Try again later: an instrument or computer hiccup",
    RetryClass.TRANSIENT_DEPENDENCY: "Try again later: waiting on something else (reagent,"
                                     " another step, a service)",
    RetryClass.TRANSIENT_CAPACITY: "Try again later: no free instrument or bench right now",
    RetryClass.PERMANENT_INPUT: "Cannot be done: the sample or its data is unusable",
    RetryClass.PERMANENT_STATE: "Cannot be done: the item is not in a state this step can use",
    RetryClass.BUSINESS_RULE_HOLD: "Put on hold for a decision (QA, a supervisor)",
    RetryClass.OPERATOR_CANCELED: "Cancel the item's work (an operator's decision)",
}


# ... and what happened, as the failures and the workbench list it: a dead letter of a
# transient class was told "Try again later", though nothing will try it again.
RETRY_CLASS_SAID: dict[str, str] = {
    **RETRY_CLASS_WORDS,
    RetryClass.TRANSIENT_SYSTEM: "An instrument or computer hiccup (retryable)",
    RetryClass.TRANSIENT_DEPENDENCY: "Waiting on something else: a reagent, another step, a"
                                     " service (retryable)",
    RetryClass.TRANSIENT_CAPACITY: "No free instrument or bench (retryable)",
    RetryClass.BUSINESS_RULE_HOLD: "Held for a decision (QA, a supervisor)",
    RetryClass.OPERATOR_CANCELED: "Cancelled by an operator",
}


# Named priority classes on top of the numeric priority (RULES.md#order). Priority sorts
# descending; the bands are far apart so a class always dominates any in-band adjustment a
# caller makes with a plain number (STAT 300 > any URGENT 200 + n < 300 ...).
PRIORITY_CLASSES: dict[str, int] = {"STAT": 300, "URGENT": 200, "ROUTINE": 0}


def priority_class(priority: int | float | None) -> str:
    value = int(priority or 0)
    if value >= PRIORITY_CLASSES["STAT"]:
        return "STAT"
    if value >= PRIORITY_CLASSES["URGENT"]:
        return "URGENT"
    return "ROUTINE"


# What PostgreSQL's bigint holds.
BIGINT_RANGE = (-(2**63), 2**63 - 1)
# The priorities bloomops writes: a few times the named classes' span, so a slip of the keys
# (99999999 for 300) is refused rather than put ahead of every STAT sample. The reads order
# any number another writer stored (RULES.md#order).
PRIORITY_RANGE = (-999, 999)


_INTEGER = re.compile(r"[+-]?[0-9]+")


def parse_priority(value: object) -> int:
    """Accept STAT/URGENT/ROUTINE (any case) or a plain integer within PRIORITY_RANGE (a
    manifest's text too); refuse anything else."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("priority must be STAT, URGENT, ROUTINE or an integer")
    if isinstance(value, str):
        text = value.strip()
        if text.upper() in PRIORITY_CLASSES:
            return PRIORITY_CLASSES[text.upper()]
        # ASCII digits only: int() would also read "1_0" and other scripts' digits
        if not _INTEGER.fullmatch(text):
            raise ValueError("priority must be STAT, URGENT, ROUTINE or an integer")
        if len(text.lstrip("+-")) > 20:  # an integer, of more digits than any allowed
            value = PRIORITY_RANGE[1] + 1
        else:
            value = int(text)
    if not PRIORITY_RANGE[0] <= value <= PRIORITY_RANGE[1]:
        raise ValueError(f"priority must be within {PRIORITY_RANGE[0]} to {PRIORITY_RANGE[1]}")
    return value


# What a second person's decision leaves an approval's status at (RULES.md#approvals).
DECISIONS = ("APPROVED", "REJECTED")
