"""Which operator controls a screen offers for what it shows: only those the engine would
accept in the current state (the action templates' allowed states, docs/RULES.md#holds),
so a person never meets a button that can only be refused. The engine checks again."""

from __future__ import annotations

from typing import Any

from bloomops.execution import selectors
from bloomops.execution.approvals import gated_actions
from bloomops.execution.context import action_spec
from bloomops.execution.states import WorkerStatus, WorkerType
from bloomops.web.bulk import BULK_ACTIONS

# Per control (hold, release, requeue, cancel), the action it runs: the bulk verbs'.
SUBJECT_ACTIONS = {verb: words["action_key"] for verb, words in BULK_ACTIONS.items()
                   if not words.get("asks")}


def subject_states() -> dict[str, tuple[str, ...]]:
    """Per control, the subject states it is offered in: those its action runs from."""
    return {name: action_spec(key).runs_from for name, key in SUBJECT_ACTIONS.items()}


def worker_operations(props: dict[str, Any]) -> list[str]:
    """The status operations a worker row offers: drain while it takes work, disable until
    it is disabled, enable once it is draining or disabled, retire a disabled service or
    instrument worker (for good: it frees its account's place, RULES.md#leases); a retired
    worker none. A person's own worker is never retired: it is theirs while they work here."""
    status = props.get("status")
    draining = status == WorkerStatus.DRAINING or bool(props.get("drain_requested"))
    if status == WorkerStatus.RETIRED:
        return []
    if status == WorkerStatus.DISABLED:
        return ["enable"] + ([] if props.get("worker_type") == WorkerType.HUMAN_SESSION
                             else ["retire"])
    if draining:
        return ["disable", "enable"]
    return ["drain", "disable"]


def gated_controls(subject_uid: int) -> dict[str, str]:
    """Per control (release, requeue, cancel), why it needs a second person's approval on
    this subject now (RULES.md#approvals): the screen offers to request one instead."""
    gated = gated_actions(subject_uid)
    return {name: gated[key] for name, key in SUBJECT_ACTIONS.items() if key in gated}


def mark_rejections(holds: list[dict], dead_letters: list[dict], requeue_gate: bool) -> None:
    """Each gated hold (``rejected``) and, while requeues are gated, each dead letter whose
    last decided request (since it began) was rejected, with that approval: its asker
    otherwise saw the row offer "Ask" again as if nothing had been asked. A request asked
    after the rejection and withdrawn or expired is the last word instead, and the row
    reads as never asked. One query, when any is gated."""
    gated = [h for h in holds if h.get("gated")]
    letters = dead_letters if requeue_gate else []
    if not gated and not letters:
        return
    found = selectors.approvals(decided=True, limit=500, subject_euids=sorted(
        {h["subject_euid"] for h in gated} | {d["subject_euid"] for d in letters}))

    def rejected(last: selectors.ApprovalRow | None) -> selectors.ApprovalRow | None:
        return last if last is not None and last.status == "REJECTED" else None

    for h in gated:  # newest first: the first naming the hold is its last
        h["rejected"] = rejected(next((a for a in found if a.props.get("action_key") ==
                                       "release_execution_hold" and h["euid"] in dict(a.holds)),
                                      None))
    for d in letters:
        d["rejected"] = rejected(next((a for a in found
                                       if a.props.get("action_key") == "requeue_subject"
                                       and a.props.get("subject_lookup_euid") == d["subject_euid"]
                                       and a.created_dt >= d["created_dt"]), None))


# The waiting approvals a screen marks its rows by (a lab has a handful at a time).
MAX_WAITING_SHOWN = 1000


def requests_waiting() -> list[selectors.ApprovalRow]:
    """The approvals waiting for a decision, for marking what is asked already (one read;
    the decided ones pile up for years and are not read)."""
    return selectors.approvals_waiting(limit=MAX_WAITING_SHOWN).rows


def requeues_asked(waiting: list[selectors.ApprovalRow]) -> set[str]:
    """The subjects whose requeue waits for a second person."""
    return {a.props.get("subject_lookup_euid") for a in waiting
            if a.props.get("action_key") == "requeue_subject"}


def releases_asked(waiting: list[selectors.ApprovalRow]) -> set[str]:
    """The holds whose release waits for a second person."""
    return {euid for a in waiting if a.props.get("action_key") == "release_execution_hold"
            for euid, _ in a.holds}
