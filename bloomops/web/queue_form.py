"""The queue settings form: the HTML fields of a queue's settings, read back into the payload
of update_queue / create_queue (the engine checks the values; this only parses the form)."""

from __future__ import annotations

import csv
import json
import re
from typing import Any

from bloomops.execution.actions.queue_fields import (
    BOOL_FIELDS,
    HELP,
    LIST_FIELDS,
    RANGES,
    RETRY_RANGES,
)
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import MAX_INTEGER_DIGITS, load_json
from bloomops.execution.policy import scope_values, setting_on
from bloomops.execution.results import MAX_RESULT_FIELDS, RESULT_KINDS, declared_results
from bloomops.execution.states import ALL_STATES, ELIGIBLE_STATES

TEXT_FIELDS = ("display_name", "default_next_queue_key", "default_next_action_key")
# Lists the engine keeps besides the capability and scope lists (LIST_FIELDS).
CODE_LIST_FIELDS = ("output_template_codes", "next_queue_keys")
RETRY_NUMBERS = tuple(RETRY_RANGES)
# The tick beside the next queues: none listed means the default next queue alone.
ONLY_DEFAULT = "next_queue_keys_none"


def split_list(raw: str) -> list[str]:
    """A list field as typed: comma- or line-separated, as the page shows it (a site "Main
    Lab" is one value: split at spaces too, an edit of the queue's name saved it as two); a
    value in double quotes is one, commas and all ("Main Lab, North"), as a spreadsheet's."""
    values = []
    for line in raw.splitlines():
        values += [v.strip() for v in next(csv.reader([line], skipinitialspace=True), [])]
    return [v for v in values if v]


def shown_list(values: list[str]) -> str:
    """A list as the page shows it and ``split_list`` reads it back: a value holding a comma
    or a quote in double quotes (read as one value, "Main Lab, North" looked like two)."""
    return ", ".join('"' + v.replace('"', '""') + '"' if "," in v or '"' in v else v
                     for v in values)


_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)")


def decimal_number(raw: str) -> int | float | None:
    """A decimal number as people write one (not "1e3", "nan" or other scripts' digits,
    which float() would also read), or None."""
    if not _DECIMAL.fullmatch(raw):
        return None
    # a whole number exactly as typed (through a float, 17 digits were 16); one longer than
    # any number kept (and than Python reads as an int) as the float it is, infinite
    if "." not in raw and len(raw.lstrip("+-")) <= MAX_INTEGER_DIGITS:
        return int(raw)
    value = float(raw)
    return int(value) if value.is_integer() else value


def _numbers_refused(names: list[str]) -> ActionError:
    """Every number the form could not read, by its label and key, in one refusal."""
    named = [f"{field_label(n.replace('retry_policy.', 'retry_'))} ({n})" for n in names]
    return ActionError("VALIDATION_ERROR", ", ".join(named)
                       + (" must be a number." if len(named) == 1 else " must be numbers."),
                       field=names[0], fields=names)


# What each retry number means, for the settings page (the engine's bounds follow).
RETRY_HELP = {
    "initial_delay_seconds": "Seconds before the first retry",
    "backoff_factor": "Each further wait is the one before times this",
    "max_delay_seconds": "Longest wait between retries, in seconds",
    "jitter_ratio": "Random share added to each wait, so retries spread out",
}


def field_label(name: str) -> str:
    """A setting's name in words ("default_next_queue_key" -> "Default next queue key");
    the page shows the key beside it, as the lab's queue file names it."""
    words = name.replace("_", " ").replace("ttl", "TTL")
    return words[:1].upper() + words[1:]


def form_fields(cfg: dict[str, Any], typed: Any = None) -> list[dict[str, Any]]:
    """What the settings page shows: each field with its label, kind, value and help. The
    value is the queue's, or what the admin ``typed`` (a refused preview shows the form as
    it was sent, not as stored)."""
    def shown(name: str, stored: Any) -> Any:
        return typed.get(name, "") if typed is not None else stored

    out: list[dict[str, Any]] = []
    for name in TEXT_FIELDS:
        out.append({"name": name, "kind": "text", "value": shown(name, cfg.get(name) or ""),
                    "help": HELP[name]})
    for name, (low, high) in RANGES.items():
        out.append({"name": name, "kind": "number", "value": shown(name, cfg.get(name)),
                    "min": low, "max": high, "help": HELP[name]})
    for name in BOOL_FIELDS:
        out.append({"name": name, "kind": "bool", "help": HELP[name],
                    "value": typed.get(name) == "on" if typed is not None else setting_on(
                        cfg, name)})
    # another writer may have stored anything: read as a list of texts (policy.scope_values)
    states = (typed.getlist("eligible_states") if typed is not None
              else scope_values(cfg.get("eligible_states")) or [])
    out.append({"name": "eligible_states", "kind": "states", "help": HELP["eligible_states"],
                # the states a queue may list, and any other it lists already (another
                # writer's queue), shown so that it can be unticked
                "choices": [(s, s in states) for s in ALL_STATES
                            if s in ELIGIBLE_STATES or s in states]})
    for name in (*LIST_FIELDS, *CODE_LIST_FIELDS):
        # another writer's "main" stored as text is one value, not m, a, i, n
        out.append({"name": name, "kind": "list", "help": HELP[name],
                    "value": shown(name, shown_list(scope_values(cfg.get(name)) or [])),
                    "only_default": (typed.get(ONLY_DEFAULT) == "on" if typed is not None
                                     else cfg.get(name) == [])})
    out.append({"name": "result_fields", "kind": "results", "help": HELP["result_fields"],
                "kinds": RESULT_KINDS, "rows": _result_rows(cfg, typed)})
    policy = cfg.get("retry_policy") or {}
    for name in RETRY_NUMBERS:
        low, high = RETRY_RANGES[name]
        out.append({"name": f"retry_{name}", "kind": "number",
                    "value": shown(f"retry_{name}", policy.get(name)),
                    "min": low, "max": high, "step": "any",
                    "help": f"{RETRY_HELP[name]} ({low} to {high})."})
    for field in out:
        field["label"] = field_label(field["name"])
    return out


def read_form(post: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The settings the form asks for that differ from ``cfg`` (the update's payload)."""
    wanted: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        raw = post.get(name, "").strip()
        wanted[name] = raw or (None if name != "display_name" else "")
    unreadable: list[str] = []
    for name in RANGES:
        raw = post.get(name, "").strip()
        if raw:
            wanted[name] = decimal_number(raw)
            if wanted[name] is None:
                unreadable.append(name)
    for name in BOOL_FIELDS:
        wanted[name] = post.get(name) == "on"
    wanted["eligible_states"] = [s for s in ALL_STATES if s in post.getlist("eligible_states")]
    for name in (*LIST_FIELDS, *CODE_LIST_FIELDS):
        raw = post.get(name, "")
        # shown as stored and sent back untouched: the stored list as it is (a value another
        # writer stored with a comma in it would split in two)
        stored = cfg.get(name)
        as_shown = (shown_list(stored) if isinstance(stored, list)
                    and all(isinstance(v, str) for v in stored) else None)
        wanted[name] = list(stored) if raw.strip() == as_shown else split_list(raw)
        if isinstance(stored, str) and wanted[name] == [stored]:
            wanted[name] = stored  # another writer's text, sent back as shown: no change
    if wanted["next_queue_keys"] == []:
        # none listed: the default next queue alone ([]) when ticked, else any queue (null);
        # the two were one empty field, and the screen could not ask for the first
        wanted["next_queue_keys"] = [] if post.get(ONLY_DEFAULT) == "on" else None
    wanted["result_fields"] = []
    for row in typed_result_rows(post):
        field: dict[str, Any] = {"key": row["key"], "label": row["label"] or row["key"],
                                 "kind": row["kind"], "required": row["required"]}
        if row["unit"]:
            field["unit"] = row["unit"]
        if row["choices"]:  # comma-separated, as the page shows them
            field["choices"] = [c.strip() for c in row["choices"].split(",") if c.strip()]
        for bound in ("min", "max"):
            if row[bound]:
                field[bound] = decimal_number(row[bound])
                if field[bound] is None:
                    unreadable.append(f"result_fields.{row['key'] or '?'}.{bound}")
        wanted["result_fields"].append(field)
    policy = dict(cfg.get("retry_policy") or {})
    for name in RETRY_NUMBERS:
        raw = post.get(f"retry_{name}", "").strip()
        if raw:
            policy[name] = decimal_number(raw)
            if policy[name] is None:
                unreadable.append(f"retry_policy.{name}")
    if unreadable:
        raise _numbers_refused(unreadable)
    wanted["retry_policy"] = policy
    # A list the queue never had and the form leaves empty is no change (the next queues
    # say which empty they mean: none listed, or the default alone); a yes/no, no change
    # when it reads as the queue's does.
    empty_is_none = (*LIST_FIELDS, "output_template_codes", "result_fields")
    return {k: v for k, v in wanted.items() if cfg.get(k) != v
            and not (k in BOOL_FIELDS and setting_on(cfg, k) == v)
            and not (cfg.get(k) is None and not v and k in empty_is_none)}


# Blank rows the settings page offers below a queue's result fields, for new ones.
SPARE_RESULT_ROWS = 2
_ROW_TEXTS = ("key", "label", "unit", "min", "max", "choices")


def typed_result_rows(post: Any) -> list[dict[str, Any]]:
    """The result-field rows of a sent settings form (``result-<n>-<part>``), as typed;
    a row left blank is none."""
    rows = []
    for n in range(MAX_RESULT_FIELDS + SPARE_RESULT_ROWS):
        if f"result-{n}-key" not in post:
            break
        row: dict[str, Any] = {part: post.get(f"result-{n}-{part}", "").strip()
                               for part in _ROW_TEXTS}
        row["kind"] = post.get(f"result-{n}-kind", "") or "number"
        row["required"] = post.get(f"result-{n}-required") == "on"
        if any(row[part] for part in _ROW_TEXTS):
            rows.append(row)
    return rows


def _result_rows(cfg: dict[str, Any], typed: Any) -> list[dict[str, Any]]:
    """The rows the settings page shows: the queue's result fields (or those typed into a
    refused form), then blank ones."""
    if typed is not None:
        rows = typed_result_rows(typed)
    else:
        rows = [{**{part: "" if f.get(part) is None else f[part] for part in _ROW_TEXTS},
                 "choices": ", ".join(f.get("choices") or []),
                 "kind": f["kind"], "required": f["required"]}
                for f in declared_results(cfg)]
    blank = {**{part: "" for part in _ROW_TEXTS}, "kind": "number", "required": False}
    return [*rows, *[blank] * SPARE_RESULT_ROWS]


def encode(payload: dict[str, Any]) -> str:
    """The previewed change, carried unchanged by the confirm form."""
    return json.dumps(payload, sort_keys=True)


def decode(raw: str) -> dict[str, Any]:
    try:
        value = load_json(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ActionError("VALIDATION_ERROR", "The page sent an unreadable change; preview"
                          " it again.", field="changes")
    return value
