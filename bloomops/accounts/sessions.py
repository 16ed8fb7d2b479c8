"""Sessions end after settings.SESSION_IDLE_SECONDS without activity (shared bench terminals).

Activity is any signed-in request except a page's own polling: the dashboard refreshes itself
with htmx every few seconds, and if that counted, an unattended dashboard would never sign out.
Polling elements mark their requests with the POLL_HEADER (hx-headers), so the rule is not tied
to one page. The session store's expiry (SESSION_COOKIE_AGE, the same idle time, renewed
whenever the session is saved) ends the session server-side as well.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

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
                minutes = max(1, settings.SESSION_IDLE_SECONDS // 60)
                messages.info(request, f"You were signed out after {minutes} min without"
                                       " activity. Sign in again to go on.")
            elif last is None or not is_polling(request):
                request.session[ACTIVITY_KEY] = now  # saved, so the store's expiry moves on
        response = self.get_response(request)
        return _htmx_sign_in_redirect(request, response)


def _htmx_sign_in_redirect(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """An htmx request sent to sign in (an ended session) navigates the whole page there,
    instead of swapping the sign-in page into a panel."""
    if request.headers.get("HX-Request") != "true" or response.status_code != 302:
        return response
    login = resolve_url(settings.LOGIN_URL)
    location = response.get("Location", "")
    if location.split("?")[0] != login:
        return response
    return HttpResponseClientRedirect(location)


def end_sessions(user) -> int:
    """Every unexpired session signed in as ``user`` ends (its row is deleted): a person
    signed out by an admin is not signed in again by being let back in. Returns how many."""
    from bloomops.accounts.session_store import end_user_sessions

    return end_user_sessions(user.pk)
