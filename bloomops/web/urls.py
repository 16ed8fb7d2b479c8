from django.urls import path

from bloomops.web import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("queues/<str:queue_key>/", views.queue_detail, name="queue"),
    path("queues/<str:queue_key>/export.csv", views.queue_export, name="queue_export"),
    path("queues/<str:queue_key>/claim-next/", views.claim_next, name="claim_next"),
    path("scan/", views.scan, name="scan"),
    path("my-work/", views.my_work, name="my_work"),
    path("leases/<str:lease_euid>/renew/", views.renew_lease, name="renew_lease"),
    path("leases/<str:lease_euid>/release/", views.release_lease, name="release_lease"),
    path("leases/<str:lease_euid>/complete/", views.complete_lease, name="complete_lease"),
    path("leases/<str:lease_euid>/fail/", views.fail_lease, name="fail_lease"),
    path("leases/<str:lease_euid>/expire/", views.expire_lease, name="expire_lease"),
    path("subjects/", views.subject_lookup, name="subject_lookup"),
    path("subjects/<str:euid>/", views.subject, name="subject"),
    path("subjects/<str:euid>/claim/", views.claim_subject, name="claim_subject"),
    path("subjects/<str:euid>/hold/", views.hold_subject, name="hold_subject"),
    path("subjects/<str:euid>/release-hold/", views.release_hold, name="release_hold"),
    path("subjects/<str:euid>/requeue/", views.requeue_subject, name="requeue_subject"),
    path("subjects/<str:euid>/cancel/", views.cancel_subject, name="cancel_subject"),
    path("subjects/<str:euid>/evidence/", views.subject_evidence, name="subject_evidence"),
    path("workers/", views.worker_dashboard, name="workers"),
    path("workers/<str:worker_euid>/status/", views.worker_status, name="worker_status"),
    path("workbench/", views.workbench, name="workbench"),
    path("workbench/bulk/", views.workbench_bulk, name="workbench_bulk"),
    path("admin/", views.admin_tools, name="admin_tools"),
    path("admin/sweep/", views.sweep, name="sweep"),
]
