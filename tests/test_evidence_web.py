"""The inspector's "Download evidence" control (docs/RULES.md#evidence): shown to and usable
by operators and admins only; a refused POST writes nothing."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from bloomops.execution.chain import canonical_bytes
from bloomops.execution.evidence import verify_bundle
from bloomops.execution.exports import export_evidence
from tests.engine import counts, make_queue, make_subject
from tests.web_support import flow, signed_in

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


@pytest.mark.parametrize("role", ["worker_human", "operator"])
def test_anyone_who_reads_verifies_a_downloaded_bundle_on_the_inspector(client, users, role,
                                                                       tenant):
    """Verifying took the command line or an operator's API token: an auditor shown a
    bundle could not check it in the console. A check reads only: it writes nothing."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from bloomops.execution.context import Actor

    make_queue("q1")
    euid = make_subject("q1", name="Tube")
    export = export_evidence(euid, Actor.of(users["operator"]))
    reader = signed_in(client, users[role])
    page = reader.get(f"/subjects/{euid}/").content.decode()
    assert 'id="verify-evidence"' in page and export.sha256 in page
    before = counts()
    done = reader.post(f"/subjects/{euid}/evidence/verify/",
                       {"bundle": SimpleUploadedFile("b.json", export.data)})
    html = done.content.decode()
    assert done.status_code == 200 and '<h1 id="verdict" class="ok">Verified</h1>' in html
    assert "matches its own seal" in html  # what was checked, said
    assert _outcomes(html) == ["passed"] * 6
    edited = json.loads(export.data)
    edited["subject"]["name"] = "Another tube"
    done = reader.post(f"/subjects/{euid}/evidence/verify/",
                       {"bundle": SimpleUploadedFile("b.json", canonical_bytes(edited))})
    html = done.content.decode()
    assert '<h1 id="verdict" class="bad">Not verified</h1>' in html and "subject.name" in html
    # which checks failed is marked, not left to the reader of the problems: the file is
    # well-formed and sealed, but recorded nowhere and unlike the database
    assert _outcomes(html) == ["passed", "passed", "failed", "failed", "passed", "passed"]
    # and nothing passed says the file was not edited: an auditor read the layout check's
    # "(not re-written or edited)" beside the edit it had found
    passed = re.findall(r'<li class="check-passed">(.*?)</li>', html, re.S)
    assert len(passed) == 4 and not any("edited)" in p or "not edited" in p for p in passed)
    refused = reader.post(f"/subjects/{euid}/evidence/verify/", {"bundle": SimpleUploadedFile(
        "b.json", b"not json")})
    assert refused.status_code == 400 and "not a bundle" in refused.content.decode()
    assert _outcomes(refused.content.decode()) == ["failed"] + ["not-run"] * 5
    assert counts() == before


def test_another_subjects_bundle_is_never_read_as_verified_for_this_one(client, users, tenant):
    """Another subject's intact bundle, uploaded on this subject's page, was headed
    "Verified ... against the records of" this subject."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from bloomops.execution.context import Actor

    make_queue("q1")
    mine, theirs = make_subject("q1", name="Mine"), make_subject("q1", name="Theirs")
    export = export_evidence(theirs, Actor.of(users["operator"]))
    page = signed_in(client, users["operator"]).post(
        f"/subjects/{mine}/evidence/verify/", {"bundle": SimpleUploadedFile("b.json",
                                                                         export.data)})
    html = page.content.decode()
    assert "<h1 id=\"verdict\" class=\"bad\">Not this subject's bundle</h1>" in html
    assert f"not of <code>{mine}</code>" in html


def test_a_bundle_naming_a_subject_no_page_can_have_is_answered_not_a_500(client, users,
                                                                          tenant):
    """A file whose subject.euid held a "/" made the verdict page a 500 (its link to that
    subject could not be built)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    make_queue("q1")
    mine = make_subject("q1", name="Mine")
    body = json.dumps({"format": "bloomops.evidence/1", "subject": {"euid": "A/B"}}).encode()
    page = signed_in(client, users["worker_human"]).post(
        f"/subjects/{mine}/evidence/verify/", {"bundle": SimpleUploadedFile("b.json", body)})
    html = page.content.decode()
    assert page.status_code == 200 and "This file is the bundle of <code>A/B</code>" in html


def _outcomes(html: str) -> list[str]:
    """How each check of the verdict page came out, in the order they are listed."""
    return re.findall(r'<li class="check-([a-z-]+)">', html.split('id="checked"')[1])
