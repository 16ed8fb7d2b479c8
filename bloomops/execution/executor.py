"""The TapDB action executor: the only path by which bloomops writes.

execute(request):
  1. authorise the caller's role against the action template's allowed_roles
  2. validate the request (handler.validate), compute the payload hash
  3. in one transaction: SET LOCAL session.current_username; serialise on the idempotency
     key; replay the stored result (same hash) or refuse IDEMPOTENCY_CONFLICT (other hash)
  4. lock the subject row FOR UPDATE, then the lease; guard the lease (active, unexpired,
     lineage-linked to subject and worker), then expected_state, expected_revision and the
     template's allowed_from_states
  5. run the handler (envelope change, new objects, lineage)
  6. revision += 1 when the envelope changed; the action record (type execution_queue,
     subtype = action key) with an executed_on edge to its target; an outbox event
  7. commit, then one structured log line
A refusal raises ActionError before commit, so nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from bloomops.accounts.roles import roles_of
from bloomops.execution import clock
from bloomops.execution.envelope import envelope_problems, ts
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import LEASE, REL, WORKER, Obj, is_kind, load, parent_of, save_props
from bloomops.execution.states import TERMINAL_STATES
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_one
from bloomops.tapdb.instances import Created, create_instance, link, link_many
from bloomops.tapdb.templates import all_templates, template

log = logging.getLogger("bloomops.execution")

ACTION_CODE = "action/execution_queue/{key}/1.0"
EVENT_CODE = "message/execution/event/1.0"
# Heartbeats are liveness, not domain events: recorded as actions, not emitted.
NOT_EMITTED = frozenset({"heartbeat_worker"})


@dataclass
class Actor:
    username: str
    roles: frozenset[str]

    @classmethod
    def of(cls, user) -> Actor:
        return cls(username=user.get_username(), roles=roles_of(user))

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


@dataclass
class ActionRequest:
    action_key: str
    actor: Actor
    idempotency_key: str
    subject_euid: str | None = None
    worker_euid: str | None = None
    lease_euid: str | None = None
    hold_euid: str | None = None
    queue_key: str | None = None
    expected_state: str | None = None
    expected_revision: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    tenant: str | None = None
    now: datetime | None = None

    def hash_material(self) -> dict[str, Any]:
        return {
            "action_key": self.action_key,
            "subject_euid": self.subject_euid,
            "worker_euid": self.worker_euid,
            "lease_euid": self.lease_euid,
            "hold_euid": self.hold_euid,
            "queue_key": self.queue_key,
            "expected_state": self.expected_state,
            "expected_revision": self.expected_revision,
            "payload": self.payload,
        }

    def payload_hash(self) -> str:
        material = json.dumps(self.hash_material(), sort_keys=True, separators=(",", ":"),
                              default=str)
        return hashlib.sha256(material.encode()).hexdigest()


@dataclass
class ActionResult:
    action_key: str
    action_euid: str | None
    replayed: bool
    result: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.result[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.result.get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return {
            "action_key": self.action_key,
            "action_euid": self.action_euid,
            "replayed": self.replayed,
            **self.result,
        }


@dataclass
class ActionSpec:
    key: str
    name: str
    allowed_roles: frozenset[str]
    requires_lease: bool
    allowed_from_states: tuple[str, ...] | None


def action_spec(action_key: str) -> ActionSpec:
    ref = all_templates().get(ACTION_CODE.format(key=action_key))
    if ref is None:
        raise ActionError("VALIDATION_ERROR", f"Unknown action {action_key!r}.",
                          field="action_key")
    definition = ref.action_definition
    states = definition.get("allowed_from_states")
    return ActionSpec(
        key=action_key,
        name=definition.get("action_name", action_key),
        allowed_roles=frozenset(definition.get("allowed_roles") or ()),
        requires_lease=bool(definition.get("requires_lease")),
        allowed_from_states=tuple(states) if states is not None else None,
    )


@dataclass
class Context:
    """What a handler sees and fills in."""

    request: ActionRequest
    spec: ActionSpec
    actor: Actor
    now: datetime
    tenant: str
    subject: Obj | None = None
    env: dict[str, Any] | None = None
    worker: Obj | None = None
    lease: Obj | None = None
    env_changed: bool = False
    target: Obj | None = None
    result: dict[str, Any] = field(default_factory=dict)
    emit: bool = True
    # Set by a handler that found nothing to do (e.g. a second sweep): nothing is written.
    noop: bool = False
    # Objects the action also acted on besides its target (the subjects of force-expired
    # leases): each gets an executed_on edge, so the action is in their history.
    related: list[Obj] = field(default_factory=list)
    log_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> dict[str, Any]:
        return self.request.payload

    @property
    def now_ts(self) -> str:
        return ts(self.now)  # type: ignore[return-value]

    def set_env(self, **changes: Any) -> None:
        assert self.env is not None
        self.env.update(changes)
        self.env_changed = True

    def create(self, code: str, *, name: str, properties: dict[str, Any]) -> Obj:
        created = create_instance(code, name=name, properties=properties, tenant_id=self.tenant)
        return _created_obj(code, created)

    def link(self, parent: Obj, child: Obj, rel_name: str) -> None:
        link(parent.uid, child.uid, REL[rel_name], tenant_id=self.tenant)

    def link_many(self, edges: list[tuple[Obj, Obj, str]]) -> None:
        link_many([(p.uid, c.uid, REL[r]) for p, c, r in edges], tenant_id=self.tenant)


# The largest payload an action stores (its canonical JSON), and how deep it may nest: an
# action record is evidence, not a file store (RULES.md#requests).
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 8


def check_payload(payload: Any, fields: tuple[str, ...]) -> None:
    """Refuse what must never be stored: unknown payload keys, values PostgreSQL or JSON
    cannot hold faithfully (NUL, lone surrogates, NaN/Infinity), and oversize or deep nests."""
    if not isinstance(payload, dict):
        raise ActionError("VALIDATION_ERROR", "payload must be an object.", field="payload")
    unknown = sorted(str(k)[:60] for k in payload if k not in fields)
    if unknown:
        raise ActionError("VALIDATION_ERROR", "Unknown payload field(s): " + ", ".join(unknown)
                          + (". Allowed: " + ", ".join(fields) if fields else
                             ". This action takes no payload fields") + ".",
                          field="payload", unknown_fields=unknown)
    _check_json(payload, "payload", 0)
    try:
        size = len(json.dumps(payload, allow_nan=False, ensure_ascii=False).encode())
    except (ValueError, UnicodeEncodeError):
        raise ActionError("VALIDATION_ERROR", "payload holds a value JSON cannot carry.",
                          field="payload") from None
    if size > MAX_PAYLOAD_BYTES:
        raise ActionError("VALIDATION_ERROR", f"payload is too large ({size} bytes;"
                          f" {MAX_PAYLOAD_BYTES} max).", field="payload")


REQUEST_TEXT_FIELDS = ("subject_euid", "worker_euid", "lease_euid", "hold_euid", "queue_key",
                       "expected_state")


def check_request_fields(req: ActionRequest) -> None:
    for name in REQUEST_TEXT_FIELDS:
        value = getattr(req, name)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > 200:
            raise ActionError("VALIDATION_ERROR", f"{name} must be text of at most 200"
                              " characters.", field=name)
        _check_text(value, name)
    _check_text(req.idempotency_key, "idempotency_key")
    revision = req.expected_revision
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)
                                 or not 0 <= revision <= 2**31):
        raise ActionError("VALIDATION_ERROR", "expected_revision must be a whole number"
                          f" from 0 to {2**31}.", field="expected_revision")


def _check_text(value: str, where: str) -> None:
    if "\x00" in value:
        raise ActionError("VALIDATION_ERROR", f"{where} contains a NUL character.", field=where)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ActionError("VALIDATION_ERROR", f"{where} is not valid Unicode text.",
                          field=where) from None


def _check_json(value: Any, where: str, depth: int) -> None:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ActionError("VALIDATION_ERROR", f"{where} is nested too deeply"
                          f" ({MAX_PAYLOAD_DEPTH} levels max).", field=where)
    if isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ActionError("VALIDATION_ERROR", f"{where} must be a finite number.", field=where)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ActionError("VALIDATION_ERROR", f"{where} keys must be text.", field=where)
            _check_text(key, where)
            _check_json(item, f"{where}.{key[:40]}", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
    elif value is not None and not isinstance(value, bool | int | float):
        raise ActionError("VALIDATION_ERROR", f"{where} holds a value JSON cannot carry.",
                          field=where)


def _created_obj(code: str, created: Created) -> Obj:
    """The object just inserted, from what the INSERT returned (no second read)."""
    ref = template(code)
    return Obj(uid=created.uid, euid=created.euid, name=created.name, template_uid=ref.uid,
               type=ref.type, subtype=ref.subtype, json_addl=created.json_addl,
               created_dt=created.created_dt)


def _set_username(username: str) -> None:
    sql_execute("SELECT set_config('session.current_username', %s, true)", [username])


def _idempotency_scope(req: ActionRequest) -> str:
    """Keys are scoped to the caller and the target: the same key sent by another user is
    another request, never a replay of someone else's result (RULES.md#idempotency)."""
    target = req.subject_euid or req.worker_euid or req.lease_euid or req.hold_euid or (
        str(req.payload.get("worker_key") or "")
    )
    return f"{req.actor.username}|{target}"


def _find_replay(req: ActionRequest, tenant: str, scope: str) -> dict | None:
    return fetch_one(
        """
        SELECT euid, json_addl FROM generic_instance
        WHERE tenant_id = %(tenant)s AND NOT is_deleted AND type = 'execution_queue'
          AND subtype = %(action)s AND json_addl->>'idempotency_key' = %(key)s
          AND json_addl->>'idempotency_scope' = %(scope)s
        ORDER BY uid LIMIT 1
        """,
        {"tenant": tenant, "action": req.action_key, "key": req.idempotency_key,
         "scope": scope},
        prepare="find_replay",
    )


def _guard_envelope(ctx: Context, handler: Any) -> None:
    """A subject whose stored envelope another writer broke is refused by every action except
    the operator's way out (requeue, cancel), which rebuilds the bad fields from defaults."""
    assert ctx.subject is not None
    raw = ctx.subject.props.get("execution")
    problems = envelope_problems(raw) if raw is not None else []
    if not problems:
        return
    if not handler.repairs_envelope:
        raise ActionError("INVALID_ENVELOPE", "The subject's execution envelope cannot be used: "
                          + "; ".join(p for _, p in problems) + ".",
                          subject_euid=ctx.subject.euid, fields=[f for f, _ in problems])
    ctx.env_changed = True
    ctx.result["repaired_fields"] = [f for f, _ in problems]


def _guard_subject(ctx: Context) -> None:
    req, subject = ctx.request, ctx.subject
    assert subject is not None and ctx.env is not None
    state = ctx.env["state"]
    if req.expected_state is not None and req.expected_state != state:
        raise ActionError(
            "STATE_CONFLICT",
            details_state(req.expected_state, state),
            expected_state=req.expected_state,
            current_state=state,
        )
    revision = int(ctx.env.get("revision") or 0)
    if req.expected_revision is not None and int(req.expected_revision) != revision:
        raise ActionError(
            "REVISION_CONFLICT",
            f"This subject changed since you loaded the page (revision {req.expected_revision}"
            f" expected, now {revision}).",
            expected_revision=req.expected_revision,
            current_revision=revision,
        )
    allowed = ctx.spec.allowed_from_states
    if state == "HELD" and (allowed is None or "HELD" not in allowed):
        raise ActionError("SUBJECT_HELD", current_state=state)
    if allowed is not None and state not in allowed:
        raise ActionError(
            "STATE_CONFLICT",
            f"{ctx.spec.name} is not allowed from state {state}.",
            current_state=state,
            allowed_states=list(allowed),
        )


def details_state(expected: str, current: str) -> str:
    return (
        f"This subject changed since you loaded the page: it is {current}, not {expected}."
    )


def guard_lease(ctx: Context) -> None:
    """Spec 4.6/7.5: the lease is lineage-linked to subject and worker, active, unexpired,
    and the caller controls the worker."""
    req = ctx.request
    lease = load(euid=req.lease_euid, tenant=ctx.tenant, lock=True) if req.lease_euid else None
    if not is_kind(lease, LEASE):
        raise ActionError("NOT_FOUND", "No such lease.", lease_euid=req.lease_euid)
    assert lease is not None
    ctx.lease = lease
    if ctx.subject is not None and not _linked(ctx.subject, lease, "subject_lease"):
        raise ActionError("LEASE_NOT_OWNED", "This lease is not a lease of that subject.",
                          lease_euid=lease.euid)
    worker = parent_of(lease.uid, REL["worker_lease"], tenant=ctx.tenant)
    if req.worker_euid and (worker is None or worker.euid != req.worker_euid):
        raise ActionError("LEASE_NOT_OWNED", lease_euid=lease.euid, worker_euid=req.worker_euid)
    if worker is None:
        raise ActionError("LEASE_NOT_OWNED", "The lease has no worker.", lease_euid=lease.euid)
    ctx.worker = worker
    ensure_controls_worker(ctx.actor, worker)
    status = lease.props.get("status")
    past_expiry = lease.props.get("expires_at", "") <= ctx.now_ts
    if status == "EXPIRED" or (status == "ACTIVE" and past_expiry):
        raise ActionError("LEASE_EXPIRED", lease_euid=lease.euid,
                          expires_at=lease.props.get("expires_at"))
    if status != "ACTIVE":
        raise ActionError("LEASE_NOT_ACTIVE", lease_euid=lease.euid, lease_status=status)


def _linked(parent: Obj, child: Obj, rel: str) -> bool:
    from bloomops.execution.objects import linked

    return linked(parent.uid, child.uid, REL[rel])


def ensure_controls_worker(actor: Actor, worker: Obj) -> None:
    """Workers act only through their own worker object (10.4); admins may override."""
    if actor.is_admin:
        return
    if worker.props.get("worker_type") == "HUMAN_SESSION":
        # A person's worker is theirs by its key, whoever registered it first.
        from bloomops.execution.people import username_of_human_key

        owner = username_of_human_key(worker.props.get("worker_key") or "")
    else:
        owner = worker.props.get("owner_username")
    if owner != actor.username:
        raise ActionError(
            "LEASE_NOT_OWNED",
            "This worker belongs to another user.",
            worker_euid=worker.euid,
        )


def _record_action(ctx: Context, scope: str, payload_hash: str) -> Obj:
    req = ctx.request
    target = ctx.target or ctx.subject or ctx.lease or ctx.worker
    body = {
        "action_group": "execution_queue",
        "action_key": req.action_key,
        "captured_data": req.payload,
        "result": ctx.result,
        "executed_by": ctx.actor.username,
        "executed_at": ctx.now_ts,
        "subject_lookup_euid": ctx.subject.euid if ctx.subject else (req.subject_euid or ""),
        "worker_lookup_euid": ctx.worker.euid if ctx.worker else (req.worker_euid or ""),
        "lease_lookup_euid": ctx.result.get("lease_euid") or req.lease_euid or "",
        "queue_lookup_key": ctx.result.get("queue_key") or req.queue_key or "",
        "idempotency_key": req.idempotency_key,
        "idempotency_scope": scope,
        "payload_hash": payload_hash,
        "expected_state": req.expected_state,
        "expected_revision": req.expected_revision,
        "target_euid": target.euid if target else "",
        "reason": req.payload.get("reason"),
    }
    created = create_instance(
        ACTION_CODE.format(key=req.action_key),
        name=f"{req.action_key}@{target.euid if target else '-'}",
        properties={},
        tenant_id=ctx.tenant,
        extra=body,
    )
    others = [o for o in ctx.related if target is None or o.uid != target.uid]
    if target is not None or others:
        link_many([(created.uid, o.uid, REL["executed_on"])
                   for o in ([target] if target is not None else []) + others],
                  tenant_id=ctx.tenant)
    return _created_obj(ACTION_CODE.format(key=req.action_key), created)


def _emit(ctx: Context, action: Obj) -> None:
    """Transactional outbox (spec 7.7, seed 003): correlation ids only, never names (PHI)."""
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
    sql_execute(
        """
        INSERT INTO outbox_event (message_uid, tenant_id, destination, dedupe_key)
        VALUES (%s, %s, %s, %s)
        """,
        [
            created.uid,
            ctx.tenant,
            settings.BLOOMOPS_OUTBOX_DESTINATION,
            f"{event_type}:{aggregate.euid if aggregate else '-'}:{action.euid}",
        ],
    )


def execute(req: ActionRequest) -> ActionResult:
    from bloomops.execution.actions import HANDLERS

    started = time.monotonic()
    tenant = str(req.tenant or settings.TAPDB_TENANT_ID)
    spec = action_spec(req.action_key)
    handler = HANDLERS.get(req.action_key)
    if handler is None:
        raise ActionError("VALIDATION_ERROR", f"Unknown action {req.action_key!r}.")
    if not (req.actor.roles & spec.allowed_roles):
        raise ActionError(
            "FORBIDDEN",
            f"Your role may not {spec.name.lower()}.",
            action_key=req.action_key,
            allowed_roles=sorted(spec.allowed_roles),
        )
    if not (req.idempotency_key or "").strip():
        raise ActionError("VALIDATION_ERROR", "An idempotency key is required.",
                          field="idempotency_key")
    if len(req.idempotency_key) > 200:
        raise ActionError("VALIDATION_ERROR", "The idempotency key is too long (200 max).",
                          field="idempotency_key")
    check_request_fields(req)
    check_payload(req.payload, handler.fields)
    handler.validate(req)
    now = req.now or clock.now()
    ctx = Context(request=req, spec=spec, actor=req.actor, now=now, tenant=tenant)
    payload_hash = req.payload_hash()
    scope = _idempotency_scope(req)
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
            stored = _find_replay(req, tenant, scope)
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
            # The lease is the worker's credential: a late call on an expired lease is told
            # LEASE_EXPIRED (8.1) even though the subject has moved on since.
            if spec.requires_lease:
                guard_lease(ctx)
            if ctx.subject is not None:
                ctx.env = ctx.subject.envelope
                _guard_envelope(ctx, handler)
                if handler.guards_subject:
                    _guard_subject(ctx)
            handler.run(ctx)
            if ctx.noop:
                result = ActionResult(req.action_key, None, False, {**ctx.result, "noop": True})
                _log(req, ctx, result, started, replayed=False)
                return result
            if ctx.subject is not None and ctx.env_changed and ctx.env is not None:
                ctx.env["revision"] = int(ctx.env.get("revision") or 0) + 1
                props = dict(ctx.subject.props)
                props["execution"] = ctx.env
                save_props(ctx.subject, props)
            if ctx.subject is not None and ctx.env is not None:
                ctx.result.setdefault("subject_euid", ctx.subject.euid)
                ctx.result.setdefault("state", ctx.env["state"])
                ctx.result.setdefault("revision", ctx.env["revision"])
            action = _record_action(ctx, scope, payload_hash)
            if ctx.emit and req.action_key not in NOT_EMITTED:
                _emit(ctx, action)
    except DatabaseError as exc:
        # Lock timeouts and deadlocks between racing actions: nothing was committed.
        if getattr(exc, "__cause__", None) is not None and getattr(
            exc.__cause__, "pgcode", ""
        ) in {"40P01", "55P03", "40001"}:
            raise ActionError("CONCURRENT_UPDATE") from exc
        raise
    result = ActionResult(req.action_key, action.euid, False, ctx.result)
    _log(req, ctx, result, started, replayed=False)
    return result


def _log(req: ActionRequest, ctx: Context, result: ActionResult, started: float,
         *, replayed: bool) -> None:
    """Spec 9.5: one structured line per action."""
    fields = {
        "event": "execution_action",
        "tenant": ctx.tenant,
        "action_key": req.action_key,
        "subject_euid": result.get("subject_euid") or req.subject_euid,
        "worker_euid": result.get("worker_euid") or req.worker_euid,
        "lease_euid": result.get("lease_euid") or req.lease_euid,
        "queue_key": result.get("queue_key") or req.queue_key,
        "idempotency_key": req.idempotency_key,
        "expected_state": req.expected_state,
        "terminal_status": result.get("state") if result.get("state") in TERMINAL_STATES
        else None,
        "state": result.get("state"),
        "action_euid": result.action_euid,
        "replayed": replayed,
        "actor": req.actor.username,
        "duration_ms": round((time.monotonic() - started) * 1000, 2),
    }
    log.info(json.dumps(fields, default=str))


def lock_subject(ctx: Context, euid: str | None) -> None:
    if not euid:
        raise ActionError("VALIDATION_ERROR", "subject_euid is required.", field="subject_euid")
    subject = load(euid=euid, tenant=ctx.tenant, lock=True)
    if subject is None:
        raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
    if subject.kind() in {WORKER} or subject.type in {"execution", "execution_queue"}:
        raise ActionError("VALIDATION_ERROR", "That object is not a work-bearing subject.",
                          subject_euid=euid)
    ctx.subject = subject
    ctx.target = subject
