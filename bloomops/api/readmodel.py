"""How the API words a queue summary, a subject's diagnostics and a lease. The numbers are the
engine's (the recorder's snapshot or ``selectors.overview`` live, as the dashboard and
/metrics read them, RULES.md#statistics); this module only names them for JSON."""

from __future__ import annotations

from typing import Any

from bloomops.execution import selectors
from bloomops.execution.envelope import ts
from bloomops.execution.selectors.subjects import Diagnostics
from bloomops.execution.stats.snapshot import Stats


def summary_dict(s: selectors.QueueSummary, lag: float | None, stats: Stats) -> dict[str, Any]:
    return {
        "as_of": ts(stats.as_of),
        "source": stats.source,
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
        "straggling": s.is_straggling,
        "worker_online_count": s.worker_online_count,
        "worker_rostered_count": s.worker_rostered_count,
        "worker_free_slots": s.worker_free_slots,
        "worker_heartbeat_lag_seconds": lag,
        "oldest_ready_at": ts(s.oldest_ready_at),
        "newest_ready_at": ts(s.newest_ready_at),
    }


def subject_dict(d: Diagnostics) -> dict[str, Any]:
    """A subject's diagnostics as GET /subjects/{euid} answers them."""
    return {
        "euid": d.euid, "name": d.name, "template_code": d.template_code, "state": d.state,
        "revision": d.revision, "execution": d.execution,
        "properties": {k: v for k, v in d.props.items() if k != "execution"},
        "queue_key": d.queue_key, "visible": d.visible, "derived_state": d.derived_state,
        "reasons": [{"code": r.code, "message": r.message} for r in d.reasons],
        "active_lease": ({"lease_euid": d.active_lease["euid"], **d.active_lease["props"]}
                         if d.active_lease else None),
        "active_holds": [{"hold_euid": h["euid"], **h["props"]} for h in d.active_holds],
    }


def _as(kind: type, value: Any) -> Any:
    """``value`` where it is of the type the answer documents, else None: a lease another
    writer stored with a number for a timestamp is listed, not a failed list."""
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


def lease_dict(r: dict[str, Any]) -> dict[str, Any]:
    """A lease as GET /leases lists it (``selectors.leases`` row)."""
    props = r["props"] if isinstance(r["props"], dict) else {}
    return {
        "lease_euid": r["euid"], "status": r["effective_status"],
        "stored_status": _as(str, props.get("status")), "subject_euid": r["subject_euid"],
        "subject_state": r["subject_state"], "subject_revision": r["subject_revision"],
        "worker_euid": r["worker_euid"], "queue_key": _as(str, props.get("queue_lookup_key")),
        "attempt_number": _as(int, props.get("attempt_number")),
        "claimed_at": _as(str, props.get("claimed_at")),
        "expires_at": _as(str, props.get("expires_at")), "properties": props,
    }


def worker_dict(w: selectors.WorkerRow) -> dict[str, Any]:
    p = w.props
    return {
        "worker_euid": w.euid, "worker_key": w.worker_key,
        "display_name": p.get("display_name"), "worker_type": p.get("worker_type"),
        "status": p.get("status"), "computed_status": w.computed_status,
        "capabilities": p.get("capabilities") or [], "site_scope": p.get("site_scope") or [],
        "platform_scope": p.get("platform_scope") or [],
        "assay_scope": p.get("assay_scope") or [],
        "max_concurrent_leases": w.max_concurrent_leases, "active_leases": w.active_leases,
        "heartbeat_at": p.get("heartbeat_at"), "heartbeat_lag_seconds": w.heartbeat_lag_seconds,
        "heartbeat_ttl_seconds": p.get("heartbeat_ttl_seconds"),
        "drain_requested": bool(p.get("drain_requested")), "properties": p,
    }
