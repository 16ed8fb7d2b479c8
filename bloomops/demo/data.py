"""Demo data: the wet-lab queues, the compute queues, ~300 READY subjects, some work for QA
(dead letters, an integrity hold, an operator hold) and the demo sign-ins. Seeded once; a
second run finds everything and creates nothing."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction

from bloomops.accounts.models import SYSTEM_MAKERS, ProfileChange
from bloomops.accounts.profiles import snapshot
from bloomops.execution import clock, selectors
from bloomops.execution.envelope import ts
from bloomops.execution.executor import ActionRequest, Actor, execute
from bloomops.execution.queue_plan import apply, load_queue_file, plan
from bloomops.execution.states import PRIORITY_CLASSES
from bloomops.tapdb.db import fetch_value
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
# Full names, as signatures and histories print them (an auditor reads a person's name).
DEMO_NAMES = {"scientist": ("Sam", "Rivera"), "qa": ("Quinn", "Okafor"),
              "supervisor": ("Sasha", "Lindqvist"), "admin": ("Ada", "Moreau")}


# The demo's queues are configuration code, applied through the queue actions like a lab's.
QUEUE_FILE = Path(__file__).with_name("queues.toml")
DEMO_QUEUES: list[dict] = load_queue_file(QUEUE_FILE)[0]

# Queues whose demo backlog is older than their straggler threshold, so the dashboard has
# something to flag; the others hold a few hours of work.
BACKLOGGED = {"extraction_rnd", "ont_start_seq_run"}

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
    queue_changes: int = 0
    users_created: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if not (self.queue_changes or self.subjects_created or self.users_created):
            return ["Demo data: already seeded; nothing created."]
        return [
            f"Demo data: {len(self.queues_created)} queues, {self.subjects_created} subjects,"
            f" {len(self.users_created)} users created; {self.queue_changes} queue changes"
            " applied."
        ]


def ensure_demo_users(report: DemoReport) -> None:
    """The demo's people, each made once with its role and a change record, as an admin
    would add them (RULES.md#human-workers). One that exists is left as the lab's admins
    keep it: a role taken away is not given back by the next ``make run``."""
    for username, role in DEMO_USERS.items():
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(settings.DEMO_PASSWORD)
            user.is_staff = role == "admin"
            user.first_name, user.last_name = DEMO_NAMES.get(username, ("", ""))
            user.save()
            user.groups.add(Group.objects.get(name=role))
            ProfileChange.objects.create(username=username, changed_by=SYSTEM_MAKERS[0],
                                         reason="Demo data", before={}, after=snapshot(user))
            report.users_created.append(username)


def seed_demo(*, rng_seed: int = 4242) -> DemoReport:
    report = DemoReport()
    with transaction.atomic():
        fetch_value("SELECT pg_advisory_xact_lock(hashtext('bloomops-demo-seed'))")
        ensure_demo_users(report)
        specs, reason = load_queue_file(QUEUE_FILE)
        queue_plan = plan(specs)
        apply(queue_plan, reason=reason)
        report.queues_created = [s.queue_key for s in queue_plan.steps
                                 if s.action_key == "create_queue"]
        report.queue_changes = len(queue_plan.steps)
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
    _seed_qa_work(report)


# QC failures a bench instrument reported for good: the dead letters QA practises on.
DEAD_LETTERS = (
    ("PERMANENT_INPUT", "Concentration 0.4 ng/uL, below the 1 ng/uL the library needs:"
     " re-extract from the specimen"),
    ("PERMANENT_STATE", "Tube barcode unreadable after the plate spin; the sample cannot be"
     " matched to its well"),
)
QA_QUEUE = "post_extract_qc"
# An analysis run the pipeline lost: sent out an hour before the demo starts, never called
# back (the living demo's pipeline answers only the runs it sent itself).
LOST_RUN = {"run_id": "wf-demo-0412", "pipeline": "rnaseq 2.3"}
OUTSIDE_QUEUE = "analysis_dispatch"


def _seed_qa_work(report: DemoReport) -> None:
    """What a QA desk finds on a real morning, made through the engine as it happens: two
    extracts a QC instrument failed for good (OPEN dead letters), one on an integrity hold
    (QC_FAIL: its release needs a second person) and one an operator held while waiting for
    information; and an analysis whose pipeline run never reported back (waiting on outside
    work). The instrument's and the launcher's workers are retired afterwards, as replaced
    adapters are."""
    def act(action_key: str, actor: Actor, n: int, **fields) -> dict:
        return execute(ActionRequest(action_key=action_key, actor=actor,
                                     idempotency_key=f"demo-qa-{n}", **fields)).result

    admin = Actor.of(User.objects.get(username="admin"))
    adapter = Actor.of(User.objects.get(username="svc-extractor"))
    qa = Actor.of(User.objects.get(username="qa"))
    cfg = next(q for q in DEMO_QUEUES if q["queue_key"] == QA_QUEUE)
    worker = act("register_worker", adapter, 1, payload={
        "worker_type": "INSTRUMENT_ADAPTER", "worker_key": "demo://qc-fluorometer",
        "display_name": "QC fluorometer adapter",
        "capabilities": cfg.get("required_worker_capabilities") or []})["worker_euid"]
    n = 1
    for error_class, message in DEAD_LETTERS:
        lease = act("claim_queue_item", adapter, n := n + 1, worker_euid=worker,
                    queue_key=QA_QUEUE)
        act("fail_queue_execution", adapter, n := n + 1, worker_euid=worker,
            lease_euid=lease["lease_euid"], expected_state="READY",
            payload={"retryable": False, "error_class": error_class,
                     "error_message": message})
    act("set_worker_status", admin, n := n + 1, worker_euid=worker,
        payload={"operation": "retire", "reason": "Demo: replaced by the new fluorometer"})
    # its own analysis request, registered before it was sent out, so that its history reads
    # in order: registered, claimed, sent out an hour ago
    launched = clock.now() - timedelta(hours=1)
    requested = launched - timedelta(minutes=40)
    subject = act("register_subject", admin, n := n + 1, now=requested, queue_key=OUTSIDE_QUEUE,
                  payload={"template_code": ANALYSIS_REQUEST, "name": "Analysis request 0412",
                           "properties": {"site": SITES[0], "assay": ASSAYS[0]},
                           "ready_at": ts(requested)})["subject_euid"]
    launcher = act("register_worker", adapter, n := n + 1, now=launched, payload={
        "worker_type": "INSTRUMENT_ADAPTER", "worker_key": "demo://pipeline-launcher-v1",
        "display_name": "Pipeline launcher (v1)", "capabilities": ["compute.dispatch"]}
    )["worker_euid"]
    lease = act("claim_queue_item", adapter, n := n + 1, now=launched, worker_euid=launcher,
                subject_euid=subject)
    act("complete_queue_execution", adapter, n := n + 1, now=launched, worker_euid=launcher,
        lease_euid=lease["lease_euid"], expected_state="READY", payload={"external": LOST_RUN})
    act("set_worker_status", admin, n := n + 1, worker_euid=launcher,
        payload={"operation": "retire", "reason": "Demo: replaced by launcher v2"})
    held = [item.euid for item in selectors.queue_items(QA_QUEUE, limit=2)[0]]
    for euid, (code, reason) in zip(held, (
            ("QC_FAIL", "Negative control shows amplification: contamination suspected"),
            ("AWAITING_INFORMATION", "Requisition lists two different collection dates")),
            strict=True):
        act("place_execution_hold", qa, n := n + 1, subject_euid=euid, expected_state="READY",
            payload={"hold_code": code, "reason": reason})


__all__ = ["seed_demo", "DEMO_QUEUES", "DEMO_USERS", "ts"]
