"""What an action leaves behind besides its own changes: the action record with its
executed_on edges (who, when, what, why; the idempotency key and payload hash) and the outbox
event; and finding an earlier record of the same request (RULES.md#idempotency)."""


from __future__ import annotations

from django.conf import settings

from bloomops.execution import chain
from bloomops.execution.context import ACTION_CODE, EVENT_CODE, ActionRequest, Context, created_obj
from bloomops.execution.objects import REL, Obj
from bloomops.execution.statements import FIND_REPLAY, OUTBOX_INSERT
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_one
from bloomops.tapdb.instances import create_instance, link_many
from bloomops.tapdb.templates import template


def idempotency_scope(req: ActionRequest) -> str:
    """Keys are scoped to the caller (and, by the lookup, the action): the same key sent by
    another user is another request, never a replay of someone else's result; sent by the
    same caller with other content, another target included, it is a conflict
    (RULES.md#idempotency). The target was once part of the scope, taken from whichever
    field the request named first, so an optional field added to a retry made it a new
    request: a claim ran twice under one key."""
    return req.actor.username


def find_replay(req: ActionRequest, tenant: str, scope: str) -> dict | None:
    return fetch_one(
        FIND_REPLAY,
        {"tenant": tenant, "action": req.action_key, "key": req.idempotency_key,
         "scope": scope, "legacy": f"{scope}|"},
        prepare="find_replay",
    )


def _queue_of(ctx: Context) -> str:
    """The queue a subject's work is in, for an action on it that names none (a hold, a
    cancel): "every action in queue X" then finds it (RULES.md#evidence)."""
    if ctx.subject is None:
        return ""
    queue = ctx.subject.envelope.get("next_queue_key")
    return queue if isinstance(queue, str) else ""


def _text(value: object) -> str:
    """A value a record keeps as text: another writer's lease or worker may hold anything in
    the field a result copies (a record sealed an object as its queue)."""
    return value if isinstance(value, str) else ""


def record_action(ctx: Context, scope: str, payload_hash: str) -> Obj:
    req = ctx.request
    target = ctx.target or ctx.subject or ctx.lease or ctx.worker
    body = {
        "action_group": "execution_queue",
        "action_key": req.action_key,
        "captured_data": req.payload,
        "result": ctx.result,
        "executed_by": ctx.actor.username,
        "executed_by_name": ctx.actor.name or ctx.actor.username,
        "executed_at": ctx.now_ts,
        # an action on a lease names its subject in its result (a renewal, a forced expiry):
        # "every action on sample X" finds it (RULES.md#evidence)
        "subject_lookup_euid": ctx.subject.euid if ctx.subject else (
            req.subject_euid or _text(ctx.result.get("subject_euid"))),
        "worker_lookup_euid": ctx.worker.euid if ctx.worker else (req.worker_euid or ""),
        # the worker's name as it was (a later heartbeat may rename it): what an auditor
        # reads of this action, as executed_by_name keeps the person's
        "worker_name": _text(ctx.worker.props.get("display_name")) if ctx.worker else "",
        "lease_lookup_euid": ctx.result.get("lease_euid") or req.lease_euid or "",
        "queue_lookup_key": _text(ctx.result.get("queue_key")) or req.queue_key
        or _queue_of(ctx),
        "idempotency_key": req.idempotency_key,
        "idempotency_scope": scope,
        "payload_hash": payload_hash,
        "expected_state": req.expected_state,
        "expected_revision": req.expected_revision,
        "target_euid": target.euid if target else "",
        "reason": req.payload.get("reason"),
    }
    # Sealed over exactly the JSON create_instance stores (RULES.md#evidence).
    code = ACTION_CODE.format(key=req.action_key)
    body = {"semantic_category": template(code).semantic_category, "properties": {}, **body}
    body[chain.CHAIN] = chain.seal(ctx.tenant, body["target_euid"], body)
    created = create_instance(
        code,
        name=f"{req.action_key}@{target.euid if target else '-'}",
        properties={},
        tenant_id=ctx.tenant,
        extra=body,
    )
    uids = ([target.uid] if target is not None else []) + [
        u for u in dict.fromkeys(ctx.related_uids) if target is None or u != target.uid]
    if uids:
        link_many([(created.uid, u, REL["executed_on"]) for u in uids], tenant_id=ctx.tenant)
    return created_obj(ACTION_CODE.format(key=req.action_key), created)


def emit_event(ctx: Context, action: Obj) -> None:
    """Transactional outbox: an event written with the action, carrying correlation ids only,
    never names (PHI)."""
    req = ctx.request
    aggregate = ctx.subject or ctx.worker or ctx.lease
    correlation = {
        "action_euid": action.euid,
        "subject_euid": ctx.subject.euid if ctx.subject else None,
        "worker_euid": ctx.worker.euid if ctx.worker else None,
        "lease_euid": ctx.result.get("lease_euid") or req.lease_euid,
        "execution_record_euid": ctx.result.get("execution_record_euid"),
        "queue_key": ctx.result.get("queue_key") or req.queue_key,
    }
    event_type = f"execution.{req.action_key}"
    props = {
        "event_type": event_type,
        "aggregate_euid": aggregate.euid if aggregate else None,
        "correlation": correlation,
        "occurred_at": ctx.now_ts,
        "state": ctx.result.get("state"),
        "revision": ctx.result.get("revision"),
    }
    created = create_instance(EVENT_CODE, name=event_type, properties=props, tenant_id=ctx.tenant)
    sql_execute(OUTBOX_INSERT, {
        "message_uid": created.uid, "tenant": ctx.tenant,
        "destination": settings.BLOOMOPS_OUTBOX_DESTINATION,
        "dedupe_key": f"{event_type}:{aggregate.euid if aggregate else '-'}:{action.euid}",
    })
