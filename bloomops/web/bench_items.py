"""A leased item as My work shows it: what, how urgent, which step, how long is left, and
where it may go next (RULES.md#queue-configuration: the queue's flow, only to queues that
take it, policy.queue_takes)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bloomops.execution import selectors
from bloomops.execution.actions.outputs import carried_properties
from bloomops.execution.envelope import parse_ts_or_none
from bloomops.execution.errors import ActionError, Problems
from bloomops.execution.guards import NUMBERS_BELOW, too_large
from bloomops.execution.objects import LEASE, is_kind, load
from bloomops.execution.policy import OUTPUTS, next_queues_allowed, queue_takes, queue_templates
from bloomops.execution.results import (
    RESULT_FIELD,
    bounds_words,
    check_results,
    declared_results,
    recorded,
)
from bloomops.execution.states import PRIORITY_CLASSES, priority_class
from bloomops.tapdb.tenancy import tenant_of
from bloomops.web import bench_words, services
from bloomops.web.drafts import RESULT_INPUT
from bloomops.web.queue_form import decimal_number

# My work warns at least this long before a claim runs out (static/js/bloomops.js counts
# down); a long claim earlier (work_item's warn_seconds).
WARN_SECONDS = 120


def work_item(lease: dict, queues: dict[str, dict], now: datetime) -> dict:
    """One leased item as the bench shows it: what, how urgent, which step, how long is
    left, and where it may go next: only where its queue's flow allows and a queue that
    takes it (the engine refuses the others, SUBJECT_TEMPLATE_MISMATCH); with no such queue
    left, the item finishes its flow."""
    env = lease["execution"] or {}
    props = lease["props"] or {}
    queue_key = props.get("queue_lookup_key") or ""
    config = (queues.get(queue_key) or {}).get("config") or {}
    allowed = next_queues_allowed(config)
    flow_next = config.get("default_next_queue_key") or ""
    flow = allowed if allowed is not None else ([flow_next] if flow_next else [])

    def config_of(key: str) -> dict:
        return (queues.get(key) or {}).get("config") or {}


    scope = lease.get("subject_scope") or {}

    def takes(key: str, code: str | None) -> bool:
        return queue_takes(config_of(key), code, scope)

    keys = [k for k in flow if takes(k, lease.get("subject_template_code"))]
    # A next queue that does not take the item may take what the step makes of it (a
    # library from a sample, carrying the sample's scope): completing makes that object
    # and routes it there.
    makes = [(k, code) for k in flow if k not in keys
             for code in queue_templates(config, OUTPUTS)
             if queue_takes(config_of(k), code,
                            carried_properties(code, scope, lease["subject_euid"]))]
    if allowed is None and flow_next and not keys and not makes:
        # The flow goes on, but its default cannot take this item (an ONT sample after a
        # QC whose default is the Illumina line); the queue lists no next queues, so any
        # may follow (RULES.md#queue-configuration): every queue that takes it in scope.
        keys = [k for k in queues if k != queue_key and config_of(k).get("enabled", True)
                and takes(k, lease.get("subject_template_code"))]
    passed_over = flow_next if flow_next and flow_next not in keys else ""
    default_next = flow_next if flow_next in keys else ""
    default_make = next((services.make_choice(k, c) for k, c in makes if k == flow_next), "")
    if default_make:
        passed_over = ""
    return {
        **lease,
        "queue_key": queue_key,
        "queue_name": selectors.display_name(queue_key, config),
        "priority": env.get("priority") or 0,
        "priority_class": priority_class(env.get("priority")),
        "due_at": env.get("due_at"),
        "step": bench_words.step_label(env.get("next_action_key"), config),
        "seconds_left": seconds_left(lease, now),
        # warned a fifth of the claim's length ahead, two minutes at least: two minutes of a
        # half-hour claim went unseen at the bench
        "warn_seconds": max(WARN_SECONDS, _ttl(props) // 5),
        "next_choices": [(k, config_of(k).get("display_name") or k) for k in keys],
        "make_choices": [(services.make_choice(k, code), config_of(k).get("display_name") or k, k,
                          bench_words.template_words(code)) for k, code in makes],
        # a disabled next queue takes the item, which then waits there unclaimed: said (nobody
        # at the bench saw why Staining's items went nowhere)
        "disabled_next": [k for k in {*keys, *(k for k, _ in makes)}
                          if config_of(k).get("enabled", True) is False],
        "default_next": default_next or default_make,
        # no default to go to, but somewhere to go: the person chooses (finishing the flow
        # is then a choice too, never what a tap does unasked)
        "must_choose": not (default_next or default_make) and bool(keys or makes),
        # the flow's next queue, not offered: it takes neither this item nor what it makes
        "passed_over": config_of(passed_over).get("display_name") or passed_over,
        "passed_over_missing": bool(passed_over) and passed_over not in queues,
        "may_finish": not default_next,
        # what completing it records (RULES.md#results), each with its form field's name
        "results": [{**f, "input": RESULT_INPUT + f["key"], "bounds": bounds_words(f)}
                    for f in declared_results(config)],
        # a check recorded as fail and the item sent on as if it passed is asked about first
        # (a QC fail had gone on to library prep in one tap)
        "fails_asked": any(f["kind"] == "pass_fail" for f in declared_results(config)),
    }


# One comma between digits: a decimal comma ("12,5", "0,125"), unless it could as well
# group thousands: one to three digits, the first not 0, then three ("1,250": 1.25 or 1250?).
_DECIMAL_COMMA = re.compile(r"([+-]?[0-9]+),([0-9]+)")
_THOUSANDS = re.compile(r"[+-]?[1-9][0-9]{0,2},[0-9]{3}")


def typed_number(raw: str) -> int | float | str | None:
    """A number as a person at the bench types it: with a decimal point, or a decimal comma
    (a number field dropped the comma of "12,5", and 125 was recorded); None when it cannot
    be read, the text itself when its comma could mean either (said so, not guessed)."""
    number = decimal_number(raw)
    if number is not None:
        return number
    comma = _DECIMAL_COMMA.fullmatch(raw)
    if comma is None:
        return None
    return raw if _THOUSANDS.fullmatch(raw) else decimal_number(f"{comma[1]}.{comma[2]}")


def refuse_unclear_numbers(post: Any, fields: list[dict[str, Any]]) -> None:
    """Refuses the numbers typed whose comma could be a decimal or a thousands separator,
    each under its field, before anything is sent."""
    problems = Problems()
    for field in fields:
        raw = str(post.get(RESULT_INPUT + field["key"], "")).strip()
        number = typed_number(raw) if field["kind"] == "number" and raw else None
        if number == raw:
            with problems.field():
                raise ActionError("VALIDATION_ERROR", f"{field['label']}: is {raw} a decimal"
                                  " or thousands? Write it with a decimal point and no"
                                  f" separator ({raw.replace(',', '.')} or"
                                  f" {raw.replace(',', '')}).",
                                  field=RESULT_FIELD + field["key"])
        elif isinstance(number, int | float) and too_large(number):
            # in the bench's words: the engine's said "payload.result_snapshot.rin must be a
            # finite number" of a number typed with 5,000 digits
            with problems.field():
                raise ActionError("VALIDATION_ERROR", f"{field['label']}: {raw[:20]}"
                                  f"{'…' if len(raw) > 20 else ''} is too large to record"
                                  f" ({NUMBERS_BELOW}).",
                                  field=RESULT_FIELD + field["key"])
    problems.raise_any()


def seconds_left(lease: dict, now: datetime) -> int:
    """How long a claim has left, by the server's clock (0: run out, or unreadable)."""
    expires = parse_ts_or_none((lease["props"] or {}).get("expires_at"))
    return max(0, int((expires - now).total_seconds())) if expires else 0


def results_declared(lease_euid: str) -> list[dict[str, Any]] | None:
    """What the step of a lease records (its queue's result fields); None for no lease."""
    lease = load(euid=lease_euid, tenant=tenant_of())
    if lease is None or not is_kind(lease, LEASE):
        return None
    queue = selectors.queue_config(lease.props.get("queue_lookup_key") or "")
    return declared_results(queue["config"] if queue else None)


def result_of_form(post: Any, lease_euid: str, *,
                   checked: bool = False) -> tuple[dict[str, Any], str]:
    """The result_snapshot a Complete form asks to record: each field the lease's queue
    declares, as typed (a number read as one; what cannot be read is sent as typed, for the
    engine to refuse in words); a field left blank is left out. With it, in words for the
    banner: " (recorded RIN 8.2, QC pass)". Raises for a number it will not guess
    (``refuse_unclear_numbers``), saying with it what the engine would refuse of the other
    fields (``check_results``: nothing is sent); ``checked``: says that in any case (a form
    refused before it is sent)."""
    if not checked and not any(name.startswith(RESULT_INPUT) and str(post.get(name, "")).strip()
                               for name in post):
        return {}, ""  # nothing typed: no declaration to read it by (most steps record none)
    fields = results_declared(lease_euid)
    if fields is None:
        return {}, ""  # the engine refuses the claim itself
    result: dict[str, Any] = {}
    for field in fields:
        raw = post.get(RESULT_INPUT + field["key"], "").strip()
        if raw:
            number = typed_number(raw) if field["kind"] == "number" else None
            result[field["key"]] = raw if number is None else number
    # "1,250" asked about, and the fixation time below its minimum said only on the next try
    problems = Problems()
    with problems.field():
        refuse_unclear_numbers(post, fields)
    if problems.found or checked:
        asked = {p["field"] for err in problems.found for p in err.problems()}
        with problems.field():
            check_results([f for f in fields if RESULT_FIELD + f["key"] not in asked], result)
    problems.raise_any()
    words = ", ".join(f"{label} {value}" for label, value in recorded(fields, result))
    return result, f" (recorded {words})" if words else ""


def bench_order(items: list[dict]) -> list[dict]:
    """My work's cards (``work_item``s, oldest claim first): those about to run out first,
    then by priority class (a STAT item claimed last sat below the fold under an hour of
    ROUTINE work), each group still oldest claim first."""
    return sorted(items, key=lambda i: (i["seconds_left"] > i["warn_seconds"],
                                        -PRIORITY_CLASSES[i["priority_class"]]))


def _ttl(props: dict) -> int:
    """A claim's length as stored: another writer's may be anything (then unknown, 0)."""
    ttl = props.get("ttl_seconds")
    return ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else 0
