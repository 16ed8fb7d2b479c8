"""What a step may produce (RULES.md#outputs): only objects of the templates its queue
declares, with properties the template declares and an envelope the engine builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bloomops.execution.actions.fields import NAME_MAX, key_problem, text_field
from bloomops.execution.actions.steps import (
    queue_or_refuse,
    refuse_unless_flow_allows,
    refuse_unless_in_scope,
    refuse_unless_offered,
)
from bloomops.execution.chain import ENVELOPE_SEAL, envelope_seal
from bloomops.execution.context import Context
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import (
    Obj,
    full_template_code,
    is_engine_template,
    is_subject,
    load,
    repeated_names,
    save_props,
    template_words,
)
from bloomops.execution.policy import OUTPUTS, as_scoped, queue_templates, takes_template
from bloomops.execution.sql import SCOPE_FIELDS
from bloomops.execution.states import (
    parse_priority,
)
from bloomops.tapdb.templates import TemplateRef, all_templates, template
from bloomops.tapdb.tenancy import tenant_of
from bloomops.text import line_problem, prose_problem

MAX_OUTPUTS = 50
OUTPUT_FIELDS = ("template_code", "name", "properties", "execution")
# What a produced object's envelope may say; the engine builds the rest (RULES.md#outputs).
OUTPUT_EXECUTION_FIELDS = ("state", "next_queue_key", "next_action_key", "priority", "due_at",
                           "ready_at")


def output_template(spec: dict, preferred: list[str] | None = None) -> Any:
    """An output's template code in full (a short name a person writes, ``library``, as the
    queue settings take it; first among ``preferred``, the step's queue's output templates);
    anything else as given, for the check to refuse."""
    code = spec.get("template_code")
    return full_template_code(code.strip(), preferred or []) if isinstance(code, str) \
        else code


def _output_error(i: int, message: str, code: str = "VALIDATION_ERROR") -> ActionError:
    return ActionError(code, f"outputs[{i}]: {message}", field="outputs", index=i)


def _check_output_properties(i: int, ref: TemplateRef, props: Any) -> None:
    check_template_properties(ref, props, lambda message: _output_error(i, message))


def check_template_properties(ref: TemplateRef, props: Any,
                              error: Callable[[str], ActionError]) -> None:
    """Properties of a new object must be ones its template declares, of the declared type
    (RULES.md#outputs); ``error`` makes the refusal, worded for where the object comes from."""
    if not isinstance(props, dict):
        raise error("properties must be an object.")
    declared = ref.properties
    for name, value in props.items():
        if name == "execution" or name not in declared:
            raise error(f"{ref.code} has no property {name!r} (it has: "
                        + ", ".join(k for k in declared if k != "execution") + ").")
        default = declared[name]
        scalar = value is None or isinstance(value, str | int | float | bool)
        if isinstance(value, list):
            scalar = all(v is None or isinstance(v, str | int | float | bool) for v in value)
        if not scalar:
            raise error(f"property {name!r} must be text, a number, true/false or"
                        " a list of those.")
        if default is not None and value is not None and (
            isinstance(default, bool) != isinstance(value, bool)
            or isinstance(default, str) != isinstance(value, str)
            or isinstance(default, list) != isinstance(value, list)
        ):
            raise error(f"property {name!r} must be of the type the template"
                        f" declares ({type(default).__name__}).")
        # values matched exactly (a queue's scopes) or followed (provenance): one readable
        # line of text, and a subject that exists. A list, a number or a blank was stored as
        # sent, with its control characters, and matched no scope ever.
        if name in MATCHED_PROPERTIES and value is not None:
            if not isinstance(value, str) or not value.strip():
                raise error(f"property {name!r} must be one line of text (leave it out for"
                            " none).")
            if problem := line_problem(value):
                raise error(f"property {name!r} {problem}.")
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and (problem := prose_problem(text)):
                raise error(f"property {name!r} {problem}.")
        if name == PROVENANCE and value is not None and not _names_a_subject(value):
            raise error(f"property {name!r} must name a subject of this lab (it names"
                        f" {str(value)[:60]!r}).")


def _output_envelope(i: int, ex: Any, now_ts: str | None = None) -> dict[str, Any] | None:
    """The envelope the engine builds for a produced object from the few fields a step may
    set; every value checked (types, states, timestamps)."""
    from bloomops.execution.envelope import YEARS, new_envelope, request_ts

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
        problem = key_problem(value) if value is not None else None
        if problem:
            raise _output_error(i, f"execution.{name} {problem}.")
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
            fields[name] = request_ts(value)
        except ValueError:
            raise _output_error(i, f"execution.{name} must be an ISO 8601 timestamp within"
                                f" the years {YEARS[0]} to {YEARS[1]}.") from None
    if fields["ready_at"] is None:
        fields["ready_at"] = now_ts
    return new_envelope(**fields)


def validate_outputs(payload: dict) -> None:
    """Shape and template checks that need no queue; ``create_outputs`` adds the queue's."""
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
        try:  # read at the bench and in lists as a registered subject's name is
            text_field(spec, "name", required=True, max_len=NAME_MAX, line=True)
        except ActionError as err:
            raise _output_error(i, err.message) from None
        code = output_template(spec)
        ref = templates.get(code) if isinstance(code, str) else None
        if ref is None and isinstance(code, str) and template_words(code):
            continue  # a name several templates share: the queue's own decides (create)
        if ref is None:
            raise _output_error(i, f"unknown template {str(code)[:100]!r}.")
        if is_engine_template(ref):
            raise _output_error(i, f"{code} objects are made only by the engine's own actions.",
                                "OUTPUT_NOT_ALLOWED")
        _check_output_properties(i, ref, spec.get("properties") or {})
        _output_envelope(i, spec.get("execution"))
    for i, earlier in repeated_names([spec["name"] for spec in outputs]).items():
        raise _output_error(i, f"outputs[{earlier}] gives the name {outputs[i]['name'].strip()!r}"
                            " too: two new objects of one name are told apart only by EUID.")


def create_outputs(ctx: Context, record: Obj | None, outputs: list[dict],
                    queue: dict | None) -> list[str]:
    """Objects produced by the attempt: only of the templates the step's queue declares
    (``output_template_codes``), created in this transaction, linked from the record
    (execution_record_output) and from the subject (execution_subject_output)."""
    assert ctx.subject is not None
    allowed = queue_templates((queue or {}).get("config") or {}, OUTPUTS)
    created = []
    for i, spec in enumerate(outputs):
        code = output_template(spec, allowed)
        if code not in all_templates():  # a shared short name none of the queue's has
            raise _output_error(i, f"unknown template {str(code)[:100]!r}"
                                f"{template_words(code)}.")
        if code not in allowed:
            raise _output_error(i, f"queue {(queue or {}).get('queue_key')!r} declares no"
                                f" {code} outputs (it declares: {', '.join(allowed) or 'none'}).",
                                "OUTPUT_NOT_ALLOWED")
        if output_template(spec) != code:  # a shared short name: validate could not check
            _check_output_properties(i, template(code), spec.get("properties") or {})
        props = dict(template(code).properties)
        props.pop("execution", None)
        props.update(spec.get("properties") or {})
        derived = props.get(PROVENANCE)
        if derived is not None and derived != ctx.subject.euid:
            # the subject_output edge says where it came from; the property may only agree
            raise _output_error(i, f"{PROVENANCE} names {derived}, but it is made from"
                                f" {ctx.subject.euid}: leave it out, or name that subject.")
        envelope = _output_envelope(i, spec.get("execution"), ctx.now_ts)
        if envelope is not None:
            target = queue_or_refuse(ctx, envelope["next_queue_key"], required=False,
                                     routing=True)
            if target is not None and not takes_template(target["config"], code):
                raise _output_error(i, f"queue {target['queue_key']!r} does not take {code}"
                                    " subjects.", "OUTPUT_NOT_ALLOWED")
            if target is not None:
                props = as_scoped(target["config"], props)
                try:
                    refuse_unless_in_scope(target, props)
                    if envelope["state"] == "READY":
                        refuse_unless_offered(target)
                    # what a step makes goes where its flow lets the finished item go
                    refuse_unless_flow_allows(queue, target)
                except ActionError as err:
                    raise ActionError(err.code, f"outputs[{i}]: {err.message}",
                                      **{**err.details, "field": "outputs", "index": i}) from None
            props["execution"] = envelope
        obj = ctx.create(code, name=spec["name"].strip(), properties=props)
        edges: list[tuple[Obj, Obj, str]] = [(ctx.subject, obj, "subject_output")]
        if record is not None:
            edges.append((record, obj, "record_output"))
        ctx.link_many(edges)
        if envelope is not None:
            _seal_output(ctx, obj, props)
        created.append(obj.euid)
    return created


def _seal_output(ctx: Context, obj: Obj, props: dict[str, Any]) -> None:
    """An output's envelope sealed as the executor seals one it writes, the seal kept in
    the action's record (``result.output_seals``) and the record in the output's history:
    an output's envelope was rewritten unseen until its first action (RULES.md#evidence)."""
    env = props["execution"]
    env[ENVELOPE_SEAL] = envelope_seal(ctx.tenant, obj.euid, env)
    save_props(obj, props)
    ctx.result.setdefault("output_seals", {})[obj.euid] = env[ENVELOPE_SEAL]
    ctx.related_uids.append(obj.uid)


# What an output made for the next queue takes over from its subject, where the output's
# template declares it: the scopes a queue selects on, so that it is visible where its
# subject was (RULES.md#outputs).
CARRIED_PROPERTIES = SCOPE_FIELDS
# The subject an object was made from (RULES.md#outputs).
PROVENANCE = "derived_from_euid"
MATCHED_PROPERTIES = (*SCOPE_FIELDS, PROVENANCE)


def _names_a_subject(value: Any) -> bool:
    if not isinstance(value, str) or line_problem(value) or not 0 < len(value) <= 200:
        return False
    found = load(euid=value, tenant=tenant_of())
    return found is not None and is_subject(found)


def carried_properties(template_code: str, subject_props: dict, subject_euid: str) -> dict:
    """What an output of ``template_code`` takes over from its subject: the scope properties
    and ``derived_from_euid``, those its template declares."""
    declared = template(template_code).properties
    carried = {k: subject_props.get(k) for k in CARRIED_PROPERTIES}
    carried[PROVENANCE] = subject_euid
    return {k: v for k, v in carried.items() if k in declared and v is not None}


def routed_output(template_code: str, name: str, subject: dict, next_queue: dict) -> dict:
    """An ``outputs`` entry that makes a ``template_code`` object from ``subject`` (``euid``,
    ``props``, ``execution``) and routes it READY to ``next_queue`` (``queue_key``,
    ``config``) for that queue's first step, at the subject's priority and due date."""
    env = subject.get("execution") or {}
    return {"template_code": template_code, "name": name,
            "properties": carried_properties(template_code, subject.get("props") or {},
                                             subject["euid"]),
            "execution": {"state": "READY", "next_queue_key": next_queue["queue_key"],
                          "next_action_key": next_queue["config"].get("default_next_action_key"),
                          "priority": _whole(env.get("priority")), "due_at": env.get("due_at")}}


def _whole(priority: Any) -> Any:
    # another writer's 205.0 is the priority 205 (the order index reads it as a number)
    if isinstance(priority, float) and priority.is_integer():
        return int(priority)
    return priority
