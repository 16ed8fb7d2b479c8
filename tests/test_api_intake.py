"""Intake over the API: route-subject, register-subject and the batch, with their role
matrix; a bad item among good ones is reported on its own and writes nothing."""

from __future__ import annotations

import json

import pytest

from bloomops.execution import selectors
from bloomops.execution.actions.intake import MAX_INTAKE_ITEMS
from bloomops.execution.context import action_spec
from tests.api_helpers import Api, api_for, error_code
from tests.conftest import make_user
from tests.engine import SPECIMEN, counts, envelope, make_queue, make_subject, props
from tests.test_intake import raw_sql_object

pytestmark = pytest.mark.django_db
INTAKE_ROLES = {"operator", "admin", "worker_service"}


@pytest.fixture
def apis(tenant, users):
    make_queue("q1")
    out = {role: api_for(user) for role, user in users.items()}
    out["none"] = api_for(make_user("nobody"))
    out["anonymous"] = Api(None)
    return out


def test_intake_roles_are_operator_admin_and_service():
    for key in ("route_subject", "register_subject"):
        assert action_spec(key).allowed_roles == INTAKE_ROLES


def _register(i: int, **extra) -> dict:
    return {"action": "register_subject", "request": {
        "idempotency_key": f"reg-{i}", "queue_key": "q1", "template_code": SPECIMEN,
        "name": f"Tube {i}", "properties": {"site": "sfo"}, **extra}}


@pytest.mark.parametrize("role", ["worker_service", "worker_human", "operator", "admin",
                                  "none", "anonymous"])
def test_role_matrix_of_every_intake_endpoint(apis, role):
    api = apis[role]
    before = counts()
    pending = raw_sql_object(SPECIMEN, f"from LIMS {role}", {})
    r_route = api.act("route-subject", subject_euid=pending, queue_key="q1")
    r_reg = api.act("register-subject", queue_key="q1", template_code=SPECIMEN,
                    name=f"new {role}")
    r_batch = api.post("/actions/intake-batch", {"items": [_register(1)]})
    if role in INTAKE_ROLES:
        assert [r.status_code for r in (r_route, r_reg, r_batch)] == [200, 200, 200]
        assert envelope(pending)["state"] == "READY"
        assert r_batch.json()["succeeded"] == 1
    else:
        expected = 401 if role == "anonymous" else 403
        assert [r.status_code for r in (r_route, r_reg, r_batch)] == [expected] * 3
        # Refused before the body is read, writing nothing (the raw object aside).
        assert counts()["generic_instance"] == before["generic_instance"] + 1
        assert "execution" not in props(pending)


def test_batch_with_a_bad_item_among_good_ones(apis):
    api = apis["worker_service"]
    make_queue("analysis", subject_template_codes=["data/analysis/analysis_request/1.0"])
    routed = make_subject("q1")  # already in a queue's work
    pending = raw_sql_object(SPECIMEN, "pending", {})
    items = [
        _register(1),
        {"action": "route_subject", "request": {"idempotency_key": "rt-1",
                                                "subject_euid": routed, "queue_key": "q1"}},
        _register(2, queue_key="analysis"),  # the analysis queue takes no specimens
        {"action": "route_subject", "request": {"idempotency_key": "rt-2",
                                                "subject_euid": pending, "queue_key": "q1",
                                                "priority": "STAT"}},
    ]
    before = counts()
    r = api.post("/actions/intake-batch", {"items": items})
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["succeeded"], body["failed"]) == (2, 2)
    got = [(i["index"], i["ok"], i["status"], (i.get("error") or {}).get("code"))
           for i in body["items"]]
    assert got == [(0, True, 200, None), (1, False, 409, "SUBJECT_ALREADY_ROUTED"),
                   (2, False, 409, "SUBJECT_TEMPLATE_MISMATCH"), (3, True, 200, None)]
    assert envelope(pending)["priority"] == 300
    after = counts()
    # Two actions' worth of rows: one new subject, two action records, two events.
    assert after["generic_instance"] == before["generic_instance"] + 5
    assert after["outbox_event"] == before["outbox_event"] + 2
    # Resent as is: the done items replay, the refused ones are refused again.
    again = api.post("/actions/intake-batch", {"items": items}).json()
    assert [i["ok"] for i in again["items"]] == [True, False, False, True]
    assert all(i["result"]["replayed"] for i in again["items"] if i["ok"])
    assert counts() == after


@pytest.mark.parametrize("body", [
    {"items": []},
    {"items": [{"action": "teleport", "request": {}}]},
    {"items": [{"action": "register_subject", "request": {"idempotency_key": "x"}}]},
    {"items": [{"action": "route_subject", "request": {"idempotency_key": "x",
                                                       "subject_euid": "Z-MX-1",
                                                       "queue_key": "q1"}}] * 2
     + [_register(9, priority="SOON")]},
    {"items": [_register(i) for i in range(MAX_INTAKE_ITEMS + 1)]},
    {"items": [_register(1)], "extra": True},
])
def test_a_malformed_batch_is_refused_whole(apis, body):
    before = counts()
    r = apis["operator"].post("/actions/intake-batch", body)
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR"
    assert counts() == before


def test_route_subject_over_the_api_refusals(apis):
    api = apis["operator"]
    done = make_subject("q1", state="COMPLETED", terminal=True)
    before = counts()
    r = api.act("route-subject", subject_euid=done, queue_key="q1")
    assert r.status_code == 409 and error_code(r) == "SUBJECT_TERMINAL"
    r = api.act("route-subject", subject_euid="Z-MX-0", queue_key="q1")
    assert r.status_code == 404 and error_code(r) == "NOT_FOUND"
    # the engine's own objects and workers are no subjects, as every read answers for them
    queue = selectors.queue_config("q1")["euid"]
    r = api.act("route-subject", subject_euid=queue, queue_key="q1")
    assert r.status_code == 404 and error_code(r) == "NOT_FOUND"
    r = api.act("register-subject", queue_key="q1", template_code=SPECIMEN, name="x",
                properties={"colour": "red"})
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == "properties"
    assert counts() == before


@pytest.mark.parametrize(("field", "value", "named"), [
    ("name", "Tube\u202eevil", "name"), ("name", "Tube\nline2\x1b[31mred", "name"),
    ("name", "\u200b", "name"), ("name", "\u2800", "name"), ("name", "\u00ad", "name"),
    ("properties", {"site": "sfo\u200b"}, "properties"),
    # a control or reordering character is named where it is, at any property
    ("properties", {"platform": "\u202eevil"}, "properties.platform"),
    ("properties", {"assay": "wgs\n\x1b[2Jx"}, "properties.assay"),
    ("properties", {"derived_from_euid": "Z-NO-SUCH"}, "properties"),
])
def test_names_and_matched_properties_are_readable_lines(apis, field, value, named):
    """A name of invisible characters slipped past the "same specimen twice" warning, and a
    site reading "sfo" but holding a zero-width space was out of every site-scoped queue."""
    before = counts()
    request = {"queue_key": "q1", "template_code": SPECIMEN, "name": "Tube 1",
               "properties": {"site": "sfo"}, field: value}
    r = apis["operator"].act("register-subject", **request)
    assert r.status_code == 400 and r.json()["error"]["details"]["field"] == named, r.json()
    assert counts() == before


def test_provenance_at_intake_names_a_subject_of_the_lab(apis, tenant):
    """A registration claimed to derive from an action record (any EUID was taken)."""
    parent = make_subject("q1", name="Parent tube")
    action_record = apis["operator"].act(
        "register-subject", queue_key="q1", template_code=SPECIMEN, name="Other tube").json()[
            "action_euid"]
    for euid, status in ((action_record, 400), (parent, 200)):
        r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                                 name=f"From {euid}",
                                 properties={"derived_from_euid": euid})
        assert r.status_code == status, r.json()


def test_a_batch_may_not_make_two_subjects_of_one_name(apis):
    """The manifest refused a name given twice; the API's batch made all three (a LIMS
    integration skips the manifest), and scanning the name was then ambiguous."""
    before = counts()
    items = [_register(1, name="BatchDup-x"), _register(2, name="batchdup-x "),
             _register(3, name="Other")]
    r = apis["operator"].post("/actions/intake-batch", {"items": items})
    body = r.json()
    assert r.status_code == 200 and (body["succeeded"], body["failed"]) == (2, 1)
    refused = body["items"][1]
    assert refused["status"] == 400 and refused["error"]["details"]["field"] == "name"
    assert "items[0] gives this name too" in refused["error"]["message"]
    assert counts()["generic_instance"] > before["generic_instance"]


def test_a_name_an_earlier_refused_item_gave_is_still_free(apis):
    """An earlier item refused for another reason made no subject, yet the valid item
    after it was refused for repeating its name."""
    bad = _register(1, name="Tube X")
    bad["request"]["template_code"] = "content/material/no_such/1.0"
    r = apis["operator"].post("/actions/intake-batch", {"items": [bad, _register(2,
                                                                              name="tube x")]})
    body = r.json()
    assert [i["ok"] for i in body["items"]] == [False, True], body


def test_a_batch_sent_again_answers_what_was_done_and_keeps_its_names(apis, tenant):
    """Sent again after the queue of an item refused the first time was set up, that item
    took the name first and the item that had registered it was refused, never answered its
    result: two subjects then went by one name, and its scans were ambiguous."""
    batch = {"items": [_register(1, name="Dup", queue_key="q2"), _register(2, name="dup")]}
    first = apis["operator"].post("/actions/intake-batch", batch).json()["items"]
    assert [i["ok"] for i in first] == [False, True]
    made = first[1]["result"]["subject_euid"]
    make_queue("q2")
    for _ in range(2):
        again = apis["operator"].post("/actions/intake-batch", batch).json()["items"]
        assert [i["ok"] for i in again] == [False, True], again
        assert "items[1] gives this name too" in again[0]["error"]["message"]
        assert again[1]["result"]["replayed"] and again[1]["result"]["subject_euid"] == made
    assert selectors.subjects_named(["dup"], tenant=tenant)["dup"] == [made]
    # an item given twice in one batch is done once and answered twice
    twice = apis["operator"].post("/actions/intake-batch", {
        "items": [_register(3, name="Same"), _register(3, name="Same")]}).json()["items"]
    assert [i["ok"] for i in twice] == [True, True], twice
    assert [i["result"]["replayed"] for i in twice] == [False, True]


@pytest.mark.parametrize("value", ["2026-01-01T00:00:00.Z", "2026-01-01T00:00:00", "",
                                   "2026-01-01", "2026-01-01T00:00:00+0530"])
def test_an_instant_comes_with_its_date_time_and_zone(apis, value):
    """"...:00.Z" was stored as :00, a time without a zone was taken as UTC, and "" as
    none given: a request says when, in which zone, or is refused and writes nothing."""
    before = counts()
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Timed", due_at=value)
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    assert counts() == before
    r = apis["operator"].act("register-subject", queue_key="q1", template_code=SPECIMEN,
                             name="Timed", due_at="2026-01-01T05:30:00+05:30")
    assert r.status_code == 200
    assert envelope(r.json()["subject_euid"])["due_at"] == "2026-01-01T00:00:00.000000Z"


def test_a_site_in_another_case_is_the_queue_s_site_over_the_api_too(apis):
    """RULES.md#intake says a batch takes "SFO" as the queue's sfo; the manifest did, the
    API's intake-batch and register-subject refused it SUBJECT_OUT_OF_SCOPE."""
    api = apis["worker_service"]
    make_queue("sited", site_scope=["sfo", "rtp"])
    one = api.act("register-subject", queue_key="sited", template_code=SPECIMEN,
                  name="Upper tube", properties={"site": "SFO"})
    assert one.status_code == 200, one.content
    batch = api.post("/actions/intake-batch", {"items": [
        _register(31, queue_key="sited", properties={"site": "Rtp"}),
        _register(32, queue_key="sited", properties={"site": "LAX"})]}).json()
    assert [i["ok"] for i in batch["items"]] == [True, False]
    assert batch["items"][1]["error"]["code"] == "SUBJECT_OUT_OF_SCOPE"
    made = [one.json()["subject_euid"], batch["items"][0]["result"]["subject_euid"]]
    assert [props(euid)["site"] for euid in made] == ["sfo", "rtp"]


def test_a_short_template_name_is_taken_as_the_intake_screen_takes_it(apis):
    """The intake screen, the queue settings and apply_queues take "specimen"; the API's
    register-subject and intake-batch refused it NOT_FOUND without saying the full code."""
    api = apis["worker_service"]
    one = api.act("register-subject", queue_key="q1", template_code="Specimen ",
                  name="Short tube")
    assert one.status_code == 200, one.content
    assert one.json()["template_code"] == SPECIMEN
    batch = api.post("/actions/intake-batch", {"items": [
        _register(41, template_code="specimen", name="Short tube 2")]})
    assert batch.json()["succeeded"] == 1, batch.content
    pending = raw_sql_object(SPECIMEN, "from the LIMS", {})
    routed = api.act("route-subject", subject_euid=pending, queue_key="q1",
                     template_code="specimen")
    assert routed.status_code == 200, routed.content
    assert envelope(pending)["state"] == "READY"


def test_a_short_template_name_two_templates_share_names_both(apis, request):
    """Taken as the queue's own when one of its templates has that name; named in full
    when its queue takes both."""
    from bloomops.tapdb import templates
    from tests.test_shared_templates import _foreign_template

    _foreign_template("BX", "sample", "specimen", "content")
    # the row rolls back with the test; the process's template cache must follow it
    request.addfinalizer(templates.clear_cache)
    api = apis["operator"]
    own = api.act("register-subject", queue_key="q1", template_code="specimen", name="Mine")
    assert own.json()["template_code"] == SPECIMEN, own.content
    make_queue("both", subject_template_codes=[SPECIMEN, "content/sample/specimen/1.0"])
    before = counts()
    r = api.act("register-subject", queue_key="both", template_code="specimen",
                name="Which tube")
    # which template is meant is the caller's to say: a refusal of the request, not a 404
    assert r.status_code == 400 and error_code(r) == "VALIDATION_ERROR", r.content
    message = r.json()["error"]["message"]
    assert "it could mean" in message and SPECIMEN in message, message
    assert "content/sample/specimen/1.0" in message
    assert counts() == before


def test_a_name_already_registered_is_taken_with_a_warning_over_the_api(apis):
    """The intake screen warns of a name already registered and asks for a tick; the API
    took S-101 a second and third time without a word, and a scan of S-101 then refused."""
    api = apis["worker_service"]
    first = api.act("register-subject", queue_key="q1", template_code=SPECIMEN, name="S-101")
    assert "warnings" not in first.json()
    again = api.act("register-subject", queue_key="q1", template_code=SPECIMEN, name="s-101 ")
    assert again.status_code == 200, again.content
    (said,) = again.json()["warnings"]
    assert f"'s-101' is also the name of {first.json()['subject_euid']}" in said
    batch = api.post("/actions/intake-batch", {"items": [_register(51, name="S-101")]})
    (item,) = batch.json()["items"]
    assert item["ok"] and "is also the name of" in item["result"]["warnings"][0], item


def test_route_subject_takes_a_short_name_two_templates_share_as_the_subject_s_own(apis,
                                                                                  request):
    """RULES 16.8: a short name is the subject's own template where it is one of the name's;
    route-subject refused "specimen" for a specimen once another template had that name."""
    from bloomops.tapdb import templates
    from tests.test_shared_templates import _foreign_template

    _foreign_template("BX", "sample", "specimen", "content")
    request.addfinalizer(templates.clear_cache)
    pending = raw_sql_object(SPECIMEN, "from the LIMS", {})
    r = apis["operator"].act("route-subject", subject_euid=pending, queue_key="q1",
                             template_code="specimen")
    assert r.status_code == 200, r.content
    assert envelope(pending)["state"] == "READY"
    # a subject of neither template: which one is meant is the caller's to say (400, not 404)
    other = raw_sql_object("content/material/library/1.0", "a library", {})
    make_queue("libs", subject_template_codes=["content/material/library/1.0"])
    before = counts()
    r = apis["operator"].act("route-subject", subject_euid=other, queue_key="libs",
                             template_code="specimen")
    assert (r.status_code, error_code(r)) == (400, "VALIDATION_ERROR"), r.content
    assert "it could mean" in r.json()["error"]["message"] and counts() == before


@pytest.mark.parametrize(("stored", "taken"), [
    (5, False), (True, False), ("content/material/specimen/1.0", True), ({"a": 1}, False)])
def test_a_queue_s_templates_another_writer_stored_otherwise_are_read_not_a_500(apis,
                                                                               stored, taken):
    from bloomops.tapdb.db import fetch_all

    make_queue("odd")
    fetch_all("UPDATE generic_instance SET json_addl = jsonb_set(json_addl,"
              " '{properties,subject_template_codes}', %s::jsonb) WHERE type = 'execution'"
              " AND subtype = 'queue' AND json_addl->'properties'->>'queue_key' = 'odd'"
              " RETURNING uid", [json.dumps(stored)])
    before = counts()
    for code in (SPECIMEN, "specimen"):
        r = apis["operator"].act("register-subject", queue_key="odd", template_code=code,
                                 name=f"Odd {code}")
        # a text is the one template it names; anything else names none
        if taken:
            assert r.status_code == 200, r.content
        else:
            assert (r.status_code, error_code(r)) == (409, "SUBJECT_TEMPLATE_MISMATCH")
            assert counts() == before


@pytest.mark.parametrize(("action", "code", "status", "error"), [
    ("route-subject", "nope", 404, "NOT_FOUND"),
    ("route-subject", "spec\nimen", 400, "VALIDATION_ERROR"),
    ("register-subject", "spec\u200bimen", 400, "VALIDATION_ERROR"),
])
def test_a_template_code_that_names_nothing_is_refused_as_such(apis, action, code, status,
                                                                error):
    """route-subject said "Z-MX-1 is a content/material/specimen/1.0, not a nope" of a code
    that names no template; a code with a control or invisible character in it was taken."""
    pending = raw_sql_object(SPECIMEN, "from the LIMS", {})
    target = {"subject_euid": pending} if action == "route-subject" else {"name": "Tube N"}
    before = counts()
    r = apis["operator"].act(action, queue_key="q1", template_code=code, **target)
    assert (r.status_code, error_code(r)) == (status, error), r.content
    assert counts() == before


def test_a_token_revoked_while_its_batch_runs_runs_no_more_of_it(apis, users, monkeypatch):
    """The token was checked once, when the batch arrived: revoked while 200 items ran, it
    registered 140 more subjects after the revocation had committed."""
    from bloomops.accounts.tokens import revoke
    from bloomops.api import intake

    ran, real = [], intake.execute

    def then_revoked(request):
        result = real(request)
        ran.append(request)
        if len(ran) == 2:  # an admin revokes the token while the batch runs
            revoke(by="adm", reason="compromised", username=users["worker_service"].username)
        return result

    monkeypatch.setattr(intake, "execute", then_revoked)
    before = counts()["generic_instance"]
    r = apis["worker_service"].post("/actions/intake-batch",
                                    {"items": [_register(i) for i in range(5)]})
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["succeeded"], body["failed"]) == (2, 3)
    assert [i["error"]["code"] for i in body["items"][2:]] == ["FORBIDDEN"] * 3
    assert "were not run" in body["items"][2]["error"]["message"]
    assert len(ran) == 2
    assert {s["name"] for s in selectors.subjects_like("Tube")} == {"Tube 0", "Tube 1"}
    assert counts()["generic_instance"] > before
    # the token no longer works at all
    again = apis["worker_service"].post("/actions/intake-batch", {"items": [_register(9)]})
    assert again.status_code == 401
