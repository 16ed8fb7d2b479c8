"""The queue settings screens (admin): role matrix, preview then save at the revision shown,
a stale page refused, disable with a reason shown on the dashboard, a new queue, another
system's queue shown read-only (docs/RULES.md#queue-configuration)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.messages import get_messages

from bloomops.execution import selectors
from tests.engine import act, actor, counts, make_queue
from tests.web_support import form_for, has_form

pytestmark = pytest.mark.django_db
ROLES = ("worker_service", "worker_human", "operator", "admin")
SPECIMEN = "content/material/specimen/1.0"


@pytest.fixture
def world(tenant, users):
    act("create_queue", actor("admin", username="adm"), queue_key="cfg",
        payload={"subject_template_codes": [SPECIMEN], "reason": "first",
                 "display_name": "Config queue"})
    return users


def settings_form(page, **overrides) -> dict:
    """The settings form as a browser submits it: the test parser leaves out checkboxes, so
    the checked ones are added as a browser would."""
    data = form_for(page, "/settings/queues/cfg/", **overrides)
    data.setdefault("eligible_states", ["READY", "FAILED_RETRYABLE"])
    data.setdefault("operator_visible", "on")
    data.setdefault("diagnostics_enabled", "on")
    return data


def cfg(key="cfg"):
    return selectors.queue_config(key)["config"]


SCREENS = ["/settings/queues/", "/settings/queues/cfg/", "/settings/new-queue/"]
POSTS = {
    "preview": ("/settings/queues/cfg/", {"lease_ttl_seconds": "60", "expected_revision": "1",
                                          "display_name": "Config queue",
                                          "eligible_states": ["READY", "FAILED_RETRYABLE"]}),
    "save": ("/settings/queues/cfg/save/", {"changes": '{"lease_ttl_seconds": 60}',
                                            "reason": "forged", "expected_revision": "1"}),
    # (after the save: revision 2)
    "disable": ("/settings/queues/cfg/enabled/", {"enabled": "false", "reason": "forged",
                                                  "expected_revision": "2"}),
    "create": ("/settings/new-queue/", {"queue_key": "forged", "reason": "forged",
                                        "subject_template_codes": SPECIMEN,
                                        "needs_no_step": "on"}),
}


ADMIN_DID = {
    "preview": lambda r: 'id="diff"' in r.content.decode(),
    "save": lambda r: selectors.queue_config("cfg")["config"]["lease_ttl_seconds"] == 60,
    "disable": lambda r: selectors.queue_config("cfg")["config"]["enabled"] is False,
    "create": lambda r: selectors.queue_config("forged") is not None,
}


@pytest.mark.parametrize("role", ROLES)
def test_screens_role_matrix(client, world, role):
    client.force_login(world[role])
    for url in SCREENS:
        assert client.get(url).status_code == (200 if role == "admin" else 403), (url, role)
    for name, (url, data) in POSTS.items():
        before = counts()
        r = client.post(url, {"idempotency_key": uuid.uuid4().hex, **data})
        if role == "admin":  # each one done, not merely answered
            assert r.status_code == (200 if name == "preview" else 302), (name, r.status_code)
            assert ADMIN_DID[name](r), name
        else:
            assert r.status_code == 403, (name, role)
            assert counts() == before


def test_preview_shows_the_diff_then_save_writes_it(client, world):
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    assert 'name="lease_ttl_seconds"' in page.content.decode()
    assert 'id="f-lease_ttl_seconds-words"> (15 min)</span>' in page.content.decode()
    data = settings_form(page, lease_ttl_seconds="1200", display_name="Renamed")
    before = counts()
    preview = client.post("/settings/queues/cfg/", data)
    html = preview.content.decode()
    assert preview.status_code == 200 and 'id="diff"' in html
    assert 'data-field="lease_ttl_seconds"' in html and 'data-field="display_name"' in html
    assert 'data-field="dispatch_priority"' not in html
    assert "<td>900 (15 min)</td><td>1200 (20 min)</td>" in html
    assert counts() == before  # a preview writes nothing
    save = form_for(preview, "/settings/queues/cfg/save/", reason="slower centrifuge")
    r = client.post("/settings/queues/cfg/save/", save)
    assert r.status_code == 302
    assert cfg()["lease_ttl_seconds"] == 1200 and cfg()["display_name"] == "Renamed"
    assert cfg()["revision"] == 2
    page = client.get("/settings/queues/cfg/").content.decode()
    assert "slower centrifuge" in page and "update_queue" in page
    # The same confirm form again replays; a stale page is refused and writes nothing.
    before = counts()
    client.post("/settings/queues/cfg/save/", save)
    assert counts() == before
    stale = {**save, "idempotency_key": uuid.uuid4().hex,
             "changes": '{"lease_ttl_seconds": 300}'}
    r = client.post("/settings/queues/cfg/save/", stale, follow=True)
    assert "changed after you last read it" in r.content.decode()
    assert counts() == before and cfg()["lease_ttl_seconds"] == 1200


def test_a_site_of_two_words_stays_one_site(client, world):
    """A list field was split at spaces too: "Main Lab, Annex" was saved as three sites, and
    an edit of the queue's name alone rewrote a "Main Lab" set through the API as "Main",
    "Lab": every item of the Main Lab was out of the queue's scope."""
    act("update_queue", actor("admin", username="adm"), queue_key="cfg", expected_revision=1,
        payload={"reason": "sites", "site_scope": ["Main Lab", "annex,east"]})
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    preview = client.post("/settings/queues/cfg/", settings_form(page, display_name="Renamed"))
    html = preview.content.decode()
    assert 'data-field="display_name"' in html and 'data-field="site_scope"' not in html
    save = form_for(preview, "/settings/queues/cfg/save/", reason="a better name")
    client.post("/settings/queues/cfg/save/", save)
    assert cfg()["display_name"] == "Renamed"
    assert cfg()["site_scope"] == ["Main Lab", "annex,east"]  # as stored, commas and all
    page = client.get("/settings/queues/cfg/")
    assert 'name="site_scope" value="Main Lab, &quot;annex,east&quot;"' in page.content.decode()
    preview = client.post("/settings/queues/cfg/", settings_form(
        page, site_scope='Main Lab, Annex\nNorth Wing, "Lab 2, West"'))
    # a value holding a comma is shown quoted, so that it reads as the one value it is
    assert 'Main Lab, Annex, North Wing, &quot;Lab 2, West&quot;' in preview.content.decode()
    save = form_for(preview, "/settings/queues/cfg/save/", reason="typed")
    client.post("/settings/queues/cfg/save/", save)
    assert cfg()["site_scope"] == ["Main Lab", "Annex", "North Wing", "Lab 2, West"]


def test_leaving_ready_out_of_the_offered_states_is_warned_of(client, world):
    """READY unticked previewed without a word; every item routed there arrived READY and
    waited unseen (they are refused now, and the preview says so)."""
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    preview = client.post("/settings/queues/cfg/", {**settings_form(page),
                                                     "eligible_states": ["FAILED_RETRYABLE"]})
    html = preview.content.decode()
    assert 'data-field="eligible_states"' in html
    assert "READY is not among the states this queue offers items in" in html
    assert "READY is not among" not in client.post(
        "/settings/queues/cfg/", settings_form(page, display_name="Renamed")).content.decode()

def test_a_bad_value_is_refused_in_plain_words(client, world):
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    before = counts()
    preview = client.post("/settings/queues/cfg/", settings_form(page, lease_ttl_seconds="5"))
    html = preview.content.decode()
    assert "lease_ttl_seconds must be an integer from 30 to 86400" in html
    assert not has_form(preview, "/settings/queues/cfg/save/")
    # A forged confirm with the bad value is refused by the engine, nothing written.
    r = client.post("/settings/queues/cfg/save/", {
        "idempotency_key": uuid.uuid4().hex, "expected_revision": "1", "reason": "x",
        "changes": '{"lease_ttl_seconds": 5}'}, follow=True)
    assert "lease_ttl_seconds must be an integer from 30 to 86400" in r.content.decode()
    r = client.post("/settings/queues/cfg/save/", {
        "idempotency_key": uuid.uuid4().hex, "expected_revision": "1", "reason": "x",
        "changes": "not json"}, follow=True)
    assert "unreadable change" in r.content.decode()
    assert counts() == before


def test_every_bad_value_is_said_at_once(client, world):
    """A form with three mistakes was refused three times over, one mistake per try."""
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    before = counts()
    preview = client.post("/settings/queues/cfg/", settings_form(
        page, lease_ttl_seconds="5", display_name="", straggler_threshold_seconds="1"))
    said = [str(m) for m in preview.context["messages"]]
    assert preview.status_code == 400 and len(said) == 3, said
    assert "Give a display name: left blank or spaces alone, it is not one." in said
    assert any("lease_ttl_seconds must be an integer from 30 to 86400" in m for m in said)
    assert any("straggler_threshold_seconds" in m for m in said)
    # a new queue with a bad key, no template and no word on who may take it says all three
    new = client.post("/settings/new-queue/", {
        **form_for(client.get("/settings/new-queue/"), "/settings/new-queue/"),
        "queue_key": "Bad Key", "reason": "new line"})
    said = [str(m) for m in new.context["messages"]]
    assert new.status_code == 400 and len(said) == 3, said
    assert any("Name the steps a worker needs" in m for m in said)
    assert any("queue_key must be lowercase" in m for m in said)
    assert any("subject_template_codes" in m for m in said)
    assert counts() == before


def test_the_engine_names_every_refused_field(world):
    """What the console and a lab's queue file are told (the API's schema lists its own
    checks in details.errors before the engine is asked)."""
    from bloomops.execution.errors import ActionError

    before = counts()
    with pytest.raises(ActionError) as err:
        act("update_queue", actor("admin", username="adm"), queue_key="cfg",
            expected_revision=1, payload={"reason": "tune", "display_name": "",
                                          "lease_ttl_seconds": 5, "eligible_states": []})
    details = err.value.details
    assert err.value.code == "VALIDATION_ERROR" and details["field"] == "display_name"
    assert [p["field"] for p in details["problems"]] == [
        "display_name", "lease_ttl_seconds", "eligible_states"]
    assert all(p["message"] in err.value.message for p in details["problems"])
    assert counts() == before


def test_disabled_queue_shows_its_reason_on_the_dashboard(client, world):
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    r = client.post("/settings/queues/cfg/enabled/", form_for(
        page, "/settings/queues/cfg/enabled/", reason="centrifuge broken"))
    assert r.status_code == 302 and cfg()["enabled"] is False
    client.force_login(world["operator"])
    html = client.get("/").content.decode()
    assert "disabled" in html and "centrifuge broken" in html
    assert "/settings/queues/cfg/" not in html  # no settings link for an operator


def test_new_queue_from_the_ui(client, world):
    client.force_login(world["admin"])
    page = client.get("/settings/new-queue/")
    data = form_for(page, "/settings/new-queue/", queue_key="bench_qc", reason="new line",
                    display_name="Bench QC", needs_no_step="on")
    data["subject_template_codes"] = [SPECIMEN]
    r = client.post("/settings/new-queue/", data)
    assert r.status_code == 302 and r["Location"] == "/settings/queues/bench_qc/"
    assert cfg("bench_qc")["display_name"] == "Bench QC"
    # chosen to need no capability: the admin is told every robot may take from it
    settings_page = client.get(r["Location"])
    html = settings_page.content.decode()
    assert 'id="open-to-all"' in html and "service robots included" in html
    assert any("It asks for no step: any worker may take its items" in str(m)
               for m in settings_page.context["messages"])
    before = counts()
    bad = client.post("/settings/new-queue/", {**data, "idempotency_key": uuid.uuid4().hex,
                                               "queue_key": "Bad Key"})
    assert bad.status_code == 400 and "queue_key must be lowercase" in bad.content.decode()
    assert counts() == before
    # what was ticked is ticked again: fixing the key alone is then enough
    html = bad.content.decode()
    assert f'value="{SPECIMEN}" checked>' in html and 'value="Bad Key"' in html


def test_a_blank_new_queue_form_is_told_every_missing_field_at_once(client, world):
    """It listed three problems and not the missing reason, which came on the next try."""
    client.force_login(world["admin"])
    page = client.get("/settings/new-queue/")
    before = counts()
    r = client.post("/settings/new-queue/", form_for(page, "/settings/new-queue/"))
    assert r.status_code == 400 and counts() == before
    said = [str(m) for m in r.context["messages"]]
    for words in ("Give a reason", "queue_key is required",
                  "subject_template_codes must name at least one template"):
        assert any(words in m for m in said), said


def test_a_new_queue_of_a_key_taken_leads_to_that_queue(client, world):
    client.force_login(world["admin"])
    page = client.get("/settings/new-queue/")
    data = form_for(page, "/settings/new-queue/", queue_key="cfg", reason="again",
                    needs_no_step="on")
    data["subject_template_codes"] = [SPECIMEN]
    r = client.post("/settings/new-queue/", data)
    assert r.status_code == 400
    notice = r.content.decode().split('id="queue-exists">')[1].split("</p>")[0]
    assert 'href="/settings/queues/cfg/"' in notice and "open its settings" in notice


def test_a_new_queue_names_who_may_take_its_items_or_says_it_asks_for_no_step(client, world):
    """A queue created on the console asked for no capability unasked: every worker, service
    robots included, could take its items until the admin named one. Now the form asks."""
    make_queue("line", required_worker_capabilities=["wetlab.qc"])
    client.force_login(world["admin"])
    page = client.get("/settings/new-queue/")
    assert "Named already: " in page.content.decode() and "wetlab.qc" in page.content.decode()
    data = {**form_for(page, "/settings/new-queue/", queue_key="bench_qc", reason="new line"),
            "subject_template_codes": [SPECIMEN]}
    before = counts()
    for extra, field in (({}, "Name the steps a worker needs to take its items"),
                         ({"required_worker_capabilities": "wetlab.qc", "needs_no_step": "on"},
                          "not both")):
        refused = client.post("/settings/new-queue/", {**data, **extra})
        said = [str(m) for m in refused.context["messages"]]
        assert refused.status_code == 400 and any(field in m for m in said), said
    assert counts() == before and selectors.queue_config("bench_qc") is None
    # a refused key is said with the missing choice, each on its own line
    refused = client.post("/settings/new-queue/", {**data, "queue_key": "Bad Key"})
    said = [str(m) for m in refused.context["messages"]]
    assert len(said) == 2 and any("queue_key must be lowercase" in m for m in said), said
    # named: saved with the queue, one action; the manual-only tick too
    made = client.post("/settings/new-queue/", {
        **data, "required_worker_capabilities": "wetlab.qc, wetlab.review",
        "manual_only": "on"})
    assert made.status_code == 302
    stored = cfg("bench_qc")
    assert stored["required_worker_capabilities"] == ["wetlab.qc", "wetlab.review"]
    assert stored["manual_only"] is True and stored["revision"] == 1
    told = [str(m) for m in client.get(made["Location"]).context["messages"]]
    assert "Queue bench_qc created. Workers with wetlab.qc, wetlab.review may take its" \
        " items." in told
    # no one has wetlab.review: said at once
    assert any(m.startswith("Nobody can serve bench_qc yet") for m in told), told


def test_a_queue_that_names_who_may_work_it_is_not_said_to_be_open_to_all(client, world):
    admin = actor("admin", username="adm")
    for key, policy in (("robots", {"required_worker_capabilities": ["wetlab.qc"]}),
                        ("people", {"manual_only": True})):
        act("create_queue", admin, queue_key=key, payload={
            "subject_template_codes": [SPECIMEN], "reason": "new", **policy})
    client.force_login(world["admin"])
    for key in ("robots", "people"):
        assert 'id="open-to-all"' not in client.get(
            f"/settings/queues/{key}/").content.decode(), key
    assert 'id="open-to-all"' in client.get("/settings/queues/cfg/").content.decode()


def test_another_systems_queue_is_read_only(client, world):
    make_queue("bloom_default")
    client.force_login(world["admin"])
    page = client.get("/settings/queues/bloom_default/")
    assert 'id="not-managed"' in page.content.decode()
    assert not has_form(page, "/settings/queues/bloom_default/save/")
    assert not has_form(page, "/settings/queues/bloom_default/enabled/")


def test_the_next_queues_a_flow_allows_are_set_on_the_settings_page(client, world):
    make_queue("qc", display_name="QC")
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    assert 'name="next_queue_keys"' in page.content.decode()
    preview = client.post("/settings/queues/cfg/", settings_form(page, next_queue_keys="qc"))
    assert 'data-field="next_queue_keys"' in preview.content.decode()
    save = form_for(preview, "/settings/queues/cfg/save/", reason="QC may follow")
    assert client.post("/settings/queues/cfg/save/", save).status_code == 302
    assert cfg()["next_queue_keys"] == ["qc"]
    before = counts()
    bad = client.post("/settings/queues/cfg/", settings_form(
        client.get("/settings/queues/cfg/"), next_queue_keys="Not A Key!"))
    html = bad.content.decode()
    assert bad.status_code == 400 and "next_queue_keys must be lowercase" in html
    assert 'id="diff"' not in html
    assert counts() == before and cfg()["next_queue_keys"] == ["qc"]


def test_settings_are_labelled_in_words_with_their_key(client, lab):
    """The labels were the raw keys (queue_key, retry_policy.initial_delay_seconds)."""
    from bloomops.web.queue_form import form_fields

    fields = {f["name"]: f for f in form_fields({})}
    assert fields["default_next_queue_key"]["label"] == "Default next queue key"
    assert fields["retry_initial_delay_seconds"]["help"] == (
        "Seconds before the first retry (1 to 86400).")
    client.force_login(lab["admin"])
    html = client.get("/settings/new-queue/").content.decode()
    assert '<label for="queue_key">Queue key</label> <code class="muted key">queue_key</code>' \
        in html


def test_the_preview_warns_of_a_next_queue_that_does_not_exist(client, world):
    """A typo in the next queue was saved without a word; every completion to it would be
    refused. The preview names it (not refused: a lab may create that queue next)."""
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    typo = client.post("/settings/queues/cfg/", settings_form(
        page, default_next_queue_key="ilmn_seq_pol")).content.decode()
    assert 'id="flow-warnings"' in typo and "No queue ilmn_seq_pol exists yet" in typo
    # the form below the preview keeps what was typed, where the warning is fixed
    assert 'value="ilmn_seq_pol"' in typo[typo.index('id="settings-form"'):]
    fine = client.post("/settings/queues/cfg/", settings_form(
        page, default_next_queue_key="cfg")).content.decode()
    assert 'id="diff"' in fine and 'id="flow-warnings"' not in fine


def test_the_preview_warns_of_a_next_queue_that_can_take_nothing_from_this_one(client, world):
    """A specimen queue sent on to a queue of extracted samples, with no output templates:
    saved without a word, and the bench then could only finish each item."""
    act("create_queue", actor("admin", username="adm"), queue_key="lib_qc",
        payload={"subject_template_codes": ["content/material/extracted_sample/1.0"],
                 "reason": "first", "display_name": "Library QC"})
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    stuck = client.post("/settings/queues/cfg/", settings_form(
        page, default_next_queue_key="lib_qc")).content.decode()
    assert "Library QC takes none of this queue&#x27;s subjects or outputs" in stuck
    fine = client.post("/settings/queues/cfg/", settings_form(
        page, default_next_queue_key="lib_qc",
        output_template_codes="extracted_sample")).content.decode()
    assert 'id="diff"' in fine and 'id="flow-warnings"' not in fine


def test_an_admin_replaces_a_queue_from_its_settings_page(client, world):
    """The page said to replace the queue to change its templates, and had no way to."""
    from bloomops.execution import selectors

    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    html = page.content.decode()
    assert 'id="replace-form"' in html and f'value="{SPECIMEN}" checked>' in html
    data = form_for(page, "/settings/queues/cfg/replace/", new_queue_key="cfg_v2",
                    reason="takes extracts too")
    data["subject_template_codes"] = [SPECIMEN, "content/material/extracted_sample/1.0"]
    done = client.post("/settings/queues/cfg/replace/", data)
    assert done.status_code == 302 and done["Location"] == "/settings/queues/cfg_v2/"
    assert cfg("cfg_v2")["subject_template_codes"] == data["subject_template_codes"]
    assert "cfg" not in {q["queue_key"] for q in selectors.queues()}
    # refused without a template, and by the engine's words; nothing written
    before = counts()
    bad = client.post("/settings/queues/cfg_v2/replace/",
                      {**form_for(client.get("/settings/queues/cfg_v2/"),
                                  "/settings/queues/cfg_v2/replace/"), "reason": "x"})
    assert bad.status_code == 302 and counts() == before
    assert "at least one template" in " ".join(
        m.message for m in get_messages(bad.wsgi_request))
    # an operator may not
    client.force_login(world["operator"])
    assert client.post("/settings/queues/cfg_v2/replace/", data).status_code == 403


def test_the_default_next_queue_is_offered_from_the_queues_there_are(client, world):
    """The default next queue was a bare text box: a typo only got a warning."""
    make_queue("qc", display_name="QC bench")
    client.force_login(world["admin"])
    html = client.get("/settings/queues/cfg/").content.decode()
    assert 'id="f-default_next_queue_key"' in html and 'list="queue-keys"' in html
    choices = html.split('<datalist id="queue-keys">')[1].split("</datalist>")[0]
    assert '<option value="qc">QC bench</option>' in choices
    assert 'value="cfg"' not in choices  # not itself


def test_the_preview_warns_when_nobody_could_serve_the_queue_any_more(client, world):
    """A capability typed "wetlab.QC" for the people's wetlab.qc was saved without a word,
    and the queue's items then waited for a person nobody was."""
    from bloomops.accounts.models import PersonProfile

    PersonProfile.objects.create(user=world["worker_human"], capabilities=["wetlab.qc"],
                                 site_scope=[], platform_scope=[], assay_scope=[],
                                 max_concurrent_leases=3)
    assert selectors.queue_coverage(cfg())[0].rostered  # someone serves it today
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    typo = client.post("/settings/queues/cfg/", settings_form(
        page, required_worker_capabilities="wetlab.QC")).content.decode()
    assert 'id="flow-warnings"' in typo
    assert "With these settings nobody can serve cfg" in typo and "(1 can now)" in typo
    fine = client.post("/settings/queues/cfg/", settings_form(
        page, required_worker_capabilities="wetlab.qc")).content.decode()
    assert 'id="diff"' in fine and 'id="flow-warnings"' not in fine


def test_a_queue_another_writer_made_shows_its_settings_as_the_pages_read_them(client, world):
    """A queue stored without operator_visible and diagnostics_enabled (Bloom's default them
    to on, as the pages read them) showed both unticked, and a site scope stored as the text
    "main" showed as "m, a, i, n": an edit of its name alone saved four one-letter sites."""
    from bloomops.execution.objects import load, save_props
    from bloomops.tapdb.tenancy import tenant_of

    queue = load(euid=selectors.queue_config("cfg")["euid"], tenant=tenant_of())
    props = {k: v for k, v in queue.props.items()
             if k not in ("operator_visible", "diagnostics_enabled")}
    save_props(queue, {**props, "site_scope": "main"})  # as another writer left it
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    html = page.content.decode()
    for name in ("operator_visible", "diagnostics_enabled"):
        box = html[html.index(f'name="{name}"') - 200:html.index(f'name="{name}"') + 100]
        assert "checked" in box, name
    assert 'name="site_scope" value="main"' in html
    preview = client.post("/settings/queues/cfg/", settings_form(
        page, display_name="Renamed other")).content.decode()
    assert 'data-field="display_name"' in preview
    for unchanged in ("site_scope", "operator_visible", "diagnostics_enabled"):
        assert f'data-field="{unchanged}"' not in preview, unchanged



def test_the_screen_asks_for_the_default_next_queue_alone_or_any(client, world):
    """An empty list of next queues was one field for two settings: none listed meant any
    queue (null), and the default alone ([]) could be set only through the API."""
    client.force_login(world["admin"])
    page = client.get("/settings/queues/cfg/")
    assert cfg().get("next_queue_keys") is None
    preview = client.post("/settings/queues/cfg/", {**settings_form(page),
                                                     "next_queue_keys_none": "on"})
    html = preview.content.decode()
    assert ('<td>any queue</td><td>the default next queue alone</td>' in html)
    client.post("/settings/queues/cfg/save/",
                form_for(preview, "/settings/queues/cfg/save/", reason="flow closed"))
    assert cfg()["next_queue_keys"] == []
    page = client.get("/settings/queues/cfg/")
    box = page.content.decode().split('name="next_queue_keys_none"')[1].split(">")[0]
    assert "checked" in box  # shown as it is stored
    # unticked again: any queue; left ticked, nothing changes
    same = client.post("/settings/queues/cfg/", {**settings_form(page),
                                                  "next_queue_keys_none": "on"})
    assert 'data-field="next_queue_keys"' not in same.content.decode()
    preview = client.post("/settings/queues/cfg/", settings_form(page))
    assert '<td>the default next queue alone</td><td>any queue</td>' in (
        preview.content.decode())


def test_a_replaced_queues_old_address_names_its_successor(client, world):
    """After smith.seq was replaced by smith.sequencing, its page and its settings said "No
    queue smith.seq." and nothing more: a bookmark's reader had no way on."""
    from tests.web_support import signed_in

    act("replace_queue", actor("admin", username="adm"), queue_key="cfg", expected_revision=1,
        payload={"new_queue_key": "cfg2", "reason": "renamed",
                 "subject_template_codes": [SPECIMEN]})
    admin = signed_in(client, world["admin"])
    for old, new in (("/queues/cfg/", "/queues/cfg2/"),
                     ("/settings/queues/cfg/", "/settings/queues/cfg2/")):
        page = admin.get(old)
        said = page.content.decode().split('id="queue-successor">')[1].split("</p>")[0]
        assert page.status_code == 404 and f'href="{new}"' in said and "cfg2" in said
    plain = admin.get("/queues/nope/").content.decode()
    assert "No queue nope." in plain and "queue-successor" not in plain
