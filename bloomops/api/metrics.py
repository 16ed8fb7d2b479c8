"""/metrics in the Prometheus text format: every queue metric of RULES.md#metrics under its
own name, per queue (labels tenant, queue) and per tenant (queue="__all__").

Queue and worker metrics are the recorder's snapshot while it is fresh, else computed at scrape
time (``execution.stats.snapshot``, as the dashboard and the API read them,
RULES.md#statistics); ``queue_stats_snapshot_age_seconds`` says how old the recorder's latest
snapshot is. The ``*_total`` queue counters are the recorder's monotonic counters.
claim_conflict_total and idempotent_replay_total are the executor's process-local event
counters (bloomops.execution.counters).
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from bloomops.execution.counters import ALL, EVENTS
from bloomops.execution.policy import free_slots
from bloomops.execution.stats import snapshot
from bloomops.tapdb.tenancy import tenant_of

GAUGES = {
    "queue_depth": ("Visible subjects (RULES.md#visibility).", lambda s: s.depth),
    "oldest_job_age_seconds": ("now - min(ready timestamp) of visible subjects.",
                               lambda s: s.oldest_job_age_seconds),
    "newest_job_age_seconds": ("now - max(ready timestamp) of visible subjects.",
                               lambda s: s.newest_job_age_seconds),
    "active_leases": ("ACTIVE unexpired leases.", lambda s: s.active_leases),
    "throughput_success_per_minute": ("SUCCEEDED records per minute over the window.",
                                      lambda s: s.throughput_success_per_minute),
    "throughput_failure_per_minute": ("Failed records per minute over the window.",
                                      lambda s: s.throughput_failure_per_minute),
    "failure_rate": ("failures / (successes + failures) over the window.",
                     lambda s: s.failure_rate),
    "dead_letter_count": ("OPEN dead letters.", lambda s: s.dead_letter_count),
    "held_count": ("Held subjects routed to the queue.", lambda s: s.held_count),
    "retry_pending_count": ("Subjects waiting for their retry window.",
                            lambda s: s.retry_pending_count),
    "stat_count": ("Visible subjects of priority class STAT.", lambda s: s.stat_count),
    "urgent_count": ("Visible subjects of priority class URGENT.", lambda s: s.urgent_count),
    "queue_straggling": ("1 when the queue has visible subjects and the oldest is older than"
                         " its straggler_threshold_seconds (per tenant: how many queues are).",
                         lambda s: float(s.is_straggling)),
    "worker_online_count": ("ONLINE workers able to serve the queue.",
                            lambda s: s.worker_online_count),
    "worker_rostered_count": ("People and workers able to serve the queue, online or not.",
                              lambda s: s.worker_rostered_count),
    "worker_free_slots": ("Leases the ONLINE workers able to serve the queue may still take.",
                          lambda s: s.worker_free_slots),
}
COUNTERS = {
    "expired_leases_total": ("Leases expired (by the sweeper or an admin).",
                             lambda s: s.expired_leases_total),
    "retryable_failures_total": ("Execution records FAILED_RETRYABLE.",
                                 lambda s: s.retryable_failures_total),
    "terminal_failures_total": ("Execution records FAILED_TERMINAL.",
                                lambda s: s.terminal_failures_total),
}


class QueueCollector:
    """The queue metrics (RULES.md#metrics): the recorder's snapshot, or live."""

    def describe(self):
        return []

    def collect(self):
        tenant = tenant_of() or ""
        stats = snapshot.current(with_trend=False)
        ov = stats.overview
        sums = ov.summaries
        labels = ["tenant", "queue"]
        age = GaugeMetricFamily("queue_stats_snapshot_age_seconds", "Seconds since the"
                                " statistics recorder stored its latest snapshot (absent: never;"
                                " older than twice its interval: these figures are computed"
                                " live).", labels=["tenant"])
        if stats.snapshot_age_seconds is not None:
            age.add_metric([tenant], stats.snapshot_age_seconds)
        yield age
        live = GaugeMetricFamily("queue_stats_live", "1 when this scrape computed the queue"
                                 " figures live, 0 when they are the recorder's snapshot.",
                                 labels=["tenant"])
        live.add_metric([tenant], float(stats.source == snapshot.LIVE))
        yield live
        # in no queue's figures (RULES.md#reconciliation): what an alert on lost runs reads
        for name, doc, value in (
                ("outside_waiting_count", "Subjects whose work is under way outside (sent to"
                 " an instrument or pipeline, or RUNNING elsewhere).",
                 ov.outside.total if ov.outside else 0),
                ("outside_overdue_count", "Of those, the ones waiting longer than the queue"
                 " that sent them out expects (its outside_overdue_seconds).",
                 ov.outside.overdue if ov.outside else 0)):
            fam = GaugeMetricFamily(name, doc, labels=["tenant"])
            fam.add_metric([tenant], float(value))
            yield fam
        for name, (doc, get) in GAUGES.items():
            fam = GaugeMetricFamily(name, doc, labels=labels)
            for s in sums:
                fam.add_metric([tenant, s.queue_key], float(get(s)))
            fam.add_metric([tenant, ALL], _tenant_value(name, sums, ov, get))
            yield fam
        for name, (doc, get) in COUNTERS.items():
            fam = CounterMetricFamily(name, doc, labels=labels)
            for s in sums:
                fam.add_metric([tenant, s.queue_key], float(get(s)))
            fam.add_metric([tenant, ALL], float(sum(get(s) for s in sums)))
            yield fam
        lag = GaugeMetricFamily("worker_heartbeat_lag_seconds", "Seconds since the last"
                                " heartbeat: per queue the worst ONLINE worker serving it, per"
                                " tenant the worst ONLINE worker.", labels=labels)
        for s in sums:
            value = ov.lag(s.queue_key)
            if value is not None:
                lag.add_metric([tenant, s.queue_key], float(value))
        online = [w.heartbeat_lag_seconds for w in ov.workers
                  if w.computed_status == "ONLINE" and w.heartbeat_lag_seconds is not None]
        if online:
            lag.add_metric([tenant, ALL], float(max(online)))
        yield lag
        per_worker = GaugeMetricFamily("worker_heartbeat_lag_by_worker_seconds", "Seconds since"
                                       " each worker's last heartbeat.",
                                       labels=["tenant", "worker", "status"])
        for w in ov.workers:
            if w.heartbeat_lag_seconds is not None:
                per_worker.add_metric([tenant, w.worker_key, w.computed_status],
                                      float(w.heartbeat_lag_seconds))
        yield per_worker


def _tenant_value(name: str, sums, ov, get) -> float:
    if not sums:
        return 0.0
    if name == "oldest_job_age_seconds":
        return float(max(s.oldest_job_age_seconds for s in sums))
    if name == "newest_job_age_seconds":
        ages = [s.newest_job_age_seconds for s in sums if s.depth]
        return float(min(ages)) if ages else 0.0
    if name == "failure_rate":
        ok = sum(s.successes_window for s in sums)
        bad = sum(s.failures_window for s in sums)
        return bad / (ok + bad) if ok + bad else 0.0
    if name == "worker_online_count":
        return float(sum(1 for w in ov.workers if w.computed_status == "ONLINE"))
    if name == "worker_rostered_count":
        return float(len(frozenset().union(*(c.rostered_keys for c in ov.coverage.values()))))
    if name == "worker_free_slots":
        serving = {w.worker_key: w for ws in ov.serving.values() for w in ws}
        return float(sum(free_slots(w.max_concurrent_leases, w.active_leases)
                         for w in serving.values()))
    return float(sum(get(s) for s in sums))


def render_metrics() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector())
    return generate_latest(registry) + generate_latest(EVENTS)


@login_not_required
@csrf_exempt  # it writes nothing: another method is its 405, not a CSRF page
@require_safe  # GET, and HEAD (a monitor's probe)
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Open by default (like most exporters); set BLOOMOPS_METRICS_TOKEN to require
    ``Authorization: Bearer <that token>`` or the API token of a person with a role."""
    required = getattr(settings, "BLOOMOPS_METRICS_TOKEN", "")
    if required:
        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        from bloomops.accounts.roles import roles_of
        from bloomops.accounts.tokens import user_for_token

        # compared in constant time: the comparison must not tell how much of a guess is right
        if not hmac.compare_digest(token.encode(), required.encode()) \
                and not roles_of(user_for_token(token)):
            refused = HttpResponse("unauthorized\n", status=401, content_type="text/plain")
            refused["WWW-Authenticate"] = 'Bearer realm="bloomops"'
            return refused
    return HttpResponse(render_metrics(), content_type=CONTENT_TYPE_LATEST)
