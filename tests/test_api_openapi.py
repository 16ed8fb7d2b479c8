"""The OpenAPI document validates and lists exactly the documented paths."""

from __future__ import annotations

import pytest
from django.test import Client
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db

READ_PATHS = ["/queues", "/queues/{queue_key}", "/queues/{queue_key}/items", "/subjects/{euid}",
              "/subjects/{euid}/history", "/workers", "/workers/{worker_euid}", "/leases",
              "/dead-letter"]
ACTION_PATHS = ["register-worker", "heartbeat-worker", "claim", "renew-lease", "release-lease",
                "complete", "fail", "hold", "release-hold", "requeue", "cancel", "expire-lease"]


def test_openapi_document_validates_without_a_session():
    r = Client().get("/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    validate(doc)
    paths = set(doc["paths"])
    for p in READ_PATHS:
        assert f"/api/v1/execution{p}" in paths
    for p in ACTION_PATHS:
        assert f"/api/v1/execution/actions/{p}" in paths
    claim = doc["paths"]["/api/v1/execution/actions/claim"]["post"]
    assert {"200", "400", "401", "403", "404", "409"} <= set(claim["responses"])
    # Every operation lists the guard's refusals of a body (docs/API.md): a GET's too, which
    # is answered 413 or 415 when one comes with a body.
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            assert {"411", "413", "415"} <= set(operation["responses"]), (method, path)
    assert any(s.get("type") == "http" and s.get("scheme") == "bearer"
               for s in doc["components"]["securitySchemes"].values())


def test_docs_page_is_served():
    r = Client().get("/api/v1/docs")
    assert r.status_code == 200 and b"openapi.json" in r.content
