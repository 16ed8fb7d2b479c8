"""Malformed requests under /api/: each is a 4xx with the API's JSON error body and writes
nothing (they were 500s, HTML or plain text before)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from bloomops.api.guard import MAX_BODY_BYTES
from tests.api_helpers import Api, api_for
from tests.engine import counts, make_queue, make_subject

pytestmark = pytest.mark.django_db
ACTIONS = "/api/v1/execution/actions"


@pytest.fixture
def lab(tenant, users):
    # a result it may record (a pass/fail), which GET /queues/q1/results can be asked about
    make_queue("q1", required_worker_capabilities=[],
               result_fields=[{"key": "qc", "label": "QC", "kind": "pass_fail"}])
    subject = make_subject("q1")
    apis = {role: api_for(user) for role, user in users.items()}
    worker = apis["worker_service"].act("register-worker", worker_key="w").json()["worker_euid"]
    return {"subject": subject, "worker": worker, "apis": apis}


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    return body["error"]


def raw(api: Api, path: str, body: str | bytes):
    return api.client.post(f"{ACTIONS}/{path}", body, content_type="application/json",
                           **api._headers())


# ------------------------------------------------------------------ NUL characters


def test_nul_in_a_query_parameter_is_400(lab):
    before = counts()
    r = lab["apis"]["operator"].get("/leases", worker_euid="\x00")
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "worker_euid"
    assert counts() == before


def test_nul_in_a_path_segment_is_400(lab):
    api = lab["apis"]["operator"]
    for path in ("/subjects/Z-MX-%00", "/workers/a%00b", "/queues/q%001/items"):
        r = api.client.get(f"/api/v1/execution{path}", **api._headers())
        assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == "path", path


def test_a_path_that_is_not_utf8_is_400(lab):
    """An overlong encoding or an encoded lone surrogate was looked up as an EUID (404)."""
    api = lab["apis"]["operator"]
    for path in ("/subjects/%C0%AF", "/subjects/%ED%A0%80", "/workers/%FF"):
        r = api.client.get(f"/api/v1/execution{path}", **api._headers())
        err = refused(r, 400, "VALIDATION_ERROR")
        assert err["details"]["field"] == "path" and "UTF-8" in err["message"], path
    assert api.client.get("/api/v1/execution/subjects/Z-MX-%C5%BD",
                          **api._headers()).status_code == 404  # UTF-8: looked up


@pytest.mark.parametrize("body", [
    {"worker_euid": "Z-AX-\x00"},
    {"worker_euid": "w", "queue_key": "q1\x00"},
    {"worker_euid": "w", "payload": {"note\x00": 1}},
    {"worker_euid": "w", "payload": {"notes": ["ok", {"deep": "x\x00"}]}},
], ids=["envelope", "queue_key", "payload key", "nested value"])
def test_nul_in_a_body_string_is_400_and_writes_nothing(lab, body):
    api = lab["apis"]["worker_service"]
    before = counts()
    r = api.post("/actions/claim", {"idempotency_key": "nul", **body})
    assert "NUL" in refused(r, 400, "VALIDATION_ERROR")["message"]
    assert counts() == before


# ------------------------------------------------------------------ lone surrogates


def test_a_lone_surrogate_escape_is_400_and_writes_nothing(lab):
    api = lab["apis"]["worker_service"]
    before = counts()
    r = raw(api, "claim", '{"idempotency_key": "s", "worker_euid": "Z-AX-\\ud800"}')
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "worker_euid" and "surrogate" in err["message"]
    # The same as raw bytes (an encoded surrogate is not UTF-8 either).
    r = raw(api, "claim", b'{"idempotency_key": "s", "worker_euid": "\xed\xa0\x80"}')
    refused(r, 400, "VALIDATION_ERROR")
    r = raw(api, "claim", b'{"idempotency_key": "s", "worker_euid": "\xff"}')
    refused(r, 400, "VALIDATION_ERROR")
    assert counts() == before


# ------------------------------------------------------------------ integers out of range


@pytest.mark.parametrize("path,params,field", [
    ("/queues/q1/items", {"offset": "9223372036854775808"}, "offset"),
    ("/queues/q1/items", {"limit": "501"}, "limit"),
    ("/queues/q1/items", {"offset": "-1"}, "offset"),
    ("/leases", {"limit": "99999999999999999999999"}, "limit"),
    ("/leases", {"limit": "1.5"}, "limit"),
])
def test_out_of_range_query_integers_are_400(lab, path, params, field):
    r = lab["apis"]["operator"].get(path, **params)
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == field


@pytest.mark.parametrize("value", ["", " ", "\t \u3000"])
def test_a_blank_filter_is_refused_whatever_its_spaces(lab, value):
    """site= was refused as blank, but site=%20 was answered with nothing found."""
    r = lab["apis"]["operator"].get("/queues/q1/items", site=value)
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "site" and "must not be blank" in err["message"]


@pytest.mark.parametrize(("path", "field"), [
    ("/queues/%20", "queue_key"), ("/queues/%20/items", "queue_key"),
    ("/queues/%09/history", "queue_key"), ("/subjects/%20", "euid"),
    ("/subjects/%20/history", "euid"), ("/subjects/%20/evidence", "euid"),
    ("/workers/%20", "worker_euid"),
])
def test_a_blank_id_in_the_path_is_refused_as_in_a_query(lab, path, field):
    """/queues/%20 was looked up (404: no such queue) where ?queue_key=%20 is 400."""
    r = lab["apis"]["operator"].get(path)
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == field and "must not be blank" in err["message"]


@pytest.mark.parametrize("path", ["/actions/hold", "/actions/release-hold",
                                  "/actions/intake-batch"])
def test_an_action_sent_without_a_body_is_told_so(lab, path):
    """No body was refused as "Field required", naming no field."""
    before = counts()
    r = lab["apis"]["operator"].post(path, b"")
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "body" and err["message"].startswith(
        "The request has no body")
    assert counts() == before


def test_the_largest_bigint_offset_is_answered(lab):
    r = lab["apis"]["operator"].get("/queues/q1/items", offset="9223372036854775807")
    assert r.status_code == 200 and r.json()["items"] == []


@pytest.mark.parametrize("path,fields,field", [
    ("hold", {"expected_revision": 2**70}, "expected_revision"),
    ("hold", {"expected_revision": 2**31 + 1}, "expected_revision"),
    ("hold", {"expected_revision": -1}, "expected_revision"),
    ("requeue", {"priority": 2**63}, "priority"),
    ("register-worker", {"max_concurrent_leases": 10**30}, "max_concurrent_leases"),
    ("register-worker", {"heartbeat_ttl_seconds": 4}, "heartbeat_ttl_seconds"),
])
def test_out_of_range_body_integers_are_400_and_write_nothing(lab, path, fields, field):
    api = lab["apis"]["admin"]
    before = counts()
    base = {"subject_euid": lab["subject"], "expected_state": "READY", "reason": "range"}
    if path == "register-worker":
        base = {"worker_key": "range-w"}
    r = api.act(path, **base, **fields)
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"].startswith(field)
    assert counts() == before


# ------------------------------------------------------------------ non-finite numbers


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_numbers_are_400_and_write_nothing(lab, number):
    api = lab["apis"]["operator"]
    before = counts()
    # Python's json writes these tokens but never reads them back as a refusal: put the
    # literal token in the text.
    body = json.dumps({"idempotency_key": "nf", "subject_euid": lab["subject"],
                       "expected_state": "READY", "reason": "x",
                       "payload": {"score": "NUMBER"}}).replace('"NUMBER"', number)
    r = raw(api, "hold", body)
    assert "finite" in refused(r, 400, "VALIDATION_ERROR")["message"]
    r = raw(api, "hold", body.replace('"expected_state"', f'"expected_revision": {number},'
                                      ' "expected_state"'))
    refused(r, 400, "VALIDATION_ERROR")
    assert counts() == before


# ------------------------------------------------------------------ oversize bodies


def test_a_body_over_the_limit_is_413_unread(lab):
    api = lab["apis"]["worker_service"]
    before = counts()
    big = json.dumps({"idempotency_key": "big", "worker_euid": lab["worker"],
                      "payload": {"blob": "x" * MAX_BODY_BYTES}})
    r = api.post("/actions/claim", big)
    err = refused(r, 413, "PAYLOAD_TOO_LARGE")
    assert err["details"]["limit_bytes"] == MAX_BODY_BYTES == 1024 * 1024
    assert counts() == before


def test_a_body_just_under_the_limit_is_read(lab):
    api = lab["apis"]["worker_service"]
    body = json.dumps({"idempotency_key": "under", "worker_euid": lab["worker"],
                       "error_message": "x"})
    padded = body[:-1] + " " * (MAX_BODY_BYTES - len(body)) + "}"
    assert len(padded) == MAX_BODY_BYTES
    r = api.post("/actions/claim", padded)
    # Read and answered on its content (error_message is not a field of claim).
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == "error_message"


# ------------------------------------------------------------------ unknown paths, methods


def test_unknown_api_paths_are_json_404(lab):
    for client, headers in ((Client(), {}), (lab["apis"]["admin"].client,
                                              lab["apis"]["admin"]._headers())):
        for path in ("/api/v1/nope", "/api/v1/execution/nope", "/api/v2/execution/queues",
                     "/api/v1/execution/actions/teleport"):
            r = client.get(path, **headers)
            refused(r, 404, "NOT_FOUND")


def test_wrong_methods_are_json_405_with_allow(lab):
    api = lab["apis"]["admin"]
    before = counts()
    # HEAD wherever GET is answered (RFC 9110), but where HEAD would record an export
    cases = [("delete", "/api/v1/execution/queues", ["GET", "HEAD"]),
             ("put", "/api/v1/execution/subjects/Z-MX-0", ["GET", "HEAD"]),
             ("delete", "/api/v1/execution/subjects/Z-MX-0/evidence", ["GET"]),
             ("get", f"{ACTIONS}/claim", ["POST"]),
             ("patch", f"{ACTIONS}/cancel", ["POST"])]
    for method, path, allowed in cases:
        r = getattr(api.client, method)(path, **api._headers())
        err = refused(r, 405, "METHOD_NOT_ALLOWED")
        assert r["Allow"] == ", ".join(allowed) and err["details"]["allowed_methods"] == allowed
    assert counts() == before


def test_the_html_ui_keeps_its_own_pages(lab, users):
    client = Client()
    client.force_login(users["operator"])
    r = client.get("/no-such-page/")
    assert r.status_code == 404 and r["Content-Type"].startswith("text/html")
    assert client.get("/").status_code == 200
    assert Client().get("/api/v1/docs").status_code == 200  # the docs page stays HTML


# ------------------------------------------------------------------ strict types


@pytest.mark.parametrize("path,fields,field", [
    ("hold", {"expected_revision": False}, "expected_revision"),
    ("hold", {"expected_revision": "1"}, "expected_revision"),
    ("hold", {"expected_revision": 1.5}, "expected_revision"),
    ("hold", {"reason": 42}, "reason"),
    ("hold", {"subject_euid": 7}, "subject_euid"),
    ("requeue", {"reset_attempts": "yes"}, "reset_attempts"),
    ("requeue", {"priority": "stat"}, "priority"),
    ("requeue", {"priority": True}, "priority"),
    ("register-worker", {"worker_key": 12}, "worker_key"),
    ("register-worker", {"capabilities": "cap.a"}, "capabilities"),
    ("register-worker", {"max_concurrent_leases": "2"}, "max_concurrent_leases"),
])
def test_values_are_not_coerced(lab, path, fields, field):
    api = lab["apis"]["admin"]
    before = counts()
    base = {"subject_euid": lab["subject"], "expected_state": "READY", "reason": "types"}
    if path == "register-worker":
        base = {"worker_key": "types-w"}
    r = api.act(path, **{**base, **fields})
    err = refused(r, 400, "VALIDATION_ERROR")
    # The field as the caller named it, not pydantic's validator after it.
    assert err["details"]["field"] == field and err["message"].startswith(f"{field}: ")
    assert counts() == before


@pytest.mark.parametrize("reason", ["", "   ", "\t\n"])
def test_a_blank_reason_is_told_in_words(lab, reason):
    """A blank reason was refused as "reason: String should match pattern '\\S'"."""
    before = counts()
    r = lab["apis"]["operator"].act("hold", subject_euid=lab["subject"],
                                    expected_state="READY", reason=reason)
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "reason"
    assert err["message"] == "reason: must not be blank"
    assert counts() == before


def test_an_integral_float_is_an_integer(lab):
    # JSON Schema's "integer" includes 1.0, so the server takes it as 1.
    r = lab["apis"]["operator"].act("hold", subject_euid=lab["subject"], expected_state="READY",
                                    expected_revision=1.0, reason="float")
    assert r.status_code == 200, r.content
    assert r.json()["state"] == "HELD"


# ------------------------------------------------------------------ bodies that are not JSON


@pytest.mark.parametrize("body", ["{not json", "[1, 2]", '"text"', "", "[" * 100_000],
                         ids=["syntax", "array", "string", "empty", "deep"])
def test_bodies_that_are_not_a_json_object_are_400(lab, body):
    before = counts()
    r = raw(lab["apis"]["worker_service"], "claim", body)
    refused(r, 400, "VALIDATION_ERROR")
    assert counts() == before


def test_the_api_description_and_metrics_answer_another_method_405(lab):
    """The API's own description met Django's CSRF check on PUT, DELETE, PATCH and POST (a
    403 "Your role may not..." with no token sent) and answered TRACE and OPTIONS with the
    whole document; POST /metrics got a CSRF page."""
    client = Client()
    for path in ("/api/v1/openapi.json", "/api/v1/docs"):
        assert client.get(path).status_code == 200
        for method in ("post", "put", "patch", "delete", "options", "trace"):
            r = getattr(client, method)(path)
            err = refused(r, 405, "METHOD_NOT_ALLOWED")
            assert r["Allow"] == "GET, HEAD", (path, method)
            assert err["details"]["allowed_methods"] == ["GET", "HEAD"]
    for method in ("post", "put", "delete"):
        r = getattr(client, method)("/metrics")
        assert r.status_code == 405 and "GET" in r["Allow"], method


def test_a_forbidden_role_is_refused_before_its_body_is_read(lab):
    # An operator may not claim: FORBIDDEN, not a lesson in which fields claim needs.
    r = raw(lab["apis"]["operator"], "claim", "{not json")
    refused(r, 403, "FORBIDDEN")
    r = lab["apis"]["worker_service"].post("/actions/hold", {"bogus": 1})
    refused(r, 403, "FORBIDDEN")
    r = Api(None).post("/actions/claim", "{not json")
    refused(r, 401, "UNAUTHENTICATED")


# ------------------------------------------------------------------ JSON read strictly


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [65, 256, 600, 900])
@pytest.mark.parametrize("path,body", [
    ("heartbeat-worker", {"payload": {"x": "DEEP"}}),
    ("register-subject", {"template_code": "content/material/specimen/1.0",
                          "properties": {"site": "DEEP"}}),
    ("intake-batch", {"items": [{"action": "register_subject",
                                 "template_code": "content/material/specimen/1.0",
                                 "properties": {"site": "DEEP"}}]}),
])
def test_json_nested_past_any_request_is_400_and_writes_nothing(lab, depth, path, body):
    """From 256 levels pydantic could not serialize a free-form field: a 500 with a
    traceback. Any body deeper than 64 levels is now refused before a schema sees it."""
    api = lab["apis"]["admin"]
    before = counts()
    text = json.dumps({"idempotency_key": f"deep-{depth}", "worker_euid": lab["worker"],
                       **body}).replace('"DEEP"', _deep(depth))
    err = refused(raw(api, path, text), 400, "VALIDATION_ERROR")
    assert "nests deeper than 64 levels" in err["message"] and err["details"]["field"] == "body"
    assert counts() == before


def test_a_key_given_twice_is_400_and_writes_nothing(lab):
    """Python keeps the last of two equal keys; the sender may have meant the first."""
    api = lab["apis"]["worker_service"]
    before = counts()
    r = raw(api, "register-worker",
            '{"idempotency_key": "dup", "worker_key": "w-a", "worker_key": "w-b"}')
    assert "'worker_key' is given twice" in refused(r, 400, "VALIDATION_ERROR")["message"]
    assert counts() == before


@pytest.mark.parametrize("encoded", [
    b'\xef\xbb\xbf{"idempotency_key": "bom", "worker_key": "w-bom"}',
    '{"idempotency_key": "u16", "worker_key": "w-u16"}'.encode("utf-16"),
    b'{"idempotency_key": "latin", "worker_key": "w-\xe9"}',
], ids=["utf8-bom", "utf16", "latin1"])
def test_a_body_that_is_not_plain_utf8_is_400_and_writes_nothing(lab, encoded):
    before = counts()
    r = raw(lab["apis"]["worker_service"], "register-worker", encoded)
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == "body"
    assert counts() == before


def test_an_integer_longer_than_any_bigint_is_refused_in_plain_words(lab):
    r = raw(lab["apis"]["operator"], "hold",
            '{"idempotency_key": "long", "expected_revision": ' + "9" * 5000 + "}")
    err = refused(r, 400, "VALIDATION_ERROR")
    assert "more than 40 digits" in err["message"] and "sys." not in err["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "application/json; charset=latin-1", ""])
def test_a_body_not_sent_as_json_is_415_and_writes_nothing(lab, content_type):
    api = lab["apis"]["worker_service"]
    before = counts()
    r = api.client.post(f"{ACTIONS}/register-worker",
                        '{"idempotency_key": "ct", "worker_key": "w-ct"}',
                        content_type=content_type, **api._headers())
    err = refused(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert err["details"]["content_type"] == content_type
    assert counts() == before
    ok = api.client.post(f"{ACTIONS}/register-worker",
                         '{"idempotency_key": "ct", "worker_key": "w-ct"}',
                         content_type="application/json; charset=UTF-8", **api._headers())
    assert ok.status_code == 200, ok.content


def test_a_chunked_body_is_411_not_read_as_empty(lab):
    api = lab["apis"]["worker_service"]
    before = counts()
    r = api.client.post(f"{ACTIONS}/register-worker", "", content_type="application/json",
                        HTTP_TRANSFER_ENCODING="chunked", **api._headers())
    refused(r, 411, "LENGTH_REQUIRED")
    assert counts() == before


def test_a_query_that_is_not_utf8_is_400(lab, users):
    api = lab["apis"]["operator"]
    r = api.client.get("/api/v1/execution/queues/q1/items", QUERY_STRING="site=%FF",
                       **api._headers())
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == "query"
    assert api.client.get("/api/v1/execution/queues/q1/items", QUERY_STRING="site=%C3%A9",
                          **api._headers()).status_code == 200
    console = Client()
    console.force_login(users["operator"])
    page = console.get("/queues/q1/", QUERY_STRING="q=%FF")
    assert page.status_code == 400 and b"not UTF-8" in page.content


def test_head_is_answered_wherever_get_is(lab):
    api = lab["apis"]["operator"]
    head = api.client.head("/api/v1/execution/queues", **api._headers())
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Type"] == "application/json; charset=utf-8"
    assert int(head["Content-Length"]) > 100
    # The same length as GET's body, on an answer that does not change between the two.
    get = api.client.get("/api/v1/openapi.json")
    head = api.client.head("/api/v1/openapi.json")
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Length"] == str(len(get.content))
    post_only = api.client.head(f"{ACTIONS}/claim", **api._headers())
    assert post_only.status_code == 405 and post_only["Allow"] == "POST"


def test_a_query_parameter_given_twice_is_400(lab):
    """?site=sfo&site=rtp answered for one of them."""
    api = lab["apis"]["operator"]
    r = api.client.get("/api/v1/execution/queues/q1/items", {"site": ["sfo", "rtp"]},
                       **api._headers())
    err = refused(r, 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == "site" and "given 2 times" in err["message"]
    assert api.get("/queues/q1/items", site="sfo").status_code == 200


def test_a_query_of_raw_bytes_that_are_not_utf8_is_400(lab):
    """WSGI hands the query over as latin-1 text: a raw 0xFF passed as "ÿ"."""
    api = lab["apis"]["operator"]
    r = api.client.get("/api/v1/execution/queues/q1/items", QUERY_STRING="site=\xff",
                       **api._headers())
    assert refused(r, 400, "VALIDATION_ERROR")["details"]["field"] == "query"


def test_a_refusal_of_many_unknown_fields_lists_a_score_of_them(lab):
    """90,000 unknown top-level keys in a 1 MB body made a 9 MB refusal listing each one."""
    body = {"idempotency_key": "many", "worker_euid": "Z-AX-0",
            **{f"junk{i:05d}": 0 for i in range(500)}}
    r = lab["apis"]["worker_service"].post("/actions/heartbeat-worker", body)
    err = refused(r, 400, "VALIDATION_ERROR")
    assert len(err["details"]["errors"]) == 20 and err["details"]["error_count"] == 500
    assert len(r.content) < 10_000


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_body_with_a_content_encoding_is_415_and_writes_nothing(lab, coding):
    """The header was ignored: a plain body labelled gzip ran, a gzipped one was a 400
    saying the body was not UTF-8 text."""
    import gzip

    api = lab["apis"]["worker_service"]
    body = b'{"idempotency_key": "ce", "worker_key": "w-ce"}'
    before = counts()
    for sent in (body, gzip.compress(body)):
        r = api.client.post(f"{ACTIONS}/register-worker", sent, content_type="application/json",
                            HTTP_CONTENT_ENCODING=coding, **api._headers())
        err = refused(r, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert err["details"]["content_encoding"] == coding
        assert "no Content-Encoding" in err["message"]
    assert counts() == before
    ok = api.client.post(f"{ACTIONS}/register-worker", body, content_type="application/json",
                         HTTP_CONTENT_ENCODING="identity", **api._headers())
    assert ok.status_code == 200, ok.content


@pytest.mark.parametrize("number,kept", [("998.99999999999999", 999), ("1e-400", 0),
                                         ("99.00000000000000001", 99)])
def test_a_number_that_is_not_whole_but_reads_as_one_is_refused(lab, number, kept):
    """A double reads 998.99999999999999 as 999 and 1e-400 as 0: taken as a priority or an
    expected revision, as neither was sent."""
    before = counts()
    r = raw(lab["apis"]["operator"], "hold", '{"idempotency_key": "frac", "subject_euid": "'
            + lab["subject"] + '", "expected_state": "READY", "reason": "x",'
            ' "expected_revision": ' + number + "}")
    err = refused(r, 400, "VALIDATION_ERROR")
    assert f"{number} is not a whole number, but would be kept as one ({kept})" in err[
        "message"]
    assert counts() == before
    whole = raw(lab["apis"]["operator"], "hold", '{"idempotency_key": "whole", "subject_euid":'
                ' "' + lab["subject"] + '", "expected_state": "READY", "reason": "x",'
                ' "expected_revision": 1.0}')
    assert whole.status_code == 200, whole.content  # 1.0 is the integer 1, as JSON says


@pytest.mark.parametrize("number", ["0.0e-99999999999999999999", "0E-1000000000000000000000000"])
def test_a_number_with_an_exponent_out_of_range_is_refused_in_plain_words(lab, number):
    """Such an exponent raised Decimal's own error, not a refusal: ninja's generic 400 here,
    a 500 where a bundle or a form's JSON was read."""
    before = counts()
    r = raw(lab["apis"]["operator"], "hold", '{"idempotency_key": "exp", "subject_euid": "'
            + lab["subject"] + '", "expected_state": "READY", "reason": "x",'
            ' "expected_revision": ' + number + "}")
    err = refused(r, 400, "VALIDATION_ERROR")
    assert f"{number[:40]} has an exponent no stored number keeps" in err["message"]
    assert counts() == before
    from bloomops.execution.evidence import verify_bundle

    verdict = verify_bundle(('{"format": "x", "n": ' + number + "}").encode(), None)
    assert not verdict.ok and "has an exponent" in " ".join(verdict.problems)
