"""Timestamps as other TapDB writers store them (``Z``, ``+00:00``, other offsets, with and
without fractions, no offset at all): visibility, order and lease expiry are right for every
form, while the queue-order index still serves the reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from bloomops.execution import clock, selectors
from bloomops.execution.policy import lease_is_active
from bloomops.tapdb.db import fetch_value
from tests.engine import SERVICE, actor, claim, make_queue, make_subject, props, register

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)


def _set(euid: str, path: list[str], value) -> None:
    """Write a field as another system would: raw SQL, its own timestamp format."""
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_instance SET json_addl = jsonb_set(json_addl, %s, %s::jsonb)"
                    " WHERE euid = %s", [path, json.dumps(value), euid])


@pytest.fixture
def mixed(tenant):
    clock.freeze(NOW)
    make_queue("q1")
    made = {}
    # name: (ready_at, due_at) as written by some writer; the instant in UTC in the comment
    for name, ready, due in [
        ("z", "2026-11-22T10:00:00Z", "2026-11-23T08:00:00Z"),                # due 08:00
        ("plus00", "2026-11-22T10:00:00+00:00", "2026-11-23T09:00:00+02:00"),  # due 07:00
        ("plus02", "2026-11-22T12:00:00+02:00", "2026-11-23T05:30:00-03:00"),  # due 08:30
        ("naive", "2026-11-22T09:00:00", "2026-11-23T07:30:00.250000"),        # due 07:30
        ("later", "2026-11-22T09:30:00.5-01:00", None),                        # ready 10:30:00.5
    ]:
        euid = make_subject("q1", name=name)
        _set(euid, ["properties", "execution", "ready_at"], ready)
        _set(euid, ["properties", "execution", "due_at"], due)
        made[name] = euid
    return made


def test_visibility_and_order_are_right_for_every_form(mixed):
    items, total = selectors.queue_items("q1")
    # "later" is not ready until 10:30:00.5 UTC; the rest by due instant, not by text.
    assert [i.name for i in items] == ["plus00", "naive", "z", "plus02"] and total == 4
    assert selectors.queue_depths()["q1"] == 4
    assert {s.queue_key: s.depth for s in selectors.queue_summaries()}["q1"] == 4
    later = selectors.subject_diagnostics(mixed["later"])
    assert later is not None and not later.visible
    assert "NOT_READY_YET" in later.reason_codes
    clock.freeze(datetime(2026, 11, 22, 10, 31, tzinfo=UTC))
    assert selectors.queue_depths()["q1"] == 5


def test_a_claim_takes_the_first_by_instant(mixed):
    svc = actor(*SERVICE)
    assert claim(svc, register(svc))["subject_euid"] == mixed["plus00"]


def test_lease_expiry_is_read_as_an_instant_whatever_the_offset(mixed):
    svc = actor(*SERVICE)
    lease = claim(svc, register(svc))
    subject = lease["subject_euid"]
    assert selectors.queue_depths()["q1"] == 3
    # 11:00 at +05:00 is 06:00 UTC: long expired, though its text sorts after "10:15Z".
    _set(lease["lease_euid"], ["properties", "expires_at"], "2026-11-22T11:00:00+05:00")
    assert not lease_is_active(props(lease["lease_euid"]), "2026-11-22T10:15:00.000000Z")
    assert selectors.queue_depths()["q1"] == 4
    assert selectors.subject_diagnostics(subject).derived_state == "VISIBLE_IN_QUEUE"
    # 09:00 at -05:00 is 14:00 UTC: still active, though its text sorts before "10:15Z".
    _set(lease["lease_euid"], ["properties", "expires_at"], "2026-11-22T09:00:00-05:00")
    assert selectors.queue_depths()["q1"] == 3
    assert selectors.subject_diagnostics(subject).derived_state == "LEASED"


def test_the_sql_and_python_readings_of_a_timestamp_agree():
    from bloomops.execution.envelope import normalize_ts

    for text in ["2026-11-22T10:00:00Z", "2026-11-22T10:00:00+00:00",
                 "2026-11-22T12:00:00+02:00", "2026-11-22T09:30:00.5-01:00",
                 "2026-11-22T09:00:00", "2026-11-22T09:00:00.123456Z", "2026-11-22T10:00:00+0530"]:
        assert fetch_value("SELECT bloomops_utc(%s)", [text]) == normalize_ts(text), text
    for junk in ["tomorrow", "2026-13-45T10:00:00Z", "", "2026-11-22"]:
        assert fetch_value("SELECT bloomops_utc(%s)", [junk]) is None, junk
    # our own form passes as it is (27 characters, "." 20th, "Z" last), character counts
    # not bytes; one character more or less is parsed
    assert fetch_value("SELECT bloomops_utc(%s)", ["2026-11-22T09:00:00.12345Z"]) == (
        "2026-11-22T09:00:00.123450Z")
    assert fetch_value("SELECT bloomops_utc(%s)", ["2026-11-22T09:00:00.1234567Z"]) is None
    assert fetch_value("SELECT bloomops_utc(%s)", ["2026-11-22T09:00:00.12345ÅZ"]) == (
        "2026-11-22T09:00:00.12345ÅZ")
