"""What every operator-UI view shares: reading guards and reasons from a form, answering an
action in plain words (a refusal writes nothing; FORBIDDEN is a 403 page), acting as the
signed-in person's human worker."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from bloomops.accounts.roles import BENCH_ROLES, roles_of
from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionResult
from bloomops.web import services
from bloomops.web.bench_words import field_refusal
from bloomops.web.bulk import Pick, bulk_payload, outcome_messages, page_revision, run_bulk
from bloomops.web.drafts import keep_draft

FILTERS = ("site", "platform", "assay")
EXPORT_LIMIT = 10000




def reader(view: Callable) -> Callable:
    """Any signed-in user with one of the four roles reads every screen; others get 403."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not roles_of(request.user):
            return forbidden(request, "Your account has no bloomops role yet: ask an admin"
                                      " to give you one, then sign in again.")
        return view(request, *args, **kwargs)

    return wrapped


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "web/forbidden.html", {"message": message}, status=403)


def not_found(request: HttpRequest, message: str) -> HttpResponse:
    """The console's own 404 page, with DEBUG on too (a raised Http404 would show Django's
    debug page to the people using the demo)."""
    return render(request, "404.html", {"message": message}, status=404)


def no_queue(request: HttpRequest, queue_key: str, page: str = "queue") -> HttpResponse:
    """The 404 of a queue's page: a queue replaced under another key says which, with the
    way to its ``page`` (an old bookmark read "No queue smith.seq." and nothing more)."""
    successor = selectors.queue_succeeding(queue_key)
    return render(request, "404.html", {
        "message": f"No queue {queue_key}.", "successor": successor,
        "successor_url": reverse(page, args=[successor["queue_key"]]) if successor else None,
    }, status=404)


def back_url(request: HttpRequest, default: str) -> str:
    """Where to go after a form: the page's own ``next`` when it is a path on this site,
    else ``default``. A bare word would be taken by ``redirect`` for a URL name and fail
    after the action was written."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target.startswith("/") and url_has_allowed_host_and_scheme(
            target, {request.get_host()}, require_https=request.is_secure()):
        return target
    return default


def guards(request: HttpRequest) -> dict:
    """The fields every action form carries: its idempotency key (minted when the page was
    rendered) and the state and revision the page showed."""
    try:
        revision = page_revision(request.POST.get("expected_revision") or "")
    except ValueError:
        raise ActionError("VALIDATION_ERROR", "The page sent an invalid revision.") from None
    return {
        "idempotency_key": request.POST.get("idempotency_key", "").strip(),
        "expected_state": request.POST.get("expected_state") or None,
        "expected_revision": revision,
    }


def known_filter(notes: list[str], what: str, value: str | None, known: Iterable[str],
                 instead: str) -> str | None:
    """A filter's value when the page knows it; else None, and ``notes`` says it was left out
    and what is shown ``instead``: a page read "in nope (0)", or another range than the one
    asked for, without a word."""
    if not value or value in set(known):
        return value or None
    notes.append(f"No {what} {value[:80]!r}: {instead}.")
    return None


def reason_of(request: HttpRequest) -> str:
    return request.POST.get("reason", "").strip()


def said_refused(request: HttpRequest, err: ActionError) -> None:
    """A refusal as the page's messages: each field's problem on its own line when the
    engine found several (errors.Problems), so all are fixed in one go."""
    for problem in err.problems():
        messages.error(request, field_refusal(problem))


def answer(request: HttpRequest, run: Callable[[], ActionResult], success: Callable[
        [ActionResult], str], default: str,
           goto: Callable[[ActionResult], str] | None = None,
           refused_to: str | None = None) -> HttpResponse:
    """Run one action; redirect back with its outcome (or 403 when the role may not), or on
    success to ``goto``'s page, on a refusal to ``refused_to`` when given."""
    try:
        result = run()
    except ActionError as err:
        if err.code == "FORBIDDEN":
            return forbidden(request, err.message)
        said_refused(request, err)
        keep_draft(request, problems=err.problems())
        return redirect(refused_to or back_url(request, default))
    if result.replayed:
        messages.info(request, "Already done: this form was submitted before, so nothing"
                               " was repeated.")
    else:
        messages.success(request, success(result))
    return redirect(goto(result) if goto else back_url(request, default))


def as_human(request: HttpRequest, action_key: str, **fields) -> ActionResult:
    """An action of the signed-in user's human worker (registered on first use); the worker
    heartbeats whenever its user acts."""
    worker = services.ensure_my_worker(request.user)
    result = services.perform(request.user, action_key, worker_euid=worker, **fields)
    if not result.replayed:
        services.heartbeat(request.user, worker)
    return result


def is_human(request: HttpRequest) -> bool:
    return bool(roles_of(request.user) & BENCH_ROLES)


def is_operator(request: HttpRequest) -> bool:
    return bool(roles_of(request.user) & {"operator", "admin"})


# Far beyond any queue's last page, and small enough that its offset is a bigint.
LAST_PAGE = 10**9


def page_number(request: HttpRequest) -> int:
    try:
        return min(LAST_PAGE, max(1, int(request.GET.get("page", "1"))))
    except ValueError:
        return 1


def answer_bulk(request: HttpRequest, verb: str, picks: list[Pick], *, reason: str,
                back: str) -> HttpResponse:
    """Run a bulk verb (web/bulk.py) with the form's reason and hold code; say the outcome
    and go back (or 403 when the role may do none of them)."""
    out = run_bulk(request.user, verb, picks,
                   idempotency_key=request.POST.get("idempotency_key", "").strip(),
                   payload=bulk_payload(verb, reason, request.POST.get("hold_code", "").strip()))
    if out.forbidden:
        return forbidden(request, out.forbidden)
    for level, text in outcome_messages(verb, out):
        getattr(messages, level)(request, text)
    return redirect(back)
