"""What the operator UI does besides reading: find or register the signed-in human worker,
and run one executor action for a view. Every write goes through ``executor.execute``."""

from __future__ import annotations

import uuid
from typing import Any

from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from bloomops.accounts.signatures import display_names
from bloomops.execution import clock, people, selectors
from bloomops.execution.actions.outputs import routed_output
from bloomops.execution.context import action_name
from bloomops.execution.envelope import parse_ts_or_none, ts
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import ActionRequest, ActionResult, Actor, execute
from bloomops.execution.guards import lease_not_active
from bloomops.execution.objects import LEASE, is_kind, load, worker_by_key
from bloomops.execution.policy import lease_effective_status, setting_on
from bloomops.execution.states import WorkerType
from bloomops.memo import per_request
from bloomops.tapdb.templates import all_templates
from bloomops.tapdb.tenancy import tenant_of
from bloomops.text import readable_line
from bloomops.web.bench_words import template_words
from bloomops.web.timewords import relative


def human_worker_key(user) -> str:
    return people.human_worker_key(user.get_username())


def my_worker_euid(user) -> str | None:
    """The euid of the user's human worker, if it was registered (a read, no write)."""
    worker = worker_by_key(human_worker_key(user), tenant=tenant_of())
    return worker.euid if worker else None


def open_claims(user) -> tuple[str | None, int]:
    """The person's human worker and how many items it holds now (one query each): what an
    admin taking their bench role or sign-in away is told stays theirs until it runs out."""
    euid = my_worker_euid(user)
    if euid is None:
        return None, 0
    held = selectors.leases(status="ACTIVE", worker_euid=euid, limit=1, counted=True)
    return euid, int(held[0]["total"]) if held else 0


def ensure_my_worker(user) -> str:
    """The user's HUMAN_SESSION worker, registered through the executor on first use.
    Raises ActionError (FORBIDDEN for roles that may not act as a human worker)."""
    euid = my_worker_euid(user)
    if euid:
        return euid
    result = execute(ActionRequest(
        action_key="register_worker",
        actor=Actor.of(user),
        idempotency_key=f"register:{human_worker_key(user)}",
        payload={
            "worker_key": human_worker_key(user),
            "worker_type": WorkerType.HUMAN_SESSION.value,
            # a person's name as the account holds it ("José" typed decomposed, a no-break
            # space): made a line a worker's name may be, or the person could not work
            "display_name": readable_line(user.get_full_name()) or user.get_username(),
        },
    ))
    return result["worker_euid"]


def heartbeat(user, worker_euid: str) -> None:
    """Liveness of a human worker: recorded whenever its user has acted."""
    execute(ActionRequest(action_key="heartbeat_worker", actor=Actor.of(user),
                          idempotency_key=uuid.uuid4().hex, worker_euid=worker_euid))


def signed_out(user) -> None:
    """A person who signs out is no longer at the bench: their worker reports OFFLINE at
    once, instead of counting as online coverage for the rest of its liveness window (as
    long as a session may stay idle). Their next action brings it back online."""
    euid = my_worker_euid(user) if user is not None else None
    if euid is None:
        return
    try:
        execute(ActionRequest(action_key="heartbeat_worker", actor=Actor.of(user),
                              idempotency_key=uuid.uuid4().hex, worker_euid=euid,
                              payload={"status": "OFFLINE"}))
    except ActionError:  # a role that may no longer act as a worker: nothing to report
        pass


def perform(user, action_key: str, *, idempotency_key: str, **fields: Any) -> ActionResult:
    """One executor action on behalf of a signed-in user."""
    return execute(ActionRequest(action_key=action_key, actor=Actor.of(user),
                                 idempotency_key=idempotency_key, **fields))


# ---------------------------------------------------------------- dashboard presentation


def queue_said(queue_key: str) -> str:
    """A queue in a banner's sentence as it reads now: "Queue two (q2)" (one query)."""
    found = selectors.queue_config(queue_key)
    return selectors.queue_called(queue_key, found["config"] if found else None)


def shown_to(config: dict, *, admin: bool) -> bool:
    """Whether the dashboard shows a queue: one whose settings turn ``operator_visible`` off
    is an admin's alone (a machine's queue nobody at the bench or the desk acts on)."""
    return admin or setting_on(config, "operator_visible")


def dashboard_rows(ov: selectors.Overview, trends: dict[str, list[int]], *,
                   admin: bool) -> list[dict]:
    """One row per queue the reader is shown (``shown_to``): its summary, who can serve it
    (rostered, online, free slots), its trend. No queries."""
    return [
        {"q": s, "coverage": ov.coverage.get(s.queue_key) or selectors.Coverage(),
         "trend": trends.get(s.queue_key, []),
         "admins_only": not shown_to(s.config or {}, admin=False)}
        for s in ov.summaries if shown_to(s.config or {}, admin=admin)
    ]


# A completion choice on My work that makes the step's output for the next queue (the item
# itself finishes): "make|<queue_key>|<template_code>"; a plain queue key moves the item.
_MAKE = "make"


def make_choice(queue_key: str, template_code: str) -> str:
    return f"{_MAKE}|{queue_key}|{template_code}"


def parse_make_choice(value: str) -> tuple[str, str] | None:
    parts = value.split("|")
    if len(parts) == 3 and parts[0] == _MAKE and all(parts[1:]):
        return parts[1], parts[2]
    return None


def made_for_next_queue(user, lease_euid: str, queue_key: str, template_code: str) -> dict:
    """The payload of a completion that makes a ``template_code`` object of the user's leased
    item and routes it to ``queue_key`` (``outputs.routed_output``); the executor checks the
    lease, that the step's queue declares the template and that the queue takes it."""
    worker = my_worker_euid(user)
    lease = next((x for x in selectors.leases(status="ACTIVE", worker_euid=worker)
                  if x["euid"] == lease_euid), None) if worker else None
    if lease is None:
        # Ended already (an older tab: say how and when, as every action on it does), or
        # never the person's.
        ended = load(euid=lease_euid, tenant=tenant_of())
        if ended is not None and is_kind(ended, LEASE) and worker and ended.props.get(
                "worker_lookup_euid") == worker:
            raise lease_not_active(ended, lease_effective_status(ended.props, ts(clock.now())))
        raise ActionError("LEASE_NOT_OWNED", "This claim is not yours.", lease_euid=lease_euid)
    if template_code not in all_templates():  # a choice the page never offered
        raise ActionError("VALIDATION_ERROR", f"No template {template_code[:100]!r} to make.",
                          field="next_queue_key")
    subject = selectors.subject_diagnostics(lease["subject_euid"])
    queue = selectors.queue_config(queue_key)
    if subject is None or queue is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r} to make it for.",
                          queue_key=queue_key)
    words = template_words(template_code)
    name = f"{words[:1].upper()}{words[1:]} of {subject.name or subject.euid}"
    return {"outputs": [routed_output(template_code, name, {
        "euid": subject.euid, "props": subject.props, "execution": subject.execution}, queue)]}


def named_actions(actions: list[dict]) -> list[dict]:
    """Each action record (with executed_by, executed_by_name, action_key) with who did it
    as people read a person (``who``): their name as the record kept it when they acted, so
    a later rename does not rewrite who did what, else (an older record) as it reads now,
    one query for those (and for whoever asked for what a record decided, ``asked_by`` where
    a read gives it: ``asker``, their name as it reads now); and what was done in the
    action's words (``what``, None for another writer's action)."""
    now = display_names([a["executed_by"] for a in actions if not a["executed_by_name"]]
                        + [a["asked_by"] for a in actions if a.get("asked_by")])
    return [{**a, "who": a["executed_by_name"] or now.get(a["executed_by"]),
             "asker": now.get(a.get("asked_by") or ""),
             "what": action_name(a["action_key"])} for a in actions]


def last_change(euid: str) -> str:
    """Who last acted on the subject, when and why: what a person whose page was stale
    needs to decide again (a conflict itself says only what the subject is now)."""
    row = selectors.last_action(euid)
    if row is None:
        return ""
    name = action_name(row["action_key"]) or row["action_key"]  # or another writer's
    moment = parse_ts_or_none(row["executed_at"])
    why = f": \u201c{row['reason']}\u201d" if row.get("reason") else ""
    return (f" Last change: {name.lower()} by {row['executed_by'] or 'someone'}"
            f"{', ' + relative(moment) if moment else ''}{why}.")


def item_called(result: Any) -> str:
    """The item an action's result is about, as the person's cards name it: "Specimen 0082
    (Z-MX-2JB)" (the EUID alone when it has no name)."""
    return subject_called(result["subject_euid"])


def subject_called(euid: str | None) -> str:
    return _called(euid, selectors.subject_name(euid) if euid else None)


def _called(euid: str | None, name: str | None) -> str:
    return f"{name} ({euid})" if name else str(euid)


def item_link(result: Any) -> SafeString:
    """item_called as a link to the item's page, for a message that says what became of it
    (a message is text otherwise: the item just done could not be followed)."""
    return subject_links([result["subject_euid"]])


def subject_links(euids: list[str]) -> SafeString:
    """Subjects named as the bench names them, each linking to its page, comma-separated:
    what a step made, the name to write on the new tube and the page to follow it by. Their
    names are read in one query."""
    names = selectors.subject_names(euids) if euids else {}
    return format_html_join(", ", '<a href="{}">{}</a>', (
        (reverse("subject", args=[e]), _called(e, names.get(e))) for e in euids))


def queues(request: Any) -> list[dict[str, Any]]:
    """The tenant's queues (selectors.queues: config only, dispatch order), read once per
    request: a page's own list and every ``queue_called`` its template says read the same
    one. A read page's only; a page that writes a queue reads it after the write itself."""
    return per_request(request, "queues", selectors.queues)
