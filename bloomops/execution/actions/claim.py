"""Claiming the next visible item, or a chosen one (RULES.md#claims)."""

from __future__ import annotations

import secrets
from datetime import timedelta

from bloomops.execution import selectors
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    common_checks,
    require,
)
from bloomops.execution.actions.steps import (
    LEASE_CODE,
    lock_worker,
    new_record,
    queue_obj,
    queue_or_refuse,
)
from bloomops.execution.actions.workers import refuse_beyond_bounds
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import (
    Obj,
    is_subject,
    load,
    save_props,
)
from bloomops.execution.people import (
    account_bounds,
    current_profile,
    username_of_human_key,
)
from bloomops.execution.policy import (
    eligibility_problems,
    liveness,
    readable_worker,
    worker_scope_problem,
    worker_scopes,
    worker_status_problem,
)
from bloomops.execution.statements import (
    CLAIM_CANDIDATE,
    WORKER_ACTIVE_LEASE_COUNT,
)
from bloomops.execution.states import (
    DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_MAX_LEASES,
    WorkerStatus,
    WorkerType,
)
from bloomops.tapdb.db import fetch_one


def _count_active_leases(ctx: Context, worker: Obj) -> int:
    row = fetch_one(WORKER_ACTIVE_LEASE_COUNT, {"worker_uid": worker.uid,
                                               "worker_euid": worker.euid, "now": ctx.now_ts},
                    prepare="worker_active_leases")
    return int(row["n"]) if row else 0


def _claim_candidate(ctx: Context, worker: Obj, queue_key: str, max_blocked: int,
                     *, scoped: bool = True) -> int | None:
    """The first visible subject of the queue in order, within the worker's own scopes
    (unless not ``scoped``), that this claim could lock and whose lineage, re-read after the
    lock, shows no active lease or hold (statements.CLAIM_FUNCTION, RULES.md#claims)."""
    scopes = {f"{f}s": values if scoped else None
              for f, values in worker_scopes(worker.props).items()}
    row = fetch_one(CLAIM_CANDIDATE, {"tenant": ctx.tenant, "now": ctx.now_ts,
                                      "queue_key": queue_key, "max_blocked": max_blocked,
                                      **scopes},
                    prepare="claim_candidate")
    return row["uid"] if row else None


def _back_online(ctx: Context, worker: Obj) -> None:
    """A worker that claims is alive: one that read OFFLINE (it said so, or its heartbeats
    stopped) is ONLINE again with this claim as its heartbeat, as a person's next action
    brings theirs back (RULES.md#claims). It held a lease while every count said nobody
    served the queue. Written only then: an online worker's claim writes no worker row."""
    if liveness(worker.props, ctx.now)[0] != WorkerStatus.OFFLINE:
        return
    stored = load(uid=worker.uid, tenant=ctx.tenant)  # as stored, not as this claim read it
    assert stored is not None
    props = {**stored.props, "heartbeat_at": ctx.now_ts}
    if props.get("status") == WorkerStatus.OFFLINE:
        props["status"] = WorkerStatus.ONLINE
    save_props(stored, props)


class ClaimQueueItem(Handler):
    uses = frozenset({
        "subject_euid", "worker_euid", "queue_key", "expected_state", "expected_revision"})
    guards_subject = False
    MAX_CANDIDATES = 20

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "worker_euid")

    def prepare(self, ctx: Context) -> None:
        worker = lock_worker(ctx, ctx.request.worker_euid)
        # decided on the fields as the engine reads them (a claim writes no worker property)
        worker.props = readable_worker(worker.props)
        person = username_of_human_key(worker.props.get("worker_key") or "")
        if worker.props.get("worker_type") == WorkerType.HUMAN_SESSION and person:
            # The person's profile as it is now decides (RULES.md#human-workers), not the one
            # stored at their last action: a revoked capability allows no further claim.
            worker.props = {**worker.props, **current_profile(person)}
        else:
            owner = worker.props.get("owner_username") or ""
            refuse_beyond_bounds(worker.props, owner, account_bounds(owner), registered=True)
        problem = worker_status_problem(worker.props)
        if problem:
            raise ActionError("WORKER_UNAVAILABLE", problem, worker_euid=worker.euid)
        # An instrument adapter names the subject it has loaded (scanned); on a strict-order
        # queue it gets it only when it is the head (RULES.md#queue-configuration).
        if ctx.request.subject_euid and worker.props.get("worker_type") not in (
            WorkerType.HUMAN_SESSION, WorkerType.INSTRUMENT_ADAPTER,
        ) and not ctx.actor.is_admin:
            raise ActionError("FORBIDDEN", "Only human workers and instrument adapters claim a"
                              " chosen subject.")
        limit = int(worker.props.get("max_concurrent_leases") or DEFAULT_MAX_LEASES)
        held = _count_active_leases(ctx, worker)
        if held >= limit:
            raise ActionError("MAX_LEASES_REACHED", f"The worker already holds {held} of"
                              f" {limit} allowed leases.", worker_euid=worker.euid,
                              held=held, limit=limit)

    def _queues(self, ctx: Context) -> list[dict]:
        req = ctx.request
        if req.queue_key:
            queue = queue_or_refuse(ctx, req.queue_key)
            assert queue is not None
            return [queue]
        if req.subject_euid:
            subject = load(euid=req.subject_euid, tenant=ctx.tenant)
            if subject is None or not is_subject(subject):
                raise ActionError("NOT_FOUND", "No such subject.", subject_euid=req.subject_euid)
            key = subject.envelope.get("next_queue_key")
            if not key:
                raise ActionError("NOT_VISIBLE", "The subject is not routed to any queue.",
                                  subject_euid=subject.euid,
                                  reasons=[{"code": "NEXT_QUEUE_KEY_MISSING"}])
            queue = queue_or_refuse(ctx, key)
            assert queue is not None
            return [queue]
        return selectors.queues(tenant=ctx.tenant)

    @staticmethod
    def _check_head(ctx: Context, queue: dict, subject: Obj) -> None:
        if not queue["config"].get("strict_order"):
            return
        head = selectors.queue_head(queue["queue_key"], now=ctx.now, tenant=ctx.tenant)
        if head is None or head.euid != subject.euid:
            # the head named: the person at the bench goes and finds it
            called = f"{head.name} ({head.euid})" if head and head.name else (
                head.euid if head else None)
            raise ActionError("QUEUE_HEAD_MISMATCH", (
                f"This queue runs work strictly in order: only the item at its head,"
                f" {called}, may be claimed now." if called else
                "This queue runs work strictly in order, and no item of it may be claimed"
                " now."), subject_euid=subject.euid, queue_key=queue["queue_key"],
                head_euid=head.euid if head else None)

    def run(self, ctx: Context) -> None:
        req = ctx.request
        worker = ctx.worker
        assert worker is not None
        explicit_queue = bool(req.queue_key or req.subject_euid)
        chosen: tuple[dict, int] | None = None
        for queue in self._queues(ctx):
            cfg = queue["config"]
            problems = eligibility_problems(worker.props, cfg)
            if problems:
                if explicit_queue:
                    code, message = problems[0]
                    raise ActionError(code, message, queue_key=queue["queue_key"],
                                      problems=[m for _, m in problems])
                continue
            if req.subject_euid:
                subject = load(euid=req.subject_euid, tenant=ctx.tenant, lock=True)
                if subject is None or not is_subject(subject):
                    raise ActionError("NOT_FOUND", "No such subject.",
                                      subject_euid=req.subject_euid)
                if not selectors.is_visible(subject.uid, queue["queue_key"], now=ctx.now,
                                            tenant=ctx.tenant):
                    diag = selectors.subject_diagnostics(subject.euid, now=ctx.now,
                                                         tenant=ctx.tenant)
                    reasons = diag.reasons if diag else []
                    if diag and diag.queue_key != queue["queue_key"]:
                        # the claim named another queue: said first, the rest is about
                        # the subject in its own queue
                        where = f"queue {diag.queue_key}" if diag.queue_key else "no queue"
                        reasons = [selectors.Reason("IN_ANOTHER_QUEUE", f"It is in {where},"
                                                    f" not {queue['queue_key']}."), *reasons]
                    raise ActionError(
                        "NOT_VISIBLE",
                        "Not claimable: " + "; ".join(r.message for r in reasons)
                        if reasons else None,
                        subject_euid=subject.euid,
                        reasons=[{"code": r.code, "message": r.message} for r in reasons],
                    )
                # read as the claim walk reads them (statements.IN_WORKER_SCOPE)
                out_of_scope = worker_scope_problem(
                    worker.props, selectors.scope_texts(subject.uid, tenant=ctx.tenant))
                if out_of_scope:
                    field, value, values = out_of_scope
                    said = (f"This item's {field} is {value or 'not given'}; the worker's"
                            f" {field} scope is {', '.join(values) or 'unreadable'}.")
                    raise ActionError("WORKER_NOT_ELIGIBLE", said, subject_euid=subject.euid,
                                      queue_key=queue["queue_key"], problems=[said],
                                      scope_field=field, item_value=value,
                                      worker_values=values)
                self._check_head(ctx, queue, subject)
                chosen = (queue, subject.uid)
                break
            # On a strict-order queue the head is the only item offered: a worker whose own
            # scopes exclude it takes nothing there, never the next one in its scope.
            strict = bool(cfg.get("strict_order"))
            if strict and any(v is not None for v in worker_scopes(worker.props).values()):
                # judged before the claim function locks the head: a lock held on it while
                # this claim takes work elsewhere would let every other claimer skip it
                head = selectors.queue_head(queue["queue_key"], now=ctx.now, tenant=ctx.tenant)
                if head is not None and worker_scope_problem(
                        worker.props, selectors.scope_texts(head.uid, tenant=ctx.tenant)):
                    continue
            uid = _claim_candidate(ctx, worker, queue["queue_key"], self.MAX_CANDIDATES,
                                   scoped=not strict)
            if uid is not None and strict:
                # the claim function skips a row another transaction holds locked (a hold
                # or a claim of the head under way): here that is not the next item's turn
                head = selectors.queue_head(queue["queue_key"], now=ctx.now, tenant=ctx.tenant)
                if head is None or head.uid != uid or worker_scope_problem(
                        worker.props, selectors.scope_texts(uid, tenant=ctx.tenant)):
                    uid = None
            if uid is not None:
                chosen = (queue, uid)
                break
        if chosen is None:
            raise ActionError("NO_WORK", queue_key=req.queue_key)
        queue, uid = chosen
        subject = load(uid=uid, tenant=ctx.tenant)
        assert subject is not None
        ctx.subject = ctx.target = subject
        ctx.env = subject.envelope
        if req.expected_state and req.expected_state != ctx.env["state"]:
            raise ActionError("STATE_CONFLICT", current_state=ctx.env["state"],
                              expected_state=req.expected_state)
        if req.expected_revision is not None and req.expected_revision != ctx.env["revision"]:
            raise ActionError("REVISION_CONFLICT", current_revision=ctx.env["revision"],
                              expected_revision=req.expected_revision)
        cfg = queue["config"]
        ttl = int(cfg.get("lease_ttl_seconds") or DEFAULT_LEASE_TTL_SECONDS)
        attempt = int(ctx.env.get("attempt_count") or 0) + 1
        lease_props = {
            "lease_token": secrets.token_urlsafe(24),
            "queue_lookup_key": queue["queue_key"],
            "subject_lookup_euid": subject.euid,
            "worker_lookup_euid": worker.euid,
            "status": "ACTIVE",
            "claimed_at": ctx.now_ts,
            "heartbeat_at": ctx.now_ts,
            "expires_at": ts(ctx.now + timedelta(seconds=ttl)),
            "released_at": None,
            "release_reason": None,
            "attempt_number": attempt,
            "ttl_seconds": ttl,
            "next_action_key": ctx.env.get("next_action_key"),
            "idempotency_key": req.idempotency_key,
            "subject_revision_at_claim": ctx.env["revision"],
            "payload_hash": req.payload_hash(),
        }
        lease = ctx.create(LEASE_CODE, name=f"Lease {subject.euid} #{attempt}",
                           properties=lease_props)
        queue_node = queue_obj(ctx, queue)
        # The seven claim edges (RULES.md#claims) in one INSERT with the record's.
        record = new_record(ctx, queue=queue, status="STARTED", attempt=attempt, lease=lease,
                             edges_before=[(subject, lease, "subject_lease"),
                                           (worker, lease, "worker_lease"),
                                           (queue_node, lease, "queue_lease")])
        # The subject row itself is not written: a claim changes no authoritative field (the
        # subject stays READY; the lease is the claim), its revision stays, and the claim
        # does not add a row version to every index of generic_instance.
        _back_online(ctx, worker)
        ctx.result.update(
            lease_euid=lease.euid, execution_record_euid=record.euid, worker_euid=worker.euid,
            queue_key=queue["queue_key"], attempt_number=attempt,
            expires_at=lease_props["expires_at"], next_action_key=ctx.env.get("next_action_key"),
            lease_token=lease_props["lease_token"],
        )
