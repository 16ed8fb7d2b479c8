"""/metrics agrees with the dashboard: the same selector (queue_summaries) computes both."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from bloomops.execution import clock, selectors
from tests.api_helpers import api_for  # noqa: F401
from tests.engine import act, actor, claim, make_queue, make_subject, register

pytestmark = pytest.mark.django_db


def scrape(client=None, **headers) -> dict[tuple[str, str], float]:
    from django.conf import settings

    r = (client or Client()).get("/metrics", **headers)
    assert r.status_code == 200, r.content
    out = {}
    for fam in text_string_to_metric_families(r.content.decode()):
        for s in fam.samples:
            if "queue" in s.labels and s.labels.get("tenant") == settings.TAPDB_TENANT_ID:
                out[(s.name, s.labels["queue"])] = s.value
    return out


def test_metrics_agree_with_dashboard_selectors(tenant, users):
    clock.freeze(clock.now())
    make_queue("q1", required_worker_capabilities=[], max_attempts_default=1)
    make_queue("q2", required_worker_capabilities=[])
    svc = actor("worker_service")
    ops = actor("operator")
    for _ in range(3):
        make_subject("q1")
    held = make_subject("q2")
    act("place_execution_hold", ops, subject_euid=held, expected_state="READY",
        payload={"reason": "x"})
    make_subject("q2")
    worker = register(svc, "m-w")
    c = claim(svc, worker, "q1")
    act("fail_queue_execution", svc, subject_euid=c["subject_euid"], worker_euid=worker,
        lease_euid=c["lease_euid"], expected_state="READY",
        payload={"retryable": False, "error_class": "PERMANENT_INPUT",
                 "error_message": "label unreadable"})
    claim(svc, register(svc, "m-w2"), "q1")
    clock.advance(30)

    metrics = scrape()
    summaries = {s.queue_key: s for s in selectors.queue_summaries()}
    names = {"queue_depth": "depth", "oldest_job_age_seconds": "oldest_job_age_seconds",
             "newest_job_age_seconds": "newest_job_age_seconds",
             "active_leases": "active_leases", "held_count": "held_count",
             "dead_letter_count": "dead_letter_count", "failure_rate": "failure_rate",
             "throughput_success_per_minute": "throughput_success_per_minute",
             "throughput_failure_per_minute": "throughput_failure_per_minute",
             "expired_leases_total": "expired_leases_total",
             "retryable_failures_total": "retryable_failures_total",
             "terminal_failures_total": "terminal_failures_total"}
    for key, summary in summaries.items():
        for metric, attr in names.items():
            assert metrics[(metric, key)] == pytest.approx(float(getattr(summary, attr))), (
                metric, key)
    assert metrics[("queue_depth", "q1")] == 1 and metrics[("queue_depth", "q2")] == 1
    assert metrics[("queue_depth", "__all__")] == 2
    assert metrics[("held_count", "q2")] == 1 and metrics[("dead_letter_count", "q1")] == 1
    assert metrics[("active_leases", "q1")] == 1
    assert metrics[("terminal_failures_total", "q1")] == 1
    assert metrics[("oldest_job_age_seconds", "q1")] >= 30
    # two workers online, both able to serve both queues
    assert metrics[("worker_online_count", "q1")] == 2
    assert metrics[("worker_heartbeat_lag_seconds", "q1")] == pytest.approx(30, abs=1)
    # and the API's queue summaries say the same
    api_rows = {q["queue_key"]: q for q in api_for(users["operator"]).get("/queues").json()}
    for key in summaries:
        assert api_rows[key]["queue_depth"] == metrics[("queue_depth", key)]
        assert api_rows[key]["worker_online_count"] == metrics[("worker_online_count", key)]


def test_event_counters_claim_conflict_and_replay(tenant, users):
    make_queue("q1", required_worker_capabilities=[])
    svc = api_for(users["worker_service"])
    worker = svc.act("register-worker", worker_key="cc").json()["worker_euid"]
    before = scrape()
    svc.act("claim", worker_euid=worker, queue_key="q1")  # NO_WORK
    svc.act("heartbeat-worker", worker_euid=worker, idempotency_key="hb")
    svc.act("heartbeat-worker", worker_euid=worker, idempotency_key="hb")  # replay
    after = scrape()
    assert after[("claim_conflict_total", "q1")] - before.get(("claim_conflict_total", "q1"),
                                                              0) == 1
    make_subject("q1")
    for _ in range(2):  # the second is answered from the first's stored result
        claimed = svc.act("claim", worker_euid=worker, queue_key="q1", idempotency_key="c1")
        assert claimed.status_code == 200, claimed.content
    replays = {(s.labels["queue"], s.labels["action_key"]): s.value
               for fam in text_string_to_metric_families(Client().get("/metrics").content.decode())
               for s in fam.samples if s.name == "idempotent_replay_total"
               and s.labels["tenant"] == tenant}
    # per queue, as every metric is (RULES.md#metrics); an action on no queue under __all__
    assert replays == {("__all__", "heartbeat_worker"): 1, ("q1", "claim_queue_item"): 1}


def test_metrics_token_protection(tenant, users, settings):
    settings.BLOOMOPS_METRICS_TOKEN = "scrape-secret"
    refused = Client().get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer ")
    # a monitor's probe: HEAD is answered as GET is, without the body
    head = Client().head("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert head.status_code == 200 and head.content == b""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    for wrong in ("scrape-secreT", "scrape-secret-and-more", "", "ｓcrape-secret"):
        assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {wrong}").status_code == 401


def test_with_a_metrics_token_only_the_api_token_of_someone_with_a_role_also_scrapes(
        tenant, users, settings):
    """An account without any bloomops role scraped the lab's queue keys with its token."""
    from django.contrib.auth.models import User

    from bloomops.accounts.tokens import create_token
    from tests.engine import GIVEN

    settings.BLOOMOPS_METRICS_TOKEN = "scrape-secret"
    nobody = User.objects.create_user("no-role", password="x-long-password-1")
    _, without_role = create_token(nobody.username, **GIVEN)
    _, operator = create_token(users["operator"].username, **GIVEN)
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {without_role}"
                        ).status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {operator}").status_code == 200


def test_claims_from_the_operator_ui_are_counted_too(tenant, users, client):
    """Counted where every action passes (the executor), not at API call sites."""
    make_queue("q1", required_worker_capabilities=[])
    client.force_login(users["worker_human"])
    before = scrape()
    r = client.post("/queues/q1/claim-next/", {"idempotency_key": "ui-claim-1"})
    assert r.status_code in (200, 302, 409)
    after = scrape()
    assert after[("claim_conflict_total", "q1")] - before.get(("claim_conflict_total", "q1"),
                                                              0) == 1


def test_metrics_carry_retry_pending_priority_classes_and_straggling(tenant, users):
    """Every queue metric of RULES.md#metrics is scraped, not only in the JSON API: retry
    pending, STAT and URGENT counts, straggling (per tenant: how many queues straggle)."""
    from bloomops.execution.envelope import ts

    start = clock.now()
    clock.freeze(start)
    make_queue("q1", required_worker_capabilities=[], straggler_threshold_seconds=60)
    make_queue("q2", required_worker_capabilities=[], straggler_threshold_seconds=3600)
    make_subject("q1", priority=300)
    make_subject("q1", priority=250)
    make_subject("q1", state="FAILED_RETRYABLE", retry_at=ts(start + timedelta(hours=1)))
    make_subject("q2")
    clock.advance(120)

    metrics = scrape()
    assert metrics[("stat_count", "q1")] == 1 and metrics[("urgent_count", "q1")] == 1
    assert metrics[("retry_pending_count", "q1")] == 1
    assert metrics[("queue_straggling", "q1")] == 1 and metrics[("queue_straggling", "q2")] == 0
    assert metrics[("queue_straggling", "__all__")] == 1
    assert metrics[("stat_count", "__all__")] == 1
    api_rows = {q["queue_key"]: q for q in api_for(users["operator"]).get("/queues").json()}
    assert api_rows["q1"]["straggling"] is True and api_rows["q2"]["straggling"] is False
    assert api_rows["q1"]["retry_pending_count"] == metrics[("retry_pending_count", "q1")]
