"""Another tenant's rows linked to ours by lineage (a shared TapDB database, another writer)
are never shown, exported or changed: every read that follows lineage to an object keeps to
the deployment's tenant (docs/RULES.md#objects)."""

from __future__ import annotations

import ast
import re
import uuid
from pathlib import Path

import pytest

from bloomops.execution.actions.steps import HOLD_CODE
from bloomops.execution.exports import export_evidence
from bloomops.execution.objects import load
from bloomops.tapdb.instances import create_instance, link
from tests.api_helpers import api_for
from tests.engine import act, actor, make_queue, make_subject

ROOT = Path(__file__).resolve().parent.parent
# An object reached through a lineage edge, or by an EUID another object names.
_LINEAGE_JOIN = re.compile(r"JOIN generic_instance (\w+)\s+ON \1\.(?:uid = \w+\."
                           r"(?:child|parent)_instance_uid|euid = )")
# The visibility tests (whether a subject has an active lease or hold) count any row linked
# to it: a foreign row can only keep our subject from being offered, never be shown or
# changed, and these run on every claim as measured (docs/RULES.md#objects). The bench
# reads its own generated data.
EXEMPT = ("bloomops/execution/sql.py", "bloomops/bench/")


def _sql_texts(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}"
                                       for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_every_object_reached_through_lineage_is_of_the_tenant():
    unfiltered = []
    for path in sorted((ROOT / "bloomops").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        if name.startswith(EXEMPT):
            continue
        for line, text in _sql_texts(path):
            for match in _LINEAGE_JOIN.finditer(text):
                if f"{match.group(1)}.tenant_id = %(tenant)s" not in text:
                    unfiltered.append(f"{name}:{line} ({match.group(1)})")
    assert unfiltered == []


_TENANT_BY_COLUMN = re.compile(r"tenant_id\s*=\s*\w+\.tenant_id")


def test_no_statement_matches_tenants_column_to_column():
    """With no tenant (Bloom's rows, tenant_id NULL) ``x.tenant_id = y.tenant_id`` is never
    true: the approvals inbox lost its subject that way. Every statement names the tenant
    as ``= %(tenant)s``, which tapdb/tenancy.py turns into ``IS NULL``."""
    found = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted((ROOT / "bloomops").rglob("*.py"))
             for line, text in _sql_texts(path) if _TENANT_BY_COLUMN.search(text)]
    assert found == []


@pytest.fixture
def foreign_hold(db, tenant):
    """Our subject, held by our operator, with another tenant's ACTIVE hold linked to it."""
    make_queue("q1")
    subject = make_subject("q1")
    act("place_execution_hold", actor("operator", username="qa"), subject_euid=subject,
        expected_state="READY", payload={"reason": "our hold"})
    other = str(uuid.uuid4())
    hold = create_instance(HOLD_CODE, name="OTHER TENANT Jane Doe", tenant_id=other,
                           properties={"status": "ACTIVE", "hold_code": "INTEGRITY",
                                       "note": "other-tenant-secret"})
    link(load(euid=subject, tenant=tenant).uid, hold.uid, "execution_subject_hold",
         tenant_id=other)
    return subject, hold.euid


def test_another_tenants_linked_row_is_never_shown(client, users, foreign_hold):
    subject, hold = foreign_hold
    client.force_login(users["operator"])
    page = client.get(f"/subjects/{subject}/").content.decode()
    api = api_for(users["worker_human"])
    history = api.get(f"/subjects/{subject}/history").content.decode()
    bundle = export_evidence(subject, actor("operator", username="qa")).data.decode()
    for shown in (page, history, bundle):
        assert hold not in shown and "other-tenant-secret" not in shown
        assert "OTHER TENANT" not in shown


def test_another_tenants_linked_row_is_never_changed(foreign_hold):
    """A cancel ended every active hold linked to the subject, another tenant's too, and
    wrote our operator's name and reason into it."""
    subject, hold = foreign_hold
    done = act("cancel_subject_execution", actor("operator", username="qa"),
               subject_euid=subject, expected_state="HELD", payload={"reason": "withdrawn"})
    assert hold not in done["holds_ended"] and len(done["holds_ended"]) == 1
    from bloomops.tapdb.db import fetch_one

    row = fetch_one("SELECT json_addl->'properties' AS p FROM generic_instance WHERE euid = %s",
                    [hold])
    assert row["p"]["status"] == "ACTIVE" and "release_reason" not in row["p"]


def _their_subject_of(lease: str, tenant: str):
    """Another tenant's subject, linked by its writer as the parent of our lease."""
    other = str(uuid.uuid4())
    theirs = create_instance("content/material/specimen/1.0", name="theirs", tenant_id=other,
                             properties={})
    link(theirs.uid, load(euid=lease, tenant=tenant).uid, "execution_subject_lease",
         tenant_id=other)
    return theirs


def test_the_sweeper_writes_no_edge_to_another_tenants_row(db, tenant):
    """The sweeper linked its action record to every lineage parent of an expired lease,
    whoever's: an edge written into another tenant's history."""
    from bloomops.execution import clock
    from bloomops.tapdb.db import fetch_value
    from tests.engine import SERVICE, claim, register

    make_queue("q1", lease_ttl_seconds=30)
    make_subject("q1")
    svc = actor(*SERVICE)
    lease = claim(svc, register(svc))["lease_euid"]
    theirs = _their_subject_of(lease, tenant)
    clock.advance(31)
    assert act("expire_queue_lease", actor("admin"))["expired_lease_euids"] == [lease]
    assert fetch_value("SELECT count(*) FROM generic_instance_lineage WHERE"
                       " child_instance_uid = %s AND relationship_type = 'executed_on'",
                       [theirs.uid]) == 0


def test_another_tenants_edge_to_our_lease_shows_it_once(db, tenant):
    from bloomops.execution import selectors
    from tests.engine import SERVICE, claim, register

    make_queue("q1")
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    lease = claim(svc, register(svc))["lease_euid"]
    _their_subject_of(lease, tenant)
    rows = [r for r in selectors.leases() if r["euid"] == lease]
    assert [r["subject_euid"] for r in rows] == [subject]


def test_another_tenants_older_row_does_not_hide_our_leases_subject(db, tenant):
    """A lease's subject was its first lineage parent of any tenant, filtered afterwards:
    with another tenant's older subject linked to our lease, the worker could no longer
    renew its own lease."""
    from tests.engine import SERVICE, claim, envelope, register

    other = str(uuid.uuid4())
    theirs = create_instance("content/material/specimen/1.0", name="theirs", tenant_id=other,
                             properties={})
    make_queue("q1")
    subject = make_subject("q1")
    svc = actor(*SERVICE)
    worker = register(svc)
    lease = claim(svc, worker)["lease_euid"]
    link(theirs.uid, load(euid=lease, tenant=tenant).uid, "execution_subject_lease",
         tenant_id=other)
    act("renew_queue_lease", svc, lease_euid=lease, worker_euid=worker, subject_euid=subject,
        payload={})
    act("complete_queue_execution", svc, lease_euid=lease, worker_euid=worker,
        expected_state="READY", payload={})
    assert envelope(subject)["state"] == "COMPLETED"


def test_a_removed_subject_is_not_read_as_a_leases_subject(client, users, db, tenant):
    """Reads find a lease's subject as the engine's writes do: a live row
    (objects.tenant_parent_sql). A subject another writer removed was shown as if live."""
    from bloomops.execution import selectors
    from bloomops.tapdb.db import execute
    from tests.engine import SERVICE, claim, register
    from tests.web_support import signed_in

    make_queue("q1")
    leased = make_subject("q1")
    svc = actor(*SERVICE)
    lease = claim(svc, register(svc))["lease_euid"]
    execute("UPDATE generic_instance SET is_deleted = true WHERE euid = %(e)s", {"e": leased})
    assert [r["subject_euid"] for r in selectors.leases() if r["euid"] == lease] == [None]
    page = signed_in(client, users["operator"]).get("/workers/")
    assert page.status_code == 200 and leased not in page.content.decode()
