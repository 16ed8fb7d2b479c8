"""A verified evidence bundle reads as what was done (RULES.md#evidence): the verdict page
shows what the file records, in people's words, beside whether it verified. An auditor
handed the JSON had nothing to read but the JSON."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from bloomops.execution.chain import canonical_bytes
from bloomops.execution.exports import export_evidence
from bloomops.execution.selectors.base import ACTION_WHY
from bloomops.tapdb.db import fetch_all
from bloomops.web.evidence_readable import action_why, readable
from tests.approval_support import decide, integrity_held, person, request_release
from tests.engine import SERVICE, act, actor, claim, counts, make_queue, register
from tests.web_support import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(tenant, users):
    """A subject held for QC, released on a second person's signed approval, then claimed
    and failed by a service worker: exported by its operator."""
    make_queue("q1", required_worker_capabilities=[])
    olga = person("olga", "operator", full_name="Olga Ops")
    bea = person("bea", "operator", full_name="Bea Boss")
    subject, hold = integrity_held(olga)
    approval = request_release(olga, subject, hold)["approval_euid"]
    decide(bea, approval)
    svc = actor(*SERVICE)
    worker = register(svc)
    lease = claim(svc, worker, "q1")
    act("fail_queue_execution", svc, worker_euid=worker, lease_euid=lease["lease_euid"],
        expected_state="READY", payload={"retryable": True, "error_message": "pipette jam"})
    return subject, export_evidence(subject, olga)


def _verify(client, users, subject, data: bytes) -> str:
    reader = signed_in(client, users["worker_human"])
    return reader.post(f"/subjects/{subject}/evidence/verify/",
                       {"bundle": SimpleUploadedFile("b.json", data)}).content.decode()


def _rows(html: str, table: str) -> list[str]:
    body = html.split(f'id="{table}"')[1].split("</table>")[0]
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip()
            for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1], re.S)]


def test_a_verified_bundle_reads_as_what_was_done(client, users, history):
    subject, export = history
    before = counts()
    html = _verify(client, users, subject, export.data)
    assert '<h1 id="verdict" class="ok">Verified</h1>' in html
    assert "Verified: what the recorded bundle says was done" in html
    actions = _rows(html, "bundle-actions")
    assert [a.split(" UTC ")[1].split(" ")[0] for a in actions] == [
        "olga", "olga", "bea", "bea", "worker_service", "worker_service"]
    assert "Place hold place_execution_hold control out of range HELD" in actions[0]
    assert "pipette jam" in actions[5]  # a failure's why is its message (no reason given)
    # each action names its seal, as the file carries it
    seals = [r["record"]["chain"]["sha256"][:16] for r in json.loads(export.data)[
        "action_records"]]
    assert all(seal in row for seal, row in zip(seals, actions, strict=True))
    holds = _rows(html, "bundle-holds")
    assert len(holds) == 1 and "QC_FAIL" in holds[0] and "control out of range" in holds[0]
    assert "asked by olga" in holds[0] and "rerun passed" in holds[0]
    approvals = _rows(html, "bundle-approvals")
    assert "approved, signed by Bea Boss (bea)" in approvals[0]
    assert "password re-entry" in approvals[0] and "olga: QC rerun passed" in approvals[0]
    attempts = _rows(html, "bundle-attempts")
    assert "FAILED_RETRYABLE: TRANSIENT_SYSTEM: pipette jam" in attempts[0]
    assert "Print this check" in html
    assert counts() == before  # reading a file writes nothing


def test_an_edited_file_reads_as_what_it_says_under_not_verified(client, users, history):
    subject, export = history
    edited = json.loads(export.data)
    edited["holds"][0]["properties"]["reason"] = "nothing wrong"
    html = _verify(client, users, subject, canonical_bytes(edited))
    assert '<h1 id="verdict" class="bad">Not verified</h1>' in html
    assert "Not verified: what the file says, which may not be what was done" in html
    assert "nothing wrong" in _rows(html, "bundle-holds")[0]


@pytest.mark.parametrize("garbage", [
    {"action_records": ["x", 5, {"record": "x"}, {"record": {"result": [], "chain": 7}}]},
    {"holds": [{"properties": ["x"]}, None], "approvals": [{"properties": {"signature": 5}}]},
    {"execution_records": [{"properties": {"attempt_number": {"n": 1}}}],
     "outputs": [{"euid": ["x"]}], "subject": {"euid": "Z-MX-1", "name": {"a": 1}}},
])
def test_a_misshapen_file_is_read_without_a_500(client, users, history, garbage):
    subject, export = history
    doc = {**json.loads(export.data), **garbage}
    page = signed_in(client, users["worker_human"]).post(
        f"/subjects/{subject}/evidence/verify/",
        {"bundle": SimpleUploadedFile("b.json", canonical_bytes(doc))})
    assert page.status_code == 200 and 'id="bundle-readable"' in page.content.decode()
    view = readable(doc)
    assert all(isinstance(v, str) for a in view.actions for v in a.values())


def test_the_why_of_an_action_is_the_database_s_rule(history):
    """action_why and selectors.base.ACTION_WHY say one rule; here they are held together
    over every action record of the history (a hold's reason, a failure's message)."""
    _, export = history
    euids = [r["euid"] for r in json.loads(export.data)["action_records"]]
    rows = fetch_all(f"SELECT a.euid, {ACTION_WHY} AS why, a.json_addl AS record"
                     " FROM generic_instance a WHERE a.euid = ANY(%(e)s)", {"e": euids})
    assert len(rows) == len(euids)
    assert [action_why(r["record"]) for r in rows] == [r["why"] or "" for r in rows]
    assert {"control out of range", "pipette jam"} <= {r["why"] for r in rows}


def test_a_bundles_approvals_read_as_the_inbox_says_them(client, users, history, settings):
    """The printed check read an expired request as REQUESTED, a withdrawn one as "CANCELED
    / none" (who took it back, when and why were in the file), said no terms, "Decide
    approval" either way, and the release the decision ran as the approver's own, in the
    asker's words."""
    from bloomops.execution import clock

    subject, _ = history
    olga = actor("operator", username="olga")
    hold = act("place_execution_hold", olga, subject_euid=subject,
               expected_state="FAILED_RETRYABLE",
               payload={"hold_code": "QC_FAIL", "reason": "second look"})["hold_euid"]
    withdrawn = request_release(olga, subject, hold)["approval_euid"]
    act("cancel_approval", olga, payload={"approval_euid": withdrawn,
                                         "reason": "asked on the wrong tube"})
    expired = request_release(olga, subject, hold)["approval_euid"]
    clock.advance(settings.BLOOMOPS_APPROVAL_TTL_SECONDS + 60)
    html = _verify(client, users, subject, export_evidence(subject, olga).data)
    approvals = _rows(html, "bundle-approvals")
    row = {a: next(r for r in approvals if a in r) for a in (withdrawn, expired)}
    assert "WITHDRAWN by olga" in row[withdrawn] and "asked on the wrong tube" in row[withdrawn]
    assert "EXPIRED at" in row[expired] and "undecided" in row[expired]
    assert all("only its QC_FAIL hold" in r for r in approvals)  # the terms signed for
    actions = _rows(html, "bundle-actions")
    decided = next(a for a in actions if "decide_approval" in a)
    assert "Approved: release hold" in decided and "asked by olga" in decided
    released = next(a for a in actions if "release_execution_hold" in a)
    assert "on approval" in released and "asked by olga (the words are theirs)" in released
