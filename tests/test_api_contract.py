"""Contract tests of API v1: every endpoint, every error code, tokens, idempotent replay."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from bloomops.accounts.models import ApiToken
from bloomops.accounts.tokens import create_token, digest
from bloomops.execution import clock
from tests.api_helpers import Api, api_for, error_code, ikey  # noqa: F401
from tests.engine import GIVEN, counts, make_queue, make_subject

pytestmark = pytest.mark.django_db


@pytest.fixture
def q1(tenant):
    make_queue("q1", required_worker_capabilities=["cap.a"], lease_ttl_seconds=60,
               max_attempts_default=2,
               output_template_codes=["content/material/extracted_sample/1.0",
                                      "data/analysis/artifact/1.0"])
    make_queue("q2", required_worker_capabilities=["cap.a"], dispatch_priority=10)


@pytest.fixture
def apis(users):
    return {role: api_for(user) for role, user in users.items()}


def register(api: Api, key: str = "w", **extra) -> str:
    if extra.get("worker_type") == "HUMAN_SESSION":  # key and profile are the person's
        r = api.act("register-worker", **extra)
        assert r.status_code == 200, r.content
        return r.json()["worker_euid"]
    extra.setdefault("capabilities", ["cap.a"])
    r = api.act("register-worker", worker_key=key, **extra)
    assert r.status_code == 200, r.content
    return r.json()["worker_euid"]


def claimed(api: Api, queue_key: str = "q1", **subject_env) -> dict:
    subject = make_subject(queue_key, **subject_env)
    worker = register(api, key=ikey("w"))
    r = api.act("claim", worker_euid=worker, queue_key=queue_key)
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["subject_euid"] == subject
    return body


# ------------------------------------------------------------------ authentication, tokens


def test_token_is_stored_hashed_and_shown_once(users, capsys):
    call_command("create_api_token", "svc", "--name", "ci")
    token = capsys.readouterr().out.strip()
    row = ApiToken.objects.get(user=users["worker_service"])
    assert token.startswith("bo_") and row.token_hash == digest(token)
    assert token not in str(list(ApiToken.objects.values()))
    call_command("list_api_tokens")
    listed = capsys.readouterr().out
    assert row.prefix in listed and "svc" in listed and token not in listed
    assert Api(token).get("/queues").status_code == 200
    call_command("revoke_api_token", str(row.id))
    r = Api(token).get("/queues")
    assert r.status_code == 401 and error_code(r) == "UNAUTHENTICATED"
    # a 401 says how to authenticate (RFC 9110), with a token or without one
    assert r["WWW-Authenticate"] == 'Bearer realm="bloomops"'
    assert Api(None).get("/queues")["WWW-Authenticate"] == 'Bearer realm="bloomops"'


def test_a_token_row_written_in_the_database_authenticates_nobody(users, settings):
    """A token was stored as its bare sha256: someone who could write the token table could
    add a token of their own for any person. It is stored as an HMAC under the secret key,
    which the database never holds; a rotated key (a fallback) ends no token."""
    import hashlib

    from django.utils import timezone

    forged = "bo_0badc0de_" + "x" * 43
    ApiToken.objects.create(user=users["admin"], prefix="0badc0de",
                            token_hash=hashlib.sha256(forged.encode()).hexdigest(),
                            expires_at=timezone.now() + timezone.timedelta(days=1))
    r = Api(forged).get("/queues")
    assert r.status_code == 401 and error_code(r) == "UNAUTHENTICATED"
    _, token = create_token("svc", **GIVEN)
    assert Api(token).get("/queues").status_code == 200
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-" + "k" * 40, [old_key]
    assert Api(token).get("/queues").status_code == 200
    settings.SECRET_KEY_FALLBACKS = []
    assert Api(token).get("/queues").status_code == 401


def test_tokens_given_before_their_digests_were_keyed_still_work(users):
    import hashlib
    import importlib

    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    # the models as they were when the migration ran (the token model has moved app since)
    apps = MigrationLoader(connection).project_state(
        ("bloomops_api", "0003_keyed_token_digests")).apps
    _, token = create_token("svc", **GIVEN)
    ApiToken.objects.update(token_hash=hashlib.sha256(token.encode()).hexdigest())  # as stored
    assert Api(token).get("/queues").status_code == 401
    importlib.import_module("bloomops.api.migrations.0003_keyed_token_digests").key_digests(
        apps, None)
    assert Api(token).get("/queues").status_code == 200


def test_missing_and_bad_tokens_are_401(tenant, users):
    for api in (Api(None), Api("bo_nonsense_token"), Api("not-even-prefixed")):
        r = api.get("/queues")
        assert r.status_code == 401
        assert r.json() == {"error": {"code": "UNAUTHENTICATED", "message": r.json()["error"][
            "message"], "details": {}}}
        assert api.act("claim", worker_euid="x").status_code == 401


def test_browser_session_is_not_api_auth(tenant, users):
    client = Client()
    client.force_login(users["admin"])
    r = client.get("/api/v1/execution/queues")
    assert r.status_code == 401 and error_code(r) == "UNAUTHENTICATED"


def test_inactive_user_token_refused(tenant, users):
    user = users["operator"]
    _, token = create_token(user.username, **GIVEN)
    user.is_active = False
    user.save()
    assert Api(token).get("/queues").status_code == 401


def test_no_token_is_made_for_an_account_that_may_not_sign_in(tenant, users, capsys):
    """A token made while the account was kept out started working the day it was let back
    in, where nothing issued before is to work."""
    user = users["operator"]
    user.is_active = False
    user.save()
    before = ApiToken.objects.count()
    with pytest.raises(CommandError, match="op may not sign in: let them back in"):
        call_command("create_api_token", "op", "--name", "after-disable")
    assert ApiToken.objects.count() == before and capsys.readouterr().out == ""


def test_bearer_post_needs_no_csrf_token(tenant, users, apis):
    # Api uses Client(enforce_csrf_checks=True): a bearer POST must pass CSRF middleware.
    r = apis["worker_service"].act("register-worker", worker_key="csrf-w")
    assert r.status_code == 200


# ------------------------------------------------------------------ reads


def test_reads_return_what_the_ui_shows(q1, apis):
    svc = apis["worker_service"]
    a = make_subject("q1", priority=10)
    b = make_subject("q1", priority=300)
    make_subject("q2")
    r = svc.get("/queues")
    assert r.status_code == 200
    by_key = {q["queue_key"]: q for q in r.json()}
    assert set(by_key) == {"q1", "q2"}
    for metric in ("queue_depth", "oldest_job_age_seconds", "newest_job_age_seconds",
                   "active_leases", "expired_leases_total", "retryable_failures_total",
                   "terminal_failures_total", "throughput_success_per_minute",
                   "throughput_failure_per_minute", "failure_rate", "dead_letter_count",
                   "held_count", "worker_online_count", "worker_heartbeat_lag_seconds"):
        assert metric in by_key["q1"]
    assert by_key["q1"]["queue_depth"] == 2 and by_key["q2"]["queue_depth"] == 1

    r = svc.get("/queues/q1")
    assert r.status_code == 200 and r.json()["config"]["queue_key"] == "q1"
    assert r.json()["queue_depth"] == 2

    r = svc.get("/queues/q1/items", limit=10)
    body = r.json()
    assert r.status_code == 200 and body["total"] == 2
    assert [i["euid"] for i in body["items"]] == [b, a]
    first = body["items"][0]
    assert first["position"] == 1 and first["priority_class"] == "STAT"
    for name in ("priority", "due_at", "ready_at", "created_dt", "attempt_count", "state",
                 "revision"):
        assert name in first
    assert svc.get("/queues/q1/items", limit=1, offset=1).json()["items"][0]["euid"] == a
    assert svc.get("/queues/q1/items", site="nowhere").json()["total"] == 0

    r = svc.get(f"/subjects/{a}")
    assert r.status_code == 200
    assert r.json()["visible"] is True and r.json()["derived_state"] == "VISIBLE_IN_QUEUE"
    assert r.json()["state"] == "READY" and r.json()["revision"] == 1

    worker = register(svc, "reader-w")
    assert svc.get("/workers").json()[0]["worker_euid"] == worker
    r = svc.get(f"/workers/{worker}")
    assert r.status_code == 200 and r.json()["computed_status"] == "ONLINE"

    r = svc.act("claim", worker_euid=worker, queue_key="q1")
    lease = r.json()["lease_euid"]
    assert [x["lease_euid"] for x in svc.get("/leases", status="ACTIVE").json()] == [lease]
    assert svc.get("/leases", status="RELEASED").json() == []
    # how many match in all, beyond the page (limit) asked for
    other = register(svc, "reader-w2")
    r2 = svc.act("claim", worker_euid=other, queue_key="q1")
    assert r2.status_code == 200, r2.content
    page = svc.get("/leases", status="ACTIVE", limit="1")
    assert len(page.json()) == 1 and page["X-Total-Count"] == "2"
    assert svc.get("/leases", status="RELEASED")["X-Total-Count"] == "0"
    # so do the workers, a page at a time (a page past the end says none, not a wrong 0)
    workers = svc.get("/workers", limit="1")
    assert len(workers.json()) == 1 and workers["X-Total-Count"] == "2"
    assert svc.get("/workers", offset="1")["X-Total-Count"] == "2"
    assert "X-Total-Count" not in svc.get("/workers", offset="5")
    subject = svc.get(f"/subjects/{b}").json()
    assert subject["derived_state"] == "LEASED"
    assert [x["code"] for x in subject["reasons"]] == ["ACTIVE_LEASE"]
    assert subject["active_lease"]["lease_euid"] == lease

    hist = svc.get(f"/subjects/{b}/history").json()
    assert [x["lease_euid"] for x in hist["leases"]] == [lease]
    assert len(hist["records"]) == 1 and hist["records"][0]["status"] == "STARTED"
    assert [x["action_key"] for x in hist["actions"]] == ["claim_queue_item"]
    assert svc.get("/dead-letter").json() == []


def test_read_errors(q1, apis):
    svc = apis["operator"]
    for path in ("/queues/nope", "/queues/nope/items", "/subjects/Z-MX-0", "/subjects/X/history",
                 "/workers/Z-AX-0"):
        r = svc.get(path)
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", path
    for path, params in (("/leases", {"status": "BOGUS"}), ("/queues/q1/items", {"limit": 0}),
                         ("/dead-letter", {"resolution": "X"}), ("/leases", {"limit": 0})):
        r = svc.get(path, **params)
        assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", path


def test_why_not_reasons_in_subject(q1, apis):
    clock.freeze(clock.now())
    retry = make_subject("q1", state="FAILED_RETRYABLE", retry_at=clock.now().replace(year=2999))
    unrouted = make_subject(None)
    done = make_subject("q1", state="COMPLETED", terminal=True)
    codes = {e: [x["code"] for x in apis["admin"].get(f"/subjects/{e}").json()["reasons"]]
             for e in (retry, unrouted, done)}
    assert "RETRY_WINDOW_NOT_REACHED" in codes[retry]
    assert codes[unrouted] == ["NEXT_QUEUE_KEY_MISSING"]
    assert "TERMINAL_STATE" in codes[done]


# ------------------------------------------------------------------ actions: happy paths


def test_worker_lifecycle_claim_renew_complete(q1, apis):
    svc = apis["worker_service"]
    subject = make_subject("q1")
    r = svc.act("register-worker", worker_key="svc-1", display_name="Svc 1",
                worker_type="SERVICE", capabilities=["cap.a"], site_scope=[], platform_scope=[],
                assay_scope=[], max_concurrent_leases=2, heartbeat_ttl_seconds=30,
                build_version="abc", host="h", process_identity="pid-1")
    assert r.status_code == 200 and r.json()["created"] is True
    worker = r.json()["worker_euid"]
    again = svc.act("register-worker", worker_key="svc-1", capabilities=["cap.a"])
    assert again.json()["worker_euid"] == worker and again.json()["created"] is False
    r = svc.act("heartbeat-worker", worker_euid=worker, host="h2")
    assert r.status_code == 200 and r.json()["status"] == "ONLINE"

    r = svc.act("claim", worker_euid=worker)  # no queue_key: the engine picks (RULES.md#order)
    assert r.status_code == 200
    claim = r.json()
    assert claim["subject_euid"] == subject and claim["queue_key"] == "q1"
    assert claim["attempt_number"] == 1 and claim["expires_at"] and claim["execution_record_euid"]
    clock.advance(20)
    r = svc.act("renew-lease", worker_euid=worker, lease_euid=claim["lease_euid"])
    assert r.status_code == 200 and r.json()["expires_at"] > claim["expires_at"]

    r = svc.act("complete", subject_euid=subject, worker_euid=worker,
                lease_euid=claim["lease_euid"], expected_state="READY",
                expected_revision=claim["revision"], next_queue_key="q2",
                result_snapshot={"yield_ng": 12},
                outputs=[{"template_code": "content/material/extracted_sample/1.0",
                          "name": "Extract 1", "properties": {"site": "sfo"}}])
    assert r.status_code == 200, r.content
    done = r.json()
    assert done["state"] == "READY" and done["revision"] == claim["revision"] + 1
    assert done["execution_record_euid"] == claim["execution_record_euid"]
    assert len(done["output_euids"]) == 1
    assert svc.get(f"/subjects/{subject}").json()["queue_key"] == "q2"


def test_replay_returns_first_response_with_same_status(q1, apis):
    svc = apis["worker_service"]
    claim = claimed(svc)
    body = dict(subject_euid=claim["subject_euid"], worker_euid=claim["worker_euid"],
                lease_euid=claim["lease_euid"], expected_state="READY", retryable=True,
                error_class="TRANSIENT_SYSTEM", error_message="timeout",
                idempotency_key="fail-once")
    first = svc.act("fail", **body)
    before = counts()
    second = svc.act("fail", **body)
    assert first.status_code == second.status_code == 200
    a, b = first.json(), second.json()
    assert b.pop("replayed") is True and a.pop("replayed") is False
    assert a == b
    assert counts() == before
    # same key, other content: conflict, nothing written
    r = svc.act("fail", **{**body, "error_message": "other"})
    assert r.status_code == 409 and error_code(r) == "IDEMPOTENCY_CONFLICT"
    assert counts() == before


def test_fail_release_and_dead_letter(q1, apis):
    svc = apis["worker_service"]
    claim = claimed(svc)
    r = svc.act("release-lease", subject_euid=claim["subject_euid"],
                worker_euid=claim["worker_euid"], lease_euid=claim["lease_euid"],
                expected_state="READY", reason="shift end")
    assert r.status_code == 200 and r.json()["state"] == "READY"
    r = svc.act("claim", worker_euid=claim["worker_euid"], queue_key="q1")
    lease = r.json()["lease_euid"]
    r = svc.act("fail", subject_euid=claim["subject_euid"], worker_euid=claim["worker_euid"],
                lease_euid=lease, expected_state="READY", retryable=False,
                error_class="PERMANENT_INPUT", error_code="BAD_TUBE", error_message="cracked")
    assert r.status_code == 200 and r.json()["state"] == "FAILED_TERMINAL"
    dead = svc.get("/dead-letter").json()
    assert [d["subject_euid"] for d in dead] == [claim["subject_euid"]]
    assert dead[0]["error_class"] == "PERMANENT_INPUT"


def test_operator_hold_release_requeue_cancel(q1, apis):
    op = apis["operator"]
    subject = make_subject("q1")
    r = op.act("hold", subject_euid=subject, expected_state="READY", hold_code="SAMPLE_QUALITY",
               reason="contamination suspected")
    assert r.status_code == 200 and r.json()["state"] == "HELD"
    hold = r.json()["hold_euid"]
    assert op.get("/queues/q1").json()["held_count"] == 1
    r = op.act("release-hold", subject_euid=subject, expected_state="HELD", hold_euid=hold,
               reason="cleared")
    assert r.status_code == 200 and r.json()["state"] == "READY"
    r = op.act("requeue", subject_euid=subject, expected_state="READY", queue_key="q2",
               reason="reroute", priority="URGENT")
    assert r.status_code == 200 and r.json()["queue_key"] == "q2"
    r = op.act("cancel", subject_euid=subject, expected_state="READY", reason="withdrawn")
    assert r.status_code == 200 and r.json()["state"] == "CANCELED"


def test_admin_expire_lease_and_worker_status(q1, apis):
    claim = claimed(apis["worker_service"])
    adm = apis["admin"]
    r = adm.act("expire-lease", lease_euid=claim["lease_euid"], reason="stuck")
    assert r.status_code == 200 and r.json()["expired_lease_euids"] == [claim["lease_euid"]]
    r = adm.act("expire-lease")  # sweep with nothing to sweep
    assert r.status_code == 200 and r.json()["expired_count"] == 0
    r = adm.act("worker-status", worker_euid=claim["worker_euid"], operation="drain",
                reason="maintenance")
    assert r.status_code == 200 and r.json()["status"] == "DRAINING"


def test_external_result_callback(q1, apis):
    svc = apis["worker_service"]
    claim = claimed(svc)
    r = svc.act("complete", subject_euid=claim["subject_euid"], worker_euid=claim["worker_euid"],
                lease_euid=claim["lease_euid"], expected_state="READY",
                external={"pipeline": "wgs", "run_id": "r-1"})
    assert r.status_code == 200 and r.json()["state"] == "WAITING_EXTERNAL"
    r = svc.act("external-result", subject_euid=claim["subject_euid"],
                expected_state="WAITING_EXTERNAL", outcome="READY", next_queue_key="q2",
                outputs=[{"template_code": "data/analysis/artifact/1.0", "name": "bam"}])
    assert r.status_code == 200, r.content
    assert r.json()["state"] == "READY" and len(r.json()["output_euids"]) == 1


# ------------------------------------------------------------------ every error code


def test_validation_errors_are_400(q1, apis):
    svc = apis["worker_service"]
    cases = [
        svc.post("/actions/claim", {"worker_euid": "x"}),                     # no key
        svc.post("/actions/claim", {"idempotency_key": "", "worker_euid": "x"}),
        svc.act("claim", worker_euid="x", bogus_field=1),                      # unknown field
        svc.act("claim", worker_euid="x", expected_state="SLEEPING"),
        svc.act("claim", worker_euid="x", expected_revision="one"),
        svc.act("claim"),                                                       # engine check
        svc.act("register-worker"),                                             # worker_key
        svc.act("register-worker", worker_key="w", max_concurrent_leases=0),
        svc.act("fail", worker_euid="w", lease_euid="l", expected_state="READY"),
        svc.post("/actions/claim", "{not json"),
        svc.post("/actions/claim", "[1, 2]"),
    ]
    for r in cases:
        assert r.status_code == 400, r.content
        body = r.json()
        assert error_code(r) == "VALIDATION_ERROR"
        assert set(body["error"]) == {"code", "message", "details"}


def test_forbidden_is_403_and_writes_nothing(q1, apis):
    subject = make_subject("q1")
    before = counts()
    r = apis["worker_service"].act("hold", subject_euid=subject, expected_state="READY",
                                   reason="x")
    assert r.status_code == 403 and error_code(r) == "FORBIDDEN"
    r = apis["operator"].act("expire-lease")
    assert r.status_code == 403
    r = apis["worker_human"].act("register-worker", worker_key="h", worker_type="SERVICE")
    assert r.status_code == 403
    assert counts() == before


def test_not_found_is_404(q1, apis):
    op, svc = apis["operator"], apis["worker_service"]
    for r in (op.act("hold", subject_euid="Z-MX-0", expected_state="READY", reason="x"),
              svc.act("claim", worker_euid="Z-AX-0", queue_key="q1"),
              svc.act("claim", worker_euid=register(svc, "nf"), queue_key="nope"),
              svc.act("renew-lease", worker_euid="w", lease_euid="Z-EX-0")):
        assert r.status_code == 404 and error_code(r) == "NOT_FOUND", r.content


def test_conflicts_are_409(q1, apis, settings):
    settings.BLOOMOPS_HUMAN_CAPABILITIES = ["cap.a"]  # the lab's configuration for people
    svc, op, sci = apis["worker_service"], apis["operator"], apis["worker_human"]
    seen = {}

    def expect(code, r):
        assert r.status_code == 409 and error_code(r) == code, r.content
        seen[code] = True

    # NO_WORK: nothing visible
    worker = register(svc, "c-w")
    expect("NO_WORK", svc.act("claim", worker_euid=worker, queue_key="q1"))
    # STATE_CONFLICT / REVISION_CONFLICT
    subject = make_subject("q1")
    expect("STATE_CONFLICT", op.act("hold", subject_euid=subject, expected_state="RUNNING",
                                    reason="x"))
    expect("REVISION_CONFLICT", op.act("hold", subject_euid=subject, expected_state="READY",
                                       expected_revision=7, reason="x"))
    # MAX_LEASES_REACHED
    make_subject("q1")
    claim = svc.act("claim", worker_euid=worker, queue_key="q1").json()
    expect("MAX_LEASES_REACHED", svc.act("claim", worker_euid=worker, queue_key="q1"))
    # LEASE_NOT_OWNED: another worker's lease
    other = register(svc, "c-w2")
    expect("LEASE_NOT_OWNED", svc.act("renew-lease", worker_euid=other,
                                      lease_euid=claim["lease_euid"]))
    # LEASE_NOT_OWNED: a worker of another user
    svc2 = api_for(__import__("tests.conftest", fromlist=["make_user"]).make_user(
        "svc2", "worker_service"))
    expect("LEASE_NOT_OWNED", svc2.act("renew-lease", worker_euid=worker,
                                       lease_euid=claim["lease_euid"]))
    # LEASE_EXPIRED: renew / late completion after the TTL
    clock.advance(61)
    expect("LEASE_EXPIRED", svc.act("renew-lease", worker_euid=worker,
                                    lease_euid=claim["lease_euid"]))
    expect("LEASE_EXPIRED", svc.act("complete", subject_euid=claim["subject_euid"],
                                    worker_euid=worker, lease_euid=claim["lease_euid"],
                                    expected_state="READY"))
    # LEASE_NOT_ACTIVE: a released lease
    claim2 = svc.act("claim", worker_euid=worker, queue_key="q1").json()
    svc.act("release-lease", worker_euid=worker, lease_euid=claim2["lease_euid"],
            expected_state="READY")
    expect("LEASE_NOT_ACTIVE", svc.act("renew-lease", worker_euid=worker,
                                       lease_euid=claim2["lease_euid"]))
    # NOT_VISIBLE: a human claims a chosen subject that is not in its queue
    human = register(sci, "human", worker_type="HUMAN_SESSION")
    hidden = make_subject("q1", state="COMPLETED", terminal=True)
    expect("NOT_VISIBLE", sci.act("claim", worker_euid=human, subject_euid=hidden))
    # WORKER_NOT_ELIGIBLE: capabilities missing
    weak = register(svc, "weak", capabilities=[])
    expect("WORKER_NOT_ELIGIBLE", svc.act("claim", worker_euid=weak, queue_key="q1"))
    # WORKER_UNAVAILABLE: drained worker
    apis["admin"].act("worker-status", worker_euid=weak, operation="disable",
                      reason="no capabilities")
    expect("WORKER_UNAVAILABLE", svc.act("claim", worker_euid=weak, queue_key="q1"))
    # SUBJECT_HELD / HOLD_NOT_ACTIVE
    held = make_subject("q2")
    hold = op.act("hold", subject_euid=held, expected_state="READY", reason="x").json()
    expect("SUBJECT_HELD", op.act("requeue", subject_euid=held, expected_state="HELD",
                                  reason="y"))
    op.act("release-hold", subject_euid=held, expected_state="HELD", reason="w")
    held2 = make_subject("q2")
    op.act("hold", subject_euid=held2, expected_state="READY", reason="z")
    expect("HOLD_NOT_ACTIVE", op.act("release-hold", subject_euid=held2, expected_state="HELD",
                                     hold_euid=hold["hold_euid"], reason="w"))
    # QUEUE_DISABLED
    make_queue("off", enabled=False, required_worker_capabilities=[])
    expect("QUEUE_DISABLED", svc.act("claim", worker_euid=other, queue_key="off"))
    # IDEMPOTENCY_CONFLICT
    svc.act("heartbeat-worker", worker_euid=other, idempotency_key="hb-1")
    expect("IDEMPOTENCY_CONFLICT", svc.act("heartbeat-worker", worker_euid=other, host="x",
                                           idempotency_key="hb-1"))
    assert len(seen) == 14


def test_workers_and_dead_letters_are_read_a_page_at_a_time(q1, apis):
    """/workers returned every worker with its whole profile (1,200 workers: 99 MB) and
    /dead-letter every letter: both take limit and offset, as the other lists do."""
    svc = apis["worker_service"]
    for key in ("w-c", "w-a", "w-b"):
        register(svc, key)
    keys = [w["worker_key"] for w in svc.get("/workers").json()]
    assert keys == sorted(keys) and {"w-a", "w-b", "w-c"} <= set(keys)
    page = svc.get("/workers", limit=1, offset=1).json()
    assert [w["worker_key"] for w in page] == keys[1:2]
    assert svc.get("/workers", limit=1001).status_code == 400
    from tests.approval_support import dead_lettered

    make_queue("dl")
    letters = {dead_lettered("dl"), dead_lettered("dl")}
    every = [d["subject_euid"] for d in svc.get("/dead-letter").json()]
    assert set(every) == letters  # newest first
    page = svc.get("/dead-letter", limit=1, offset=1)
    assert [d["subject_euid"] for d in page.json()] == every[1:2]
    # a LIMS paging through them is told how many there are in all
    assert page["X-Total-Count"] == "2"
    assert svc.get("/dead-letter", queue_key="none")["X-Total-Count"] == "0"
    assert "X-Total-Count" not in svc.get("/dead-letter", offset=5)  # past the end: unknown
    assert svc.get("/dead-letter", limit=0).status_code == 400


def test_a_workers_lists_are_bounded(q1, apis):
    """A capability list of 2,900 entries (a 64 KB profile) was stored as sent."""
    svc = apis["worker_service"]
    before = counts()
    for caps in ([f"cap.{i}" for i in range(101)], ["c" * 201]):
        r = svc.act("register-worker", worker_key="w-big", capabilities=caps)
        assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert counts() == before
