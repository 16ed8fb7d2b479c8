"""The runtime database role (docs/DEPLOY.md): the web server and the workers cannot rewrite
the audit trail or alter TapDB's tables, and still do all their work.

These tests connect to the test database as the runtime role; the suite itself runs as the
owner (it creates and truncates its database)."""

from __future__ import annotations

import re
import secrets
from contextlib import contextmanager

import psycopg2
import pytest
from django.db import connection
from psycopg2 import errors

from bloomops.tapdb.db import execute, fetch_value
from bloomops.tapdb.roles import ensure_runtime_role, runtime_role
from bloomops.worker.outbox import Dispatcher, LogSink
from tests.engine import SERVICE, act, actor, claim, make_queue, make_subject, register


@pytest.fixture
def runtime(settings, db) -> dict:
    """Credentials of the runtime role on the test database. With a DATABASE_URL and no
    separate runtime role configured, a role of the tests' own is made by the same code."""
    if runtime_role() is None:
        roles = {k: dict(v) for k, v in settings.DATABASE_ROLES.items()}
        roles["runtime"].update(USER="bloomops_app_test", PASSWORD=secrets.token_urlsafe(16))
        settings.DATABASE_ROLES = roles
        ensure_runtime_role()
    role = settings.DATABASE_ROLES["runtime"]
    return {"USER": role["USER"], "PASSWORD": role["PASSWORD"]}


@contextmanager
def raw_runtime_connection(runtime: dict):
    d = connection.settings_dict
    conn = psycopg2.connect(dbname=d["NAME"], user=runtime["USER"],
                            password=runtime["PASSWORD"] or None, host=d["HOST"] or None,
                            port=d["PORT"] or None)
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def django_as(runtime: dict):
    """Django's own connection (the executor's) switched to the runtime role."""
    connection.close()
    saved = {k: connection.settings_dict[k] for k in ("USER", "PASSWORD")}
    connection.settings_dict.update(runtime)
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)


REFUSED = [
    "UPDATE audit_log SET changed_by = 'someone else'",
    "DELETE FROM audit_log",
    "TRUNCATE audit_log",
    "ALTER TABLE generic_instance ADD COLUMN forged text",
    "ALTER TABLE generic_instance DISABLE TRIGGER audit_update_generic_instance",
    "DROP TABLE audit_log",
    "DELETE FROM generic_instance",
    "UPDATE generic_template SET name = 'forged'",
    "CREATE TABLE intruder (id int)",
]


@pytest.mark.parametrize("statement", REFUSED)
def test_the_runtime_role_cannot_rewrite_the_audit_trail_or_alter_tapdb(
        runtime, committed, statement):
    make_queue("q1")
    make_subject("q1")  # audit rows to tamper with
    audit_before = fetch_value("SELECT count(*) FROM audit_log")
    assert audit_before > 0
    with raw_runtime_connection(runtime) as conn, conn.cursor() as cur:
        cur.execute("SELECT current_user")
        assert cur.fetchone()[0] == runtime["USER"]
        with pytest.raises(errors.InsufficientPrivilege):
            cur.execute(statement)
    assert fetch_value("SELECT count(*) FROM audit_log") == audit_before
    assert fetch_value("SELECT count(*) FROM audit_log WHERE changed_by = 'someone else'") == 0


def test_actions_through_the_executor_work_as_the_runtime_role(runtime, committed, tenant):
    make_queue("q1")
    subject = make_subject("q1")
    audit_before = fetch_value("SELECT count(*) FROM audit_log")
    with django_as(runtime):
        assert fetch_value("SELECT current_user") == runtime["USER"]
        svc = actor(*SERVICE)  # a Django user row, written as the runtime role
        worker = register(svc, capabilities=[])
        lease = claim(svc, worker, "q1")
        assert lease["subject_euid"] == subject
        done = act("complete_queue_execution", svc, lease_euid=lease["lease_euid"],
                   worker_euid=worker, expected_state="READY")
        assert done["state"] == "COMPLETED"
        # TapDB's triggers still write the audit trail, naming the person
        changed_by = fetch_value(
            "SELECT changed_by FROM audit_log WHERE rel_table_euid_fk = %s"
            " AND column_name = 'json_addl' ORDER BY uid DESC LIMIT 1", [subject])
        assert changed_by == svc.username
        # the outbox dispatcher claims and marks events as the runtime role too
        dispatcher = Dispatcher(LogSink())
        try:
            assert dispatcher.drain() > 0
        finally:
            dispatcher.close()
    assert fetch_value("SELECT count(*) FROM audit_log") > audit_before
    assert fetch_value("SELECT count(*) FROM outbox_event WHERE status <> 'processed'") == 0


def test_sign_in_and_api_tokens_work_as_the_runtime_role(runtime, committed, client):
    from django.contrib.auth.models import User

    from bloomops.accounts.tokens import create_token, user_for_token
    from tests.engine import GIVEN

    User.objects.create_user("runtime-user", password="a-long-password")
    with django_as(runtime):
        wrong = client.post("/accounts/login/", {"username": "runtime-user", "password": "x"})
        assert wrong.status_code == 200  # the failure is recorded (django-axes' table)
        ok = client.post("/accounts/login/",
                         {"username": "runtime-user", "password": "a-long-password"})
        assert ok.status_code == 302  # the session is stored (django_session)
        _, token = create_token("runtime-user", **GIVEN)
        assert user_for_token(token).username == "runtime-user"


def test_grants_are_exact_and_reapplied_without_change(runtime, committed):
    role = runtime["USER"]
    assert ensure_runtime_role() == []  # bootstrap already did everything
    execute(f'GRANT UPDATE, DELETE ON audit_log TO "{role}"')  # a stray grant by hand
    changes = ensure_runtime_role()
    assert changes == ["audit_log: revoked DELETE, UPDATE"]
    assert not fetch_value("SELECT has_table_privilege(%s, 'audit_log', 'UPDATE')", [role])
    assert fetch_value("SELECT has_table_privilege(%s, 'audit_log', 'INSERT')", [role])
    assert ensure_runtime_role() == []


def test_schema_commands_use_the_owner_and_everything_else_the_runtime_role(monkeypatch):
    from bloomops.pgserver import db_role

    monkeypatch.delenv("BLOOMOPS_DB_ROLE", raising=False)
    assert db_role(["manage.py", "migrate"]) == "owner"
    assert db_role(["manage.py", "bootstrap_tapdb"]) == "owner"
    assert db_role(["manage.py", "run_worker"]) == "runtime"
    assert db_role(["gunicorn", "bloomops.wsgi:application"]) == "runtime"
    monkeypatch.setenv("BLOOMOPS_DB_ROLE", "owner")
    assert db_role(["gunicorn", "bloomops.wsgi:application"]) == "owner"
    monkeypatch.setenv("BLOOMOPS_DB_ROLE", "root")
    with pytest.raises(ValueError):
        db_role(["manage.py", "migrate"])


@pytest.mark.django_db
def test_the_deployment_guide_lists_the_grants_the_role_is_given():
    """docs/DEPLOY.md's table is what an admin creating the role by hand follows: every table
    the runtime role may not rewrite is listed with exactly what it is given (the people's
    change record was listed among the tables it may update and delete)."""
    from pathlib import Path

    from bloomops.tapdb.roles import wanted_grants

    guide = (Path(__file__).resolve().parent.parent / "docs" / "DEPLOY.md").read_text()
    rows = {}
    for line in guide.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith("SELECT"):
            for table in re.findall(r"`(\w+)`", cells[0]):
                rows[table] = cells[1].split(" (")[0]
    for table, privileges in wanted_grants().items():
        if "DELETE" not in privileges:  # narrower than a Django table's default
            said = set(rows.get(table, "").replace(",", " ").split())
            assert said == set(privileges), (table, rows.get(table))
