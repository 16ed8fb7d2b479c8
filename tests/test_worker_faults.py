"""The worker runtime outlives faults, in-process: a handler's unexpected
exception fails that item and the worker goes on; an API that times out, answers 5xx or
answers HTML is waited out, and a request whose answer was lost is replayed, never repeated.
Real processes and a real database restart: tests/test_worker_recovery.py."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.worker.handling import HandlerSet, Job, Outcome, TerminalError
from bloomops.worker.runtime import WorkerRuntime
from bloomops.worker.transport import DirectTransport, HttpTransport, TransportError
from tests.api_helpers import api_for
from tests.engine import envelope, make_queue, make_subject
from tests.worker_support import client_transport, history

pytestmark = pytest.mark.django_db
ACTION = "create_extraction"


class Bench(HandlerSet):
    """A handler that trips over one sample the way real code does (a missing value)."""

    CAPABILITIES = ["wetlab.extraction"]
    HANDLERS = {ACTION: "extract"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.turns_after_work: int | None = None  # set: stop after that many more turns

    def extract(self, job: Job) -> Outcome:
        if job.subject["name"] == "no-lot":
            raise ValueError("reagent lot missing")
        if job.subject["name"] == "misrouted":
            return Outcome(next_queue_key="no-such-queue")
        if job.subject["name"] == "unsaid":
            raise TerminalError("  ")
        if job.subject["name"] == "invisible":
            raise TerminalError("\u200b")
        if job.subject["name"] == "long-winded":
            raise TerminalError("x" * 5000)
        if job.subject["name"] == "coloured":
            raise TerminalError("\x1b[31mlot 7 expired\x1b[0m")
        return Outcome(result_snapshot={"domain_state": "extracted"})

    def poll(self, runtime: WorkerRuntime) -> None:
        if self.turns_after_work is not None and runtime.stats.completed:
            self.turns_after_work -= 1
            if self.turns_after_work < 0:
                runtime.request_stop()


@pytest.fixture
def bench_queue(tenant, users):
    make_queue("fq", required_worker_capabilities=["wetlab.extraction"],
               default_next_action_key=ACTION)
    return users


def run(transport, key: str = "fault-w", handlers: Bench | None = None) -> WorkerRuntime:
    runtime = WorkerRuntime(transport, handlers or Bench(), worker_key=key,
                            exit_when_idle=True, poll_min=0.0, fault_min=0.0)
    runtime.run()
    return runtime


def test_handler_exception_fails_the_item_and_the_worker_completes_the_next(bench_queue):
    bad = make_subject("fq", name="no-lot", priority=300, next_action_key=ACTION)
    good = make_subject("fq", name="fine", next_action_key=ACTION)
    runtime = run(DirectTransport("svc"))

    assert (runtime.stats.claimed, runtime.stats.failed, runtime.stats.completed) == (2, 1, 1)
    env = envelope(bad)
    assert env["state"] == "FAILED_RETRYABLE" and env["attempt_count"] == 1
    (record,) = history(bad)["records"]
    assert record["props"]["status"] == "FAILED_RETRYABLE"
    assert record["props"]["error_class"] == "TRANSIENT_SYSTEM"
    assert record["props"]["error_message"] == "ValueError: reagent lot missing"
    assert envelope(good)["state"] == "COMPLETED"
    (worker,) = selectors.workers()  # the same worker did both, and signed off
    assert worker.props["status"] == "OFFLINE"


def test_refused_result_fails_the_item_and_frees_the_lease(bench_queue):
    """A completion the engine refuses (here: a next queue that does not exist) must not
    leave the lease held until its TTL: the attempt ends as a failure operators can see,
    and the worker (one lease at a time) goes on to the next item."""
    misrouted = make_subject("fq", name="misrouted", priority=300, next_action_key=ACTION)
    good = make_subject("fq", name="fine", next_action_key=ACTION)
    runtime = run(DirectTransport("svc"))

    assert (runtime.stats.failed, runtime.stats.completed, runtime.stats.lost) == (1, 1, 0)
    assert envelope(misrouted)["state"] == "FAILED_TERMINAL"
    (record,) = history(misrouted)["records"]
    assert record["props"]["error_class"] == "PERMANENT_INPUT"
    assert record["props"]["error_code"] == "RESULT_REFUSED"
    assert record["props"]["error_message"].startswith("Result refused: ")
    assert "no-such-queue" in record["props"]["error_message"]
    assert envelope(good)["state"] == "COMPLETED"
    assert selectors.leases(status="ACTIVE") == []


def test_a_failure_raised_without_a_message_still_ends_the_item(bench_queue):
    """The engine refuses a failure that ends the item without saying why; a handler that
    raised one with no message would have left its lease held until its TTL. The record
    says the handler gave none."""
    unsaid = make_subject("fq", name="unsaid", next_action_key=ACTION)
    invisible = make_subject("fq", name="invisible", next_action_key=ACTION)
    long_winded = make_subject("fq", name="long-winded", next_action_key=ACTION)
    coloured = make_subject("fq", name="coloured", next_action_key=ACTION)
    runtime = run(DirectTransport("svc"))
    assert (runtime.stats.failed, runtime.stats.lost) == (4, 0)
    for euid in (unsaid, invisible):  # a message that shows nothing is none
        assert envelope(euid)["state"] == "FAILED_TERMINAL"
        (record,) = history(euid)["records"]
        assert record["props"]["error_message"] == "PERMANENT_INPUT: the handler gave no message"
    (record,) = history(long_winded)["records"]  # too long: cut, not refused
    assert record["props"]["error_message"] == "x" * 4000
    # a terminal colour code the engine refuses is written out, not the failure lost
    (record,) = history(coloured)["records"]
    assert record["props"]["error_message"] == "\\x1b[31mlot 7 expired\\x1b[0m"


def test_malformed_envelope_does_not_stop_the_worker(bench_queue):
    """A subject whose envelope another writer broke (raw SQL) never completes, and the
    worker neither crashes nor stops working: it completes the good item, keeps turning,
    and signs off when asked."""
    good = make_subject("fq", name="fine", priority=300, next_action_key=ACTION)
    poisoned = make_subject("fq", name="fine", next_action_key=ACTION)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
            " '{properties,execution,attempt_count}', '\"x\"') WHERE euid = %s", [poisoned])
    handlers = Bench()
    handlers.turns_after_work = 10
    runtime = WorkerRuntime(DirectTransport("svc"), handlers, worker_key="poisoned-w",
                            poll_min=0.0, fault_min=0.0)
    runtime.run()  # returns: the handler's poll asked it to stop after ten more turns

    assert handlers.turns_after_work < 0
    assert runtime.stats.completed == 1 and envelope(good)["state"] == "COMPLETED"
    with connection.cursor() as cursor:  # untouched: never claimed, failed or "repaired"
        cursor.execute("SELECT json_addl->'properties'->'execution' FROM generic_instance"
                       " WHERE euid = %s", [poisoned])
        (raw,) = cursor.fetchone()
    raw = json.loads(raw) if isinstance(raw, str) else raw
    assert (raw["state"], raw["attempt_count"]) == ("READY", "x")
    assert selectors.leases(status="ACTIVE") == []
    (worker,) = selectors.workers()
    assert worker.props["status"] == "OFFLINE"


class LossyNetwork:
    """Between the worker and the real API (Django's test client): the first request to
    each listed path fails in the given way. "lost" delivers the request, then loses the
    answer (a timeout), so a retry must not do the work twice."""

    def __init__(self, send, faults: dict[str, str]) -> None:
        self.send, self.faults = send, dict(faults)
        self.injected: list[str] = []

    def __call__(self, method, url, body, headers):
        path = next((p for p in self.faults if url.endswith(p)), None)
        kind = self.faults.pop(path, None) if path else None
        if kind is None:
            return self.send(method, url, body, headers)
        self.injected.append(f"{kind} {path}")
        if kind == "refused":
            raise TransportError(f"{url}: connection refused")
        status, raw = self.send(method, url, body, headers)
        if kind == "lost":
            raise TimeoutError("timed out")
        if kind == "bad-gateway":
            return 502, b"<html><body>502 Bad Gateway</body></html>"
        if kind == "html":
            return 200, b"<html>maintenance</html>"
        raise AssertionError(kind)


def test_api_faults_are_waited_out_and_lost_answers_replayed(bench_queue):
    subject = make_subject("fq", name="fine", next_action_key=ACTION)
    transport = client_transport(api_for(bench_queue["worker_service"]).token)
    network = LossyNetwork(transport.send, {
        "/register-worker": "refused", "/claim": "lost", f"/subjects/{subject}": "html",
        "/queues/fq": "bad-gateway", "/complete": "lost"})
    transport.send = network
    runtime = run(transport)

    assert len(network.injected) == 5 and runtime.stats.faults == 5
    assert runtime.stats.completed == 1 and runtime.stats.lost == 0
    assert envelope(subject)["state"] == "COMPLETED"
    # the lost claim and the lost completion were replayed: one lease, one record
    (lease,) = selectors.leases()
    assert lease["subject_euid"] == subject and lease["effective_status"] == "COMPLETED"
    (record,) = history(subject)["records"]
    assert record["props"]["status"] == "SUCCEEDED"
    assert len(selectors.workers()) == 1


def test_api_refusal_is_not_a_fault(bench_queue):
    """A 4xx with the API's error body is an answer: raised as ActionError, never retried."""
    transport = client_transport("not-a-token")
    with pytest.raises(ActionError) as refused:
        run(transport)
    assert refused.value.code == "UNAUTHENTICATED"


@pytest.mark.parametrize("status,body", [(500, b'{"error": {"code": "VALIDATION_ERROR"}}'),
                                         (503, b""), (429, b"{}"), (404, b"<html>404</html>"),
                                         (200, b"[1, 2]")])
def test_http_answers_that_are_not_the_apis_are_transport_errors(status, body):
    transport = HttpTransport("http://bloomops.invalid", "t",
                              send=lambda *_: (status, body))
    with pytest.raises(TransportError):
        transport.queue("fq")


@pytest.mark.parametrize("given", ["http://lab.example:8000", "http://lab.example:8000/",
                                   "http://lab.example:8000/api/v1/execution/",
                                   "http://lab.example:8000/api/v1"])
def test_the_api_url_is_the_server_or_the_apis_base_path(given):
    """docs/API.md gives /api/v1/execution/ as the base path; given to --api-url it was
    doubled (.../api/v1/execution/api/v1/execution/actions/...) and every call was 404."""
    sent = []
    transport = HttpTransport(given, "t", send=lambda method, url, *_: (
        sent.append(url) or (200, b'{"items": []}')))
    transport.queue("fq")
    assert sent and sent[0].startswith("http://lab.example:8000/api/v1/execution/queues/fq")
