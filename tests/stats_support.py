"""A small lab with every kind of statistic for the recorder's tests: depth, a lease, a
hold, completions, retryable and terminal failures (a dead letter) and an expired lease."""

from __future__ import annotations

from bloomops.execution import clock
from tests.engine import act, actor, claim, make_queue, make_subject, register


def busy_lab() -> None:
    make_queue("q1", required_worker_capabilities=[], max_attempts_default=3,
               lease_ttl_seconds=30)
    make_queue("q2", required_worker_capabilities=[], lease_ttl_seconds=30)
    svc = actor("worker_service")
    for n in range(5):
        make_subject("q1", name=f"a{n}")
    held = make_subject("q2", name="held")
    act("place_execution_hold", actor("operator"), subject_euid=held, expected_state="READY",
        payload={"reason": "check"})
    make_subject("q2", name="b")
    clock.advance(1)  # subjects made now are ready from the next instant on
    worker = register(svc, "stats-w")
    for outcome in ("done", "terminal", "retryable"):
        lease = claim(svc, worker, "q1")
        fields = dict(subject_euid=lease["subject_euid"], worker_euid=worker,
                      lease_euid=lease["lease_euid"], expected_state="READY")
        if outcome == "done":
            act("complete_queue_execution", svc, **fields)
        else:
            act("fail_queue_execution", svc, **fields, payload={
                "retryable": outcome == "retryable", "error_class": "PERMANENT_INPUT"
                if outcome == "terminal" else "TRANSIENT_SYSTEM",
                "error_message": "label unreadable"})
    claim(svc, register(svc, "stats-w2"), "q2")  # expires: nobody renews it
    clock.advance(31)
