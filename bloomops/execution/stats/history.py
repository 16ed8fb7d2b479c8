"""Per-queue history (RULES.md#statistics): one sample per queue and minute, written by the
recorder; after THIN_AFTER_HOURS the minutes of an hour become one hourly sample (gauges: the
hour's highest; completions and failures: summed); after BLOOMOPS_HISTORY_DAYS a sample is
removed. The dashboard's charts read them, bucketed per range, in one statement."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from bloomops.execution.selectors.queues import QueueSummary
from bloomops.execution.stats.counting import completions
from bloomops.tapdb.db import execute, fetch_all

MINUTE, HOUR = 60, 3600
# The lab's own sample (every queue's depths and counts summed, the oldest age the highest),
# written beside the queues' so that a bucket's lab figure is the lab's highest, not the sum
# of each queue's highest at different minutes. No queue key starts with "_"
# (queue_fields.QUEUE_KEY_RE).
LAB = "_lab"
THIN_AFTER_HOURS = 48
# range key -> (span, bucket width), seconds: about a hundred points or fewer per chart
RANGES = {"1h": (3600, 60), "24h": (86400, 900), "7d": (7 * 86400, 3600)}


GAUGES = ("depth", "oldest_age_seconds", "leased", "held", "dead_letters", "retry_pending")
SUMS = ("completions", "failures")
COLUMNS = GAUGES + SUMS

# Every queue's sample of one minute in one statement: a column of values per field. A
# gauge of a minute is the most any of its passes saw (a peak between two samples is not
# lost, and a chart's maximum is never below a number the dashboard showed in that minute),
# as an hour's is the most of its minutes.
_TYPES = {c: "float8" if c == "oldest_age_seconds" else "int" for c in COLUMNS}
# A sample's counted window (QueueSample.counted_from/counted_to) grows with each pass of its
# minute (the passes' windows follow each other), and its hour's when thinned.
_WINDOW = ("counted_from = LEAST(bloomops_queue_sample.counted_from, EXCLUDED.counted_from),"
           " counted_to = GREATEST(bloomops_queue_sample.counted_to, EXCLUDED.counted_to)")
_UPSERT = f"""
    INSERT INTO bloomops_queue_sample (tenant, queue_key, resolution, at, {", ".join(COLUMNS)},
                                       counted_from, counted_to)
    SELECT %(tenant)s, u.queue_key, {MINUTE}, %(at)s, {", ".join(f"u.{c}" for c in COLUMNS)},
           %(counted_from)s, %(counted_to)s
    FROM unnest(%(queue_key)s::text[], {", ".join(f"%({c})s::{_TYPES[c]}[]" for c in COLUMNS)})
        AS u(queue_key, {", ".join(COLUMNS)})
    ON CONFLICT (tenant, resolution, at, queue_key) DO UPDATE SET
    {", ".join(f"{c} = GREATEST(bloomops_queue_sample.{c}, EXCLUDED.{c})" for c in GAUGES)},
    {", ".join(f"{c} = bloomops_queue_sample.{c} + EXCLUDED.{c}" for c in SUMS)}, {_WINDOW}
"""

_THIN = f"""
    WITH old AS (
        DELETE FROM bloomops_queue_sample
        WHERE tenant = %(tenant)s AND resolution = {MINUTE} AND at < %(thin_before)s
        RETURNING *
    )
    INSERT INTO bloomops_queue_sample (tenant, queue_key, resolution, at, {", ".join(COLUMNS)},
                                       counted_from, counted_to)
    SELECT tenant, queue_key, {HOUR}, date_trunc('hour', at),
           {", ".join(f"max({c})" for c in GAUGES)}, {", ".join(f"sum({c})" for c in SUMS)},
           min(counted_from), max(counted_to)
    FROM old GROUP BY tenant, queue_key, date_trunc('hour', at)
    ON CONFLICT (tenant, resolution, at, queue_key) DO UPDATE SET
    {", ".join(f"{c} = GREATEST(bloomops_queue_sample.{c}, EXCLUDED.{c})" for c in GAUGES)},
    {", ".join(f"{c} = bloomops_queue_sample.{c} + EXCLUDED.{c}" for c in SUMS)}, {_WINDOW}
"""

_SERIES = f"""
    SELECT queue_key, floor(extract(epoch FROM at) / %(width)s)::bigint AS bucket,
           min(at) AS first_at, min(counted_from) AS counted_from,
           max(counted_to) AS counted_to,
           {", ".join(f"max({c}) AS {c}" for c in GAUGES)},
           {", ".join(f"sum({c}) AS {c}" for c in SUMS)}
    FROM bloomops_queue_sample
    WHERE tenant = %(tenant)s AND resolution IN ({MINUTE}, {HOUR})
      AND at > %(start)s AND at <= %(now)s
    GROUP BY 1, 2 ORDER BY 1, 2
"""


def bucket_start(at: datetime, width: int) -> datetime:
    """Where the bucket holding ``at`` begins (buckets are whole multiples of ``width``
    seconds since the epoch, as _SERIES groups them)."""
    return datetime.fromtimestamp(int(at.timestamp()) // width * width, tz=at.tzinfo)


def bucket_end(at: datetime, width: int) -> datetime:
    """Where the bucket holding ``at`` ends."""
    return bucket_start(at, width) + timedelta(seconds=width)


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def write_samples(tenant: str, now: datetime, summaries: list[QueueSummary],
                  finished: dict[str, dict[str, int]],
                  counted: Window | None = None) -> None:
    """Each queue's sample of the current minute: the gauges as they are now, plus what
    finished since the recorder's last pass (``finished``: the records finished in
    ``counted``, (from, to]). One statement."""
    if not summaries:
        return
    done_failed = [completions(finished.get(s.queue_key, {})) for s in summaries]
    values = {
        "queue_key": [s.queue_key for s in summaries],
        "depth": [s.depth for s in summaries],
        "oldest_age_seconds": [s.oldest_job_age_seconds for s in summaries],
        "leased": [s.active_leases for s in summaries],
        "held": [s.held_count for s in summaries],
        "dead_letters": [s.dead_letter_count for s in summaries],
        "retry_pending": [s.retry_pending_count for s in summaries],
        "completions": [d for d, _ in done_failed],
        "failures": [f for _, f in done_failed]}
    for column, column_values in values.items():
        column_values.append(LAB if column == "queue_key" else
                             max(column_values) if column == "oldest_age_seconds" else
                             sum(column_values))
    counted_from, counted_to = counted or (None, None)
    execute(_UPSERT, {"tenant": tenant, "at": minute_of(now), "counted_from": counted_from,
                      "counted_to": counted_to, **values})


def prune(tenant: str, now: datetime) -> None:
    """Thin minute samples older than THIN_AFTER_HOURS to hourly ones; remove every sample
    older than the retention."""
    execute(_THIN, {"tenant": tenant, "thin_before": now - timedelta(hours=THIN_AFTER_HOURS)})
    execute("DELETE FROM bloomops_queue_sample WHERE tenant = %(tenant)s"
            " AND resolution IN (60, 3600) AND at < %(before)s",
            {"tenant": tenant,
             "before": now - timedelta(days=int(settings.BLOOMOPS_HISTORY_DAYS))})


Window = tuple[datetime, datetime]


def _window(start: datetime | None, end: datetime | None) -> Window | None:
    return (start, end) if start is not None and end is not None else None


def _union(a: Window | None, b: Window | None) -> Window | None:
    """Two counted windows as one (the passes' windows follow each other)."""
    if a is None or b is None:
        return a or b
    return min(a[0], b[0]), max(a[1], b[1])


@dataclass
class Point:
    at: datetime
    depth: int = 0
    oldest_age_seconds: float = 0.0
    leased: int = 0
    held: int = 0
    dead_letters: int = 0
    retry_pending: int = 0
    completions: int = 0
    failures: int = 0
    # the finished records its completions and failures count, those finished in (from, to]
    # (None: samples written without one, by a seeding pass or before samples kept it)
    counted: Window | None = None


@dataclass
class History:
    range_key: str
    start: datetime
    end: datetime
    width: int
    queues: dict[str, list[Point]]
    lab: list[Point]

    @property
    def empty(self) -> bool:
        return not self.lab


def history(range_key: str, *, tenant: str, now: datetime) -> History:
    """Every queue's samples over the range, bucketed (gauges: the bucket's highest; counts:
    summed), and the lab's from its own samples; where a bucket has none (samples written
    before the lab had its own), the queues' summed, the oldest age the highest. A point is
    at its bucket's start, or at its first sample when the samples begin later (a recorder
    started within the bucket). One statement."""
    span, width = RANGES[range_key]
    start = now - timedelta(seconds=span)
    rows = fetch_all(_SERIES, {"tenant": tenant, "width": width, "start": start, "now": now})
    queues: dict[str, list[Point]] = {}
    own: dict[int, Point] = {}
    summed: dict[int, Point] = {}
    for row in rows:
        bucket = int(row["bucket"])
        at = max(datetime.fromtimestamp(bucket * width, tz=now.tzinfo), row["first_at"])
        point = Point(at=at, counted=_window(row["counted_from"], row["counted_to"]),
                      **{c: row[c] or 0 for c in COLUMNS})
        if row["queue_key"] == LAB:
            own[bucket] = point
            continue
        queues.setdefault(row["queue_key"], []).append(point)
        total = summed.setdefault(bucket, Point(at=at))
        total.at = min(total.at, at)
        for c in ("depth", "leased", "held", "dead_letters", "retry_pending", *SUMS):
            setattr(total, c, getattr(total, c) + getattr(point, c))
        total.oldest_age_seconds = max(total.oldest_age_seconds, point.oldest_age_seconds)
        total.counted = _union(total.counted, point.counted)
    lab = [own.get(b) or summed[b] for b in sorted(own.keys() | summed.keys())]
    return History(range_key=range_key, start=start, end=now, width=width, queues=queues,
                   lab=lab)
