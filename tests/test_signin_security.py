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

from bloomops.api.tokens import create_token
from tests.conftest import make_user

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
    _, token = create_token("svc-demo")
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
