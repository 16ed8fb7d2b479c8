"""The action handlers (spec 000 section 7.1). Only the executor calls them.

A handler has three steps: ``validate`` (request shape, no database), ``prepare`` (load and
lock the objects, in the order subject -> worker -> lease) and ``run`` (envelope change, new
objects, lineage, the result). Guards common to all actions live in the executor.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from bloomops.execution import selectors
from bloomops.execution.envelope import ts
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, Context, ensure_controls_worker, lock_subject
from bloomops.execution.objects import (
    HOLD,
    LEASE,
    QUEUE,
    REL,
    WORKER,
    Obj,
    children_of,
    is_kind,
    load,
    parent_of,
    save_props,
    worker_by_key,
)
from bloomops.execution.people import (
    PROFILE_FIELDS,
    human_profile,
    human_worker_key,
    username_of_human_key,
)
from bloomops.execution.policy import (
    classify_failure,
    eligibility_problems,
    retry_at,
    worker_status_problem,
)
from bloomops.execution.sql import (
    ENV,
    HAS_ENVELOPE,
    LINEAGE_BLOCKED,
    ORDER_BY,
    QP,
    QUEUES,
    TEMPLATES,
    VISIBLE,
)
from bloomops.execution.states import (
    TERMINAL_STATES,
    RetryClass,
    WorkerStatus,
    WorkerType,
    parse_priority,
)
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_all, fetch_one
from bloomops.tapdb.templates import TemplateRef, all_templates, template, template_defaults

LEASE_CODE = "data/execution/queue_lease/1.0"
RECORD_CODE = "data/execution/execution_record/1.0"
HOLD_CODE = "data/execution/hold/1.0"
DEAD_LETTER_CODE = "data/execution/dead_letter/1.0"
WORKER_CODE = "actor/system/worker/1.0"


# ---------------------------------------------------------------- request field helpers


def _text(payload: dict, name: str, *, required: bool = False, max_len: int = 2000) -> str | None:
    value = payload.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ActionError("VALIDATION_ERROR", f"{name} is required.", field=name)
        return None
    if not isinstance(value, str):
        raise ActionError("VALIDATION_ERROR", f"{name} must be text.", field=name)
    if len(value) > max_len:
        raise ActionError("VALIDATION_ERROR", f"{name} is too long ({max_len} max).", field=name)
    return value.strip()


def _str_list(payload: dict, name: str) -> list[str] | None:
    value = payload.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ActionError("VALIDATION_ERROR", f"{name} must be a list of text.", field=name)
    return list(value)


def _int(payload: dict, name: str, *, minimum: int, maximum: int) -> int | None:
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ActionError("VALIDATION_ERROR", f"{name} must be an integer from {minimum} to"
                          f" {maximum}.", field=name)
    return value


def _obj(payload: dict, name: str) -> dict | None:
    value = payload.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ActionError("VALIDATION_ERROR", f"{name} must be an object.", field=name)
    return value


def _require(req: ActionRequest, *names: str) -> None:
    for name in names:
        if not getattr(req, name):
            raise ActionError("VALIDATION_ERROR", f"{name} is required.", field=name)


def _state(value: str | None, name: str = "expected_state") -> None:
    from bloomops.execution.states import ALL_STATES

    if value is not None and value not in ALL_STATES:
        raise ActionError("VALIDATION_ERROR", f"{name} must be one of {', '.join(ALL_STATES)}.",
                          field=name)


def _common(req: ActionRequest) -> None:
    _state(req.expected_state)
    if req.expected_revision is not None and (
        isinstance(req.expected_revision, bool) or not isinstance(req.expected_revision, int)
    ):
        raise ActionError("VALIDATION_ERROR", "expected_revision must be an integer.",
                          field="expected_revision")
    if not isinstance(req.payload, dict):
        raise ActionError("VALIDATION_ERROR", "payload must be an object.", field="payload")


# ---------------------------------------------------------------- shared steps


def _queue(ctx: Context, queue_key: str | None, *, required: bool = True) -> dict | None:
    if not queue_key:
        if required:
            raise ActionError("VALIDATION_ERROR", "queue_key is required.", field="queue_key")
        return None
    row = selectors.queue_config(queue_key, tenant=ctx.tenant)
    if row is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
    return row


def _lock_worker(ctx: Context, euid: str | None) -> Obj:
    if not euid:
        raise ActionError("VALIDATION_ERROR", "worker_euid is required.", field="worker_euid")
    worker = load(euid=euid, tenant=ctx.tenant, lock=True)
    if not is_kind(worker, WORKER):
        raise ActionError("NOT_FOUND", "No such worker.", worker_euid=euid)
    assert worker is not None
    ensure_controls_worker(ctx.actor, worker)
    ctx.worker = worker
    return worker


def _subject_from_request_or_lease(ctx: Context) -> None:
    euid = ctx.request.subject_euid
    if not euid and ctx.request.lease_euid:
        lease = load(euid=ctx.request.lease_euid, tenant=ctx.tenant)
        if not is_kind(lease, LEASE):
            raise ActionError("NOT_FOUND", "No such lease.", lease_euid=ctx.request.lease_euid)
        assert lease is not None
        subject = parent_of(lease.uid, REL["subject_lease"], tenant=ctx.tenant)
        euid = subject.euid if subject else None
    lock_subject(ctx, euid)


def _record_of_lease(lease: Obj) -> Obj | None:
    records = children_of(lease.uid, REL["lease_record"], lock=True)
    return records[-1] if records else None


def _close_lease(ctx: Context, lease: Obj, status: str, reason: str) -> None:
    props = dict(lease.props)
    props.update(status=status, released_at=ctx.now_ts, release_reason=reason)
    save_props(lease, props)


def _finish_record(ctx: Context, record: Obj | None, status: str, **fields: Any) -> None:
    """An execution record moves from STARTED to a terminal status exactly once (2.4)."""
    if record is None or record.props.get("status") != "STARTED":
        return
    props = dict(record.props)
    started = record.props.get("started_at")
    duration = None
    if started:
        from bloomops.execution.envelope import parse_ts

        duration = int((ctx.now - parse_ts(started)).total_seconds() * 1000)  # type: ignore[operator]
    props.update(status=status, finished_at=ctx.now_ts, duration_ms=duration,
                 end_state=ctx.env["state"] if ctx.env else None, **fields)
    save_props(record, props)
    if ctx.env is not None:  # non-authoritative cache, saved with the envelope if it changes
        ctx.env["last_execution_record_euid"] = record.euid


def _active_leases_of_subject(ctx: Context) -> list[Obj]:
    assert ctx.subject is not None
    return [
        lease for lease in children_of(ctx.subject.uid, REL["subject_lease"],
                                       where_status="ACTIVE", lock=True)
    ]


def _end_active_leases(ctx: Context, lease_status: str, record_status: str, reason: str) -> None:
    """Close every ACTIVE lease of the subject (expired or not) and its open record."""
    for lease in _active_leases_of_subject(ctx):
        _close_lease(ctx, lease, lease_status, reason)
        _finish_record(ctx, _record_of_lease(lease), record_status, error_message=reason)


def _new_record(ctx: Context, *, queue: dict | None, status: str, attempt: int,
                lease: Obj | None, extra: dict[str, Any] | None = None,
                edges_before: list[tuple[Obj, Obj, str]] | None = None) -> Obj:
    """A new execution record with its lineage (2.4); ``edges_before`` are written in the
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
        edges.append((_queue_obj(ctx, queue), record, "queue_record"))
    if ctx.worker:
        edges.append((ctx.worker, record, "worker_record"))
    if lease:
        edges.append((lease, record, "lease_record"))
    ctx.link_many(edges)
    return record


def _queue_obj(ctx: Context, queue: dict) -> Obj:
    """The queue as a lineage endpoint, from the row ``_queue`` already read."""
    return Obj(uid=queue["uid"], euid=queue["euid"], name=queue["queue_key"], template_uid=0,
               type="execution", subtype="queue", json_addl={"properties": queue["config"]},
               created_dt=None)  # type: ignore[arg-type]


def _dead_letter(ctx: Context, queue: dict | None, record: Obj | None, lease: Obj | None,
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
        "error_message": message,
        "resolution_state": "OPEN",
        "resolved_by_lookup_euid": None,
        "resolved_at": None,
    }
    dl = ctx.create(DEAD_LETTER_CODE, name=f"Dead letter {ctx.subject.euid}", properties=props)
    edges: list[tuple[Obj, Obj, str]] = [(ctx.subject, dl, "subject_dead_letter")]
    if queue:
        edges.append((_queue_obj(ctx, queue), dl, "queue_dead_letter"))
    if record:
        edges.append((record, dl, "record_dead_letter"))
    ctx.link_many(edges)
    ctx.result["dead_letter_euid"] = dl.euid
    return dl


def _resolve_dead_letters(ctx: Context, resolution: str) -> list[str]:
    assert ctx.subject is not None
    resolved = []
    for dl in children_of(ctx.subject.uid, REL["subject_dead_letter"], lock=True):
        if dl.props.get("resolution_state") != "OPEN":
            continue
        props = dict(dl.props)
        props.update(resolution_state=resolution, resolved_by_lookup_euid=ctx.actor.username,
                     resolved_at=ctx.now_ts)
        save_props(dl, props)
        resolved.append(dl.euid)
    return resolved


MAX_OUTPUTS = 50
OUTPUT_FIELDS = ("template_code", "name", "properties", "execution")
# What a produced object's envelope may say; the engine builds the rest (RULES.md#outputs).
OUTPUT_EXECUTION_FIELDS = ("state", "next_queue_key", "next_action_key", "priority", "due_at",
                           "ready_at")


def _is_engine_template(ref: TemplateRef) -> bool:
    """Queues, leases, records, holds, dead letters, workers, actions and events are the
    engine's own objects: only its actions make them, never a step's outputs."""
    return ref.semantic_category in ("actor", "action", "message") or ref.type in (
        "execution", "execution_queue")


def _output_error(i: int, message: str, code: str = "VALIDATION_ERROR") -> ActionError:
    return ActionError(code, f"outputs[{i}]: {message}", field="outputs", index=i)


def _check_output_properties(i: int, ref: TemplateRef, props: Any) -> None:
    if not isinstance(props, dict):
        raise _output_error(i, "properties must be an object.")
    declared = ref.properties
    for name, value in props.items():
        if name == "execution" or name not in declared:
            raise _output_error(i, f"{ref.code} has no property {name!r} (it has: "
                                + ", ".join(k for k in declared if k != "execution") + ").")
        default = declared[name]
        scalar = value is None or isinstance(value, str | int | float | bool)
        if isinstance(value, list):
            scalar = all(v is None or isinstance(v, str | int | float | bool) for v in value)
        if not scalar:
            raise _output_error(i, f"property {name!r} must be text, a number, true/false or"
                                " a list of those.")
        if default is not None and value is not None and (
            isinstance(default, bool) != isinstance(value, bool)
            or isinstance(default, str) != isinstance(value, str)
            or isinstance(default, list) != isinstance(value, list)
        ):
            raise _output_error(i, f"property {name!r} must be of the type the template"
                                f" declares ({type(default).__name__}).")


def _output_envelope(i: int, ex: Any, now_ts: str | None = None) -> dict[str, Any] | None:
    """The envelope the engine builds for a produced object from the few fields a step may
    set; every value checked (types, states, timestamps)."""
    from bloomops.execution.envelope import new_envelope, normalize_ts

    if ex is None:
        return None
    if not isinstance(ex, dict):
        raise _output_error(i, "execution must be an object.")
    unknown = sorted(set(ex) - set(OUTPUT_EXECUTION_FIELDS))
    if unknown:
        raise _output_error(i, "execution may only set " + ", ".join(OUTPUT_EXECUTION_FIELDS)
                            + f" (not {', '.join(unknown)}).")
    fields: dict[str, Any] = {}
    for name in ("next_queue_key", "next_action_key"):
        value = ex.get(name)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 200):
            raise _output_error(i, f"execution.{name} must be text.")
        fields[name] = value
    state = ex.get("state") or ("READY" if fields["next_queue_key"] else "PENDING")
    if state not in ("READY", "PENDING"):
        raise _output_error(i, "execution.state must be READY or PENDING.")
    if state == "READY" and not fields["next_queue_key"]:
        raise _output_error(i, "a READY output needs execution.next_queue_key.")
    fields["state"] = state
    try:
        fields["priority"] = parse_priority(ex.get("priority"))
    except ValueError as exc:
        raise _output_error(i, f"execution.{exc}.") from None
    for name in ("due_at", "ready_at"):
        value = ex.get(name)
        try:
            if value is not None and not isinstance(value, str):
                raise ValueError
            fields[name] = normalize_ts(value)
        except ValueError:
            raise _output_error(i, f"execution.{name} must be an ISO 8601 timestamp.") from None
    if fields["ready_at"] is None:
        fields["ready_at"] = now_ts
    return new_envelope(**fields)


def _validate_outputs(payload: dict) -> None:
    """Shape and template checks that need no queue; ``_create_outputs`` adds the queue's."""
    outputs = payload.get("outputs")
    if outputs is None:
        return
    if not isinstance(outputs, list):
        raise ActionError("VALIDATION_ERROR", "outputs must be a list.", field="outputs")
    if len(outputs) > MAX_OUTPUTS:
        raise ActionError("VALIDATION_ERROR", f"At most {MAX_OUTPUTS} outputs per step.",
                          field="outputs")
    templates = all_templates()
    for i, spec in enumerate(outputs):
        if not isinstance(spec, dict):
            raise _output_error(i, "must be an object.")
        unknown = sorted(set(spec) - set(OUTPUT_FIELDS))
        if unknown:
            raise _output_error(i, "unknown field(s) " + ", ".join(unknown) + ".")
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 300:
            raise _output_error(i, "needs a name (text, 300 characters max).")
        code = spec.get("template_code")
        ref = templates.get(code) if isinstance(code, str) else None
        if ref is None:
            raise _output_error(i, f"unknown template {str(code)[:100]!r}.")
        if _is_engine_template(ref):
            raise _output_error(i, f"{code} objects are made only by the engine's own actions.",
                                "OUTPUT_NOT_ALLOWED")
        _check_output_properties(i, ref, spec.get("properties") or {})
        _output_envelope(i, spec.get("execution"))


def _create_outputs(ctx: Context, record: Obj | None, outputs: list[dict],
                    queue: dict | None) -> list[str]:
    """Objects produced by the attempt: only of the templates the step's queue declares
    (``output_template_codes``), created in this transaction, linked from the record
    (execution_record_output) and from the subject (execution_subject_output)."""
    assert ctx.subject is not None
    allowed = (queue or {}).get("config", {}).get("output_template_codes") or []
    created = []
    for i, spec in enumerate(outputs):
        code = spec["template_code"]
        if code not in allowed:
            raise _output_error(i, f"queue {(queue or {}).get('queue_key')!r} declares no"
                                f" {code} outputs (it declares: {', '.join(allowed) or 'none'}).",
                                "OUTPUT_NOT_ALLOWED")
        props = dict(template(code).properties)
        props.pop("execution", None)
        props.update(spec.get("properties") or {})
        envelope = _output_envelope(i, spec.get("execution"), ctx.now_ts)
        if envelope is not None:
            target = _queue(ctx, envelope["next_queue_key"], required=False)
            if target is not None and code not in (target["config"].get(
                    "subject_template_codes") or []):
                raise _output_error(i, f"queue {target['queue_key']!r} does not take {code}"
                                    " subjects.", "OUTPUT_NOT_ALLOWED")
            props["execution"] = envelope
        obj = ctx.create(code, name=spec["name"].strip(), properties=props)
        edges: list[tuple[Obj, Obj, str]] = [(ctx.subject, obj, "subject_output")]
        if record is not None:
            edges.append((record, obj, "record_output"))
        ctx.link_many(edges)
        created.append(obj.euid)
    return created


# ---------------------------------------------------------------- handlers


class Handler:
    guards_subject = True
    # The payload fields this action takes; any other key is refused (RULES.md#requests).
    fields: tuple[str, ...] = ()
    # May run on a subject whose stored envelope is broken, rebuilding it (the operator's
    # way out); every other action refuses such a subject with INVALID_ENVELOPE.
    repairs_envelope = False

    def validate(self, req: ActionRequest) -> None:
        _common(req)

    def prepare(self, ctx: Context) -> None:
        lock_subject(ctx, ctx.request.subject_euid)

    def run(self, ctx: Context) -> None:  # pragma: no cover - every handler overrides
        raise NotImplementedError


WORKER_FIELDS = ("display_name", "build_version", "host", "process_identity")


class RegisterWorker(Handler):
    fields = ("worker_key", "worker_type", *WORKER_FIELDS, *PROFILE_FIELDS)
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        p = req.payload
        for name in WORKER_FIELDS:
            _text(p, name, max_len=300)
        wtype = p.get("worker_type", WorkerType.SERVICE)
        if wtype not in {t.value for t in WorkerType}:
            raise ActionError("VALIDATION_ERROR", "worker_type must be SERVICE, HUMAN_SESSION"
                              " or INSTRUMENT_ADAPTER.", field="worker_type")
        roles = req.actor.roles
        if wtype == WorkerType.HUMAN_SESSION:
            self._validate_human(req)
        else:
            key = _text(p, "worker_key", required=True, max_len=300) or ""
            if username_of_human_key(key) is not None:
                raise ActionError("VALIDATION_ERROR", "human:// keys belong to people's"
                                  " HUMAN_SESSION workers.", field="worker_key")
            if "admin" not in roles and "worker_service" not in roles:
                raise ActionError("FORBIDDEN", "Only service workers register SERVICE or"
                                  " INSTRUMENT_ADAPTER workers.")
        for name in ("capabilities", "site_scope", "platform_scope", "assay_scope"):
            _str_list(p, name)
        _int(p, "max_concurrent_leases", minimum=1, maximum=1000)
        _int(p, "heartbeat_ttl_seconds", minimum=5, maximum=86400)

    @staticmethod
    def _validate_human(req: ActionRequest) -> None:
        """A person's worker is derived from the person; what it may do is configuration."""
        p = req.payload
        if "admin" not in req.actor.roles and "worker_human" not in req.actor.roles:
            raise ActionError("FORBIDDEN", "Only human workers register HUMAN_SESSION workers.")
        own = human_worker_key(req.actor.username)
        key = _text(p, "worker_key", max_len=300) or own
        person = username_of_human_key(key)
        if person is None:
            raise ActionError("VALIDATION_ERROR", "A HUMAN_SESSION worker's key is"
                              f" human://<username> (yours: {own}).", field="worker_key")
        if key != own and "admin" not in req.actor.roles:
            raise ActionError("FORBIDDEN", f"You may register only your own human worker ({own}).",
                              worker_key=key)
        configured = sorted(n for n in PROFILE_FIELDS if p.get(n) is not None)
        if configured:
            raise ActionError("VALIDATION_ERROR", "A human worker's " + ", ".join(configured)
                              + " come from the lab's configuration, not from the request.",
                              field=configured[0])
        p["worker_key"] = key

    def prepare(self, ctx: Context) -> None:
        key = ctx.payload["worker_key"].strip()
        sql_execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{ctx.tenant}|worker|{key}"])
        worker = worker_by_key(key, tenant=ctx.tenant, lock=True)
        if worker is not None:
            ensure_controls_worker(ctx.actor, worker)
        ctx.worker = worker
        ctx.target = worker

    def run(self, ctx: Context) -> None:
        p = ctx.payload
        worker = ctx.worker
        wtype = p.get("worker_type", WorkerType.SERVICE)
        key = p["worker_key"].strip()
        person = username_of_human_key(key) if wtype == WorkerType.HUMAN_SESSION else None
        fields: dict[str, Any] = {"worker_type": wtype, "heartbeat_at": ctx.now_ts}
        for name in WORKER_FIELDS:
            if p.get(name) is not None:
                fields[name] = p[name]
        if person is not None:
            fields.update(human_profile(person, _roles_of(person)))
            fields.update(owner_username=person, bound_username=person)
        else:
            for name in PROFILE_FIELDS:
                if p.get(name) is not None:
                    fields[name] = p[name]
        if worker is None:
            props = template_defaults(WORKER_CODE)
            props.update(fields)
            props.update(worker_key=key, status=WorkerStatus.ONLINE, registered_at=ctx.now_ts)
            props.setdefault("owner_username", ctx.actor.username)
            if not props.get("display_name"):
                props["display_name"] = key
            worker = ctx.create(WORKER_CODE, name=props["display_name"], properties=props)
            ctx.worker = ctx.target = worker
            ctx.result["created"] = True
        else:
            abandoned = self._recover(ctx, worker, p.get("process_identity"))
            props = dict(worker.props)
            props.update(fields)
            if props.get("status") == WorkerStatus.OFFLINE:
                props["status"] = WorkerStatus.ONLINE
            props["revision"] = int(props.get("revision") or 0) + 1
            save_props(worker, props)
            ctx.result.update(created=False, abandoned_lease_euids=abandoned)
        ctx.result.update(worker_euid=worker.euid, status=worker.props["status"],
                          worker_key=worker.props["worker_key"])

    @staticmethod
    def _recover(ctx: Context, worker: Obj, process: str | None) -> list[str]:
        """A worker process starting again under its key ends the ACTIVE leases its previous
        process held (ABANDONED, attempt record closed) instead of leaving their subjects
        invisible until the TTL runs out (RULES.md#leases, crash recovery)."""
        previous = worker.props.get("process_identity")
        if not process or not previous or process == previous:
            return []
        abandoned = []
        for lease in children_of(worker.uid, REL["worker_lease"], where_status="ACTIVE",
                                 lock=True):
            reason = f"ABANDONED: worker restarted (was {previous})"
            _close_lease(ctx, lease, "ABANDONED", reason)
            _finish_record(ctx, _record_of_lease(lease), "CANCELED", error_message=reason)
            abandoned.append(lease.euid)
        return abandoned


def _roles_of(username: str) -> frozenset[str]:
    from django.contrib.auth import get_user_model

    from bloomops.accounts.roles import roles_of

    user = get_user_model().objects.filter(username=username).first()
    return roles_of(user) if user is not None else frozenset()


class HeartbeatWorker(Handler):
    fields = ("status", *WORKER_FIELDS, "last_error_class")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "worker_euid")
        for name in WORKER_FIELDS + ("last_error_class",):
            _text(req.payload, name, max_len=300)
        status = req.payload.get("status")
        if status is not None and status not in (WorkerStatus.ONLINE, WorkerStatus.OFFLINE,
                                                 WorkerStatus.DRAINING):
            raise ActionError("VALIDATION_ERROR", "A worker may report ONLINE, OFFLINE or"
                              " DRAINING.", field="status")

    def prepare(self, ctx: Context) -> None:
        ctx.target = _lock_worker(ctx, ctx.request.worker_euid)

    def run(self, ctx: Context) -> None:
        worker = ctx.worker
        assert worker is not None
        props = dict(worker.props)
        props["heartbeat_at"] = ctx.now_ts
        person = username_of_human_key(worker.props.get("worker_key") or "")
        if worker.props.get("worker_type") == WorkerType.HUMAN_SESSION and person:
            # Configuration changes reach a person's worker the next time they act.
            props.update(human_profile(person, _roles_of(person)))
        for name in WORKER_FIELDS:
            if ctx.payload.get(name):
                props[name] = ctx.payload[name]
        if ctx.payload.get("last_error_class"):
            props.update(last_error_class=ctx.payload["last_error_class"],
                         last_error_at=ctx.now_ts)
        reported = ctx.payload.get("status")
        current = props.get("status")
        if current not in (WorkerStatus.DISABLED, WorkerStatus.RETIRED):
            if reported:
                props["status"] = reported
            elif current == WorkerStatus.OFFLINE:
                props["status"] = WorkerStatus.ONLINE
            if props.get("drain_requested") and props["status"] == WorkerStatus.ONLINE:
                props["status"] = WorkerStatus.DRAINING
        save_props(worker, props)
        ctx.result.update(worker_euid=worker.euid, status=props["status"],
                          heartbeat_at=props["heartbeat_at"])


class SetWorkerStatus(Handler):
    fields = ("operation", "reason")
    guards_subject = False
    OPERATIONS = {"drain", "disable", "enable", "retire"}

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "worker_euid")
        if req.payload.get("operation") not in self.OPERATIONS:
            raise ActionError("VALIDATION_ERROR", "operation must be drain, disable, enable or"
                              " retire.", field="operation")
        _text(req.payload, "reason", max_len=1000)

    def prepare(self, ctx: Context) -> None:
        ctx.target = _lock_worker(ctx, ctx.request.worker_euid)

    def run(self, ctx: Context) -> None:
        worker = ctx.worker
        assert worker is not None
        props = dict(worker.props)
        op = ctx.payload["operation"]
        reason = ctx.payload.get("reason")
        if op == "drain":
            props.update(drain_requested=True, status=WorkerStatus.DRAINING)
        elif op == "disable":
            props.update(status=WorkerStatus.DISABLED, disabled_reason=reason or "disabled")
        elif op == "retire":
            props.update(status=WorkerStatus.RETIRED, disabled_reason=reason or "retired")
        else:
            props.update(status=WorkerStatus.ONLINE, drain_requested=False, disabled_reason=None)
        props["revision"] = int(props.get("revision") or 0) + 1
        save_props(worker, props)
        ctx.result.update(worker_euid=worker.euid, status=props["status"])


def _count_active_leases(ctx: Context, worker: Obj) -> int:
    row = fetch_one(
        """
        SELECT count(*) AS n FROM generic_instance_lineage l
        JOIN generic_instance x ON x.uid = l.child_instance_uid AND NOT x.is_deleted
        WHERE l.parent_instance_uid = %(w)s AND l.relationship_type = 'execution_worker_lease'
          AND NOT l.is_deleted AND x.json_addl->'properties'->>'status' = 'ACTIVE'
          AND x.json_addl->'properties'->>'expires_at' > %(now)s
        """,
        {"w": worker.uid, "now": ctx.now_ts},
        prepare="worker_active_leases",
    )
    return int(row["n"]) if row else 0


def _claim_candidate(ctx: Context, queue_key: str, exclude: list[int]) -> int | None:
    row = fetch_one(
        f"""
        SELECT s.uid FROM ({QUEUES}) q
        JOIN generic_instance s ON s.tenant_id = %(tenant)s AND {HAS_ENVELOPE}
         AND {ENV}->>'next_queue_key' = %(queue_key)s
        JOIN ({TEMPLATES}) t ON t.uid = s.template_uid
        WHERE {QP}->>'queue_key' = %(queue_key)s AND {VISIBLE}
          AND NOT (s.uid = ANY(%(exclude)s))
        ORDER BY {ORDER_BY}
        LIMIT 1
        FOR UPDATE OF s SKIP LOCKED
        """,
        {"tenant": ctx.tenant, "now": ctx.now_ts, "queue_key": queue_key, "exclude": exclude},
        prepare="claim_candidate",
    )
    return row["uid"] if row else None


class ClaimQueueItem(Handler):
    guards_subject = False
    MAX_CANDIDATES = 20

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "worker_euid")

    def prepare(self, ctx: Context) -> None:
        worker = _lock_worker(ctx, ctx.request.worker_euid)
        problem = worker_status_problem(worker.props)
        if problem:
            raise ActionError("WORKER_UNAVAILABLE", problem, worker_euid=worker.euid)
        if ctx.request.subject_euid and worker.props.get("worker_type") not in (
            WorkerType.HUMAN_SESSION,
        ) and not ctx.actor.is_admin:
            raise ActionError("FORBIDDEN", "Only human workers claim a chosen subject.")
        limit = int(worker.props.get("max_concurrent_leases") or 1)
        held = _count_active_leases(ctx, worker)
        if held >= limit:
            raise ActionError("MAX_LEASES_REACHED", f"The worker already holds {held} of"
                              f" {limit} allowed leases.", worker_euid=worker.euid)

    def _queues(self, ctx: Context) -> list[dict]:
        req = ctx.request
        if req.queue_key:
            queue = _queue(ctx, req.queue_key)
            assert queue is not None
            return [queue]
        if req.subject_euid:
            subject = load(euid=req.subject_euid, tenant=ctx.tenant)
            if subject is None:
                raise ActionError("NOT_FOUND", "No such subject.", subject_euid=req.subject_euid)
            key = subject.envelope.get("next_queue_key")
            if not key:
                raise ActionError("NOT_VISIBLE", "The subject is not routed to any queue.",
                                  subject_euid=subject.euid,
                                  reasons=[{"code": "NEXT_QUEUE_KEY_MISSING"}])
            queue = _queue(ctx, key)
            assert queue is not None
            return [queue]
        return selectors.queues(tenant=ctx.tenant)

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
                assert subject is not None
                if not selectors.is_visible(subject.uid, queue["queue_key"], now=ctx.now,
                                            tenant=ctx.tenant):
                    diag = selectors.subject_diagnostics(subject.euid, now=ctx.now,
                                                         tenant=ctx.tenant)
                    reasons = diag.reasons if diag else []
                    raise ActionError(
                        "NOT_VISIBLE",
                        "Not claimable: " + "; ".join(r.message for r in reasons)
                        if reasons else None,
                        subject_euid=subject.euid,
                        reasons=[{"code": r.code, "message": r.message} for r in reasons],
                    )
                chosen = (queue, subject.uid)
                break
            tried: list[int] = []
            for _ in range(self.MAX_CANDIDATES):
                uid = _claim_candidate(ctx, queue["queue_key"], tried)
                if uid is None:
                    break
                # FOR UPDATE re-evaluated the candidate's own columns on its newest version,
                # but the lineage NOT EXISTS ran on the statement's older snapshot. Re-read
                # the lineage in a new statement now that we hold the lock (DESIGN.md "the
                # claim trap"; spec 6.2 "re-check lineage-linked leases under lock").
                blocked = fetch_one(LINEAGE_BLOCKED, {"uid": uid, "now": ctx.now_ts},
                                    prepare="lineage_blocked")
                if blocked and not (blocked["leased"] or blocked["held"]):
                    chosen = (queue, uid)
                    break
                tried.append(uid)
            if chosen:
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
        ttl = int(cfg.get("lease_ttl_seconds") or 900)
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
        queue_obj = _queue_obj(ctx, queue)
        # The seven claim edges (11.4) in one INSERT with the record's.
        record = _new_record(ctx, queue=queue, status="STARTED", attempt=attempt, lease=lease,
                             edges_before=[(subject, lease, "subject_lease"),
                                           (worker, lease, "worker_lease"),
                                           (queue_obj, lease, "queue_lease")])
        # The subject row itself is not written: a claim changes no authoritative field (the
        # subject stays READY; the lease is the claim), its revision stays, and the claim
        # does not add a row version to every index of generic_instance.
        ctx.result.update(
            lease_euid=lease.euid, execution_record_euid=record.euid, worker_euid=worker.euid,
            queue_key=queue["queue_key"], attempt_number=attempt,
            expires_at=lease_props["expires_at"], next_action_key=ctx.env.get("next_action_key"),
            lease_token=lease_props["lease_token"],
        )


class RenewQueueLease(Handler):
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "lease_euid", "worker_euid")

    def prepare(self, ctx: Context) -> None:
        pass

    def run(self, ctx: Context) -> None:
        lease, worker = ctx.lease, ctx.worker
        assert lease is not None and worker is not None
        if worker.props.get("status") in (WorkerStatus.DISABLED, WorkerStatus.RETIRED):
            raise ActionError("WORKER_UNAVAILABLE", "A disabled worker may not renew leases.",
                              worker_euid=worker.euid)
        props = dict(lease.props)
        ttl = int(props.get("ttl_seconds") or 900)
        props.update(heartbeat_at=ctx.now_ts, expires_at=ts(ctx.now + timedelta(seconds=ttl)))
        save_props(lease, props)
        ctx.target = lease
        ctx.result.update(lease_euid=lease.euid, worker_euid=worker.euid,
                          expires_at=props["expires_at"],
                          subject_euid=props.get("subject_lookup_euid"))


class LeaseAction(Handler):
    """Actions that end the attempt of a leased subject."""

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "lease_euid", "worker_euid", "expected_state")

    def prepare(self, ctx: Context) -> None:
        _subject_from_request_or_lease(ctx)

    def queue_of_lease(self, ctx: Context) -> dict | None:
        assert ctx.lease is not None
        return selectors.queue_config(ctx.lease.props.get("queue_lookup_key") or "",
                                      tenant=ctx.tenant)


class ReleaseQueueLease(LeaseAction):
    fields = ("reason",)
    def run(self, ctx: Context) -> None:
        assert ctx.lease is not None
        reason = _text(ctx.payload, "reason", max_len=1000) or "RELEASED_BY_WORKER"
        _close_lease(ctx, ctx.lease, "RELEASED", reason)
        _finish_record(ctx, _record_of_lease(ctx.lease), "CANCELED", error_message=reason)
        ctx.result.update(lease_euid=ctx.lease.euid, worker_euid=ctx.worker.euid if ctx.worker
                          else None, queue_key=ctx.lease.props.get("queue_lookup_key"))


class CompleteQueueExecution(LeaseAction):
    fields = ("next_queue_key", "next_action_key", "result_snapshot", "outputs", "external")
    def validate(self, req: ActionRequest) -> None:
        super().validate(req)
        p = req.payload
        _text(p, "next_queue_key", max_len=200)
        _text(p, "next_action_key", max_len=200)
        _obj(p, "result_snapshot")
        _obj(p, "external")
        if p.get("external") is not None and p.get("next_queue_key"):
            raise ActionError("VALIDATION_ERROR", "A completion either waits for an external"
                              " result or routes to a next queue, not both.", field="external")
        _validate_outputs(p)

    def run(self, ctx: Context) -> None:
        lease, env = ctx.lease, ctx.env
        assert lease is not None and env is not None
        p = ctx.payload
        next_queue = _queue(ctx, p.get("next_queue_key"), required=False)
        record = _record_of_lease(lease)
        _close_lease(ctx, lease, "COMPLETED", "COMPLETED")
        external = p.get("external")
        if external is not None:
            ctx.set_env(state="WAITING_EXTERNAL", retry_at=None)
            props = dict(ctx.subject.props) if ctx.subject else {}
            # The dispatching queue answers for the callback (its declared outputs).
            props["external_dispatch"] = {**external, "dispatched_at": ctx.now_ts,
                                          "lease_euid": lease.euid,
                                          "queue_key": lease.props.get("queue_lookup_key")}
            ctx.subject.props = props  # type: ignore[union-attr]
        elif next_queue is not None:
            ctx.set_env(state="READY", next_queue_key=next_queue["queue_key"],
                        next_action_key=p.get("next_action_key")
                        or next_queue["config"].get("default_next_action_key"),
                        ready_at=ctx.now_ts, retry_at=None, attempt_count=0, terminal=False)
        else:
            ctx.set_env(state="COMPLETED", terminal=True, next_queue_key=None,
                        next_action_key=None, retry_at=None)
        ctx.set_env(queue_cache={"current_queue_key": env.get("next_queue_key"),
                                 "computed_at": ctx.now_ts})
        snapshot = dict(p.get("result_snapshot") or {})
        if external is not None:
            snapshot["external_dispatch"] = external
        _finish_record(ctx, record, "SUCCEEDED", result_snapshot=snapshot,
                       end_revision=int(env["revision"]) + 1)
        outputs = _create_outputs(ctx, record, p.get("outputs") or [], self.queue_of_lease(ctx))
        ctx.result.update(lease_euid=lease.euid, execution_record_euid=record.euid if record
                          else None, worker_euid=ctx.worker.euid if ctx.worker else None,
                          queue_key=lease.props.get("queue_lookup_key"),
                          next_queue_key=env.get("next_queue_key"), output_euids=outputs)


class FailQueueExecution(LeaseAction):
    fields = ("retryable", "error_class", "error_code", "error_message", "next_queue_key")
    def validate(self, req: ActionRequest) -> None:
        super().validate(req)
        p = req.payload
        retryable = p.get("retryable")
        if retryable is not None and not isinstance(retryable, bool):
            raise ActionError("VALIDATION_ERROR", "retryable must be true or false.",
                              field="retryable")
        error_class = p.get("error_class")
        if error_class is not None and error_class not in {c.value for c in RetryClass}:
            raise ActionError("VALIDATION_ERROR", "error_class must be one of "
                              + ", ".join(c.value for c in RetryClass) + ".", field="error_class")
        if retryable is None and error_class is None:
            raise ActionError("VALIDATION_ERROR", "Give retryable or error_class.",
                              field="error_class")
        try:
            classify_failure(retryable, error_class)
        except ValueError as exc:
            raise ActionError("VALIDATION_ERROR", str(exc), field="error_class") from None
        _text(p, "error_code", max_len=200)
        _text(p, "error_message", max_len=4000)
        _text(p, "next_queue_key", max_len=200)

    def run(self, ctx: Context) -> None:
        lease, env = ctx.lease, ctx.env
        assert lease is not None and env is not None and ctx.subject is not None
        p = ctx.payload
        cls = classify_failure(p.get("retryable"), p.get("error_class"))
        queue = self.queue_of_lease(ctx)
        cfg = queue["config"] if queue else {}
        record = _record_of_lease(lease)
        message = p.get("error_message")
        attempts = int(env.get("attempt_count") or 0) + 1
        max_attempts = int(env.get("max_attempts_override") or cfg.get("max_attempts_default")
                           or 5)
        _close_lease(ctx, lease, "RELEASED", cls.value)
        fields = {"retryable": cls in {RetryClass.TRANSIENT_SYSTEM,
                                       RetryClass.TRANSIENT_DEPENDENCY,
                                       RetryClass.TRANSIENT_CAPACITY},
                  "error_class": cls.value, "error_code": p.get("error_code"),
                  "error_message": message}
        if cls == RetryClass.OPERATOR_CANCELED:
            ctx.set_env(state="CANCELED", terminal=True, cancel_requested=True,
                        attempt_count=attempts)
            _finish_record(ctx, record, "CANCELED", **fields)
        elif cls == RetryClass.BUSINESS_RULE_HOLD:
            ctx.set_env(state="HELD", hold_state="ACTIVE", hold_reason=message or cls.value,
                        attempt_count=attempts)
            _finish_record(ctx, record, "FAILED_RETRYABLE", **fields)
            hold = _place_hold(ctx, queue, "BUSINESS_RULE_HOLD", message or "Business rule hold",
                               state_before="READY")
            ctx.result["hold_euid"] = hold.euid
        elif fields["retryable"] and attempts < max_attempts:
            next_key = p.get("next_queue_key") or (queue["queue_key"] if queue else None)
            if p.get("next_queue_key"):
                _queue(ctx, next_key)
            when = retry_at(cfg.get("retry_policy") or {}, attempts, ctx.now)
            ctx.set_env(state="FAILED_RETRYABLE", attempt_count=attempts, retry_at=ts(when),
                        next_queue_key=next_key)
            _finish_record(ctx, record, "FAILED_RETRYABLE", **fields)
            ctx.result["retry_at"] = ts(when)
        else:
            ctx.set_env(state="FAILED_TERMINAL", terminal=True, attempt_count=attempts,
                        retry_at=None)
            _finish_record(ctx, record, "FAILED_TERMINAL", **fields)
            _dead_letter(ctx, queue, record, lease, cls.value, message)
        ctx.result.update(lease_euid=lease.euid, execution_record_euid=record.euid if record
                          else None, worker_euid=ctx.worker.euid if ctx.worker else None,
                          queue_key=lease.props.get("queue_lookup_key"), attempt_count=attempts,
                          max_attempts=max_attempts, error_class=cls.value)


def _place_hold(ctx: Context, queue: dict | None, code: str, reason: str, *,
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
        edges.append((_queue_obj(ctx, queue), hold, "queue_hold"))
    if ctx.worker:
        edges.append((ctx.worker, hold, "actor_hold"))
    ctx.link_many(edges)
    return hold


class PlaceExecutionHold(Handler):
    fields = ("hold_code", "reason")
    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "subject_euid", "expected_state")
        _text(req.payload, "hold_code", max_len=100)
        _text(req.payload, "reason", required=True, max_len=2000)

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None
        # A hold must be placeable whatever the routing; only an explicit queue must exist.
        queue = _queue(ctx, ctx.request.queue_key, required=False) or selectors.queue_config(
            env.get("next_queue_key") or "", tenant=ctx.tenant)
        before = "FAILED_RETRYABLE" if env["state"] == "FAILED_RETRYABLE" else "READY"
        _end_active_leases(ctx, "CANCELED", "CANCELED", "HELD")
        reason = ctx.payload["reason"].strip()
        code = (ctx.payload.get("hold_code") or "OPERATOR_HOLD").strip()
        hold = _place_hold(ctx, queue, code, reason, state_before=before)
        ctx.set_env(state="HELD", hold_state="ACTIVE", hold_reason=reason)
        ctx.result.update(hold_euid=hold.euid, queue_key=queue["queue_key"] if queue else None)


class ReleaseExecutionHold(Handler):
    fields = ("reason",)
    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "subject_euid", "expected_state")
        _text(req.payload, "reason", max_len=2000)

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None and ctx.env is not None
        active = children_of(ctx.subject.uid, REL["subject_hold"], where_status="ACTIVE",
                             lock=True)
        if ctx.request.hold_euid:
            chosen = [h for h in active if h.euid == ctx.request.hold_euid]
            if not chosen:
                hold = load(euid=ctx.request.hold_euid, tenant=ctx.tenant)
                if not is_kind(hold, HOLD):
                    raise ActionError("NOT_FOUND", "No such hold.",
                                      hold_euid=ctx.request.hold_euid)
                raise ActionError("HOLD_NOT_ACTIVE", hold_euid=ctx.request.hold_euid)
        else:
            chosen = active
        before = "READY"
        for hold in chosen:
            props = dict(hold.props)
            before = props.get("state_before_hold") or before
            props.update(status="RELEASED", released_at=ctx.now_ts,
                         released_by_lookup_euid=ctx.actor.username,
                         release_reason=ctx.payload.get("reason"))
            save_props(hold, props)
        remaining = [h for h in active if h not in chosen]
        if not remaining:
            ctx.set_env(state="FAILED_RETRYABLE" if before == "FAILED_RETRYABLE" else "READY",
                        hold_state="NONE", hold_reason=None)
        ctx.result.update(hold_euids=[h.euid for h in chosen],
                          hold_euid=chosen[0].euid if chosen else None,
                          active_holds_remaining=len(remaining))


class RequeueSubject(Handler):
    fields = ("reason", "reset_attempts", "priority", "next_action_key")
    repairs_envelope = True
    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "subject_euid", "expected_state")
        _text(req.payload, "reason", required=True, max_len=2000)
        if req.payload.get("reset_attempts") not in (None, True, False):
            raise ActionError("VALIDATION_ERROR", "reset_attempts must be true or false.",
                              field="reset_attempts")
        if "priority" in req.payload:
            try:
                parse_priority(req.payload["priority"])
            except ValueError as exc:
                raise ActionError("VALIDATION_ERROR", str(exc), field="priority") from None

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None and ctx.subject is not None
        state = env["state"]
        key = ctx.request.queue_key or env.get("next_queue_key")
        if not key:
            for dl in children_of(ctx.subject.uid, REL["subject_dead_letter"]):
                key = dl.props.get("queue_lookup_key") or key
        queue = _queue(ctx, key)
        assert queue is not None
        was_terminal = state in TERMINAL_STATES or bool(env.get("terminal"))
        if state in ("RUNNING", "WAITING_EXTERNAL"):
            # Reconciliation of uncertain external work produces its own record (8.3).
            previous = env.get("last_execution_record_euid")
            record = _new_record(ctx, queue=queue, status="STARTED", attempt=int(
                env.get("attempt_count") or 0) + 1, lease=None)
            _finish_record(ctx, record, "CANCELED", error_message="requeued by operator: "
                           + ctx.payload["reason"])
            prev = load(euid=previous, tenant=ctx.tenant) if previous else None
            if prev is not None:
                ctx.link(record, prev, "record_supersedes")
        _end_active_leases(ctx, "ABANDONED", "CANCELED", "REQUEUED")
        changes: dict[str, Any] = dict(
            state="READY", next_queue_key=queue["queue_key"], terminal=False,
            cancel_requested=False, retry_at=None, ready_at=ctx.now_ts, hold_state="NONE",
            hold_reason=None,
            next_action_key=ctx.payload.get("next_action_key")
            or queue["config"].get("default_next_action_key") or env.get("next_action_key"))
        if ctx.payload.get("reset_attempts", was_terminal):
            changes["attempt_count"] = 0
        if "priority" in ctx.payload:
            changes["priority"] = parse_priority(ctx.payload["priority"])
        ctx.set_env(**changes)
        resolved = _resolve_dead_letters(ctx, "REQUEUED")
        ctx.result.update(queue_key=queue["queue_key"], dead_letters_resolved=resolved)


class CancelSubjectExecution(Handler):
    fields = ("reason",)
    repairs_envelope = True
    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "subject_euid", "expected_state")
        _text(req.payload, "reason", required=True, max_len=2000)

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None
        _end_active_leases(ctx, "CANCELED", "CANCELED", "CANCELED")
        # A canceled subject keeps no active hold: the hold's evidence stays, ended by the
        # cancel and saying so (RULES.md#holds).
        ended = []
        for hold in children_of(ctx.subject.uid, REL["subject_hold"], where_status="ACTIVE",
                                lock=True):
            props = dict(hold.props)
            props.update(status="RELEASED", released_at=ctx.now_ts,
                         released_by_lookup_euid=ctx.actor.username,
                         release_reason="Ended by cancel: " + ctx.payload["reason"].strip())
            save_props(hold, props)
            ended.append(hold.euid)
        ctx.set_env(state="CANCELED", terminal=True, cancel_requested=True, retry_at=None,
                    hold_state="NONE", hold_reason=None)
        resolved = _resolve_dead_letters(ctx, "CANCELED")
        ctx.result.update(dead_letters_resolved=resolved, holds_ended=ended)


class ExpireQueueLease(Handler):
    fields = ("reason",)
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _text(req.payload, "reason", max_len=1000)

    def prepare(self, ctx: Context) -> None:
        pass

    def run(self, ctx: Context) -> None:
        req = ctx.request
        if req.lease_euid:
            lease = load(euid=req.lease_euid, tenant=ctx.tenant, lock=True)
            if not is_kind(lease, LEASE):
                raise ActionError("NOT_FOUND", "No such lease.", lease_euid=req.lease_euid)
            assert lease is not None
            leases = [lease] if lease.props.get("status") == "ACTIVE" else []
            reason = ctx.payload.get("reason") or "FORCED_EXPIRY"
        else:
            rows = fetch_all(
                """
                SELECT uid FROM generic_instance
                WHERE tenant_id = %s AND NOT is_deleted AND type = 'execution'
                  AND subtype = 'queue_lease' AND json_addl->'properties'->>'status' = 'ACTIVE'
                  AND json_addl->'properties'->>'expires_at' <= %s
                ORDER BY uid FOR UPDATE SKIP LOCKED
                """,
                [ctx.tenant, ctx.now_ts],
            )
            leases = [o for o in (load(uid=r["uid"], tenant=ctx.tenant) for r in rows) if o]
            reason = "HEARTBEAT_TIMEOUT"
        if not leases:
            ctx.noop = True
            ctx.result.update(expired_lease_euids=[], expired_count=0)
            return
        for lease in leases:
            _close_lease(ctx, lease, "EXPIRED", reason)
            _finish_record(ctx, _record_of_lease(lease), "EXPIRED", error_message=reason)
            subject = parent_of(lease.uid, REL["subject_lease"], tenant=ctx.tenant)
            if subject is not None:
                ctx.related.append(subject)
        ctx.target = leases[0]
        ctx.lease = leases[0] if len(leases) == 1 else None
        ctx.result.update(expired_lease_euids=[lease.euid for lease in leases],
                          expired_count=len(leases),
                          lease_euid=leases[0].euid if len(leases) == 1 else None)


class RecordExternalResult(Handler):
    fields = ("outcome", "next_queue_key", "result_snapshot", "outputs", "error_message")
    OUTCOMES = ("READY", "COMPLETED", "FAILED_RETRYABLE", "FAILED_TERMINAL")

    def validate(self, req: ActionRequest) -> None:
        _common(req)
        _require(req, "subject_euid", "expected_state")
        outcome = req.payload.get("outcome")
        if outcome not in self.OUTCOMES:
            raise ActionError("VALIDATION_ERROR", "outcome must be one of "
                              + ", ".join(self.OUTCOMES) + ".", field="outcome")
        if outcome == "READY" and not req.payload.get("next_queue_key"):
            raise ActionError("VALIDATION_ERROR", "next_queue_key is required for READY.",
                              field="next_queue_key")
        _obj(req.payload, "result_snapshot")
        _text(req.payload, "error_message", max_len=4000)
        _validate_outputs(req.payload)

    def prepare(self, ctx: Context) -> None:
        lock_subject(ctx, ctx.request.subject_euid)
        if ctx.request.worker_euid:
            _lock_worker(ctx, ctx.request.worker_euid)

    def run(self, ctx: Context) -> None:
        env = ctx.env
        assert env is not None and ctx.subject is not None
        p = ctx.payload
        outcome = p["outcome"]
        dispatch = ctx.subject.props.get("external_dispatch") or {}
        queue = _queue(ctx, dispatch.get("queue_key") or ctx.request.queue_key, required=False)
        record = _new_record(ctx, queue=queue, status="STARTED",
                             attempt=int(env.get("attempt_count") or 0) + 1, lease=None)
        if outcome == "READY":
            next_queue = _queue(ctx, p["next_queue_key"])
            assert next_queue is not None
            ctx.set_env(state="READY", next_queue_key=next_queue["queue_key"], ready_at=ctx.now_ts,
                        next_action_key=next_queue["config"].get("default_next_action_key"),
                        retry_at=None, attempt_count=0)
            status = "SUCCEEDED"
        elif outcome == "COMPLETED":
            ctx.set_env(state="COMPLETED", terminal=True, next_queue_key=None)
            status = "SUCCEEDED"
        elif outcome == "FAILED_RETRYABLE":
            attempts = int(env.get("attempt_count") or 0) + 1
            cfg = queue["config"] if queue else {}
            ctx.set_env(state="FAILED_RETRYABLE", attempt_count=attempts,
                        retry_at=ts(retry_at(cfg.get("retry_policy") or {}, attempts, ctx.now)))
            status = "FAILED_RETRYABLE"
        else:
            ctx.set_env(state="FAILED_TERMINAL", terminal=True)
            status = "FAILED_TERMINAL"
        _finish_record(ctx, record, status, result_snapshot=p.get("result_snapshot") or {},
                       error_message=p.get("error_message"),
                       end_revision=int(env["revision"]) + 1)
        if status == "FAILED_TERMINAL":
            _dead_letter(ctx, queue, record, None, "PERMANENT_STATE", p.get("error_message"))
        outputs = _create_outputs(ctx, record, p.get("outputs") or [], queue)
        ctx.result.update(execution_record_euid=record.euid, output_euids=outputs,
                          queue_key=queue["queue_key"] if queue else None)


HANDLERS: dict[str, Handler] = {
    "register_worker": RegisterWorker(),
    "heartbeat_worker": HeartbeatWorker(),
    "set_worker_status": SetWorkerStatus(),
    "claim_queue_item": ClaimQueueItem(),
    "renew_queue_lease": RenewQueueLease(),
    "release_queue_lease": ReleaseQueueLease(),
    "complete_queue_execution": CompleteQueueExecution(),
    "fail_queue_execution": FailQueueExecution(),
    "place_execution_hold": PlaceExecutionHold(),
    "release_execution_hold": ReleaseExecutionHold(),
    "requeue_subject": RequeueSubject(),
    "cancel_subject_execution": CancelSubjectExecution(),
    "expire_queue_lease": ExpireQueueLease(),
    "record_external_result": RecordExternalResult(),
}

__all__ = ["HANDLERS", "QUEUE"]
