"""Queues as configuration code: read a TOML file of queue definitions, plan the difference
from the database, and apply the plan through the queue actions (RULES.md#queue-configuration).
Applying a plan twice changes nothing the second time."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bloomops.execution import selectors
from bloomops.execution.actions.queue_fields import (
    LIST_FIELDS,
    MANAGED_BY,
    MUTABLE_FIELDS,
    clean_new_queue,
    diff,
)
from bloomops.execution.actions.queues import open_queue_warning, starting_config
from bloomops.execution.context import ActionRequest, Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.guards import nesting_depth
from bloomops.execution.policy import flow_warnings

# Who the actions of a file apply are recorded as when no user is named.
CONFIG_ACTOR = Actor(username="apply_queues", roles=frozenset({"admin"}))
FILE_FIELDS = ("queue_key", "subject_template_codes", *MUTABLE_FIELDS, "enabled",
               "disabled_reason")


# What a file holds besides its queues.
FILE_KEYS = ("queue", "reason")
# How deep a queue's values may nest (a queue's retry policy or result fields: 4).
MAX_FILE_DEPTH = 8


class QueueFileError(ValueError):
    """The file cannot be read as queue definitions (says where)."""


@dataclass
class Step:
    action_key: str
    queue_key: str
    payload: dict[str, Any]
    summary: str

    def line(self) -> str:
        return f"{self.action_key:<17} {self.queue_key}: {self.summary}"


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    # Differences bloomops may not change (another system's queue).
    blocked: list[str] = field(default_factory=list)
    # In the database, not in the file: left as they are (queues are never deleted).
    unlisted: list[str] = field(default_factory=list)
    # Allowed, but most often a mistake (a next queue no one has made).
    warnings: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.steps or self.blocked)

    def lines(self) -> list[str]:
        out = [s.line() for s in self.steps]
        out += [f"{'cannot change':<17} {b}" for b in self.blocked]
        out += [f"{'not in file':<17} {k}: left as it is" for k in self.unlisted]
        out = out or ["No changes: the database matches the file."]
        return out + [f"{'warning':<17} {w}" for w in self.warnings]


def read_queue_file(path: str | Path) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The queue definitions of a file (``[[queue]]`` tables), its ``reason`` and what is
    wrong with the file itself (keys of its own, each queue's unknown fields, a key defined
    twice), said with the values the engine refuses by ``plan``: a misspelt field hid the
    file's bad values until the next run. No database."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise QueueFileError(f"{path}: not UTF-8 text (save it as UTF-8).") from None
    except RecursionError:  # what the TOML reader itself cannot follow
        raise QueueFileError(f"{path}: its values nest too deeply to read.") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise QueueFileError(f"{path}: {exc}") from None
    problems = [f"unknown {'table' if isinstance(data[k], list | dict) else 'key'} {k!r}"
                " (a file holds [[queue]] tables and a reason)." for k in sorted(data)
                if k not in FILE_KEYS]
    specs = data.get("queue")
    if not isinstance(specs, list) or not specs or not all(isinstance(s, dict) for s in specs):
        found = ("none" if specs is None or specs == [] else
                 "one [queue] table" if isinstance(specs, dict) else f"queue = {specs!r:.60}")
        raise QueueFileError("\n".join(f"{path}: {p}" for p in [
            *problems, f"queues are [[queue]] tables, one per queue (found {found})."]))
    if (depth := nesting_depth(specs)) > MAX_FILE_DEPTH:  # a value nested 500 deep
        raise QueueFileError(f"{path}: a queue's value nests {depth} levels deep (at most"
                             f" {MAX_FILE_DEPTH}).")
    seen: set[str] = set()
    for i, spec in enumerate(specs, 1):
        unknown = sorted(set(spec) - set(FILE_FIELDS))
        if unknown:
            problems.append(f"queue #{i}: unknown fields {unknown}.")
        key = spec.get("queue_key")
        if not isinstance(key, str):  # said by the engine's check of the queue (plan)
            continue
        if key in seen:
            problems.append(f"queue {key!r} is defined twice.")
        seen.add(key)
    if not isinstance(data.get("reason", ""), str):
        problems.append("reason must be text.")
    # Every configuration change says why: the file's reason, else which file it came from.
    reason = str(data.get("reason") or "").strip() or f"apply_queues {Path(path).name}"
    return specs, reason, [f"{path}: {p}" for p in problems]


def load_queue_file(path: str | Path) -> tuple[list[dict[str, Any]], str]:
    """``read_queue_file``, refusing a file with problems of its own."""
    specs, reason, problems = read_queue_file(path)
    if problems:
        raise QueueFileError("\n".join(problems))
    return specs, reason


def _checked(spec: dict[str, Any], number: int) -> tuple[dict[str, Any], list[str]]:
    """One queue's fields as the engine takes them, and every field it refuses, each said
    once (errors.Problems: a file with five mistakes took five runs to learn them)."""
    left = {k: v for k, v in spec.items() if k not in ("enabled", "disabled_reason")}
    said: list[str] = []
    fields: dict[str, Any] = {}
    try:
        fields = clean_new_queue(left)
    except ActionError as exc:
        for problem in exc.problems():
            called = spec.get("queue_key") or "no queue_key"
            said.append(f"queue #{number} ({called}): {problem['message']}"
                        f" [{problem['field']}]")
    if "enabled" in spec and not isinstance(spec["enabled"], bool):
        said.append(f"queue #{number}: enabled must be true or false.")
    if "disabled_reason" in spec and not isinstance(spec["disabled_reason"], str):
        said.append(f"queue #{number}: disabled_reason must be text.")
    return fields, said


def _short(changes: dict[str, list[Any]]) -> str:
    return "; ".join(f"{k} {json.dumps(a)} -> {json.dumps(b)}" for k, (a, b) in changes.items())


def plan(specs: list[dict[str, Any]], *, tenant: str | None = None,
         file_problems: list[str] | None = None) -> Plan:
    """What applying ``specs`` would do, in order, without writing; refused with every
    problem of the file (``file_problems``, from ``read_queue_file``) and of its values."""
    result = Plan()
    current = {q["queue_key"]: q["config"] for q in selectors.queues(tenant=tenant)}
    results = [_checked({k: v for k, v in spec.items() if k in FILE_FIELDS}, number)
               for number, spec in enumerate(specs, 1)]
    problems = [*(file_problems or []), *(p for _, said in results for p in said)]
    if problems:
        raise QueueFileError("\n".join(problems))
    checked = [fields for fields, _ in results]
    # a new queue as its creation will store it: the template's defaults under the file's
    # fields (judged without them, every new queue "offered items in no state")
    after = {**current, **{f["queue_key"]: {**current[f["queue_key"]], **f}
                           if f["queue_key"] in current else starting_config(f)
                           for f in checked}}
    result.warnings = [f"{f['queue_key']}: {w}" for f in checked
                       for w in [*flow_warnings(f["queue_key"], after[f["queue_key"]], after),
                                 *open_queue_warning(current.get(f["queue_key"]),
                                                     after[f["queue_key"]])]]
    served: list[tuple[str, dict, dict]] = []
    for spec, fields in zip(specs, checked, strict=True):
        key = fields["queue_key"]
        cfg = current.get(key)
        # a file that does not say enabled leaves it as it is, as every field it leaves out
        # (an admin's "disabled for maintenance" had been turned on again by a run)
        enabled = spec.get("enabled", True if cfg is None else bool(cfg.get("enabled", True)))
        reason = spec.get("disabled_reason") or "disabled in the configuration file"
        if cfg is None:
            payload = {k: v for k, v in fields.items() if k != "queue_key"}
            result.steps.append(Step("create_queue", key, payload, "new queue"))
            if not enabled:
                result.steps.append(Step("set_queue_enabled", key,
                                         {"enabled": False, "reason": reason}, "disabled"))
            continue
        wanted = dict(fields)
        if "retry_policy" in wanted:
            wanted["retry_policy"] = {**(cfg.get("retry_policy") or {}), **wanted["retry_policy"]}
        changes = diff(cfg, wanted)
        toggled = bool(cfg.get("enabled", True)) != enabled
        if not (changes or toggled):
            continue
        if cfg.get("managed_by") != MANAGED_BY:
            result.blocked.append(f"{key}: managed by {cfg.get('managed_by') or 'another'}"
                                  f" system; differs in {', '.join(changes) or 'enabled'}")
            continue
        if "subject_template_codes" in changes:
            payload = {k: v for k, v in fields.items() if k != "queue_key"}
            result.steps.append(Step("replace_queue", key, payload, _short(changes)))
        elif changes:
            result.steps.append(Step("update_queue", key, {k: b for k, (_, b) in
                                                           changes.items()}, _short(changes)))
        # as the settings preview says it (a typo "lab.qcc" left the queue to nobody)
        if any(name in changes for name in LIST_FIELDS):
            served.append((key, cfg, {k: b for k, (_, b) in changes.items()}))
        if toggled:
            payload = {"enabled": enabled, "reason": reason if not enabled
                       else "enabled in the configuration file"}
            result.steps.append(Step("set_queue_enabled", key, payload,
                                     "enabled" if enabled else f"disabled ({reason})"))
    # every queue's coverage read at once, not twice a queue
    result.warnings += [f"{key}: {w}" for key, w in selectors.served_by_nobody(
        served, tenant=tenant)]
    listed = {s.get("queue_key") for s in specs}
    result.unlisted = sorted(k for k in current if k not in listed)
    return result


def apply(result: Plan, *, reason: str, actor: Actor = CONFIG_ACTOR,
          tenant: str | None = None) -> list[dict[str, Any]]:
    """Run the plan's steps through the executor, each at the queue's current revision."""
    from bloomops.execution.executor import execute

    done = []
    for step in result.steps:
        row = selectors.queue_config(step.queue_key, tenant=tenant)
        revision = int(row["config"].get("revision") or 0) if row else None
        payload = {"reason": reason, **step.payload}
        # The same change at the same revision is one request: a rerun after a crash replays.
        digest = hashlib.sha256(json.dumps([step.action_key, step.queue_key, revision, payload],
                                           sort_keys=True).encode()).hexdigest()[:32]
        out = execute(ActionRequest(
            action_key=step.action_key, actor=actor, idempotency_key=f"apply-queues-{digest}",
            queue_key=step.queue_key, payload=payload, tenant=tenant,
            expected_revision=None if step.action_key == "create_queue" else revision))
        done.append(out.as_dict())
    return done
