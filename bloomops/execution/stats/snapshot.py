"""What the dashboard, /metrics and the API read for queue statistics (RULES.md#statistics):
the recorder's snapshot while it is fresh (one small row, whatever the lab's size), else the
same figures computed live, so no answer depends on the recorder running."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from bloomops.execution import clock
from bloomops.execution.models import QueueCounter, QueueSnapshot
from bloomops.execution.selectors.overview import Overview, overview
from bloomops.execution.selectors.queues import QueueSummary, throughput_trend
from bloomops.execution.stats.codec import decode_overview
from bloomops.execution.stats.counting import (
    COUNTERS,
    counted_until,
    counter_values,
    finished_between,
)
from bloomops.tapdb.tenancy import tenant_of

SNAPSHOT = "snapshot"
LIVE = "live"


def tenant_key(tenant: str | None = None) -> str:
    """The statistics tables' name of a tenant ("" for rows with tenant_id NULL)."""
    return tenant_of(tenant) or ""


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
    # when the recorder last stored a snapshot (fresh or not); None: never
    recorded_at: datetime | None = None

    @property
    def snapshot_age_seconds(self) -> float | None:
        if self.recorded_at is None:
            return None
        return max(0.0, (self.now - self.recorded_at).total_seconds())


def current(*, now: datetime | None = None, tenant: str | None = None,
            with_trend: bool = True, force_live: bool = False) -> Stats:
    """The snapshot when fresh (one query), else live (``live``); ``force_live``: live even
    when fresh (a queue made since the snapshot was taken, say)."""
    moment = now or clock.now()
    row = (QueueSnapshot.objects.filter(tenant=tenant_key(tenant))
           .values("taken_at", "interval_seconds", "data", "counted_to").first())
    if (row is not None and not force_live
            and is_fresh(row["taken_at"], moment, row["interval_seconds"])):
        ov, trend = decode_overview(row["data"])
        return Stats(ov, trend, as_of=row["taken_at"], source=SNAPSHOT, now=moment,
                     recorded_at=row["taken_at"])
    stats = live(now=moment, tenant=tenant, with_trend=with_trend,
                 counted_to=row["counted_to"] if row else None)
    stats.recorded_at = row["taken_at"] if row else None
    return stats


def live(*, now: datetime | None = None, tenant: str | None = None, with_trend: bool = True,
         counted_to: datetime | None = None) -> Stats:
    """The overview computed now. The counters are the recorder's as it last stored them
    plus what finished since, up to the instant a pass now would count to (``counted_until``),
    so they equal the snapshot's; a tenant the recorder never counted keeps the summaries' own
    figures."""
    moment = now or clock.now()
    ov = overview(now=moment, tenant=tenant)
    trend = throughput_trend(now=moment, tenant=tenant) if with_trend else {}
    if counted_to is not None:
        add_live_counters(ov.summaries, counted_to, moment, tenant=tenant)
    return Stats(ov, trend, as_of=moment, source=LIVE, now=moment)


def add_live_counters(summaries: list[QueueSummary], counted_to: datetime, now: datetime,
                      *, tenant: str | None = None) -> None:
    stored = {(c.queue_key, c.name): c.value
              for c in QueueCounter.objects.filter(tenant=tenant_key(tenant))}
    keys = [s.queue_key for s in summaries]
    until = counted_until(now)
    since = finished_between(keys, counted_to, until, tenant=tenant) if until > counted_to else {}
    for s in summaries:
        delta = counter_values(since.get(s.queue_key, {}))
        for name in COUNTERS:
            setattr(s, name, stored.get((s.queue_key, name), 0) + delta[name])
