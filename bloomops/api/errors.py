"""How API v1 answers a refusal: every exception django-ninja or the executor raises becomes
the error body ``{"error": {"code", "message", "details"}}`` with its status."""

from __future__ import annotations

import re
from typing import Any

from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from bloomops.api.action_schemas import INSTANT, NON_BLANK
from bloomops.api.guard import CODE_OF_STATUS, RequestRefused
from bloomops.execution.actions.queue_fields import QUEUE_KEY_PATTERN, QUEUE_KEY_WORDS
from bloomops.execution.errors import ActionError
from bloomops.execution.results import RESULT_KEY_PATTERN, RESULT_KEY_WORDS

# The parameter names ninja puts in front of a field's location ("body", "filters", ...).
_LOCATION_PREFIXES = ("body", "query", "path", "filters")


_VALIDATOR_STEP = re.compile(r"^(function-\w+\[.*\]|constrained-\w+|[a-z-]+\[.*\])$")


def _field(loc: list[str]) -> str:
    parts = list(loc)
    while parts and parts[0] in _LOCATION_PREFIXES:
        parts.pop(0)
    # pydantic names the validator it was in after the field ("function-before[...]",
    # "constrained-int", "list[str]"); a caller's own key ("expected-state") stays.
    return ".".join(p for p in parts if not _VALIDATOR_STEP.match(p))


# What a field held to a pattern must be, in words: the pattern itself ("String should match
# pattern '^\\s*[0-9]{4}-...'") is a developer's reading.
PATTERN_WORDS = {
    INSTANT: "must be a date, time and zone, e.g. 2026-11-01T00:00:00Z",
    QUEUE_KEY_PATTERN: QUEUE_KEY_WORDS,
    RESULT_KEY_PATTERN: RESULT_KEY_WORDS,
}


def _plain(error: dict[str, Any]) -> str:
    """pydantic's message, in words where it would read as a developer's: a text that must
    not be blank said "String should match pattern '\\S'"."""
    ctx = error.get("ctx") or {}
    if ((error.get("type") == "string_pattern_mismatch" and ctx.get("pattern") == NON_BLANK)
            or (error.get("type") == "string_too_short" and ctx.get("min_length") == 1)):
        return "must not be blank"
    if error.get("type") == "string_pattern_mismatch" and ctx.get("pattern") in PATTERN_WORDS:
        return PATTERN_WORDS[ctx["pattern"]]
    return str(error.get("msg", "")).removeprefix("Value error, ")


# Problems listed in details.errors (the rest counted): 90,000 unknown keys in a 1 MB body
# made a 9 MB refusal.
ERRORS_LISTED = 20


def validation_refusal(exc: ValidationError) -> RequestRefused:
    """The first problem names the field (details.field) and leads the message; the first
    ERRORS_LISTED of them are in details.errors, how many there were in error_count."""
    errors = [{"loc": [str(p)[:60] for p in e.get("loc", ())], "msg": _plain(e),
               "type": e.get("type")} for e in exc.errors[:ERRORS_LISTED]]
    if not errors:
        return RequestRefused("VALIDATION_ERROR")
    # A rule between fields names its field in the error's context (action_schemas.refusal).
    ctx = exc.errors[0].get("ctx") or {}
    if errors[0]["loc"][:1] == ["body"] and not _field(errors[0]["loc"]) \
            and errors[0]["type"] == "missing":
        # no body at all: pydantic's "Field required" named no field
        return RequestRefused("VALIDATION_ERROR", "The request has no body: send the"
                              " action's fields as a JSON object.", field="body",
                              errors=errors, error_count=len(exc.errors))
    field = _field(errors[0]["loc"]) or str(ctx.get("field") or "")
    message = f"{field}: {errors[0]['msg']}" if field else errors[0]["msg"]
    where: dict[str, Any] = {"field": field} if field else {}
    return RequestRefused("VALIDATION_ERROR", message, **where, errors=errors,
                          error_count=len(exc.errors))


def install(api: NinjaAPI) -> None:
    def answer(request, refused: RequestRefused | ActionError):
        status = refused.status if isinstance(refused, RequestRefused) else refused.http_status
        return api.create_response(request, refused.as_dict(), status=status)

    def http_error(request, exc: HttpError):
        # ninja wraps a body parser's refusal in its own "cannot parse" error.
        if isinstance(exc.__cause__, RequestRefused):
            return answer(request, exc.__cause__)
        refused = RequestRefused(CODE_OF_STATUS.get(exc.status_code, "VALIDATION_ERROR"),
                                 str(exc) or None)
        return api.create_response(request, refused.as_dict(), status=exc.status_code)

    api.add_exception_handler(ActionError, answer)
    api.add_exception_handler(RequestRefused, answer)
    api.add_exception_handler(
        ValidationError, lambda request, exc: answer(request, validation_refusal(exc)))
    api.add_exception_handler(AuthenticationError, lambda request, exc: answer(
        request, RequestRefused("UNAUTHENTICATED",
                                "Send a valid API token: Authorization: Bearer <token>.")))
    api.add_exception_handler(
        AuthorizationError, lambda request, exc: answer(request, RequestRefused("FORBIDDEN")))
    api.add_exception_handler(HttpError, http_error)
