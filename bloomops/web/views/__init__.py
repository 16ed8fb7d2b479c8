"""Operator UI views, one module per screen area; the URL map reads them from here.

Every POST goes through ``executor.execute`` (via ``services``). A refusal writes nothing and
comes back in plain words; FORBIDDEN comes back as a 403 page, whatever the page showed.
"""

from __future__ import annotations

from bloomops.web.views.activity import activity, activity_export
from bloomops.web.views.admin import (
    admin_tools,
    expire_lease,
    sweep,
    workbench,
    workbench_bulk,
    worker_dashboard,
    worker_status,
)
from bloomops.web.views.approvals import (
    approvals_inbox,
    approvals_waiting,
    cancel_approval,
    decide_approval,
    request_approval,
)
from bloomops.web.views.bench import (
    complete_lease,
    fail_lease,
    lost_seen,
    my_work,
    release_lease,
    renew_all,
    renew_lease,
    scan,
)
from bloomops.web.views.failures import completions, failures, failures_bulk
from bloomops.web.views.holds import hold_export, hold_search
from bloomops.web.views.intake import (
    intake,
    intake_confirm,
    intake_preview,
    intake_results,
    intake_results_csv,
)
from bloomops.web.views.people import people_list, person, person_password
from bloomops.web.views.queues import (
    claim_next,
    dashboard,
    queue_detail,
    queue_export,
)
from bloomops.web.views.results import results, results_export
from bloomops.web.views.settings import (
    new_queue,
    queue_enabled,
    queue_settings,
    queue_settings_index,
    replace_queue,
    save_queue_settings,
)
from bloomops.web.views.subjects import (
    cancel_subject,
    claim_subject,
    hold_subject,
    release_hold,
    requeue_subject,
    subject,
    subject_evidence,
    subject_lookup,
    verify_subject_evidence,
)
from bloomops.web.views.tokens import person_token_new, person_token_revoke

__all__ = [
    "admin_tools", "cancel_subject", "claim_next", "claim_subject", "complete_lease",
    "dashboard", "expire_lease", "fail_lease", "failures", "failures_bulk", "hold_subject",
    "intake", "intake_confirm", "intake_preview", "intake_results",
    "intake_results_csv", "my_work",
    "new_queue", "people_list", "person", "person_password", "queue_detail", "queue_enabled",
    "queue_export", "queue_settings", "queue_settings_index", "release_hold", "release_lease",
    "replace_queue", "lost_seen", "renew_all", "renew_lease",
    "requeue_subject", "save_queue_settings", "scan", "subject", "subject_evidence",
    "subject_lookup", "sweep", "verify_subject_evidence", "workbench", "workbench_bulk",
    "worker_dashboard", "worker_status",
]
__all__ += ["person_token_new", "person_token_revoke"]
__all__ += ["approvals_inbox", "approvals_waiting", "cancel_approval", "decide_approval",
            "request_approval"]
__all__ += ["hold_search", "hold_export", "activity", "activity_export", "completions",
            "results", "results_export"]
