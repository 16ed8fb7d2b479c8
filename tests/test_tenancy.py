"""Tenancy as TapDB writers use it: a deployment with no tenant reads and writes rows whose
tenant_id is NULL (as Bloom writes them), one with a tenant only its own; lineage decides
what blocks a subject whatever the tenant of the lease; an expired lease is nobody's active
lease."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

from bloomops.execution import clock, selectors
from bloomops.execution.actions.steps import WORKER_CODE
from bloomops.tapdb.db import execute as sql_execute
from bloomops.tapdb.db import fetch_value
from bloomops.tapdb.instances import create_instance
from bloomops.tapdb.tenancy import for_tenant, tenant_of
from tests.api_helpers import api_for
from tests.engine import (
    SERVICE,
    act,
    actor,
    claim,
    envelope,
    make_queue,
    make_subject,
    props,
    register,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_tenant(settings):
    settings.TAPDB_TENANT_ID = None
    return None


def test_no_tenant_means_null_and_stays_indexable(settings):
    settings.TAPDB_TENANT_ID = "none"
    assert tenant_of() is None
    sql = "SELECT 1 FROM generic_instance s WHERE s.tenant_id = %(tenant)s AND x = 1"
    assert for_tenant(sql, {"tenant": None}) == (
        "SELECT 1 FROM generic_instance s WHERE s.tenant_id IS NULL AND x = 1")
    assert for_tenant(sql, {"tenant": "t"}) == sql


def test_a_deployment_without_tenant_works_on_null_rows(no_tenant):
    make_queue("q1")
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    worker = register(svc)
    lease = claim(svc, worker)
    act("complete_queue_execution", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY")
    assert envelope(subject)["state"] == "COMPLETED"
    # Everything it wrote carries no tenant, as Bloom's rows do.
    assert fetch_value("SELECT count(*) FROM generic_instance WHERE tenant_id IS NOT NULL"
                       " AND euid = ANY(%s)", [[subject, worker, lease["lease_euid"]]]) == 0
    assert fetch_value("SELECT count(*) FROM generic_instance WHERE tenant_id IS NULL"
                       " AND type = 'execution_queue'") >= 3
    assert {s.queue_key for s in selectors.queue_summaries()} == {"q1"}


def test_with_no_tenant_a_queue_or_worker_key_is_still_one_object(no_tenant):
    """One queue object per key, no duplicate worker objects (RULES.md#objects). The unique
    indexes are keyed on the tenant, and with tenant_id NULL (as Bloom writes) PostgreSQL's
    NULLs are distinct: a second writer's copy of a key was stored beside the first, and which
    one was "the queue" depended on the read. bloomops' own writes take a lock first; another
    writer's (Bloom's register_worker finds, then creates) need the database to refuse."""
    make_queue("q1")
    with pytest.raises(IntegrityError), transaction.atomic():
        make_queue("q1")
    worker = register(actor(*SERVICE), "w1")
    with pytest.raises(IntegrityError), transaction.atomic():
        create_instance(WORKER_CODE, name="w1", properties=props(worker))
    make_queue("q2")  # another key stays free
    create_instance(WORKER_CODE, name="w2", properties={**props(worker), "worker_key": "w2"})


def test_bootstrap_names_the_objects_another_writer_left_sharing_a_key(no_tenant):
    """A database whose other writer already stored two queues of one key (the index was not
    there to refuse it): attaching says which index and key, not a bare IntegrityError."""
    sql_execute("DROP INDEX bloomops_queue_key_untenanted")
    make_queue("dup")
    make_queue("dup")
    with pytest.raises(CommandError, match=r"bloomops_queue_key_untenanted: two live objects"
                                           r" .*\bdup\b.*is_deleted"):
        call_command("bootstrap_tapdb", stdout=io.StringIO())


def test_tenants_do_not_see_each_other(settings):
    settings.TAPDB_TENANT_ID = None
    make_queue("shared")
    make_subject("shared", name="null-tenant subject")
    settings.TAPDB_TENANT_ID = str(uuid.uuid4())
    make_queue("shared")
    mine = make_subject("shared", name="tenant subject")
    items, total = selectors.queue_items("shared")
    assert [i.euid for i in items] == [mine] and total == 1
    settings.TAPDB_TENANT_ID = None
    items, total = selectors.queue_items("shared")
    assert [i.name for i in items] == ["null-tenant subject"] and total == 1


def test_depth_and_page_agree_when_another_writer_leases_a_subject(tenant):
    """A lease linked to a subject blocks it whatever tenant the lease carries: the whole-
    queue count and the page (per-row form) agree."""
    make_queue("q1")
    leased = make_subject("q1", name="leased elsewhere")
    free = make_subject("q1", name="free")
    svc = actor(*SERVICE)
    worker = register(svc)
    assert claim(svc, worker)["subject_euid"] == leased
    with connection.cursor() as cur:  # the lease as another system's row (no tenant)
        cur.execute("UPDATE generic_instance SET tenant_id = NULL WHERE subtype = 'queue_lease'"
                    " AND json_addl->'properties'->>'subject_lookup_euid' = %s", [leased])
    items, total = selectors.queue_items("q1")
    assert [i.euid for i in items] == [free] and total == 1
    assert selectors.queue_depths()["q1"] == 1
    assert {s.queue_key: s.depth for s in selectors.queue_summaries()}["q1"] == 1


def test_depth_and_page_agree_when_a_hold_is_only_in_lineage(tenant):
    """Another writer cleared the envelope's hold but not the ACTIVE hold linked to the
    subject: the hold still keeps it out of the page and every count (RULES.md#holds)."""
    make_queue("q1")
    held = make_subject("q1", name="held in lineage")
    free = make_subject("q1", name="free")
    act("place_execution_hold", actor("operator"), subject_euid=held, expected_state="READY",
        payload={"reason": "check"})
    with connection.cursor() as cur:
        cur.execute("""UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,
                           '{properties,execution,hold_state}', '"NONE"'),
                           '{properties,execution,state}', '"READY"')
                       WHERE euid = %s""", [held])
    clock.advance(1)
    items, total = selectors.queue_items("q1")
    assert [i.euid for i in items] == [free] and total == 1
    assert selectors.queue_depths()["q1"] == 1
    summary = {s.queue_key: s for s in selectors.queue_summaries()}["q1"]
    assert (summary.depth, summary.held_count) == (1, 1)


def test_an_expired_lease_is_not_the_subjects_active_lease(tenant, users):
    make_queue("q1", lease_ttl_seconds=60)
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    claim(svc, register(svc))
    api = api_for(users["operator"])
    assert api.get(f"/subjects/{subject}").json()["active_lease"] is not None
    clock.advance(120)  # stored ACTIVE, but past its expiry; no sweeper ran
    body = api.get(f"/subjects/{subject}").json()
    assert body["active_lease"] is None and body["derived_state"] == "VISIBLE_IN_QUEUE"


def test_a_worker_another_system_registered_is_shown_and_only_admins_act_through_it(
        tenant, users, client):
    from bloomops.execution.errors import ActionError
    from bloomops.tapdb.instances import create_instance
    from bloomops.tapdb.templates import template_defaults

    make_queue("q1")
    make_subject("q1")
    props = template_defaults("actor/system/worker/1.0")
    props.update(worker_key="bloom-worker-1", display_name="Bloom's worker",
                 status="ONLINE", heartbeat_at="2026-11-22T00:00:00.000000Z")
    props.pop("owner_username", None)
    worker = create_instance("actor/system/worker/1.0", name="Bloom's worker",
                             properties=props).euid
    svc = actor(*SERVICE)
    with pytest.raises(ActionError) as err:
        claim(svc, worker)
    assert err.value.code == "LEASE_NOT_OWNED" and "another system" in err.value.message
    assert claim(actor("admin"), worker)["worker_euid"] == worker
    client.force_login(users["operator"])
    html = client.get("/workers/").content.decode()
    assert "Bloom&#x27;s worker" in html and "no owner · admin only" in html


def test_a_retrying_subject_held_only_in_lineage_is_not_listed_as_retrying(tenant):
    """The failures view's retrying list took "held" from the envelope alone: a subject
    another writer's hold still keeps out (RULES.md#holds) was listed as retrying, with a
    "retry now" it could not do."""
    from bloomops.execution import selectors

    make_queue("q1", retry_policy={"mode": "FIXED", "initial_delay_seconds": 600})
    svc = actor(*SERVICE)
    subjects = [make_subject("q1", name=n) for n in ("held in lineage", "retrying")]
    worker = register(svc)
    for _ in subjects:
        lease = claim(svc, worker, "q1")
        act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
            expected_state="READY", payload={"retryable": True, "error_message": "lost"})
    held = subjects[0]
    act("place_execution_hold", actor("operator"), subject_euid=held,
        expected_state="FAILED_RETRYABLE", payload={"reason": "check"})
    with connection.cursor() as cur:  # another writer cleared the envelope's hold only
        cur.execute("""UPDATE generic_instance SET json_addl = jsonb_set(jsonb_set(json_addl,
                           '{properties,execution,hold_state}', '"NONE"'),
                           '{properties,execution,state}', '"FAILED_RETRYABLE"')
                       WHERE euid = %s""", [held])
    assert [r["subject_euid"] for r in selectors.failures(kind="retrying")] == [subjects[1]]


def test_the_approvals_inbox_reads_its_subject_without_a_tenant(no_tenant, client):
    """On Bloom's rows (no tenant) the inbox joined the subject by ``tenant_id =
    a.tenant_id``, which NULL never equals: the subject's state, name and failure read
    empty, and a dead letter's requeue read "attempts kept" while the requeue reset them."""
    from django.contrib.auth.models import User

    from tests.approval_support import dead_lettered, person
    from tests.web_support import signed_in

    make_queue("q_dead", required_worker_capabilities=[])
    dead = dead_lettered("q_dead")
    ann = person("ann", "operator")
    person("bob", "operator")
    act("request_approval", ann, subject_euid=dead,
        payload={"action_key": "requeue_subject", "reason": "new aliquot arrived",
                 "parameters": {"reason": "new aliquot"}})
    [row] = [a for a in selectors.approvals(context=True)
             if a.props.get("subject_lookup_euid") == dead]
    assert (row.subject_state, row.subject_terminal, row.failure) == (
        "FAILED_TERMINAL", True, "tube cracked")
    page = signed_in(client, User.objects.get(username="bob")).get("/approvals/")
    inbox = page.content.decode().split(f"{dead}</code>")[1].split("</tr>")[0]
    assert "FAILED_TERMINAL" in inbox and "to its own queue · attempts reset to 0" in inbox
