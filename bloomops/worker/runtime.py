"""The service-worker loop.

register -> loop { heartbeat (at most every min(ttl/3, 30 s)); stop if DISABLED/RETIRED; no
claims while DRAINING; claim (no queue_key: the engine picks the first serviceable queue in
dispatch order, RULES.md#order); run the handler while a background thread renews the lease
every ttl/3 (and keeps heartbeating); complete, or fail with its retry class
(RULES.md#retries) }. Idle polls back off from 0.1 s, doubling, to a 5 s cap (with jitter).
request_stop() (SIGTERM) drains: no new claims, the current item finishes (or, if its handler
gives up, its lease is released), and the worker reports OFFLINE before it exits.

Faults (bloomops/worker/faults.py) never end the loop: a lost database or API is waited out
with backoff, each call retried with the idempotency key it was first sent with (so a
request that took effect before its answer was lost is replayed, not repeated); a handler's
unexpected exception fails that item. Each process start registers with a new
process_identity, and the engine then abandons the leases the worker's previous process left
behind (crash recovery).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from bloomops.execution.errors import ActionError
from bloomops.execution.states import (
    DEFAULT_HEARTBEAT_TTL_SECONDS,
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_MAX_LEASES,
    STOPPED_WORKER_STATUSES,
    RetryClass,
)
from bloomops.worker import faults
from bloomops.worker.faults import Backoff, Fault
from bloomops.worker.handling import (
    HandlerError,
    HandlerSet,
    Interrupted,
    Job,
    Outcome,
    Stats,
    unexpected_failure,
)
from bloomops.worker.renewal import LEASE_GONE, keep_alive
from bloomops.worker.transport import Transport

T = TypeVar("T")

log = logging.getLogger("bloomops.worker")

POLL_MIN_SECONDS = 0.1
POLL_MAX_SECONDS = 5.0
HEARTBEAT_CAP_SECONDS = 30.0


def process_identity() -> str:
    """Unique to this start of this process: a restart with the same worker_key differs, so
    the engine can tell the previous process's leases are orphans."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class WorkerRuntime:
    def __init__(self, transport: Transport, handlers: HandlerSet, *, worker_key: str,
                 capabilities: list[str] | None = None, display_name: str | None = None,
                 worker_type: str = "SERVICE", site_scope: list[str] | None = None,
                 platform_scope: list[str] | None = None, assay_scope: list[str] | None = None,
                 heartbeat_ttl_seconds: int = DEFAULT_HEARTBEAT_TTL_SECONDS,
                 build_version: str = "bloomops-worker",
                 max_items: int | None = None, exit_when_idle: bool = False,
                 poll_min: float = POLL_MIN_SECONDS, poll_max: float = POLL_MAX_SECONDS,
                 fault_min: float = faults.FAULT_MIN_SECONDS,
                 fault_max: float = faults.FAULT_MAX_SECONDS,
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
            "assay_scope": assay_scope or [], "max_concurrent_leases": DEFAULT_MAX_LEASES,
            "heartbeat_ttl_seconds": heartbeat_ttl_seconds, "build_version": build_version,
            "host": socket.gethostname(), "process_identity": process_identity(),
        }
        self.heartbeat_interval = min(heartbeat_ttl_seconds / 3, HEARTBEAT_CAP_SECONDS)
        self.max_items = max_items
        self.exit_when_idle = exit_when_idle
        self.poll_min, self.poll_max = poll_min, poll_max
        self.fault_min, self.fault_max = fault_min, fault_max
        self.stop_event = threading.Event()
        self.stats = Stats()
        self.worker_euid: str | None = None
        self.status: str | None = None
        self._last_heartbeat = 0.0
        self._hb_lock = threading.Lock()
        self._job_stop: threading.Event | None = None
        # what stopped it, when it claimed an item whose step it has no handler for
        self.unhandled: str | None = None

    # ---------------------------------------------------------------- plumbing

    def key(self, what: str) -> str:
        return f"{self.worker_key}:{what}:{uuid.uuid4().hex}"

    def request_stop(self, *_: Any) -> None:
        log.info("worker %s: stop requested, draining", self.worker_key)
        self.stop_event.set()
        if self._job_stop is not None:
            self._job_stop.set()

    def call(self, what: str, fn: Callable[[], T], *, persist: bool = True) -> T:
        """fn() with faults retried (faults.retrying); refusals (ActionError) are raised."""
        def counted() -> None:
            self.stats.faults += 1

        return faults.retrying(f"worker {self.worker_key}: {what}", fn, stop=self.stop_event,
                               backoff=Backoff(self.fault_min, self.fault_max),
                               persist=persist, on_fault=counted)

    def heartbeat(self, transport: Transport | None = None, *, status: str | None = None,
                  force: bool = False) -> None:
        with self._hb_lock:
            previous = self._last_heartbeat
            if not force and time.monotonic() - previous < self.heartbeat_interval:
                return
            self._last_heartbeat = time.monotonic()
        try:
            result = (transport or self.transport).act(
                "heartbeat_worker", worker_euid=self.worker_euid,
                idempotency_key=self.key("hb"), payload={"status": status} if status else {})
        except Exception:
            with self._hb_lock:  # not sent: the next turn must try again
                self._last_heartbeat = previous
            raise
        self.status = result.get("status")

    @property
    def stopped_by_admin(self) -> bool:
        """An admin disabled or retired this worker: it must not work until enabled."""
        return self.status in STOPPED_WORKER_STATUSES

    # ---------------------------------------------------------------- the loop

    def run(self) -> Stats:
        if not self._register():
            return self.stats
        if self.stopped_by_admin:
            log.warning("worker %s is %s by an admin: not working", self.worker_key, self.status)
            return self.stats
        idle = Backoff(self.poll_min, self.poll_max)
        faulted = Backoff(self.fault_min, self.fault_max)
        try:
            while not self.stop_event.is_set():
                try:
                    outcome = self._turn()
                except Exception as exc:
                    # Calls back off by themselves; this keeps a refusal that repeats every
                    # turn (a revoked token, a deleted worker) or a bug from spinning, and
                    # nothing ends the loop but a stop.
                    if isinstance(exc, ActionError):
                        log.warning("worker %s: %s", self.worker_key, exc)
                    elif not isinstance(exc, Fault):
                        faults.drop_broken_connection(exc)
                        self.stats.faults += 1
                        log.exception("worker %s: loop turn failed", self.worker_key)
                    self.stop_event.wait(faulted.next())
                    continue
                faulted.reset()
                if outcome == "stop":
                    break
                if outcome == "draining":
                    self.stop_event.wait(idle.next())
                    continue
                if outcome == "idle":
                    self.stats.idle_polls += 1
                    if self.exit_when_idle and not self.handlers.busy():
                        break
                    self.stop_event.wait(idle.next())
                    continue
                idle.reset()
                if self.max_items is not None and self.stats.claimed >= self.max_items:
                    break
        finally:
            self._sign_off()
        return self.stats

    def _register(self) -> bool:
        key = self.key("register")
        try:
            reg = self.call("register", lambda: self.transport.act(
                "register_worker", idempotency_key=key, payload=self.registration))
        except Fault:
            if self.stop_event.is_set():
                return False
            raise
        self.worker_euid, self.status = reg["worker_euid"], reg.get("status")
        recovered = reg.get("abandoned_lease_euids") or []
        self.stats.recovered_leases = len(recovered)
        self._last_heartbeat = time.monotonic()
        log.info("worker %s registered as %s (process %s); recovered %d lease(s) of its"
                 " previous process", self.worker_key, self.worker_euid,
                 self.registration["process_identity"], len(recovered))
        return True

    def _turn(self) -> str:
        """One turn of the loop: "stop", "draining", "idle" (nothing claimed) or "worked"."""
        self.call("heartbeat", self.heartbeat)
        if self.stopped_by_admin:
            return "stop"
        self.call("poll", lambda: self.handlers.poll(self))
        if self.status == "DRAINING":
            return "draining"
        claim = self._claim()
        if claim is None:
            return "idle"
        self._process(claim)
        return "worked"

    def _claim(self) -> dict | None:
        key = self.key("claim")  # one key across retries: a lost answer replays the claim
        try:
            claim = self.call("claim", lambda: self.transport.act(
                "claim_queue_item", worker_euid=self.worker_euid, idempotency_key=key))
        except ActionError as exc:
            if exc.code in ("WORKER_UNAVAILABLE",):
                self.call("heartbeat", lambda: self.heartbeat(force=True))
            elif exc.code not in ("NO_WORK", "CONCURRENT_UPDATE", "MAX_LEASES_REACHED"):
                log.warning("worker %s: claim refused: %s", self.worker_key, exc)
            return None
        self.stats.claimed += 1
        return claim

    def _job(self, claim: dict) -> Job:
        """The claimed item as a handler sees it. Raises if the claim, subject or queue are
        not what a handler can work with (the caller fails the item)."""
        subject = self.call("read subject", lambda: self.transport.subject(
            claim["subject_euid"]))
        queue = self.call("read queue", lambda: self.transport.queue(claim["queue_key"]))
        config = queue["config"]
        execution = subject.get("execution")
        if not isinstance(config, dict) or not isinstance(execution, dict):
            raise TypeError("queue config and subject execution envelope must be objects")
        stop = self._job_stop = threading.Event()
        if self.stop_event.is_set():
            stop.set()
        return Job(subject_euid=claim["subject_euid"], lease_euid=claim["lease_euid"],
                   worker_euid=self.worker_euid or "", queue_key=claim["queue_key"],
                   action_key=claim.get("next_action_key"),
                   attempt_number=int(claim.get("attempt_number") or 1),
                   state=claim["state"], revision=int(claim["revision"]), subject=subject,
                   queue_config=config, stop=stop)

    def _process(self, claim: dict) -> None:
        try:
            common = {"subject_euid": claim["subject_euid"], "worker_euid": self.worker_euid,
                      "lease_euid": claim["lease_euid"]}
        except (KeyError, TypeError):
            self.stats.lost += 1
            log.error("worker %s: claim answer without subject or lease (%r); its lease ends"
                      " by TTL", self.worker_key, claim)
            return
        # Guards only when they are what the engine expects; a malformed one is left out.
        if isinstance(claim.get("state"), str):
            common["expected_state"] = claim["state"]
        if type(claim.get("revision")) is int:
            common["expected_revision"] = claim["revision"]
        outcome: Outcome | None = None
        failure: HandlerError | None = None
        interrupted = False
        try:
            job = self._job(claim)
        except Exception as exc:
            if self.stop_event.is_set():
                interrupted = True
            else:
                log.warning("worker %s: cannot work on %s (%s)", self.worker_key,
                            claim["subject_euid"], faults.describe(exc))
                failure = unexpected_failure(exc.cause if isinstance(exc, Fault) else exc)
        else:
            handler = self.handlers.handler_for(job.action_key)
            if handler is None:
                self._unhandled(job, common)
                return
            outcome, failure, interrupted = self._run_handler(job, handler)
            if job.lost.is_set():
                # someone else may own the item now: its result would only be refused
                self.stats.lost += 1
                log.warning("worker %s: lease %s lost during the work on %s; nothing"
                            " reported", self.worker_key, job.lease_euid, job.subject_euid)
                return
        if interrupted:
            self._report_or_drop("release_queue_lease", common, {"reason": "WORKER_STOPPING"})
            self.stats.released += 1
            return
        if failure is None:
            assert outcome is not None
            try:
                result = self._report("complete_queue_execution", common, outcome.payload())
            except ActionError as exc:
                if exc.code == "WORKER_UNAVAILABLE":  # disabled meanwhile: give it back
                    self._report_or_drop("release_queue_lease", common,
                                         {"reason": "WORKER_UNAVAILABLE"})
                    self.stats.released += 1
                    return
                # The result itself was refused (an output or next queue the engine does
                # not accept): the lease is still ours, so end the attempt as a failure that
                # operators see, instead of holding the lease until its TTL.
                failure = HandlerError(f"Result refused: {exc}"[:4000],
                                       error_class=RetryClass.PERMANENT_INPUT,
                                       error_code="RESULT_REFUSED")
            else:
                if result is not None:
                    self.stats.completed += 1
                    after = getattr(self.handlers, "after_complete", None)
                    if after:
                        after(self, job, outcome, result)
                return
        if self._report_or_drop("fail_queue_execution", common, {
                "error_class": failure.error_class.value, "error_code": failure.error_code,
                "error_message": failure.said()}) is not None:
            self.stats.failed += 1

    def _unhandled(self, job: Job, common: dict) -> None:
        """An item whose step this worker has no handler for (its capabilities take a queue
        its handlers do not): not the item's fault (failing it dead-lettered a lab's every
        item), so its lease is released, no attempt counted, and the worker stops for an
        admin to mend it (run_worker exits 4)."""
        step = f"action {job.action_key!r}" if job.action_key else "items without an action key"
        self.unhandled = f"no handler for {step} of queue {job.queue_key!r}"
        if self._report_or_drop("release_queue_lease", common, {
                "reason": f"NO_HANDLER: worker {self.worker_key} has {self.unhandled}"}):
            self.stats.released += 1
        log.error("worker %s: %s (%s not failed: given back, or left to its claim's end);"
                  " stopping", self.worker_key, self.unhandled, job.subject_euid)
        self.request_stop()

    def _run_handler(self, job: Job, handler: Callable[[Job], Outcome]
                     ) -> tuple[Outcome | None, HandlerError | None, bool]:
        """Runs the handler while the lease is renewed: (outcome, failure, interrupted)."""
        try:
            ttl = float(job.queue_config.get("lease_ttl_seconds") or DEFAULT_LEASE_TTL_SECONDS)
        except (TypeError, ValueError):
            ttl = float(DEFAULT_LEASE_TTL_SECONDS)
        done = threading.Event()
        renewer = threading.Thread(target=keep_alive, args=(self, job, ttl, done),
                                   name=f"renew-{job.lease_euid}", daemon=True)
        renewer.start()
        try:
            outcome = handler(job)
            if not isinstance(outcome, Outcome):
                raise TypeError(f"the handler returned {type(outcome).__name__}, not an Outcome")
            return outcome, None, False
        except Interrupted:
            return None, None, True
        except HandlerError as exc:
            return None, exc, False
        except Exception as exc:  # a bug in a handler fails this item, not the worker
            log.exception("worker %s: handler crashed on %s", self.worker_key, job.subject_euid)
            return None, unexpected_failure(exc), False
        finally:
            done.set()
            renewer.join()

    def _report(self, action_key: str, common: dict, payload: dict) -> dict | None:
        """Deliver an attempt's end with one idempotency key, retrying faults and
        CONCURRENT_UPDATE. None when not delivered: the lease is gone (someone else owns the
        item now) or the worker gave up; the lease then ends by TTL or when this worker
        starts again. Other refusals are raised: the lease is still this worker's."""
        key = self.key(action_key)
        conflicts = Backoff(self.fault_min, self.fault_max)
        while True:
            try:
                return self.call(action_key, lambda: self.transport.act(
                    action_key, idempotency_key=key, payload=payload, **common))
            except ActionError as exc:
                if exc.code == "CONCURRENT_UPDATE" and not self.stop_event.is_set():
                    self.stop_event.wait(conflicts.next())
                    continue
                if exc.code not in LEASE_GONE | {"CONCURRENT_UPDATE"}:
                    raise
                reason: Exception = exc
            except Fault as exc:
                reason = exc
            self.stats.lost += 1
            log.warning("worker %s: %s for %s not delivered: %s", self.worker_key, action_key,
                        common["subject_euid"], reason)
            return None

    def _report_or_drop(self, action_key: str, common: dict, payload: dict) -> dict | None:
        try:
            return self._report(action_key, common, payload)
        except ActionError as exc:
            self.stats.lost += 1
            log.warning("worker %s: %s for %s refused: %s", self.worker_key, action_key,
                        common["subject_euid"], exc)
            return None

    def _sign_off(self) -> None:
        if self.worker_euid is None or self.stopped_by_admin:
            return
        try:  # one try: a worker that is leaving does not wait out an outage
            self.call("sign-off", lambda: self.heartbeat(status="OFFLINE", force=True),
                      persist=False)
            log.info("worker %s: signed off OFFLINE", self.worker_key)
        except (ActionError, Fault) as exc:
            log.warning("worker %s: sign-off not delivered: %s", self.worker_key, exc)
