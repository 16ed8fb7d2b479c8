"""The statistics recorder (RULES.md#statistics): one process (``manage.py run_recorder``)
that every BLOOMOPS_RECORDER_INTERVAL seconds sweeps expired leases through the executor,
computes the queue overview once, advances the counters, stores the snapshot every viewer
reads and the minute's history sample. A session advisory lock lets exactly one recorder per
tenant write; a second one waits as a standby and takes over when the first goes."""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, connection, transaction

from bloomops.execution import clock
from bloomops.execution.context import ActionRequest, Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import execute
from bloomops.execution.models import QueueSnapshot
from bloomops.execution.selectors.base import read_params
from bloomops.execution.selectors.overview import overview
from bloomops.execution.selectors.queues import throughput_trend
from bloomops.execution.sql import lease_past_expiry
from bloomops.execution.stats import history
from bloomops.execution.stats.codec import encode_overview
from bloomops.execution.stats.counting import (
    COUNTERS,
    counted_until,
    counter_values,
    finished_between,
    tenant_key,
)
from bloomops.execution.stats.snapshot import interval_seconds
from bloomops.tapdb.db import fetch_all, fetch_value

log = logging.getLogger("bloomops.recorder")

# The sweeper acts as this admin identity; its actions are recorded under this name.
RECORDER = Actor(username="bloomops-recorder", roles=frozenset({"admin"}))
BACKOFF_MAX_SECONDS = 30.0

ANY_PAST_EXPIRY = f"""
    SELECT EXISTS (SELECT 1 FROM generic_instance x
                   WHERE x.tenant_id = %(tenant)s AND NOT x.is_deleted AND x.type = 'execution'
                     AND x.subtype = 'queue_lease' AND {lease_past_expiry()})"""
_ADVANCE = """
    INSERT INTO bloomops_queue_counter (tenant, queue_key, name, value)
    SELECT %(tenant)s, k, n, v
    FROM unnest(%(keys)s::text[], %(names)s::text[], %(values)s::bigint[]) AS u(k, n, v)
    ON CONFLICT (tenant, queue_key, name) DO UPDATE SET value = {new_value}
    RETURNING queue_key, name, value
"""


@dataclass
class Pass:
    at: datetime
    expired: int
    queues: int
    seeded: bool


def sweep(*, tenant: str | None, now: datetime) -> int:
    """The lease sweeper (RULES.md#leases), through the executor as an admin would run it,
    when a lease is past its expiry (so a quiet lab logs no action every pass)."""
    if not fetch_value(ANY_PAST_EXPIRY, read_params(now, tenant)):
        return 0
    try:
        result = execute(ActionRequest(action_key="expire_queue_lease", actor=RECORDER,
                                       idempotency_key=f"recorder-sweep:{uuid.uuid4().hex}",
                                       tenant=tenant, now=now))
    except ActionError as exc:  # a sweep racing another: the next pass sweeps again
        log.warning("recorder: sweep refused (%s); next pass", exc.code)
        return 0
    return int(result.get("expired_count") or 0)


def _advance_counters(tenant: str, counts: dict[str, dict[str, int]], queue_keys: list[str],
                      *, seed: bool) -> dict[tuple[str, str], int]:
    """Add each queue's increments to its counters (seed: set them to the all-time counts).
    One statement; returns every counter of these queues."""
    keys, names, values = [], [], []
    for key in queue_keys:
        for name, value in counter_values(counts.get(key, {})).items():
            keys.append(key)
            names.append(name)
            values.append(value)
    if not keys:
        return {}
    new_value = "EXCLUDED.value" if seed else "bloomops_queue_counter.value + EXCLUDED.value"
    rows = fetch_all(_ADVANCE.format(new_value=new_value),
                     {"tenant": tenant, "keys": keys, "names": names, "values": values})
    return {(r["queue_key"], r["name"]): int(r["value"]) for r in rows}


def record(*, now: datetime | None = None, tenant: str | None = None,
           interval: float | None = None) -> Pass:
    """One pass. The caller holds the recorder lock (``Recorder``); tests call it directly.
    ``interval``: the seconds until the next pass, stored with the snapshot (readers judge
    its freshness by it)."""
    moment = now or clock.now()
    expired = sweep(tenant=tenant, now=moment)
    key = tenant_key(tenant)
    with transaction.atomic():
        # The row is locked before the figures are read: a queue change committed before
        # is in them (its stale mark is cleared rightly); one made meanwhile waits for this
        # pass and marks the new snapshot stale after it.
        snap = QueueSnapshot.objects.select_for_update().filter(tenant=key).first()
        ov = overview(now=moment, tenant=tenant)
        trend = throughput_trend(now=moment, tenant=tenant)
        queue_keys = [s.queue_key for s in ov.summaries]
        since = snap.counted_to if snap else None
        until = counted_until(moment)
        if since is not None and until <= since:  # nothing new to count (or the clock went back)
            until, counts = since, {}
        elif snap is not None:
            # The summaries' totals read what finished in (since, until] from this snapshot
            # row, locked above: the same records, not read twice.
            counts = {s.queue_key: s.finished_since for s in ov.summaries if s.finished_since}
        else:
            counts = finished_between(queue_keys, since, until, tenant=tenant)
        counters = _advance_counters(key, counts, queue_keys, seed=since is None)
        for s in ov.summaries:
            for name in COUNTERS:
                setattr(s, name, counters.get((s.queue_key, name), 0))
            s.finished_since = {}  # counted now, up to ``until``
        QueueSnapshot.objects.update_or_create(tenant=key, defaults={
            "taken_at": moment,
            "interval_seconds": max(1, round(interval or interval_seconds())),
            "data": encode_overview(ov, trend), "counted_to": until, "stale": False})
        history.write_samples(key, moment, ov.summaries, counts if since is not None else {},
                              (since, until) if since is not None and until > since else None)
        history.prune(key, moment)
    return Pass(at=moment, expired=expired, queues=len(ov.summaries), seeded=since is None)


class Recorder:
    """The recorder's loop: lock, pass, wait; standby while another recorder holds the lock;
    on a database error (a restart, a lost connection) log, reconnect and go on."""

    def __init__(self, *, tenant: str | None = None, interval: float | None = None) -> None:
        self.tenant = tenant
        self.interval = float(interval or interval_seconds())
        self.lock_name = f"bloomops-recorder|{tenant_key(tenant)}"
        self.holding = False

    def _lock(self) -> bool:
        """Take (or confirm) the session lock. Asked every pass, so a connection that was
        replaced since is noticed; a second grant by the same session is given back so the
        lock is held once."""
        got = bool(fetch_value("SELECT pg_try_advisory_lock(hashtext(%s))", [self.lock_name]))
        if got and self.holding:
            fetch_value("SELECT pg_advisory_unlock(hashtext(%s))", [self.lock_name])
        if got and not self.holding:
            log.info("recorder: writing (lock %s taken)", self.lock_name)
        self.holding = got
        return got

    def tick(self) -> Pass | None:
        """One pass if this recorder holds the lock, else None (standby)."""
        if not self._lock():
            return None
        return record(tenant=self.tenant, interval=self.interval)

    @staticmethod
    def _rollback() -> None:
        """End a transaction a failed pass may have left open (the lock is the session's)."""
        try:
            connection.rollback()
        except DatabaseError:
            _drop_connection()

    def release(self) -> None:
        if self.holding:
            fetch_value("SELECT pg_advisory_unlock(hashtext(%s))", [self.lock_name])
            self.holding = False

    def run(self, stop: threading.Event) -> None:
        backoff = 1.0
        while not stop.is_set():
            try:
                done = self.tick()
                backoff = 1.0
                if done is None:
                    log.debug("recorder: standby (another recorder holds %s)", self.lock_name)
            except DatabaseError as exc:
                log.warning("recorder: database error (%s); reconnecting in %.0f s",
                            str(exc).strip().splitlines()[0] if str(exc).strip() else exc,
                            backoff)
                self.holding = False
                _drop_connection()
                stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
                continue
            except Exception:  # noqa: BLE001 - one bad pass must not end the recorder
                # Readers compute live while the snapshot is stale; the next pass may pass.
                log.exception("recorder: a pass failed; trying again in %.0f s", backoff)
                self._rollback()
                stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
                continue
            stop.wait(self.interval)
        try:
            self.release()
        except DatabaseError:
            pass
        _drop_connection()


def _drop_connection() -> None:
    """Close the (possibly broken) connection; the next statement opens a new one."""
    try:
        connection.close()
    except DatabaseError:
        pass
