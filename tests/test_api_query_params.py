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
