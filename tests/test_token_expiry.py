"""API tokens expire (default 90 days, `create_api_token --days N`); an expired token is 401
like a revoked one; list_api_tokens shows expiry and last use."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.utils import timezone

from bloomops.accounts.models import ApiToken
from bloomops.accounts.tokens import create_token
from tests.engine import GIVEN

pytestmark = pytest.mark.django_db
API = "/api/v1/execution/queues"


def _api(token: str):
    return Client().get(API, HTTP_AUTHORIZATION=f"Bearer {token}")


def _new_token(capsys, *args: str) -> tuple[ApiToken, str]:
    call_command("create_api_token", "svc", *args)
    token = capsys.readouterr().out.strip()
    return ApiToken.objects.latest("id"), token


def _close(a, b) -> bool:
    return abs((a - b).total_seconds()) < 60


def test_tokens_expire_after_ninety_days_by_default(users, capsys, settings):
    assert settings.BLOOMOPS_API_TOKEN_DAYS == 90
    row, _ = _new_token(capsys)
    assert _close(row.expires_at, row.created_at + timedelta(days=90))
    settings.BLOOMOPS_API_TOKEN_DAYS = 30
    row, _ = _new_token(capsys)
    assert _close(row.expires_at, row.created_at + timedelta(days=30))


def test_days_are_chosen_at_creation(users, capsys):
    row, _ = _new_token(capsys, "--days", "7")
    assert _close(row.expires_at, timezone.now() + timedelta(days=7))


@pytest.mark.parametrize("days", ["0", "-1", "3651"])
def test_a_lifetime_out_of_range_is_refused_and_nothing_is_made(users, days):
    with pytest.raises(CommandError, match="1 to 3650 days"):
        call_command("create_api_token", "svc", "--days", days)
    assert not ApiToken.objects.exists()


def test_an_expired_token_is_401_like_a_revoked_one(tenant, users):
    row, token = create_token("svc", **GIVEN)
    assert _api(token).status_code == 200
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    r = _api(token)
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"


def test_last_use_is_recorded(tenant, users):
    row, token = create_token("svc", **GIVEN)
    assert row.last_used_at is None
    _api(token)
    row.refresh_from_db()
    assert _close(row.last_used_at, timezone.now())


def test_the_list_shows_status_expiry_and_last_use(tenant, users, capsys):
    used, used_token = create_token("svc", name="used", **GIVEN)
    _api(used_token)
    expired, _ = create_token("svc", name="old", **GIVEN)
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
    used.refresh_from_db()
    expired.refresh_from_db()
    call_command("list_api_tokens")
    lines = capsys.readouterr().out.strip().splitlines()
    header = lines[0].split("\t")
    assert header == ["id", "prefix", "user", "name", "status", "created", "expires",
                      "last_used", "revoked"]
    rows = [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]
    assert [r["name"] for r in rows] == ["used"]  # expired tokens only with --all
    assert rows[0]["status"] == "active"
    assert rows[0]["expires"] == used.expires_at.isoformat(timespec="seconds")
    assert rows[0]["last_used"] == used.last_used_at.isoformat(timespec="seconds")
    call_command("list_api_tokens", "--all")
    lines = capsys.readouterr().out.strip().splitlines()[1:]
    rows = {line.split("\t")[3]: line.split("\t") for line in lines}
    assert rows["old"][4] == "expired" and rows["old"][7] == "-"


def test_the_migration_gives_existing_tokens_ninety_days_from_creation(transactional_db, users):
    from django.db.migrations.executor import MigrationExecutor

    def migrate(*targets) -> MigrationExecutor:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(list(targets or executor.loader.graph.leaf_nodes()))
        return executor

    try:
        migrate(("bloomops_api", "0001_initial"))
        created = timezone.now() - timedelta(days=10)
        with connection.cursor() as cur:
            cur.execute("INSERT INTO bloomops_api_apitoken (user_id, name, prefix, token_hash,"
                        " created_at) VALUES (%s, 'old', 'abcd', 'h', %s)",
                        [users["worker_service"].pk, created])
        then = ("bloomops_api", "0002_apitoken_expires_at")
        # the model as it was then (it has moved app and gained fields since)
        token = migrate(then).loader.project_state(then).apps.get_model("bloomops_api",
                                                                         "ApiToken")
        row = token.objects.get(name="old")
        assert row.expires_at == row.created_at + timedelta(days=90)
    finally:
        migrate()  # every later test runs on the schema as it is now


def test_a_tokens_name_is_one_readable_line(db, users):
    """list_api_tokens printed a name's terminal escapes and newlines raw."""
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="printable"):
        call_command("create_api_token", users["operator"].username, "--name", "ci\x1b[2J\nx")
