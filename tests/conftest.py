"""Test set-up: a throwaway database of our own (pytest-django's ``test_bloomops``) on the
same PostgreSQL the app uses (embedded, or DATABASE_URL), with TapDB bootstrapped into it."""

from __future__ import annotations

import os
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from bloomops.execution import clock

# Fixtures shared by the UI tests (lab: the two-queue flow with a user of each role).
pytest_plugins = ["tests.web_support", "tests.bloom.fixtures"]

TAPDB_TABLES = (
    "outbox_event_attempt, outbox_event, audit_log, generic_instance_lineage, generic_instance"
)


def pytest_runtest_setup(item):
    """A test marked serial stops the PostgreSQL every process of a parallel run shares: it
    would fail the other processes' tests, so a parallel run fails it instead of running it."""
    if os.environ.get("PYTEST_XDIST_WORKER") and item.get_closest_marker("serial"):
        pytest.fail("A test marked serial runs alone: `pytest -m serial`, the rest in parallel"
                    " with `-m 'not serial'` (make test does both).", pytrace=False)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        call_command("bootstrap_tapdb", verbosity=0)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Tests create users by the dozen; PBKDF2 would dominate the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _reset_clock():
    clock.reset()
    yield
    clock.reset()


@pytest.fixture
def tenant(settings) -> str:
    """A tenant of this test's own, so committed data of other tests never shows up."""
    settings.TAPDB_TENANT_ID = str(uuid.uuid4())
    return settings.TAPDB_TENANT_ID


@pytest.fixture
def committed(transactional_db, django_db_blocker):
    """For tests on committed data across connections; TapDB rows are wiped afterwards
    (Django's flush only knows managed tables)."""
    yield
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {TAPDB_TABLES} RESTART IDENTITY CASCADE")


def make_user(username: str, *roles: str) -> User:
    user = User.objects.create_user(username=username, password="pw-" + username)
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def users(db) -> dict[str, User]:
    return {
        "worker_service": make_user("svc", "worker_service"),
        "worker_human": make_user("sci", "worker_human"),
        "operator": make_user("op", "operator"),
        "admin": make_user("adm", "admin"),
    }
