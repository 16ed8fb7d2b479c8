"""Queue configuration through actions (docs/RULES.md#queue-configuration): create, update
at a revision, disable in place, replace with history kept, strict order."""

from __future__ import annotations

import pytest

from bloomops.execution import selectors
from bloomops.execution.errors import ActionError
from bloomops.tapdb.db import fetch_one
from tests.engine import (
    SERVICE,
    SPECIMEN,
    act,
    actor,
    claim,
    make_queue,
    make_subject,
    refused,
    register,
)
from tests.test_engine_concurrency import _run_threads

pytestmark = pytest.mark.django_db
LIBRARY = "content/material/library/1.0"


def create(admin, key="cfg", **fields):
    fields.setdefault("subject_template_codes", [SPECIMEN])
    fields.setdefault("reason", "new line")
    return act("create_queue", admin, queue_key=key, payload=fields)


def config(key):
    row = selectors.queue_config(key)
    return row["config"] if row else None


def test_create_queue_sets_every_field_and_marks_it_ours(tenant):
    admin = actor("admin")
    r = create(admin, display_name="Extraction", lease_ttl_seconds=600,
               eligible_states=["READY"], required_worker_capabilities=["wetlab.x"],
               retry_policy={"initial_delay_seconds": 30}, strict_order=True)
    cfg = config("cfg")
    assert r["queue_key"] == "cfg" and r["revision"] == 1 and cfg["revision"] == 1
    assert cfg["managed_by"] == "bloomops" and cfg["display_name"] == "Extraction"
    assert cfg["lease_ttl_seconds"] == 600 and cfg["eligible_states"] == ["READY"]
    assert cfg["strict_order"] is True
    # A partial retry policy keeps the template's other numbers.
    assert cfg["retry_policy"]["initial_delay_seconds"] == 30
    assert cfg["retry_policy"]["max_delay_seconds"] == 3600
    assert cfg["subject_template_codes"] == [SPECIMEN]
    # The queue serves at once: a subject routed to it is visible.
    make_subject("cfg")
    assert selectors.queue_depths()["cfg"] == 1


@pytest.mark.parametrize(("fields", "field"), [
    ({"subject_template_codes": ["content/material/unicorn/1.0"]}, "subject_template_codes"),
    ({"subject_template_codes": ["data/execution/queue/1.0"]}, "subject_template_codes"),
    ({"subject_template_codes": []}, "subject_template_codes"),
    ({"eligible_states": ["READY", "DONE"]}, "eligible_states"),
    ({"eligible_states": ["READY", "WAITING_EXTERNAL"]}, "eligible_states"),
    ({"eligible_states": ["RUNNING"]}, "eligible_states"),
    ({"lease_ttl_seconds": 5}, "lease_ttl_seconds"),
    ({"max_attempts_default": 0}, "max_attempts_default"),
    ({"dispatch_priority": 5000}, "dispatch_priority"),
    ({"retry_policy": {"backoff_factor": 50}}, "retry_policy.backoff_factor"),
    ({"retry_policy": {"initial_delay_seconds": 600, "max_delay_seconds": 60}},
     "retry_policy.max_delay_seconds"),
    ({"retry_policy": {"mode": "LINEAR"}}, "retry_policy.mode"),
    ({"manual_only": "yes"}, "manual_only"),
    ({"reason": " "}, "reason"),
    # one spelling matches no subject; "any" is a site called so (an empty scope is any)
    ({"site_scope": ["SFO", "sfo"]}, "site_scope"),
    ({"assay_scope": ["All"]}, "assay_scope"),
    ({"required_worker_capabilities": ["wetlab.QC", "wetlab.qc"]},
     "required_worker_capabilities"),
])
def test_create_queue_refuses_bad_fields(tenant, fields, field):
    err = refused("VALIDATION_ERROR", lambda: create(actor("admin"), **fields))
    assert err.details["field"] == field


def test_create_queue_refuses_a_bad_key_and_a_taken_key(tenant):
    admin = actor("admin")
    refused("VALIDATION_ERROR", lambda: create(admin, key="Has Space"))
    create(admin)
    refused("QUEUE_EXISTS", lambda: create(admin))


def test_only_admins_configure_queues(tenant):
    for role in ("operator", "worker_service", "worker_human"):
        refused("FORBIDDEN", lambda role=role: create(actor(role)))


def test_update_queue_changes_mutable_fields_at_the_revision_seen(tenant):
    admin = actor("admin")
    create(admin)
    r = act("update_queue", admin, queue_key="cfg", expected_revision=1,
            payload={"lease_ttl_seconds": 1200, "display_name": "Renamed", "reason": "slower"})
    assert r["revision"] == 2
    assert r["changes"] == {"lease_ttl_seconds": [900, 1200],
                            "display_name": ["cfg", "Renamed"]}
    assert config("cfg")["lease_ttl_seconds"] == 1200
    # A stale page (revision 1) is refused, nothing written.
    refused("REVISION_CONFLICT", lambda: act(
        "update_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"lease_ttl_seconds": 60, "reason": "x"}))
    history = selectors.queue_history("cfg")
    assert [h.action_key for h in history] == ["update_queue", "create_queue"]
    assert history[0].executed_by == "admin" and history[0].reason == "slower"
    assert history[0].changes["lease_ttl_seconds"] == [900, 1200]


def test_update_queue_refuses_fixed_fields_and_others_queues(tenant):
    admin = actor("admin")
    create(admin)
    err = refused("REPLACEMENT_REQUIRED", lambda: act(
        "update_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"subject_template_codes": [LIBRARY], "reason": "x"}))
    assert err.details["use"] == "replace_queue"
    refused("REPLACEMENT_REQUIRED", lambda: act(
        "update_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "other", "reason": "x"}))
    refused("VALIDATION_ERROR", lambda: act(
        "update_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"lease_ttl_seconds": 900, "reason": "nothing changes"}))
    refused("VALIDATION_ERROR", lambda: act(
        "update_queue", admin, queue_key="cfg", payload={"lease_ttl_seconds": 60,
                                                          "reason": "no revision"}))
    refused("NOT_FOUND", lambda: act(
        "update_queue", admin, queue_key="nope", expected_revision=1,
        payload={"lease_ttl_seconds": 60, "reason": "x"}))
    # A queue bloomops did not create (Bloom's, on a shared database) is left alone.
    make_queue("bloom_default")
    for action, payload in (("update_queue", {"lease_ttl_seconds": 60}),
                            ("set_queue_enabled", {"enabled": False}),
                            ("replace_queue", {"subject_template_codes": [LIBRARY]})):
        refused("QUEUE_NOT_MANAGED", lambda a=action, p=payload: act(
            a, admin, queue_key="bloom_default", expected_revision=1,
            payload={**p, "reason": "x"}))


@pytest.mark.usefixtures("committed")
def test_two_admins_editing_at_once_the_second_is_refused(tenant):
    admin = actor("admin")
    create(admin)

    def edit(i: int):
        return act("update_queue", admin, queue_key="cfg", expected_revision=1,
                   payload={"lease_ttl_seconds": 600 + i * 60, "reason": f"editor {i}"})

    outcomes = _run_threads(edit, 2)
    wins = [o for o in outcomes if not isinstance(o, Exception)]
    losses = [o for o in outcomes if isinstance(o, Exception)]
    assert len(wins) == 1 and len(losses) == 1
    assert isinstance(losses[0], ActionError) and losses[0].code == "REVISION_CONFLICT"
    cfg = config("cfg")
    assert cfg["revision"] == 2 and cfg["lease_ttl_seconds"] == wins[0]["changes"][
        "lease_ttl_seconds"][1]


def test_disable_in_place_with_a_reason_then_enable(tenant):
    admin, svc = actor("admin"), actor(*SERVICE)
    create(admin)
    make_subject("cfg")
    r = act("set_queue_enabled", admin, queue_key="cfg", expected_revision=1,
            payload={"enabled": False, "reason": "centrifuge broken"})
    assert r["revision"] == 2
    cfg = config("cfg")
    assert cfg["enabled"] is False and cfg["disabled_reason"] == "centrifuge broken"
    worker = register(svc)
    refused("QUEUE_DISABLED", lambda: claim(svc, worker, "cfg"))
    refused("VALIDATION_ERROR", lambda: act(
        "set_queue_enabled", admin, queue_key="cfg", expected_revision=2,
        payload={"enabled": False, "reason": "again"}))
    act("set_queue_enabled", admin, queue_key="cfg", expected_revision=2,
        payload={"enabled": True, "reason": "fixed"})
    assert config("cfg")["disabled_reason"] is None
    assert claim(svc, worker, "cfg")["queue_key"] == "cfg"


def test_replace_queue_keeps_history_and_lineage(tenant):
    admin, svc = actor("admin"), actor(*SERVICE)
    create(admin, lease_ttl_seconds=600)
    subject = make_subject("cfg")
    worker = register(svc)
    lease = claim(svc, worker, "cfg")
    act("release_queue_lease", svc, lease_euid=lease["lease_euid"], worker_euid=worker,
        expected_state="READY", payload={"reason": "back"})
    old = selectors.queue_config("cfg")
    r = act("replace_queue", admin, queue_key="cfg", expected_revision=1,
            payload={"subject_template_codes": [SPECIMEN, LIBRARY], "reason": "libraries too"})
    new = selectors.queue_config("cfg")
    assert new["euid"] == r["queue_euid"] != old["euid"] == r["retired_queue_euid"]
    # The successor keeps its predecessor's settings and takes the new templates.
    # its revision goes on from its predecessor's (a page shown before is stale)
    assert new["config"]["lease_ttl_seconds"] == 600 and new["config"]["revision"] == 2
    assert new["config"]["subject_template_codes"] == [SPECIMEN, LIBRARY]
    assert new["config"]["replaces_euid"] == old["euid"]
    assert new["config"]["enabled"] is True and new["config"]["disabled_reason"] is None
    assert r["changes"] == {"subject_template_codes": [[SPECIMEN], [SPECIMEN, LIBRARY]]}
    # The old object stays in TapDB, retired, linked to its successor by lineage, with its
    # lease still hanging from it.
    row = fetch_one("SELECT is_deleted, json_addl->'properties' AS p FROM generic_instance"
                    " WHERE euid = %s", [old["euid"]])
    assert row["is_deleted"] and row["p"]["replaced_by_euid"] == new["euid"]
    assert row["p"]["retired_by"] == "admin" and row["p"]["enabled"] is False
    assert row["p"]["revision"] == 2
    edge = fetch_one("SELECT 1 AS x FROM generic_instance_lineage WHERE parent_instance_uid = %s"
                     " AND child_instance_uid = %s AND relationship_type ="
                     " 'execution_queue_successor'", [old["uid"], new["uid"]])
    assert edge
    assert fetch_one("SELECT 1 AS x FROM generic_instance_lineage WHERE parent_instance_uid = %s"
                     " AND relationship_type = 'execution_queue_lease'", [old["uid"]])
    # Routed subjects stay routed and are served by the successor; their history is intact.
    assert selectors.queue_depths()["cfg"] == 1
    assert selectors.subject_history(
        selectors.subject_diagnostics(subject).uid)["leases"]
    # One history across both objects, newest first.
    assert [h.action_key for h in selectors.queue_history("cfg")] == [
        "replace_queue", "create_queue"]
    # A page shown before the replacement is stale: a form saved from it (an update, or a
    # second replacement) would silently undo what the replacement did.
    for action, payload in (("update_queue", {"lease_ttl_seconds": 60, "reason": "x"}),
                            ("replace_queue", {"subject_template_codes": [SPECIMEN],
                                               "reason": "x"})):
        refused("REVISION_CONFLICT", lambda a=action, p=payload: act(
            a, admin, queue_key="cfg", expected_revision=1, payload=p))
    # nothing to change is refused, not a new identical queue
    refused("VALIDATION_ERROR", lambda: act(
        "replace_queue", admin, queue_key="cfg", expected_revision=2,
        payload={"subject_template_codes": [LIBRARY, SPECIMEN], "reason": "again"}))


def test_replace_queue_under_a_new_key(tenant):
    admin = actor("admin")
    create(admin)
    create(admin, key="taken")
    refused("QUEUE_EXISTS", lambda: act(
        "replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "taken", "subject_template_codes": [LIBRARY],
                 "reason": "x"}))
    act("replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "subject_template_codes": [LIBRARY],
                 "reason": "renamed"})
    assert config("cfg") is None and config("cfg2")["replaces_queue_key"] == "cfg"
    assert [h.action_key for h in selectors.queue_history("cfg2")] == [
        "replace_queue", "create_queue"]


def test_a_new_key_is_refused_while_it_would_strand_items_or_a_flow(tenant):
    """Replaced under a new key, a queue left its 8 items routed to a key no queue had (not
    even on the workbench) and the queue before it sending items nowhere."""
    admin = actor("admin")
    create(admin)
    create(admin, key="before", default_next_queue_key="cfg")
    subject = make_subject("cfg", name="waiting")
    err = refused("QUEUE_IN_USE", lambda: act(
        "replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "subject_template_codes": [SPECIMEN],
                 "reason": "renamed"}))
    assert err.details["routed"] == 1 and err.details["sent_from"] == ["before"]
    assert "1 item is routed to cfg" in err.message
    assert "queue before sends items to it" in err.message
    # the same key is no rename: the items and the flow go to the successor
    act("replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"subject_template_codes": [SPECIMEN, LIBRARY], "reason": "libraries too"})
    assert selectors.queue_depths()["cfg"] == 1 and config("cfg")["revision"] == 2
    assert subject in {i.euid for i in selectors.queue_items("cfg")[0]}


def test_strict_order_claims_only_the_head(tenant):
    admin, svc = actor("admin"), actor(*SERVICE)
    human = actor("worker_human", username="sci")
    create(admin, strict_order=True)
    first = make_subject("cfg", priority=10, name="first")
    second = make_subject("cfg", priority=0, name="second")
    person = register(human, worker_type="HUMAN_SESSION")
    err = refused("QUEUE_HEAD_MISMATCH", lambda: act(
        "claim_queue_item", human, worker_euid=person, subject_euid=second))
    assert err.details["head_euid"] == first
    # the head is named in the words too: the person at the bench goes and finds it
    assert err.message == ("This queue runs work strictly in order: only the item at its"
                           f" head, first ({first}), may be claimed now.")
    instrument = register(svc, worker_type="INSTRUMENT_ADAPTER")
    refused("QUEUE_HEAD_MISMATCH", lambda: act(
        "claim_queue_item", svc, worker_euid=instrument, subject_euid=second))
    lease = act("claim_queue_item", svc, worker_euid=instrument, subject_euid=first)
    assert lease["subject_euid"] == first
    # The next item is now the head.
    assert act("claim_queue_item", human, worker_euid=person,
               subject_euid=second)["subject_euid"] == second


def test_without_strict_order_a_chosen_subject_may_skip_the_head(tenant):
    admin, human = actor("admin"), actor("worker_human", username="sci")
    create(admin)
    make_subject("cfg", priority=10)
    second = make_subject("cfg", priority=0)
    person = register(human, worker_type="HUMAN_SESSION")
    assert act("claim_queue_item", human, worker_euid=person,
               subject_euid=second)["subject_euid"] == second


@pytest.mark.usefixtures("committed")
def test_a_rename_and_a_subject_sent_to_the_old_key_never_cross(tenant, settings):
    """A replace under a new key counted no items, and a registration committed between
    the count and the rename: its subject stranded on a key no queue had."""
    from django.db import connection

    from tests.engine import locked_elsewhere

    settings.BLOOMOPS_LOCK_TIMEOUT_MS = 200
    admin, op = actor("admin"), actor("operator")
    create(admin)
    key_lock = f"{tenant}|queue|cfg"

    def hold(how: str):
        def lock() -> None:
            with connection.cursor() as cur:
                cur.execute(f"SELECT {how}(hashtext(%s))", [key_lock])
        return lock

    # a rename in flight: sending a subject to the old key waits for it, then is refused
    with locked_elsewhere(hold("pg_advisory_xact_lock")):
        refused("CONCURRENT_UPDATE", lambda: act(
            "register_subject", op, queue_key="cfg",
            payload={"template_code": SPECIMEN, "name": "late tube"}))
    # nor may a queue's flow be pointed at it meanwhile (the rename checks the flows too)
    create(admin, key="before")
    with locked_elsewhere(hold("pg_advisory_xact_lock")):
        refused("CONCURRENT_UPDATE", lambda: act(
            "update_queue", admin, queue_key="before", expected_revision=1,
            payload={"default_next_queue_key": "cfg", "reason": "flows on"}))
    # a subject being sent there: the rename waits for it, then is refused
    with locked_elsewhere(hold("pg_advisory_xact_lock_shared")):
        refused("CONCURRENT_UPDATE", lambda: act(
            "replace_queue", admin, queue_key="cfg", expected_revision=1,
            payload={"new_queue_key": "cfg2", "subject_template_codes": [SPECIMEN],
                     "reason": "renamed"}))


def test_a_rename_of_a_queue_whose_flow_names_itself_is_refused(tenant):
    """Its successor kept a default next queue naming the retired key: items completed
    there went nowhere."""
    admin = actor("admin")
    create(admin, default_next_queue_key="cfg")
    err = refused("QUEUE_IN_USE", lambda: act(
        "replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "subject_template_codes": [SPECIMEN],
                 "reason": "renamed"}))
    assert err.details["sent_from"] == ["cfg2"]
    # naming the new key in the same replacement is fine
    act("replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "subject_template_codes": [SPECIMEN],
                 "default_next_queue_key": "cfg2", "reason": "renamed"})
    assert config("cfg2")["default_next_queue_key"] == "cfg2"


def test_finished_subjects_hold_no_rename_back(tenant):
    """One canceled subject refused every rename of its queue ("1 item is routed to
    cfg"), and routing it on would have un-canceled it. A dead letter, which may yet be
    requeued, still counts."""
    admin = actor("admin")
    create(admin)
    for state in ("COMPLETED", "CANCELED"):
        make_subject("cfg", name=state.lower(), state=state, terminal=True)
    act("replace_queue", admin, queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "subject_template_codes": [SPECIMEN],
                 "reason": "renamed"})
    assert config("cfg2")["replaces_queue_key"] == "cfg"
    create(admin, key="dl")
    make_subject("dl", name="dead", state="FAILED_TERMINAL", terminal=True)
    err = refused("QUEUE_IN_USE", lambda: act(
        "replace_queue", admin, queue_key="dl", expected_revision=1,
        payload={"new_queue_key": "dl2", "subject_template_codes": [SPECIMEN],
                 "reason": "renamed"}))
    assert err.details["routed"] == 1


def test_a_null_that_clears_a_setting_is_its_own_request(tenant):
    """A retry under the same key that added site_scope: null replayed the first request
    (null was hashed as left out) though it clears the scope: IDEMPOTENCY_CONFLICT now."""
    from bloomops.execution.actions.queue_fields import clean_settings
    from bloomops.execution.context import NULL_CLEARS

    admin = actor("admin")
    create(admin, site_scope=["sfo"], next_queue_keys=["q2"])
    first = act("update_queue", admin, queue_key="cfg", expected_revision=1,
                idempotency_key="rename-1", payload={"display_name": "New", "reason": "r"})
    assert not first.replayed
    refused("IDEMPOTENCY_CONFLICT", lambda: act(
        "update_queue", admin, queue_key="cfg", expected_revision=1,
        idempotency_key="rename-1",
        payload={"display_name": "New", "site_scope": None, "reason": "r"}))
    assert config("cfg")["site_scope"] == ["sfo"] and config("cfg")["next_queue_keys"] == ["q2"]
    # NULL_CLEARS is exactly the settings whose null clears them: every other is refused
    cleared = clean_settings(dict.fromkeys(NULL_CLEARS))
    assert set(cleared) == NULL_CLEARS and cleared["next_queue_keys"] is None
    for name in ("display_name", "manual_only", "lease_ttl_seconds", "eligible_states",
                 "retry_policy"):
        with pytest.raises(ActionError):
            clean_settings({name: None})
