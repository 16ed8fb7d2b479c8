"""The request schemas of what a worker says of itself and what an admin sets of it:
registering, heartbeating, and a worker's status (drain, disable, retire, enable)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bloomops.api.action_schemas import (
    REASON_RULE,
    ActionEnvelope,
    Id,
    KeyList,
    integer,
    text,
)
from bloomops.execution.actions import SetWorkerStatus
from bloomops.execution.actions.fields import NOTE_MAX, WORKER_TEXT_MAX
from bloomops.execution.people import HUMAN_KEY_PREFIX, PROFILE_FIELDS
from bloomops.execution.states import WorkerType

WorkerTypeName = Literal[tuple(t.value for t in WorkerType)]  # type: ignore[valid-type]
# What a worker may report about itself in a heartbeat (DISABLED/RETIRED are admin actions).
ReportedWorkerStatus = Literal["ONLINE", "OFFLINE", "DRAINING"]

# A key the engine reads as a person's (human://<username>, after stripping).
HUMAN_KEY = "^[ \\t\\n\\r]*" + HUMAN_KEY_PREFIX + "[\\s\\S]*\\S"
# Another worker's key (actions/workers.WORKER_KEY, stripped), never human:// in any case.
OTHER_WORKER_KEY, ANY_CASE_HUMAN = "^[ \\t\\n\\r]*[!-~]+[ \\t\\n\\r]*$", "^\\s*" + "".join(
    f"[{c.upper()}{c}]" if c.isalpha() else c for c in HUMAN_KEY_PREFIX)


def _at_either_place(rules: dict[str, Any]) -> dict[str, Any]:
    """Field rules (name -> schema) held at the top level and inside ``payload`` alike: a
    field may be sent at either place (ActionEnvelope), and the engine judges it the same."""
    return {"properties": {**rules, "payload": {"properties": rules}}}


def _given(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """``name`` given at either place (and there matching ``schema``)."""
    where = {"required": [name], **({"properties": {name: schema}} if schema else {})}
    return {"anyOf": [where, {"required": ["payload"], "properties": {"payload": where}}]}


class RegisterWorkerIn(ActionEnvelope):
    # A person's HUMAN_SESSION worker has its key and profile from the person and the lab's
    # configuration; every other worker names its key and may not take a person's.
    json_rules = {
        "if": _given("worker_type", {"const": "HUMAN_SESSION"}),
        "then": _at_either_place({
            "worker_key": {"anyOf": [{"type": "null"}, {"pattern": "^[ \\t\\n\\r]*$"},
                                     {"pattern": HUMAN_KEY}]},
            **{name: {"type": "null"} for name in PROFILE_FIELDS}}),
        "else": {**_given("worker_key"), **_at_either_place({
            "worker_key": {"type": "string", "pattern": OTHER_WORKER_KEY,
                           "not": {"pattern": ANY_CASE_HUMAN}}})},
    }

    worker_key: str | None = text(WORKER_TEXT_MAX, (
        "The worker's stable key; required except for HUMAN_SESSION, whose key is the"
        " person's (human://<username>)."))
    display_name: str | None = text(WORKER_TEXT_MAX)
    # Not nullable: the engine takes an absent worker_type as SERVICE but refuses null.
    worker_type: WorkerTypeName = Field(None, description="SERVICE when omitted.",
                                        json_schema_extra=lambda s: s.pop("default", None))
    capabilities: KeyList | None = None
    site_scope: KeyList | None = None
    platform_scope: KeyList | None = None
    assay_scope: KeyList | None = None
    max_concurrent_leases: integer(1, 1000) | None = None
    heartbeat_ttl_seconds: integer(5, 86400) | None = None
    build_version: str | None = text(WORKER_TEXT_MAX)
    host: str | None = text(WORKER_TEXT_MAX)
    process_identity: str | None = text(WORKER_TEXT_MAX)


class HeartbeatWorkerIn(ActionEnvelope):
    worker_euid: Id
    status: ReportedWorkerStatus | None = None
    display_name: str | None = text(WORKER_TEXT_MAX)
    build_version: str | None = text(WORKER_TEXT_MAX)
    host: str | None = text(WORKER_TEXT_MAX)
    process_identity: str | None = text(WORKER_TEXT_MAX)
    last_error_class: str | None = text(WORKER_TEXT_MAX)


class WorkerStatusIn(ActionEnvelope):
    json_rules = {"if": {"required": ["operation"], "properties": {"operation": {
                      "enum": list(SetWorkerStatus.NEEDS_REASON)}}},
                  "then": REASON_RULE}

    worker_euid: Id
    operation: Literal[tuple(sorted(SetWorkerStatus.OPERATIONS))]  # type: ignore[valid-type]
    reason: str | None = text(NOTE_MAX, "Required to drain, disable or retire.")


WORKER_SCHEMAS: dict[str, type[ActionEnvelope]] = {
    "register_worker": RegisterWorkerIn, "heartbeat_worker": HeartbeatWorkerIn,
    "set_worker_status": WorkerStatusIn,
}
