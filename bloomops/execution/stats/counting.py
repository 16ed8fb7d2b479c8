"""The recorder's counters (RULES.md#statistics): execution records that finished between two
instants, per queue and status, read over the index of finished records one queue at a time
(`bloomops_record_queue_finished`), so a pass reads what finished since the last one and never
the lab's whole history. Only seeding a tenant's counters the first time reads all of it."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from bloomops.execution.envelope import ts
from bloomops.execution.params import read_params
from bloomops.execution.sql import utc_text
from bloomops.tapdb.db import fetch_all
from bloomops.tapdb.tenancy import tenant_of

# counter name -> the record status it counts (an expired lease closes its record EXPIRED)
COUNTED_STATUSES = {
    "expired_leases_total": "EXPIRED",
    "retryable_failures_total": "FAILED_RETRYABLE",
    "terminal_failures_total": "FAILED_TERMINAL",
}
COUNTERS = tuple(COUNTED_STATUSES)
FAILED = ("FAILED_RETRYABLE", "FAILED_TERMINAL")
# A record's finished_at is its action's start, committed a moment later (at most the lock
# timeout): counters count up to this long before now, so a record committing late is counted
# on the next pass instead of being missed.
SETTLE_SECONDS = 10


def tenant_key(tenant: str | None = None) -> str:
    """The statistics tables' name of a tenant ("" for rows with tenant_id NULL)."""
    return tenant_of(tenant) or ""


def counted_until(now: datetime) -> datetime:
    """The instant the counters count up to at ``now`` (the recorder's and the live readers')."""
    return now - timedelta(seconds=SETTLE_SECONDS)

def finished_sql(since: str, until: str) -> str:
    """Records per queue (of %(queue_keys)s) and status finished in (since, until], as rows
    (queue_key, status, n); ``since`` and ``until``: SQL expressions of our UTC text."""
    return f"""
    SELECT k.queue_key, c.status, c.n
    FROM unnest(%(queue_keys)s::text[]) AS k(queue_key)
    CROSS JOIN LATERAL (
        SELECT r.json_addl->'properties'->>'status' AS status, count(*) AS n
        FROM generic_instance r
        WHERE r.tenant_id = %(tenant)s AND NOT r.is_deleted
          AND r.type = 'execution' AND r.subtype = 'execution_record'
          AND r.json_addl->'properties'->>'queue_lookup_key' = k.queue_key
          AND r.json_addl->'properties'->>'finished_at' > {since}
          AND r.json_addl->'properties'->>'finished_at' <= {until}
        GROUP BY 1
    ) c"""


FINISHED_BETWEEN = finished_sql("%(since)s", "%(until)s")

def finished_between(queue_keys: list[str], since: datetime | None, until: datetime, *,
                     tenant: str | None = None) -> dict[str, dict[str, int]]:
    """queue_key -> status -> records of that queue finished in (since, until]; since None:
    every record finished up to ``until``. One statement."""
    if not queue_keys:
        return {}
    rows = fetch_all(FINISHED_BETWEEN, read_params(
        until, tenant, queue_keys=list(queue_keys), since=ts(since) or "", until=ts(until)))
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        out[row["queue_key"]][row["status"]] = int(row["n"])
    return dict(out)


def counter_values(counts: dict[str, int]) -> dict[str, int]:
    """The counters' increments of one queue's finished-record counts."""
    return {name: counts.get(status, 0) for name, status in COUNTED_STATUSES.items()}


def completions(counts: dict[str, int]) -> tuple[int, int]:
    """(succeeded, failed) of one queue's finished-record counts."""
    return counts.get("SUCCEEDED", 0), sum(counts.get(s, 0) for s in FAILED)


# A read's totals as rows (part, queue_key, key, n), to be UNIONed into the read's own
# statement: the recorder's stored counters (part 'stored', key a counter) and the records
# finished since it counted, up to %(until)s (part 'since', key a status); for a tenant it
# never counted, every record finished up to %(now)s. Parameters: key (``tenant_key``),
# tenant, queue_keys, until (``counted_until(now)``), now.
TOTALS_PARTS = f"""
    SELECT 'stored' AS part, c.queue_key, c.name AS key, c.value AS n
    FROM bloomops_queue_counter c
    WHERE c.tenant = %(key)s
      AND EXISTS (SELECT 1 FROM bloomops_queue_snapshot s WHERE s.tenant = %(key)s)
    UNION ALL
    SELECT 'since', f.queue_key, f.status, f.n FROM ({finished_sql(
        f"coalesce((SELECT {utc_text('s.counted_to')} FROM bloomops_queue_snapshot s"
        " WHERE s.tenant = %(key)s), '')",
        "CASE WHEN EXISTS (SELECT 1 FROM bloomops_queue_snapshot s WHERE s.tenant = %(key)s)"
        " THEN %(until)s ELSE %(now)s END")}) f"""


def totals_params(now: datetime, tenant: str | None = None) -> dict[str, str]:
    return {"key": tenant_key(tenant), "until": ts(counted_until(now))}


def totals_from(rows: list[dict], queue_keys: list[str]
                ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """From the TOTALS_PARTS rows of a read (other rows are ignored): queue_key -> counter ->
    value (stored counters plus the increments of what finished since), and queue_key ->
    status -> records finished since (what the recorder's next counters add)."""
    out: dict[str, dict[str, int]] = {k: dict.fromkeys(COUNTERS, 0) for k in queue_keys}
    since: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        if row["queue_key"] not in out:
            continue
        if row["part"] == "stored" and row["key"] in COUNTERS:
            out[row["queue_key"]][row["key"]] += int(row["n"])
        elif row["part"] == "since":
            since[row["queue_key"]][row["key"]] = int(row["n"])
    for key, counts in since.items():
        for name, n in counter_values(counts).items():
            out[key][name] += n
    return out, dict(since)
