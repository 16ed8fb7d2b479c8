"""Helpers for approval tests: people with passwords (a decision is signed by re-entering
one), a subject under an integrity hold, a dead-lettered one, and the three approval
actions."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

from bloomops.execution.executor import ActionRequest, Actor, execute
from tests.engine import SERVICE, act, actor, claim, key, make_subject, register


def password_of(username: str) -> str:
    return f"pw-{username}-sign"


def person(username: str, *roles: str, full_name: str = "") -> Actor:
    user, _ = User.objects.get_or_create(username=username)
    first, _, last = full_name.partition(" ")
    user.first_name, user.last_name = first, last
    user.set_password(password_of(username))
    user.save()
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return Actor(username=username, roles=frozenset(roles))


def integrity_held(op: Actor, code: str = "QC_FAIL", queue: str = "q1") -> tuple[str, str]:
    subject = make_subject(queue)
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"hold_code": code, "reason": "control out of range"})["hold_euid"]
    return subject, hold


def dead_lettered(queue: str = "q1") -> str:
    """A subject a service worker failed for good: FAILED_TERMINAL with an OPEN dead letter."""
    svc = actor(*SERVICE)
    subject = make_subject(queue)
    worker = register(svc)
    lease = claim(svc, worker, queue)
    act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": False, "error_message": "tube cracked"})
    return subject


def request_release(op: Actor, subject: str, hold: str, **payload: Any):
    payload.setdefault("action_key", "release_execution_hold")
    payload.setdefault("parameters", {"reason": "rerun passed"})
    payload.setdefault("reason", "QC rerun passed, please release")
    return act("request_approval", op, subject_euid=subject, hold_euid=hold, payload=payload)


def decide(who: Actor, approval: str, decision: str = "APPROVED", *,
           password: str | None = None, reason: str = "checked the rerun", **fields: Any):
    return execute(ActionRequest(
        action_key="decide_approval", actor=who, idempotency_key=fields.pop(
            "idempotency_key", key("decide")),
        payload={"approval_euid": approval, "decision": decision, "reason": reason},
        signature_password=password_of(who.username) if password is None else password,
        **fields))
