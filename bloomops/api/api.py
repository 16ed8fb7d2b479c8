"""JSON API v1 under /api/v1/execution/: the read models and the actions.

Views only parse and validate input, then call the executor (writes) or a selector (reads).
Authentication is a bearer token (``python manage.py create_api_token USERNAME``); the
token's user and groups decide the role, and the executor checks the role of every action
against its action template, exactly as for the UI. No browser session and no CSRF token:
a request without a valid bearer token is 401 whatever cookies it carries.
"""

# No "from __future__ import annotations": django-ninja reads the endpoint annotations.

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Router
from ninja.security import HttpBearer

from bloomops.accounts.roles import roles_of
from bloomops.accounts.tokens import user_for_token
from bloomops.api import action_schemas as A
from bloomops.api import approval_schemas as AS
from bloomops.api import errors, intake, outside, results
from bloomops.api import schemas as S
from bloomops.api.guard import MAX_BODY_BYTES, StrictJsonParser, refuse_unknown_query
from bloomops.api.readmodel import lease_dict, subject_dict, summary_dict, worker_dict
from bloomops.api.request_schemas import REQUEST_SCHEMAS
from bloomops.execution import selectors
from bloomops.execution.actions import ACTIONS as ACTION_REGISTRY
from bloomops.execution.context import ActionRequest, Actor, action_spec, ensure_role
from bloomops.execution.envelope import ts
from bloomops.execution.errors import HTTP_STATUS, ActionError
from bloomops.execution.evidence import verify_bundle
from bloomops.execution.executor import execute
from bloomops.execution.exports import export_evidence
from bloomops.execution.stats import snapshot
from bloomops.tapdb.tenancy import tenant_of


class BearerToken(HttpBearer):
    """``Authorization: Bearer <token>``; the token's user becomes request.user.

    The role is checked here too, before the request is parsed: any bloomops role for reads
    (docs/ARCHITECTURE.md), the action template's allowed_roles for an action (the executor checks
    them again). So a caller whose role may not act learns FORBIDDEN, not which fields the
    action needs."""

    def __init__(self, action_key: str | None = None, refusal: str | None = None) -> None:
        self.action_key = action_key
        # Words for FORBIDDEN where the endpoint is more than the one action it checks.
        self.refusal = refusal
        super().__init__()

    def authenticate(self, request: HttpRequest, token: str):
        user = user_for_token(token.strip())
        if user is None:
            return None
        roles = roles_of(user)
        if self.action_key is None:
            if not roles:
                raise ActionError("FORBIDDEN", "Your account has no bloomops role.")
        else:
            try:
                ensure_role(roles, action_spec(self.action_key))
            except ActionError as exc:
                if self.refusal is None:
                    raise
                raise ActionError("FORBIDDEN", self.refusal) from exc
        request.user = user
        return user


def _codes(status: int, *known: str) -> str:
    return ", ".join(code for code, st in HTTP_STATUS.items() if st == status
                     and code not in known)


API_DESCRIPTION = f"""
The execution-queue API of bloomops. Every write goes through the TapDB action executor
(role check, idempotency, state/revision guards, lease guards, one transaction); every read is
a read model (the same selectors the operator UI uses).

**Authentication**: `Authorization: Bearer <token>`; create a token with
`python manage.py create_api_token USERNAME`.

**Errors**: `{{"error": {{"code": "...", "message": "...", "details": {{...}}}}}}` with 400
(VALIDATION_ERROR: missing or unknown fields or query parameters, wrong types, out-of-range
numbers, NaN or Infinity, NUL characters or lone surrogates in text, malformed JSON; and
{_codes(400, "VALIDATION_ERROR")}), 401 (UNAUTHENTICATED),
403 (FORBIDDEN; {_codes(403, "FORBIDDEN")}), 404 (NOT_FOUND, also for an unknown path
under /api/), 405
(METHOD_NOT_ALLOWED), 411 (LENGTH_REQUIRED: a chunked body), 413 (PAYLOAD_TOO_LARGE: a body
over {MAX_BODY_BYTES // 1024 // 1024} MiB), 415 (UNSUPPORTED_MEDIA_TYPE: a body not sent as
application/json) and 409 for every conflict ({_codes(409)}). A refused request writes nothing.
The web server answers a request line over 4 KB (414) and a malformed header (400) in plain
text, before the API sees the request.

**Requests** are validated against this document exactly: required fields, strict types
(no coercion), enums and bounds as given; see docs/API.md "Requests" and "Limits".

**Idempotency**: every action carries `idempotency_key`. Repeating a request with the same key
and content returns the first response (`replayed: true`) with the same status; the same key
with other content is 409 IDEMPOTENCY_CONFLICT and writes nothing.

See docs/API.md for a worker walkthrough with curl.
"""

api = NinjaAPI(
    title="bloomops execution API",
    version="1",
    description=API_DESCRIPTION,
    urls_namespace="api-v1",
    auth=BearerToken(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=StrictJsonParser(),
)


errors.install(api)


# A body, on any method, may be chunked (411), too large (413) or not JSON (415): guard.py.
BODY_ERRORS = {411: S.ErrorOut, 413: S.ErrorOut, 415: S.ErrorOut}
# Any request may be malformed (400: a NUL in the path, say), unauthenticated or forbidden,
# and a GET too may come with a body the guard refuses.
READ_ERRORS = {400: S.ErrorOut, 401: S.ErrorOut, 403: S.ErrorOut, **BODY_ERRORS}
ERRORS = {**READ_ERRORS, 404: S.ErrorOut}


router = Router(tags=["read models"])
actions = Router(tags=["actions"])
router.add_decorator(refuse_unknown_query, mode="view")


# ------------------------------------------------------------------------------ reads


@router.get("/queues", response={200: list[S.QueueSummaryOut], **READ_ERRORS},
            summary="Queue summaries with every queue metric")
def list_queues(request):
    stats = snapshot.current(with_trend=False)
    return [summary_dict(s, stats.overview.lag(s.queue_key), stats)
            for s in stats.overview.summaries]


@router.get("/queues/{queue_key}", response={200: S.QueueDetailOut, 404: S.ErrorOut,
                                              **READ_ERRORS},
            summary="Queue config and summary")
def get_queue(request, queue_key: S.PathId):
    # The definition is read from TapDB, never from the snapshot: it decides the 404 and is
    # returned as it is now. The figures are the snapshot's; a queue it does not hold (made
    # by another writer since the recorder's pass) has them computed live.
    def find(stats: snapshot.Stats):
        return next((s for s in stats.overview.summaries if s.queue_key == queue_key), None)

    queue = selectors.queue_config(queue_key)
    found = None
    if queue is not None:
        stats = snapshot.current(with_trend=False)
        found = find(stats)
        if found is None and stats.source == snapshot.SNAPSHOT:
            stats = snapshot.live(with_trend=False)
            found = find(stats)
    if queue is None or found is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
    return {**summary_dict(found, stats.overview.lag(queue_key), stats),
            "config": queue["config"]}


@router.get("/queues/{queue_key}/history", response={200: S.QueueHistoryOut, 404: S.ErrorOut,
                                                      **READ_ERRORS},
            summary="A queue's configuration changes (also of the queues it replaced)")
def queue_history(request, queue_key: S.PathId):
    if selectors.queue_config(queue_key) is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
    return {"queue_key": queue_key,
            "changes": [c.as_dict() for c in selectors.queue_history(queue_key)]}


@router.get("/queues/{queue_key}/items", response={200: S.QueueItemsOut, 404: S.ErrorOut,
                                                    **READ_ERRORS},
            summary="Visible items in execution order, with the ordering fields")
def queue_items(request, queue_key: S.PathId, filters: Query[S.ItemFilters]):
    if selectors.queue_config(queue_key) is None:
        raise ActionError("NOT_FOUND", f"No queue {queue_key!r}.", queue_key=queue_key)
    wanted = {k: v for k, v in (("site", filters.site), ("platform", filters.platform),
                                ("assay", filters.assay)) if v}
    items, total = selectors.queue_items(queue_key, limit=filters.limit, offset=filters.offset,
                                         filters=wanted)
    return {
        "queue_key": queue_key, "total": total, "limit": filters.limit,
        "offset": filters.offset,
        "items": [{
            "position": i.position, "euid": i.euid, "name": i.name,
            "template_code": i.template_code, "state": i.state, "revision": i.revision,
            "priority": i.priority, "priority_class": i.priority_class,
            "due_at": i.execution.get("due_at"), "ready_at": ts(i.ready_at),
            "created_dt": i.created_dt.isoformat(), "attempt_count": i.attempt_count,
            "next_action_key": i.execution.get("next_action_key"),
            "site": i.site, "platform": i.platform, "assay": i.assay,
        } for i in items],
    }


@router.get("/subjects/{euid}", response={200: S.SubjectOut, 404: S.ErrorOut, **READ_ERRORS},
            summary="Subject execution envelope and why-not-in-queue reasons")
def get_subject(request, euid: S.PathId, filters: Query[S.SubjectQuery]):
    worker_euid = filters.worker_euid
    d = selectors.subject_diagnostics(euid, worker_euid=worker_euid)
    if d is None:
        raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
    if worker_euid and d.worker is None:  # else it would read as claimable by that worker
        raise ActionError("NOT_FOUND", "No such worker.", worker_euid=worker_euid)
    return subject_dict(d)


def _rows(rows: list[dict], key: str) -> list[dict]:
    return [{key: r["euid"], "name": r["name"], "created_dt": r["created_dt"].isoformat(),
             **(r["props"] or {})} for r in rows]


@router.get("/subjects/{euid}/history", response={200: S.HistoryOut, 404: S.ErrorOut,
                                                  **READ_ERRORS},
            summary="Execution records, leases, holds, dead letters, outputs and actions")
def subject_history(request, euid: S.PathId):
    d = selectors.subject_diagnostics(euid)
    if d is None:
        raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
    h = selectors.subject_history(d.uid)
    return {
        "subject_euid": d.euid,
        "records": _rows(h["records"], "execution_record_euid"),
        "leases": _rows(h["leases"], "lease_euid"),
        "holds": _rows(h["holds"], "hold_euid"),
        "dead_letters": _rows(h["dead_letters"], "dead_letter_euid"),
        "outputs": _rows(h["outputs"], "euid"),
        "actions": [{**a, "action_euid": a.pop("euid")} for a in selectors.action_history(d.uid)],
    }


EVIDENCE_AUTH = BearerToken("record_evidence_bundle")


@router.get("/subjects/{euid}/evidence",
            response={200: dict, 404: S.ErrorOut, 409: S.ErrorOut, **READ_ERRORS},
            auth=EVIDENCE_AUTH, summary="The subject's evidence bundle (canonical JSON),"
            " its sha256 recorded (operator); header X-Evidence-Sha256")
def subject_evidence(request, euid: S.PathId):
    export = export_evidence(euid, Actor.of(request.auth))
    response = HttpResponse(export.data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["X-Evidence-Sha256"] = export.sha256
    response["X-Evidence-Euid"] = export.result["evidence_euid"]
    return response


@router.post("/subjects/{euid}/evidence/verify",
             response={200: S.EvidenceVerdictOut, 404: S.ErrorOut, 409: S.ErrorOut,
                       **BODY_ERRORS, **READ_ERRORS},
             summary="Verify an evidence bundle file (the request body, as downloaded)"
             " against its record and the database (any role: it only reads)",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {"type": "object"}}}}})
def verify_subject_evidence(request, euid: S.PathId):
    if selectors.subject_diagnostics(euid) is None:
        raise ActionError("NOT_FOUND", "No such subject.", subject_euid=euid)
    verdict = verify_bundle(request.body, tenant_of())
    if verdict.subject_euid is None:
        raise ActionError("VALIDATION_ERROR", verdict.problems[0], field="body")
    if verdict.subject_euid != euid:
        raise ActionError("VALIDATION_ERROR", f"The file is the bundle of"
                          f" {verdict.subject_euid}, not of {euid}.", field="body")
    return verdict.as_dict()


@router.get("/approvals", response={200: list[AS.ApprovalOut], **READ_ERRORS},
            summary="Approvals, newest first, by effective status and/or subject"
            " (RULES.md#approvals)", openapi_extra=S.TOTAL_DOCUMENTED)
def list_approvals(request, response: HttpResponse, filters: Query[AS.ApprovalFilters]):
    rows = selectors.approvals(status=filters.status, subject_euid=filters.subject_euid,
                               limit=filters.limit, counted=True)
    S.say_total(response, rows)
    return [a.as_dict() for a in rows]


@router.get("/workers", response={200: list[S.WorkerOut], **READ_ERRORS},
            summary="Workers with computed status and active lease counts, by key, a page"
                    " at a time", openapi_extra=S.TOTAL_DOCUMENTED)
def list_workers(request, response: HttpResponse, page: Query[S.WorkerPage]):
    rows = selectors.workers(limit=page.limit, offset=page.offset, counted=True)
    S.say_total(response, rows, page.offset)
    return [worker_dict(w) for w in rows]


@router.get("/workers/{worker_euid}", response={200: S.WorkerOut, 404: S.ErrorOut,
                                                **READ_ERRORS}, summary="One worker")
def get_worker(request, worker_euid: S.PathId):
    rows = selectors.workers(euid=worker_euid)
    if not rows:
        raise ActionError("NOT_FOUND", "No such worker.", worker_euid=worker_euid)
    return worker_dict(rows[0])


@router.get("/leases", response={200: list[S.LeaseOut], **READ_ERRORS},
            summary="Leases by effective status (ACTIVE = active and unexpired)",
            openapi_extra=S.TOTAL_DOCUMENTED)
def list_leases(request, response: HttpResponse, filters: Query[S.LeaseFilters]):
    rows = selectors.leases(status=filters.status, worker_euid=filters.worker_euid,
                            limit=filters.limit, counted=True)
    S.say_total(response, rows)
    return [lease_dict(r) for r in rows]


@router.get("/dead-letter", response={200: list[S.DeadLetterOut], **READ_ERRORS},
            summary="Dead letters (OPEN by default; resolution=ALL for every one)",
            openapi_extra=S.TOTAL_DOCUMENTED)
def list_dead_letters(request, response: HttpResponse, filters: Query[S.DeadLetterFilters]):
    resolution = filters.resolution
    rows = selectors.dead_letters(resolution=None if resolution == "ALL" else resolution,
                                  queue_key=filters.queue_key, limit=filters.limit,
                                  offset=filters.offset, counted=True)
    S.say_total(response, rows, filters.offset)
    return [{
        "dead_letter_euid": r["euid"], "subject_euid": r["subject_euid"],
        "subject_state": r["subject_state"], "subject_revision": r["subject_revision"],
        "queue_key": r["props"].get("queue_lookup_key"),
        "error_class": r["props"].get("error_class"),
        "error_message": r["props"].get("error_message"),
        "failure_count": r["props"].get("failure_count"),
        "resolution_state": r["props"].get("resolution_state"),
        "dead_lettered_at": r["props"].get("dead_lettered_at"), "properties": r["props"],
    } for r in rows]


# ------------------------------------------------------------------------------ actions

# path -> (action key, request schema, summary), from the engine's action registry.
ACTIONS: dict[str, tuple[str, type[A.ActionEnvelope], str]] = {
    d.path: (key, REQUEST_SCHEMAS[key], d.summary) for key, d in ACTION_REGISTRY.items()}


def build_request(action_key: str, body: A.ActionEnvelope, user,
                  origin: HttpRequest | None = None) -> ActionRequest:
    data = body.model_dump(exclude_unset=True, mode="json")
    payload = dict(data.get("payload") or {})
    for name, value in data.items():
        if name not in A.REQUEST_FIELDS:
            payload[name] = value
    # The e-signature's password goes to the executor beside the payload, never in it (the
    # payload is hashed and recorded).
    handler = ACTION_REGISTRY[action_key].handler if action_key in ACTION_REGISTRY else None
    password = payload.pop("password", None) if handler and handler.secret_fields else None
    return ActionRequest(
        signature_password=password, origin=origin,
        action_key=action_key,
        actor=Actor.of(user),
        idempotency_key=body.idempotency_key,
        subject_euid=body.subject_euid,
        worker_euid=body.worker_euid,
        lease_euid=body.lease_euid,
        hold_euid=body.hold_euid,
        queue_key=body.queue_key,
        expected_state=body.expected_state,
        expected_revision=body.expected_revision,
        payload=payload,
    )


def run_action(action_key: str, body: A.ActionEnvelope, user,
               origin: HttpRequest | None = None) -> dict:
    return execute(build_request(action_key, body, user, origin)).as_dict()


ACTION_RESPONSES = {200: S.ActionOut, **ERRORS, 409: S.ErrorOut}


def _register(path: str, action_key: str, schema: type[A.ActionEnvelope], summary: str):
    def endpoint(request, body: schema):  # type: ignore[valid-type]
        # Returned as-is: the result carries action-specific fields beyond ActionOut's.
        return api.create_response(request, run_action(action_key, body, request.auth,
                                                        request),
                                   status=200)

    endpoint.__name__ = action_key
    actions.post(f"/{path}", response=ACTION_RESPONSES, summary=summary,
                 operation_id=action_key, auth=BearerToken(action_key))(endpoint)


for _path, (_key, _schema, _summary) in ACTIONS.items():
    _register(_path, _key, _schema, _summary)

# Both intake actions allow the same roles (tapdb/packs/actions.json); each item is checked.
intake.add_batch_route(actions, ACTION_RESPONSES, BearerToken(
    "route_subject", "Your role may not bring work in (route or register subjects)."),
    build_request)

results.add_results_route(router, {404: S.ErrorOut, **READ_ERRORS})
outside.add_outside_route(router, READ_ERRORS)
router.add_router("/actions", actions)
api.add_router("/execution", router)


def urls():
    """The API's URL patterns, exempt from LoginRequiredMiddleware (bearer auth instead)."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback.login_required = False
    return patterns, app_name, namespace
