"""Reads of the execution engine (selectors), one module per read area; this package is
their one import point: ``from bloomops.execution import selectors``. Each public function
issues one SQL query (or a constant number, stated in its docstring), never a query per row
and never a Python loop over subjects. "now" is always a parameter, defaulting to the engine
clock."""

from __future__ import annotations

from bloomops.execution.selectors.activity import activity
from bloomops.execution.selectors.approvals import (
    ApprovalRow,
    Waiting,
    approvals,
    approvals_waiting,
)
from bloomops.execution.selectors.audit import audit_trail
from bloomops.execution.selectors.base import (
    ITEM_COLUMNS,
    THROUGHPUT_WINDOW_MINUTES,
    EnvelopeView,
    read_params,
    total_of,
)
from bloomops.execution.selectors.failures import (
    FailureGroup,
    failure_counts,
    failures,
    finished_attempts,
    group_failures,
)
from bloomops.execution.selectors.items import (
    HIDDEN_REASONS,
    HiddenItem,
    QueueItem,
    filters_sql,
    is_visible,
    item_from_row,
    queue_filter_values,
    queue_head,
    queue_hidden_items,
    queue_items,
    routed_count,
    scope_texts,
)
from bloomops.execution.selectors.lookup import engine_object, subjects_like
from bloomops.execution.selectors.overview import (
    Coverage,
    Overview,
    overview,
    queue_coverage,
    served_by_nobody,
)
from bloomops.execution.selectors.queue_config import QueueChange, queue_history
from bloomops.execution.selectors.queues import (
    QueueSummary,
    display_name,
    minus_minutes,
    queue_called,
    queue_config,
    queue_depths,
    queue_ever_named,
    queue_succeeding,
    queue_summaries,
    queues,
    throughput_trend,
)
from bloomops.execution.selectors.results import results_recorded, results_tally
from bloomops.execution.selectors.subjects import (
    REASON_TEXT,
    Diagnostics,
    Reason,
    action_history,
    last_action,
    lineage_of,
    open_one,
    subject_diagnostics,
    subject_history,
    subject_name,
    subject_names,
    subjects_labelled,
    subjects_named,
    template_code,
)
from bloomops.execution.selectors.workbench import (
    active_holds,
    dead_letters,
    holds,
    outside_work,
)
from bloomops.execution.selectors.workers import (
    WorkerRow,
    leases,
    workers,
)

__all__ = [
    "total_of",
    "Coverage", "Overview", "overview", "queue_coverage", "served_by_nobody",
    "Diagnostics", "EnvelopeView", "HIDDEN_REASONS", "HiddenItem", "ITEM_COLUMNS", "QueueItem",
    "QueueSummary", "REASON_TEXT", "Reason", "THROUGHPUT_WINDOW_MINUTES", "WorkerRow",
    "action_history", "activity", "last_action", "active_holds", "holds", "audit_trail",
    "dead_letters", "outside_work",
    "display_name", "queue_called", "filters_sql",
    "is_visible", "item_from_row", "leases", "lineage_of", "minus_minutes", "queue_config",
    "queue_succeeding",
    "queue_depths", "queue_ever_named", "queue_filter_values", "queue_head",
    "queue_hidden_items", "queue_items",
    "routed_count", "scope_texts",
    "queue_summaries", "queues", "read_params", "subject_diagnostics", "subject_history",
    "open_one", "subject_name", "subject_names", "subjects_labelled", "subjects_named",
    "template_code",
    "throughput_trend", "workers",
    "QueueChange", "queue_history",
    "FailureGroup", "finished_attempts", "failure_counts", "failures", "group_failures",
    "ApprovalRow", "Waiting", "approvals", "approvals_waiting",
    "engine_object", "subjects_like", "results_recorded", "results_tally",
]
