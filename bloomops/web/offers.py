"""Which operator controls a screen offers for what it shows: only those the engine would
accept in the current state (the action templates' allowed states, docs/RULES.md#holds),
so a person never meets a button that can only be refused. The engine checks again."""

from __future__ import annotations

from typing import Any

from bloomops.execution.approvals import gated_actions
from bloomops.execution.context import action_spec
from bloomops.execution.states import ALL_STATES, WorkerStatus

SUBJECT_ACTIONS = {"hold": "place_execution_hold", "release": "release_execution_hold",
                   "requeue": "requeue_subject", "cancel": "cancel_subject_execution"}


def subject_states() -> dict[str, tuple[str, ...]]:
    """Per control (hold, release, requeue, cancel), the subject states it is offered in."""
    states = {}
    for name, key in SUBJECT_ACTIONS.items():
        allowed = action_spec(key).allowed_from_states
        states[name] = tuple(allowed) if allowed is not None else tuple(ALL_STATES)
    # A held subject is released (or canceled) first: the engine refuses SUBJECT_HELD.
    states["requeue"] = tuple(s for s in states["requeue"] if s != "HELD")
    return states


def worker_operations(props: dict[str, Any]) -> list[str]:
    """The status operations a worker row offers: drain while it takes work, disable until
    it is disabled, enable once it is draining or disabled; a retired worker none."""
    status = props.get("status")
    draining = status == WorkerStatus.DRAINING or bool(props.get("drain_requested"))
    if status == WorkerStatus.RETIRED:
        return []
    if status == WorkerStatus.DISABLED:
        return ["enable"]
    if draining:
        return ["disable", "enable"]
    return ["drain", "disable"]


def gated_controls(subject_uid: int) -> dict[str, str]:
    """Per control (release, requeue, cancel), why it needs a second person's approval on
    this subject now (RULES.md#approvals): the screen offers to request one instead."""
    gated = gated_actions(subject_uid)
    return {name: gated[key] for name, key in SUBJECT_ACTIONS.items() if key in gated}
