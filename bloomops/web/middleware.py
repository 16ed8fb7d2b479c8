"""The console's middleware: every answer fetched anew, a page for a visit of an address that
only takes a form, a form sent after the session ended."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme

from bloomops.web.bench_items import results_declared
from bloomops.web.drafts import keep_draft


class NoStoreMiddleware:
    """Every page and API answer is about work that changes under it and is often seen on a
    shared tablet: no browser or proxy keeps one (Back after a change showed the old revision
    of a queue's settings, a finished item with a live countdown). Static files are answered
    by WhiteNoise before this runs, and keep their long cache."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        add_never_cache_headers(response)  # merged with any directive a view set
        return response


class MethodNotAllowedPage:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # the API answers in JSON of its own (api/guard.py)
        if response.status_code == 405 and not response.content and not (
                request.path.startswith("/api/")):
            response.content = render_to_string("405.html", request=request)
            response["Content-Type"] = "text/html; charset=utf-8"
        return response


def _result_labels(path: str) -> dict[str, str]:
    """The labels of the results a Complete form sent to ``path`` asks for (key -> label)."""
    try:
        match = resolve(path)
    except Resolver404:
        return {}
    if match.url_name != "complete_lease":
        return {}
    return {f["key"]: f["label"] for f in results_declared(match.kwargs["lease_euid"]) or []}


class SignInAgainMiddleware(LoginRequiredMiddleware):
    """A form sent once the session had ended (idle at the bench) is not done: the person is
    told so, with the words they typed, and signed in again lands on the page the form was
    on, not on the form's address (which takes only a form: the 405 page)."""

    def handle_no_permission(self, request: HttpRequest, view_func) -> HttpResponse:
        if request.method != "POST":
            return super().handle_no_permission(request, view_func)
        scanned = request.POST.get("euid", "").strip()[:64]
        messages.info(request, f"Your scan of \u201c{scanned}\u201d was not claimed: scan it"
                               " again once signed in." if scanned else
                      "What you sent was not done: sign in, then send it again.")
        keep_draft(request, refill=False, labels=_result_labels(request.path))
        referer = request.headers.get("Referer", "")
        back = referer.split(request.get_host(), 1)[-1] if referer else ""
        if not (back.startswith("/") and url_has_allowed_host_and_scheme(
                back, {request.get_host()}, require_https=request.is_secure())):
            back = resolve_url("dashboard")
        return redirect_to_login(back, resolve_url(self.get_login_url(view_func)),
                                 self.get_redirect_field_name(view_func))
