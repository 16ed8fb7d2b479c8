"""The role matrix (RULES.md#roles) — every POST endpoint of the UI times each of the four
roles. A role outside the action's template gets 403 and nothing is written, whatever it forged."""

from __future__ import annotations

import uuid

import pytest

from bloomops.web import services
from tests.engine import act, actor, counts, make_subject
from tests.web_support import flow

pytestmark = pytest.mark.django_db

HUMAN = {"worker_human", "admin"}
OPERATOR = {"operator", "admin"}
ADMIN = {"admin"}
ROLES = ("worker_service", "worker_human", "operator", "admin")


@pytest.fixture
def world(tenant, users):
    """A subject in q1, a held subject, and an active lease of the human worker sci."""
    flow()
    free = make_subject("q1", name="free")
    held = make_subject("q1", name="held")
    act("place_execution_hold", actor("operator", username="op"), subject_euid=held,
        expected_state="READY", payload={"reason": "x"})
    leased = make_subject("q1", name="leased")
    worker = services.ensure_my_worker(users["worker_human"])
    lease = act("claim_queue_item", actor("worker_human", username="sci"),
                worker_euid=worker, subject_euid=leased)["lease_euid"]
    return {"users": users, "free": free, "held": held, "lease": lease, "worker": worker}


# endpoint name -> (roles allowed, url, form data), built from the world
ENDPOINTS = {
    "claim_next": (HUMAN, lambda w: ("/queues/q1/claim-next/", {})),
    "claim_subject": (HUMAN, lambda w: (f"/subjects/{w['free']}/claim/",
                                        {"expected_state": "READY"})),
    "scan": (HUMAN, lambda w: ("/scan/", {"euid": w["free"]})),
    "renew_lease": (HUMAN, lambda w: (f"/leases/{w['lease']}/renew/", {})),
    "release_lease": (HUMAN, lambda w: (f"/leases/{w['lease']}/release/",
                                        {"expected_state": "READY"})),
    "complete_lease": (HUMAN, lambda w: (f"/leases/{w['lease']}/complete/",
                                         {"expected_state": "READY", "next_queue_key": "q2"})),
    "fail_lease": (HUMAN, lambda w: (f"/leases/{w['lease']}/fail/", {
        "expected_state": "READY", "error_class": "TRANSIENT_SYSTEM", "error_message": "x"})),
    "hold_subject": (OPERATOR, lambda w: (f"/subjects/{w['free']}/hold/",
                                          {"expected_state": "READY", "reason": "forged"})),
    "release_hold": (OPERATOR, lambda w: (f"/subjects/{w['held']}/release-hold/",
                                          {"expected_state": "HELD", "reason": "forged"})),
    "requeue_subject": (OPERATOR, lambda w: (f"/subjects/{w['free']}/requeue/",
                                             {"expected_state": "READY", "reason": "forged"})),
    "cancel_subject": (OPERATOR, lambda w: (f"/subjects/{w['free']}/cancel/",
                                            {"expected_state": "READY", "reason": "forged"})),
    "bulk_requeue": (OPERATOR, lambda w: ("/workbench/bulk/", {
        "action": "requeue", "reason": "forged", "pick": [f"{w['free']}|READY|1"]})),
    "bulk_release": (OPERATOR, lambda w: ("/workbench/bulk/", {
        "action": "release", "reason": "forged", "pick": [f"{w['held']}|HELD|2"]})),
    "bulk_hold": (OPERATOR, lambda w: ("/workbench/bulk/", {
        "action": "hold", "reason": "forged", "hold_code": "QC_FAIL",
        "pick": [f"{w['free']}|READY|1"]})),
    "bulk_cancel": (OPERATOR, lambda w: ("/workbench/bulk/", {
        "action": "cancel", "reason": "forged", "pick": [f"{w['held']}|HELD|2"]})),
    "expire_lease": (ADMIN, lambda w: (f"/leases/{w['lease']}/expire/", {"reason": "forged"})),
    "sweep": (ADMIN, lambda w: ("/admin/sweep/", {})),
    "drain_worker": (ADMIN, lambda w: (f"/workers/{w['worker']}/status/",
                                       {"operation": "drain", "reason": "forged"})),
    "disable_worker": (ADMIN, lambda w: (f"/workers/{w['worker']}/status/",
                                         {"operation": "disable", "reason": "forged"})),
    "enable_worker": (ADMIN, lambda w: (f"/workers/{w['worker']}/status/",
                                        {"operation": "enable"})),
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_role_matrix(client, world, endpoint, role):
    allowed, build = ENDPOINTS[endpoint]
    url, data = build(world)
    client.force_login(world["users"][role])
    before = counts()
    response = client.post(url, {"idempotency_key": uuid.uuid4().hex, **data})
    if role in allowed:
        assert response.status_code == 302, (endpoint, role, response.status_code)
    else:
        assert response.status_code == 403, (endpoint, role, response.status_code)
        assert "Not allowed" in response.content.decode()
        assert counts() == before  # a forged POST writes nothing


def test_forbidden_page_explains_in_plain_words(client, world):
    client.force_login(world["users"]["worker_human"])
    response = client.post(f"/subjects/{world['free']}/hold/", {
        "idempotency_key": "forged", "expected_state": "READY", "reason": "x"})
    assert response.status_code == 403
    assert "Your role may not place hold." in response.content.decode()


def test_a_user_without_a_role_is_refused_every_post(client, world, django_user_model):
    nobody = django_user_model.objects.create_user("nobody", password="x")
    client.force_login(nobody)
    before = counts()
    for endpoint, (_, build) in ENDPOINTS.items():
        url, data = build(world)
        response = client.post(url, {"idempotency_key": uuid.uuid4().hex, **data})
        assert response.status_code == 403, endpoint
        assert counts() == before, endpoint  # and writes nothing


def test_get_on_an_action_endpoint_is_not_allowed(client, world):
    client.force_login(world["users"]["admin"])
    assert client.get(f"/subjects/{world['free']}/hold/").status_code == 405
    assert client.get("/admin/sweep/").status_code == 405


def test_a_person_at_the_bench_lands_on_their_work_after_signing_in(client, lab):
    """The scientist signed in to the supervisors' dashboard (dead letters, coverage,
    charts); a person whose only role is the bench lands on My work, others on the
    dashboard, and a page they were sent from still wins."""
    from django.test import Client

    for user, landing in ((lab["worker_human"], "/my-work/"), (lab["operator"], "/")):
        signed = Client().post("/accounts/login/", {"username": user.username,
                                                    "password": f"pw-{user.username}"})
        assert signed["Location"] == landing, user.username
    sent = Client().post("/accounts/login/?next=/scan/", {
        "username": "sci", "password": "pw-sci"})
    assert sent["Location"] == "/scan/"
