"""The service-worker loop of spec 5.5.

register -> loop { heartbeat (at most every min(ttl/3, 30 s)); stop if DISABLED/RETIRED; no
claims while DRAINING; claim (no queue_key: the engine picks the first serviceable queue in
5.4 order); run the handler while a background thread renews the lease every ttl/3 (and keeps
heartbeating); complete, or fail with the retry class of 8.4 }. Idle polls back off from
0.1 s, doubling, to a 5 s cap. request_stop() (SIGTERM) drains: no new claims, the current
item finishes (or, if its handler gives up, its lease is released), and the worker reports
OFFLINE before it exits.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bloomops.execution.errors import ActionError
from bloomops.execution.states import RetryClass
from bloomops.worker.transport import Transport

log = logging.getLogger("bloomops.worker")

POLL_MIN_SECONDS = 0.1
POLL_MAX_SECONDS = 5.0
HEARTBEAT_CAP_SECONDS = 30.0


class HandlerError(Exception):
    error_class = RetryClass.TRANSIENT_SYSTEM

    def __init__(self, message: str, *, error_class: str | None = None,
                 error_code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_class:
            self.error_class = RetryClass(error_class)
        self.error_code = error_code


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
    stop: threading.Event

    @property
    def properties(self) -> dict[str, Any]:
        return self.subject.get("properties") or {}

    def sleep(self, seconds: float) -> None:
        """Simulated work that a stop request interrupts (the lease is then released)."""
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
        import random

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
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    idle_polls: int = 0


class WorkerRuntime:
    def __init__(self, transport: Transport, handlers: HandlerSet, *, worker_key: str,
                 capabilities: list[str] | None = None, display_name: str | None = None,
                 worker_type: str = "SERVICE", site_scope: list[str] | None = None,
                 platform_scope: list[str] | None = None, assay_scope: list[str] | None = None,
                 heartbeat_ttl_seconds: int = 60, build_version: str = "bloomops-worker",
                 max_items: int | None = None, exit_when_idle: bool = False,
                 poll_min: float = POLL_MIN_SECONDS, poll_max: float = POLL_MAX_SECONDS,
                 transport_factory: Callable[[], Transport] | None = None) -> None:
        self.transport = transport
        self.transport_factory = transport_factory
        self.handlers = handlers
        handlers.transport = transport
        self.worker_key = worker_key
        self.registration = {
            "worker_key": worker_key, "display_name": display_name or worker_key,
            "worker_type": worker_type,
            "capabilities": capabilities if capabilities is not None
            else list(handlers.CAPABILITIES),
            "site_scope": site_scope or [], "platform_scope": platform_scope or [],
            "assay_scope": assay_scope or [], "max_concurrent_leases": 1,
            "heartbeat_ttl_seconds": heartbeat_ttl_seconds, "build_version": build_version,
            "host": socket.gethostname(), "process_identity": f"pid-{os.getpid()}",
        }
        self.heartbeat_interval = min(heartbeat_ttl_seconds / 3, HEARTBEAT_CAP_SECONDS)
        self.max_items = max_items
        self.exit_when_idle = exit_when_idle
        self.poll_min, self.poll_max = poll_min, poll_max
        self.stop_event = threading.Event()
        self.stats = Stats()
        self.worker_euid: str | None = None
        self.status: str | None = None
        self._last_heartbeat = 0.0
        self._hb_lock = threading.Lock()

    # ---------------------------------------------------------------- plumbing

    def key(self, what: str) -> str:
        return f"{self.worker_key}:{what}:{uuid.uuid4().hex}"

    def request_stop(self, *_: Any) -> None:
        log.info("worker %s: stop requested, draining", self.worker_key)
        self.stop_event.set()

    def heartbeat(self, transport: Transport | None = None, *, status: str | None = None,
                  force: bool = False) -> None:
        with self._hb_lock:
            if not force and time.monotonic() - self._last_heartbeat < self.heartbeat_interval:
                return
            self._last_heartbeat = time.monotonic()
        result = (transport or self.transport).act(
            "heartbeat_worker", worker_euid=self.worker_euid, idempotency_key=self.key("hb"),
            payload={"status": status} if status else {})
        self.status = result.get("status")

    # ---------------------------------------------------------------- the loop

    def run(self) -> Stats:
        reg = self.transport.act("register_worker", idempotency_key=self.key("register"),
                                 payload=self.registration)
        self.worker_euid, self.status = reg["worker_euid"], reg.get("status")
        self._last_heartbeat = time.monotonic()
        log.info("worker %s registered as %s", self.worker_key, self.worker_euid)
        backoff = self.poll_min
        try:
            while not self.stop_event.is_set():
                self.heartbeat()
                if self.status in ("DISABLED", "RETIRED"):
                    break
                self.handlers.poll(self)
                if self.status == "DRAINING":
                    self.stop_event.wait(backoff)
                    backoff = min(backoff * 2, self.poll_max)
                    continue
                claim = self._claim()
                if claim is None:
                    self.stats.idle_polls += 1
                    if self.exit_when_idle and not self.handlers.busy():
                        break
                    self.stop_event.wait(backoff)
                    backoff = min(backoff * 2, self.poll_max)
                    continue
                backoff = self.poll_min
                self._process(claim)
                if self.max_items is not None and self.stats.claimed >= self.max_items:
                    break
        finally:
            self._sign_off()
        return self.stats

    def _claim(self) -> dict | None:
        try:
            claim = self.transport.act("claim_queue_item", worker_euid=self.worker_euid,
                                       idempotency_key=self.key("claim"))
        except ActionError as exc:
            from bloomops.api.metrics import count_claim_conflict

            count_claim_conflict(exc.code, None)
            if exc.code in ("WORKER_UNAVAILABLE",):
                self.heartbeat(force=True)
            elif exc.code not in ("NO_WORK", "CONCURRENT_UPDATE", "MAX_LEASES_REACHED"):
                log.warning("worker %s: claim refused: %s", self.worker_key, exc)
            return None
        self.stats.claimed += 1
        return claim

    def _process(self, claim: dict) -> None:
        subject = self.transport.subject(claim["subject_euid"])
        queue = self.transport.queue(claim["queue_key"])
        job = Job(subject_euid=claim["subject_euid"], lease_euid=claim["lease_euid"],
                  worker_euid=self.worker_euid or "", queue_key=claim["queue_key"],
                  action_key=claim.get("next_action_key"),
                  attempt_number=int(claim.get("attempt_number") or 1),
                  state=claim["state"], revision=int(claim["revision"]), subject=subject,
                  queue_config=queue["config"], stop=self.stop_event)
        ttl = float(queue["config"].get("lease_ttl_seconds") or 900)
        done = threading.Event()
        renewer = threading.Thread(target=self._keep_alive, args=(job, ttl, done),
                                   name=f"renew-{job.lease_euid}", daemon=True)
        renewer.start()
        outcome: Outcome | None = None
        failure: HandlerError | None = None
        interrupted = False
        try:
            handler = self.handlers.handler_for(job.action_key)
            if handler is None:
                failure = TerminalError(f"No handler for action {job.action_key!r}.",
                                        error_class=RetryClass.PERMANENT_STATE)
            else:
                outcome = handler(job)
        except Interrupted:
            interrupted = True
        except HandlerError as exc:
            failure = exc
        except Exception as exc:  # a bug in a handler is a transient system failure
            log.exception("worker %s: handler crashed", self.worker_key)
            failure = RetryableError(f"{type(exc).__name__}: {exc}"[:2000],
                                     error_class=RetryClass.TRANSIENT_SYSTEM)
        finally:
            done.set()
            renewer.join()
        common = dict(subject_euid=job.subject_euid, worker_euid=job.worker_euid,
                      lease_euid=job.lease_euid, expected_state=job.state,
                      expected_revision=job.revision)
        try:
            if interrupted:
                self.transport.act("release_queue_lease", idempotency_key=self.key("release"),
                                   payload={"reason": "WORKER_STOPPING"}, **common)
                self.stats.released += 1
            elif failure is not None:
                self.transport.act("fail_queue_execution", idempotency_key=self.key("fail"),
                                   payload={"error_class": failure.error_class.value,
                                            "error_code": failure.error_code,
                                            "error_message": failure.message}, **common)
                self.stats.failed += 1
            else:
                assert outcome is not None
                result = self.transport.act("complete_queue_execution",
                                            idempotency_key=self.key("complete"),
                                            payload=outcome.payload(), **common)
                self.stats.completed += 1
                after = getattr(self.handlers, "after_complete", None)
                if after:
                    after(self, job, outcome, result)
        except ActionError as exc:
            # LEASE_EXPIRED and friends: someone else owns the item now; drop it.
            self.stats.lost += 1
            log.warning("worker %s: result for %s not accepted: %s", self.worker_key,
                        job.subject_euid, exc)

    def _keep_alive(self, job: Job, ttl: float, done: threading.Event) -> None:
        transport = self.transport_factory() if self.transport_factory else self.transport
        interval = max(0.05, min(ttl / 3, self.heartbeat_interval))
        try:
            while not done.wait(interval):
                try:
                    transport.act("renew_queue_lease", worker_euid=job.worker_euid,
                                  lease_euid=job.lease_euid, idempotency_key=self.key("renew"))
                    self.heartbeat(transport)
                except ActionError as exc:
                    log.warning("worker %s: renew refused: %s", self.worker_key, exc)
                    return
        finally:
            # This thread's own database connection (DirectTransport) must not leak.
            from django.db import connection

            connection.close()

    def _sign_off(self) -> None:
        if self.worker_euid is None or self.status in ("DISABLED", "RETIRED"):
            return
        try:
            self.heartbeat(status="OFFLINE", force=True)
            log.info("worker %s: signed off OFFLINE", self.worker_key)
        except ActionError as exc:
            log.warning("worker %s: sign-off refused: %s", self.worker_key, exc)
