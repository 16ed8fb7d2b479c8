"""What the API and /metrics read: the engine's selectors, composed. No second definition of
any metric: queue metrics come from ``selectors.queue_summaries`` (what the dashboard shows),
worker coverage from ``selectors.workers`` plus the engine's own eligibility policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bloomops.execution import clock, selectors
from bloomops.execution.envelope import ts
from bloomops.execution.policy import eligibility_problems


@dataclass
class Overview:
    now: datetime
    summaries: list[selectors.QueueSummary]
    workers: list[selectors.WorkerRow]
    # queue_key -> max heartbeat lag of the ONLINE workers that may serve the queue
    lag_by_queue: dict[str, float | None]


def overview(*, now: datetime | None = None, tenant: str | None = None) -> Overview:
    """Queue summaries (4 queries) and workers (1 query); fills worker_online_count."""
    moment = now or clock.now()
    summaries = selectors.queue_summaries(now=moment, tenant=tenant)
    workers = selectors.workers(now=moment, tenant=tenant)
    lag: dict[str, float | None] = {}
    for summary in summaries:
        serving = [w for w in workers if w.computed_status == "ONLINE"
                   and not eligibility_problems(w.props, summary.config)]
        summary.worker_online_count = len(serving)
        lags = [w.heartbeat_lag_seconds for w in serving if w.heartbeat_lag_seconds is not None]
        lag[summary.queue_key] = max(lags) if lags else None
    return Overview(now=moment, summaries=summaries, workers=workers, lag_by_queue=lag)


def summary_dict(s: selectors.QueueSummary, lag: float | None) -> dict[str, Any]:
    return {
        "queue_key": s.queue_key,
        "euid": s.euid,
        "display_name": s.display_name,
        "enabled": s.enabled,
        "manual_only": s.manual_only,
        "dispatch_priority": s.dispatch_priority,
        "queue_depth": s.depth,
        "oldest_job_age_seconds": s.oldest_job_age_seconds,
        "newest_job_age_seconds": s.newest_job_age_seconds,
        "active_leases": s.active_leases,
        "expired_leases_total": s.expired_leases_total,
        "retryable_failures_total": s.retryable_failures_total,
        "terminal_failures_total": s.terminal_failures_total,
        "throughput_success_per_minute": s.throughput_success_per_minute,
        "throughput_failure_per_minute": s.throughput_failure_per_minute,
        "failure_rate": s.failure_rate,
        "dead_letter_count": s.dead_letter_count,
        "held_count": s.held_count,
        "retry_pending_count": s.retry_pending_count,
        "stat_count": s.stat_count,
        "urgent_count": s.urgent_count,
        "worker_online_count": s.worker_online_count,
        "worker_heartbeat_lag_seconds": lag,
        "oldest_ready_at": ts(s.oldest_ready_at),
        "newest_ready_at": ts(s.newest_ready_at),
    }
