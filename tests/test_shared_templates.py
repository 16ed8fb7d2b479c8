"""One template row per semantic code on a database another writer (Bloom) also seeds: our
bootstrap never seeds a duplicate nor rewrites theirs, lookups are deterministic, and
bloomops' action policy applies to whichever action template is in use."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from bloomops.tapdb import templates
from bloomops.tapdb.bootstrap import BootstrapReport, seed_templates
from bloomops.tapdb.db import fetch_value
from tests.engine import SERVICE, actor, claim, make_queue, make_subject, register

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_template_cache():
    """The rows these tests add roll back with the test; the process cache must follow."""
    yield
    templates.clear_cache()


def _foreign_template(category: str, type_: str, subtype: str, semantic: str,
                      json_addl: dict | None = None) -> int:
    """A template as another writer seeds it: its own category (instance prefix)."""
    with connection.cursor() as cur:
        cur.execute(f'CREATE SEQUENCE IF NOT EXISTS "{category.lower()}_instance_seq"')
        cur.execute(
            """INSERT INTO generic_template (euid, euid_prefix, euid_seq, name,
                   polymorphic_discriminator, category, type, subtype, version, instance_prefix,
                   instance_polymorphic_identity, json_addl, bstatus, is_singleton)
               VALUES ('', '', 0, %s, 'generic_template', %s, %s, %s, '1.0', %s,
                       'generic_instance', %s::jsonb, 'active', false) RETURNING uid""",
            [f"{subtype} (foreign)", category, type_, subtype, category,
             json.dumps({"semantic_category": semantic, **(json_addl or {})})])
        uid = cur.fetchone()[0]
    templates.clear_cache()
    return uid


def test_bootstrap_never_seeds_a_code_another_writer_seeded():
    _foreign_template("BDT", "material", "plasma", "content", {"properties": {"x": 1}})
    ours = {"name": "Plasma", "polymorphic_discriminator": "content_template", "category": "MX",
            "type": "material", "subtype": "plasma", "version": "1.0", "instance_prefix": "MX",
            "json_addl": {"semantic_category": "content", "properties": {"y": 2}}}
    report = BootstrapReport()
    seed_templates(report, [ours])
    assert report.templates_inserted == [] and report.templates_updated == []
    assert report.templates_foreign == ["content/material/plasma/1.0"]
    assert fetch_value("SELECT count(*) FROM generic_template WHERE subtype = 'plasma'") == 1
    assert fetch_value("SELECT json_addl->>'properties' FROM generic_template"
                       " WHERE subtype = 'plasma'") == '{"x": 1}'


def test_the_first_row_of_a_duplicated_code_is_the_one_in_use():
    code = "action/execution_queue/claim_queue_item/1.0"
    ours = templates.all_templates()[code].uid
    _foreign_template("BAC", "execution_queue", "claim_queue_item", "action")
    for _ in range(3):
        templates.clear_cache()
        assert templates.all_templates()[code].uid == ours


def test_our_action_policy_applies_to_another_writers_action_template(tenant):
    """Bloom's action templates carry no allowed_roles: the roles come from our pack."""
    code = "action/execution_queue/claim_queue_item/1.0"
    with connection.cursor() as cur:
        cur.execute("UPDATE generic_template SET is_deleted = true WHERE uid = %s",
                    [templates.all_templates()[code].uid])
    foreign = _foreign_template("BAC", "execution_queue", "claim_queue_item", "action")
    assert templates.all_templates()[code].uid == foreign
    make_queue("q1")
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    result = claim(svc, register(svc))
    assert result["subject_euid"] == subject
    assert fetch_value("SELECT template_uid FROM generic_instance WHERE euid = %s",
                       [result.action_euid]) == foreign
    with pytest.raises(Exception) as err:
        claim(actor("operator"), register(svc))
    assert getattr(err.value, "code", None) == "FORBIDDEN"


def test_a_short_template_name_two_templates_share_is_said_as_such(tenant):
    """With a second template of subtype specimen (another writer's type), "specimen" was
    refused as "no template specimen": a file that applied yesterday failed without saying
    why."""
    from bloomops.execution.errors import ActionError
    from tests.engine import act

    _foreign_template("BX", "sample", "specimen", "content")
    with pytest.raises(ActionError) as err:
        act("create_queue", actor("admin", username="adm"), queue_key="amb",
            payload={"subject_template_codes": ["specimen"], "reason": "x"})
    assert "specimen names 2 templates (" in err.value.message
    assert "content/sample/specimen/1.0" in err.value.message
