"""Queue settings (admin): a queue's settings with help, a preview of what will change before
it is saved, disable/enable with a reason, the change history; and a new queue
(RULES.md#queue-configuration). Every save is one queue action."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from bloomops.accounts.roles import roles_of
from bloomops.execution import selectors
from bloomops.execution.actions.queue_fields import (
    HELP,
    LIST_FIELDS,
    MANAGED_BY,
    clean_settings,
)
from bloomops.execution.actions.queues import new_queue_problems
from bloomops.execution.errors import ActionError, Problems
from bloomops.execution.executor import ActionResult
from bloomops.execution.objects import is_engine_template
from bloomops.execution.people import rostered_people
from bloomops.execution.policy import flow_warnings, named_by_queues, open_to_every_worker
from bloomops.execution.results import declared_results
from bloomops.execution.selectors import results as results_selectors
from bloomops.tapdb.templates import all_templates
from bloomops.web import services
from bloomops.web.queue_form import (
    ONLY_DEFAULT,
    decode,
    encode,
    field_label,
    form_fields,
    read_form,
    split_list,
)
from bloomops.web.views.common import (
    answer,
    forbidden,
    guards,
    no_queue,
    reason_of,
    said_refused,
)


def _admin_only(request: HttpRequest) -> HttpResponse | None:
    if "admin" not in roles_of(request.user):
        return forbidden(request, "Only admins change queue settings.")
    return None


def _page(request: HttpRequest, row: dict, typed: Any = None, status: int = 200,
          **extra) -> HttpResponse:
    cfg = row["config"]
    return render(request, "web/queue_settings.html", {
        "queue": row, "cfg": cfg, "fields": form_fields(cfg, typed), "help": HELP,
        "managed": cfg.get("managed_by") == MANAGED_BY,
        "typed_reason": typed.get("reason", "") if typed is not None else "",
        "history": selectors.queue_history(row["queue_key"]),
        "templates": subject_templates(),
        "queue_choices": [q for q in selectors.queues() if q["queue_key"] != row["queue_key"]],
        "open_to_all": open_to_every_worker(cfg),
        "only_default_field": ONLY_DEFAULT,
        **extra}, status=status)


@require_http_methods(["GET", "POST"])
def queue_settings(request: HttpRequest, queue_key: str) -> HttpResponse:
    """GET: the form. POST: the preview (the changes the form asks for, not yet saved)."""
    refused = _admin_only(request)
    if refused:
        return refused
    row = selectors.queue_config(queue_key)
    if row is None:
        return no_queue(request, queue_key, "queue_settings")
    if request.method == "GET":
        return _page(request, row)
    try:
        seen_revision = guards(request)["expected_revision"]
        changes = read_form(request.POST, row["config"])
        # The engine's own checks, so a preview never offers a change the save would refuse,
        # and its values as the save stores them (a template's short name in full).
        cleaned = clean_settings(changes)
        changes = {k: cleaned.get(k, v) for k, v in changes.items()
                   if cleaned.get(k, v) != row["config"].get(k)}
    except ActionError as err:
        said_refused(request, err)
        return _page(request, row, typed=request.POST, status=400)
    if not changes:
        messages.info(request, "Nothing would change: every field has that value already.")
        return _page(request, row)
    preview = [(k, field_label(k), row["config"].get(k), v) for k, v in sorted(changes.items())]
    # A next queue may be created after this one (a lab's file names them in any order), so
    # these are said, not refused.
    queues = {q["queue_key"]: q["config"] or {} for q in selectors.queues()}
    warnings = flow_warnings(queue_key, {**row["config"], **changes}, queues)
    if any(name in changes for name in LIST_FIELDS):
        warnings += [w for _, w in selectors.served_by_nobody(
            [(queue_key, row["config"], changes)])]
    if "result_fields" in changes:
        warnings += _results_left_behind(queue_key, row["config"], changes["result_fields"])
    # the form below keeps what was typed: a warning is fixed there, not typed again
    return _page(request, row, typed=request.POST, preview=preview, changes=encode(changes),
                 warnings=warnings, reason=reason_of(request), seen_revision=seen_revision)


def _results_left_behind(queue_key: str, before: dict, after: list[dict]) -> list[str]:
    """A result field renamed or dropped: the attempts that recorded it keep it under its
    old key, read apart from the fields declared ("also recorded") from then on."""
    kept = {f["key"] for f in after}
    gone = [f["key"] for f in declared_results(before) if f["key"] not in kept]
    counted = results_selectors.recorded_under(queue_key, gone) if gone else {}
    return [f"{n} completed attempt{'s' if n != 1 else ''} recorded {key!r}: renamed or"
            " removed, those values show apart (under \u201calso recorded\u201d) and leave"
            " its tally. To rename what people read, change its label and keep its key."
            for key in gone if (n := counted.get(key))]


@require_POST
def save_queue_settings(request: HttpRequest, queue_key: str) -> HttpResponse:
    """Save the previewed change at the revision the page showed."""
    refused = _admin_only(request)
    if refused:
        return refused
    default = reverse("queue_settings", args=[queue_key])

    def run() -> ActionResult:
        g = guards(request)
        payload = {**decode(request.POST.get("changes", "")), "reason": reason_of(request)}
        return services.perform(request.user, "update_queue", queue_key=queue_key,
                                idempotency_key=g["idempotency_key"],
                                expected_revision=g["expected_revision"], payload=payload)

    return answer(request, run, lambda r: f"Saved: {', '.join(r['changes'])} (revision"
                  f" {r['revision']}).", default)


@require_POST
def queue_enabled(request: HttpRequest, queue_key: str) -> HttpResponse:
    refused = _admin_only(request)
    if refused:
        return refused

    def run() -> ActionResult:
        g = guards(request)
        enabled = request.POST.get("enabled")
        if enabled not in ("true", "false"):  # a slip must not disable a queue
            raise ActionError("VALIDATION_ERROR", "The page sent neither enable nor disable.",
                              field="enabled")
        return services.perform(request.user, "set_queue_enabled", queue_key=queue_key,
                                idempotency_key=g["idempotency_key"],
                                expected_revision=g["expected_revision"],
                                payload={"enabled": enabled == "true",
                                         "reason": reason_of(request)})

    return answer(request, run, lambda r: "Queue enabled." if r["changes"]["enabled"][1]
                  else "Queue disabled.", reverse("queue_settings", args=[queue_key]))


@require_POST
def replace_queue(request: HttpRequest, queue_key: str) -> HttpResponse:
    """A queue's templates or key changed: the queue retired and its successor created with
    every other setting, in one action (RULES.md#queue-configuration)."""
    refused = _admin_only(request)
    if refused:
        return refused
    new_key = request.POST.get("new_queue_key", "").strip()

    def run() -> ActionResult:
        g = guards(request)
        payload: dict[str, Any] = {
            "subject_template_codes": request.POST.getlist("subject_template_codes"),
            "reason": reason_of(request)}
        if new_key and new_key != queue_key:
            payload["new_queue_key"] = new_key
        return services.perform(request.user, "replace_queue", queue_key=queue_key,
                                idempotency_key=g["idempotency_key"],
                                expected_revision=g["expected_revision"], payload=payload)

    return answer(request, run, lambda r: f"Replaced: {r['queue_key']} takes"
                  f" {', '.join(request.POST.getlist('subject_template_codes'))}; the old"
                  " queue is retired with its history.",
                  reverse("queue_settings", args=[queue_key]),
                  lambda r: reverse("queue_settings", args=[r["queue_key"]]))


def subject_templates() -> list[str]:
    """The templates a queue may take as subjects: the lab's content and data, not the
    engine's own objects."""
    return sorted(code for code, ref in all_templates().items()
                  if ref.semantic_category in ("content", "data")
                  and not is_engine_template(ref))


@require_http_methods(["GET", "POST"])
def new_queue(request: HttpRequest) -> HttpResponse:
    refused = _admin_only(request)
    if refused:
        return refused
    if request.method == "GET":
        return render(request, "web/queue_new.html", _new_queue_choices())
    queue_key = request.POST.get("queue_key", "").strip()
    capabilities = split_list(request.POST.get("required_worker_capabilities", ""))
    manual_only = request.POST.get("manual_only") == "on"

    def run() -> ActionResult:
        payload: dict[str, Any] = {
            "subject_template_codes": request.POST.getlist("subject_template_codes"),
            "reason": reason_of(request)}
        if request.POST.get("display_name", "").strip():
            payload["display_name"] = request.POST["display_name"].strip()
        if capabilities:
            payload["required_worker_capabilities"] = capabilities
        if manual_only:
            payload["manual_only"] = True
        problems = Problems()
        with problems.field():
            _who_may_take(capabilities, request.POST.get("needs_no_step") == "on")
        # said with the choice above, not one try after it
        new_queue_problems(payload, queue_key, problems)
        problems.raise_any()
        return services.perform(request.user, "create_queue", queue_key=queue_key,
                                idempotency_key=guards(request)["idempotency_key"],
                                payload=payload)

    try:
        run()
    except ActionError as err:
        if err.code == "FORBIDDEN":
            return forbidden(request, err.message)
        said_refused(request, err)
        # what was typed and ticked comes back: a refused key unticked the templates, and
        # the next try was refused for having none
        return render(request, "web/queue_new.html", {
            **_new_queue_choices(), "form": request.POST,
            "chosen": request.POST.getlist("subject_template_codes"),
            # the way to the queue that has the key: change or replace it there
            "existing": queue_key if err.code == "QUEUE_EXISTS" else None}, status=400)
    config = {"required_worker_capabilities": capabilities, "manual_only": manual_only}
    if open_to_every_worker(config):
        messages.success(request, f"Queue {queue_key} created. It asks for no step: any"
                         f" {'person at the bench' if manual_only else 'worker'} may take its"
                         " items.")
    else:
        messages.success(request, f"Queue {queue_key} created. Workers with"
                         f" {', '.join(capabilities)} may take its items.")
    if not selectors.queue_coverage(config)[0].rostered:
        messages.warning(request, f"Nobody can serve {queue_key} yet: no person's profile and"
                         " no worker has what it asks for. Give the people the capability on"
                         " People.")
    return redirect(reverse("queue_settings", args=[queue_key]))


def _who_may_take(capabilities: list[str], needs_no_step: bool) -> None:
    """A new queue names who may take its items, or says that it asks for no step: a queue
    asking for none is open to every worker, service robots included, which was what a new
    queue became unasked."""
    if capabilities and needs_no_step:
        raise ActionError("VALIDATION_ERROR", "Name the steps a worker needs, or tick"
                          f" \"{NEEDS_NO_STEP}\", not both.", field="needs_no_step")
    if not capabilities and not needs_no_step:
        raise ActionError("VALIDATION_ERROR", "Name the steps a worker needs to take its items"
                          " (Required worker capabilities), or tick"
                          f" \"{NEEDS_NO_STEP}\".", field="required_worker_capabilities")


NEEDS_NO_STEP = "It asks for no step: any worker may take its items"


def _new_queue_choices() -> dict[str, Any]:
    """What the new-queue form offers: the templates, and the steps the people at the bench
    and the queues name already (a new queue's capability is most often one of them)."""
    steps = set(named_by_queues([q["config"] for q in selectors.queues()])["capabilities"])
    steps.update(c for p in rostered_people() for c in p.profile.get("capabilities") or [])
    return {"templates": subject_templates(), "help": HELP, "steps": sorted(steps),
            "needs_no_step": NEEDS_NO_STEP}


@require_GET
def queue_settings_index(request: HttpRequest) -> HttpResponse:
    refused = _admin_only(request)
    if refused:
        return refused
    return render(request, "web/queue_settings_index.html", {"queues": selectors.queues()})
