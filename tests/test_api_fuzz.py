"""Property-based fuzzing of API v1 with schemathesis, from its own OpenAPI document.

Every operation of /api/v1/openapi.json, with a token of each of the four roles, gets schema
valid and schema-invalid requests (NUL characters, huge numbers, wrong types, missing fields
...) against the Django app in-process on the test database, with a small lab seeded so reads
and actions meet real queues, subjects, workers and leases. Each response must be no 5xx, a
documented status code, JSON as documented, and valid against the documented schema; a
request the schema forbids must be refused. Deterministic: a fixed seed and example count.
"""

from __future__ import annotations

import contextlib
import random

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import load_all_checks
from schemathesis.specs.openapi import checks as openapi_checks

from tests.api_helpers import api_for
from tests.engine import make_subject
from tests.web_support import flow

pytestmark = pytest.mark.django_db

ROLES = ("worker_service", "worker_human", "operator", "admin")
# Per operation, role and generation mode: 23 operations x 4 roles of schema-valid requests
# plus 21 operations (those with parameters or a body) of schema-invalid ones, about 1,100
# requests in all.
EXAMPLES = 10
SEED = 20260105

# The token is the role under test: mutating it would only fuzz the 401 path (covered by
# the contract tests), not the data.
CONFIG = schemathesis.Config.from_dict({"generation": {"with-security-parameters": False}})
load_all_checks()
CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.negative_data_rejection,
]


@contextlib.contextmanager
def in_test_transaction():
    """Django closes a connection at the end of a WSGI request when it is inside a
    transaction; the test's transaction must survive every request (Django's test client
    does the same)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def seed_lab(users) -> dict[str, list[str]]:
    """Two queues, subjects in several states, a worker per worker role, a lease, a hold and
    a dead letter: the values fuzzed requests are pointed at."""
    flow()
    subjects = [make_subject("q1", name=f"s{i}") for i in range(4)]
    subjects.append(make_subject("q2", name="qc"))
    svc = api_for(users["worker_service"])
    sci = api_for(users["worker_human"])
    op = api_for(users["operator"])
    workers = [
        svc.act("register-worker", worker_key="fuzz-svc", max_concurrent_leases=3,
                capabilities=["wetlab.extraction", "wetlab.qc"]).json()["worker_euid"],
        # A person's worker: key and profile are the person's (configuration).
        sci.act("register-worker", worker_type="HUMAN_SESSION").json()["worker_euid"],
    ]
    claim = svc.act("claim", worker_euid=workers[0], queue_key="q1").json()
    doomed = svc.act("claim", worker_euid=workers[0], queue_key="q1").json()
    svc.act("fail", worker_euid=workers[0], lease_euid=doomed["lease_euid"],
            expected_state="READY", error_class="PERMANENT_INPUT", error_message="cracked")
    hold = op.act("hold", subject_euid=subjects[-1], expected_state="READY",
                  reason="fuzz").json()
    return {
        "subject_euid": subjects, "euid": subjects, "worker_euid": workers,
        "lease_euid": [claim["lease_euid"], doomed["lease_euid"]],
        "hold_euid": [hold["hold_euid"]], "queue_key": ["q1", "q2"],
    }


def aim(case, lab: dict[str, list[str]], rnd: random.Random) -> None:
    """Point a schema-valid case at real objects half of the time, so actions succeed or meet
    real conflicts instead of only NOT_FOUND. Only text fields are replaced by text, so the
    case stays valid."""
    if rnd.random() < 0.5:
        return
    for name, value in list((case.path_parameters or {}).items()):
        if name in lab and isinstance(value, str):
            case.path_parameters[name] = rnd.choice(lab[name])
    if isinstance(case.body, dict):
        for name, value in list(case.body.items()):
            if name in lab and isinstance(value, str):
                case.body[name] = rnd.choice(lab[name])


def run_operation(operation, mode: GenerationMode, headers: dict, lab: dict) -> None:
    @seed(SEED)
    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), salt=st.randoms(use_true_random=False))
    def test(case, salt):
        if mode == GenerationMode.POSITIVE:
            aim(case, lab, salt)
        case.call_and_validate(headers=headers, checks=CHECKS)

    test()


@pytest.mark.parametrize("role", ROLES)
def test_every_operation_survives_fuzzing(tenant, users, role):
    lab = seed_lab(users)
    headers = {"Authorization": f"Bearer {api_for(users[role]).token}"}
    with in_test_transaction():
        schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application(),
                                                config=CONFIG)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 23
        for operation in operations:
            # Schema-invalid data is refused by the same validation whoever sends it, after
            # the role check; admin may call everything, so its token reaches that validation
            # on every operation. An operation without parameters or body has no data to get
            # wrong.
            has_input = bool(operation.path_parameters or operation.query or operation.body)
            modes = [GenerationMode.POSITIVE]
            if role == "admin" and has_input:
                modes.append(GenerationMode.NEGATIVE)
            for mode in modes:
                run_operation(operation, mode, headers, lab)
