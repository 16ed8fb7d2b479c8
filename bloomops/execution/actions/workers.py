"""Worker actions: register (with crash recovery), heartbeat, drain/disable/enable/retire
(RULES.md#human-workers, RULES.md#leases)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    NOTE_MAX,
    WORKER_TEXT_MAX,
    common_checks,
    int_field,
    key_list_field,
    require,
    text_field,
)
from bloomops.execution.actions.steps import (
    WORKER_CODE,
    close_lease,
    finish_record,
    lock_worker,
    record_of_lease,
)
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import ensure_controls_worker
from bloomops.execution.objects import (
    REL,
    Obj,
    children_of,
    parent_of,
    save_props,
    worker_by_key,
)
from bloomops.execution.people import (
    HUMAN_KEY_PREFIX,
    PROFILE_FIELDS,
    account_bounds,
    beyond_bounds,
    beyond_said,
    bounds_said,
    current_profile,
    human_worker_key,
    refuse_another_name,
    username_of_human_key,
    works_at_bench,
)
from bloomops.execution.policy import readable_worker
from bloomops.execution.states import (
    STOPPED_WORKER_STATUSES,
    WorkerStatus,
    WorkerType,
)
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_value
from bloomops.tapdb.templates import template_defaults

WORKER_FIELDS = ("display_name", "build_version", "host", "process_identity")
# A SERVICE or INSTRUMENT_ADAPTER worker's key (a human's is human://<username>, derived).
# ASCII spaces around it are trimmed; nothing else (Python's strip() would also take the
# separator controls \x1c-\x1f and \x85 away unseen).
WORKER_KEY = re.compile(r"[ \t\n\r]*[!-~]+[ \t\n\r]*")


def _refuse_past_the_limit(ctx: Context) -> None:
    """A new worker of an account that has BLOOMOPS_MAX_WORKERS_PER_ACCOUNT workers not
    retired is refused: one service token registered 1,200 and every read of workers, the
    statistics and /metrics slowed with them. Counted under the account's lock, so
    registrations at once cannot pass the limit together."""
    owner = ctx.actor.username
    sql_execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{ctx.tenant}|owner|{owner}"])
    held = fetch_value(
        "SELECT count(*) FROM generic_instance WHERE tenant_id = %s AND NOT is_deleted"
        " AND type = 'system' AND subtype = 'worker'"
        " AND json_addl->'properties'->>'owner_username' = %s"
        " AND json_addl->'properties'->>'status' IS DISTINCT FROM %s",
        [ctx.tenant, owner, WorkerStatus.RETIRED])
    limit = settings.BLOOMOPS_MAX_WORKERS_PER_ACCOUNT
    if held >= limit:
        raise ActionError("WORKER_LIMIT_REACHED", f"{owner} has {held} workers not retired,"
                          f" as many as one account may register ({limit}): retire those no"
                          " longer used.", limit=limit)


def refuse_beyond_bounds(worker: dict, owner: str, bounds: dict | None, *,
                         registered: bool) -> None:
    """OUTSIDE_PROFILE when a service account's worker reaches past the account's profile
    (RULES.md#service-workers): at registration, for what it asks; at a claim, for what it
    was registered with before an admin narrowed the profile."""
    beyond = beyond_bounds(readable_worker(worker), bounds) if bounds else []
    if not beyond:
        return
    asks = beyond_said(beyond)
    when = ("This worker was registered with" if registered else "This worker asks for")
    again = " Register it again within the profile." if registered else ""
    raise ActionError("OUTSIDE_PROFILE", f"{when} {asks}, beyond what {owner}'s profile allows"
                      f" ({bounds_said(bounds)}).{again}", field=beyond[0][0],
                      account=owner)


class RegisterWorker(Handler):
    uses = frozenset()
    fields = ("worker_key", "worker_type", *WORKER_FIELDS, *PROFILE_FIELDS)
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        p = req.payload
        for name in WORKER_FIELDS:
            text_field(p, name, max_len=WORKER_TEXT_MAX, line=True)
        wtype = p.get("worker_type", WorkerType.SERVICE)
        if wtype not in {t.value for t in WorkerType}:
            raise ActionError("VALIDATION_ERROR", "worker_type must be SERVICE, HUMAN_SESSION"
                              " or INSTRUMENT_ADAPTER.", field="worker_type")
        roles = req.actor.roles
        if wtype == WorkerType.HUMAN_SESSION:
            self._validate_human(req)
        else:
            raw = p.get("worker_key")
            key = text_field(p, "worker_key", required=True, max_len=WORKER_TEXT_MAX,
                             line=True) or ""
            if not WORKER_KEY.fullmatch(raw if isinstance(raw, str) else key):
                raise ActionError("VALIDATION_ERROR", "worker_key is ASCII letters, digits and"
                                  " punctuation, without spaces: a letter of another script"
                                  " could read as another worker's key.", field="worker_key")
            if key.lower().startswith(HUMAN_KEY_PREFIX):
                raise ActionError("VALIDATION_ERROR", "human:// keys (in any case) belong to"
                                  " people's HUMAN_SESSION workers.", field="worker_key")
            if "admin" not in roles and "worker_service" not in roles:
                raise ActionError("FORBIDDEN", "Only service workers register SERVICE or"
                                  " INSTRUMENT_ADAPTER workers.")
        for name in ("capabilities", "site_scope", "platform_scope", "assay_scope"):
            key_list_field(p, name)
        int_field(p, "max_concurrent_leases", minimum=1, maximum=1000)
        int_field(p, "heartbeat_ttl_seconds", minimum=5, maximum=86400)

    @staticmethod
    def _validate_human(req: ActionRequest) -> None:
        """A person's worker is derived from the person; what it may do is configuration."""
        p = req.payload
        if "admin" not in req.actor.roles and "worker_human" not in req.actor.roles:
            raise ActionError("FORBIDDEN", "Only human workers register HUMAN_SESSION workers.")
        own = human_worker_key(req.actor.username)
        raw = p.get("worker_key")
        if isinstance(raw, str) and raw.strip(" \t\n\r") != raw.strip():
            # as another worker's key: only ASCII space around it is trimmed
            raise ActionError("VALIDATION_ERROR", "worker_key may hold only printable"
                              " characters on one line (no control or invisible characters).",
                              field="worker_key")
        key = text_field(p, "worker_key", max_len=WORKER_TEXT_MAX, line=True) or own
        person = username_of_human_key(key)
        if person is None:
            raise ActionError("VALIDATION_ERROR", "A HUMAN_SESSION worker's key is"
                              f" human://<username> (yours: {own}).", field="worker_key")
        if key != own and "admin" not in req.actor.roles:
            raise ActionError("FORBIDDEN", f"You may register only your own human worker ({own}).",
                              worker_key=key)
        if key != own and not works_at_bench(person):
            # an admin's worker for someone else stands for a person: one who exists, by
            # the exact username, and may work at the bench; else coverage counts a ghost
            raise ActionError("VALIDATION_ERROR", f"{key} names no person of this lab who"
                              " works at the bench (the username exactly, an active account"
                              " with the worker_human role).", field="worker_key")
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
        elif ctx.payload.get("worker_type", WorkerType.SERVICE) != WorkerType.HUMAN_SESSION:
            _refuse_past_the_limit(ctx)
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
            fields.update(current_profile(person))
            fields.update(owner_username=person, bound_username=person,
                          display_name=refuse_another_name(person, p.get("display_name")))
        else:
            for name in PROFILE_FIELDS:
                if p.get(name) is not None:
                    fields[name] = p[name]
            owner = worker.props.get("owner_username") if worker else ctx.actor.username
            bounds = account_bounds(owner or "")
            if bounds and worker is None:
                # what the request leaves out, a new worker takes from the profile
                fields.update({k: v for k, v in bounds.items() if k not in fields})
            refuse_beyond_bounds({**(worker.props if worker else {}), **fields}, owner or "",
                                 bounds, registered=False)
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
            close_lease(ctx, lease, "ABANDONED", reason)
            finish_record(ctx, record_of_lease(lease), "CANCELED", error_message=reason)
            abandoned.append(lease.euid)
            # recorded in the subject's history too: its evidence explains the ended lease
            subject = parent_of(lease.uid, REL["subject_lease"], tenant=ctx.tenant)
            if subject is not None:
                ctx.related_uids.append(subject.uid)
        return abandoned


class HeartbeatWorker(Handler):
    uses = frozenset({"worker_euid"})
    fields = ("status", *WORKER_FIELDS, "last_error_class")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "worker_euid")
        for name in WORKER_FIELDS:  # as registration checks them
            text_field(req.payload, name, max_len=WORKER_TEXT_MAX, line=True)
        text_field(req.payload, "last_error_class", max_len=WORKER_TEXT_MAX, line=True)
        status = req.payload.get("status")
        if status is not None and status not in (WorkerStatus.ONLINE, WorkerStatus.OFFLINE,
                                                 WorkerStatus.DRAINING):
            raise ActionError("VALIDATION_ERROR", "A worker may report ONLINE, OFFLINE or"
                              " DRAINING.", field="status")

    def prepare(self, ctx: Context) -> None:
        ctx.target = lock_worker(ctx, ctx.request.worker_euid)

    def run(self, ctx: Context) -> None:
        worker = ctx.worker
        assert worker is not None
        props = dict(worker.props)
        props["heartbeat_at"] = ctx.now_ts
        person = username_of_human_key(worker.props.get("worker_key") or "")
        human = worker.props.get("worker_type") == WorkerType.HUMAN_SESSION and person
        if human:
            # Configuration changes reach a person's worker the next time they act, a new
            # name of theirs too.
            props.update(current_profile(person),
                         display_name=refuse_another_name(person, ctx.payload.get("display_name")))
        for name in WORKER_FIELDS:
            if human and name == "display_name":
                continue
            value = text_field(ctx.payload, name, max_len=WORKER_TEXT_MAX, line=True)
            if value:
                props[name] = value
        if ctx.payload.get("last_error_class"):
            props.update(last_error_class=ctx.payload["last_error_class"],
                         last_error_at=ctx.now_ts)
        reported = ctx.payload.get("status")
        current = props.get("status")
        if current not in STOPPED_WORKER_STATUSES:
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
    uses = frozenset({"worker_euid"})
    changes_statistics = True
    fields = ("operation", "reason")
    guards_subject = False
    OPERATIONS = {"drain", "disable", "enable", "retire"}
    # Taking a worker out of service says why (the worker's owner and the audit read it);
    # enabling puts it back as it was and needs none.
    NEEDS_REASON = ("disable", "drain", "retire")

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "worker_euid")
        if req.payload.get("operation") not in self.OPERATIONS:
            raise ActionError("VALIDATION_ERROR", "operation must be drain, disable, enable or"
                              " retire.", field="operation")
        text_field(req.payload, "reason", max_len=NOTE_MAX,
                   required=req.payload["operation"] in self.NEEDS_REASON)

    def prepare(self, ctx: Context) -> None:
        ctx.target = lock_worker(ctx, ctx.request.worker_euid)

    def run(self, ctx: Context) -> None:
        worker = ctx.worker
        assert worker is not None
        props = dict(worker.props)
        op = ctx.payload["operation"]
        reason = (ctx.payload.get("reason") or "").strip() or None
        if op == "drain":
            props.update(drain_requested=True, status=WorkerStatus.DRAINING,
                         drain_reason=reason)
        elif op == "disable":
            props.update(status=WorkerStatus.DISABLED, disabled_reason=reason)
        elif op == "retire":
            props.update(status=WorkerStatus.RETIRED, disabled_reason=reason)
        else:
            props.update(status=WorkerStatus.ONLINE, drain_requested=False, disabled_reason=None,
                         drain_reason=None)
        props["revision"] = int(props.get("revision") or 0) + 1
        save_props(worker, props)
        ctx.result.update(worker_euid=worker.euid, status=props["status"])
