"""The role matrix of every endpoint: reads for any of the four roles, actions exactly as the
action templates allow (RULES.md#roles); no token is 401, no role is 403."""

from __future__ import annotations

import pytest

from bloomops.api.api import ACTIONS
from bloomops.execution.context import action_spec
from tests.api_helpers import Api, api_for  # noqa: F401
from tests.conftest import make_user
from tests.engine import make_queue, make_subject

pytestmark = pytest.mark.django_db
ROLES = ("worker_service", "worker_human", "operator", "admin")
READS = ["/queues", "/queues/q1", "/queues/q1/items", "/subjects/{s}", "/subjects/{s}/history",
         "/queues/q1/history", "/workers", "/workers/{w}", "/leases?status=ACTIVE", "/dead-letter"]


@pytest.fixture
def world(tenant, users):
    make_queue("q1", required_worker_capabilities=[])
    subject = make_subject("q1")
    svc = api_for(users["worker_service"])
    worker = svc.act("register-worker", worker_key="rw").json()["worker_euid"]
    apis = {role: api_for(user) for role, user in users.items()}
    apis["none"] = api_for(make_user("nobody"))
    apis["anonymous"] = Api(None)
    return {"s": subject, "w": worker, "apis": apis}


@pytest.mark.parametrize("path", READS)
def test_reads_role_matrix(world, path):
    url = path.format(s=world["s"], w=world["w"])
    base, _, query = url.partition("?")
    params = dict(p.split("=") for p in query.split("&") if p)
    for role, api in world["apis"].items():
        r = api.get(base, **params)
        expected = {"anonymous": 401, "none": 403}.get(role, 200)
        assert r.status_code == expected, (role, url, r.content)


def _body(path: str, role: str, world: dict) -> dict:
    body = {"subject_euid": world["s"], "worker_euid": world["w"], "expected_state": "READY",
            "payload": {"reason": "role matrix"}}
    if path == "claim":
        body = {"worker_euid": world["w"], "queue_key": "q1"}
    if path == "register-worker":
        body = {"worker_key": f"{role}-w",
                "worker_type": "HUMAN_SESSION" if role == "worker_human" else "SERVICE"}
    return body


@pytest.mark.parametrize("path", list(ACTIONS))
def test_actions_role_matrix(world, path):
    action_key = ACTIONS[path][0]
    allowed = action_spec(action_key).allowed_roles
    for role, api in world["apis"].items():
        r = api.act(path, **_body(path, role, world))
        if role == "anonymous":
            assert r.status_code == 401
        elif role == "none" or role not in allowed:
            assert r.status_code == 403, (role, path, r.content)
            assert r.json()["error"]["code"] == "FORBIDDEN"
        else:
            # allowed: whatever the outcome for this dummy request, it is not a role refusal
            assert r.status_code not in (401, 403), (role, path, r.content)


def test_matrix_matches_the_documented_roles():
    expected = {
        "register_worker": {"worker_service", "worker_human", "admin"},
        "claim_queue_item": {"worker_service", "worker_human", "admin"},
        "place_execution_hold": {"operator", "admin"},
        "requeue_subject": {"operator", "admin"},
        "cancel_subject_execution": {"operator", "admin"},
        "expire_queue_lease": {"admin"},
        "set_worker_status": {"admin"},
    }
    for key, roles in expected.items():
        assert set(action_spec(key).allowed_roles) == roles
