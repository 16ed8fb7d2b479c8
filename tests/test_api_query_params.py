"""Query parameters under /api/: a path answers only the parameters it takes, written as
its schema says. An ignored parameter is a filter the caller believes was applied."""

from __future__ import annotations

import re

import pytest

from tests import test_api_malformed as malformed
from tests.engine import counts, make_subject

pytestmark = pytest.mark.django_db
# The malformed-request tests' small lab (a queue, a subject, a worker) and refusal check.
lab = malformed.lab
refused = malformed.refused


def _operations(api) -> list[tuple[str, str, list[str]]]:
    """Every operation of the OpenAPI document: method, path, the query parameters it
    names."""
    document = api.client.get("/api/v1/openapi.json").json()
    return [(method, path, [p["name"] for p in op.get("parameters", []) if p["in"] == "query"])
            for path, methods in document["paths"].items()
            for method, op in methods.items()]


def test_every_operation_refuses_a_parameter_it_does_not_take(lab):
    """Reads and actions alike, the evidence export (a GET that records) included: the
    refusal names the parameter and what the path takes, and nothing is written."""
    api = lab["apis"]["admin"]
    values = {"queue_key": "q1", "euid": lab["subject"], "worker_euid": lab["worker"]}
    operations = _operations(api)
    assert len(operations) > 30 and {m for m, _, _ in operations} == {"get", "post"}
    before = counts()
    for method, path, takes in operations:
        url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
        if method == "get":
            r = api.client.get(f"{url}?bogus=1", **api._headers())
        else:
            r = api.client.post(f"{url}?bogus=1", "{}", content_type="application/json",
                                **api._headers())
        err = refused(r, 400, "VALIDATION_ERROR")
        assert err["details"]["field"] == "bogus", (method, path)
        assert err["details"]["allowed"] == sorted(takes), (method, path)
        assert "Unknown query parameter 'bogus'" in err["message"]
    assert counts() == before


def test_a_misspelt_filter_is_refused_not_ignored(lab):
    """?stauts=EXPIRED would have listed every lease as if filtered."""
    api = lab["apis"]["operator"]
    err = refused(api.get("/leases", stauts="EXPIRED"), 400, "VALIDATION_ERROR")
    assert err["details"]["unknown_parameters"] == ["stauts"]
    assert "This path takes: limit, status, worker_euid." in err["message"]
    assert api.get("/leases", status="EXPIRED").status_code == 200


def test_a_path_without_parameters_says_so(lab):
    err = refused(lab["apis"]["operator"].get("/queues", limit="5"), 400, "VALIDATION_ERROR")
    assert "This path takes no query parameters." in err["message"]
    assert err["details"]["allowed"] == []


def test_parameters_are_refused_before_the_token_is_asked_for(lab):
    """Like a malformed body, a malformed request is refused as such, token or not; the
    same path without the parameter asks for the token."""
    from tests.api_helpers import Api

    anonymous = Api()
    refused(anonymous.get("/queues", bogus="1"), 400, "VALIDATION_ERROR")
    refused(anonymous.get("/queues"), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("written", ["1.0", " 5", "5 ", "+5", "1_0", "5e0", "٣", "0x5", ""])
def test_a_query_number_is_decimal_digits(lab, written):
    """pydantic alone reads "1.0" as 1, " 5" and "+5" as 5 and "1_0" as 10."""
    err = refused(lab["apis"]["operator"].get("/leases", limit=written), 400,
                  "VALIDATION_ERROR")
    assert err["details"]["field"] == "limit"


@pytest.mark.parametrize("path,name", [("/queues/q1/items", "limit"),
                                       ("/queues/q1/items", "offset"),
                                       ("/approvals", "limit")])
def test_every_query_number_is_held_to_digits(lab, path, name):
    api = lab["apis"]["operator"]
    err = refused(api.get(path, **{name: "1.0"}), 400, "VALIDATION_ERROR")
    assert err["details"]["field"] == name
    assert api.get(path, **{name: "1"}).status_code == 200


def test_digits_are_read_as_the_number_they_write(lab):
    api = lab["apis"]["operator"]
    make_subject("q1")
    page = api.get("/queues/q1/items", limit="01", offset="0001")
    assert page.status_code == 200
    assert (page.json()["limit"], page.json()["offset"]) == (1, 1)
    assert len(page.json()["items"]) == 1


def _sample(name: str, schema: dict, lab: dict) -> str:
    real = {"worker_euid": lab["worker"], "subject_euid": lab["subject"], "queue_key": "q1",
            "site": "sfo", "platform": "illumina", "assay": "wgs",
            "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z", "field": "qc",
            "value": "pass"}
    if name in real:
        return real[name]
    options = schema.get("enum") or [o["enum"][0] for o in schema.get("anyOf", [])
                                     if "enum" in o]
    return str(options[0]) if options else str(schema.get("default", 1))


def test_every_parameter_a_path_documents_is_taken(lab):
    """All of a path's parameters at once, each a value it takes."""
    api = lab["apis"]["admin"]
    values = {"queue_key": "q1", "euid": lab["subject"], "worker_euid": lab["worker"]}
    tried = 0
    for method, path, takes in _operations(api):
        if method != "get" or not takes:
            continue
        document = api.client.get("/api/v1/openapi.json").json()
        schemas = {p["name"]: p.get("schema", {}) for p in
                   document["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
        query = {name: _sample(name, schemas[name], lab) for name in takes}
        r = api.client.get(url, query, **api._headers())
        assert r.status_code == 200, (path, query, r.content)
        tried += 1
    assert tried >= 5


@pytest.mark.parametrize("path,name", [
    ("/queues/q1/items", "site"), ("/queues/q1/items", "platform"),
    ("/queues/q1/items", "assay"), ("/leases", "worker_euid"),
    ("/dead-letter", "queue_key"), ("/approvals", "subject_euid"),
    ("/subjects/{subject}", "worker_euid"),
])
def test_an_empty_filter_is_refused(lab, path, name):
    """site= was read as no filter on one path and as the empty value on another."""
    api = lab["apis"]["operator"]
    err = refused(api.get(path.format(subject=lab["subject"]), **{name: ""}), 400,
                  "VALIDATION_ERROR")
    assert err["details"]["field"] == name


def test_a_subject_explained_for_an_unknown_worker_is_404(lab):
    """It answered as if that worker could claim the subject."""
    api = lab["apis"]["operator"]
    r = api.get(f"/subjects/{lab['subject']}", worker_euid="Z-AX-999999")
    assert refused(r, 404, "NOT_FOUND")["details"]["worker_euid"] == "Z-AX-999999"
    ok = api.get(f"/subjects/{lab['subject']}", worker_euid=lab["worker"])
    assert ok.status_code == 200 and ok.json()["visible"] is True


def test_a_long_number_is_refused_by_its_range_not_its_writing(lab):
    api = lab["apis"]["operator"]
    assert api.get("/leases", limit="0" * 19 + "1").status_code == 200
    err = refused(api.get("/queues/q1/items", offset="9" * 20), 400, "VALIDATION_ERROR")
    assert "decimal digits" not in err["message"]
    err = refused(api.get("/leases", limit="1" * 101), 400, "VALIDATION_ERROR")
    assert "At most 100 digits" in err["message"]
