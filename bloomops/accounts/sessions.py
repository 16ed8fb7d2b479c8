"""Sessions end after settings.SESSION_IDLE_SECONDS without activity (shared bench terminals).

Activity is any signed-in request except a page's own polling: the dashboard refreshes itself
with htmx every few seconds, and if that counted, an unattended dashboard would never sign out.
Polling elements mark their requests with the POLL_HEADER (hx-headers), so the rule is not tied
to one page. The session store's expiry (SESSION_COOKIE_AGE, the same idle time, renewed
whenever the session is saved) ends the session server-side as well.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import REDIRECT_FIELD_NAME, logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from bloomops.accounts.models import COMMAND_LINE

ACTIVITY_KEY = "bloomops_last_activity"
POLL_HEADER = "X-Bloomops-Poll"


def is_polling(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true" and bool(request.headers.get(POLL_HEADER))


class IdleSessionMiddleware:
    """After MessageMiddleware (it leaves a note on the sign-in page)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            now = timezone.now().timestamp()
            last = request.session.get(ACTIVITY_KEY)
            if last is not None and now - float(last) > settings.SESSION_IDLE_SECONDS:
                logout(request)
                _say_signed_out(request)
            elif last is None or not is_polling(request):
                request.session[ACTIVITY_KEY] = now  # saved, so the store's expiry moves on
        elif getattr(request.session, "ended_idle", False):
            # the store's expiry (the same idle time) ended it first: said all the same
            _say_signed_out(request)
        response = self.get_response(request)
        return _htmx_sign_in_redirect(request, response)


def _say_signed_out(request: HttpRequest) -> None:
    minutes = max(1, settings.SESSION_IDLE_SECONDS // 60)
    messages.info(request, f"You were signed out after {minutes} min without activity. Sign"
                           " in again to go on.")


def _htmx_sign_in_redirect(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """An htmx request sent to sign in (an ended session) navigates the whole page there,
    instead of swapping the sign-in page into a panel."""
    if request.headers.get("HX-Request") != "true" or response.status_code != 302:
        return response
    login = resolve_url(settings.LOGIN_URL)
    location = response.get("Location", "")
    if location.split("?")[0] != login:
        return response
    # signed in again, the person comes back to the page they were on, not to the address
    # of its panel's refresh (My work's answered raw JSON)
    page = urlsplit(request.headers.get("HX-Current-URL", ""))
    if page.path.startswith("/") and (not page.netloc or page.netloc == request.get_host()):
        here = page.path + (f"?{page.query}" if page.query else "")
        location = f"{login}?{urlencode({REDIRECT_FIELD_NAME: here}, safe='/')}"
    return HttpResponseClientRedirect(location)


def end_sessions(user) -> int:
    """Every unexpired session signed in as ``user`` ends (its row is deleted): a person
    signed out by an admin is not signed in again by being let back in. Returns how many."""
    from bloomops.accounts.session_store import end_user_sessions

    return end_user_sessions(user.pk)


# A person signed in with a password someone else set (an admin on /people/, a shell's
# changepassword) and not changed since: that someone knows it, so the person changes it
# before anything else (RULES.md#approvals). Decided at sign-in and kept in the session: a
# new password given later ends every session, so it cannot go stale.
GIVEN_PASSWORD_KEY = "bloomops_password_given_by"


def note_given_password(sender, request, user, **kwargs) -> None:
    """user_logged_in: remember, for this session, who gave the password it signed in with."""
    from bloomops.accounts.signatures import password_given_by

    given = password_given_by(user.get_username())
    if request is not None and given is not None and given.until is None:
        request.session[GIVEN_PASSWORD_KEY] = given.by


def password_now_own(request: HttpRequest) -> None:
    request.session.pop(GIVEN_PASSWORD_KEY, None)


class OwnPasswordFirstMiddleware:
    """After IdleSessionMiddleware: a session signed in with a given password reaches the
    password page (and signing out) only. Nothing it sends is done; an htmx panel's request
    moves the whole page there."""

    OPEN = ("password_change", "password_change_done", "logout")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (user is None or not user.is_authenticated
                or GIVEN_PASSWORD_KEY not in request.session
                or request.path in {resolve_url(name) for name in self.OPEN}
                or request.path.startswith(("/api/", "/" + settings.STATIC_URL.lstrip("/")))):
            return self.get_response(request)
        given = request.session[GIVEN_PASSWORD_KEY]
        messages.warning(request, "Choose your own password before you go on: "
                         + ("it was set from the command line." if given == COMMAND_LINE
                            else f"{given} gave you the one you signed in with, so they"
                                 " know it."))
        to = resolve_url("password_change")
        if request.headers.get("HX-Request") == "true":
            return HttpResponseClientRedirect(to)
        return HttpResponseRedirect(to)
