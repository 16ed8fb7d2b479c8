"""Request-level checks of the JSON API: what a request must be before any view reads it.

Every refusal here is a 4xx with the API's error body and happens before a view runs, so it
writes nothing. Four parts:

- ``ApiGuardMiddleware`` (under ``/api/``; on the console's pages only the query check, as a
  400 page): a body over ``MAX_BODY_BYTES`` is 413 before
  it is read; a NUL character in the path or a query parameter is 400 (PostgreSQL cannot hold
  NUL in text, so it would otherwise fail deep in a query); an error answer Django or
  django-ninja gives as HTML or plain text (unknown path 404, wrong method 405) becomes JSON.
- ``StrictJsonParser``: the JSON body parser of the API. Python's ``json`` accepts NaN,
  Infinity and numbers that overflow to infinity, and lone UTF-16 surrogates; none of them
  can be stored faithfully, so they are refused, as is NUL in any string or key.
- ``refuse_unknown_query``: a query parameter the path does not take is 400.
- ``RequestRefused``: a refusal with the API's error body, for the engine's codes and the
  two that exist only at the HTTP layer (PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import unquote_to_bytes

from django.core.exceptions import SuspiciousOperation
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    UnreadablePostError,
)
from django.template.loader import render_to_string
from ninja.parser import Parser

from bloomops.execution.errors import HTTP_STATUS, PLAIN
from bloomops.execution.guards import TextProblem, load_json, text_problem

API_PREFIX = "/api/"
# The largest request body the API reads (documented in docs/API.md). An action's payload is
# kilobytes; this leaves room for a large outputs list and refuses anything else unread.
MAX_BODY_BYTES = 1024 * 1024

# Codes the HTTP layer adds to the engine's (bloomops.execution.errors).
HTTP_ONLY_CODES: dict[str, tuple[int, str]] = {
    "METHOD_NOT_ALLOWED": (405, "This path does not accept that HTTP method."),
    "PAYLOAD_TOO_LARGE": (413, f"The request body is larger than {MAX_BODY_BYTES} bytes."),
    "UNSUPPORTED_MEDIA_TYPE": (415, "The request body must be sent as Content-Type"
                                    " application/json (UTF-8)."),
    "LENGTH_REQUIRED": (411, "The request body must come with a Content-Length (a chunked"
                             " body is not read)."),
}


class RequestRefused(Exception):
    """A refused request: ``as_dict`` is the API's error body, ``status`` its HTTP status."""

    def __init__(self, code: str, message: str | None = None, **details: Any) -> None:
        default = HTTP_ONLY_CODES[code][1] if code in HTTP_ONLY_CODES else PLAIN[code]
        self.code = code
        self.message = message or default
        self.details = details
        super().__init__(self.message)

    @property
    def status(self) -> int:
        return HTTP_ONLY_CODES[self.code][0] if self.code in HTTP_ONLY_CODES else (
            HTTP_STATUS[self.code])

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


def error_response(code: str, message: str | None = None, **details: Any) -> JsonResponse:
    refused = RequestRefused(code, message, **details)
    return JsonResponse(refused.as_dict(), status=refused.status)


class StrictJsonParser(Parser):
    """django-ninja's body parser, reading as ``guards.load_json`` does (UTF-8, no key
    twice, finite numbers, bounded depth, no NUL or lone surrogate in any string or key: a
    refusal names that field). The refusal travels to the API's exception handler as the
    cause of ninja's own "cannot parse" HttpError."""

    def parse_body(self, request: HttpRequest) -> Any:
        try:
            return load_json(request.body)
        except TextProblem as exc:
            raise RequestRefused("VALIDATION_ERROR", f"{exc}.", field=exc.where) from None
        except ValueError as exc:
            raise RequestRefused("VALIDATION_ERROR", f"The body is not valid JSON: {exc}.",
                                 field="body") from None


def _query_problem(request: HttpRequest) -> RequestRefused | None:
    if "\x00" in request.path:
        return RequestRefused("VALIDATION_ERROR", "The path contains a NUL character.",
                              field="path")
    # A path's bytes that are not UTF-8 Django keeps as %XX text (it has replaced the raw
    # path by then), looked up as an EUID nobody has (404). No key or EUID holds a "%".
    if BROKEN_PATH.search(request.path):
        return RequestRefused("VALIDATION_ERROR", "The path is not UTF-8 text, or holds a"
                              " %-escape no EUID or key has.", field="path")
    # Django reads a query's bytes that are not UTF-8 as U+FFFD: a filter would then search
    # for a value nobody sent.
    try:
        # WSGI hands the raw query over as latin-1 text: its bytes are those characters
        raw = request.META.get("QUERY_STRING", "").encode("latin-1", "replace")
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return RequestRefused("VALIDATION_ERROR", "The query is not UTF-8 text.",
                              field="query")
    try:
        params = list(request.GET.lists())
    except SuspiciousOperation as exc:  # e.g. more query fields than Django parses
        return RequestRefused("VALIDATION_ERROR", str(exc), field="query")
    for key, values in params:
        for value in [key, *values]:
            problem = text_problem(value)
            if problem:
                name = key.replace("\x00", "")[:40]
                return RequestRefused("VALIDATION_ERROR", f"Query parameter {name!r}"
                                      f" {problem}.", field=name)
    return None


def _repeated_parameter(request: HttpRequest) -> RequestRefused | None:
    """Every API query parameter is one value: given twice, a reader would use one of them
    and the sender may mean the other (as a JSON key given twice)."""
    for key, values in request.GET.lists():
        if len(values) > 1:
            name = key[:40]
            return RequestRefused("VALIDATION_ERROR", f"Query parameter {name!r} is given"
                                  f" {len(values)} times; give it once.", field=name)
    return None


def _body_problem(request: HttpRequest) -> RequestRefused | None:
    raw = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(raw)
    except ValueError:
        length = -1
    if length < 0:
        return RequestRefused("VALIDATION_ERROR", "Content-Length is not a length.",
                              field="Content-Length")
    if length > MAX_BODY_BYTES:
        return RequestRefused("PAYLOAD_TOO_LARGE", limit_bytes=MAX_BODY_BYTES,
                              content_length=length)
    if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        return RequestRefused("LENGTH_REQUIRED")
    coding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if length and coding not in ("", "identity"):
        # a compressed body read as JSON was a 400 about UTF-8, a plain one so labelled ran
        return RequestRefused("UNSUPPORTED_MEDIA_TYPE", "Send the body unencoded: no"
                              " Content-Encoding is taken.", content_encoding=coding[:100])
    if length and (request.content_type != "application/json" or request.content_params.get(
            "charset", "utf-8").lower() not in ("utf-8", "utf8")):
        return RequestRefused("UNSUPPORTED_MEDIA_TYPE",
                              content_type=request.META.get("CONTENT_TYPE", "")[:100])
    return None


def _document_method(request: HttpRequest) -> RequestRefused | None:
    if DOCUMENTS.match(request.path) and request.method not in ("GET", "HEAD"):
        return RequestRefused("METHOD_NOT_ALLOWED", allowed_methods=["GET", "HEAD"])
    return None


def _body_unread(request: HttpRequest) -> RequestRefused | None:
    """The body read now, before any view: one that stops short of its Content-Length (the
    client paused past the server's timeout, bloomops/serving.py, or went away) is refused
    here instead of failing inside a view as a 500."""
    try:
        request.body  # noqa: B018 (read once; Django keeps it)
    except UnreadablePostError:
        return RequestRefused("VALIDATION_ERROR", "The request body stopped before its"
                              " Content-Length was reached: send it whole.", field="body")
    return None


def refuse_unknown_query(run: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A router decorator (ninja's "view" mode, around an operation's ``run``): a query
    parameter the path does not take is refused, not ignored. Ignored, a misspelt filter
    (``?stauts=EXPIRED``) answers a list that looks filtered and is not. The parameters a
    path takes are its query schema's fields, so the OpenAPI document and this check cannot
    disagree."""
    operation = run.__self__  # type: ignore[attr-defined]
    takes = sorted({name for model in operation.models
                    if model.__ninja_param_source__ == "query"
                    for name in model.__ninja_flatten_map__})

    @wraps(run)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        unknown = sorted(set(request.GET) - set(takes))
        if not unknown:
            return run(request, *args, **kwargs)
        name = unknown[0][:40]
        return error_response(
            "VALIDATION_ERROR", f"Unknown query parameter {name!r}. "
            + (f"This path takes: {', '.join(takes)}." if takes
               else "This path takes no query parameters."),
            field=name, unknown_parameters=[u[:40] for u in unknown[:20]], allowed=takes)

    return checked


BROKEN_PATH = re.compile(r"%[0-9A-Fa-f]{2}")

# The API's own description (api.py's docs_url and openapi_url): read only. Any other method
# met Django's CSRF check first, and its 403 read "Your role may not ..." with no token sent.
DOCUMENTS = re.compile(r"^/api/v\d+/(docs|openapi\.json)/?$")

# The GETs that write (an evidence export is recorded, docs/RULES.md#evidence): HEAD on them
# would write too, so it is refused.
WRITING_GETS = re.compile(r"/subjects/[^/]+/evidence/?$")

# Error statuses Django or ninja may answer without the API's body, and their codes.
CODE_OF_STATUS = {400: "VALIDATION_ERROR", 401: "UNAUTHENTICATED", 403: "FORBIDDEN",
                  404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE"}


def _as_json(response: HttpResponse, path: str) -> HttpResponse:
    """An error Django or ninja answered as HTML/plain text, as the API's JSON error (same
    status; an Allow header is kept, with HEAD wherever GET is: RFC 9110). A 401 says how to
    authenticate (WWW-Authenticate, RFC 9110 11.6.1), whoever answered it."""
    status = response.status_code
    if status == 401 and not response.has_header("WWW-Authenticate"):
        response["WWW-Authenticate"] = 'Bearer realm="bloomops"'
    if status == 405 and response.has_header("Allow") and not WRITING_GETS.search(path):
        allowed = [m.strip() for m in response["Allow"].split(",")]
        if "GET" in allowed and "HEAD" not in allowed:
            response["Allow"] = ", ".join([*allowed, "HEAD"])
    if not 400 <= status < 500 or "json" in response.get("Content-Type", ""):
        return response
    code = CODE_OF_STATUS.get(status, "VALIDATION_ERROR")
    details: dict[str, Any] = {}
    message = None
    if status == 404:
        message = "No API endpoint at this path."
    elif status == 405 and response.has_header("Allow"):
        details["allowed_methods"] = [m.strip() for m in response["Allow"].split(",")]
    elif status == 413:
        details["limit_bytes"] = MAX_BODY_BYTES
    converted = error_response(code, message, **details)
    converted.status_code = status
    if response.has_header("Allow"):
        converted["Allow"] = response["Allow"]
    return converted


class ApiGuardMiddleware:
    """The checks above for every request under ``/api/``. Elsewhere (the console's pages)
    a path or query parameter no query can hold (NUL, a lone surrogate) is a 400 too (a page,
    ``400.html``), before any view passes it to the database; everything else passes
    untouched."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            refused = _query_problem(request)
            if refused is not None:
                # a page a person can read, rendered without the session (not read yet)
                return HttpResponseBadRequest(render_to_string(
                    "400.html", {"message": f"Bad request: {refused.message}"}))
            return self.get_response(request)
        refused = (_document_method(request) or _body_problem(request)
                   or _query_problem(request) or _repeated_parameter(request)
                   or _body_unread(request))
        if refused is not None:
            response = JsonResponse(refused.as_dict(), status=refused.status)
            if allowed := refused.details.get("allowed_methods"):
                response["Allow"] = ", ".join(allowed)
            return response
        if request.method != "HEAD":
            return _as_json(self.get_response(request), request.path)
        if WRITING_GETS.search(request.path):
            refused = RequestRefused("METHOD_NOT_ALLOWED", "HEAD would record an export that"
                                     " nobody receives; send GET.", allowed_methods=["GET"])
            response = JsonResponse(refused.as_dict(), status=refused.status)
            response["Allow"] = "GET"
            return response
        # HEAD is GET without the body (RFC 9110), wherever GET is answered.
        request.method = "GET"
        response = _as_json(self.get_response(request), request.path)
        if not response.streaming:
            response["Content-Length"] = str(len(response.content))
            response.content = b""
        return response
