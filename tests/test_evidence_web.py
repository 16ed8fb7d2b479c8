"""The inspector's "Download evidence" control (docs/RULES.md#evidence): shown to and usable
by operators and admins only; a refused POST writes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from bloomops.execution.evidence import verify_bundle
from tests.engine import counts, make_subject
from tests.web_support import flow

pytestmark = pytest.mark.django_db
ROLES = ("worker_service", "worker_human", "operator", "admin")


@pytest.fixture
def subject(tenant, users):
    flow()
    return make_subject("q1", name="s1")


@pytest.mark.parametrize("role", ROLES)
def test_role_matrix_of_the_download(client, users, subject, role, tenant):
    client.force_login(users[role])
    page = client.get(f"/subjects/{subject}/").content.decode()
    before = counts()
    response = client.post(f"/subjects/{subject}/evidence/")
    if role in {"operator", "admin"}:
        assert "Download evidence" in page
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment;")
        data = response.content
        assert response["X-Evidence-Sha256"] == hashlib.sha256(data).hexdigest()
        assert json.loads(data)["subject"]["euid"] == subject
        verdict = verify_bundle(data, tenant)
        assert verdict.ok and verdict.recorded[0]["generated_by"] == users[role].username
    else:
        assert "Download evidence" not in page
        assert response.status_code == 403
        assert counts() == before


def test_a_get_is_not_an_export(client, users, subject):
    client.force_login(users["operator"])
    before = counts()
    assert client.get(f"/subjects/{subject}/evidence/").status_code == 405
    assert counts() == before


def test_an_unknown_subject_is_said_in_plain_words(client, users, subject):
    client.force_login(users["operator"])
    before = counts()
    response = client.post("/subjects/Z-MX-404404/evidence/", follow=True)
    assert "No such subject." in response.content.decode()
    assert counts() == before
