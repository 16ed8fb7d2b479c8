"""The TapDB action executor: the only path by which bloomops writes.

execute(request):
  1. authorise the caller's role against the action template's allowed_roles
  2. validate the request (handler.validate), compute the payload hash
  3. in one transaction: SET LOCAL session.current_username; serialise on the idempotency
     key; replay the stored result (same hash) or refuse IDEMPOTENCY_CONFLICT (other hash)
  4. lock the subject row, then the lease (FOR NO KEY UPDATE), reading the time after each
     wait; guard the lease (active, unexpired, lineage-linked to subject and worker), then
     expected_state, expected_revision and the template's allowed_from_states
  5. the approval gate (RULES.md#approvals), then run the handler (envelope change, new
     objects, lineage); an approving decide_approval runs its gated action here
  6. revision += 1 when the envelope changed; the action record (type execution_queue,
     subtype = action key) with an executed_on edge to its target; an outbox event
  7. commit, then one structured log line
A refusal raises ActionError before commit, so nothing is written.
"""

from __future__ import annotations

import json
import logging
import time

from django.conf import settings
from django.db import DatabaseError, transaction

from bloomops.execution import clock
from bloomops.execution.actions import HANDLERS
from bloomops.execution.actions.fields import KEY_MAX
from bloomops.execution.approvals import gate
from bloomops.execution.chain import ENVELOPE_SEAL, envelope_seal
from bloomops.execution.context import (
    NOT_EMITTED,
    ActionRequest,
    ActionResult,
    Actor,
    Context,
    action_spec,
    ensure_role,
)
from bloomops.execution.counters import count_refusal, count_replay
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import (
    check_not_applicable,
    check_payload,
    check_request_fields,
    guard_envelope,
    guard_lease,
    guard_subject,
)
from bloomops.execution.indexes import ONE_OBJECT_PER_KEY
from bloomops.execution.journal import emit_event, find_replay, idempotency_scope, record_action
from bloomops.execution.models import QueueSnapshot
from bloomops.execution.objects import save_props
from bloomops.execution.states import TERMINAL_STATES
from bloomops.execution.stats.counting import tenant_key
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.tenancy import tenant_of
from bloomops.text import exact_line_problem

log = logging.getLogger("bloomops.execution")

__all__ = ["ActionRequest", "ActionResult", "Actor", "execute"]


def execute(req: ActionRequest) -> ActionResult:
    """Run one action (module docstring); every refusal and replay is counted and every
    refusal logged here."""
    started = time.monotonic()
    try:
        result = _execute(req)
    except ActionError as exc:
        count_refusal(req.action_key, exc.code, req.queue_key)
        _log_refusal(req, exc, started)
        raise
    if result.replayed:
        count_replay(req.action_key, result.get("queue_key") or req.queue_key)
    return result


def would_replay(req: ActionRequest) -> bool:
    """Whether ``req`` was done before under its key with this content, so executing it
    would only answer the stored result (RULES.md#idempotency). One query, no lock."""
    stored = find_replay(req, tenant_of(req.tenant), idempotency_scope(req))
    return stored is not None and stored["json_addl"].get("payload_hash") == req.payload_hash()


def _execute(req: ActionRequest, approval: dict | None = None) -> ActionResult:
    started = time.monotonic()
    tenant = tenant_of(req.tenant)
    spec = action_spec(req.action_key)
    handler = HANDLERS.get(req.action_key)
    if handler is None:
        raise ActionError("VALIDATION_ERROR", f"Unknown action {req.action_key!r}.")
    ensure_role(req.actor.roles, spec)
    if not (req.idempotency_key or "").strip():
        raise ActionError("VALIDATION_ERROR", "An idempotency key is required.",
                          field="idempotency_key")
    if len(req.idempotency_key) > KEY_MAX:
        raise ActionError("VALIDATION_ERROR", f"The idempotency key is too long ({KEY_MAX}"
                          " max).", field="idempotency_key")
    # it is logged, listed with leases and matched exactly: nothing in it may show as nothing
    if problem := exact_line_problem(req.idempotency_key):
        raise ActionError("VALIDATION_ERROR", f"The idempotency key {problem}.",
                          field="idempotency_key")
    check_request_fields(req)
    check_payload(req.payload, handler.fields)
    handler.validate(req)
    check_not_applicable(req, handler.not_applicable)
    now = req.now or clock.now()
    ctx = Context(request=req, spec=spec, actor=req.actor, now=now, tenant=tenant)
    payload_hash = req.payload_hash()
    scope = idempotency_scope(req)
    try:
        with transaction.atomic():
            # One round trip: the acting user for TapDB's audit trigger; a lock timeout (a row
            # locked elsewhere for longer is reported as CONCURRENT_UPDATE instead of hanging
            # the request); then serialise on the idempotency key.
            sql_execute(
                "SELECT set_config('session.current_username', %s, true),"
                " set_config('lock_timeout', %s, true), pg_advisory_xact_lock(hashtext(%s))",
                [req.actor.username, f"{settings.BLOOMOPS_LOCK_TIMEOUT_MS}ms",
                 f"{tenant}|{req.action_key}|{scope}|{req.idempotency_key}"],
            )
            stored = find_replay(req, tenant, scope)
            if stored is not None:
                body = stored["json_addl"]
                if body.get("payload_hash") != payload_hash:
                    raise ActionError(
                        "IDEMPOTENCY_CONFLICT",
                        idempotency_key=req.idempotency_key,
                        action_euid=stored["euid"],
                    )
                result = ActionResult(req.action_key, stored["euid"], True, body.get("result", {}))
                _log(req, ctx, result, started, replayed=True)
                return result
            handler.prepare(ctx)
            if req.now is None:
                # The action's time is read after the locks it waited for: a claim that
                # leased this subject once this lease ran out has committed by now, so a late
                # completion or renewal judged at the time read before the wait (still
                # inside the lease) would step over it (RULES.md#leases).
                ctx.now = clock.now()
            # The lease is the worker's credential: a late call on an expired lease is told
            # LEASE_EXPIRED (RULES.md#leases) even though the subject has moved on since.
            if spec.requires_lease:
                guard_lease(ctx)
            if ctx.subject is not None:
                ctx.env = ctx.subject.envelope
                guard_envelope(ctx, handler)
                guard_subject(ctx, allowed_states=handler.guards_subject)
            handler.check(ctx)
            # Two-person rule (RULES.md#approvals): a gated action runs only under the approval
            # a second person just signed, which reaches here from decide_approval alone.
            if approval is None:
                gate(ctx)
            else:
                ctx.result["approval"] = approval
            handler.run(ctx)
            if ctx.follow_up is not None:
                done = _execute(*ctx.follow_up)
                ctx.result.update(executed_action_euid=done.action_euid,
                                  state=done.get("state"), revision=done.get("revision"))
            if ctx.noop:
                result = ActionResult(req.action_key, None, False, {**ctx.result, "noop": True})
                _log(req, ctx, result, started, replayed=False)
                return result
            if ctx.subject is not None and ctx.env_changed and ctx.env is not None:
                ctx.env["revision"] = int(ctx.env.get("revision") or 0) + 1
                ctx.env[ENVELOPE_SEAL] = envelope_seal(ctx.tenant, ctx.subject.euid, ctx.env)
                ctx.result["envelope_seal"] = ctx.env[ENVELOPE_SEAL]
                props = dict(ctx.subject.props)
                props["execution"] = ctx.env
                save_props(ctx.subject, props)
            if ctx.subject is not None and ctx.env is not None:
                ctx.result.setdefault("subject_euid", ctx.subject.euid)
                ctx.result.setdefault("state", ctx.env["state"])
                ctx.result.setdefault("revision", ctx.env["revision"])
            action = record_action(ctx, scope, payload_hash)
            if handler.changes_statistics:
                QueueSnapshot.objects.filter(tenant=tenant_key(tenant)).update(stale=True)
            if ctx.emit and req.action_key not in NOT_EMITTED:
                emit_event(ctx, action)
    except DatabaseError as exc:
        # Lock timeouts and deadlocks between racing actions, or another writer creating the
        # same queue or worker key meanwhile: nothing was committed.
        cause = getattr(exc, "__cause__", None)
        code = getattr(cause, "pgcode", "")
        if code in {"40P01", "55P03", "40001"} or (
                code == "23505" and getattr(getattr(cause, "diag", None), "constraint_name",
                                            None) in ONE_OBJECT_PER_KEY):
            raise ActionError("CONCURRENT_UPDATE") from exc
        raise
    result = ActionResult(req.action_key, action.euid, False, ctx.result)
    _log(req, ctx, result, started, replayed=False)
    return result


def _line(event: str, req: ActionRequest, tenant: str | None, started: float,
          result: dict, routed_to: str | None = None, **more: object) -> dict:
    """The fields of one action's log line (RULES.md#requests, "Logged"): identifiers,
    states and codes only; no payload text, which may name a patient."""
    return {
        "event": event,
        "tenant": tenant,
        "action_key": req.action_key,
        "subject_euid": result.get("subject_euid") or req.subject_euid,
        "worker_euid": result.get("worker_euid") or req.worker_euid,
        "lease_euid": result.get("lease_euid") or req.lease_euid,
        "queue_key": result.get("queue_key") or req.queue_key or routed_to,
        "idempotency_key": req.idempotency_key,
        "expected_state": req.expected_state,
        **more,
        "actor": req.actor.username,
        "duration_ms": round((time.monotonic() - started) * 1000, 2),
    }


def _log(req: ActionRequest, ctx: Context, result: ActionResult, started: float,
         *, replayed: bool) -> None:
    """One structured log line per action done, to trace what happened."""
    state = result.get("state")
    log.info(json.dumps(_line(
        "execution_action", req, ctx.tenant, started, result,
        (ctx.env or {}).get("next_queue_key"),
        terminal_status=state if state in TERMINAL_STATES else None, state=state,
        action_euid=result.action_euid, replayed=replayed), default=str))


# A refused request's identifiers are the caller's, unchecked (one refused for its length):
# each is logged up to this many characters.
LOGGED_REFUSED = 200


def _log_refusal(req: ActionRequest, exc: ActionError, started: float) -> None:
    """One line per refusal, with its code and the field it names: why a late completion or
    a stale page was refused can be traced. A claim that found no work is the idle worker's
    poll, not a refusal to trace: logged at DEBUG."""
    level = logging.DEBUG if exc.code == "NO_WORK" else logging.INFO
    if log.isEnabledFor(level):
        line = _line("execution_refused", req, tenant_of(req.tenant), started, {},
                     code=exc.code, field=exc.details.get("field"))
        log.log(level, json.dumps({k: v[:LOGGED_REFUSED] if isinstance(v, str) else v
                                   for k, v in line.items()}, default=str))
