"""The queue configuration API: the four actions in the same request/response style as the
others, a stale revision refused with nothing written, and the history read
(docs/API.md, docs/RULES.md#queue-configuration)."""

from __future__ import annotations

import pytest

from bloomops.execution.actions.queues import open_queue_warning
from tests.api_helpers import api_for, error_code
from tests.conftest import make_user
from tests.engine import counts

pytestmark = pytest.mark.django_db
SPECIMEN = "content/material/specimen/1.0"
LIBRARY = "content/material/library/1.0"


def test_a_queue_through_the_api(tenant, users):
    api = api_for(users["admin"])
    r = api.act("create-queue", queue_key="api_q", subject_template_codes=[SPECIMEN],
                reason="new", retry_policy={"initial_delay_seconds": 30})
    assert r.status_code == 200, r.content
    assert r.json()["revision"] == 1 and r.json()["queue_key"] == "api_q"
    r = api.act("update-queue", queue_key="api_q", expected_revision=1,
                lease_ttl_seconds=1200, reason="slower")
    assert r.status_code == 200 and r.json()["changes"] == {"lease_ttl_seconds": [900, 1200]}
    before = counts()
    stale = api.act("update-queue", queue_key="api_q", expected_revision=1,
                    lease_ttl_seconds=60, reason="stale")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "REVISION_CONFLICT"
    fixed = api.act("update-queue", queue_key="api_q", expected_revision=2,
                    subject_template_codes=[LIBRARY], reason="x")
    assert fixed.status_code == 409
    assert fixed.json()["error"]["code"] == "REPLACEMENT_REQUIRED"
    bad = api.act("create-queue", queue_key="Bad Key", subject_template_codes=[SPECIMEN],
                  reason="x")
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "queue_key"
    assert counts() == before
    r = api.act("set-queue-enabled", queue_key="api_q", expected_revision=2, enabled=False,
                reason="maintenance")
    assert r.status_code == 200 and r.json()["revision"] == 3
    detail = api.get("/queues/api_q").json()
    assert detail["enabled"] is False and detail["config"]["disabled_reason"] == "maintenance"
    r = api.act("replace-queue", queue_key="api_q", expected_revision=3,
                subject_template_codes=[SPECIMEN, LIBRARY], reason="libraries too")
    assert r.status_code == 200 and r.json()["retired_queue_euid"]
    history = api.get("/queues/api_q/history").json()
    assert [c["action_key"] for c in history["changes"]] == [
        "replace_queue", "set_queue_enabled", "update_queue", "create_queue"]
    assert history["changes"][2]["executed_by"] == "adm"
    assert history["changes"][2]["reason"] == "slower"
    assert history["changes"][2]["changes"] == {"lease_ttl_seconds": [900, 1200]}
    # The create's record says every setting the queue started with, defaults included.
    started = history["changes"][3]["changes"]
    assert started["lease_ttl_seconds"] == [None, 900] and started["enabled"] == [None, True]
    assert started["subject_template_codes"] == [None, [SPECIMEN]]
    assert started["retry_policy"][1]["initial_delay_seconds"] == 30
    assert started["max_attempts_default"][1] >= 1 and "manual_only" in started
    assert api.get("/queues/nope/history").status_code == 404


def test_the_same_key_on_another_queue_is_a_conflict_not_a_second_queue(tenant, users):
    """A key names one request of its caller (RULES.md#idempotency): sent again for another
    queue, it would have made a second queue under one key."""
    api = api_for(users["admin"])
    r = api.act("create-queue", idempotency_key="same", queue_key="one",
                subject_template_codes=[SPECIMEN], reason="new")
    assert r.status_code == 200 and r.json()["replayed"] is False
    r = api.act("create-queue", idempotency_key="same", queue_key="two",
                subject_template_codes=[SPECIMEN], reason="new")
    assert r.status_code == 409 and error_code(r) == "IDEMPOTENCY_CONFLICT"
    assert api.get("/queues/two").status_code == 404
    # another admin's "same" is theirs
    other = api_for(make_user("adm2", "admin"))
    r = other.act("create-queue", idempotency_key="same", queue_key="two",
                  subject_template_codes=[SPECIMEN], reason="new")
    assert r.status_code == 200 and r.json()["replayed"] is False


def test_a_flow_to_a_queue_no_one_has_made_is_saved_with_a_warning_the_caller_reads(
        tenant, users):
    """The console's preview warned of a misspelt next queue; the API saved it without a
    word, and every completion there was refused later."""
    api = api_for(users["admin"])
    api.act("create-queue", queue_key="flow_a", subject_template_codes=[SPECIMEN], reason="n")
    r = api.act("update-queue", queue_key="flow_a", expected_revision=1,
                default_next_queue_key="flow_bb", reason="typo")
    assert r.status_code == 200
    assert r.json()["warnings"] == [
        "No queue flow_bb exists yet: completions sent there are refused until it does."
        " Check the spelling."]
    r = api.act("create-queue", queue_key="flow_c", subject_template_codes=[SPECIMEN],
                next_queue_keys=["flow_a", "nowhere"], reason="n",
                required_worker_capabilities=["wetlab.qc"])
    assert r.status_code == 200 and len(r.json()["warnings"]) == 1
    assert "nowhere" in r.json()["warnings"][0]
    # a change that leaves the flow alone says nothing of it
    r = api.act("update-queue", queue_key="flow_a", expected_revision=2,
                lease_ttl_seconds=1200, reason="slower")
    assert r.status_code == 200 and not r.json().get("warnings")


@pytest.mark.parametrize(("fields", "where"), [
    ([{"key": "rin", "kind": "float"}], "kind"),
    ([{"key": "RIN"}], "key"),
    ([{"key": "rin", "colour": "red"}], "colour"),
    ([{"key": "grade", "kind": "choice", "choices": ["A"]}], "choices"),
    ([{"key": "rin", "min": "1"}], "min"),
])
def test_result_fields_the_schema_cannot_hold_are_refused_by_the_api(tenant, users, fields,
                                                                     where):
    """docs/RULES.md#results: what a step records is declared through the API too, and a
    definition the engine could not hold a result to is a 400 naming it, nothing written."""
    api = api_for(users["admin"])
    before = counts()
    r = api.act("create-queue", queue_key="api_r", subject_template_codes=[SPECIMEN],
                reason="new", result_fields=fields)
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert r.json()["error"]["details"]["field"] == f"result_fields.0.{where}"
    assert counts() == before


def test_a_queue_declares_its_results_through_the_api(tenant, users):
    api = api_for(users["admin"])
    r = api.act("create-queue", queue_key="api_r", subject_template_codes=[SPECIMEN],
                reason="new", result_fields=[
                    {"key": "rin", "label": "RIN", "min": 1, "max": 10, "required": True},
                    {"key": "grade", "kind": "choice", "choices": ["A", "B"]}])
    assert r.status_code == 200, r.content
    stored = api.get("/queues/api_r").json()["config"]["result_fields"]
    assert [f["key"] for f in stored] == ["rin", "grade"] and stored[0]["required"] is True


def test_a_queue_opened_to_every_worker_is_said_to_the_caller(tenant, users):
    """A queue made through the API (or a file) without capabilities was open to every
    worker: the lab's robots claimed its items one after another, gave each back and
    stopped; the console's form asks it explicitly, the API said nothing."""
    api = api_for(users["admin"])

    def said(r) -> list[str]:
        assert r.status_code == 200, r.content
        return [w for w in r.json().get("warnings") or [] if "every worker may take" in w]

    assert said(api.act("create-queue", queue_key="open_a", subject_template_codes=[SPECIMEN],
                        reason="n")) == open_queue_warning(None, {})
    assert said(api.act("create-queue", queue_key="bench_b", subject_template_codes=[SPECIMEN],
                        manual_only=True, reason="people only")) == []
    assert said(api.act("create-queue", queue_key="robot_c", subject_template_codes=[SPECIMEN],
                        required_worker_capabilities=["wetlab.qc"], reason="n")) == []
    # a change that opens it says so; one that leaves it open does not say it again
    assert said(api.act("update-queue", queue_key="robot_c", expected_revision=1,
                        required_worker_capabilities=[], reason="open")) != []
    assert said(api.act("update-queue", queue_key="robot_c", expected_revision=2,
                        lease_ttl_seconds=1200, reason="slower")) == []


def test_replacing_an_open_queue_does_not_say_it_was_opened(tenant, users):
    """A replacement of a queue already open to every worker warned that it had been
    opened, as a new queue is; apply_queues said nothing of the same step."""
    api = api_for(users["admin"])
    api.act("create-queue", queue_key="open_r", subject_template_codes=[SPECIMEN], reason="n")
    r = api.act("replace-queue", queue_key="open_r", expected_revision=1,
                new_queue_key="open_r2", subject_template_codes=[SPECIMEN], reason="renamed")
    assert r.status_code == 200, r.content
    assert not [w for w in r.json().get("warnings") or [] if "every worker may take" in w]
