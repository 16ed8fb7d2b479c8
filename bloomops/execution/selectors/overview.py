"""The queue overview the dashboard, the API's queue list and /metrics all read: queue
summaries, workers, and which workers can serve each queue (RULES.md#metrics)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bloomops.execution import clock
from bloomops.execution.policy import can_serve
from bloomops.execution.selectors.queues import QueueSummary, queue_summaries
from bloomops.execution.selectors.workers import WorkerRow, workers


@dataclass
class Overview:
    now: datetime
    summaries: list[QueueSummary]
    workers: list[WorkerRow]
    # queue_key -> the workers able to serve it now (coverage)
    serving: dict[str, list[WorkerRow]]

    def lag(self, queue_key: str) -> float | None:
        """The worst heartbeat lag among the workers serving a queue."""
        lags = [w.heartbeat_lag_seconds for w in self.serving.get(queue_key, [])
                if w.heartbeat_lag_seconds is not None]
        return max(lags) if lags else None


def overview(*, now: datetime | None = None, tenant: str | None = None) -> Overview:
    """Queue summaries (4 queries) and workers (1 query); fills worker_online_count."""
    moment = now or clock.now()
    summaries = queue_summaries(now=moment, tenant=tenant)
    rows = workers(now=moment, tenant=tenant)
    serving = {}
    for summary in summaries:
        serving[summary.queue_key] = [w for w in rows if can_serve(w.props, w.computed_status,
                                                                    summary.config)]
        summary.worker_online_count = len(serving[summary.queue_key])
    return Overview(now=moment, summaries=summaries, workers=rows, serving=serving)
