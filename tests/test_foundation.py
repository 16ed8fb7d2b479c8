"""The stack stands on real PostgreSQL, TapDB's schema and Django."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import override_settings
from django.utils.html import escape

from bloomops.accounts.models import ProfileChange
from bloomops.demo.data import DEMO_QUEUES, seed_demo
from bloomops.execution import clock, selectors
from bloomops.execution.envelope import ts
from bloomops.execution.objects import load
from bloomops.tapdb import instances
from bloomops.tapdb.db import fetch_value
from bloomops.tapdb.models import AuditLog, GenericInstance, GenericInstanceLineage
from bloomops.tapdb.templates import template

pytestmark = pytest.mark.django_db


def test_bootstrap_is_idempotent(capsys):
    call_command("bootstrap_tapdb")
    first = capsys.readouterr().out
    counts = fetch_value(
        "SELECT (SELECT count(*) FROM generic_template) * 1000 + (SELECT count(*) FROM audit_log)"
    )
    call_command("bootstrap_tapdb")
    second = capsys.readouterr().out
    assert "nothing changed" in first  # the session fixture already bootstrapped
    assert "nothing changed" in second
    assert counts == fetch_value(
        "SELECT (SELECT count(*) FROM generic_template) * 1000 + (SELECT count(*) FROM audit_log)"
    )


def test_bootstrap_seeds_every_required_template():
    for code in [
        "data/execution/queue/1.0",
        "data/execution/queue_lease/1.0",
        "data/execution/execution_record/1.0",
        "data/execution/hold/1.0",
        "data/execution/dead_letter/1.0",
        "actor/system/worker/1.0",
        "content/material/specimen/1.0",
        "data/analysis/analysis_request/1.0",
        "data/analysis/artifact/1.0",
    ]:
        assert template(code).uid
    for action in [
        "register_worker", "heartbeat_worker", "claim_queue_item", "renew_queue_lease",
        "release_queue_lease", "complete_queue_execution", "fail_queue_execution",
        "place_execution_hold", "release_execution_hold", "requeue_subject",
        "cancel_subject_execution", "expire_queue_lease",
    ]:
        assert template(f"action/execution_queue/{action}/1.0").uid


def test_unmanaged_model_insert_gets_trigger_euid_and_audit_row(tenant):
    spec = template("content/material/specimen/1.0")
    row = GenericInstance.objects.create(
        name="orm specimen",
        tenant_id=tenant,
        polymorphic_discriminator="content_instance",
        category=spec.category,
        type=spec.type,
        subtype=spec.subtype,
        version=spec.version,
        template_id=spec.uid,
        json_addl={"properties": {"site": "sfo"}},
    )
    assert row.euid.startswith("Z-MX-")
    assert row.euid_seq > 0
    assert row.domain_code == "Z"
    audit = AuditLog.objects.filter(rel_table_name="generic_instance", rel_table_uid_fk=row.uid)
    assert audit.filter(operation_type="INSERT", rel_table_euid_fk=row.euid).count() == 1

    GenericInstance.objects.filter(uid=row.uid).update(name="renamed")
    update = audit.get(operation_type="UPDATE", column_name="name")
    assert (update.old_value, update.new_value) == ("orm specimen", "renamed")


def test_lineage_helper_finds_parents_and_children_by_relationship_type(tenant):
    code = "content/material/specimen/1.0"
    a = instances.create_instance(code, name="a", properties={})
    b = instances.create_instance(code, name="b", properties={})
    c = instances.create_instance(code, name="c", properties={})
    edge = instances.link(a.uid, b.uid, "derived_from")
    instances.link(a.uid, c.uid, "aliquot_of")
    assert edge.euid.startswith("Z-EDG-")
    assert GenericInstanceLineage.objects.get(uid=edge.uid).relationship_type == "derived_from"
    assert [i.euid for i in instances.children(a.uid, "derived_from")] == [b.euid]
    assert [i.euid for i in instances.children(a.uid, "aliquot_of")] == [c.euid]
    assert sorted(i.euid for i in instances.children(a.uid)) == sorted([b.euid, c.euid])
    assert [i.euid for i in instances.parents(c.uid, "aliquot_of")] == [a.euid]
    assert list(instances.parents(c.uid, "derived_from")) == []


def test_the_four_role_groups_exist():
    assert set(Group.objects.values_list("name", flat=True)) >= {
        "worker_service", "worker_human", "operator", "admin"
    }


@pytest.mark.parametrize("path", ["/", "/?x=1"])
def test_pages_redirect_to_sign_in_when_signed_out(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_demo_seed_twice_creates_nothing_new(tenant):
    first = seed_demo()
    assert len(first.queues_created) == 11
    assert 250 <= first.subjects_created <= 350
    before = fetch_value("SELECT count(*) FROM generic_instance")
    users_before = User.objects.count()
    second = seed_demo()
    assert second.queues_created == [] and second.subjects_created == 0
    assert second.users_created == []
    # people sign with their names: an auditor reads "Quinn Okafor", not "qa"
    assert User.objects.get(username="qa").get_full_name() == "Quinn Okafor"
    assert fetch_value("SELECT count(*) FROM generic_instance") == before
    assert User.objects.count() == users_before
    assert {q["queue_key"] for q in selectors.queues()} == {q["queue_key"] for q in DEMO_QUEUES}
    # a role an admin took away stays away: the next make run gave it back without a record
    User.objects.get(username="scientist").groups.clear()
    seed_demo()
    assert not User.objects.get(username="scientist").groups.exists()
    made = ProfileChange.objects.get(username="qa")
    assert (made.changed_by, made.after["roles"]) == ("seed_demo", ["operator"])


def test_the_demo_gives_qa_work_to_practise_on(client, tenant):
    """The demo's workers only failed items in ways that retry: a new QA operator had no dead
    letter to requeue and no integrity hold to release on a second person's approval."""
    from bloomops.demo.data import DEAD_LETTERS

    seed_demo()
    letters = selectors.dead_letters()
    assert sorted(d["props"]["error_message"] for d in letters) == sorted(
        m for _, m in DEAD_LETTERS)
    assert {d["subject_state"] for d in letters} == {"FAILED_TERMINAL"}
    assert sorted(h["props"]["hold_code"] for h in selectors.active_holds()) == [
        "AWAITING_INFORMATION", "QC_FAIL"]
    adapter = next(w for w in selectors.workers() if w.worker_key == "demo://qc-fluorometer")
    assert adapter.computed_status == "RETIRED"  # not left looking alive, or lost
    # and a pipeline run that never reported back, waiting an hour already
    (lost,) = selectors.outside_work()
    assert (lost["queue_key"], lost["dispatch"]["run_id"]) == ("analysis_dispatch",
                                                               "wf-demo-0412")
    assert lost["since"] < ts(clock.now() - timedelta(minutes=59))
    # its history reads in order: registered, claimed, sent out
    done = sorted((a["executed_at"], a["action_key"]) for a in selectors.action_history(
        load(euid=lost["subject_euid"], tenant=tenant).uid))
    assert [k for _, k in done] == [
        "register_subject", "claim_queue_item", "complete_queue_execution"]
    launcher = next(w for w in selectors.workers()
                    if w.worker_key == "demo://pipeline-launcher-v1")
    assert launcher.computed_status == "RETIRED"
    client.force_login(User.objects.get(username="qa"))
    html = client.get("/workbench/").content.decode()
    assert all(d["subject_euid"] in html for d in letters)
    assert "contamination suspected" in html
    assert lost["subject_euid"] in html.split('id="h-outside"')[1].split("</section>")[0]


def test_dashboard_depths_equal_a_direct_count(client, tenant):
    seed_demo()
    client.force_login(User.objects.get(username="qa"))
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    # An independent count straight from the envelopes: every READY demo subject is due and
    # unheld (QA's practice work is HELD or FAILED_TERMINAL), so each queue's depth is the
    # number of READY subjects routed to it.
    direct = dict(
        (r[0], r[1])
        for r in _rows(
            "SELECT json_addl->'properties'->'execution'->>'next_queue_key', count(*)"
            " FROM generic_instance WHERE tenant_id = %s AND NOT is_deleted"
            " AND json_addl->'properties'->'execution'->>'state' = 'READY' GROUP BY 1",
            [tenant],
        )
    )
    assert len(direct) == 11
    for spec in DEMO_QUEUES:
        summary = next(s for s in response.context["summaries"] if s.queue_key == spec["queue_key"])
        assert summary.depth == direct[spec["queue_key"]]
        assert escape(spec["display_name"]) in html


def _rows(sql, params):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


@override_settings(DEBUG=False)
def test_demo_password_is_refused_when_debug_is_off(client):
    user = User.objects.create_user("demo-like", password="bloomops")
    wrong = client.post("/accounts/login/", {"username": user.username, "password": "not-it"})
    response = client.post("/accounts/login/", {"username": user.username, "password": "bloomops"})
    assert response.status_code == 200
    # refused exactly as a wrong password: the answer does not confirm the password was right
    assert response.context["form"].errors == wrong.context["form"].errors
    assert "demo password" not in response.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(DEBUG=True)
def test_demo_password_works_when_debug_is_on(client):
    User.objects.create_user("demo-like", password="bloomops")
    response = client.post("/accounts/login/", {"username": "demo-like", "password": "bloomops"})
    assert response.status_code == 302


def test_unconfigured_scientists_can_do_every_step_of_the_demo():
    """The default human capabilities (settings) are exactly what the demo's queues need, so
    a fresh `make run` lets the demo scientist claim from every queue and nothing more."""
    from django.conf import settings as django_settings

    needed = {c for q in DEMO_QUEUES for c in q.get("required_worker_capabilities", [])}
    assert set(django_settings.DEMO_HUMAN_CAPABILITIES.split(",")) == needed
