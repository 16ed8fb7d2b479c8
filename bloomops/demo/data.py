"""Demo data: the wet-lab queues, the compute queues, ~300 READY subjects
and the demo sign-ins. Seeded once; a second run finds everything and creates nothing."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction

from bloomops.execution import clock
from bloomops.execution.envelope import ts
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.execution.objects import QUEUE_CODE, queue_properties
from bloomops.execution.selectors import queues
from bloomops.execution.states import PRIORITY_CLASSES
from bloomops.tapdb.db import fetch_value
from bloomops.tapdb.instances import create_instance
from bloomops.tapdb.tenancy import tenant_of

SPECIMEN = "content/material/specimen/1.0"
EXTRACTED = "content/material/extracted_sample/1.0"
LIBRARY = "content/material/library/1.0"
POOL = "content/material/pool/1.0"
ANALYSIS_REQUEST = "data/analysis/analysis_request/1.0"
ARTIFACT = "data/analysis/artifact/1.0"
SEQUENCING_RUN = "content/material/sequencing_run/1.0"

DEMO_USERS = {
    "scientist": "worker_human",
    "qa": "operator",
    "supervisor": "operator",
    "admin": "admin",
    "svc-extractor": "worker_service",
}


def _retry(initial: int, factor: float, cap: int, jitter: float = 0.0) -> dict:
    return {
        "mode": "EXPONENTIAL_BACKOFF",
        "initial_delay_seconds": initial,
        "backoff_factor": factor,
        "max_delay_seconds": cap,
        "jitter_ratio": jitter,
    }


# queue_key, display, templates, capabilities, platform scope, dispatch priority, ttl, max
# attempts, retry policy, manual_only, next queue (the flow), next action
DEMO_QUEUES: list[dict] = [
    dict(queue_key="extraction_prod", display_name="Extraction / Production",
         subject_template_codes=[SPECIMEN], required_worker_capabilities=["wetlab.extraction"],
         dispatch_priority=100, lease_ttl_seconds=900, max_attempts_default=5,
         retry_policy=_retry(60, 2.0, 3600, 0.1), default_next_queue_key="post_extract_qc",
         default_next_action_key="create_extraction", site_scope=["sfo", "rtp"],
         output_template_codes=[EXTRACTED]),
    dict(queue_key="extraction_rnd", display_name="Extraction / R&D",
         subject_template_codes=[SPECIMEN], required_worker_capabilities=["wetlab.extraction"],
         dispatch_priority=60, lease_ttl_seconds=1800, max_attempts_default=3,
         retry_policy=_retry(120, 2.0, 7200), manual_only=True,
         default_next_queue_key="post_extract_qc", default_next_action_key="create_extraction",
         output_template_codes=[EXTRACTED]),
    dict(queue_key="post_extract_qc", display_name="Post-extraction QC",
         subject_template_codes=[EXTRACTED], required_worker_capabilities=["wetlab.qc"],
         dispatch_priority=90, lease_ttl_seconds=600, max_attempts_default=3,
         retry_policy=_retry(30, 2.0, 900), default_next_queue_key="ilmn_lib_prep",
         default_next_action_key="record_post_extract_qc"),
    dict(queue_key="ilmn_lib_prep", display_name="Illumina library prep",
         subject_template_codes=[EXTRACTED], required_worker_capabilities=["wetlab.libprep"],
         platform_scope=["illumina"], dispatch_priority=80, lease_ttl_seconds=1800,
         max_attempts_default=4, retry_policy=_retry(300, 2.0, 7200),
         default_next_queue_key="ilmn_seq_pool", default_next_action_key="create_library_prep",
         output_template_codes=[LIBRARY]),
    dict(queue_key="ont_lib_prep", display_name="ONT library prep",
         subject_template_codes=[EXTRACTED], required_worker_capabilities=["wetlab.libprep"],
         platform_scope=["ont"], dispatch_priority=80, lease_ttl_seconds=1800,
         max_attempts_default=4, retry_policy=_retry(300, 2.0, 7200),
         default_next_queue_key="ont_seq_pool", default_next_action_key="create_library_prep",
         output_template_codes=[LIBRARY]),
    dict(queue_key="ilmn_seq_pool", display_name="Illumina pooling",
         subject_template_codes=[LIBRARY], required_worker_capabilities=["wetlab.pooling"],
         platform_scope=["illumina"], dispatch_priority=70, lease_ttl_seconds=1200,
         max_attempts_default=3, retry_policy=_retry(120, 2.0, 3600),
         default_next_queue_key="ilmn_start_seq_run", default_next_action_key="create_pool",
         output_template_codes=[POOL]),
    dict(queue_key="ont_seq_pool", display_name="ONT pooling",
         subject_template_codes=[LIBRARY], required_worker_capabilities=["wetlab.pooling"],
         platform_scope=["ont"], dispatch_priority=70, lease_ttl_seconds=1200,
         max_attempts_default=3, retry_policy=_retry(120, 2.0, 3600),
         default_next_queue_key="ont_start_seq_run", default_next_action_key="create_pool",
         output_template_codes=[POOL]),
    dict(queue_key="ilmn_start_seq_run", display_name="Illumina run start",
         subject_template_codes=[POOL], required_worker_capabilities=["wetlab.sequencing"],
         platform_scope=["illumina"], dispatch_priority=50, lease_ttl_seconds=3600,
         max_attempts_default=2, retry_policy=_retry(600, 2.0, 7200),
         default_next_action_key="create_run", output_template_codes=[SEQUENCING_RUN]),
    dict(queue_key="ont_start_seq_run", display_name="ONT run start",
         subject_template_codes=[POOL], required_worker_capabilities=["wetlab.sequencing"],
         platform_scope=["ont"], dispatch_priority=50, lease_ttl_seconds=3600,
         max_attempts_default=2, retry_policy=_retry(600, 2.0, 7200),
         default_next_action_key="create_run", output_template_codes=[SEQUENCING_RUN]),
    dict(queue_key="analysis_dispatch", display_name="Analysis dispatch",
         subject_template_codes=[ANALYSIS_REQUEST],
         required_worker_capabilities=["compute.dispatch"],
         dispatch_priority=40, lease_ttl_seconds=300, max_attempts_default=6,
         retry_policy=_retry(15, 2.0, 1800, 0.2), default_next_queue_key="analysis_qc",
         default_next_action_key="start_analysis_run", output_template_codes=[ARTIFACT]),
    dict(queue_key="analysis_qc", display_name="Analysis QC",
         subject_template_codes=[ANALYSIS_REQUEST], required_worker_capabilities=["compute.qc"],
         dispatch_priority=30, lease_ttl_seconds=900, max_attempts_default=3,
         retry_policy=_retry(60, 2.0, 3600), default_next_action_key="record_analysis_qc",
         output_template_codes=[ARTIFACT]),
]

# Queues whose demo backlog is older than their straggler threshold, so the dashboard has
# something to flag; the others hold a few hours of work.
BACKLOGGED = {"extraction_rnd", "ont_start_seq_run"}
STRAGGLER_SECONDS = 8 * 3600
for _queue in DEMO_QUEUES:
    _queue.setdefault("straggler_threshold_seconds", STRAGGLER_SECONDS)

SITES = ["sfo", "rtp"]
ASSAYS = ["wgs", "rna", "panel"]
# (queue, template, number of subjects, platform)
DEMO_SUBJECTS = [
    ("extraction_prod", SPECIMEN, 70, None),
    ("extraction_rnd", SPECIMEN, 20, None),
    ("post_extract_qc", EXTRACTED, 35, None),
    ("ilmn_lib_prep", EXTRACTED, 30, "illumina"),
    ("ont_lib_prep", EXTRACTED, 20, "ont"),
    ("ilmn_seq_pool", LIBRARY, 25, "illumina"),
    ("ont_seq_pool", LIBRARY, 15, "ont"),
    ("ilmn_start_seq_run", POOL, 10, "illumina"),
    ("ont_start_seq_run", POOL, 8, "ont"),
    ("analysis_dispatch", ANALYSIS_REQUEST, 45, None),
    ("analysis_qc", ANALYSIS_REQUEST, 22, None),
]
NAME_STEM = {
    SPECIMEN: "Specimen",
    EXTRACTED: "Extract",
    LIBRARY: "Library",
    POOL: "Pool",
    ANALYSIS_REQUEST: "Analysis",
}


@dataclass
class DemoReport:
    queues_created: list[str] = field(default_factory=list)
    subjects_created: int = 0
    users_created: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if not (self.queues_created or self.subjects_created or self.users_created):
            return ["Demo data: already seeded; nothing created."]
        return [
            f"Demo data: {len(self.queues_created)} queues, {self.subjects_created} subjects,"
            f" {len(self.users_created)} users created."
        ]


def ensure_demo_users(report: DemoReport) -> None:
    for username, role in DEMO_USERS.items():
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(settings.DEMO_PASSWORD)
            user.is_staff = role == "admin"
            user.save()
            report.users_created.append(username)
        user.groups.add(Group.objects.get(name=role))


def seed_demo(*, rng_seed: int = 4242) -> DemoReport:
    report = DemoReport()
    with transaction.atomic():
        fetch_value("SELECT pg_advisory_xact_lock(hashtext('bloomops-demo-seed'))")
        ensure_demo_users(report)
        existing = {q["queue_key"] for q in queues()}
        for spec in DEMO_QUEUES:
            if spec["queue_key"] in existing:
                continue
            create_instance(QUEUE_CODE, name=spec["display_name"],
                            properties=queue_properties(**spec))
            report.queues_created.append(spec["queue_key"])
        _seed_subjects(report, rng_seed)
    return report


def _seed_subjects(report: DemoReport, rng_seed: int) -> None:
    """The demo's backlog, registered through the intake action as a lab would bring its own
    work in (docs/RULES.md#intake); ready times in the past give the queues their ages."""
    already = fetch_value(
        "SELECT count(*) FROM generic_instance WHERE tenant_id = %(tenant)s AND NOT is_deleted"
        " AND type = 'execution_queue' AND subtype = 'register_subject'"
        " AND json_addl->>'idempotency_key' LIKE 'demo-subject-%%'",
        {"tenant": tenant_of()},
    )
    if already:
        return
    who = Actor.of(User.objects.get(username="admin"))
    rng = random.Random(rng_seed)
    now = clock.now()
    counter = 0
    for queue_key, code, count, platform in DEMO_SUBJECTS:
        for _ in range(count):
            counter += 1
            oldest = 60 * (30 if queue_key in BACKLOGGED else 6)
            created = now - timedelta(minutes=rng.randint(5, oldest))
            ready = min(created + timedelta(minutes=rng.randint(0, 30)), now)
            roll = rng.random()
            prio = (
                PRIORITY_CLASSES["STAT"]
                if roll < 0.06
                else PRIORITY_CLASSES["URGENT"]
                if roll < 0.22
                else rng.choice([0, 0, 0, 10, 20])
            )
            due = created + timedelta(hours=rng.choice([4, 8, 24, 48, 72]))
            properties = {
                "site": rng.choice(SITES),
                "platform": platform or rng.choice(["illumina", "ont"]),
                "assay": rng.choice(ASSAYS),
            }
            payload = {"template_code": code, "name": f"{NAME_STEM[code]} {counter:04d}",
                       "properties": properties, "priority": prio, "ready_at": ts(ready)}
            if rng.random() < 0.8:
                payload["due_at"] = ts(due)
            execute(ActionRequest(action_key="register_subject", actor=who,
                                  idempotency_key=f"demo-subject-{counter}",
                                  queue_key=queue_key, payload=payload))
            report.subjects_created += 1


__all__ = ["seed_demo", "DEMO_QUEUES", "DEMO_USERS", "queue_properties", "ts"]
