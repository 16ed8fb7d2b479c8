"""The contract between the worker runtime and domain handlers: a HandlerSet maps action
keys to methods that take a Job and return an Outcome, or raise one of the errors below
(each names its retry class, RULES.md#retries)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bloomops.execution.actions.fields import ERROR_MESSAGE_MAX
from bloomops.execution.states import RetryClass
from bloomops.text import readable_prose, shows_nothing

if TYPE_CHECKING:
    from bloomops.worker.runtime import WorkerRuntime
    from bloomops.worker.transport import Transport


class HandlerError(Exception):
    error_class = RetryClass.TRANSIENT_SYSTEM

    def __init__(self, message: str, *, error_class: str | None = None,
                 error_code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_class:
            self.error_class = RetryClass(error_class)
        self.error_code = error_code

    def said(self) -> str:
        """The message as the engine takes it: one that shows nothing (a zero-width space)
        counts as none and one too long is refused, and either would leave the claim held
        until it ran out; a failure that ends or holds the item needs one."""
        message = readable_prose(self.message.strip())[:ERROR_MESSAGE_MAX]
        if shows_nothing(message):
            return f"{self.error_class.value}: the handler gave no message"
        return message


class RetryableError(HandlerError):
    """Transient: the subject becomes FAILED_RETRYABLE (or dead-lettered at max attempts)."""

    error_class = RetryClass.TRANSIENT_DEPENDENCY


class TerminalError(HandlerError):
    """Permanent: FAILED_TERMINAL and a dead letter."""

    error_class = RetryClass.PERMANENT_INPUT


class HoldError(HandlerError):
    """A business rule stops the line: the engine places a hold (HELD)."""

    error_class = RetryClass.BUSINESS_RULE_HOLD


class Interrupted(Exception):
    """The handler gave up because the worker is stopping: the lease is released."""


@dataclass
class Outcome:
    """What a handler returns: route (next_queue_key), finish (nothing), or dispatch external
    work (external); outputs are objects produced by the attempt."""

    next_queue_key: str | None = None
    next_action_key: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    result_snapshot: dict[str, Any] = field(default_factory=dict)
    external: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        p: dict[str, Any] = {"result_snapshot": self.result_snapshot, "outputs": self.outputs}
        if self.next_queue_key:
            p["next_queue_key"] = self.next_queue_key
        if self.next_action_key:
            p["next_action_key"] = self.next_action_key
        if self.external is not None:
            p["external"] = self.external
        return p


@dataclass
class Job:
    subject_euid: str
    lease_euid: str
    worker_euid: str
    queue_key: str
    action_key: str | None
    attempt_number: int
    state: str
    revision: int
    subject: dict[str, Any]
    queue_config: dict[str, Any]
    # Set when the worker is stopping or this job's lease is lost: the work is to end now.
    stop: threading.Event
    # Set when the lease is found gone (expired, taken, the worker disabled): the result
    # would be refused, so nothing is reported.
    lost: threading.Event = field(default_factory=threading.Event)

    @property
    def properties(self) -> dict[str, Any]:
        return self.subject.get("properties") or {}

    def sleep(self, seconds: float) -> None:
        """Simulated work that a stop request or a lost lease interrupts."""
        if self.stop.wait(max(0.0, seconds)):
            raise Interrupted()


class HandlerSet:
    """Domain handlers of one kind of worker. Subclasses fill HANDLERS (action key -> method
    name) and CAPABILITIES, and may use poll() for work outside a lease (external callbacks).
    """

    CAPABILITIES: list[str] = []
    HANDLERS: dict[str, str] = {}

    def __init__(self, *, delay: float = 0.0, failure_rate: float = 0.0, seed: int | None = None,
                 **options: Any) -> None:
        self.delay = delay
        self.failure_rate = failure_rate
        self.rng = random.Random(seed)
        self.options = options
        self.transport: Transport | None = None  # set by the runtime

    def handler_for(self, action_key: str | None) -> Callable[[Job], Outcome] | None:
        name = self.HANDLERS.get(action_key or "")
        return getattr(self, name) if name else None

    def maybe_fail(self, job: Job, what: str) -> None:
        job.sleep(self.delay * (0.5 + self.rng.random()))
        if self.failure_rate and self.rng.random() < self.failure_rate:
            raise RetryableError(f"{what}: instrument did not respond (simulated)",
                                 error_code="SIMULATED_TRANSIENT")

    def poll(self, runtime: WorkerRuntime) -> None:
        """Called once per loop turn; default: nothing."""

    def busy(self) -> bool:
        """True while work outside leases is pending (keeps exit_when_idle from exiting)."""
        return False


@dataclass
class Stats:
    """What a worker's run did, counted (run_worker prints it when the worker stops)."""

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    idle_polls: int = 0
    faults: int = 0
    recovered_leases: int = 0


def unexpected_failure(exc: BaseException) -> HandlerError:
    """A handler bug (or an item it could not read) fails the item as TRANSIENT_SYSTEM with
    the exception's class and text, so the retry policy decides and operators see why."""
    return HandlerError(f"{type(exc).__name__}: {exc}"[:4000], error_code="UNHANDLED_EXCEPTION",
                        error_class=RetryClass.TRANSIENT_SYSTEM)
