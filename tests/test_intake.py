"""Intake through actions (docs/RULES.md#intake): objects another writer made, without an
envelope or PENDING, enter a queue; new subjects are registered with validated properties;
every refusal writes nothing."""

from __future__ import annotations

import json

import pytest

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.tapdb.db import fetch_one, fetch_value
from bloomops.tapdb.templates import template
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    counts,
    envelope,
    make_queue,
    make_subject,
    props,
    register,
)

pytestmark = pytest.mark.django_db
ANALYSIS = "data/analysis/analysis_request/1.0"


def raw_sql_object(code: str, name: str, properties: dict) -> str:
    """An object as another system writes it: a plain INSERT, no envelope, no bloomops code."""
    from django.conf import settings

    ref = template(code)
    return fetch_value(
        "INSERT INTO generic_instance (euid, euid_prefix, euid_seq, name, tenant_id,"
        " polymorphic_discriminator, category, type, subtype, version, template_uid,"
        " json_addl, bstatus) VALUES ('', '', 0, %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s::jsonb, 'active') RETURNING euid",
        [name, settings.TAPDB_TENANT_ID, ref.polymorphic_identity, ref.category, ref.type,
         ref.subtype, ref.version, ref.uid,
         json.dumps({"semantic_category": ref.semantic_category, "properties": properties})])


def visible_euids(queue_key: str) -> list[str]:
    items, _ = selectors.queue_items(queue_key, limit=50, offset=0, filters={})
    return [i.euid for i in items]


def trail(euid: str, action_key: str) -> dict:
    """The action record on the subject, its outbox event and audit rows."""
    uid = fetch_value("SELECT uid FROM generic_instance WHERE euid = %s", [euid])
    record = fetch_one(
        "SELECT a.euid, a.json_addl FROM generic_instance_lineage l JOIN generic_instance a"
        " ON a.uid = l.parent_instance_uid WHERE l.child_instance_uid = %s"
        " AND l.relationship_type = 'executed_on' AND a.subtype = %s", [uid, action_key])
    events = fetch_value(
        "SELECT count(*) FROM generic_instance e WHERE e.type = 'execution'"
        " AND e.subtype = 'event' AND e.json_addl->'properties'->>'event_type' = %s"
        " AND e.json_addl->'properties'->>'aggregate_euid' = %s",
        [f"execution.{action_key}", euid])
    return {"record": record, "events": events}


def test_route_an_object_made_by_raw_sql_without_an_envelope(tenant):
    make_queue("q1", default_next_action_key="extract")
    op = actor("operator", username="qa-intake")
    euid = raw_sql_object(SPECIMEN, "Bloom specimen", {"site": "sfo", "platform": "ont"})
    assert visible_euids("q1") == []
    result = act("route_subject", op, subject_euid=euid, queue_key="q1",
                 payload={"priority": "STAT", "due_at": "2030-01-01T10:00:00+02:00"})
    assert result["envelope_created"] is True and result["revision"] == 1
    env = envelope(euid)
    assert env["state"] == "READY" and env["next_queue_key"] == "q1"
    assert env["priority"] == 300 and env["next_action_key"] == "extract"
    assert env["due_at"] == "2030-01-01T08:00:00.000000Z"
    assert props(euid)["site"] == "sfo"  # the object's own properties are kept
    assert visible_euids("q1") == [euid]
    t = trail(euid, "route_subject")
    assert t["record"]["json_addl"]["executed_by"] == "qa-intake" and t["events"] == 1
    assert fetch_value("SELECT count(*) FROM audit_log WHERE rel_table_euid_fk = %s"
                       " AND changed_by = 'qa-intake'", [euid]) >= 1
    # Work can start: a service worker claims it.
    svc = actor(*SERVICE)
    assert claim(svc, register(svc))["subject_euid"] == euid


def test_route_an_object_of_another_template_into_a_queue_that_lists_it(tenant):
    make_queue("q1")
    make_queue("analysis", subject_template_codes=[ANALYSIS])
    euid = raw_sql_object(ANALYSIS, "Analysis from LIMS", {"pipeline": "wgs-v2"})
    svc = actor(*SERVICE)
    act("route_subject", svc, subject_euid=euid, queue_key="analysis",
        payload={"template_code": ANALYSIS, "priority": 5})
    assert visible_euids("analysis") == [euid]
    other = raw_sql_object(ANALYSIS, "Analysis 2", {})
    before = counts()
    with pytest.raises(ActionError) as err:
        act("route_subject", svc, subject_euid=other, queue_key="q1")
    assert err.value.code == "SUBJECT_TEMPLATE_MISMATCH"
    with pytest.raises(ActionError) as err:  # the manifest said specimen: it is not
        act("route_subject", svc, subject_euid=other, queue_key="analysis",
            payload={"template_code": SPECIMEN})
    assert err.value.code == "SUBJECT_TEMPLATE_MISMATCH"
    assert counts() == before


def test_route_a_pending_subject_keeps_its_attempts_and_bumps_revision(tenant):
    make_queue("q1")
    euid = make_subject(None, state="PENDING", attempt_count=2, revision=4)
    result = act("route_subject", actor("admin"), subject_euid=euid, queue_key="q1",
                 expected_state="PENDING", expected_revision=4)
    env = envelope(euid)
    assert result["envelope_created"] is False and env["revision"] == 5
    assert env["attempt_count"] == 2 and env["state"] == "READY"


def test_route_is_idempotent_and_a_second_route_is_refused(tenant):
    make_queue("q1")
    op = actor("operator")
    euid = raw_sql_object(SPECIMEN, "S", {})
    first = act("route_subject", op, subject_euid=euid, queue_key="q1", idempotency_key="r-1")
    before = counts()
    again = act("route_subject", op, subject_euid=euid, queue_key="q1", idempotency_key="r-1")
    assert again.replayed and again.action_euid == first.action_euid
    with pytest.raises(ActionError) as err:
        act("route_subject", op, subject_euid=euid, queue_key="q1", idempotency_key="r-2")
    assert err.value.code == "SUBJECT_ALREADY_ROUTED"
    assert counts() == before


@pytest.mark.parametrize("bad", [
    {"priority": "SOON"}, {"ready_at": "tomorrow"}, {"due_at": 5}, {"next_action_key": 1},
])
def test_route_refuses_bad_fields(tenant, bad):
    make_queue("q1")
    euid = raw_sql_object(SPECIMEN, "S", {})
    before = counts()
    with pytest.raises(ActionError) as err:
        act("route_subject", actor("operator"), subject_euid=euid, queue_key="q1",
            payload=bad)
    assert err.value.code == "VALIDATION_ERROR" and err.value.details["field"] == next(iter(bad))
    assert counts() == before


def test_route_refuses_engine_objects_unknown_queue_disabled_queue(tenant):
    q = make_queue("q1")
    make_queue("off", enabled=False, disabled_reason="instrument down")
    op = actor("operator")
    euid = raw_sql_object(SPECIMEN, "S", {})
    before = counts()
    for fields, code in [
        (dict(subject_euid=q["euid"], queue_key="q1"), "NOT_FOUND"),  # no subject at all
        (dict(subject_euid=euid, queue_key="nope"), "NOT_FOUND"),
        (dict(subject_euid=euid, queue_key="off"), "QUEUE_DISABLED"),
        (dict(subject_euid=euid), "VALIDATION_ERROR"),
    ]:
        with pytest.raises(ActionError) as err:
            act("route_subject", op, **fields)
        assert err.value.code == code, fields
    assert counts() == before


def test_register_creates_a_routed_subject_with_declared_properties(tenant):
    make_queue("q1", site_scope=["sfo"])
    svc = actor(*SERVICE, username="lims")
    result = act("register_subject", svc, queue_key="q1", payload={
        "template_code": SPECIMEN, "name": "  Tube 17 ", "priority": "URGENT",
        "properties": {"site": "sfo", "assay": "rna"}})
    euid = result["subject_euid"]
    assert result["revision"] == 1 and result["state"] == "READY"
    p = props(euid)
    assert p["site"] == "sfo" and p["assay"] == "rna" and p["execution"]["priority"] == 200
    assert fetch_value("SELECT name FROM generic_instance WHERE euid = %s", [euid]) == "Tube 17"
    assert visible_euids("q1") == [euid]
    assert trail(euid, "register_subject")["events"] == 1


@pytest.mark.parametrize("payload,field", [
    ({"properties": {"colour": "red"}}, "properties"),
    ({"properties": {"site": {"code": "sfo"}}}, "properties"),
    ({"properties": {"execution": {"state": "READY"}}}, "properties"),
    ({"properties": "site=sfo"}, "properties"),
    ({"name": " "}, "name"),
    ({"template_code": None}, "template_code"),
])
def test_register_refuses_invalid_subjects(tenant, payload, field):
    make_queue("q1")
    body = {"template_code": SPECIMEN, "name": "S", **payload}
    before = counts()
    with pytest.raises(ActionError) as err:
        act("register_subject", actor("operator"), queue_key="q1", payload=body)
    assert err.value.code == "VALIDATION_ERROR" and err.value.details["field"] == field
    assert counts() == before


def test_register_refuses_engine_and_unknown_templates(tenant):
    make_queue("q1", subject_template_codes=[SPECIMEN, "data/execution/queue/1.0"])
    before = counts()
    for code in ("data/execution/queue/1.0", "content/material/unicorn/1.0"):
        with pytest.raises(ActionError) as err:
            act("register_subject", actor("admin"), queue_key="q1",
                payload={"template_code": code, "name": "x"})
        assert err.value.code == "NOT_FOUND"
    assert counts() == before
