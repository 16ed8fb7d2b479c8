"""The intake batch: up to MAX_INTAKE_ITEMS route-subject and register-subject requests in
one call, each run as its own action (own transaction, own idempotency key, own result), so
one refused item leaves the others done and writes nothing of its own (docs/API.md, Intake)."""

# No "from __future__ import annotations": django-ninja reads the endpoint annotations.

from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, Literal

from ninja import Router
from pydantic import Field

from bloomops.accounts.tokens import user_for_token
from bloomops.api import action_schemas as A
from bloomops.execution.actions.intake import MAX_INTAKE_ITEMS
from bloomops.execution.errors import ActionError
from bloomops.execution.executor import execute, would_replay
from bloomops.execution.objects import name_key


class RouteItem(A.StrictSchema):
    action: Literal["route_subject"]
    request: A.RouteSubjectIn


class RegisterItem(A.StrictSchema):
    action: Literal["register_subject"]
    request: A.RegisterSubjectIn


BatchItem = Annotated[RouteItem | RegisterItem, Field(discriminator="action")]


class IntakeBatchIn(A.StrictSchema):
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_INTAKE_ITEMS, description=(
        f"1 to {MAX_INTAKE_ITEMS} intake requests, each the body of its action's endpoint."))


class ItemResultOut(A.StrictSchema):
    index: int
    action: str
    ok: bool
    status: int
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class IntakeBatchOut(A.StrictSchema):
    succeeded: int
    failed: int
    items: list[ItemResultOut]


def _replays_named(body: IntakeBatchIn, user, build_request) -> dict[str, int]:
    """name -> the first item that registered it when this batch was sent before, among the
    names several items give: on a resend such an item is answered its result again, and an
    item refused the first time (a queue disabled then) must not take its name now. Only
    repeated names are looked up, one query each."""
    names = Counter(name_key(item.request.name) for item in body.items
                    if isinstance(item, RegisterItem) and item.request.name is not None)
    done: dict[str, int] = {}
    for i, item in enumerate(body.items):
        if isinstance(item, RegisterItem) and item.request.name is not None \
                and names[name_key(item.request.name)] > 1:
            try:
                if would_replay(build_request(item.action, item.request, user)):
                    done.setdefault(name_key(item.request.name), i)
            except ActionError:  # refused as it runs below, with its own words
                pass
    return done


# Said of every item not run once the caller's token stopped working mid-batch.
STOPPED = ("The token was revoked, expired, or its account lost sign-in or this role while the"
           " batch ran: this item and those after it were not run.")


def run_batch(body: IntakeBatchIn, user, build_request,
              current: Callable[[], Any] | None = None) -> dict:
    """Each item through the executor, in order. ``current``: the caller as their token
    stands now, asked before each item (a batch of 200 runs for seconds, and a token revoked
    meanwhile wrote 140 more subjects); None once it no longer works."""
    out = []
    # the names of the new subjects made so far (an earlier item refused made none), and
    # those items done when the batch was sent before made
    made = _replays_named(body, user, build_request)
    stopped = False
    for i, item in enumerate(body.items):
        if current is not None and not stopped:
            user = current()
            stopped = user is None
        if stopped:
            refusal = ActionError("FORBIDDEN", STOPPED)
            out.append({"index": i, "action": item.action, "ok": False,
                        "status": refusal.http_status, "error": refusal.as_dict()["error"]})
            continue
        name = item.request.name if isinstance(item, RegisterItem) else None
        if name is not None and made.get(name_key(name), i) != i and not would_replay(
                build_request(item.action, item.request, user)):
            refusal = ActionError("VALIDATION_ERROR", f"items[{made[name_key(name)]}] gives"
                                  " this name too: give each new subject its own name.",
                                  field="name")
            out.append({"index": i, "action": item.action, "ok": False,
                        "status": refusal.http_status, "error": refusal.as_dict()["error"]})
            continue
        try:
            result = execute(build_request(item.action, item.request, user))
        except ActionError as exc:
            out.append({"index": i, "action": item.action, "ok": False,
                        "status": exc.http_status, "error": exc.as_dict()["error"]})
        else:
            if name is not None:
                made.setdefault(name_key(name), i)
            out.append({"index": i, "action": item.action, "ok": True, "status": 200,
                        "result": result.as_dict()})
    ok = sum(1 for r in out if r["ok"])
    return {"succeeded": ok, "failed": len(out) - ok, "items": out}


def add_batch_route(actions: Router, responses: dict, auth, build_request) -> None:
    """Mounts POST /actions/intake-batch on the API's action router. ``auth`` refuses a role
    that may not take work in before the body is read; the executor checks each item again."""

    @actions.post("/intake-batch", response={**responses, 200: IntakeBatchOut}, auth=auth,
                  operation_id="intake_batch",
                  summary=f"Route or register up to {MAX_INTAKE_ITEMS} subjects, one action"
                          " per item with its own result")
    def intake_batch(request, body: IntakeBatchIn):
        token = request.headers.get("Authorization", "").partition(" ")[2].strip()
        return run_batch(body, request.auth, build_request,
                         current=lambda: user_for_token(token))
