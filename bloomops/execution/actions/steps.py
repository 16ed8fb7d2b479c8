"""Steps several actions share: loading queues and workers, closing leases and attempt
records, new records, dead letters and holds, with their lineage (RULES.md#objects)."""

from __future__ import annotations

from typing import Any

from bloomops.execution import selectors
from bloomops.execution.context import Context
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import ensure_controls_worker, lock_subject
from bloomops.execution.objects import (
    LEASE,
    REL,
    WORKER,
    Obj,
    children_of,
    is_kind,
    load,
    parent_of,
    save_props,
)
from bloomops.execution.policy import (
    next_queues_allowed,
    offered_states,
    queue_templates,
    scope_problem,
    takes_template,
)
from bloomops.execution.states import STOPPED_WORKER_STATUSES, DeadLetterResolution
from bloomops.tapdb.db import execute as sql_execute

LEASE_CODE = "data/execution/queue_lease/1.0"
RECORD_CODE = "data/execution/execution_record/1.0"
HOLD_CODE = "data/execution/hold/1.0"
DEAD_LETTER_CODE = "data/execution/dead_letter/1.0"
WORKER_CODE = "actor/system/worker/1.0"



def lock_queue_key(ctx: Context, queue_key: str, *, shared: bool) -> None:
    """The transaction's advisory lock on a queue key: exclusive for what makes or retires
    the queue of a key (two creates would both see it free; a rename must see every item
    sent to the old key), shared for what sends a subject to it (RULES.md#queue-configuration)."""
    how = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    sql_execute(f"SELECT {how}(hashtext(%s))", [f"{ctx.tenant}|queue|{queue_key}"])


def queue_or_refuse(ctx: Context, queue_key: str | None, *, required: bool = True,
                    routing: bool = False) -> dict | None:
    """The queue of a key, refused NOT_FOUND when none; ``routing``: a subject is being sent
    there, so no rename of it may commit in between (lock_queue_key)."""
    if not queue_key:
        if required:
            raise ActionError("VALIDATION_ERROR", "queue_key is required.", field="queue_key")
        return None
    if routing:
        lock_queue_key(ctx, queue_key, shared=True)
    row = selectors.queue_config(queue_key, tenant=ctx.tenant)
    if row is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
    return row


def template_code_of(subject: Obj) -> str | None:
    """The subject's semantic template code (what queues list in subject_template_codes),
    read as the visibility rule reads it (``selectors.template_code``); None when no template
    row has that uid."""
    return selectors.template_code(subject.template_uid)


def refuse_unless_takes(queue: dict, template_code: str | None) -> None:
    """A subject sent to a queue that does not take its template could never be seen there
    (RULES.md#visibility): refused, whichever action sends it."""
    if not takes_template(queue["config"], template_code):
        takes = queue_templates(queue["config"])
        kind = f"{template_code} subjects" if template_code else "subjects without a template"
        raise ActionError("SUBJECT_TEMPLATE_MISMATCH",
                          f"Queue {queue['queue_key']!r} does not take {kind}"
                          f" (it takes: {', '.join(takes) or 'none'}).",
                          queue_key=queue["queue_key"], template_code=template_code,
                          queue_template_codes=takes)


def refuse_unless_in_scope(queue: dict, props: dict) -> None:
    """A subject outside a queue's site/platform/assay scope is never visible there either
    (RULES.md#visibility): refused, whichever action sends it."""
    problem = scope_problem(queue["config"], props)
    if problem is not None:
        prop, scope = problem
        raise ActionError("SUBJECT_OUT_OF_SCOPE",
                          f"Queue {queue['queue_key']!r} serves {prop} {', '.join(scope)};"
                          f" this subject's {prop} is "
                          + (f"{props.get(prop)!r}." if props.get(prop) is not None
                             else "not given."),
                          queue_key=queue["queue_key"], property=prop,
                          value=props.get(prop), scope=scope)


def refuse_unless_offered(queue: dict, state: str = "READY") -> None:
    """An item arriving in a state its queue never offers items in (its eligible_states)
    would wait there unseen by every worker: refused, as one outside its scope is."""
    offered = offered_states(queue["config"])
    if state not in offered:
        raise ActionError("SUBJECT_OUT_OF_SCOPE",
                          f"Queue {queue['queue_key']!r} offers items only in"
                          f" {', '.join(offered) or 'no state'}; this subject would arrive"
                          f" {state} and never be offered.", queue_key=queue["queue_key"],
                          state=state, eligible_states=offered)


def refuse_unless_flow_allows(step_queue: dict | None, next_queue: dict | None) -> None:
    """A step's queue that lists its next queues (``next_queue_keys``) moves a finished
    item to those alone, whether its worker completes it or an external system reports it
    READY later (RULES.md#queue-configuration)."""
    allowed = next_queues_allowed((step_queue or {}).get("config") or {})
    if next_queue is not None and allowed is not None and next_queue["queue_key"] not in allowed:
        raise ActionError("NEXT_QUEUE_NOT_ALLOWED", "This queue's flow moves items to "
                          + (", ".join(allowed) or "no other queue") + ", not to "
                          + next_queue["queue_key"] + ".", field="next_queue_key",
                          allowed=allowed)


def next_queue_or_refuse(ctx: Context, queue_key: str | None, *, required: bool = True,
                         arriving: str | None = "READY") -> dict | None:
    """The queue the locked subject is sent to next (a completion, a failure, an external
    result, a requeue): it must exist, take the subject's template, have it in scope and
    offer items in the state it is ``arriving`` in (None: it waits there in none)."""
    queue = queue_or_refuse(ctx, queue_key, required=required, routing=True)
    if queue is not None and ctx.subject is not None:
        refuse_unless_takes(queue, template_code_of(ctx.subject))
        refuse_unless_in_scope(queue, ctx.subject.props)
        if arriving is not None:
            refuse_unless_offered(queue, arriving)
    return queue


def lock_worker(ctx: Context, euid: str | None) -> Obj:
    if not euid:
        raise ActionError("VALIDATION_ERROR", "worker_euid is required.", field="worker_euid")
    worker = load(euid=euid, tenant=ctx.tenant, lock=True)
    if not is_kind(worker, WORKER):
        raise ActionError("NOT_FOUND", "No such worker.", worker_euid=euid)
    assert worker is not None
    ensure_controls_worker(ctx.actor, worker)
    ctx.worker = worker
    return worker


def refuse_stopped_worker(worker: Obj, doing: str) -> None:
    """A disabled or retired worker does nothing more; a draining one finishes the work it
    has (renews, reports), it only takes none."""
    if worker.props.get("status") in STOPPED_WORKER_STATUSES:
        raise ActionError("WORKER_UNAVAILABLE", f"A {worker.props['status'].lower()} worker"
                          f" may not {doing}.", worker_euid=worker.euid)


def lock_subject_of_request(ctx: Context) -> None:
    euid = ctx.request.subject_euid
    if not euid and ctx.request.lease_euid:
        lease = load(euid=ctx.request.lease_euid, tenant=ctx.tenant)
        if not is_kind(lease, LEASE):
            raise ActionError("NOT_FOUND", "No such lease.", lease_euid=ctx.request.lease_euid)
        assert lease is not None
        subject = parent_of(lease.uid, REL["subject_lease"], tenant=ctx.tenant)
        euid = subject.euid if subject else None
    lock_subject(ctx, euid)


def record_of_lease(lease: Obj) -> Obj | None:
    records = children_of(lease.uid, REL["lease_record"], lock=True)
    return records[-1] if records else None


def close_lease(ctx: Context, lease: Obj, status: str, reason: str) -> None:
    props = dict(lease.props)
    props.update(status=status, released_at=ctx.now_ts, release_reason=reason)
    save_props(lease, props)


def finish_record(ctx: Context, record: Obj | None, status: str, **fields: Any) -> None:
    """An execution record moves from STARTED to a terminal status exactly once: it is
    the attempt's proof (RULES.md#objects)."""
    if record is None or record.props.get("status") != "STARTED":
        return
    props = dict(record.props)
    started = record.props.get("started_at")
    duration = None
    if started:
        from bloomops.execution.envelope import parse_ts

        duration = int((ctx.now - parse_ts(started)).total_seconds() * 1000)  # type: ignore[operator]
    fields.setdefault("end_state", ctx.env["state"] if ctx.env else None)
    props.update(status=status, finished_at=ctx.now_ts, duration_ms=duration, **fields)
    save_props(record, props)
    if ctx.env is not None:  # non-authoritative cache, saved with the envelope if it changes
        ctx.env["last_execution_record_euid"] = record.euid


def active_leases_of_subject(ctx: Context) -> list[Obj]:
    assert ctx.subject is not None
    return [
        lease for lease in children_of(ctx.subject.uid, REL["subject_lease"],
                                       where_status="ACTIVE", lock=True)
    ]


def end_active_leases(ctx: Context, lease_status: str, record_status: str, reason: str) -> None:
    """Close every ACTIVE lease of the subject (expired or not) and its open record."""
    for lease in active_leases_of_subject(ctx):
        close_lease(ctx, lease, lease_status, reason)
        finish_record(ctx, record_of_lease(lease), record_status, error_message=reason)


def new_record(ctx: Context, *, queue: dict | None, status: str, attempt: int,
                lease: Obj | None, extra: dict[str, Any] | None = None,
                edges_before: list[tuple[Obj, Obj, str]] | None = None) -> Obj:
    """A new execution record (one attempt) with its lineage; ``edges_before`` are written in the
    same INSERT, ahead of the record's own edges (the claim's lease edges)."""
    assert ctx.subject is not None and ctx.env is not None
    req = ctx.request
    props = {
        "subject_lookup_euid": ctx.subject.euid,
        "queue_lookup_key": queue["queue_key"] if queue else None,
        "worker_lookup_euid": ctx.worker.euid if ctx.worker else None,
        "lease_lookup_euid": lease.euid if lease else None,
        "attempt_number": attempt,
        "status": status,
        "action_key": ctx.env.get("next_action_key") or req.action_key,
        "idempotency_key": req.idempotency_key,
        "payload_hash": req.payload_hash(),
        "expected_state": req.expected_state,
        "start_state": ctx.env["state"],
        "end_state": None,
        "start_revision": ctx.env["revision"],
        "end_revision": None,
        "started_at": ctx.now_ts,
        "finished_at": None,
        "duration_ms": None,
        "retryable": False,
        "error_class": None,
        "error_code": None,
        "error_message": None,
        "correlation": {"action_key": req.action_key},
        "input_snapshot": {"envelope": {k: ctx.env[k] for k in ("state", "revision",
                                                               "next_queue_key", "priority")}},
        "result_snapshot": {},
        "policy_refs": [f"queue:{queue['queue_key']}"] if queue else [],
    }
    if extra:
        props.update(extra)
    name = f"{req.action_key} {ctx.subject.euid} attempt {attempt}"
    record = ctx.create(RECORD_CODE, name=name, properties=props)
    edges: list[tuple[Obj, Obj, str]] = list(edges_before or [])
    edges.append((ctx.subject, record, "subject_record"))
    if queue:
        edges.append((queue_obj(ctx, queue), record, "queue_record"))
    if ctx.worker:
        edges.append((ctx.worker, record, "worker_record"))
    if lease:
        edges.append((lease, record, "lease_record"))
    ctx.link_many(edges)
    return record


def queue_obj(ctx: Context, queue: dict) -> Obj:
    """The queue as a lineage endpoint, from the row ``queue_or_refuse`` already read."""
    return Obj(uid=queue["uid"], euid=queue["euid"], name=queue["queue_key"], template_uid=0,
               type="execution", subtype="queue", json_addl={"properties": queue["config"]},
               created_dt=None)  # type: ignore[arg-type]


def create_dead_letter(ctx: Context, queue: dict | None, record: Obj | None, lease: Obj | None,
                 error_class: str, message: str | None) -> Obj:
    assert ctx.subject is not None and ctx.env is not None
    props = {
        "subject_lookup_euid": ctx.subject.euid,
        "queue_lookup_key": queue["queue_key"] if queue else ctx.env.get("next_queue_key"),
        "last_execution_record_lookup_euid": record.euid if record else None,
        "last_lease_lookup_euid": lease.euid if lease else None,
        "dead_lettered_at": ctx.now_ts,
        "failure_count": ctx.env.get("attempt_count", 0),
        "error_class": error_class,
        # a retryable failure may come without a why (attempts.require_why); its last, at
        # the attempt limit, still leaves QA a letter that says what it is
        "error_message": message or f"{error_class} at the attempt limit; the last failure"
                                    " gave no message",
        "resolution_state": DeadLetterResolution.OPEN.value,
        "resolved_by_lookup_euid": None,
        "resolved_at": None,
    }
    dl = ctx.create(DEAD_LETTER_CODE, name=f"Dead letter {ctx.subject.euid}", properties=props)
    edges: list[tuple[Obj, Obj, str]] = [(ctx.subject, dl, "subject_dead_letter")]
    if queue:
        edges.append((queue_obj(ctx, queue), dl, "queue_dead_letter"))
    if record:
        edges.append((record, dl, "record_dead_letter"))
    ctx.link_many(edges)
    ctx.result["dead_letter_euid"] = dl.euid
    # what the letter says of the failure, sealed with the action (binding: a letter
    # rewritten in the database fails a fresh bundle)
    ctx.result["dead_letter"] = {"error_class": error_class,
                                 "error_message": props["error_message"]}
    return dl


# Who closed a dead letter, how, when and why.
RESOLUTION_FIELDS = ("resolution_state", "resolved_by_lookup_euid", "resolved_at",
                     "resolution_reason")


def resolve_dead_letters(ctx: Context, resolution: str) -> list[str]:
    """The subject's OPEN dead letters closed with ``resolution`` (who, when). A requeue also
    closes those a cancel closed: until a requeue, re-running work that failed for good needs
    what requeueing it needs (approvals.subject_flags), whatever closed its letter."""
    assert ctx.subject is not None
    resolved = []
    closable = {DeadLetterResolution.OPEN} | (
        {DeadLetterResolution.CANCELED, DeadLetterResolution.IGNORED}
        if resolution == DeadLetterResolution.REQUEUED else set())
    for dl in children_of(ctx.subject.uid, REL["subject_dead_letter"], lock=True):
        if dl.props.get("resolution_state") not in closable:
            continue
        props = dict(dl.props)
        if props.get("resolution_state") != DeadLetterResolution.OPEN:
            # a cancel's close, re-closed by a requeue, stays on the record
            props["earlier_resolutions"] = [*(props.get("earlier_resolutions") or []), {
                name: props.get(name) for name in RESOLUTION_FIELDS}]
        why = ctx.payload.get("reason")
        props.update(resolution_state=resolution, resolved_by_lookup_euid=ctx.actor.username,
                     resolved_at=ctx.now_ts,
                     resolution_reason=why.strip() if isinstance(why, str) else None)
        save_props(dl, props)
        resolved.append(dl.euid)
    return resolved




def place_hold(ctx: Context, queue: dict | None, code: str, reason: str, *,
                state_before: str) -> Obj:
    assert ctx.subject is not None
    props = {
        "subject_lookup_euid": ctx.subject.euid,
        "queue_lookup_key": queue["queue_key"] if queue else None,
        "placed_by_lookup_euid": ctx.actor.username,
        "status": "ACTIVE",
        "hold_code": code,
        "reason": reason,
        "placed_at": ctx.now_ts,
        "released_at": None,
        "released_by_lookup_euid": None,
        "state_before_hold": state_before,
    }
    hold = ctx.create(HOLD_CODE, name=f"Hold {ctx.subject.euid} {code}", properties=props)
    edges: list[tuple[Obj, Obj, str]] = [(ctx.subject, hold, "subject_hold")]
    if queue:
        edges.append((queue_obj(ctx, queue), hold, "queue_hold"))
    if ctx.worker:
        edges.append((ctx.worker, hold, "actor_hold"))
    ctx.link_many(edges)
    return hold


def release_hold(ctx: Context, hold: Obj, reason: str | None) -> None:
    """A hold ends RELEASED, keeping who ended it, when and why (RULES.md#holds), and on
    whose request when a second person approved it: the reason is then the requester's."""
    props = dict(hold.props)
    props.update(status="RELEASED", released_at=ctx.now_ts,
                 released_by_lookup_euid=ctx.actor.username, release_reason=reason)
    approval = ctx.result.get("approval")
    if isinstance(approval, dict):
        props["released_on_approval"] = {"approval_euid": approval.get("approval_euid"),
                                         "requested_by": approval.get("requested_by")}
    save_props(hold, props)
