"""Reasons everywhere it matters (RULES.md#holds, RULES.md#leases): every action that stops,
ends or changes work is refused without a reason (blank counts as missing), for the UI, the
API and workers alike, with nothing written; the reason given is in the subject's history.
Hold codes come from the lab's configured list."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import load
from tests.engine import SERVICE, act, actor, claim, counts, make_queue, make_subject, register

pytestmark = pytest.mark.django_db


def _held(op) -> str:
    subject = make_subject("q1")
    act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
        payload={"reason": "placed"})
    return subject


def _release(op, svc, reason):
    subject = _held(op)
    return lambda: act("release_execution_hold", op, subject_euid=subject,
                       expected_state="HELD", payload=reason)


def _hold(op, svc, reason):
    subject = make_subject("q1")
    return lambda: act("place_execution_hold", op, subject_euid=subject,
                       expected_state="READY", payload=reason)


def _requeue(op, svc, reason):
    subject = make_subject("q1")
    return lambda: act("requeue_subject", op, subject_euid=subject, expected_state="READY",
                       payload=reason)


def _cancel(op, svc, reason):
    subject = make_subject("q1")
    return lambda: act("cancel_subject_execution", op, subject_euid=subject,
                       expected_state="READY", payload=reason)


def _expire(op, svc, reason):
    make_subject("q1")
    lease = claim(svc, register(svc))
    return lambda: act("expire_queue_lease", actor("admin"), lease_euid=lease["lease_euid"],
                       payload=reason)


def _worker_op(operation: str) -> Callable:
    def build(op, svc, reason):
        worker = register(svc)
        return lambda: act("set_worker_status", actor("admin"), worker_euid=worker,
                           payload={"operation": operation, **reason})
    return build


def _queue_enabled(op, svc, reason):
    act("create_queue", actor("admin"), queue_key="line", payload={
        "subject_template_codes": ["content/material/specimen/1.0"], "reason": "new"})
    return lambda: act("set_queue_enabled", actor("admin"), queue_key="line",
                       expected_revision=1, payload={"enabled": False, **reason})


ACTIONS = {
    "place_execution_hold": _hold, "release_execution_hold": _release,
    "requeue_subject": _requeue, "cancel_subject_execution": _cancel,
    "expire_queue_lease": _expire, "drain": _worker_op("drain"),
    "disable": _worker_op("disable"), "retire": _worker_op("retire"),
    "set_queue_enabled": _queue_enabled,
}
MISSING = [{}, {"reason": None}, {"reason": ""}, {"reason": "  \t\n "}]


@pytest.mark.parametrize("reason", MISSING, ids=["absent", "null", "empty", "blank"])
@pytest.mark.parametrize("name", list(ACTIONS))
def test_refused_without_a_reason_and_nothing_written(tenant, name, reason):
    make_queue("q1")
    attempt = ACTIONS[name](actor("operator"), actor(*SERVICE), dict(reason))
    before = counts()
    with pytest.raises(ActionError) as err:
        attempt()
    assert err.value.code == "VALIDATION_ERROR"
    assert err.value.details["field"] == "reason"
    assert counts() == before


SUBJECT_ACTIONS = ["place_execution_hold", "release_execution_hold", "requeue_subject",
                   "cancel_subject_execution", "expire_queue_lease"]


@pytest.mark.parametrize("name", SUBJECT_ACTIONS)
def test_the_reason_given_is_in_the_subjects_history(tenant, name):
    make_queue("q1")
    ACTIONS[name](actor("operator"), actor(*SERVICE), {"reason": f"why {name}"})()
    histories = [a for a in _all_action_records() if a["action_key"] == name]
    assert [a["reason"] for a in histories] == [f"why {name}"]


def _all_action_records() -> list[dict]:
    from bloomops.tapdb.db import fetch_all

    rows = fetch_all(
        "SELECT uid FROM generic_instance WHERE NOT is_deleted AND type = 'material'")
    out: list[dict] = []
    for row in rows:
        out.extend(selectors.action_history(row["uid"]))
    return out


def test_enabling_a_worker_needs_no_reason_and_the_sweep_records_its_own(tenant):
    svc, admin = actor(*SERVICE), actor("admin")
    make_queue("q1")
    worker = register(svc)
    act("set_worker_status", admin, worker_euid=worker,
        payload={"operation": "drain", "reason": "instrument service"})
    assert load(euid=worker, tenant=tenant).props["drain_reason"] == "instrument service"
    done = act("set_worker_status", admin, worker_euid=worker, payload={"operation": "enable"})
    assert done["status"] == "ONLINE"
    assert act("expire_queue_lease", admin)["expired_count"] == 0


def test_hold_codes_come_from_the_configured_list(tenant, settings):
    op = actor("operator")
    make_queue("q1")
    settings.BLOOMOPS_HOLD_CODES = ["QC_FAIL", "LEGACY_CODE"]
    subject = make_subject("q1")
    hold = act("place_execution_hold", op, subject_euid=subject, expected_state="READY",
               payload={"reason": "bad run", "hold_code": "legacy_code"})
    assert load(euid=hold["hold_euid"], tenant=tenant).props["hold_code"] == "LEGACY_CODE"
    # The lab drops the code: new holds may not use it, the existing one still releases.
    settings.BLOOMOPS_HOLD_CODES = ["QC_FAIL"]
    other = make_subject("q1")
    before = counts()
    with pytest.raises(ActionError) as err:
        act("place_execution_hold", op, subject_euid=other, expected_state="READY",
            payload={"reason": "x", "hold_code": "LEGACY_CODE"})
    assert err.value.code == "VALIDATION_ERROR" and err.value.details["field"] == "hold_code"
    assert err.value.details["allowed"] == ["QC_FAIL"]
    assert counts() == before
    released = act("release_execution_hold", op, subject_euid=subject, expected_state="HELD",
                   payload={"reason": "rerun passed"})
    assert released["state"] == "READY"
    assert load(euid=hold["hold_euid"], tenant=tenant).props["release_reason"] == "rerun passed"


def test_the_default_hold_codes_include_the_integrity_ones():
    from django.conf import settings

    assert {"QC_FAIL", "CONTAMINATION", "INTEGRITY", "OPERATOR_HOLD"} <= set(
        settings.BLOOMOPS_HOLD_CODES)
