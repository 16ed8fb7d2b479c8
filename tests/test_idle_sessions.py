"""Sessions end after an idle time (shared bench terminals); the dashboard's own polling is
not activity."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client, override_settings

from bloomops.accounts.sessions import ACTIVITY_KEY, POLL_HEADER
from tests.conftest import make_user
from tests.test_signin_security import LOGIN, is_signed_in, sign_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client):
    user = make_user("op-idle", "operator")
    assert sign_in(client, user.username, "pw-op-idle").status_code == 302
    return client


def _age_activity(client: Client, seconds: float) -> None:
    """Move the session's clock: its last activity was ``seconds`` earlier."""
    session = client.session
    session[ACTIVITY_KEY] = session[ACTIVITY_KEY] - seconds
    session.save()


def _poll(client: Client):
    return client.get("/", HTTP_HX_REQUEST="true", **{"HTTP_X_BLOOMOPS_POLL": "1"})


def test_session_idle_default_and_store_expiry_match():
    assert django_settings.SESSION_IDLE_SECONDS == 30 * 60
    assert django_settings.SESSION_COOKIE_AGE == django_settings.SESSION_IDLE_SECONDS
    assert POLL_HEADER == "X-Bloomops-Poll"


def test_a_session_ends_after_the_idle_time(operator_client):
    assert operator_client.get("/").status_code == 200
    _age_activity(operator_client, django_settings.SESSION_IDLE_SECONDS - 60)
    assert operator_client.get("/").status_code == 200  # 29 minutes: still signed in
    _age_activity(operator_client, django_settings.SESSION_IDLE_SECONDS + 1)
    r = operator_client.get("/workers/")
    assert r.status_code == 302 and r["Location"].startswith(LOGIN)
    assert not is_signed_in(operator_client)
    page = operator_client.get(r["Location"])
    assert "signed out after 30 min without activity" in page.text


def test_dashboard_polling_is_not_activity(operator_client):
    operator_client.get("/")
    before = operator_client.session[ACTIVITY_KEY]
    _age_activity(operator_client, 600)
    polled = _poll(operator_client)
    assert polled.status_code == 200 and 'id="dashboard-panel"' in polled.text
    assert operator_client.session[ACTIVITY_KEY] == before - 600  # not moved on by the poll
    # a click is activity
    operator_client.get("/workers/")
    assert operator_client.session[ACTIVITY_KEY] > before - 600


def test_a_polling_dashboard_is_sent_to_sign_in_when_the_session_ends(operator_client):
    operator_client.get("/")
    for _ in range(3):  # 27 minutes of polling: still signed in, the clock not reset
        _age_activity(operator_client, django_settings.SESSION_IDLE_SECONDS * 0.3)
        assert _poll(operator_client).status_code == 200 and is_signed_in(operator_client)
    _age_activity(operator_client, django_settings.SESSION_IDLE_SECONDS * 0.2)
    r = _poll(operator_client)
    # the whole page goes to the sign-in page instead of swapping it into the panel
    assert r.status_code == 200 and r["HX-Redirect"].startswith(LOGIN)
    assert not is_signed_in(operator_client)


@override_settings(SESSION_IDLE_SECONDS=120)
def test_the_idle_time_is_a_setting(operator_client):
    operator_client.get("/")
    _age_activity(operator_client, 121)
    assert operator_client.get("/").status_code == 302


def test_a_session_the_store_ended_is_said_and_signed_in_again_returns_to_the_page(
        operator_client):
    """My work's refresh, once the session had gone idle, sent the tablet to sign in with
    the refresh's address as where to return (signed in, the scientist read raw JSON), and
    the sign-in page said nothing of why: the store's expiry, the same idle time, had ended
    the session before the idle check could say so."""
    from django.utils import timezone

    from bloomops.accounts.models import StoredSession

    operator_client.get("/")
    StoredSession.objects.update(expire_date=timezone.now())
    r = operator_client.get("/my-work/?part=held", HTTP_HX_REQUEST="true",
                            HTTP_X_BLOOMOPS_POLL="1",
                            HTTP_HX_CURRENT_URL="http://testserver/my-work/?item=Z-AB-1")
    assert r["HX-Redirect"] == f"{LOGIN}?next=/my-work/%3Fitem%3DZ-AB-1"
    page = operator_client.get(r["HX-Redirect"]).content.decode()
    assert "You were signed out after 30 min without activity" in page
    # said once: the session's row is gone with it
    assert "signed out after" not in operator_client.get(LOGIN).content.decode()
    assert not StoredSession.objects.exists()
    # a page of another site named as the current one is not where sign-in returns
    operator_client.get("/")
    r = operator_client.get(
        "/my-work/?part=held", HTTP_HX_REQUEST="true", HTTP_X_BLOOMOPS_POLL="1",
        HTTP_HX_CURRENT_URL="https://evil.example/phish")
    # (its path is not taken for one of ours: the refresh's own address stands)
    assert r["HX-Redirect"] == f"{LOGIN}?next=/my-work/%3Fpart%3Dheld"
