"""What the operator UI does besides reading: find or register the signed-in human worker,
and run one executor action for a view. Every write goes through ``executor.execute``."""

from __future__ import annotations

import uuid
from typing import Any

from bloomops.execution import people, selectors
from bloomops.execution.executor import ActionRequest, ActionResult, Actor, execute
from bloomops.execution.objects import worker_by_key
from bloomops.execution.states import WorkerType
from bloomops.tapdb.tenancy import tenant_of


def human_worker_key(user) -> str:
    return people.human_worker_key(user.get_username())


def my_worker_euid(user) -> str | None:
    """The euid of the user's human worker, if it was registered (a read, no write)."""
    worker = worker_by_key(human_worker_key(user), tenant=tenant_of())
    return worker.euid if worker else None


def ensure_my_worker(user) -> str:
    """The user's HUMAN_SESSION worker, registered through the executor on first use.
    Raises ActionError (FORBIDDEN for roles that may not act as a human worker)."""
    euid = my_worker_euid(user)
    if euid:
        return euid
    result = execute(ActionRequest(
        action_key="register_worker",
        actor=Actor.of(user),
        idempotency_key=f"register:{human_worker_key(user)}",
        payload={
            "worker_key": human_worker_key(user),
            "worker_type": WorkerType.HUMAN_SESSION.value,
            "display_name": user.get_full_name() or user.get_username(),
        },
    ))
    return result["worker_euid"]


def heartbeat(user, worker_euid: str) -> None:
    """Liveness of a human worker: recorded whenever its user has acted."""
    execute(ActionRequest(action_key="heartbeat_worker", actor=Actor.of(user),
                          idempotency_key=uuid.uuid4().hex, worker_euid=worker_euid))


def perform(user, action_key: str, *, idempotency_key: str, **fields: Any) -> ActionResult:
    """One executor action on behalf of a signed-in user."""
    return execute(ActionRequest(action_key=action_key, actor=Actor.of(user),
                                 idempotency_key=idempotency_key, **fields))


# ---------------------------------------------------------------- dashboard presentation


def dashboard_rows(ov: selectors.Overview, trends: dict[str, list[int]]) -> list[dict]:
    """One row per queue: its summary, who can serve it (rostered, online, free slots), its
    trend. No queries."""
    return [
        {"q": s, "coverage": ov.coverage.get(s.queue_key) or selectors.Coverage(),
         "trend": trends.get(s.queue_key, [])}
        for s in ov.summaries
    ]


def matches(row: dict, text: str) -> bool:
    """Workbench free-text filter over a dead letter, hold or failure row already read."""
    props = row.get("props") or {}
    haystack = " ".join(str(v) for v in (
        row.get("subject_euid"), row.get("subject_name"), props.get("reason"),
        row.get("error_message") or props.get("error_message"),
        row.get("error_class") or props.get("error_class"), props.get("hold_code"),
    ) if v)
    return text in haystack.lower()
