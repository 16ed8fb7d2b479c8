"""The Intake screen: an operator pastes or uploads a CSV manifest, sees every row checked
(nothing written), confirms, and gets a result per row and a result CSV. Each row is its own
route_subject or register_subject action (docs/RULES.md#intake)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from bloomops.accounts.roles import roles_of
from bloomops.execution import selectors
from bloomops.execution.actions.intake import MAX_INTAKE_ITEMS, preview
from bloomops.execution.context import Actor, action_spec
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import execute
from bloomops.execution.states import PRIORITY_CLASSES
from bloomops.web import manifest
from bloomops.web.spreadsheets import csv_response
from bloomops.web.views.common import forbidden, not_found

SESSION_PREFIX = "intake_results:"
# How many batches' results a session keeps for download (the newest).
KEPT_BATCHES = 5
BATCH_KEY = re.compile(r"^[0-9a-f]{32}$")
DONE_OUTCOMES = ("ROUTED", "REGISTERED")
# The batches this session has confirmed (the newest, as many as their results are kept: a
# batch whose results are gone is run again, each row replaying), and how long a second
# Confirm of one waits for the first's results (a manifest at its limit takes seconds).
CONFIRMED_KEY = "intake_confirmed"
CONFIRM_WAIT = 30.0


def intake_role(view: Callable) -> Callable:
    """The roles the intake actions allow (their action templates) use this screen."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        allowed = action_spec("route_subject").allowed_roles | action_spec(
            "register_subject").allowed_roles
        if not roles_of(request.user) & allowed:
            return forbidden(request, "Your role may not bring work into queues.")
        return view(request, *args, **kwargs)

    return wrapped


def _page(request: HttpRequest, **context) -> HttpResponse:
    context.setdefault("columns", manifest.COLUMNS)
    context.setdefault("max_rows", MAX_INTAKE_ITEMS)
    # "URGENT 200, STAT 300": what a number means (RULES.md#order), lowest band first
    context.setdefault("priority_bands", sorted(
        ((floor, name) for name, floor in PRIORITY_CLASSES.items() if floor > 0)))
    context.setdefault("lab_zone", settings.TIME_ZONE)  # how a due date is read
    status = context.pop("status", 200)
    return render(request, "web/intake.html", context, status=status)


def _manifest_text(request: HttpRequest) -> str:
    upload = request.FILES.get("manifest_file")
    if upload is not None and upload.size:
        if upload.size > manifest.MAX_MANIFEST_BYTES:
            raise manifest.ManifestError("The manifest file is too large.")
        return manifest.decode(upload.read())
    text = request.POST.get("manifest", "")
    manifest.decode(text.encode("utf-8", "replace"))  # the same size bound as a file
    return text


def _rows(request: HttpRequest, text: str, batch_key: str,
          notes: list[str] | None = None) -> tuple[list[manifest.Row], dict[str, dict]]:
    """The manifest's rows as requests, and the lab's queues' settings by key (one read for
    every row, and for the warnings after the rows' checks)."""
    rows = manifest.parse(text, notes)
    configs = {q["queue_key"]: q["config"] for q in selectors.queues()}
    manifest.build_requests(rows, Actor.of(request.user), batch_key, configs)
    manifest.refuse_repeated_names(rows)
    return rows, configs


@require_http_methods(["GET", "POST"])
@intake_role
def intake(request: HttpRequest) -> HttpResponse:
    """The manifest form; posted to (from a preview's "Edit the manifest"), with the text
    as it was, to fix a few rows without pasting it all again. Writes nothing."""
    text = request.POST.get("manifest", "") if request.method == "POST" else ""
    return _page(request, manifest=text[:manifest.MAX_MANIFEST_BYTES])


@require_POST
@intake_role
def intake_preview(request: HttpRequest) -> HttpResponse:
    """Every row checked as its action would be, nothing written."""
    try:
        text = _manifest_text(request)
        batch_key = uuid.uuid4().hex
        notes: list[str] = []
        rows, configs = _rows(request, text, batch_key, notes)
    except manifest.ManifestError as exc:
        return _page(request, error=str(exc), manifest=request.POST.get("manifest", ""),
                     status=400)
    for row in rows:
        if row.request is None:
            continue
        try:
            row.outcome = preview(row.request)
        except ActionError as exc:
            row.problem = manifest.in_columns(exc)
    _warn(rows, configs)
    # a row named like a registered subject runs only if ticked: most often it is the same
    # manifest uploaded again, and confirming registered every specimen twice
    ok = [r.line for r in rows if not r.problem and not r.warning]
    warned = [r.line for r in rows if not r.problem and r.warning]
    return _page(request, rows=rows, manifest=text, batch_key=batch_key, notes=notes,
                 accepted=",".join(map(str, ok)), ok_count=len(ok), warned_count=len(warned),
                 bad_count=len(rows) - len(ok) - len(warned))


def _warn(rows: list[manifest.Row], configs: dict[str, dict]) -> None:
    """What a row is warned of (it runs only when ticked): a name registered before, a site
    spelt as no queue spells it."""
    manifest.warn_of_duplicates(rows, selectors.subjects_named(
        [r.values["name"] for r in rows if r.action_key == "register_subject" and not r.problem]))
    manifest.warn_of_spellings(rows, configs)


@require_POST
@intake_role
def intake_confirm(request: HttpRequest) -> HttpResponse:
    """The rows the preview accepted, each run as its own action; the others are skipped."""
    batch_key = request.POST.get("batch_key", "")
    if not BATCH_KEY.fullmatch(batch_key):
        return _page(request, error="The confirmation lost its batch; preview again.",
                     status=400)
    # Back and Confirm again, or a second click while the first runs (the browser shows the
    # second's answer): the first run's results stand, shown once there (a replay of each
    # row would rewrite them as "already done", the result CSV the person kept included)
    if not request.session.add_once(CONFIRMED_KEY, batch_key, keep=KEPT_BATCHES):
        deadline = time.monotonic() + CONFIRM_WAIT
        while request.session.stored().get(SESSION_PREFIX + batch_key) is None \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        return redirect(f"{reverse('intake_results', args=[batch_key])}?again=1")
    try:
        return _confirm(request, batch_key)
    finally:
        if _kept(request, batch_key) is None:  # refused whole (or failed): it may be sent again
            request.session.discard_once(CONFIRMED_KEY, batch_key)


def _confirm(request: HttpRequest, batch_key: str) -> HttpResponse:
    try:
        rows, configs = _rows(request, request.POST.get("manifest", ""), batch_key)
    except manifest.ManifestError as exc:
        return _page(request, error=str(exc), status=400)
    _warn(rows, configs)
    # the rows the preview accepted, and those named like a registered subject ticked to run
    accepted = {p for p in request.POST.get("accepted", "").split(",") if p.isdigit()}
    accepted |= {p for p in request.POST.getlist("also") if p.isdigit()}
    results = []
    for row in rows:
        v = row.values
        result = {"line": row.line, "euid": v.get("euid", ""), "name": v.get("name", ""),
                  # the queue the row went to as the lab spells its key ("SMITH.RECEIPT"
                  # routed to smith.receipt): the results match the system, not the typing
                  "queue": (row.request.queue_key if row.request is not None
                            and row.request.queue_key else v.get("queue", "")),
                  "priority": v.get("priority", ""),
                  "due_date": v.get("due_date", "")}
        # a row the manifest itself refuses (a repeated name) has no request: never run,
        # whatever the confirmation says was accepted
        if str(row.line) not in accepted or row.request is None:
            result.update(outcome="SKIPPED", message=row.problem or (
                f"Not registered: {row.warning} It was not ticked to register anyway."
                if row.warning else _why_skipped(row)))
        else:
            try:
                done = execute(row.request)
            except ActionError as exc:
                result.update(outcome="REFUSED", error_code=exc.code,
                              message=manifest.in_columns(exc))
            else:
                verb = "ROUTED" if row.action_key == "route_subject" else "REGISTERED"
                result.update(outcome=verb, subject_euid=done.get("subject_euid"),
                              state=done.get("state"), message="Already done before:"
                              " nothing repeated." if done.replayed else "")
        results.append(result)
    _keep(request, batch_key, results)
    # the results are a page of their own: reloading it, or coming Back to it, asks to send
    # nothing again
    return redirect("intake_results", batch_key)


@require_GET
@intake_role
def intake_results(request: HttpRequest, batch_key: str) -> HttpResponse:
    """What a confirmed manifest did, row by row, from the person's session."""
    results = _kept(request, batch_key)
    if results is None:
        return _not_kept(request)
    return _page(request, results=results, batch_key=batch_key,
                 again=request.GET.get("again") == "1",
                 done_count=sum(1 for r in results if r["outcome"] in DONE_OUTCOMES))


def _why_skipped(row: manifest.Row) -> str:
    """The preview's words for a row it did not accept, asked again (the confirmation
    carries which rows were accepted, not why the others were not)."""
    if row.request is not None:
        try:
            preview(row.request)
        except ActionError as exc:
            return manifest.in_columns(exc)
    return "Not accepted at preview (it would be now: preview the file again to take it)."


def _kept(request: HttpRequest, batch_key: str) -> list[dict] | None:
    return request.session.get(SESSION_PREFIX + batch_key) if BATCH_KEY.fullmatch(
        batch_key) else None


def _not_kept(request: HttpRequest) -> HttpResponse:
    return not_found(request, "No such intake results in this session: they are kept in the"
                     " session that ran the intake.")


def _keep(request: HttpRequest, batch_key: str, results: list[dict]) -> None:
    """The results for the download, in the person's own session (only the newest few)."""
    kept = [k for k in request.session.keys() if k.startswith(SESSION_PREFIX)]
    for old in kept[:max(0, len(kept) - KEPT_BATCHES + 1)]:
        del request.session[old]
    request.session[SESSION_PREFIX + batch_key] = results


@require_GET
@intake_role
def intake_results_csv(request: HttpRequest, batch_key: str) -> HttpResponse:
    results = _kept(request, batch_key)
    if results is None:
        return _not_kept(request)
    response = csv_response(f"intake-{batch_key[:8]}.csv")
    response.write(manifest.results_csv(results))
    return response
