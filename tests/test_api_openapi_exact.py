"""The OpenAPI document says exactly what the server enforces: every field an action needs
is required (and the server refuses a body without it), enums are the engine's vocabularies,
bounds are the engine's, and on edge cases the document and the server agree."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from jsonschema import Draft202012Validator

from bloomops.api.action_schemas import REQUEST_FIELDS, ActionEnvelope
from bloomops.api.api import ACTIONS
from bloomops.api.queue_schemas import QueueSettingsIn, RetryPolicyIn
from bloomops.api.request_schemas import REQUEST_SCHEMAS
from bloomops.execution.actions import ACTIONS as REGISTRY
from bloomops.execution.states import ALL_STATES, LeaseStatus, RetryClass, WorkerType
from tests.api_helpers import api_for
from tests.engine import counts, make_queue, make_subject

pytestmark = pytest.mark.django_db
BASE = "/api/v1/execution"
SPECIMEN = "content/material/specimen/1.0"

# What each action's handler refuses without (bloomops/execution/actions/, validate).
REQUIRED = {
    "register-worker": set(),
    "heartbeat-worker": {"worker_euid"},
    "claim": {"worker_euid"},
    "renew-lease": {"lease_euid", "worker_euid"},
    "release-lease": {"lease_euid", "worker_euid", "expected_state"},
    "complete": {"lease_euid", "worker_euid", "expected_state"},
    "fail": {"lease_euid", "worker_euid", "expected_state"},
    "hold": {"subject_euid", "expected_state", "reason"},
    "release-hold": {"subject_euid", "expected_state", "reason"},
    "requeue": {"subject_euid", "expected_state", "reason"},
    "cancel": {"subject_euid", "expected_state", "reason"},
    "expire-lease": set(),
    "external-result": {"subject_euid", "expected_state", "outcome"},
    "worker-status": {"worker_euid", "operation"},
    "route-subject": {"subject_euid", "queue_key"},
    "register-subject": {"queue_key", "template_code", "name"},
    "record-evidence-bundle": {"subject_euid", "bundle_sha256"},
    "create-queue": {"queue_key", "subject_template_codes", "reason"},
    "update-queue": {"queue_key", "expected_revision", "reason"},
    "set-queue-enabled": {"queue_key", "expected_revision", "enabled", "reason"},
    "replace-queue": {"queue_key", "expected_revision", "subject_template_codes", "reason"},
    "request-approval": {"subject_euid", "action_key", "reason"},
    "decide-approval": {"approval_euid", "decision", "reason", "password"},
    "cancel-approval": {"approval_euid", "reason"},
}
# Required only in some cases, by a rule between fields: a worker other than a person's
# names its key; draining, disabling or retiring a worker says why (as does forcing one
# lease to expire: EDGES).
REQUIRED_IF = {"register-worker": {"worker_key"}, "worker-status": {"reason"}}
# The smallest body each action accepts as well formed: its required fields, plus what a
# rule between fields asks for (fail: retryable or error_class; a service worker's key).
MINIMAL = {
    "register-worker": {"worker_key": "exact-w"},
    "heartbeat-worker": {"worker_euid": "Z-AX-0"},
    "claim": {"worker_euid": "Z-AX-0"},
    "renew-lease": {"lease_euid": "Z-EX-0", "worker_euid": "Z-AX-0"},
    "release-lease": {"lease_euid": "Z-EX-0", "worker_euid": "Z-AX-0",
                      "expected_state": "READY"},
    "complete": {"lease_euid": "Z-EX-0", "worker_euid": "Z-AX-0", "expected_state": "READY"},
    "fail": {"lease_euid": "Z-EX-0", "worker_euid": "Z-AX-0", "expected_state": "READY",
             "error_class": "TRANSIENT_SYSTEM"},
    "hold": {"subject_euid": "Z-MX-0", "expected_state": "READY", "reason": "r"},
    "release-hold": {"subject_euid": "Z-MX-0", "expected_state": "HELD", "reason": "r"},
    "requeue": {"subject_euid": "Z-MX-0", "expected_state": "READY", "reason": "r"},
    "cancel": {"subject_euid": "Z-MX-0", "expected_state": "READY", "reason": "r"},
    "expire-lease": {},
    "external-result": {"subject_euid": "Z-MX-0", "expected_state": "WAITING_EXTERNAL",
                        "outcome": "COMPLETED"},
    "worker-status": {"worker_euid": "Z-AX-0", "operation": "drain", "reason": "r"},
    "route-subject": {"subject_euid": "Z-MX-0", "queue_key": "q0"},
    "register-subject": {"queue_key": "q0", "template_code": "content/material/specimen/1.0",
                         "name": "S-1"},
    "record-evidence-bundle": {"subject_euid": "Z-MX-0", "bundle_sha256": "0" * 64},
    "create-queue": {"queue_key": "exact-q", "subject_template_codes": [
        "content/material/specimen/1.0"], "reason": "r"},
    "update-queue": {"queue_key": "exact-none", "expected_revision": 1, "reason": "r"},
    "set-queue-enabled": {"queue_key": "exact-none", "expected_revision": 1, "enabled": False,
                          "reason": "r"},
    "replace-queue": {"queue_key": "exact-none", "expected_revision": 1, "reason": "r",
                      "subject_template_codes": ["content/material/specimen/1.0"]},
    "request-approval": {"subject_euid": "Z-MX-0", "action_key": "release_execution_hold",
                         "reason": "r"},
    "decide-approval": {"approval_euid": "Z-EX-0", "decision": "REJECTED", "reason": "r",
                        "password": "p"},
    "cancel-approval": {"approval_euid": "Z-EX-0", "reason": "r"},
}


@pytest.fixture(scope="module")
def doc() -> dict:
    return Client().get("/api/v1/openapi.json").json()


def body_schema(doc: dict, path: str) -> dict:
    op = doc["paths"][f"{BASE}/actions/{path}"]["post"]
    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]]


def validator(doc: dict, path: str) -> Draft202012Validator:
    op = doc["paths"][f"{BASE}/actions/{path}"]["post"]
    schema = {**op["requestBody"]["content"]["application/json"]["schema"],
              "components": doc["components"]}
    return Draft202012Validator(schema)


def query_param(doc: dict, path: str, name: str) -> dict:
    params = doc["paths"][f"{BASE}{path}"]["get"]["parameters"]
    return next(p for p in params if p["name"] == name)["schema"]


def enum_of(schema: dict) -> list:
    for option in schema.get("anyOf", [schema]):
        if "enum" in option:
            return option["enum"]
    raise AssertionError(f"no enum in {schema}")


def test_every_action_is_described():
    assert set(REQUIRED) == set(ACTIONS) == set(MINIMAL)
    assert set(REQUEST_SCHEMAS) == set(REGISTRY)
    assert {d.path for d in REGISTRY.values()} == set(ACTIONS)


def test_an_actions_own_fields_are_its_handlers_payload_fields():
    # The document's payload properties and the engine's refusal of other keys agree.
    for key, action in REGISTRY.items():
        own = set(REQUEST_SCHEMAS[key].model_fields) - set(REQUEST_FIELDS)
        # An e-signature's password is the executor's, beside the payload (never stored).
        assert own == set(action.handler.fields) | set(action.handler.secret_fields), key


@pytest.mark.parametrize("path", list(REQUIRED))
def test_required_fields_are_exactly_what_the_action_needs(doc, path):
    assert set(body_schema(doc, path)["required"]) == {"idempotency_key"} | REQUIRED[path]


@pytest.mark.parametrize("path", list(REQUIRED))
def test_the_server_refuses_a_body_without_any_required_field(tenant, users, doc, path):
    api = api_for(users["admin"])
    check = validator(doc, path)
    minimal = {"idempotency_key": f"exact-{path}", **MINIMAL[path]}
    assert check.is_valid(minimal)
    r = api.post(f"/actions/{path}", minimal)
    # Well formed: answered on the data (an unknown EUID is 404), never refused for shape.
    assert r.status_code != 400, r.content
    before = counts()
    for name in sorted({"idempotency_key"} | REQUIRED[path] | REQUIRED_IF.get(path, set())):
        body = {k: v for k, v in minimal.items() if k != name}
        assert not check.is_valid(body), name
        r = api.post(f"/actions/{path}", body)
        assert r.status_code == 400, (name, r.content)
        err = r.json()["error"]
        assert err["code"] == "VALIDATION_ERROR" and err["details"]["field"] == name
    assert counts() == before


def test_enums_are_the_engines_vocabularies(doc):
    assert enum_of(query_param(doc, "/leases", "status")) == [s.value for s in LeaseStatus]
    assert enum_of(query_param(doc, "/dead-letter", "resolution")) == [
        "OPEN", "REQUEUED", "CANCELED", "IGNORED", "ALL"]
    fail = body_schema(doc, "fail")["properties"]
    assert fail["expected_state"]["enum"] == list(ALL_STATES)
    assert enum_of(fail["error_class"]) == [c.value for c in RetryClass]
    worker = body_schema(doc, "register-worker")["properties"]
    assert enum_of(worker["worker_type"]) == [t.value for t in WorkerType]
    assert enum_of(body_schema(doc, "heartbeat-worker")["properties"]["status"]) == [
        "ONLINE", "OFFLINE", "DRAINING"]
    assert body_schema(doc, "worker-status")["properties"]["operation"]["enum"] == [
        "disable", "drain", "enable", "retire"]
    assert body_schema(doc, "external-result")["properties"]["outcome"]["enum"] == [
        "READY", "COMPLETED", "FAILED_RETRYABLE", "FAILED_TERMINAL"]
    priority = body_schema(doc, "requeue")["properties"]["priority"]["anyOf"]
    assert {"enum": ["STAT", "URGENT", "ROUTINE"], "type": "string"} in priority
    assert {"type": "integer", "minimum": -999, "maximum": 999} in priority


def test_bounds_are_the_engines(doc):
    def bounds(schema: dict) -> tuple:
        option = next(o for o in schema.get("anyOf", [schema]) if o.get("type") != "null")
        return (option.get("minLength", option.get("minimum")),
                option.get("maxLength", option.get("maximum")))

    from bloomops.execution.actions import fields as engine

    # the engine's bounds, and the numbers docs/API.md ("Limits") gives for them
    assert (engine.KEY_MAX, engine.REASON_MAX, engine.NOTE_MAX, engine.WORKER_TEXT_MAX,
            engine.ERROR_MESSAGE_MAX) == (200, 2000, 1000, 300, 4000)
    hold = body_schema(doc, "hold")["properties"]
    assert bounds(hold["idempotency_key"]) == (1, engine.KEY_MAX)
    assert bounds(hold["reason"]) == (1, engine.REASON_MAX)
    # blank is what either reader counts as white space (Python's and ECMAScript's)
    blank = hold["reason"]["pattern"]
    assert re.search(blank, " \t\x1c\x1f\x85\u3000\ufeff") is None and re.search(blank, " a ")
    assert bounds(hold["hold_code"]) == (None, 100)
    assert bounds(hold["subject_euid"]) == (1, engine.KEY_MAX)
    assert bounds(hold["expected_revision"]) == (0, 2**31)
    worker = body_schema(doc, "register-worker")["properties"]
    assert bounds(worker["worker_key"]) == (None, engine.WORKER_TEXT_MAX)
    assert bounds(worker["max_concurrent_leases"]) == (1, 1000)
    assert bounds(worker["heartbeat_ttl_seconds"]) == (5, 86400)
    fail = body_schema(doc, "fail")["properties"]
    assert bounds(fail["error_message"]) == (None, engine.ERROR_MESSAGE_MAX)
    assert bounds(fail["error_code"]) == (None, engine.KEY_MAX)
    assert bounds(fail["next_queue_key"]) == (None, engine.KEY_MAX)
    assert bounds(body_schema(doc, "release-lease")["properties"]["reason"]) == (
        None, engine.NOTE_MAX)
    intake = body_schema(doc, "register-subject")["properties"]
    assert bounds(intake["name"]) == (1, engine.NAME_MAX)
    assert bounds(query_param(doc, "/queues/{queue_key}/items", "limit")) == (1, 500)
    assert bounds(query_param(doc, "/queues/{queue_key}/items", "offset")) == (0, 2**63 - 1)
    assert bounds(query_param(doc, "/leases", "limit")) == (1, 1000)


def test_payload_documents_the_actions_own_fields(doc):
    for path in ACTIONS:
        schema = body_schema(doc, path)
        payload = schema["properties"]["payload"]
        own = set(schema["properties"]) - set(REQUEST_FIELDS)
        assert set(payload["properties"]) == own and payload["additionalProperties"] is False


def test_every_operation_documents_its_refusals(doc):
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            codes = set(op["responses"])
            assert {"400", "401", "403"} <= codes, (method, path)
            if method == "post":
                assert {"404", "409", "413"} <= codes, path


# Bodies on the edge of each rule: the document and the server must give the same answer.
DROP = object()  # a field of the minimal body left out
EDGES = [
    ("hold", {"reason": "   "}),
    ("hold", {"reason": "\x1c"}),                      # str.strip() and \S agree: blank
    ("hold", {"reason": "ok", "expected_revision": 3.0}),
    ("hold", {"reason": "ok", "expected_revision": True}),
    ("hold", {"reason": "ok", "expected_revision": 2**31}),
    ("hold", {"reason": "ok", "expected_state": "SLEEPING"}),
    ("hold", {"reason": "ok", "hold_code": "x" * 101}),
    ("hold", {"reason": "ok", "surprise": 1}),
    ("hold", {"reason": "ok", "payload": {"reason": "again"}}),
    ("hold", {"reason": "ok", "payload": {"reason": 5}}),
    ("hold", {"reason": "ok", "payload": {"hold_code": "x" * 101}}),
    ("fail", {"retryable": True, "error_class": "PERMANENT_INPUT"}),
    ("fail", {"retryable": False, "error_class": "TRANSIENT_SYSTEM"}),
    ("fail", {"retryable": True, "error_class": "TRANSIENT_SYSTEM"}),
    ("fail", {"retryable": False}),
    ("fail", {"retryable": None, "error_class": None}),
    ("fail", {"error_class": "PERMANENT_INPUT", "error_message": "tube cracked"}),
    ("fail", {"error_class": "PERMANENT_INPUT", "error_message": "  "}),
    ("fail", {"retryable": False, "error_message": "tube cracked"}),
    ("fail", {"error_class": "BUSINESS_RULE_HOLD"}),
    ("fail", {"error_class": "TRANSIENT_CAPACITY"}),
    ("complete", {"external": {"run": 1}, "next_queue_key": "q2"}),
    ("complete", {"external": {"run": 1}, "next_queue_key": "  "}),
    ("complete", {"external": None, "next_queue_key": "q2"}),
    ("external-result", {"outcome": "FAILED_TERMINAL"}),  # ends the item: says why
    ("external-result", {"outcome": "FAILED_TERMINAL", "error_message": "lost in transit"}),
    ("external-result", {"outcome": "FAILED_RETRYABLE"}),
    ("external-result", {"outcome": "READY"}),
    ("external-result", {"outcome": "READY", "next_queue_key": ""}),
    ("external-result", {"outcome": "READY", "next_queue_key": "q2"}),
    ("release-hold", {"reason": " "}),
    ("expire-lease", {"lease_euid": "Z-EX-0"}),            # forcing one lease says why
    ("expire-lease", {"lease_euid": "Z-EX-0", "reason": "  "}),
    ("expire-lease", {"lease_euid": "Z-EX-0", "reason": "stuck"}),
    ("expire-lease", {"lease_euid": None}),                # the sweep records its own
    ("expire-lease", {"reason": None}),
    ("worker-status", {"operation": "disable", "reason": "\t"}),
    ("worker-status", {"operation": "retire", "reason": DROP}),
    ("worker-status", {"operation": "enable", "reason": DROP}),  # back as it was
    ("worker-status", {"operation": "enable", "reason": None}),
    ("requeue", {"priority": "STAT"}),
    ("requeue", {"priority": "stat"}),
    ("requeue", {"priority": 2**63}),
    ("requeue", {"priority": 1000}),
    ("requeue", {"priority": -5}),
    ("register-worker", {"worker_type": None}),         # absent is SERVICE; null is not
    ("register-worker", {"worker_key": "human://someone"}),
    ("register-worker", {"worker_key": "human://"}),
    ("register-worker", {"worker_key": "HUMAN://someone"}),
    ("register-worker", {"worker_key": "svc one"}),
    ("register-worker", {"worker_key": "svc-\u00fc"}),
    ("register-worker", {"worker_key": "  svc-1  "}),
    ("register-worker", {"worker_key": "\x1csvc-d"}),
    ("register-worker", {"worker_key": "svc\x85"}),
    ("register-worker", {"worker_key": "\ufeffsvc"}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": "\x1c"}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": "\x85"}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": "\ufeff"}),
    ("register-worker", {"worker_type": "HUMAN_SESSION",
                         "worker_key": "\x1chuman://someone"}),
    ("register-worker", {"worker_key": "   "}),
    ("register-worker", {"worker_type": "HUMAN_SESSION"}),  # exact-w is no person's key
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": DROP}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": "human://adm"}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": "  "}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": DROP,
                         "capabilities": ["x"]}),
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": DROP,
                         "max_concurrent_leases": None}),
    ("register-worker", {"display_name": None}),
    ("register-worker", {"capabilities": [""]}),
    ("register-worker", {"capabilities": ["cap.a"], "max_concurrent_leases": 0}),
    ("route-subject", {"priority": "URGENT"}),
    ("route-subject", {"priority": 1.5}),
    ("route-subject", {"template_code": 7}),
    ("register-subject", {"name": "  "}),
    ("register-subject", {"properties": []}),
    ("register-subject", {"properties": None}),
    # what the document left open and the server refused (a review's schemathesis run)
    ("hold", {"reason": "ok", "idempotency_key": "a\x07b"}),
    ("hold", {"reason": "ok", "idempotency_key": "a\u2028b"}),
    ("hold", {"reason": "ok", "idempotency_key": " key-1\n"}),   # the engine strips it
    ("set-queue-enabled", {"queue_key": "q" * 101}),
    ("update-queue", {"manual_only": None}),
    ("update-queue", {"retry_policy": {"mode": None}}),
    *(("update-queue", {name: None}) for name in QueueSettingsIn.model_fields
      if name not in ActionEnvelope.model_fields and name != "reason"),
    *(("update-queue", {"retry_policy": {name: None}}) for name in RetryPolicyIn.model_fields),
    ("update-queue", {"queue_key": "q" * 101}),
    ("replace-queue", {"queue_key": "q" * 101}),
    ("release-hold", {"reason": "ok", "hold_euid": ""}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o",
                               "execution": {"colour": "red"}}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o",
                               "execution": {"state": "RUNNING", "next_queue_key": "q2"}}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o",
                               "execution": {"state": "READY"}}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o",
                               "execution": {"next_queue_key": "q2", "priority": "STAT",
                                             "due_at": "2026-01-01T00:00:00Z"}}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o",
                               "execution": {"next_queue_key": "q2", "due_at": "soon"}}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "o\x1b[2J"}]}),
    ("complete", {"outputs": [{"template_code": SPECIMEN, "name": "  "}]}),
    ("register-subject", {"name": "S\x1b[2J"}),
    ("register-subject", {"name": "S\u00a0 1"}),
    ("register-subject", {"name": "\tS 1 "}),
    ("fail", {"error_class": "TRANSIENT_SYSTEM", "next_queue_key": "q\x07"}),
    ("complete", {"next_queue_key": "q\u200b2"}),
    ("requeue", {"next_action_key": "step\nrun"}),
    # a second attack's schemathesis run: blank to the server, text to the document
    ("hold", {"reason": "ok", "idempotency_key": "\x1c"}),
    ("hold", {"reason": "ok", "idempotency_key": "\x85"}),
    ("hold", {"reason": "ok", "idempotency_key": "\ufeff"}),
    ("hold", {"reason": "ok", "idempotency_key": "\x1fk\x1c"}),
    ("hold", {"reason": "\x1c\x1d"}),
    # a person's worker's profile is the lab's, at either place the fields may be sent
    ("register-worker", {"worker_type": "HUMAN_SESSION", "worker_key": DROP,
                         "payload": {"platform_scope": []}}),
    ("register-worker", {"worker_key": DROP, "payload": {"worker_type": "HUMAN_SESSION"}}),
    ("register-worker", {"worker_key": DROP, "payload": {"worker_type": "HUMAN_SESSION",
                                                         "capabilities": ["x"]}}),
    ("register-worker", {"worker_key": DROP, "payload": {"worker_key": "svc-in-payload"}}),
    ("register-worker", {"worker_key": DROP, "payload": {"worker_key": "human://someone"}}),
    # a caller's own data is kept and shown: readable keys and texts at any depth
    ("complete", {"result_snapshot": {"a": "\x1b[31mred\x07"}}),
    ("complete", {"result_snapshot": {"\u202eevil": 1}}),
    ("complete", {"result_snapshot": {"a\nb": 1}}),
    ("complete", {"result_snapshot": {"": 1}}),
    ("complete", {"result_snapshot": {" ": 1}}),
    ("complete", {"result_snapshot": {"run": {"log": ["ok", "cut\x1b[2J"]}}}),
    ("complete", {"result_snapshot": {"notes": "line one\nline two\twith a tab",
                                      "n": 1.5, "ok": True, "none": None, "list": [1, "a"]}}),
    ("complete", {"external": {"run_id": "wf-\u202e1-lave"}, "next_queue_key": DROP}),
    ("complete", {"external": {"run_id": "wf-1"}, "next_queue_key": DROP}),
    ("register-subject", {"properties": {"notes": "bad\x07"}}),
    ("request-approval", {"parameters": {"reason": "a\u2066b"}}),
    ("complete", {"result_snapshot": {"n": 2**70, "x": 12345678901234567}}),
    ("complete", {"result_snapshot": {"n": 10**40}}),      # past what a record keeps
    ("complete", {"result_snapshot": {"n": -1e40}}),
    ("register-subject", {"properties": {"site": {"nested": "object"}}}),  # one level
    ("register-subject", {"due_at": "\x1c2026-01-01T00:00:00Z "}),  # stripped: white space
    ("register-subject", {"due_at": "\ufeff2026-01-01T00:00:00Z"}),  # not white space
]


@pytest.mark.parametrize("path,extra", EDGES)
def test_document_and_server_agree_on_edge_cases(tenant, users, doc, path, extra):
    base = {k: v for k, v in MINIMAL[path].items() if k not in ("error_class", "retryable")}
    body = {k: v for k, v in {"idempotency_key": "edge", **base, **extra}.items()
            if v is not DROP}
    documented_valid = validator(doc, path).is_valid(body)
    before = counts()
    r = api_for(users["admin"]).post(f"/actions/{path}", body)
    assert (r.status_code != 400) == documented_valid, (body, r.content)
    if not documented_valid:
        assert counts() == before


def test_fields_nested_in_payload_are_validated_like_top_level_ones(tenant, users):
    make_queue("q1", required_worker_capabilities=[])
    api = api_for(users["worker_service"])
    r = api.act("register-worker", payload={"worker_key": "nested", "capabilities": ["c"]})
    assert r.status_code == 200 and r.json()["worker_key"] == "nested"
    subject = make_subject("q1")
    before = counts()
    r = api.act("register-worker", payload={"worker_key": "nested",
                                            "max_concurrent_leases": "2"})
    assert r.status_code == 400
    assert r.json()["error"]["details"]["field"] == "max_concurrent_leases"
    # Given at both places, one copy was dropped unsaid (and a replay differing only in it
    # answered replayed): a field goes at one place.
    op = api_for(users["operator"])
    for nested in (5, "nested", "top"):
        r = op.act("hold", subject_euid=subject, expected_state="READY", reason="top",
                   payload={"reason": nested})
        assert r.status_code == 400, nested
        assert r.json()["error"]["details"]["field"] == "payload.reason"
    assert "given at the top level too" in r.json()["error"]["message"]
    assert counts() == before
    r = op.act("hold", subject_euid=subject, expected_state="READY",
               payload={"reason": "nested"})
    assert r.status_code == 200
    assert api.get(f"/subjects/{subject}/history").json()["holds"][0]["reason"] == "nested"


def test_no_bound_is_lost_in_the_document(doc):
    # pydantic writes a constraint it cannot place as "ge"/"le", which JSON Schema ignores:
    # the document would then accept what the server refuses.
    def walk(node, where="#"):
        if isinstance(node, dict):
            assert not {"ge", "le", "gt", "lt"} & set(node), where
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(doc)


def test_every_error_code_is_listed_in_the_description_and_docs(doc):
    from pathlib import Path

    from bloomops.api.guard import HTTP_ONLY_CODES
    from bloomops.execution.errors import HTTP_STATUS

    api_md = (Path(__file__).resolve().parent.parent / "docs" / "API.md").read_text()
    for code in [*HTTP_STATUS, *HTTP_ONLY_CODES]:
        assert code in doc["info"]["description"], code
        assert code in api_md, code


def test_the_document_leaves_out_the_envelope_fields_an_action_refuses(doc):
    """register-subject refused an expected_state the document still offered it."""
    from bloomops.execution.actions import HANDLERS

    schemas = doc["components"]["schemas"]
    offered = set(schemas["RegisterSubjectIn"]["properties"])
    assert "expected_state" not in offered and "worker_euid" not in offered
    assert "queue_key" in offered
    for key, schema in REQUEST_SCHEMAS.items():
        props = set(schemas[schema.__name__]["properties"])
        assert not props & set(HANDLERS[key].not_applicable), key


@pytest.mark.parametrize("path", ["/outside-work", "/dead-letter", "/leases", "/workers",
                                  "/approvals"])
def test_a_list_that_counts_its_matches_documents_the_header(doc, path):
    """/outside-work and /dead-letter said how many match in X-Total-Count, which the
    document (the API's contract) did not name."""
    ok = doc["paths"][f"/api/v1/execution{path}"]["get"]["responses"]["200"]
    assert ok["headers"]["X-Total-Count"]["schema"] == {"type": "integer"}
    assert "content" in ok  # the list itself is still described


def test_the_documents_patterns_read_alike_in_python_and_in_javascript(doc):
    """A JSON Schema validator reads a pattern as ECMAScript does: "\\S" held "\\x1c" to be
    text there and blank in Python (what the server strips), so the document took an
    idempotency key the server refused. Each pattern the document gives for blank and for
    an instant is read by node, ECMAScript's own engine, as Python reads it."""
    import json
    import shutil
    import subprocess

    hold = body_schema(doc, "hold")["properties"]
    patterns = [hold["reason"]["pattern"],
                body_schema(doc, "register-subject")["properties"]["due_at"]["anyOf"][0][
                    "pattern"],
                hold["idempotency_key"]["allOf"][1]["not"]["pattern"]]  # no blank at the ends
    samples = ["\x1c", "\x85", "\ufeff", "\u3000", " a ", "\t", "\x1fk\x1c", "k\n", "k\x1c",
               "\u2028k", "k k",
               "2026-01-01T00:00:00Z", "\x1c2026-01-01T00:00:00Z ", "\ufeff2026-01-01T00:00:00Z",
               " 2026-01-01T00:00:00Z\u2028"]
    node = shutil.which("node")
    assert node, "node (installed with npm by make test for axe-core) reads the patterns"
    script = ("const [ps, ss] = JSON.parse(process.argv[1]); console.log(JSON.stringify("
              "ps.map(p => ss.map(s => new RegExp(p, 'u').test(s)))));")
    ecma = json.loads(subprocess.run([node, "-e", script, json.dumps([patterns, samples])],
                                     capture_output=True, text=True, check=True).stdout)
    python = [[re.search(p, s) is not None for s in samples] for p in patterns]
    assert ecma == python
