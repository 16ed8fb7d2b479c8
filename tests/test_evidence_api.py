"""The evidence endpoints (docs/API.md): download by operators and admins only, verify by
anyone with a role; every refusal writes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from bloomops.execution.chain import canonical_bytes
from tests.api_helpers import Api, api_for, error_code
from tests.engine import actor, counts, make_queue, make_subject

pytestmark = pytest.mark.django_db


@pytest.fixture
def subject(tenant):
    make_queue("q1")
    euid = make_subject("q1")
    from tests.engine import act

    act("place_execution_hold", actor("operator"), subject_euid=euid, expected_state="READY",
        payload={"hold_code": "QC_FAIL", "reason": "bad run"})
    return euid


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_operators_download_a_recorded_bundle_and_verify_it(users, subject, role):
    api = api_for(users[role])
    response = api.get(f"/subjects/{subject}/evidence")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert f"evidence-{subject}-" in response["Content-Disposition"]
    data = response.content
    assert response["X-Evidence-Sha256"] == hashlib.sha256(data).hexdigest()
    assert json.loads(data)["subject"]["euid"] == subject
    again = api.get(f"/subjects/{subject}/evidence")
    assert again.content == data and again["X-Evidence-Euid"] == response["X-Evidence-Euid"]

    verdict = api.post(f"/subjects/{subject}/evidence/verify", data)
    assert verdict.status_code == 200
    body = verdict.json()
    assert body["ok"] is True and body["problems"] == []
    assert body["recorded"][0]["generated_by"] == users[role].username

    doc = json.loads(data)
    doc["holds"][0]["properties"]["reason"] = "routine"
    tampered = api.post(f"/subjects/{subject}/evidence/verify", canonical_bytes(doc))
    assert tampered.status_code == 200
    assert tampered.json()["ok"] is False
    # the file's hold no longer says what its sealed place_execution_hold record says
    assert tampered.json()["outcomes"] == ["passed", "passed", "failed", "failed", "passed",
                                           "failed"]
    assert any(".properties.reason" in p and p.startswith("file: holds[")
               for p in tampered.json()["problems"])


@pytest.mark.parametrize("role", ["worker_service", "worker_human"])
def test_workers_are_refused_and_nothing_is_written(users, subject, role):
    api = api_for(users[role])
    before = counts()
    response = api.get(f"/subjects/{subject}/evidence")
    assert response.status_code == 403 and error_code(response) == "FORBIDDEN"
    # verifying only reads: anyone with a role may (a body that is no bundle is a 400)
    response = api.post(f"/subjects/{subject}/evidence/verify", b"{}")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    response = api.act("record-evidence-bundle", subject_euid=subject,
                       bundle_sha256="0" * 64)
    assert response.status_code == 403
    assert counts() == before


def test_no_token_is_refused(subject):
    before = counts()
    assert Api().get(f"/subjects/{subject}/evidence").status_code == 401
    assert Api().post(f"/subjects/{subject}/evidence/verify", b"{}").status_code == 401
    assert counts() == before


def test_malformed_requests_are_refused_and_write_nothing(users, subject):
    api = api_for(users["operator"])
    before = counts()
    missing = api.get("/subjects/Z-MX-404404/evidence")
    assert missing.status_code == 404 and error_code(missing) == "NOT_FOUND"
    for body in (b"not json", b"{}", b"[1]"):
        response = api.post(f"/subjects/{subject}/evidence/verify", body)
        assert response.status_code == 400, body
        assert error_code(response) == "VALIDATION_ERROR"
    wrong = api.act("record-evidence-bundle", subject_euid=subject, bundle_sha256="0" * 64)
    assert wrong.status_code == 409 and error_code(wrong) == "EVIDENCE_MISMATCH"
    bad = api.act("record-evidence-bundle", subject_euid=subject, bundle_sha256="xyz")
    assert bad.status_code == 400
    assert counts() == before
    # Another subject's bundle is not evidence about this one.
    other = make_subject("q1")
    data = api.get(f"/subjects/{other}/evidence").content
    after_export = counts()
    response = api.post(f"/subjects/{subject}/evidence/verify", data)
    assert response.status_code == 400 and other in response.json()["error"]["message"]
    assert counts() == after_export


@pytest.mark.parametrize("depth", [65, 600, 5000])
def test_a_bundle_nested_too_deeply_is_400_not_500(users, subject, depth):
    """A file nesting deeper than any bundle (in its body or inside a real bundle's
    values) is refused by name; it was a 500 (RecursionError) from 600 levels."""
    api = api_for(users["operator"])
    bare = "[" * depth + "]" * depth
    response = api.post(f"/subjects/{subject}/evidence/verify", bare.encode())
    assert response.status_code == 400 and "nests deeper than 64" in response.content.decode()
    doc = json.loads(api.get(f"/subjects/{subject}/evidence").content)
    before = counts()
    doc["subject"]["properties"]["site"] = "DEEP"
    deep = "[" * (depth - 3) + "]" * (depth - 3)
    text = canonical_bytes(doc).decode().replace('"DEEP"', deep)
    response = api.post(f"/subjects/{subject}/evidence/verify", text.encode())
    assert response.status_code == 400, response.content
    assert "nests deeper than 64" in response.json()["error"]["message"]
    assert counts() == before


def test_a_bundle_with_a_key_twice_is_not_verified(users, subject):
    """A reader of the file would see one of the two values; the verdict cannot vouch for
    both."""
    api = api_for(users["operator"])
    data = api.get(f"/subjects/{subject}/evidence").content.decode()
    twice = data.replace('{"', '{"format":"x","', 1)
    response = api.post(f"/subjects/{subject}/evidence/verify", twice.encode())
    assert response.status_code == 400
    assert "'format' is given twice" in response.json()["error"]["message"]


@pytest.mark.parametrize("section", ["leases", "action_records", "outputs", "lineage"])
@pytest.mark.parametrize("value", [1, True, 0, "x", {"a": 1}])
def test_a_bundle_whose_section_is_not_a_list_is_not_a_bundle(users, subject, section, value):
    """It was a 500 (TypeError: 'int' object is not iterable)."""
    api = api_for(users["operator"])
    doc = json.loads(api.get(f"/subjects/{subject}/evidence").content)
    doc[section] = value
    before = counts()
    response = api.post(f"/subjects/{subject}/evidence/verify", canonical_bytes(doc))
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert f"({section} is not a list)" in response.json()["error"]["message"]
    assert counts() == before


def test_a_bundle_whose_subject_euid_holds_a_nul_is_a_400(users, subject):
    """It was a 500: the NUL reached PostgreSQL."""
    api = api_for(users["operator"])
    doc = json.loads(api.get(f"/subjects/{subject}/evidence").content)
    doc["subject"]["euid"] = "Z\u0000"
    before = counts()
    response = api.post(f"/subjects/{subject}/evidence/verify", canonical_bytes(doc))
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "subject.euid contains a NUL character" in response.json()["error"]["message"]
    assert counts() == before


def test_a_lone_surrogate_in_a_file_is_no_bundle_not_a_server_error(users, subject, client,
                                                                   tmp_path):
    """A \\ud800 escape anywhere in a file (a bundle's key or value, or a field of its own)
    decoded to text nothing could encode again: the API, the subject page's upload and
    verify_evidence all answered with a server error."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import CommandError, call_command

    from tests.web_support import signed_in

    api = api_for(users["operator"])
    data = api.get(f"/subjects/{subject}/evidence").content
    text = data.decode()
    bodies = (
        f'{{"format":"bloomops.evidence/1","subject":{{"euid":"{subject}"}},"x":"\\ud800"}}',
        text.replace('"reason":"bad run"', '"reason":"bad \\udfff run"'),
        text.replace('"reason":"bad run"', '"\\ud800":"bad run"'),
    )
    assert all(b != text for b in bodies)
    before = counts()
    for body in bodies:
        response = api.post(f"/subjects/{subject}/evidence/verify", body.encode())
        assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
        assert "surrogate" in response.json()["error"]["message"]
    web = signed_in(client, users["operator"])
    page = web.post(f"/subjects/{subject}/evidence/verify/", {
        "bundle": SimpleUploadedFile("b.json", bodies[1].encode())})
    assert page.status_code in (200, 400) and "surrogate" in page.content.decode()
    path = tmp_path / "b.json"
    path.write_bytes(bodies[1].encode())
    with pytest.raises(CommandError, match="surrogate"):
        call_command("verify_evidence", str(path))
    assert counts() == before
