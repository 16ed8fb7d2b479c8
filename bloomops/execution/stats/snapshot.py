"""What the dashboard, /metrics and the API read for queue statistics (RULES.md#statistics):
the recorder's snapshot while it is fresh (one small row, whatever the lab's size), else the
same figures computed live, so no answer depends on the recorder running."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from bloomops.execution import clock
from bloomops.execution.models import QueueSnapshot
from bloomops.execution.selectors.overview import Overview, overview
from bloomops.execution.selectors.queues import throughput_trend
from bloomops.execution.stats.codec import decode_overview
from bloomops.execution.stats.counting import tenant_key
from bloomops.tapdb.db import fetch_value

SNAPSHOT = "snapshot"
LIVE = "live"


def interval_seconds() -> int:
    return int(settings.BLOOMOPS_RECORDER_INTERVAL)


def is_fresh(taken_at: datetime, now: datetime, interval: float | None = None) -> bool:
    """Fresh: taken at most twice the recorder's interval (its own, as it stored it) ago. A
    snapshot from the future (a clock set back) is not trusted either."""
    interval = interval or interval_seconds()
    age = (now - taken_at).total_seconds()
    return -interval <= age <= 2 * interval


@dataclass
class Stats:
    overview: Overview
    # queue_key -> completions per hour over the last 12 hours (the dashboard's trend)
    trend: dict[str, list[int]]
    as_of: datetime
    source: str
    now: datetime
    # when the recorder last stored a snapshot (fresh or not); None: never; and the interval
    # it stored with it (its own, which may differ from this process's setting)
    recorded_at: datetime | None = None
    recorded_interval: float | None = None

    @property
    def snapshot_age_seconds(self) -> float | None:
        if self.recorded_at is None:
            return None
        return max(0.0, (self.now - self.recorded_at).total_seconds())

    @property
    def recorder_silent(self) -> bool:
        """No snapshot stored within twice the recorder's interval, or never: the recorder is
        not running, so the history has no samples for that time and expired leases wait
        for a sweep (its other duty)."""
        return self.recorded_at is None or not is_fresh(self.recorded_at, self.now,
                                                        self.recorded_interval)


def current(*, now: datetime | None = None, tenant: str | None = None,
            with_trend: bool = True) -> Stats:
    """The snapshot when fresh (one query), else live (``live``). Not fresh: missing, older
    than twice the interval, or stale (a queue made, changed or retired since it was
    taken)."""
    moment = now or clock.now()
    row = (QueueSnapshot.objects.filter(tenant=tenant_key(tenant))
           .values("taken_at", "interval_seconds", "data", "stale").first())
    if (row is not None and not row["stale"]
            and is_fresh(row["taken_at"], moment, row["interval_seconds"])):
        ov, trend = decode_overview(row["data"])
        return Stats(ov, trend, as_of=row["taken_at"], source=SNAPSHOT, now=moment,
                     recorded_at=row["taken_at"], recorded_interval=row["interval_seconds"])
    stats = _live_one_at_a_time(moment, tenant, with_trend)
    if row is not None:
        stats.recorded_at, stats.recorded_interval = row["taken_at"], row["interval_seconds"]
    return stats


# How long a reader waits for another's live computation before computing its own anyway.
LIVE_TURN_WAIT_SECONDS = 5.0


def _live_one_at_a_time(moment: datetime, tenant: str | None, with_trend: bool) -> Stats:
    """live(), one computation per tenant at a time across every process: with the recorder
    behind, each scrape and dashboard computed its own at once (four anonymous /metrics and
    two /queues took 18-38 s each on two cores); they now wait their turn and leave the
    other cores to the claims. A turn is waited for LIVE_TURN_WAIT_SECONDS at most: the
    figures are always answered, and no queue of readers holds the server's threads."""
    name = f"bloomops-live-stats|{tenant_key(tenant)}"
    deadline = time.monotonic() + LIVE_TURN_WAIT_SECONDS
    held = bool(fetch_value("SELECT pg_try_advisory_lock(hashtext(%s))", [name]))
    while not held and time.monotonic() < deadline:
        time.sleep(0.05)
        held = bool(fetch_value("SELECT pg_try_advisory_lock(hashtext(%s))", [name]))
    try:
        return live(now=moment, tenant=tenant, with_trend=with_trend)
    finally:
        if held:
            fetch_value("SELECT pg_advisory_unlock(hashtext(%s))", [name])


def live(*, now: datetime | None = None, tenant: str | None = None,
         with_trend: bool = True) -> Stats:
    """The overview computed now. Its counters are the recorder's as it last stored them plus
    what finished since (``counting.TOTALS_PARTS``), so they equal the next snapshot's."""
    moment = now or clock.now()
    ov = overview(now=moment, tenant=tenant)
    trend = throughput_trend(now=moment, tenant=tenant) if with_trend else {}
    return Stats(ov, trend, as_of=moment, source=LIVE, now=moment)
