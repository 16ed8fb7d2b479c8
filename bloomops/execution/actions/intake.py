"""Intake: work enters a queue (RULES.md#intake). ``route_subject`` gives an existing TapDB
object (made by Bloom, another system or raw SQL) its execution envelope, or routes a PENDING
one; ``register_subject`` creates a new object of a template the queue takes and routes it."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from bloomops.execution import clock, selectors
from bloomops.execution.actions.base import Handler
from bloomops.execution.actions.fields import (
    KEY_MAX,
    NAME_MAX,
    common_checks,
    key_field,
    obj_field,
    require,
    text_field,
)
from bloomops.execution.actions.outputs import check_template_properties
from bloomops.execution.actions.steps import (
    queue_or_refuse,
    refuse_unless_in_scope,
    refuse_unless_offered,
    refuse_unless_takes,
    template_code_of,
)
from bloomops.execution.context import ActionRequest, Context, action_spec
from bloomops.execution.envelope import YEARS, new_envelope, request_ts
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import (
    check_not_applicable,
    check_payload,
    check_request_fields,
    guard_envelope,
    guard_subject,
    lock_subject,
)
from bloomops.execution.objects import full_template_code, is_engine_template, template_words
from bloomops.execution.policy import as_scoped, is_terminal, queue_templates
from bloomops.execution.states import parse_priority
from bloomops.tapdb.templates import TemplateRef, all_templates
from bloomops.tapdb.tenancy import tenant_of

# What an intake sets of the new envelope; the engine builds the rest.
ROUTING_FIELDS = ("next_action_key", "priority", "ready_at", "due_at")
# The most items one intake batch (API or manifest) runs: each is its own action, so a batch
# is bounded to what one request may reasonably take (docs/API.md, Intake).
MAX_INTAKE_ITEMS = 200


def _check_routing(payload: dict) -> None:
    key_field(payload, "next_action_key")
    try:
        parse_priority(payload.get("priority"))
    except ValueError as exc:
        raise ActionError("VALIDATION_ERROR", str(exc), field="priority") from None
    for name in ("ready_at", "due_at"):
        value = payload.get(name)
        try:
            if value is not None and not isinstance(value, str):
                raise ValueError
            request_ts(value)
        except ValueError:
            # what is wrong is as often the date (29 February 2026, 23:59:60) as the year
            raise ActionError("VALIDATION_ERROR", f"{name} must be an ISO 8601 timestamp of"
                              " a date and time that exist, such as 2026-11-25T14:05:00Z,"
                              f" within the years {YEARS[0]} to {YEARS[1]}.",
                              field=name) from None


def _target_queue(ctx: Context) -> dict:
    """The target queue, refused when it does not exist or is disabled."""
    queue = queue_or_refuse(ctx, ctx.request.queue_key, routing=True)
    assert queue is not None
    config = queue["config"]
    if config.get("enabled") is False:
        raise ActionError("QUEUE_DISABLED", queue_key=queue["queue_key"],
                          disabled_reason=config.get("disabled_reason"))
    return queue


def _routing_queue(ctx: Context, template_code: str | None) -> dict:
    """The target queue, refused when it does not exist, is disabled or does not take the
    template: a subject routed there could never be seen."""
    queue = _target_queue(ctx)
    refuse_unless_takes(queue, template_code)
    return queue


def _template_asked(ctx: Context, preferred: list[str]) -> str:
    """The request's template code in full: a short name a person writes (``specimen``), as
    the intake screen, the queue settings and apply_queues take it, first among
    ``preferred`` (the subject's own template, or the queue's)."""
    written = (ctx.payload.get("template_code") or "").strip()
    return full_template_code(written, preferred)


def _refuse_unknown_template(code: str) -> None:
    """A template code that names no subject template: which one is meant, when several
    templates share that short name (the caller's to say), else none such."""
    if said := template_words(code):
        raise ActionError("VALIDATION_ERROR", f"template_code {code[:200]!r}{said}.",
                          field="template_code", template_code=code[:200])
    raise ActionError("NOT_FOUND", f"No subject template {code[:200]!r}.",
                      field="template_code", template_code=code[:200])


def _envelope(ctx: Context, queue: dict, revision: int) -> dict[str, Any]:
    p = ctx.payload
    return new_envelope(
        state="READY", revision=revision, next_queue_key=queue["queue_key"],
        next_action_key=(p.get("next_action_key") or "").strip()
        or queue["config"].get("default_next_action_key"),
        priority=parse_priority(p.get("priority")),
        ready_at=p.get("ready_at") or ctx.now_ts, due_at=p.get("due_at"),
    )


def _route_checks(ctx: Context) -> tuple[dict, str]:
    """Whether the locked subject may enter the request's queue: its queue and template."""
    subject = ctx.subject
    assert subject is not None and ctx.env is not None
    code = template_code_of(subject)
    # a short name is the subject's own template when that is one of the name's
    claimed = _template_asked(ctx, [code] if code else [])
    if claimed and claimed not in all_templates():  # "not a nope" said of no template
        _refuse_unknown_template(claimed)
    if claimed and claimed != code:
        raise ActionError("SUBJECT_TEMPLATE_MISMATCH",
                          f"{subject.euid} is a {code or 'subject without a template'},"
                          f" not a {claimed}.",
                          subject_euid=subject.euid, template_code=code)
    if subject.props.get("execution") is not None:
        if is_terminal(ctx.env):
            raise ActionError("SUBJECT_TERMINAL", subject_euid=subject.euid,
                              current_state=ctx.env["state"])
        if ctx.env["state"] != "PENDING":
            raise ActionError("SUBJECT_ALREADY_ROUTED", subject_euid=subject.euid,
                              current_state=ctx.env["state"],
                              queue_key=ctx.env.get("next_queue_key"))
    queue = _routing_queue(ctx, code)  # refuses a subject without a template
    assert code is not None
    refuse_unless_in_scope(queue, subject.props)
    refuse_unless_offered(queue)
    return queue, code


def _register_checks(ctx: Context) -> tuple[dict, str, dict[str, Any]]:
    """Whether a new subject of the request's template and properties may enter the queue:
    its queue, template and full properties (the template's defaults, then the given)."""
    queue = _target_queue(ctx)
    code = _template_asked(ctx, queue_templates(queue["config"]))
    ref: TemplateRef | None = all_templates().get(code)
    if ref is None or is_engine_template(ref):
        _refuse_unknown_template(code)
    refuse_unless_takes(queue, code)
    given = ctx.payload.get("properties") or {}
    check_template_properties(ref, given, lambda message: ActionError(
        "VALIDATION_ERROR", f"properties: {message}", field="properties"))
    props = {k: v for k, v in ref.properties.items() if k != "execution"}
    props.update(given)
    props = as_scoped(queue["config"], props)
    refuse_unless_in_scope(queue, props)
    refuse_unless_offered(queue)
    return queue, code, props


class RouteSubject(Handler):
    uses = frozenset({"subject_euid", "queue_key", "expected_state", "expected_revision"})
    """An existing object into a queue: only one without an envelope or PENDING; a routed
    subject moves by its steps, a finished one by requeue."""

    fields = ("template_code", *ROUTING_FIELDS)

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "subject_euid", "queue_key")
        text_field(req.payload, "template_code", max_len=KEY_MAX, line=True)
        _check_routing(req.payload)

    def run(self, ctx: Context) -> None:
        assert ctx.subject is not None and ctx.env is not None
        queue, code = _route_checks(ctx)
        created = ctx.subject.props.get("execution") is None
        # A first envelope starts at revision 1 (the executor adds one to what it finds).
        env = _envelope(ctx, queue, 0 if created else int(ctx.env.get("revision") or 0))
        if not created:
            # A PENDING subject may have run before: its attempts and overrides stay its own.
            env.update({k: ctx.env.get(k) for k in (
                "attempt_count", "max_attempts_override", "last_execution_record_euid")})
        ctx.env = env
        ctx.env_changed = True
        ctx.result.update(queue_key=queue["queue_key"], template_code=code,
                          envelope_created=created)


class RegisterSubject(Handler):
    """A new object of a template the queue takes, with declared properties, routed at once:
    for labs whose objects no other system creates."""

    uses = frozenset({"queue_key"})

    fields = ("template_code", "name", "properties", *ROUTING_FIELDS)
    guards_subject = False

    def validate(self, req: ActionRequest) -> None:
        common_checks(req)
        require(req, "queue_key")
        if req.subject_euid:
            raise ActionError("VALIDATION_ERROR", "A new subject has no EUID yet; use"
                              " route_subject for an existing object.", field="subject_euid")
        text_field(req.payload, "template_code", required=True, max_len=KEY_MAX,
                   line=True)
        # a name is what people scan and find in lists: one readable line
        text_field(req.payload, "name", required=True, max_len=NAME_MAX, line=True)
        obj_field(req.payload, "properties")
        _check_routing(req.payload)

    def prepare(self, ctx: Context) -> None:
        """Nothing to lock: the subject is made by ``run``."""

    def run(self, ctx: Context) -> None:
        queue, code, props = _register_checks(ctx)
        # made at revision 0 and saved again by the executor at 1 with its seal, which names
        # the subject's EUID (given by TapDB on insert): an envelope no action had sealed was
        # rewritten unseen before its first claim
        env = _envelope(ctx, queue, 0)
        props["execution"] = dict(env)
        name = ctx.payload["name"].strip()
        subject = ctx.create(code, name=name, properties=props)
        ctx.subject, ctx.target, ctx.env = subject, subject, env
        ctx.env_changed = True
        ctx.result.update(queue_key=queue["queue_key"], template_code=code,
                          envelope_created=True)
        # allowed (another system's tubes may share names), but most often the same batch
        # sent again: the caller is told, as the manifest's preview tells a person
        others = [e for e in selectors.subjects_named([name], tenant=ctx.tenant).get(name, [])
                  if e != subject.euid]
        if others:
            ctx.result["warnings"] = [
                f"{name!r} is also the name of {', '.join(others[:3])}"
                f"{' …' if len(others) > 3 else ''}: a scan of it asks which is meant; a"
                " batch sent twice registers its tubes twice."]


def preview(req: ActionRequest) -> dict[str, Any]:
    """What ``route_subject`` or ``register_subject`` would do with this request, checked as
    the executor checks it (role, fields, payload, subject guards, the intake rules) without
    writing anything: a manifest's preview. Raises the ActionError the action would raise;
    the executor checks everything again when the action runs."""
    handler = {"route_subject": RouteSubject, "register_subject": RegisterSubject}[
        req.action_key]()
    spec = action_spec(req.action_key)
    if not req.actor.roles & spec.allowed_roles:
        raise ActionError("FORBIDDEN", f"Your role may not {spec.name.lower()}.")
    check_request_fields(req)
    check_payload(req.payload, handler.fields)
    handler.validate(req)
    check_not_applicable(req, handler.not_applicable)
    ctx = Context(request=req, spec=spec, actor=req.actor, now=clock.now(),
                  tenant=tenant_of(req.tenant))
    if isinstance(handler, RegisterSubject):
        queue, code, _ = _register_checks(ctx)
        return {"queue_key": queue["queue_key"], "template_code": code, "subject_euid": None}
    with transaction.atomic():  # the row lock of lock_subject ends here
        lock_subject(ctx, req.subject_euid)
        assert ctx.subject is not None
        ctx.env = ctx.subject.envelope
        guard_envelope(ctx, handler)
        guard_subject(ctx)
        queue, code = _route_checks(ctx)
    return {"queue_key": queue["queue_key"], "template_code": code,
            "subject_euid": ctx.subject.euid, "name": ctx.subject.name}
