"""The fields of a queue definition an admin may set, and their checks (no database except
the template registry): one place for what create_queue, update_queue, replace_queue and
apply_queues accept (RULES.md#queue-configuration)."""

from __future__ import annotations

import math
import re
from typing import Any

from bloomops.execution.actions.fields import (
    int_field,
    key_field,
    key_list_field,
    str_list_field,
    text_field,
)
from bloomops.execution.errors import ActionError, Problems
from bloomops.execution.objects import (
    full_template_code,
    is_engine_template,
    templates_named,
)
from bloomops.execution.results import clean_result_fields
from bloomops.execution.states import ELIGIBLE_STATES
from bloomops.tapdb.templates import all_templates

# Fixed for a queue object's life (a change needs replace_queue).
IMMUTABLE_FIELDS = ("queue_key", "subject_template_codes")
# What update_queue may change; `enabled` and `disabled_reason` belong to set_queue_enabled.
MUTABLE_FIELDS = (
    "display_name", "manual_only", "operator_visible", "strict_order", "dispatch_priority",
    "eligible_states", "required_worker_capabilities", "site_scope", "platform_scope",
    "assay_scope", "output_template_codes", "lease_ttl_seconds", "max_attempts_default",
    "retry_policy", "straggler_threshold_seconds", "default_next_queue_key",
    "default_next_action_key", "diagnostics_enabled", "next_queue_keys", "result_fields",
    "outside_overdue_seconds",
)
# Who owns a queue: bloomops changes only queues it created (another system, e.g. Bloom on a
# shared database, owns and rewrites its own queue keys).
MANAGED_BY = "bloomops"

# "(?!\n)": Python's "$" also matches before a final newline; JSON Schema readers (the API
# document) know no "\Z", and this reads the same in both.
QUEUE_KEY_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,99}(?!\n)$"
# the pattern in words, wherever a key is refused (the engine's check, the API's schema)
QUEUE_KEY_WORDS = ("must be lowercase letters, digits, _ . - (up to 100, starting with a"
                   " letter or digit)")
QUEUE_KEY_RE = re.compile(QUEUE_KEY_PATTERN)
BOOL_FIELDS = ("manual_only", "operator_visible", "strict_order", "diagnostics_enabled")
LIST_FIELDS = ("required_worker_capabilities", "site_scope", "platform_scope", "assay_scope")
# Sane ranges: (minimum, maximum).
RANGES = {
    "dispatch_priority": (0, 1000),
    "lease_ttl_seconds": (30, 86400),
    "max_attempts_default": (1, 100),
    "straggler_threshold_seconds": (60, 30 * 86400),
    # 0: work sent outside is never flagged (another writer's queue names none either)
    "outside_overdue_seconds": (0, 30 * 86400),
}
RETRY_FIELDS = ("mode", "initial_delay_seconds", "backoff_factor", "max_delay_seconds",
                "jitter_ratio")
RETRY_MODES = ("EXPONENTIAL_BACKOFF",)
RETRY_RANGES = {
    "initial_delay_seconds": (1, 86400),
    "backoff_factor": (1.0, 10.0),
    "max_delay_seconds": (1, 7 * 86400),
    "jitter_ratio": (0.0, 1.0),
}
# Help shown next to each field on the settings page (and the API documentation's words).
HELP = {
    "queue_key": "Stable key subjects are routed by (next_queue_key); lowercase letters, digits,"
                 " _ . -; fixed for the queue's life.",
    "display_name": "What operators read on the dashboard.",
    "subject_template_codes": "Templates of the subjects this queue takes; fixed for the"
                              " queue's life (replace the queue to change them).",
    "eligible_states": "Subject states in which an item is visible here.",
    "manual_only": "Only people (human workers) may claim.",
    "operator_visible": "Shown on the dashboard to everyone (off: to admins alone, a machine's"
                        " queue nobody at the bench or the desk acts on; the API and"
                        " /metrics list it either way).",
    "strict_order": "Work must run in order: a chosen claim must be the queue's head.",
    "dispatch_priority": f"0 to {RANGES['dispatch_priority'][1]}; higher is served first by"
                         " workers that name no queue.",
    "required_worker_capabilities": "A worker needs every one of these to claim.",
    "site_scope": "Sites served (empty: any).",
    "platform_scope": "Platforms served (empty: any).",
    "assay_scope": "Assays served (empty: any).",
    "output_template_codes": "Templates of the objects a step may create.",
    "lease_ttl_seconds": "How long a claim lasts without renewal (30 s to 1 day).",
    "max_attempts_default": "Attempts before a retryable failure becomes terminal (1 to 100).",
    "retry_policy": "Backoff after a retryable failure: initial delay, factor, cap, jitter.",
    "straggler_threshold_seconds": "Flag the queue when its oldest item waits longer.",
    "outside_overdue_seconds": "Flag work this queue's step sent outside (to an instrument or"
                               " a pipeline) as overdue when its result has not come back"
                               " after this long (0: never).",
    "default_next_queue_key": "The flow's next queue: the bench offers it first and the"
                              " built-in workers send completed work there. A completion"
                              " through the API goes where it names; naming none finishes"
                              " the work.",
    "next_queue_keys": "Other queues a completed subject may move to besides the default next"
                       " queue; when any are listed, completing to a queue not listed is"
                       " refused. None listed: it may move to any queue, or to the default"
                       " alone (an empty list [], the tick beside the field).",
    "default_next_action_key": "The next_action_key given to subjects routed here.",
    "diagnostics_enabled": "The queue's page lists the items routed here but not visible,"
                           " each with why (off: it does not; a subject's page says why of"
                           " each).",
    "result_fields": "What a completion of this queue's step records (RULES.md#results): per"
                     " field its key, label, kind (number, text, pass_fail or choice), a"
                     " number's unit and bounds, a choice's values, and whether it is"
                     " required.",
    "reason": "Why: kept in the queue's change history.",
}


def _codes(payload: dict, name: str, *, required: bool = False) -> list[str] | None:
    """Template codes, each in full or as a short name a person writes (``specimen``)."""
    codes = str_list_field(payload, name)
    if codes is not None:
        codes = [full_template_code(c) for c in codes]
    if codes is None:
        if required:
            raise ActionError("VALIDATION_ERROR", f"{name} is required.", field=name)
        return None
    if required and not codes:
        raise ActionError("VALIDATION_ERROR", f"{name} must name at least one template.",
                          field=name)
    known = all_templates()
    unknown = [c for c in codes if c not in known]
    named = {c: templates_named(c) for c in unknown}
    ambiguous = {c: m for c, m in named.items() if len(m) > 1}
    if ambiguous:
        said = "; ".join(f"{c} names {len(m)} templates ({', '.join(m)})"
                         for c, m in ambiguous.items())
        raise ActionError("VALIDATION_ERROR", f"{name}: {said}: write the one meant in full.",
                          field=name, unknown=unknown)
    if unknown:
        raise ActionError("VALIDATION_ERROR", f"{name}: no template {', '.join(unknown)}.",
                          field=name, unknown=unknown)
    engine = [c for c in codes if is_engine_template(known[c])]
    if engine:
        raise ActionError("VALIDATION_ERROR", f"{name}: {', '.join(engine)} are the engine's"
                          " own objects.", field=name)
    return list(dict.fromkeys(codes))


def queue_key_field(payload: dict, name: str = "queue_key", *, required: bool = True) -> str:
    value = text_field(payload, name, required=required, max_len=100) or ""
    if value and not QUEUE_KEY_RE.match(value):
        raise ActionError("VALIDATION_ERROR", f"{name} {QUEUE_KEY_WORDS}.", field=name)
    return value


def _retry_policy(value: Any) -> dict | None:
    """A retry policy checked whole: every unknown field and every bad value said at once
    (an unknown field had hidden the bad numbers beside it until the next try)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ActionError("VALIDATION_ERROR", "retry_policy must be an object.",
                          field="retry_policy")
    problems = Problems()
    extra = sorted(set(value) - set(RETRY_FIELDS))
    if extra:
        with problems.field():
            raise ActionError("VALIDATION_ERROR", f"retry_policy has unknown fields {extra}.",
                              field="retry_policy")
    policy = {"mode": value.get("mode", RETRY_MODES[0])}
    if policy["mode"] not in RETRY_MODES:
        with problems.field():
            raise ActionError("VALIDATION_ERROR", "retry_policy.mode must be"
                              " EXPONENTIAL_BACKOFF.", field="retry_policy.mode")
    for name, (low, high) in RETRY_RANGES.items():
        if name not in value:
            continue
        number = value[name]
        if isinstance(number, bool) or not isinstance(number, int | float) or not (
                math.isfinite(number) and low <= number <= high):
            with problems.field():
                raise ActionError("VALIDATION_ERROR", f"retry_policy.{name} must be a number"
                                  f" from {low} to {high}.", field=f"retry_policy.{name}")
            continue
        policy[name] = number
    problems.raise_any()
    if policy.get("max_delay_seconds", math.inf) < policy.get("initial_delay_seconds", 0):
        raise ActionError("VALIDATION_ERROR", "retry_policy.max_delay_seconds is below"
                          " initial_delay_seconds.", field="retry_policy.max_delay_seconds")
    return policy


def merged_retry_policy(current: dict | None, change: dict) -> dict:
    """A partial retry policy changes only the numbers it names; the whole that results is
    checked again (a new cap below the current initial delay is refused)."""
    merged = _retry_policy({**(current or {}), **change})
    assert merged is not None
    return merged


def clean_settings(payload: dict, problems: Problems | None = None) -> dict[str, Any]:
    """The mutable queue fields present in ``payload``, checked and normalised. Every field
    is checked, and its refusal gathered in ``problems`` (given: the caller raises them;
    else raised here once all are checked)."""
    own = problems is None
    problems = problems or Problems()
    out: dict[str, Any] = {}
    if "display_name" in payload:
        with problems.field():
            out["display_name"] = text_field(payload, "display_name", required=True,
                                             max_len=200, line=True)
    for name in BOOL_FIELDS:
        if name in payload:
            with problems.field():
                if not isinstance(payload[name], bool):
                    raise ActionError("VALIDATION_ERROR", f"{name} must be true or false.",
                                      field=name)
                out[name] = payload[name]
    for name, (low, high) in RANGES.items():
        if name in payload:
            with problems.field():
                out[name] = int_field(payload, name, minimum=low, maximum=high)
                if out[name] is None:
                    raise ActionError("VALIDATION_ERROR", f"{name} may not be null.",
                                      field=name)
    if "eligible_states" in payload:
        with problems.field():
            states = str_list_field(payload, "eligible_states") or []
            bad = [s for s in states if s not in ELIGIBLE_STATES]
            if bad or not states:
                raise ActionError("VALIDATION_ERROR", "eligible_states must list states an"
                                  " item waits for work in: " + ", ".join(ELIGIBLE_STATES)
                                  + ".", field="eligible_states")
            out["eligible_states"] = list(dict.fromkeys(states))
    for name in LIST_FIELDS:
        if name in payload:
            with problems.field():
                out[name] = key_list_field(payload, name) or []
    if "output_template_codes" in payload:
        with problems.field():
            out["output_template_codes"] = _codes(payload, "output_template_codes") or []
    if "retry_policy" in payload:
        with problems.field():
            out["retry_policy"] = _retry_policy(payload["retry_policy"])
            if out["retry_policy"] is None:
                raise ActionError("VALIDATION_ERROR", "retry_policy may not be null.",
                                  field="retry_policy")
    if "default_next_queue_key" in payload:
        with problems.field():
            out["default_next_queue_key"] = queue_key_field(
                payload, "default_next_queue_key", required=False) or None
    if "next_queue_keys" in payload:
        with problems.field():
            keys = str_list_field(payload, "next_queue_keys")
            if keys is not None:
                if len(keys) > 100:
                    raise ActionError("VALIDATION_ERROR", "next_queue_keys: up to 100 queues.",
                                      field="next_queue_keys")
                keys = list(dict.fromkeys(queue_key_field({"next_queue_keys": each},
                                                          "next_queue_keys") for each in keys))
            out["next_queue_keys"] = keys
    if "default_next_action_key" in payload:
        with problems.field():
            out["default_next_action_key"] = key_field(payload, "default_next_action_key")
    if "result_fields" in payload:
        with problems.field():
            out["result_fields"] = clean_result_fields(payload["result_fields"])
    if own:
        problems.raise_any()
    return out


def clean_new_queue(payload: dict) -> dict[str, Any]:
    """A new queue's fields: its key, its subject templates and any mutable field, every
    refusal said at once."""
    problems = Problems()
    fields = clean_settings(payload, problems)
    with problems.field():
        fields["queue_key"] = queue_key_field(payload)
    with problems.field():
        fields["subject_template_codes"] = _codes(payload, "subject_template_codes",
                                                  required=True)
    problems.raise_any()
    return fields


# Fields whose values are sets: the same templates listed in another order are no change
# (a lab's file listing them otherwise planned a replacement the engine refused).
UNORDERED_FIELDS = ("subject_template_codes",)


def diff(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, list[Any]]:
    """field -> [before, after] for every field of ``wanted`` that differs."""
    def same(name: str, a: Any, b: Any) -> bool:
        if name in UNORDERED_FIELDS and isinstance(a, list) and isinstance(b, list):
            return sorted(map(str, a)) == sorted(map(str, b))
        return a == b

    return {name: [current.get(name), value] for name, value in wanted.items()
            if not same(name, current.get(name), value)}
