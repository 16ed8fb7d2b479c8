"""Sign-in throttling and lockout (django-axes), and the demo password on the sign-in and API
paths."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from bloomops.accounts.tokens import create_token
from tests.conftest import make_user
from tests.engine import GIVEN

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"
API = "/api/v1/execution/queues"


def sign_in(client: Client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password},
                       REMOTE_ADDR=address)


def is_signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


# ------------------------------------------------------------------ throttling and lockout


def test_defaults_are_five_failures_and_fifteen_minutes():
    assert django_settings.AXES_FAILURE_LIMIT == 5
    assert django_settings.AXES_COOLOFF_TIME == timedelta(minutes=15)


def test_five_wrong_passwords_lock_out_that_username_from_that_address(client):
    make_user("alice", "operator")
    for _ in range(4):
        r = sign_in(client, "alice", "guess")
        assert r.status_code == 200 and "enter a correct username and password" in r.text
    locked = sign_in(client, "alice", "guess")
    assert locked.status_code == 429
    assert "Sign-in locked" in locked.text and "15 min" in locked.text
    assert "alice" in locked.text
    # the right password is refused too while locked
    r = sign_in(client, "alice", "pw-alice")
    assert r.status_code == 429 and not is_signed_in(client)
    # the lock is on username + address: another person at this device, and alice elsewhere,
    # still sign in
    make_user("bob", "operator")
    assert sign_in(Client(), "bob", "pw-bob").status_code == 302
    elsewhere = Client()
    assert sign_in(elsewhere, "alice", "pw-alice", address="10.1.2.3").status_code == 302


def test_the_lock_ends_after_the_cool_off(client):
    from axes.models import AccessAttempt

    make_user("alice", "operator")
    for _ in range(5):
        sign_in(client, "alice", "guess")
    assert sign_in(client, "alice", "pw-alice").status_code == 429
    # the clock moves on: the last failure is now 16 minutes old
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    r = sign_in(client, "alice", "pw-alice")
    assert r.status_code == 302 and is_signed_in(client)


@pytest.mark.parametrize("command", [["axes_reset_username", "alice"], ["axes_reset"]])
def test_an_admin_lifts_a_lock_with_axes_commands(client, command):
    make_user("alice", "operator")
    for _ in range(5):
        sign_in(client, "alice", "guess")
    assert sign_in(client, "alice", "pw-alice").status_code == 429
    call_command(*command)
    assert sign_in(client, "alice", "pw-alice").status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(client):
    make_user("alice", "operator")
    for _ in range(4):
        sign_in(client, "alice", "guess")
    assert sign_in(client, "alice", "pw-alice").status_code == 302
    client.post("/accounts/logout/")
    for _ in range(4):
        assert sign_in(client, "alice", "guess").status_code == 200


@override_settings(BEHIND_TLS_PROXY=True)
def test_behind_the_proxy_the_address_is_the_one_the_proxy_appended(client):
    make_user("alice", "operator")
    for i in range(5):
        # the client may forge the left part of X-Forwarded-For; the proxy appends the truth
        client.post(LOGIN, {"username": "alice", "password": "guess"}, REMOTE_ADDR="10.0.0.1",
                    HTTP_X_FORWARDED_FOR=f"1.1.1.{i}, 192.0.2.7")
    r = client.post(LOGIN, {"username": "alice", "password": "pw-alice"},
                    REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.7")
    assert r.status_code == 429
    other = client.post(LOGIN, {"username": "alice", "password": "pw-alice"},
                        REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.8")
    assert other.status_code == 302


# ------------------------------------------------------------------ the demo password


@override_settings(DEBUG=False)
def test_demo_password_sign_in_counts_as_a_failure_and_says_nothing_more(client):
    User.objects.create_user("demo-like", password=django_settings.DEMO_PASSWORD)
    wrong = sign_in(client, "demo-like", "not-it")
    for _ in range(3):
        r = sign_in(client, "demo-like", django_settings.DEMO_PASSWORD)
        assert r.status_code == 200 and not is_signed_in(client)
        assert r.context["form"].errors == wrong.context["form"].errors
    # five refusals in all: locked, as five wrong passwords would be
    assert sign_in(client, "demo-like", django_settings.DEMO_PASSWORD).status_code == 429


def _api(token: str):
    return Client().get(API, HTTP_AUTHORIZATION=f"Bearer {token}")


def test_api_tokens_of_demo_password_accounts_are_refused_when_debug_is_off(settings, tenant):
    user = make_user("svc-demo", "worker_service")
    user.set_password(django_settings.DEMO_PASSWORD)
    user.save()
    _, token = create_token("svc-demo", **GIVEN)
    settings.DEBUG = True
    assert _api(token).status_code == 200
    settings.DEBUG = False
    r = _api(token)
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
    # a real password makes the same token work again
    user.set_password("a-real-password-at-last")
    user.save()
    assert _api(token).status_code == 200


def test_a_wrong_current_password_on_the_password_page_counts_toward_the_lockout(client):
    """The password page took wrong current passwords without limit: a session left open
    could guess the password that signs its person's approvals."""
    make_user("alice", "operator")
    assert sign_in(client, "alice", "pw-alice").status_code == 302

    def change(old: str):
        return client.post("/accounts/password/", {"old_password": old,
                                                   "new_password1": "Amber-Harbour-77",
                                                   "new_password2": "Amber-Harbour-77"},
                           REMOTE_ADDR="127.0.0.1")

    for _ in range(4):
        assert "does not match" in change("guess").text
    assert "Too many wrong passwords" in change("guess").text
    refused = change("pw-alice")  # the right one, while locked
    assert refused.status_code == 200 and "Too many wrong passwords" in refused.text
    assert "is locked for 15 minutes" in refused.text
    assert User.objects.get(username="alice").check_password("pw-alice")
    # and sign-in from that address is locked as well: it is one count
    assert sign_in(Client(), "alice", "pw-alice").status_code == 429


def test_a_right_password_on_the_password_page_ends_the_count_of_wrong_ones(client):
    """Three wrong tries, a right one, then two wrong ones locked the person out: the right
    one did not end the count, as a sign-in does."""
    make_user("alice", "operator")
    assert sign_in(client, "alice", "pw-alice").status_code == 302
    new = "Amber-Harbour-77"

    def change(old: str, to: str = new):
        return client.post("/accounts/password/", {"old_password": old, "new_password1": to,
                                                   "new_password2": to},
                           REMOTE_ADDR="127.0.0.1")

    for _ in range(3):
        assert "does not match" in change("guess").text
    assert change("pw-alice").status_code == 302
    for _ in range(2):
        assert "does not match" in change("guess", "Cobalt-Lantern-42").text
    assert sign_in(Client(), "alice", new).status_code == 302  # not locked out


def test_reading_the_session_table_signs_nobody_in(client):
    """Django's database sessions kept each cookie's value as its row's key: anyone who could
    read the table (a reporting role, a backup, another service on the database) could sign
    in as every person signed in. The row is kept under a keyed digest of the cookie."""
    from bloomops.accounts.models import StoredSession

    user = make_user("op-session", "operator")
    assert sign_in(client, user.username, "pw-op-session").status_code == 302
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    row = StoredSession.objects.get(user_id=user.pk)
    assert row.session_key != cookie and cookie not in row.session_data
    thief = Client()
    thief.cookies[django_settings.SESSION_COOKIE_NAME] = row.session_key
    assert not is_signed_in(thief)
    assert thief.get("/").status_code == 302  # to the sign-in page
    assert is_signed_in(client) and client.get("/").status_code == 200
    thief.cookies[django_settings.SESSION_COOKIE_NAME] = cookie  # the cookie itself: yes
    assert is_signed_in(thief)


def test_signing_out_and_ending_a_persons_sessions_delete_only_theirs(client):
    from bloomops.accounts.models import StoredSession
    from bloomops.accounts.sessions import end_sessions

    one, two = make_user("op-one", "operator"), make_user("op-two", "operator")
    first, second, other = Client(), Client(), Client()
    for c, u in ((first, one), (second, one), (other, two)):
        assert sign_in(c, u.username, f"pw-{u.username}").status_code == 302
    assert StoredSession.objects.filter(user_id=one.pk).count() == 2
    first.post("/accounts/logout/")
    assert not is_signed_in(first) and is_signed_in(second)
    assert end_sessions(one) == 1
    assert not is_signed_in(second) and is_signed_in(other)
    assert StoredSession.objects.filter(user_id=one.pk).count() == 0


# ------------------------------------------------------------------ sealed password hashes


def _copy_hash(source: User, target: User) -> None:
    """What someone who can write auth_user does: a hash of their own in another's row."""
    from bloomops.tapdb.db import execute

    execute("UPDATE auth_user SET password = %s WHERE id = %s", [source.password, target.pk])


def test_a_hash_copied_into_a_colleagues_row_signs_nobody_in(client, caplog):
    """Someone who could write auth_user copied their own password hash into a colleague's
    row, signed in as the colleague with their own password, and put the hash back. A hash
    bloomops did not set is not sealed to the row: refused like a wrong password."""
    insider, colleague = make_user("mallory", "operator"), make_user("carol", "admin")
    original = User.objects.get(pk=colleague.pk).password
    _copy_hash(insider, colleague)
    refused = sign_in(client, "carol", "pw-mallory")
    assert refused.status_code == 200 and not is_signed_in(client)
    assert "not set by bloomops" in caplog.text
    assert sign_in(Client(), "mallory", "pw-mallory").status_code == 302  # their own: yes
    from bloomops.tapdb.db import execute

    execute("UPDATE auth_user SET password = %s WHERE id = %s", [original, colleague.pk])
    assert sign_in(client, "carol", "pw-carol").status_code == 302


def test_a_row_added_or_renamed_in_the_database_signs_nobody_in(client):
    from bloomops.tapdb.db import execute

    insider = make_user("mallory", "operator")
    execute("INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,"
            " email, is_staff, is_active, date_joined) SELECT password, false, 'ghost', '',"
            " '', '', false, true, now() FROM auth_user WHERE id = %s", [insider.pk])
    assert sign_in(client, "ghost", "pw-mallory").status_code == 200
    execute("UPDATE auth_user SET username = 'dave' WHERE id = %s", [insider.pk])
    assert sign_in(client, "dave", "pw-mallory").status_code == 200
    assert not is_signed_in(client)


def test_every_way_bloomops_sets_a_password_seals_it(client, settings):
    """create_user, set_password (an admin's new password, a person's own change) and the
    shell's changepassword; another save of the row (a sign-in's last_login) keeps the seal
    of the hash it had, and a hash Django re-hashes while checking it is sealed again."""
    from django.contrib.auth.hashers import make_password

    from bloomops.accounts.password_seals import seal, sealed_by

    user = make_user("erin", "operator")
    assert sealed_by(user) == 0
    user.set_password("Another-Long-Secret-31")
    user.save()
    assert sealed_by(User.objects.get(pk=user.pk)) == 0
    # an outdated hash (as after an upgrade changes the preferred hasher): Django re-hashes it
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher",
                                 *settings.PASSWORD_HASHERS]
    User.objects.filter(pk=user.pk).update(
        password=make_password("Older-Hash-Secret-8", hasher="md5"))
    seal(User.objects.get(pk=user.pk))  # as bloomops had sealed it then
    assert sign_in(client, "erin", "Older-Hash-Secret-8").status_code == 302
    rehashed = User.objects.get(pk=user.pk)
    assert rehashed.password.startswith("pbkdf2_sha256$") and sealed_by(rehashed) == 0
    assert sign_in(Client(), "erin", "Older-Hash-Secret-8").status_code == 302


def test_a_rotated_secret_key_keeps_every_password_and_seals_it_again(client, settings):
    from bloomops.accounts.password_seals import sealed_by

    user = make_user("fay", "operator")
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-rotated-secret-key-" + "r" * 40
    assert sealed_by(user) == 1
    assert sign_in(client, "fay", "pw-fay").status_code == 302
    assert sealed_by(user) == 0  # sealed again under the new key on the way in
    settings.SECRET_KEY_FALLBACKS = []
    assert sign_in(Client(), "fay", "pw-fay").status_code == 302


def test_accounts_from_before_the_seals_are_sealed_by_migrate():
    import importlib

    from django.apps import apps

    from bloomops.accounts.models import PasswordSeal
    from bloomops.accounts.password_seals import sealed_by

    user = make_user("gus", "operator")
    PasswordSeal.objects.all().delete()
    assert sealed_by(user) is None
    importlib.import_module("bloomops.accounts.migrations.0006_password_seals"
                            ).seal_every_account(apps, None)
    assert sealed_by(user) == 0
    assert sign_in(Client(), "gus", "pw-gus").status_code == 302
