"""Queue configuration (admin): create, update, enable/disable in place, replace
(RULES.md#queue-configuration). A queue object's `revision` guards every change, and each
change leaves an action record whose result says what changed (the queue's history)."""

from __future__ import annotations

from typing import Any

from bloomops.execution import selectors
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import REASON_MAX, common_checks, text_field
from bloomops.execution.actions.queue_fields import (
    IMMUTABLE_FIELDS,
    MANAGED_BY,
    MUTABLE_FIELDS,
    clean_new_queue,
    clean_settings,
    diff,
    merged_retry_policy,
    queue_key_field,
)
from bloomops.execution.actions.steps import lock_queue_key
from bloomops.execution.context import ActionRequest, Context
from bloomops.execution.errors import ActionError, Problems
from bloomops.execution.objects import QUEUE_CODE, Obj, queue_properties, retire, save_props
from bloomops.execution.policy import flow_keys, flow_warnings, open_to_every_worker
from bloomops.execution.selectors.queue_config import SUCCESSOR_REL
from bloomops.tapdb.db import fetch_one
from bloomops.tapdb.instances import link


def _reason(req: ActionRequest) -> None:
    _reason_of(req.payload)


def _reason_of(payload: dict[str, Any]) -> None:
    text_field(payload, "reason", required=True, max_len=REASON_MAX)


def _require_queue_key(req: ActionRequest) -> None:
    queue_key_field({"queue_key": req.queue_key})


def _require_revision(req: ActionRequest) -> None:
    if req.expected_revision is None:
        raise ActionError("VALIDATION_ERROR", "expected_revision (the queue's revision you"
                          " saw) is required.", field="expected_revision")


def _serialise_key(ctx: Context, queue_key: str) -> None:
    # Two creates of one key would both see it free; the advisory lock orders them.
    lock_queue_key(ctx, queue_key, shared=False)


def _hold_named_keys(ctx: Context) -> None:
    """The keys a setting sends items to (default_next_queue_key, next_queue_keys), held as
    routing holds them: a rename of one cannot commit between its check of the flows that
    name it and this change (_refuse_stranding)."""
    for key in sorted(flow_keys(ctx.payload)):
        lock_queue_key(ctx, key, shared=True)


def _queue_row(ctx: Context, queue_key: str, *, lock: bool) -> Obj | None:
    row = fetch_one(
        "SELECT uid, euid, name, template_uid, type, subtype, json_addl, created_dt"
        " FROM generic_instance WHERE tenant_id = %(tenant)s AND NOT is_deleted"
        " AND type = 'execution' AND subtype = 'queue'"
        " AND json_addl->'properties'->>'queue_key' = %(key)s"
        + (" FOR NO KEY UPDATE" if lock else ""),
        {"tenant": ctx.tenant, "key": queue_key},
    )
    return Obj(**row) if row else None


def lock_managed_queue(ctx: Context) -> Obj:
    """The request's queue, locked, after the ownership and revision guards."""
    key = ctx.request.queue_key or ""
    _serialise_key(ctx, key)
    queue = _queue_row(ctx, key, lock=True)
    if queue is None:
        raise ActionError("NOT_FOUND", f"No queue {key!r}.", queue_key=key)
    if queue.props.get("managed_by") != MANAGED_BY:
        raise ActionError("QUEUE_NOT_MANAGED", queue_key=key,
                          managed_by=queue.props.get("managed_by"))
    current = int(queue.props.get("revision") or 0)
    if ctx.request.expected_revision != current:
        raise ActionError("REVISION_CONFLICT", "This queue changed after you last read it"
                          " (revision differs).", queue_key=key, current_revision=current,
                          expected_revision=ctx.request.expected_revision)
    ctx.target = queue
    return queue


def _wanted_settings(current: dict[str, Any], payload: dict) -> dict[str, Any]:
    wanted = clean_settings(payload)
    if "retry_policy" in wanted:
        wanted["retry_policy"] = merged_retry_policy(current.get("retry_policy"),
                                                     wanted["retry_policy"])
    return wanted


def starting_config(fields: dict[str, Any]) -> dict[str, Any]:
    """A new queue's settings: the template's defaults with ``fields`` over them (what a plan
    judges a new queue by, as its creation will store it)."""
    props = queue_properties(**{k: v for k, v in fields.items() if k != "retry_policy"})
    if "retry_policy" in fields:
        props["retry_policy"] = merged_retry_policy(props.get("retry_policy"),
                                                    fields["retry_policy"])
    return props


def _create(ctx: Context, fields: dict[str, Any], extra: dict[str, Any]) -> Obj:
    props = starting_config(fields)
    props.update({"managed_by": MANAGED_BY, "revision": 1, "created_at": ctx.now_ts,
                  "created_by": ctx.actor.username, **extra})
    props.setdefault("strict_order", False)
    if not props.get("display_name"):
        props["display_name"] = props["queue_key"]
    return ctx.create(QUEUE_CODE, name=props["display_name"], properties=props)


def _save(ctx: Context, queue: Obj, changes: dict[str, list[Any]]) -> None:
    before, props = dict(queue.props), dict(queue.props)
    props.update({name: after for name, (_, after) in changes.items()})
    props["revision"] = int(props.get("revision") or 0) + 1
    props.update(updated_at=ctx.now_ts, updated_by=ctx.actor.username)
    save_props(queue, props)
    ctx.result.update(queue_key=props["queue_key"], queue_euid=queue.euid,
                      revision=props["revision"], changes=changes)
    if any(name in changes for name in (*FLOW_FIELDS, *OPENING_FIELDS)):
        _warn_of_flow(ctx, props, before)


# What a queue's flow is made of: where its completions go, and what they may carry there.
FLOW_FIELDS = ("default_next_queue_key", "next_queue_keys", "subject_template_codes",
               "output_template_codes")
# ... and who may take its items
OPENING_FIELDS = ("required_worker_capabilities", "manual_only")


OPEN_QUEUE_SAID = ("It asks for no capability and is not manual-only: every worker may take"
                   " its items, service and instrument workers included (one without a"
                   " handler for its step gives the item back and stops). Name the"
                   " capabilities its work needs (required_worker_capabilities), or make it"
                   " manual_only for people.")


def open_queue_warning(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """A queue opened to every worker, by its creation (``before`` None) or a change: said
    to an API caller and in a plan, as the console's new-queue form asks it explicitly (a
    file's queue without capabilities stopped the lab's robots one by one)."""
    if open_to_every_worker(after) and (before is None or not open_to_every_worker(before)):
        return [OPEN_QUEUE_SAID]
    return []


def _warn_of_flow(ctx: Context, props: dict[str, Any],
                  before: dict[str, Any] | None = None) -> None:
    """The console's preview says what is allowed in a flow but most often a mistake (a next
    queue no one has made, a queue open to every worker); an API caller is told it in the
    result (``warnings``). ``before``: the settings changed, None for a new queue."""
    configs = {q["queue_key"]: q["config"] for q in selectors.queues(tenant=ctx.tenant)}
    if said := [*flow_warnings(props["queue_key"], props, configs),
                *open_queue_warning(before, props)]:
        ctx.result["warnings"] = said


def _new_queue(req: ActionRequest, key: str | None) -> dict[str, Any]:
    return clean_new_queue({**req.payload, "queue_key": key})


def new_queue_problems(payload: dict[str, Any], key: str | None, problems: Problems) -> None:
    """Every refusal of a new queue's request, gathered: its reason with its fields (a blank
    form was told its reason was missing only once the fields were put right)."""
    with problems.field():
        _reason_of(payload)
    with problems.field():
        clean_new_queue({**payload, "queue_key": key})


# What a new queue's record says it started with.
STARTING_FIELDS = (*IMMUTABLE_FIELDS, *MUTABLE_FIELDS, "enabled")


class CreateQueue(Handler):
    # a queue's action acts on no subject, worker, lease or hold
    uses = frozenset({"queue_key"})
    changes_statistics = True
    # The key is the request envelope's queue_key.
    fields = ("subject_template_codes", *MUTABLE_FIELDS, "reason")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        problems = Problems()
        new_queue_problems(req.payload, req.queue_key, problems)
        problems.raise_any()

    def prepare(self, ctx: Context) -> None:
        key = ctx.request.queue_key or ""
        _serialise_key(ctx, key)
        if _queue_row(ctx, key, lock=False) is not None:
            raise ActionError("QUEUE_EXISTS", queue_key=key)
        _hold_named_keys(ctx)

    def run(self, ctx: Context) -> None:
        fields = _new_queue(ctx.request, ctx.request.queue_key)
        queue = _create(ctx, fields, {})
        ctx.target = queue
        # Every setting the queue starts with, the template's defaults included: its history
        # is then read from its records alone (a default may change with a later release).
        started = {k: queue.props.get(k) for k in STARTING_FIELDS}
        ctx.result.update(queue_key=fields["queue_key"], queue_euid=queue.euid, revision=1,
                          created=True, changes={k: [None, v] for k, v in started.items()})
        _warn_of_flow(ctx, queue.props)


class UpdateQueue(Handler):
    # a queue's action acts on no subject, worker, lease or hold
    uses = frozenset({"queue_key", "expected_revision"})
    changes_statistics = True
    # The immutable fields are accepted only to be refused with REPLACEMENT_REQUIRED when they
    # differ: a client that tries gets the way forward, not "unknown field".
    fields = (*MUTABLE_FIELDS, "subject_template_codes", "new_queue_key", "reason")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        _require_queue_key(req)
        _require_revision(req)
        _reason(req)
        clean_settings(req.payload)
        new_key = req.payload.get("new_queue_key")
        if new_key is not None and new_key != req.queue_key:
            raise ActionError("REPLACEMENT_REQUIRED", "queue_key is fixed for a queue's life;"
                              " replace_queue retires this queue and creates its successor.",
                              field="new_queue_key", use="replace_queue")

    def prepare(self, ctx: Context) -> None:
        _hold_named_keys(ctx)
        lock_managed_queue(ctx)

    def run(self, ctx: Context) -> None:
        queue = ctx.target
        assert queue is not None
        codes = ctx.payload.get("subject_template_codes")
        if codes is not None and codes != queue.props.get("subject_template_codes"):
            raise ActionError("REPLACEMENT_REQUIRED", "subject_template_codes are fixed for a"
                              " queue's life; replace_queue retires this queue and creates its"
                              " successor.", field="subject_template_codes", use="replace_queue")
        changes = diff(queue.props, _wanted_settings(queue.props, ctx.payload))
        if not changes:
            raise ActionError("VALIDATION_ERROR", "Nothing to change: every field given has"
                              " that value already.", queue_key=ctx.request.queue_key)
        _save(ctx, queue, changes)


class SetQueueEnabled(Handler):
    # a queue's action acts on no subject, worker, lease or hold
    uses = frozenset({"queue_key", "expected_revision"})
    changes_statistics = True
    fields = ("enabled", "reason")
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        _require_queue_key(req)
        _require_revision(req)
        _reason(req)
        if not isinstance(req.payload.get("enabled"), bool):
            raise ActionError("VALIDATION_ERROR", "enabled must be true or false.",
                              field="enabled")

    def prepare(self, ctx: Context) -> None:
        lock_managed_queue(ctx)

    def run(self, ctx: Context) -> None:
        queue = ctx.target
        assert queue is not None
        enabled = ctx.payload["enabled"]
        wanted = {"enabled": enabled,
                  "disabled_reason": None if enabled else ctx.payload["reason"].strip()}
        changes = diff(queue.props, wanted)
        if "enabled" not in changes:
            raise ActionError("VALIDATION_ERROR", "The queue is already "
                              + ("enabled." if enabled else "disabled."), field="enabled")
        _save(ctx, queue, changes)


def _refuse_stranding(ctx: Context, old_key: str | None, new_key: str,
                      successor: dict[str, Any]) -> None:
    """A new key leaves the items routed to the old one, and the queues sending items there,
    pointing at no queue (RULES.md#queue-configuration): refused, with how many."""
    if not old_key or old_key == new_key:
        return
    routed = selectors.routed_count(old_key, tenant=ctx.tenant)
    # every queue's flow as it would be: the successor's own (which may name its old key)
    # in place of the retired one's
    flows = {q["queue_key"]: q["config"] or {} for q in selectors.queues(tenant=ctx.tenant)
             if q["queue_key"] != old_key} | {new_key: successor}
    senders = sorted(key for key, cfg in flows.items() if old_key in flow_keys(cfg))
    said = []
    if routed:
        said.append(f"{routed} item{'s are' if routed != 1 else ' is'} routed to {old_key}")
    if senders:
        said.append(f"queue{'s' if len(senders) > 1 else ''} {', '.join(senders)}"
                    f" send{'' if len(senders) > 1 else 's'} items to it")
    if said:
        raise ActionError("QUEUE_IN_USE", "; ".join(said) + ": a new key would strand them."
                          " Keep the key, or route them on (and change those queues) first.",
                          queue_key=old_key, routed=routed, sent_from=senders)


class ReplaceQueue(Handler):
    """Retire a queue object and create its successor in one transaction. The old object
    stays in TapDB (soft-deleted, so its key is free and no read serves it), with its leases,
    records, holds and action records, linked to the successor by lineage."""

    # a queue's action acts on no subject, worker, lease or hold
    uses = frozenset({"queue_key", "expected_revision"})
    changes_statistics = True

    # queue_key names the queue replaced; new_queue_key the successor's key (default: same).
    fields = ("new_queue_key", "subject_template_codes", *MUTABLE_FIELDS, "reason")
    guards_subject = False

    @staticmethod
    def _new_key(req: ActionRequest) -> str | None:
        return req.payload.get("new_queue_key") or req.queue_key

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        _require_queue_key(req)
        _require_revision(req)
        _reason(req)
        queue_key_field(req.payload, "new_queue_key", required=False)
        _new_queue(req, self._new_key(req))

    def prepare(self, ctx: Context) -> None:
        new_key = self._new_key(ctx.request) or ""
        if new_key != ctx.request.queue_key:
            # the old key too: nothing may be sent to it between the count of what is routed
            # there and the commit (_refuse_stranding); in one order, so that A->B and B->A
            # at once wait rather than deadlock
            for key in sorted({ctx.request.queue_key or "", new_key}):
                _serialise_key(ctx, key)
            if _queue_row(ctx, new_key, lock=False) is not None:
                raise ActionError("QUEUE_EXISTS", queue_key=new_key)
        lock_managed_queue(ctx)

    def run(self, ctx: Context) -> None:
        old = ctx.target
        assert old is not None
        # The successor keeps every setting of its predecessor the request does not change.
        inherited = {k: old.props[k] for k in MUTABLE_FIELDS if k in old.props}
        fields = {**inherited, **_new_queue(ctx.request, self._new_key(ctx.request))}
        if "retry_policy" in ctx.payload:
            fields["retry_policy"] = merged_retry_policy(old.props.get("retry_policy"),
                                                         fields["retry_policy"])
        before = dict(old.props)
        changes = diff({k: before.get(k) for k in fields}, fields)
        if not changes:
            raise ActionError("VALIDATION_ERROR", "Nothing would change: the same key, the same"
                              " templates and settings.", field="subject_template_codes")
        _refuse_stranding(ctx, before.get("queue_key"), fields["queue_key"], fields)
        # The successor's revision goes on from its predecessor's: a page shown before the
        # replacement is stale (REVISION_CONFLICT), not taken as the successor's first.
        revision = int(before.get("revision") or 0) + 1
        # Retired first: the successor may take the same key (one live queue per key).
        retire(old)
        new = _create(ctx, fields, {
            "replaces_euid": old.euid, "replaces_queue_key": before.get("queue_key"),
            "enabled": before.get("enabled", True), "revision": revision,
            "disabled_reason": before.get("disabled_reason")})
        save_props(old, {**before, "enabled": False, "retired_at": ctx.now_ts,
                         "retired_by": ctx.actor.username, "replaced_by_euid": new.euid,
                         "disabled_reason": "Replaced: " + ctx.payload["reason"].strip(),
                         "revision": int(before.get("revision") or 0) + 1})
        link(old.uid, new.uid, SUCCESSOR_REL, tenant_id=ctx.tenant)
        ctx.related_uids.append(new.uid)
        ctx.result.update(
            queue_key=fields["queue_key"], queue_euid=new.euid, revision=revision,
            retired_queue_euid=old.euid, retired_queue_key=before.get("queue_key"),
            changes=changes)
        _warn_of_flow(ctx, new.props, before)
