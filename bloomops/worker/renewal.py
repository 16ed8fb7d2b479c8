"""Keeping a job's lease alive while its handler works (RULES.md#leases): the runtime's
renewal thread."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from bloomops.execution.errors import CLAIM_GONE_CODES, ActionError
from bloomops.worker import faults
from bloomops.worker.handling import Job

if TYPE_CHECKING:
    from bloomops.worker.runtime import WorkerRuntime

log = logging.getLogger("bloomops.worker")
# Refusals of a renewal or an attempt's end meaning the lease is no longer this worker's.
LEASE_GONE = CLAIM_GONE_CODES


def keep_alive(runtime: WorkerRuntime, job: Job, ttl: float, done: threading.Event) -> None:
    """Renew ``job``'s lease every third of its TTL (and heartbeat the worker) until
    ``done``. A renewal refused for a conflict is tried again; one refused because the
    lease is gone or the worker disabled marks the job lost and stops its work."""
    transport = runtime.transport_factory() if runtime.transport_factory else runtime.transport
    interval = max(0.05, min(ttl / 3, runtime.heartbeat_interval))
    try:
        while not done.wait(interval):
            try:
                transport.act("renew_queue_lease", worker_euid=job.worker_euid,
                              lease_euid=job.lease_euid, idempotency_key=runtime.key("renew"))
            except ActionError as exc:
                if exc.code == "CONCURRENT_UPDATE":  # nothing written: next interval
                    continue
                log.warning("worker %s: renew refused: %s", runtime.worker_key, exc)
                if exc.code in LEASE_GONE | {"WORKER_UNAVAILABLE"}:
                    job.lost.set()
                    job.stop.set()
                return
            except Exception as exc:
                # Try again next interval; the lease outlives a short outage.
                faults.drop_broken_connection(exc)
                runtime.stats.faults += 1
                log.warning("worker %s: renew failed (%s)", runtime.worker_key,
                            faults.describe(exc))
                continue
            try:  # the worker's own liveness: a refusal here does not end the lease
                runtime.heartbeat(transport)
            except Exception as exc:  # noqa: BLE001 - the next turn tries again
                log.warning("worker %s: heartbeat not sent (%s)", runtime.worker_key,
                            faults.describe(exc))
    finally:
        # This thread's own database connection (DirectTransport) must not leak.
        from django.db import connection

        connection.close()
