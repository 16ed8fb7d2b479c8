"""The console's answer to a visit of an address that only takes a form (a POST-only view
visited by GET): a page saying so, not Django's empty 405."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string


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
